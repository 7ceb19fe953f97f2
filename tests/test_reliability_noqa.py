"""Directives are comments (issue 30): text that looks like one inside a string literal hides
nothing, and ``--add-noqa`` never writes into such a string."""

import json

import pytest

from torchdevice_lint import cli


@pytest.fixture
def codes(tmp_path, capsys):
    """The (code, row) of each finding ``check`` reports in a file holding ``source``."""

    def check(source):
        script = tmp_path / "example.py"
        script.write_bytes(source.encode())
        cli.lint_main(["check", "--no-cache", "--output-format", "json", str(script)])
        return [(f["code"], f["location"]["row"]) for f in json.loads(capsys.readouterr().out)]

    return check


@pytest.mark.parametrize("string", ['"# noqa"', "'x  # noqa: TDV101'", '"""# noqa"""'])
def test_noqa_inside_a_string_suppresses_nothing(codes, string):
    assert codes(f"import torch\nx = torch.ones(2).cuda(); s = {string}\n") == [("TDV101", 2)]


@pytest.mark.parametrize("directive", ["# ruff: noqa", "# torchdevice-lint: noqa", "# flake8: noqa: TDV101"])
def test_a_file_directive_inside_a_triple_quoted_string_does_not_skip_the_file(codes, directive):
    source = f'import torch\nHELP = """\n{directive}\n"""\nx = torch.ones(2).cuda()\n'
    assert codes(source) == [("TDV101", 5)]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_comment_directives_still_work_whatever_the_line_endings(codes, ending):
    line = ["import torch", "x = torch.ones(2).cuda()  # noqa: TDV101", "y = torch.ones(2).cuda()"]
    assert codes(ending.join(line) + ending) == [("TDV101", 3)]
    whole = ["import torch", "# torchdevice-lint: noqa", "x = torch.ones(2).cuda()"]
    assert codes(ending.join(whole) + ending) == []


def test_add_noqa_leaves_a_string_that_looks_like_a_directive_alone(tmp_path, capsys):
    script = tmp_path / "a.py"
    script.write_text('import torch\nx = torch.ones(2).cuda(); s = "# noqa: TDV5"\n')
    assert cli.lint_main(["check", "--no-cache", "--add-noqa", str(script)]) == 0
    assert script.read_text() == 'import torch\nx = torch.ones(2).cuda(); s = "# noqa: TDV5"  # noqa: TDV101\n'
    capsys.readouterr()
    assert cli.lint_main(["check", "--no-cache", str(script)]) == 0
