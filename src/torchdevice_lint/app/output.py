"""Output formats. Each takes the results of a run (and the checked texts, for code frames)
and returns the text to print; ``render`` picks one by name."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import unicodedata
from collections import Counter
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from ..knowledge.torch_releases import binding_expression
from ..model.findings import FileResult, Finding, position_key
from ..knowledge.torch_releases import withheld_for_target
from ..model.fixes import Applicability, target_needed
from ..model.settings import Settings
from ..rules import rule_by_code
from ..syntax.lines import physical_lines
from .ci_formats import github, gitlab, junit, rdjson, sarif
from .notebooks import cell_key

Formatter = Callable[[Sequence[FileResult], Dict[str, str]], str]


# -- colour -----------------------------------------------------------------------------------
def wants_colour(stream) -> bool:
    """Colour only on a terminal: ``NO_COLOR`` (any value) turns it off, ``FORCE_COLOR`` on,
    as https://no-color.org and most linters agree."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, *codes: str) -> str:
        if not self.enabled or not text:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"


BOLD, RED, CYAN, YELLOW, DIM = "1", "31", "36", "33", "2"


# -- human formats ----------------------------------------------------------------------------
def _marker(finding: Finding) -> str:
    if finding.fix and finding.fix.applicability is Applicability.SAFE:
        return " [*]"
    if finding.fix and finding.fix.applicability is Applicability.UNSAFE:
        return " [-]"
    return ""


def concise(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    lines = []
    for result in results:
        for f in result.findings:
            lines.append(f"{f.where}: {f.code}{_marker(f)} {f.message}")
    return "\n".join(lines) + ("\n" if lines else "")


def _frame(finding: Finding, lines: List[str], style: _Style) -> List[str]:
    """The finding's first line (of the file's ``lines``) with one line of context either side
    and carets under it."""
    row = finding.location.row
    if not 0 < row <= len(lines):
        return []
    first, last = max(1, row - 1), min(len(lines), row + 1)
    width = len(str(last))
    gutter = style(" " * width + " |", CYAN)
    frame = [gutter]
    for number in range(first, last + 1):
        line = lines[number - 1]
        frame.append(f"{style(str(number).rjust(width) + ' |', CYAN)} {_expand_tabs(line)}".rstrip())
        if number == row:
            start = finding.location.column - 1
            end = finding.end_location.column - 1 if finding.end_location.row == row else len(line)
            before = _display_width(_expand_tabs(line[:start]))
            under = _display_width(_expand_tabs(line[:max(end, start)])) - before
            carets = " " * before + "^" * max(1, under)
            frame.append(f"{gutter} {style(carets, RED, BOLD)} {style(finding.code, RED, BOLD)}")
    frame.append(gutter)
    return frame


TAB_WIDTH = 4


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or char in "\u200b\u200d\ufeff":
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _display_width(text: str) -> int:
    return sum(_char_width(char) for char in text)


def _expand_tabs(text: str) -> str:
    """Tabs to spaces at the terminal's tab stops, counting wide characters as two columns."""
    if "\t" not in text:
        return text
    parts, column = [], 0
    for char in text:
        if char == "\t":
            spaces = TAB_WIDTH - column % TAB_WIDTH
            parts.append(" " * spaces)
            column += spaces
        else:
            parts.append(char)
            column += _char_width(char)
    return "".join(parts)


_FIX_HINTS = {
    Applicability.SAFE: "fix",
    Applicability.UNSAFE: "unsafe fix (`--unsafe-fixes`)",
    Applicability.DISPLAY_ONLY: "help",
}


def full(results: Sequence[FileResult], sources: Dict[str, str], colour: bool = False) -> str:
    style = _Style(colour)
    blocks = []
    lines_of: Dict[str, List[str]] = {}
    for result in results:
        for f in result.findings:
            position = style(f"{f.where}:", BOLD)
            block = [f"{position} {style(f.code, RED, BOLD)}{_marker(f)} {f.message}"]
            key = f.filename if f.cell is None else cell_key(f.filename, f.cell)
            if key not in lines_of:  # split once per file (or cell), not once per finding
                lines_of[key] = physical_lines(sources.get(key, ""))
            block.extend(_frame(f, lines_of[key], style))
            if f.fix:
                label = style(_FIX_HINTS[f.fix.applicability], CYAN if f.fix.applicability is Applicability.SAFE else YELLOW, BOLD)
                block.append(f"{' ' * (len(str(f.location.row + 1)) + 1)}= {label}: {f.fix.message}")
            blocks.append("\n".join(block))
    return "\n\n".join(blocks) + ("\n" if blocks else "")


# -- machine formats --------------------------------------------------------------------------
def as_json(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    items = [f.as_dict() for result in results for f in result.findings]
    return json.dumps(items, indent=2) + "\n"


def json_lines(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """One finding per line, each the object of the JSON contract."""
    return "".join(json.dumps(f.as_dict()) + "\n" for result in results for f in result.findings)


FORMATS: Dict[str, Formatter] = {
    "full": full,
    "concise": concise,
    "json": as_json,
    "json-lines": json_lines,
    "github": github,
    "gitlab": gitlab,
    "sarif": sarif,
    "rdjson": rdjson,
    "junit": junit,
}
#: Formats whose output is machine-read: nothing else may be printed to stdout with them.
MACHINE_FORMATS = {"json", "json-lines", "gitlab", "sarif", "rdjson", "junit"}
#: Formats written as JSON, which escapes control characters by its own rules.
_JSON_FORMATS = {"json", "json-lines", "gitlab", "sarif", "rdjson"}
#: Formats that carry each fix's text edits (computing them applies each fix once more).
FORMATS_WITH_EDITS = {"json", "json-lines", "sarif", "rdjson"}


def sorted_results(results: Sequence[FileResult]) -> List[FileResult]:
    """Files by name and each file's findings by position, whatever order the workers and the
    cache returned them in, so every format lists findings as ruff does."""
    ordered = []
    for result in sorted(results, key=lambda r: r.filename):
        if any(position_key(a) > position_key(b) for a, b in zip(result.findings, result.findings[1:])):
            result = dataclasses.replace(result, findings=sorted(result.findings, key=position_key))
        ordered.append(result)
    return ordered


def statistics(results: Sequence[FileResult], as_json: bool = False, baselined: Optional[Counter] = None) -> str:
    """``--statistics``: findings per rule, most frequent first; ``[*]`` when some have a safe fix.
    With a baseline (``baselined``: code -> findings it held) the counts are the new findings,
    and how many the baseline held follows: a last line, or a ``baselined`` field per rule."""
    counts: Counter = Counter()
    names, fixable = {}, set()
    for f in (f for r in results for f in r.findings):
        counts[f.code] += 1
        names[f.code] = f.name
        if f.fix and f.fix.applicability is Applicability.SAFE:
            fixable.add(f.code)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if as_json:
        rows = [{"code": c, "name": names[c], "count": n, "fixable": c in fixable} for c, n in ordered]
        if baselined is not None:
            rows += [{"code": c, "name": rule_by_code(c).name, "count": 0, "fixable": False} for c in sorted(set(baselined) - set(counts))]
            rows = [dict(row, baselined=baselined.get(row["code"], 0)) for row in rows]
        return json.dumps(rows, indent=2) + "\n"
    width = len(str(max(counts.values()))) if counts else 1
    text = "".join(f"{str(n).rjust(width)}\t{c}\t{'[*]' if c in fixable else '[ ]'} {names[c]}\n" for c, n in ordered)
    if baselined is not None:
        total = sum(baselined.values())
        text += f"{total} more baselined\n"
    return text


def settings_text(target: str, config: Optional[str], settings, project: Optional[str], origin: str) -> str:
    """``--show-settings``: where the settings of ``target`` come from (the configuration, the
    project root, the pin its target torch is read from) and their values."""
    lines = [f"Resolved settings for: {json.dumps(os.path.abspath(target))}",
             f"Settings path: {json.dumps(os.path.abspath(config)) if config else '(none: defaults)'}",
             f"Project root: {json.dumps(project) if project else '(none)'}",
             f"Target torch: {settings.target_torch_version} from {origin}", ""]
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        value = list(value) if isinstance(value, tuple) else value
        if field.name == "device_expression" and value is None:
            value = binding_expression(settings)
        lines.append(f"{field.name.replace('_', '-')} = {json.dumps(value)}")
    return "\n".join(lines) + "\n"


#: C0 and C1 control characters and the bidirectional overrides of "Trojan Source": nothing a
#: file name, a message or a cached result holds may move the cursor, recolour or retitle the
#: terminal, or reorder or hide what is printed.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_IN_CODE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # tabs are laid out


#: What ``_printable_source`` must escape besides line breaks: without any, the text is kept.
_UNPRINTABLE_IN_SOURCE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _printable_source(text: str) -> str:
    """The source's physical lines made printable, joined by ``\n``; most sources hold nothing
    to escape and no ``\r``, and are only stripped of their last line break."""
    if not _UNPRINTABLE_IN_SOURCE.search(text):
        return text[:-1] if text.endswith("\n") else text
    return "\n".join(printable(line, _UNPRINTABLE_IN_CODE) for line in physical_lines(text))


def printable(text: str, pattern: "re.Pattern[str]" = _UNPRINTABLE) -> str:
    """``text`` with those characters written as Python escapes (``\\x1b``), on one line."""
    return pattern.sub(lambda match: ascii(match.group())[1:-1], text)


def _printable_results(results: Sequence[FileResult]) -> List[FileResult]:
    cleaned = []
    for result in results:
        findings = [
            dataclasses.replace(
                f,
                filename=printable(f.filename),
                message=printable(f.message),
                fix=f.fix and dataclasses.replace(f.fix, message=printable(f.fix.message)),
            )
            for f in result.findings
        ]
        error = result.error and dataclasses.replace(result.error, filename=printable(result.error.filename), message=printable(result.error.message))
        cleaned.append(dataclasses.replace(result, filename=printable(result.filename), findings=findings, error=error))
    return cleaned


def render(name: str, results: Sequence[FileResult], sources: Dict[str, str], colour: bool = False) -> str:
    if name not in _JSON_FORMATS:  # JSON escapes control characters itself
        results = _printable_results(results)
        # no format quotes other files (or notebook cells) than those of the findings
        findings = [f for result in results for f in result.findings]
        quoted = {f.filename for f in findings} | {cell_key(f.filename, f.cell) for f in findings if f.cell is not None}
        shown = ((printable(path), text) for path, text in sources.items())
        sources = {path: _printable_source(text) for path, text in shown if path in quoted}
    if name == "full":
        return full(results, sources, colour=colour)
    return FORMATS[name](results, sources)


def summary(results: Sequence[FileResult], colour: bool = False) -> str:
    """Files checked, findings per rule, and how many ``torchdevice-fix`` would fix with and
    without ``--unsafe-fixes``."""
    style = _Style(colour)
    findings = [f for r in results for f in r.findings]
    files = sum(1 for r in results if r.error is None)
    failed = len(results) - files
    files_text = f"{files} file{'s' if files != 1 else ''} checked"
    unchecked = f" {failed} file{'s' if failed != 1 else ''} could not be checked." if failed else ""
    if not findings:
        verdict = "No findings" if failed else "All checks passed"
        return f"{style(verdict, BOLD)} ({files_text}).{unchecked}"
    with_findings = sum(1 for r in results if r.findings)
    per_rule = Counter(f.code for f in findings)
    names = {f.code: printable(f.name) for f in findings}
    width = len(str(max(per_rule.values())))
    lines = [
        style(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}", BOLD)
        + f" in {with_findings} of {files_text}.{unchecked}"
    ]
    for code, count in sorted(per_rule.items()):
        lines.append(f"  {str(count).rjust(width)}  {style(code, RED, BOLD)}  {names[code]}")
    safe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability is Applicability.UNSAFE)
    if safe:
        lines.append(f"[*] {safe} fixable with `torchdevice-fix`.")
    if unsafe:
        lines.append(f"[-] {unsafe} more fixable with `torchdevice-fix --unsafe-fixes`.")
    return "\n".join(lines)


def fix_summary(results: Iterable, remaining: Sequence[FileResult], preview: bool, unsafe: bool,
                settings_of: Callable[[str], Settings]) -> str:
    """What the fixer did (``preview``: would do) and what remains: how many per rule, and for
    a finding whose fix the target torch lacks, the target, where it came from and how to move it."""
    applied: Counter = Counter()
    for result in results:
        applied.update(result.applied)
    changed = sum(1 for r in results if r.changed)
    total = sum(applied.values())
    if total:
        rules = ", ".join(f"{code} x{count}" for code, count in sorted(applied.items()))
        lines = [f"{'Would fix' if preview else 'Fixed'} {total} finding{'s' if total != 1 else ''} in {changed} file{'s' if changed != 1 else ''} ({rules})."]
    else:
        lines = ["Nothing to fix."]
    left = [f for r in remaining for f in r.findings]
    if left:
        per_rule = ", ".join(f"{code} x{count}" for code, count in sorted(Counter(f.code for f in left).items()))
        after = " after the fixes" if preview else ""  # the positions below are the fixed file's
        line = f"{len(left)} finding{'s remain' if len(left) != 1 else ' remains'}{after} ({per_rule})"
        more = sum(1 for f in left if f.fix and f.fix.applicability is Applicability.UNSAFE)
        if more and not unsafe:
            line += f"; {more} fixable with --unsafe-fixes"
        lines.append(line + "; see `torchdevice-lint rule CODE` for how to fix the rest by hand.")
        lines.extend(_withheld_for_target(left, settings_of))
    return "\n".join(lines)


def _withheld_for_target(findings: Sequence[Finding], settings_of: Callable[[str], Settings]) -> List[str]:
    lines = []
    for f in findings:
        # Two forms: a finding whose message says no rewrite exists for the target (the release
        # table's note), or one whose suggestion names the release its fix needs.
        withheld = withheld_for_target(f.message)
        suggested = target_needed(f.fix.message) if f.fix and withheld is None else None
        if withheld is None and suggested is None:
            continue
        reason = f"`{withheld[0]}` needs torch {withheld[1]}" if withheld else printable(f.fix.message)
        needed = withheld[1] if withheld else suggested
        settings = settings_of(f.filename)
        lines.append(
            f"{f.where}: {f.code} has no fix for the target torch {settings.target_torch_version} "
            f"({settings.target_torch_source}): {reason}. If the code need not run on older "
            f'torch, set target-torch-version = "{needed}" in [tool.torchdevice-lint] or pass --target-torch-version {needed}.'
        )
    return lines
