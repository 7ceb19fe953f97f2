"""Every fix the tests make is checked by code that knows nothing of how the fix chose what to
write (bench/fix_checks.py): pyflakes finds no new undefined name or redefinition in the fixed
text, and every name it reads is bound where it runs (a function reads only module-level names
bound above its ``def``; decorators and defaults run where the ``def`` stands)."""

from pathlib import Path

import pytest

from bench.fix_checks import new_pyflakes_problems, new_unbound_names, problems_of_fix
from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.fixer import apply_fixes, fix_source, lost_suffix
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.rules import all_rules

ALL = Settings(select=("ALL",), extend_select=("TDV9",), unsafe_fixes=True)
FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("*.py"))
EXAMPLES = [
    pytest.param(rule, example, id=f"{rule.code}-{index}")
    for rule in all_rules()
    for index, example in enumerate(rule.invalid)
]


@pytest.mark.parametrize("rule, example", EXAMPLES)
def test_each_rule_examples_fix_writes_only_bound_names(rule, example):
    settings = settings_from_table({"select": [rule.code], **(example.config or {})})
    fixed = fix_source(api.engine(settings, rules=[rule]), "example.py", example.code, unsafe=True).source
    assert problems_of_fix(example.code, fixed) == []


def single_fixes(source: str):
    """The module after each one finding's fix alone, every rule on."""
    analysis = api.engine(ALL).analyze("example.py", source)
    if analysis is None:
        return []
    return [
        apply_fixes(analysis, [raw]) + lost_suffix(analysis)
        for raw in analysis.findings
        if raw.fix and (raw.fix.replacements or raw.fix.needs_device_binding)
    ]


@pytest.mark.parametrize("rule, example", [p for p in EXAMPLES if p.values[1].config is None])
def test_each_findings_own_fix_writes_only_bound_names(rule, example):
    for fixed in single_fixes(example.code):
        assert problems_of_fix(example.code, fixed) == []


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixing_the_fixture_programs_writes_only_bound_names(path):
    source = path.read_text(encoding="utf-8")
    fixed = api.fix_source(source, str(path), ALL, unsafe=True).source
    assert problems_of_fix(source, fixed) == []
    for single in single_fixes(source):
        assert problems_of_fix(source, single) == []


# The checks see what issue 27 found in fixed real projects.
def test_a_decorator_naming_another_functions_device_is_caught():
    before = (
        "import torch\n\n@torch.cuda.amp.autocast(enabled=False)\ndef head(x):\n    return x\n\n"
        'def main():\n    device = torch.device("cpu")\n'
    )
    after = before.replace("torch.cuda.amp.autocast(enabled=False)", "torch.amp.autocast(torch.device(device).type, enabled=False)")
    assert new_pyflakes_problems(before, after) == ["undefined name `device`"]
    assert new_unbound_names(before, after) == ["`device` not bound where it is read (<module>)"]


def test_a_function_reading_a_device_bound_only_in_the_main_block_is_caught():
    before = (
        "import torch\n\n\ndef run(x):\n    return x.cuda()\n\n\n"
        'if __name__ == "__main__":\n    device = torch.device("cpu")\n    run(torch.ones(2))\n'
    )
    after = before.replace("x.cuda()", "x.to(device)")
    assert new_pyflakes_problems(before, after) == []  # pyflakes accepts it: the stricter check does not
    assert new_unbound_names(before, after) == ["`device` not bound where it is read (<module>/run)"]


def test_a_binding_over_an_imported_device_is_caught():
    before = "from torch import device\nimport torch\nx = torch.ones(2).cuda()\n"
    after = 'from torch import device\nimport torch\ndevice = torch.device("cpu")\nx = torch.ones(2).to(device)\n'
    assert new_pyflakes_problems(before, after) == ["redefinition `device`"]


def test_a_local_read_before_it_is_assigned_is_caught():
    before = "import torch\n\ndef f(x):\n    x = x.cuda()\n    device = x.device\n    return x\n"
    after = before.replace("x.cuda()", "x.to(device)")
    assert new_unbound_names(before, after) == ["`device` not bound where it is read (<module>/f)"]


def test_names_bound_above_in_every_form_are_accepted():
    before = (
        "import torch\nfrom os import path as p\n\nclass A:\n    k = 1\n    j = k\n\n"
        "def f(x, *rest, key=None, **options):\n    with open(x) as handle:\n        data = handle\n"
        "    for item in rest:\n        item\n    try:\n        pass\n    except ValueError as error:\n        error\n"
        "    g = lambda y: y + x\n    return [z for z in data], g, key, options, p, A\n"
    )
    assert new_unbound_names("", before) == []
