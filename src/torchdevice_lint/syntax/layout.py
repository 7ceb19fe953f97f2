"""An edit that changed only comments and layout in a stretch of whole lines: the old text's
positions carried over to the new one.

The editor types into one statement at a time. When the tokens of the edited stretch are the
same before and after (a comment typed or removed, lines re-wrapped inside brackets, blank lines)
the module is the same program: every fact any statement reads of any other is unchanged, so the
findings are the old ones, moved with the tokens they sit on. Comments that are directives
(``# noqa``, ``# torchdevice-lint: ...``) change findings, and an edit touching one is no layout
edit.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

from ..model.findings import Finding, Location

from .lines import LINE_BREAK

#: (row, column), both 1-based, columns in code points: a finding's location.
Position = Tuple[int, int]

_DIRECTIVE = re.compile(r"noqa|torchdevice", re.IGNORECASE)
_LAYOUT = (tokenize.COMMENT, tokenize.NL)


class LayoutMove:
    """Where each position of the old text is in the new one, for an edit that changed only
    layout between ``start`` and the region's end (both texts equal before and after it)."""

    def __init__(self, first_row: int, old_rows: int, row_shift: int, starts: Dict[Position, Position], ends: Dict[Position, Position]):
        self.first_row, self.last_row, self.row_shift = first_row, first_row + old_rows - 1, row_shift
        self._starts, self._ends = starts, ends

    def moved(self, position: Position, end: bool = False) -> Optional[Position]:
        """The position in the new text; None for one inside the region that begins (or, with
        ``end``, ends) no token."""
        row, column = position
        if row < self.first_row:
            return position
        if row > self.last_row:
            return row + self.row_shift, column
        return (self._ends if end else self._starts).get(position)

    def findings(self, findings: Sequence[Finding]) -> Optional[List[Finding]]:
        """The findings where their tokens moved; None if one is not at a token's edges."""
        moved = []
        for finding in findings:
            start = self.moved((finding.location.row, finding.location.column))
            end = self.moved((finding.end_location.row, finding.end_location.column), end=True)
            if start is None or end is None:
                return None
            moved.append(replace(finding, location=Location(*start), end_location=Location(*end)))
        return moved


def layout_move(old: str, new: str, start: int, old_end: int, new_end: int) -> Optional[LayoutMove]:
    """The move from ``old`` to ``new`` when they differ only in ``old[start:old_end]`` against
    ``new[start:new_end]``, both whole lines, and those hold the same tokens and no directive in
    a comment; else None."""
    if start and old[start - 1] not in "\r\n":
        return None
    old_region, new_region = old[start:old_end], new[start:new_end]
    if not (_whole_lines(old_region) and _whole_lines(new_region)):
        return None
    old_tokens, new_tokens = _tokens(old_region), _tokens(new_region)
    if old_tokens is None or new_tokens is None or len(old_tokens) != len(new_tokens):
        return None
    if any((a.type, a.string) != (b.type, b.string) for a, b in zip(old_tokens, new_tokens)):
        return None
    rows_before = len(LINE_BREAK.findall(old, 0, start))
    starts, ends = {}, {}
    for a, b in zip(old_tokens, new_tokens):
        starts[_position(a.start, rows_before)] = _position(b.start, rows_before)
        ends[_position(a.end, rows_before)] = _position(b.end, rows_before)
    old_rows, new_rows = len(LINE_BREAK.findall(old_region)), len(LINE_BREAK.findall(new_region))
    return LayoutMove(rows_before + 1, old_rows, new_rows - old_rows, starts, ends)


def _whole_lines(region: str) -> bool:
    """Ends at a line break, and breaks lines only where ``tokenize`` and LibCST both do."""
    return region.endswith(("\n", "\r")) and "\r" not in region.replace("\r\n", "")


def _position(point: Tuple[int, int], rows_before: int) -> Position:
    return point[0] + rows_before, point[1] + 1


def _tokens(region: str) -> Optional[List[tokenize.TokenInfo]]:
    """The region's tokens apart from comments and blank lines; None when it does not tokenize
    alone or a comment in it is a directive."""
    kept = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(region, newline="").readline):
            if token.type == tokenize.COMMENT and _DIRECTIVE.search(token.string):
                return None
            if token.type not in _LAYOUT:
                kept.append(token)
    except (tokenize.TokenError, SyntaxError):
        return None
    return kept
