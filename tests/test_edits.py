"""A finding's edits (engine/edits.py, the one producer JSON, SARIF, rdjson and the language server
read) turn the file into exactly what applying that one fix to the whole module gives."""

import pytest

from torchdevice_lint import api
from torchdevice_lint.engine.edits import FileEdits, apply_edits
from torchdevice_lint.engine.fixer import apply_fixes, lost_suffix
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.rules import all_rules

ALL = Settings(select=("ALL",), extend_select=("TDV9",), unsafe_fixes=True)


def whole_module_fix(analysis, raw) -> str:
    return apply_fixes(analysis, [raw]) + lost_suffix(analysis)


def every_fix(source: str):
    """(analysis, finding) for each finding of ``source`` whose fix changes code."""
    analysis = api.engine(ALL).analyze("example.py", source)
    if analysis is None:
        return []
    return [(analysis, raw) for raw in analysis.findings if raw.fix and (raw.fix.replacements or raw.fix.needs_device_binding)]


def assert_edits_match_the_whole_module_fix(source: str) -> int:
    checked = 0
    for analysis, raw in every_fix(source):
        edits = FileEdits(analysis).of(raw)
        assert edits is not None
        assert apply_edits(source, edits) == whole_module_fix(analysis, raw)
        checked += 1
    return checked


EXAMPLES = [
    pytest.param(example.code, id=f"{rule.code}-{index}")
    for rule in all_rules()
    for index, example in enumerate(rule.invalid)
    if example.config is None
]


@pytest.mark.parametrize("source", EXAMPLES)
def test_every_rule_examples_edits_give_its_whole_module_fix(source):
    assert_edits_match_the_whole_module_fix(source)


def test_a_method_deep_in_a_class_is_fixed_by_its_own_lines():
    methods = "".join(f"    def m{n}(self, x):\n        return x + {n}\n\n" for n in range(50))
    source = f"import torch\n\n\nclass Big:\n{methods}    def last(self, x):\n        return x.cuda()\n"
    (analysis, raw), = every_fix(source)
    edits = FileEdits(analysis).of(raw)
    assert [edit.content for edit in edits][-1] == "        return x.to(device)\n"
    assert apply_edits(source, edits) == whole_module_fix(analysis, raw)


def test_the_binding_and_an_import_the_file_lacks_are_added_above_the_fix():
    source = '"""Doc."""\nfrom torch import nn\nimport os\n\n\ndef f(x):\n    return x.cuda()\n'
    assert assert_edits_match_the_whole_module_fix(source) == 1


def test_an_import_a_fix_frees_is_kept_while_other_lines_use_it():
    source = (
        "import torch\nfrom torch.cuda.amp import autocast\n\n"
        "def f(x):\n    with autocast():\n        return x\n\n"
        "def g(x):\n    with autocast():\n        return x\n"
    )
    assert assert_edits_match_the_whole_module_fix(source) == 2


def test_an_import_a_fix_frees_is_removed_when_no_other_line_uses_it():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\n\nscaler = GradScaler()\n"
    assert assert_edits_match_the_whole_module_fix(source) == 1


def test_carriage_return_line_endings_keep_their_edits():
    source = "import torch\r\r\rdef f(x):\r    return x.cuda()\r"
    assert assert_edits_match_the_whole_module_fix(source) == 1


def test_the_json_edits_are_the_producers():
    source = "import torch\nx = torch.ones(2).cuda()\n"
    result = api.check_source(source, "t.py", ALL, with_edits=True)
    (finding,) = result.findings
    assert apply_edits(source, finding.fix.edits) == api.fix_source(source, "t.py", ALL, unsafe=True).source
