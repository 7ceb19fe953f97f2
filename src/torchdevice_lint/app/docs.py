"""Rule pages in ruff's format, generated from the rule classes themselves."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Sequence, Type

from ..engine.rule import Rule
from ..model.fixes import Applicability

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
        *_config_note(example),
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


def _config_note(example) -> List[str]:
    if not example.config:
        return []
    keys = ", ".join(f"`{key} = {json.dumps(value)}`" for key, value in example.config.items())
    return [f"With {keys} in `[tool.torchdevice-lint]`:", ""]


def _summary_line(rule: Type[Rule]) -> str:
    return rule.what.split(". ")[0].rstrip(".") + "."


def rule_index(rules: Sequence[Type[Rule]]) -> str:
    lines = [
        "# Rules",
        "",
        "Generated from the rule classes by `torchdevice-lint rule --write-docs docs/rules`; do not edit.",
        "",
        "| code | name | default | fix | what it reports |",
        "|---|---|---|---|---|",
    ]
    for rule in rules:
        default = "on" if rule.default_enabled else "opt-in"
        lines.append(
            f"| [{rule.code}]({rule.code}.md) | {rule.name} | {default} | {rule.fix_safety.value} | {_summary_line(rule).replace('|', chr(92) + '|')} |"
        )
    return "\n".join(lines) + "\n"


def rule_docs() -> Dict[str, str]:
    """File name -> Markdown text of every rule page and the index, as committed in docs/rules."""
    from ..rules import all_rules

    rules = all_rules()
    pages = {f"{rule.code}.md": rule_page(rule) for rule in rules}
    pages["index.md"] = rule_index(rules)
    return pages


def write_rule_docs(directory: str) -> List[str]:
    """Write the pages, removing pages of rules that no longer exist; returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    pages = rule_docs()
    for stale in os.listdir(directory):
        if stale.endswith(".md") and stale not in pages:
            os.remove(os.path.join(directory, stale))
    written = []
    for name, text in pages.items():
        path = os.path.join(directory, name)
        with open(path, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        written.append(path)
    return written
