"""Output formats. Each takes the results of a run and returns the text to print."""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable, Dict, List, Sequence

from .findings import FileResult, Finding


def _marker(finding: Finding) -> str:
    if finding.fix and finding.fix.applicability == "safe":
        return " [*]"
    if finding.fix and finding.fix.applicability == "unsafe":
        return " [-]"
    return ""


def concise(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    lines = []
    for result in results:
        for f in result.findings:
            lines.append(f"{f.filename}:{f.location.row}:{f.location.column}: {f.code}{_marker(f)} {f.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def _frame(finding: Finding, source: str) -> List[str]:
    lines = source.splitlines()
    row = finding.location.row
    if not 0 < row <= len(lines):
        return []
    text = lines[row - 1].expandtabs(4) if "\t" in lines[row - 1] else lines[row - 1]
    width = len(str(row))
    start = finding.location.column - 1
    end = finding.end_location.column - 1 if finding.end_location.row == row else len(text)
    caret = " " * start + "^" * max(1, end - start)
    gutter = " " * width
    return [f"{gutter} |", f"{row} | {text}", f"{gutter} | {caret}"]


def full(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    blocks = []
    for result in results:
        for f in result.findings:
            block = [f"{f.filename}:{f.location.row}:{f.location.column}: {f.code} {f.message}"]
            block.extend("  " + line for line in _frame(f, sources.get(f.filename, "")))
            if f.fix:
                block.append(f"  = fix ({f.fix.applicability}): {f.fix.message}")
            blocks.append("\n".join(block))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


def as_json(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    items = [f.as_dict() for result in results for f in result.findings]
    return json.dumps(items, indent=2) + "\n"


FORMATS: Dict[str, Callable[[Sequence[FileResult], Dict[str, str]], str]] = {
    "full": full,
    "concise": concise,
    "json": as_json,
}
#: Formats whose output is machine-read: nothing else may be printed to stdout with them.
MACHINE_FORMATS = {"json"}


def summary(results: Sequence[FileResult]) -> str:
    findings = [f for r in results for f in r.findings]
    files = sum(1 for r in results if r.error is None)
    failed = len(results) - files
    unchecked = f" {failed} file{'s' if failed != 1 else ''} could not be checked." if failed else ""
    if not findings:
        verdict = "No findings" if failed else "All checks passed"
        return f"{verdict} ({files} file{'s' if files != 1 else ''} checked).{unchecked}"
    per_rule = Counter(f.code for f in findings)
    safe = sum(1 for f in findings if f.fix and f.fix.applicability == "safe")
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability == "unsafe")
    rules = ", ".join(f"{code} x{count}" for code, count in sorted(per_rule.items()))
    text = f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} in {files} files checked ({rules}).{unchecked}"
    if safe:
        text += f"\n[*] {safe} fixable with `torchdevice-fix`."
    if unsafe:
        text += f"\n[-] {unsafe} more fixable with `torchdevice-fix --unsafe-fixes`."
    return text
