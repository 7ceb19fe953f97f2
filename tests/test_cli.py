"""The command-line front ends, run as a user runs them (in a subprocess)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
HAZARDS = (DATA / "hazards.py").read_text()


def run(*args, cwd=None, stdin=None):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import {0}; sys.exit({0}())".format(
        "fix_main" if args[0] == "fix" else "lint_main"
    )]
    argv = list(args[1:]) if args[0] == "fix" else list(args)
    return subprocess.run(command + argv, cwd=cwd, input=stdin, capture_output=True, text=True)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "hazards.py").write_text(HAZARDS)
    (tmp_path / "pkg" / "clean.py").write_text("import torch\nx = torch.ones(2)\n")
    return tmp_path


def test_check_reports_findings_and_exits_1(project):
    result = run("check", "--output-format", "concise", "pkg", cwd=project)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("pkg/hazards.py:") for line in lines)
    assert "pkg/hazards.py:17:16: TDV201" in result.stdout
    assert "Found" in result.stderr


def test_paths_found_under_dot_are_printed_without_prefix(project):
    result = run("check", "--output-format", "concise", ".", cwd=project / "pkg")
    assert result.stdout.splitlines()[0].startswith("hazards.py:")


def test_check_clean_file_exits_0(project):
    result = run("check", "pkg/clean.py", cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_json_output_follows_the_contract(project):
    result = run("check", "--output-format", "json", "pkg", cwd=project)
    items = json.loads(result.stdout)
    assert result.returncode == 1
    assert {"code", "name", "message", "filename", "location", "end_location", "fix"} <= set(items[0])
    first = next(i for i in items if i["code"] == "TDV301" and i["location"]["row"] == 29)
    assert first["location"] == {"row": 29, "column": 5}
    assert first["end_location"] == {"row": 29, "column": 29}
    assert first["fix"]["applicability"] == "safe"
    edit = first["fix"]["edits"][0]
    assert edit["content"] == "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
    assert edit["location"] == {"row": 29, "column": 1} and edit["end_location"] == {"row": 30, "column": 1}


def test_select_ignore_and_extend_select(project):
    only = run("check", "--output-format", "concise", "--select", "TDV5", "pkg", cwd=project)
    assert {line.split()[1] for line in only.stdout.splitlines()} == {"TDV501"}
    ignored = run("check", "--output-format", "concise", "--ignore", "TDV1,TDV2,TDV3", "pkg", cwd=project)
    assert {line.split()[1] for line in ignored.stdout.splitlines()} == {"TDV501"}
    specific = run("check", "--output-format", "concise", "--ignore", "TDV1", "--select", "TDV101", "pkg", cwd=project)
    assert {line.split()[1] for line in specific.stdout.splitlines()} == {"TDV101"}


def test_unknown_code_is_a_usage_error(project):
    result = run("check", "--select", "XYZ1", "pkg", cwd=project)
    assert result.returncode == 2
    assert "unknown rule code or prefix 'XYZ1'" in result.stderr


def test_syntax_error_is_one_line_and_other_files_are_still_checked(project):
    # Files that cannot contain a hazard are not parsed (the pre-filter); this one can.
    (project / "pkg" / "broken.py").write_text("import torch\ndef f(:\n    x.cuda()\n")
    result = run("check", "--output-format", "concise", "pkg", cwd=project)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "broken.py" in line]
    assert errors == ["pkg/broken.py: error: syntax error at 2:7: invalid syntax"]
    assert "pkg/hazards.py" in result.stdout


def test_missing_path_is_reported(project):
    result = run("check", "nope.py", "pkg/clean.py", cwd=project)
    assert result.returncode == 2
    assert "nope.py: error: no such file or directory" in result.stderr


def test_exclude_patterns(project):
    result = run("check", "--extend-exclude", "hazards.py", "pkg", cwd=project)
    assert result.returncode == 0, result.stdout


def test_pyproject_configuration(project):
    (project / "pyproject.toml").write_text(
        '[tool.torchdevice-lint]\nignore = ["TDV5"]\nper-file-ignores = { "pkg/hazards.py" = ["TDV1"] }\n'
    )
    result = run("check", "--output-format", "concise", "pkg", cwd=project)
    codes = {line.split()[1] for line in result.stdout.splitlines()}
    assert codes and not any(c.startswith(("TDV1", "TDV5")) for c in codes)


def test_pyproject_unknown_key_is_rejected(project):
    (project / "pyproject.toml").write_text("[tool.torchdevice-lint]\nselct = ['TDV1']\n")
    result = run("check", "pkg", cwd=project)
    assert result.returncode == 2
    assert "unknown key 'selct'" in result.stderr


def test_rule_page(project):
    result = run("rule", "TDV101", cwd=project)
    assert result.returncode == 0
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Fix safety"):
        assert heading in result.stdout
    assert run("rule", "TDV999", cwd=project).returncode == 2


def test_fix_diff_writes_nothing(project):
    before = (project / "pkg" / "hazards.py").read_text()
    result = run("fix", "--diff", "pkg", cwd=project)
    assert result.returncode == 1
    assert result.stdout.startswith("--- a/pkg/hazards.py")
    assert (project / "pkg" / "hazards.py").read_text() == before


def test_fix_check_exit_codes(project):
    assert run("fix", "--check", "pkg/hazards.py", cwd=project).returncode == 1
    assert run("fix", "--check", "pkg/clean.py", cwd=project).returncode == 0


def test_fix_applies_only_safe_fixes_by_default(project):
    result = run("fix", "pkg", cwd=project)
    fixed = (project / "pkg" / "hazards.py").read_text()
    assert "torch.load(path, map_location=lambda storage, location:" in fixed  # TDV501 is safe
    assert ".cuda()" in fixed  # TDV101 is unsafe
    assert "fixable with --unsafe-fixes" in result.stderr
    assert result.returncode == 1


def test_fix_leaves_clean_files_untouched(project):
    clean = project / "pkg" / "clean.py"
    os.utime(clean, (1_000_000, 1_000_000))
    run("fix", "--unsafe-fixes", "pkg", cwd=project)
    assert clean.stat().st_mtime == 1_000_000


def test_stdin_round_trip(project):
    # run in the temporary project: the target torch comes from the project around the file
    checked = run("check", "--output-format", "concise", "--stdin-filename", "model.py", "-", stdin="import torch\nx = torch.ones(1).cuda()\n", cwd=project)
    assert checked.returncode == 1
    assert checked.stdout.startswith("model.py:2:5: TDV101")
    fixed = run("fix", "--unsafe-fixes", "-", stdin="import torch\nx = torch.ones(1).cuda()\n", cwd=project)
    assert fixed.stdout == (
        'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
        "x = torch.ones(1).to(device)\n"
    )


def test_a_latin1_files_code_frame_shows_its_characters_with_the_caret_under_the_finding(tmp_path):
    """The frame is decoded as the file was for checking (its PEP 263 declaration), so ``é`` is
    one character and the caret stands under ``torch.zeros(2).cuda()``."""
    (tmp_path / "lat.py").write_bytes(b'# -*- coding: latin-1 -*-\nimport torch\ns = "caf\xe9"; x = torch.zeros(2).cuda()\n')
    done = subprocess.run(
        [sys.executable, "-m", "torchdevice_lint", "check", "--no-cache", "--output-format", "full", "lat.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    lines = done.stdout.splitlines()
    code = next(line for line in lines if line.startswith("3 |"))
    caret = lines[lines.index(code) + 1]
    assert code == '3 | s = "café"; x = torch.zeros(2).cuda()'
    assert caret.index("^") == code.index("torch.zeros") and caret.count("^") == len("torch.zeros(2).cuda()")


def test_a_file_declaring_a_codec_that_only_backports_syntax_is_read_as_utf8(tmp_path):
    # twni2016/pomdp-baselines@28cb5dd torchkit/pytorch_utils.py:1; an unknown codec stays an error
    (tmp_path / "fs.py").write_text('# -*- coding: future_fstrings -*-\nimport torch\nx = torch.zeros(1).cuda()\nprint(f"é {x}")\n')
    (tmp_path / "odd.py").write_text("# -*- coding: no_such_codec -*-\nx = 1\n")
    done = subprocess.run(
        [sys.executable, "-m", "torchdevice_lint", "check", "--no-cache", "--output-format", "concise", "fs.py", "odd.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert "fs.py:3:5: TDV101" in done.stdout
    assert "odd.py: error: cannot decode file: unknown encoding: no_such_codec" in done.stderr
