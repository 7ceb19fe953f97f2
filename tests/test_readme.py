"""The README cannot drift from the code: its rule tables list exactly the registry's rules
(name and fix safety included), and its commands come in an order that works."""

import re
from pathlib import Path

from torchdevice_lint.rules import all_rules

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
ROW = re.compile(r"^\| `(TDV\d{3})` \| ([a-z0-9-]+) \| .* \| ([^|]+) \|$", re.MULTILINE)
SAFETY_WORDS = {"safe": "safe", "unsafe": "unsafe", "display-only": "suggestion"}


def table_after(heading):
    section = README.split(heading, 1)[1].split("\n## ", 1)[0]
    return {code: (name, fix.strip()) for code, name, fix in ROW.findall(section)}


def test_rules_table_lists_every_default_rule():
    expected = {r.code: (r.name, SAFETY_WORDS[r.fix_safety.value]) for r in all_rules() if r.default_enabled}
    assert table_after("## Rules\n") == expected


def test_strict_table_lists_every_opt_in_rule():
    table = table_after("## Strict policy")
    opt_in = {r.code: r for r in all_rules() if not r.default_enabled}
    assert sorted(table) == sorted(opt_in)
    for code, (name, fix) in table.items():
        assert name == opt_in[code].name
        assert fix.startswith(SAFETY_WORDS[opt_in[code].fix_safety.value]), code


def test_test_command_comes_after_the_torch_note_with_the_cpu_index():
    torch_note = README.index("pip install torch --index-url https://download.pytorch.org/whl/cpu")
    test_command = README.index("pip install -e '.[test]' && python -m pytest -q")
    assert torch_note < test_command


def test_the_quick_start_fixes_every_finding_for_the_torch_this_repository_declares(capsys, monkeypatch):
    """`torchdevice-fix --diff --unsafe-fixes examples/` targets the torch of this repository's
    own requirement (the runtime extra's `torch>=2.13`), which has every name the fixes write:
    nothing is left over. (Findings a target cannot fix are named with the reason, as
    tests/test_monorepo_targets.py shows.)"""
    from torchdevice_lint.cli import fix_main, lint_main

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert fix_main(["--diff", "--unsafe-fixes", "--no-cache", "examples/"]) == 1  # --diff: it would change files
    assert capsys.readouterr().err.splitlines() == ["Would fix 6 findings in 1 file (TDV101 x2, TDV102 x1, TDV301 x1, TDV302 x2)."]
    assert lint_main(["check", "--show-settings", "examples/train.py"]) == 0
    assert "Target torch: 2.13 from pyproject.toml [project.optional-dependencies] runtime: torch>=2.13" in capsys.readouterr().out.splitlines()
