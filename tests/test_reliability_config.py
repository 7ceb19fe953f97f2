"""Configuration that cannot be used is one line naming it, exit 2, before any file is read or
written (issue 30): a pyproject.toml that is not TOML the tool can read, glob patterns that are
no patterns, a time limit the OS cannot set, a selection that selects nothing."""

import pytest

from torchdevice_lint import cli

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"

UNUSABLE = {
    "not UTF-8": (b"[tool.torchdevice-lint]\n# caf\xe9\n", "not UTF-8"),
    "arrays nested 5,000 deep": (
        b"[tool.torchdevice-lint]\nselect = " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested too deeply"
    ),
    "bad range in exclude": (b'[tool.torchdevice-lint]\nexclude = ["[z-a]"]\n', "exclude: '[z-a]' is not a valid glob pattern"),
    "bad range in per-file-ignores": (
        b'[tool.torchdevice-lint]\nper-file-ignores = {"[z-a].py" = ["TDV1"]}\n',
        "per-file-ignores: '[z-a].py' is not a valid glob pattern",
    ),
    "per-file-timeout = inf": (b"[tool.torchdevice-lint]\nper-file-timeout = inf\n", "per-file-timeout must be"),
    "per-file-timeout = 1e308": (b"[tool.torchdevice-lint]\nper-file-timeout = 1e308\n", "per-file-timeout must be"),
    'select = [""]': (b'[tool.torchdevice-lint]\nselect = [""]\n', "select: empty rule code"),
    "select = []": (b"[tool.torchdevice-lint]\nselect = []\n", "select must name at least one rule code"),
}


@pytest.mark.parametrize("pyproject, message", UNUSABLE.values(), ids=UNUSABLE.keys())
@pytest.mark.parametrize("main", [cli.lint_main, cli.fix_main], ids=["check", "fix"])
def test_unusable_configuration_is_one_line_exit_2_and_nothing_written(tmp_path, monkeypatch, capsys, main, pyproject, message):
    (tmp_path / "pyproject.toml").write_bytes(pyproject)
    (tmp_path / "a.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    code = main((["check"] if main is cli.lint_main else ["--unsafe-fixes"]) + ["."])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    [line] = err.splitlines()  # 0.1.3: a traceback and "internal error", or an error per file
    assert "pyproject.toml" in line and message in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.py", "pyproject.toml"]  # no cache either
    assert (tmp_path / "a.py").read_text() == HAZARD


@pytest.mark.parametrize(
    "option, message",
    [
        (["--select", ","], "select must name at least one rule code"),
        (["--select", ""], "select must name at least one rule code"),
        (["--exclude", "[z-a]"], "exclude: '[z-a]' is not a valid glob pattern"),
        (["--extend-exclude", "[z-a]"], "extend-exclude: '[z-a]' is not a valid glob pattern"),
    ],
)
def test_unusable_options_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, option, message):
    (tmp_path / "a.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    code = cli.lint_main(["check", "--no-cache", *option, "."])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")  # 0.1.3: "All checks passed" with --select ,
    [line] = err.splitlines()
    assert line.startswith("torchdevice-lint: error: ") and message in line


def test_a_line_of_an_ignore_file_that_is_no_pattern_matches_nothing_as_in_git(tmp_path, monkeypatch, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("[z-a]\nskipped.py\n")
    (tmp_path / "a.py").write_text(HAZARD)
    (tmp_path / "skipped.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    code = cli.lint_main(["check", "--no-cache", "--output-format", "concise", "."])
    out, err = capsys.readouterr()
    assert code == 1 and "error" not in err  # 0.1.3: internal error
    assert "a.py:2:5: TDV101" in out and "skipped.py" not in out
