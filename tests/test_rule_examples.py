"""Every example carried by every rule is a test: valid code yields no finding of the rule,
invalid code yields the declared findings, fix safety and exact fixed code."""

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.rules import all_rules

RULES = all_rules()


def engine_for(rule, example):
    settings = settings_from_table({"select": [rule.code], **(example.config or {})})
    return api.engine(settings, rules=[rule], projects=api.Projects() if example.files else None)


def example_path(example, tmp_path) -> str:
    """``example.py`` alone, or inside a project holding the example's other files."""
    if not example.files:
        return "example.py"
    for name, code in {**example.files, "example.py": example.code}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write = (tmp_path / name).write_bytes if isinstance(code, bytes) else (tmp_path / name).write_text
        write(code)  # a shipped checkpoint is bytes
    return str(tmp_path / "example.py")


def cases(kind):
    return [
        pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}")
        for rule in RULES
        for index, example in enumerate(getattr(rule, kind))
    ]


@pytest.mark.parametrize("rule, example", cases("valid"))
def test_valid_example_has_no_finding(rule, example, tmp_path):
    result = engine_for(rule, example).check_source(example_path(example, tmp_path), example.code)
    assert result.error is None
    assert [f.code for f in result.findings] == []


@pytest.mark.parametrize("rule, example", cases("invalid"))
def test_invalid_example_is_reported_and_fixed_as_declared(rule, example, tmp_path):
    engine = engine_for(rule, example)
    path = example_path(example, tmp_path)
    result = engine.check_source(path, example.code)
    assert result.error is None
    assert [f.code for f in result.findings] == [rule.code] * example.count
    expected_safety = (example.applicability or rule.fix_safety).value if example.offers_fix else None
    assert [f.fix.applicability if f.fix else None for f in result.findings] == [expected_safety] * example.count

    outcome = fix_source(engine, path, example.code, unsafe=True)
    assert outcome.source == (example.fixed if example.fixed is not None else example.code)
    if example.fixed is not None:
        assert engine.check_source(path, outcome.source).findings == []


def test_every_rule_carries_enough_examples():
    for rule in RULES:
        assert len(rule.valid) >= 4, rule.code
        assert len(rule.invalid) >= 4, rule.code


def test_codes_and_names_are_unique():
    assert len({r.code for r in RULES}) == len(RULES)
    assert len({r.name for r in RULES}) == len(RULES)
