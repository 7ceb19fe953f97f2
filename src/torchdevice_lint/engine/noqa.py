"""``# noqa`` directives, read as ruff reads them.

- A line: ``# noqa`` (every code) or ``# noqa: TDV101, TDV2`` (codes or prefixes) on the first
  or last line of the finding.
- A file: ``# torchdevice-lint: noqa`` on a line of its own skips the file;
  ``# torchdevice-lint: noqa: TDV101`` turns those codes off in the whole file. ``# ruff:`` and
  ``# flake8:`` in place of ``# torchdevice-lint:`` are read the same way.
- TDV900 (opt-in, like ruff's RUF100) reports the TDV codes of a line directive that suppressed
  nothing. Other tools' codes and bare ``# noqa`` are left alone: they may serve flake8 or ruff.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from ..syntax.lines import physical_lines

UNUSED_NOQA = "TDV900"
_CODES = r"[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*"
NOQA = re.compile(rf"#\s*noqa(?::\s?(?P<codes>{_CODES}))?", re.IGNORECASE)
FILE_NOQA = re.compile(
    rf"^#\s*(?:torchdevice-lint|flake8|ruff)\s*:\s*noqa(?:\s*:\s*(?P<codes>{_CODES}))?\s*$",
    re.IGNORECASE | re.MULTILINE,
)


def split_codes(text: str) -> List[str]:
    return [code.upper() for code in re.split(r"[,\s]+", text) if code]


def file_exemption(source: str) -> Optional[Tuple[str, ...]]:
    """None: no file-level directive; ``()``: skip the whole file; else the codes it turns off."""
    if "noqa" not in source and "NOQA" not in source.upper():
        return None
    codes: List[str] = []
    for match in FILE_NOQA.finditer(source):
        if not match.group("codes"):
            return ()
        codes.extend(split_codes(match.group("codes")))
    return tuple(codes) if codes else None


class UnusedDirective(NamedTuple):
    row: int
    column: int  # 1-based, where ``#`` is
    end_column: int
    codes: Tuple[str, ...]


class LineSuppressions:
    """The line directives of one file, and which of their codes suppressed a finding."""

    def __init__(self, source: str) -> None:
        self.lines = physical_lines(source)
        self.used: Set[Tuple[int, str]] = set()
        #: row -> its directive, searched once: one long line can hold thousands of findings.
        self._directives: Dict[int, Optional["re.Match[str]"]] = {}

    def _directive(self, row: int) -> Optional["re.Match[str]"]:
        if row not in self._directives:
            line = self.lines[row - 1] if 0 < row <= len(self.lines) else ""
            self._directives[row] = NOQA.search(line) if "noqa" in line.lower() else None
        return self._directives[row]

    def covers(self, rows: Iterable[int], code: str) -> bool:
        for row in sorted(set(rows)):
            match = self._directive(row)
            if match is None:
                continue
            if not match.group("codes"):
                return True
            for written in split_codes(match.group("codes")):
                if code.startswith(written):
                    self.used.add((row, written))
                    return True
        return False

    def unused(self, source: str) -> List[UnusedDirective]:
        """Directives in comments (not strings) naming TDV codes that suppressed nothing."""
        found = []
        for token in _comments(source):
            match = NOQA.search(token.string)
            if match is None or not match.group("codes"):
                continue
            row = token.start[0]
            codes = tuple(
                code for code in split_codes(match.group("codes"))
                if code.startswith("TDV") and (row, code) not in self.used
            )
            if codes:
                start = token.start[1] + match.start()
                found.append(UnusedDirective(row, start + 1, token.start[1] + match.end() + 1, codes))
        return found


def _comments(source: str) -> List[tokenize.TokenInfo]:
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):  # the file parsed with LibCST; be safe anyway
        return []
