"""Rule pages in ruff's format, generated from the rule classes themselves."""

from __future__ import annotations

from typing import Type

from .rule import Applicability, Rule

_SAFETY = {
    Applicability.SAFE: "This rule's fix is safe: it keeps the program's meaning on every device and is applied by `torchdevice-fix`.",
    Applicability.UNSAFE: "This rule's fix is unsafe: the device it picks may differ from the one the code named. It is applied with `torchdevice-fix --unsafe-fixes`.",
    Applicability.DISPLAY_ONLY: "This rule offers a suggestion only; no fix is applied automatically.",
}


def rule_page(rule: Type[Rule]) -> str:
    example = rule.invalid[0]
    lines = [
        f"# {rule.name} ({rule.code})",
        "",
        "Off by default: enable it with `--extend-select " + rule.code + "`." if not rule.default_enabled else "On by default.",
        "",
        "## What it does",
        rule.what,
        "",
        "## Why is this bad?",
        rule.why,
        "",
        "## Example",
        "```python",
        example.code.rstrip("\n"),
        "```",
    ]
    if example.fixed is not None:
        lines += ["", "## Use instead", "```python", example.fixed.rstrip("\n"), "```"]
    lines += ["", "## Fix safety", _SAFETY[rule.fix_safety]]
    if rule.fix_safety_note:
        lines.append(rule.fix_safety_note)
    return "\n".join(lines) + "\n"
