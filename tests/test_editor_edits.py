"""The language server keeps state between edits (its engines, the project model its buffers
update): after any series of edits its findings are those of a full analysis of the text alone,
and what it keeps does not grow with the number of edits."""

import random
from pathlib import Path

from torchdevice_lint import api
from torchdevice_lint.app.editor import Projects, check_buffer
from torchdevice_lint.project.model import Projects as ProjectModels

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: Lines an editing session types: hazards, a guard, a binding, an import, a noqa, a comment.
TYPED = [
    "x = torch.zeros(3).cuda()",
    "model = model.cuda() if torch.cuda.is_available() else model",
    'device = torch.device("cuda")',
    'state = torch.load("weights.pt")',
    "import torch",
    "torch.cuda.synchronize()  # noqa: TDV301",
    "y = x.to('cuda')",
    "# a comment",
    "pass",
]


def edited(text: str, chance: random.Random) -> str:
    """One edit at a random line of a one-line statement (kept parsable): a statement typed
    there at its indentation, the line deleted, duplicated, or a comment appended to it."""
    lines = text.splitlines(keepends=True)
    simple = [row for row, line in enumerate(lines) if line.strip() and not line.rstrip().endswith((":", "(", "[", "{", ",", "\\"))
              and line.count("(") == line.count(")") and '"""' not in line]
    row = chance.choice(simple)
    indent = lines[row][: len(lines[row]) - len(lines[row].lstrip())]
    kind = chance.randrange(4)
    if kind == 0:
        lines.insert(row, indent + chance.choice(TYPED) + "\n")
    elif kind == 1:
        lines[row] = indent + "pass\n"
    elif kind == 2:
        lines.insert(row, lines[row])
    else:
        lines[row] = lines[row].rstrip("\n") + f"  # {chance.randrange(100)}\n"
    return "".join(lines)


def summary(checked):
    return checked.error, [(finding.code, finding.location, finding.end_location, finding.message, finding.fix)
                           for _, finding in checked.findings]


def full_analysis(path: str, text: str):
    """A fresh engine and project model, the buffer's text standing for its file."""
    projects = Projects()
    engine, _ = projects.engine_for(path)
    return summary(check_buffer(engine, "file://fresh", path, text))


def test_findings_after_random_edits_equal_a_full_analysis(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    path = str(tmp_path / "train.py")
    chance, analysed = random.Random(31), 0
    for fixture in ("amp_training.py", "load_gpu_checkpoint.py", "device_setup_conv.py"):
        text = (FIXTURES / fixture).read_text()
        projects = Projects()
        for _ in range(25):
            text = edited(text, chance)
            engine, _ = projects.engine_for(path)
            found = summary(check_buffer(engine, "file://open", path, text))
            assert found == full_analysis(path, text), text
            analysed += found[0] is None and bool(found[1])
    assert analysed > 60  # the edits kept the buffers parsable, with findings to compare


def test_the_project_model_keeps_nothing_per_edit(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "options.py").write_text("parser.add_argument('--cuda', default=True)\n")
    path = str(tmp_path / "train.py")
    models = ProjectModels()
    engine = api.engine(projects=models)
    text = (FIXTURES / "amp_training.py").read_text()
    for number in range(50):
        text += f"# edit {number}\n"
        check_buffer(engine, "file://open", path, text)
    assert len(models.cache.by_hash) == 1  # options.py; the buffer's facts replace each other
