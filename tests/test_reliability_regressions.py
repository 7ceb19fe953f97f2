"""Regression tests for fixer and rule bugs found by the property tests and the corpus run."""

import libcst as cst
import pytest

from torchdevice_lint import api
from torchdevice_lint.app.runner import fix_file
from torchdevice_lint.engine.fixer import UnreproducibleSource, fix_source


def fixed(source, unsafe=True):
    return fix_source(api.engine(), "example.py", source, unsafe).source


def test_cr_only_file_keeps_its_final_newline():
    # LibCST's code generation drops the last "\r" of a CR-only file; the fixer restores it.
    assert fixed("import torch\rnet.load_state_dict(torch.load(p))\r\r") == 'import torch\rnet.load_state_dict(torch.load(p, map_location="cpu"))\r\r'


def test_json_edits_of_a_cr_only_file_keep_its_final_newline():
    result = api.engine().check_source("example.py", "import torch\rnet.load_state_dict(torch.load(p))\r", with_edits=True)
    [edit] = result.findings[0].fix.edits
    assert edit.content == 'net.load_state_dict(torch.load(p, map_location="cpu"))\r'


UNREPRODUCIBLE = "import torch\nw = torch.load(p)\n\n\t   #c\r\n  \t\t#end"


def test_file_libcst_cannot_reproduce_is_refused_not_rewritten(tmp_path):
    # LibCST drops the "#c" comment line here (mixed line endings, no final newline).
    assert cst.parse_module(UNREPRODUCIBLE).code != UNREPRODUCIBLE
    with pytest.raises(UnreproducibleSource):
        fix_source(api.engine(), "example.py", UNREPRODUCIBLE, unsafe=True)
    target = tmp_path / "example.py"
    target.write_bytes(UNREPRODUCIBLE.encode())
    result = fix_file(api.engine(), str(target), unsafe=True, write=True)
    assert "not rewritten" in result.error.message
    assert target.read_bytes() == UNREPRODUCIBLE.encode()


def test_check_of_a_file_libcst_cannot_reproduce_offers_no_edits():
    result = api.engine().check_source("example.py", UNREPRODUCIBLE, with_edits=True)
    assert [f.code for f in result.findings] == ["TDV501"]
    assert result.findings[0].fix.edits == []


@pytest.mark.parametrize(
    "call, expected",
    [
        ("torch.load(\n    path\n)", 'torch.load(\n    path,\n    map_location="cpu"\n)'),
        ("torch.load('a'\n    )", "torch.load('a', map_location=\"cpu\"\n    )"),
        ("torch.load(  # why\n    path,  # the file\n)", 'torch.load(  # why\n    path,  # the file\n    map_location="cpu",\n)'),
    ],
    ids=["one-argument-a-line", "closing-paren-on-its-own-line", "comments-stay-put"],
)
def test_map_location_fix_keeps_the_call_layout(call, expected):
    # The state goes into load_state_dict: the safe fix loads it to the CPU.
    # It used to leave "path, " with a trailing space and put the new argument at column 0.
    assert fixed(f"import torch\nnet.load_state_dict({call})\n", unsafe=False) == f"import torch\nnet.load_state_dict({expected})\n"


# A form feed alone on a line (section breaks in older code) is no line break for Python, but
# str.splitlines breaks there: code frames, noqa comments and fix edits were one row off after it.
FORM_FEED = 'import torch\n\x0c\ny = torch.ones(2).cuda()  # noqa: TDV101\nz = net.load_state_dict(torch.load("a.pt"))\n'


def test_noqa_after_a_form_feed_line_suppresses_its_own_line():
    result = api.engine().check_source("example.py", FORM_FEED, with_edits=True)
    assert [(f.code, f.location.row) for f in result.findings] == [("TDV501", 4)]


def test_fix_edits_after_a_form_feed_line_replace_the_reported_row():
    result = api.engine().check_source("example.py", FORM_FEED, with_edits=True)
    [edit] = result.findings[0].fix.edits
    assert (edit.location.row, edit.end_location.row) == (4, 5)
    assert edit.content == 'z = net.load_state_dict(torch.load("a.pt", map_location="cpu"))\n'


def test_code_frame_after_a_form_feed_line_shows_the_reported_line():
    from torchdevice_lint.app.output import render

    result = api.engine().check_source("example.py", FORM_FEED)
    frame = render("full", [result], {"example.py": FORM_FEED})
    assert '4 | z = net.load_state_dict(torch.load("a.pt"))' in frame


def test_physical_lines_break_where_python_does():
    from torchdevice_lint.syntax.lines import physical_lines

    text = "a\x0cb\r\nc\u2028d\re\n\nf"
    assert physical_lines(text) == ["a\x0cb", "c\u2028d", "e", "", "f"]
    assert "".join(physical_lines(text, keepends=True)) == text
    assert physical_lines("") == [] and physical_lines("x\n") == ["x"]
