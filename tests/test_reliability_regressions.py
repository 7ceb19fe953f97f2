"""Regression tests for fixer and rule bugs found by the property tests and the corpus run."""

from torchdevice_lint.core.engine import Engine
from torchdevice_lint.core.fixer import fix_source


def fixed(source, unsafe=True):
    return fix_source(Engine(), "example.py", source, unsafe).source


def test_cr_only_file_keeps_its_final_newline():
    # LibCST's code generation drops the last "\r" of a CR-only file; the fixer restores it.
    assert fixed("import torch\rw = torch.load(p)\r\r") == 'import torch\rw = torch.load(p, map_location="cpu")\r\r'


def test_json_edits_of_a_cr_only_file_keep_its_final_newline():
    result = Engine().check_source("example.py", "import torch\rw = torch.load(p)\r", with_edits=True)
    [edit] = result.findings[0].fix.edits
    assert edit.content == 'w = torch.load(p, map_location="cpu")\r'
