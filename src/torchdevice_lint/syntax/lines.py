"""Lines as Python numbers them: only ``\\n``, ``\\r\\n`` and ``\\r`` end one.

``str.splitlines`` also breaks at form feeds (a ``^L`` line between sections is common in older
code), ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85`` and ``\\u2028``/``\\u2029``: every row after such a character
would be off by one in code frames, ``noqa`` comments and fix edits.
"""

from __future__ import annotations

import re
from typing import List

LINE_BREAK = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def physical_lines(text: str, keepends: bool = False) -> List[str]:
    """``text.splitlines(keepends)`` with Python's (and LibCST's) line breaks only."""
    lines = _LINE.findall(text)
    return lines if keepends else [line.rstrip("\r\n") for line in lines]
