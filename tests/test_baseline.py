"""A baseline freezes today's findings: `check --baseline` reports only new ones, whatever
moved or was reformatted around the old ones, and `--write-baseline` after fixing drops the
fixed entries."""

import json
import subprocess
import sys
import textwrap

import pytest

from torchdevice_lint import api
from torchdevice_lint.project import baseline as baselines
from torchdevice_lint.model.findings import FileResult
from torchdevice_lint.model.settings import ConfigError, Settings

OLD = textwrap.dedent(
    """\
    import torch


    class Trainer:
        def fit(self, model, batch):
            model = model.cuda()
            batch = batch.cuda()
            torch.cuda.synchronize()
            return model(batch)


    def load(path):
        return torch.load(path)
    """
)
#: The same code with lines inserted above, functions swapped, calls reformatted and re-quoted,
#: comments added, and one new hazard.
MOVED = textwrap.dedent(
    """\
    \"\"\"Training.\"\"\"
    import os

    import torch


    def load(path):
        # checkpoints are written on the GPU box
        return torch.load(
            path,
        )


    class Trainer:
        def fit(self, model, batch):
            model = (model.cuda())  # a comment
            batch = batch.cuda()
            torch.cuda.synchronize()
            return model(batch)

        def evaluate(self, model, batch):
            return model(batch.cuda())
    """
)


def run(*args, cwd):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import {0}; sys.exit({0}())".format(
        "fix_main" if args[0] == "fix" else "lint_main"
    )]
    argv = list(args[1:]) if args[0] == "fix" else list(args)
    return subprocess.run(command + argv, cwd=cwd, capture_output=True, text=True)


def findings(source, **settings):
    return api.check_source(source, "train.py", Settings(**settings)).findings


def places(source, **settings):
    return [(f.code, f.scope, f.statement) for f in findings(source, **settings)]


# -- what a finding is known by ---------------------------------------------------------------------
def test_a_finding_is_known_by_its_scope_and_its_statement_not_its_line():
    assert places(OLD) == [
        ("TDV101", "Trainer.fit", "model = model.cuda()"),
        ("TDV101", "Trainer.fit", "batch = batch.cuda()"),
        ("TDV301", "Trainer.fit", "torch.cuda.synchronize()"),
        ("TDV501", "load", "return torch.load(path)"),
    ]


def test_reformatting_keeps_the_statement():
    black = 'device = torch.device(\n    "cuda",\n)  # noqa: E501\n'
    plain = "device = torch.device('cuda')\n"
    assert places("import torch\n" + black) == places("import torch\n\n\n" + plain) != []


def test_a_header_stands_for_a_finding_in_it_and_a_default_belongs_to_the_scope_around_its_def():
    source = textwrap.dedent(
        """\
        import torch

        class Net:
            def step(self, x, device="cuda"):
                with torch.cuda.amp.autocast():
                    pass
                try:
                    x.to(device)
                except torch.cuda.OutOfMemoryError:
                    pass
        """
    )
    assert places(source, extend_select=("TDV905",)) == [
        ("TDV102", "Net", "def step(self, x, device='cuda'): ..."),
        ("TDV905", "Net.step", "with torch.cuda.amp.autocast(): ..."),
        ("TDV302", "Net.step", "with torch.cuda.amp.autocast(): ..."),
        ("TDV905", "Net.step", "try: ... except torch.cuda.OutOfMemoryError: ..."),
    ]


def test_a_long_statement_keeps_its_start_and_a_digest():
    source = "import torch\nx = torch.zeros(2).cuda() + " + " + ".join(f"v{i}" for i in range(100)) + "\n"
    (statement,) = [f.statement for f in findings(source)]
    assert statement.startswith("x = torch.zeros(2).cuda() + v0 + v1") and " ... sha256:" in statement
    assert len(statement) <= baselines_max()


def baselines_max():
    from torchdevice_lint.syntax.cst_statement import MAX_STATEMENT

    return MAX_STATEMENT


# -- matching -----------------------------------------------------------------------------------------
def result(source, filename="train.py"):
    return FileResult(filename, findings=api.check_source(source, filename).findings, parsed=True)


def test_identical_statements_in_one_scope_are_counted(tmp_path):
    two = "import torch\nx = x.cuda()\nx = x.cuda()\n"
    path = tmp_path / "baseline.json"
    baselines.write(str(path), [result(two, str(tmp_path / "train.py"))])
    assert '"count": 2' in path.read_text()
    three = two + "x = x.cuda()\n"
    filtered = baselines.filter_results(baselines.load(str(path)), [result(three, str(tmp_path / "train.py"))])
    assert [f.location.row for f in filtered.results[0].findings] == [4]
    assert filtered.baselined == {"TDV101": 2}


def test_the_file_is_sorted_relative_posix_one_finding_a_line_and_stable(tmp_path):
    (tmp_path / "pkg").mkdir()
    results = [
        result("import torch\nm = m.cuda()\n", str(tmp_path / "pkg" / "b.py")),
        result("import torch\ntorch.load(p)\nm = m.cuda()\n", str(tmp_path / "pkg" / "a.py")),
    ]
    path = tmp_path / "ci" / "baseline.json"
    baselines.write(str(path), results)
    text = path.read_text()
    assert text == (
        '{\n  "version": 1,\n  "findings": [\n'
        '    {"file": "../pkg/a.py", "code": "TDV101", "scope": "", "statement": "m = m.cuda()"},\n'
        '    {"file": "../pkg/a.py", "code": "TDV501", "scope": "", "statement": "torch.load(p)"},\n'
        '    {"file": "../pkg/b.py", "code": "TDV101", "scope": "", "statement": "m = m.cuda()"}\n'
        "  ]\n}\n"
    )
    assert json.loads(text)["version"] == 1
    baselines.write(str(path), list(reversed(results)), baselines.load(str(path)))
    assert path.read_text() == text


def test_a_malformed_baseline_is_one_line_of_error(tmp_path):
    path = tmp_path / "baseline.json"
    for text, problem in (("{", "not JSON"), ('{"version": 9, "findings": []}', "not a torchdevice-lint baseline"),
                          ('{"version": 1, "findings": [{"file": 1}]}', "malformed entry")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=problem):
            baselines.load(str(path))


# -- the command line ---------------------------------------------------------------------------------
@pytest.fixture
def project(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "train.py").write_text(OLD)
    (tmp_path / "other.py").write_text("import torch\nstate = torch.load('x.pt')\n")
    return tmp_path


def test_moving_old_code_and_adding_one_hazard_reports_exactly_the_new_one(project):
    written = run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    assert written.returncode == 0, written.stderr
    assert "Wrote 5 findings to the baseline baseline.json." in written.stderr
    assert run("check", "--baseline", "baseline.json", ".", cwd=project).returncode == 0

    (project / "train.py").write_text(MOVED)
    result = run("check", "--baseline", "baseline.json", "--output-format", "concise", ".", cwd=project)
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "train.py:22:22: TDV101 [-] `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    ]
    assert "5 findings baselined in baseline.json." in result.stderr


def test_rewriting_the_baseline_after_fixing_drops_the_fixed_entries(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    before = (project / "baseline.json").read_text()
    (project / "train.py").write_text(OLD.replace("        torch.cuda.synchronize()\n", ""))
    result = run("check", "--baseline", "baseline.json", ".", cwd=project)
    assert result.returncode == 0
    assert "4 findings baselined in baseline.json. 1 fixed since: rewrite it with `--write-baseline baseline.json`" in result.stderr
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    after = (project / "baseline.json").read_text()
    removed = set(before.splitlines()) - set(after.splitlines())
    assert [json.loads(line.rstrip(","))["code"] for line in removed] == ["TDV301"]
    assert set(after.splitlines()) < set(before.splitlines())


def test_a_run_over_part_of_the_project_rewrites_only_that_part(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    (project / "train.py").write_text("import torch\n")
    run("check", "--write-baseline", "baseline.json", "train.py", cwd=project)
    entries = json.loads((project / "baseline.json").read_text())["findings"]
    assert [entry["file"] for entry in entries] == ["other.py"]
    (project / "other.py").unlink()
    run("check", "--write-baseline", "baseline.json", "train.py", cwd=project)
    assert json.loads((project / "baseline.json").read_text())["findings"] == []


def test_statistics_say_how_many_were_baselined(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    (project / "train.py").write_text(MOVED)
    text = run("check", "--baseline", "baseline.json", "--statistics", ".", cwd=project).stdout
    assert text.splitlines() == ["1\tTDV101\t[ ] cuda-method-call", "5 more baselined"]
    rows = json.loads(run("check", "--baseline", "baseline.json", "--statistics", "--output-format", "json", ".", cwd=project).stdout)
    assert {row["code"]: (row["count"], row["baselined"]) for row in rows} == {
        "TDV101": (1, 2), "TDV301": (0, 1), "TDV501": (0, 2),
    }


def test_the_configured_baseline_is_relative_to_its_pyproject_and_no_baseline_turns_it_off(project):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nbaseline = "ci/baseline.json"\n')
    run("check", "--write-baseline", "ci/baseline.json", ".", cwd=project)
    (project / "train.py").write_text(MOVED)
    inside = run("check", "--output-format", "concise", "../train.py", cwd=project / "ci")
    assert inside.returncode == 1 and len(inside.stdout.splitlines()) == 1, inside.stderr
    assert run("check", "--no-baseline", "--output-format", "concise", ".", cwd=project).stdout.count("TDV") == 6


def test_a_missing_baseline_is_a_usage_error(project):
    result = run("check", "--baseline", "nowhere.json", ".", cwd=project)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "torchdevice-lint: error: baseline nowhere.json: cannot read it: No such file or directory"
    ]


def test_cached_results_match_the_baseline_as_fresh_ones(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    (project / "train.py").write_text(MOVED)
    first = run("check", "--baseline", "baseline.json", "--output-format", "concise", ".", cwd=project)
    cached = run("check", "--baseline", "baseline.json", "--output-format", "concise", ".", cwd=project)
    assert (project / ".torchdevice_cache").is_dir()
    assert cached.stdout == first.stdout and len(first.stdout.splitlines()) == 1


def test_fix_exits_0_when_only_baselined_findings_remain(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    result = run("fix", "--baseline", "baseline.json", ".", cwd=project)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "baselined in baseline.json" in result.stderr
    assert run("fix", ".", cwd=project).returncode == 1


def test_check_fix_reports_what_remains_less_the_baseline(project):
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    (project / "train.py").write_text(MOVED)
    result = run("check", "--fix", "--baseline", "baseline.json", "--output-format", "concise", ".", cwd=project)
    assert result.returncode == 1, result.stderr
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines()] == ["TDV101"]
    assert "return model(batch.cuda())" in (project / "train.py").read_text().splitlines()[int(result.stdout.split(":")[1]) - 1]
    assert "2 findings baselined in baseline.json." in result.stderr


def test_fix_refuses_an_unreadable_baseline_before_writing_any_file(project):
    (project / "baseline.json").write_text("{")
    result = run("fix", "--unsafe-fixes", "--baseline", "baseline.json", ".", cwd=project)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "torchdevice-fix: error: baseline baseline.json: not JSON: Expecting property name enclosed in double quotes:"
        " line 1 column 2 (char 1)"
    ]
    assert (project / "train.py").read_text() == OLD


def notebook(*cells):
    """An nbformat 4 notebook: a string is a code cell, a dict any other cell."""
    return json.dumps({
        "cells": [
            {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": cell.splitlines(True)}
            if isinstance(cell, str) else cell
            for cell in cells
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }, indent=1)


def test_a_notebook_keeps_its_findings_matched_when_cells_are_added_and_split(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")
    fit = "def fit(model, batch):\n    return model.cuda()(batch.cuda())\n"
    (tmp_path / "train.ipynb").write_text(notebook("import torch", "state = torch.load('w.pt')", fit))
    assert "Wrote 3 findings" in run("check", "--write-baseline", "baseline.json", ".", cwd=tmp_path).stderr
    entries = json.loads((tmp_path / "baseline.json").read_text())["findings"]
    assert {(entry["file"], entry["scope"]) for entry in entries} == {("train.ipynb", ""), ("train.ipynb", "fit")}

    title = {"cell_type": "markdown", "metadata": {}, "source": ["# Training\n"]}
    (tmp_path / "train.ipynb").write_text(notebook(
        title, "!pip install torch", "import torch\n%matplotlib inline", "state = torch.load(\n    'w.pt',\n)",
        "\n\n" + fit, "x = torch.zeros(2).cuda()",
    ))
    for _ in range(2):  # fresh, then from the cache
        result = run("check", "--baseline", "baseline.json", "--output-format", "concise", ".", cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        assert [line.split(" [")[0] for line in result.stdout.splitlines()] == ["train.ipynb:cell 6:1:5: TDV101"]
        assert "3 findings baselined in baseline.json." in result.stderr


def test_flake8_reads_the_configured_baseline_and_its_own_option(project):
    pytest.importorskip("flake8")
    run("check", "--write-baseline", "baseline.json", ".", cwd=project)
    (project / "train.py").write_text(MOVED)

    def flake8(*args):
        completed = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDV", *args, "."],
                                   cwd=project, capture_output=True, text=True)
        return completed.stdout.splitlines()

    assert len(flake8()) == 6
    assert [line.split()[0] for line in flake8("--torchdevice-baseline", "baseline.json")] == ["./train.py:22:22:"]
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nbaseline = "baseline.json"\n')
    assert [line.split()[0] for line in flake8()] == ["./train.py:22:22:"]
    (project / "baseline.json").write_text("{")
    assert all("TDV000 torchdevice-lint cannot check this file: baseline" in line for line in flake8())
