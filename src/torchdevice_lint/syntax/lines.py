"""Lines as Python numbers them: only ``\\n``, ``\\r\\n`` and ``\\r`` end one.

``str.splitlines`` also breaks at form feeds (a ``^L`` line between sections is common in older
code), ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85`` and ``\\u2028``/``\\u2029``: every row after such a character
would be off by one in code frames, ``noqa`` comments and fix edits.
"""

from __future__ import annotations

import re
from typing import List, Tuple

from .diffs import AnchoredMatcher

LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def physical_lines(text: str, keepends: bool = False) -> List[str]:
    """``text.splitlines(keepends)`` with Python's (and LibCST's) line breaks only."""
    lines = _LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]


class Lines:
    """The buffer's lines as LSP counts them (``\\n``, ``\\r\\n`` and ``\\r`` only, like LibCST),
    to turn 1-based (row, code-point column) positions into LSP positions in the negotiated
    encoding; a position past the end is the end of the buffer."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.lines = LINE_BREAK.split(text)
        self.encoding = encoding

    def position(self, row: int, column: int) -> dict:
        line = row - 1
        if line >= len(self.lines):
            line, character = len(self.lines) - 1, len(self.lines[-1])
        else:
            character = min(column - 1, len(self.lines[line]))
        return {"line": line, "character": self._units(self.lines[line][:character])}

    def range(self, start: Tuple[int, int], end: Tuple[int, int]) -> dict:
        return {"start": self.position(*start), "end": self.position(*end)}

    def _units(self, text: str) -> int:
        if self.encoding == "utf-8":
            return len(text.encode("utf-8"))
        if self.encoding == "utf-32":
            return len(text)
        return len(text.encode("utf-16-le")) // 2


def text_edits(old: str, new: str, lines: Lines) -> List[dict]:
    """LSP text edits, in whole lines, that turn ``old`` into ``new``."""
    before, after = physical_lines(old, keepends=True), physical_lines(new, keepends=True)
    edits = []
    matcher = AnchoredMatcher(a=before, b=after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append({"range": lines.range((i1 + 1, 1), (i2 + 1, 1)), "newText": "".join(after[j1:j2])})
    return edits
