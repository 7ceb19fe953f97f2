"""The language server keeps state between edits (its engines, the project model its buffers
update): after any series of edits its findings are those of a full analysis of the text alone,
and what it keeps does not grow with the number of edits."""

import random
from pathlib import Path

import libcst as cst
import pytest

from torchdevice_lint import api
from torchdevice_lint.app.editor import Projects, check_buffer, check_notebook
from torchdevice_lint.project.model import Projects as ProjectModels
from torchdevice_lint.syntax import cst_walk
from torchdevice_lint.syntax.cst_reparse import Reparser

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


#: Lines typed anywhere, at any indentation: across statement boundaries, into and out of blocks,
#: comments a block before may claim, brackets and strings left open, a new function.
RESHAPING = [
    "", "    ", "# a comment", "    # an indented comment", "        # deeper", "import os", "from torch import nn",
    "import torch as th", "device = 'cuda'", "def added(x):\n    return x.cuda()", "class Added:\n    pass",
    "if torch.cuda.is_available():", "else:", "x = (", "y = 1 + \\", '"""', "    return 1", "@decorated",
    "async def later():\n    await x", "torch.cuda.synchronize()  # noqa: TDV301",
]


def reshaped(text: str, chance: random.Random) -> str:
    """One edit at a random line: a line typed (its own indentation or another), the line
    deleted, duplicated, indented or dedented, or a comment appended; the text may stop parsing."""
    lines = text.splitlines(keepends=True) or ["\n"]
    row = chance.randrange(len(lines))
    newline = "\r\n" if lines[row].endswith("\r\n") else "\n"
    indent = chance.choice(["", "    ", "        ", lines[row][: len(lines[row]) - len(lines[row].lstrip())]])
    kind = chance.randrange(6)
    if kind == 0:
        typed = "".join(indent + part + newline for part in chance.choice(RESHAPING + TYPED).split("\n"))
        lines.insert(row, typed.replace(" " * 4 + newline, newline) if not typed.strip() else typed)
    elif kind == 1:
        del lines[row]
    elif kind == 2:
        lines.insert(row, lines[row])
    elif kind == 3:
        lines[row] = "    " + lines[row]
    elif kind == 4:
        lines[row] = lines[row][4:] if lines[row].startswith("    ") else lines[row].lstrip(" ")
    else:
        lines[row] = lines[row].rstrip("\r\n") + f"  # {chance.randrange(100)}" + newline
    return "".join(lines)


def joined_fixtures(newline: str = "\n") -> str:
    """Every fixture, one after another: one buffer of many functions, classes and imports."""
    return "".join((FIXTURES / name).read_text() + "\n" for name in sorted(p.name for p in FIXTURES.glob("*.py"))).replace("\n", newline)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_kept_module_equals_a_fresh_parse_after_edits_across_statements(newline):
    chance, reparser, good, spliced, broken = random.Random(7), Reparser(), joined_fixtures(newline), 0, 0
    for _ in range(100):
        text = reshaped(good, chance)  # an edit that broke the text is undone by the next
        try:
            expected = cst.parse_module(text)
        except cst.ParserSyntaxError:
            broken += 1
            with pytest.raises(cst.ParserSyntaxError):
                reparser.parse(text)
            continue
        before, good = reparser.module, text
        module = reparser.parse(text)
        assert module.deep_equals(expected), text
        assert cst_walk.nodes_of(module, cst.Call, cst.Assign) == walked(module, {cst.Call, cst.Assign})
        spliced += before is not None and any(kept is new for kept, new in zip(before.body, module.body))
    assert spliced > 40 and broken > 5  # most edits re-parsed a part; some left the text unparsable


class Collected:
    def __init__(self, node_types) -> None:
        self.node_types, self.found = node_types, []

    def on_visit(self, node) -> bool:
        if type(node) in self.node_types:
            self.found.append(node)
        return True

    def on_leave(self, node) -> None:
        return None


def walked(module, node_types) -> list:
    """The nodes of these types, found by walking the whole module."""
    collected = Collected(node_types)
    cst_walk.walk(module, collected)
    return collected.found


def test_what_a_buffer_keeps_between_edits_is_one_module_and_goes_with_it():
    registered = len(cst_walk._KEPT)
    reparser, chance, text = Reparser(), random.Random(3), joined_fixtures()
    for _ in range(30):
        text = reshaped(text, chance) if chance.random() < 0.5 else text + f"# {chance.random()}\n"
        try:
            reparser.parse(text)
        except cst.ParserSyntaxError:
            continue
        cst_walk.nodes_of(reparser.module, cst.Call)
        assert len(cst_walk._KEPT) == registered + 1
        assert set(reparser.statement_nodes.found) <= {id(statement) for statement in reparser.module.body}
    del reparser
    assert len(cst_walk._KEPT) == registered


def test_findings_after_edits_across_statements_equal_a_full_analysis(tmp_path):
    """The buffer's module is kept from edit to edit, as the server keeps it."""
    (tmp_path / "pyproject.toml").write_text("")
    path = str(tmp_path / "train.py")
    chance, good, projects, checked, analysed = random.Random(31), joined_fixtures(), Projects(), None, 0
    for _ in range(30):
        text = reshaped(good, chance)
        engine, _ = projects.engine_for(path)
        checked = check_buffer(engine, "file://open", path, text, checked)
        found = summary(checked)
        assert found == full_analysis(path, text), text
        analysed += found[0] is None and bool(found[1])
        good = text if found[0] is None else good
    assert analysed > 12


def test_a_notebook_keeps_its_module_between_cell_edits(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    path = str(tmp_path / "train.ipynb")
    chance, projects, notebook = random.Random(5), Projects(), None
    cells = [(number, f"cell{number}", (FIXTURES / name).read_text())
             for number, name in enumerate(["amp_training.py", "train_mlp.py", "weighted_loss.py", "event_timing.py"], start=1)]
    for _ in range(20):
        number, uri, source = cells[chance.randrange(len(cells))]
        cells[number - 1] = (number, uri, reshaped(source, chance))
        engine, _ = projects.engine_for(path)
        notebook = check_notebook(engine, "file://open", path, cells, notebook)
        fresh_engine, _ = Projects().engine_for(path)
        assert summary(notebook.checked) == summary(check_notebook(fresh_engine, "file://fresh", path, cells).checked)


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
