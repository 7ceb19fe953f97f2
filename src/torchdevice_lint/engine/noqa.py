"""``# noqa`` directives, read as ruff reads them.

- A line: ``# noqa`` (every code) or ``# noqa: TDV101, TDV2`` (codes or prefixes) on the first
  or last line of the finding.
- A file: ``# torchdevice-lint: noqa`` on a line of its own skips the file;
  ``# torchdevice-lint: noqa: TDV101`` turns those codes off in the whole file. ``# ruff:`` and
  ``# flake8:`` in place of ``# torchdevice-lint:`` are read the same way.
- Directives are comments, read with the tokenizer: the same text in a string literal (a
  docstring that documents them, a test's source in a string) suppresses nothing.
- TDV900 (opt-in, like ruff's RUF100) reports the TDV codes of a line directive that suppressed
  nothing. Other tools' codes and bare ``# noqa`` are left alone: they may serve flake8 or ruff.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

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
    """None: no file-level directive; ``()``: skip the whole file; else the codes it turns off.
    Only a comment counts: the same text inside a (triple-quoted) string is not a directive."""
    if "noqa" not in source.lower() or not FILE_NOQA.search(_one_break_per_row(source)):
        return None
    codes: List[str] = []
    for column, text in comments(source).values():
        match = FILE_NOQA.match(text) if column == 0 else None
        if match is None:
            continue
        if not match.group("codes"):
            return ()
        codes.extend(split_codes(match.group("codes")))
    return tuple(codes) if codes else None


def comments(source: str) -> Dict[int, Tuple[int, str]]:
    """Each row's comment, as the tokenizer reads it: (0-based column, text). Text that only
    looks like a comment, in a string, is none."""
    found: Dict[int, Tuple[int, str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(_one_break_per_row(source)).readline):
            if token.type == tokenize.COMMENT:
                found[token.start[0]] = (token.start[1], token.string)
    except (tokenize.TokenError, SyntaxError):  # the file parsed already; be safe anyway
        pass
    return found


def _one_break_per_row(source: str) -> str:
    """``\\n`` for every line break (a CR-only file included): rows and columns stay the same."""
    return source.replace("\r\n", "\n").replace("\r", "\n")


class UnusedDirective(NamedTuple):
    row: int
    column: int  # 1-based, where ``#`` is
    end_column: int
    codes: Tuple[str, ...]


class LineSuppressions:
    """The line directives of one file, and which of their codes suppressed a finding."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.used: Set[Tuple[int, str]] = set()
        #: row -> its comment, read with the tokenizer when the first finding asks (and only
        #: if the file says "noqa" at all).
        self._comments: Optional[Dict[int, Tuple[int, str]]] = None
        #: row -> its directive, searched once: one long line can hold thousands of findings.
        self._directives: Dict[int, Optional["re.Match[str]"]] = {}

    def _directive(self, row: int) -> Optional["re.Match[str]"]:
        if row not in self._directives:
            if self._comments is None:
                self._comments = comments(self.source) if "noqa" in self.source.lower() else {}
            comment = self._comments.get(row, (0, ""))[1]
            self._directives[row] = NOQA.search(comment) if "noqa" in comment.lower() else None
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
        for row, (column, text) in sorted(comments(source).items()):
            match = NOQA.search(text)
            if match is None or not match.group("codes"):
                continue
            codes = tuple(
                code for code in split_codes(match.group("codes"))
                if code.startswith("TDV") and (row, code) not in self.used
            )
            if codes:
                found.append(UnusedDirective(row, column + match.start() + 1, column + match.end() + 1, codes))
        return found
