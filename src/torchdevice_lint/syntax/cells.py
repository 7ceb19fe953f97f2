"""A notebook's code cells as one Python module, and back.

The engine checks text; a notebook is checked as the text of its code cells joined in order,
each cell after the first preceded by a separator line. IPython's own syntax is masked line by
line: ``%magic``, ``!shell``, ``x = !cmd``, ``obj?`` and a Python cell magic's ``%%time`` line
become ``pass`` with a comment, at the same indentation, so every row keeps its number and
every column outside them its place. ``from __future__ import ...`` lines are masked the same
way: each cell is compiled on its own, so they may stand in any cell, but not in the middle of
one module. Cells whose cell magic runs another language (``%%bash``,
``%%writefile``) are left out whole, as ruff leaves them.

The separator is a statement, ``...`` with a comment naming the cell, not a comment alone: a
fix that removes a statement (an import nothing uses any more) takes the comments above it
along, while a top-level statement is never moved nor made part of another block. So after any
fix the separators are still there, in order, and ``JoinedCells.split`` gives each cell its new
text, the masked lines put back byte for byte.
"""

from __future__ import annotations

import io
import re
import tokenize
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Tuple

from .lines import physical_lines

#: ruff's list: cell magics whose body is Python (``%%time``, ``%%capture``, ...).
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})
MASK = "pass  # torchdevice-lint: IPython"
_SEPARATOR = re.compile(r"\.\.\.  # torchdevice-lint: cell (\d+)")
_ASSIGNED_ESCAPE = re.compile(r"[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[!%]")
_HELP = re.compile(r"\?{1,2}[\w.]+|[\w.]+\?{1,2}")
_FUTURE = re.compile(r"from\s+__future__\s+import\s+[\w\s,]+(?:#.*)?")


class CellsMoved(ValueError):
    """The fixed text no longer has the cells' separators in order, or lost a masked line."""


def separator(number: int) -> str:
    """The line that starts cell ``number`` (1-based, among all the notebook's cells)."""
    return f"...  # torchdevice-lint: cell {number}"


def separator_number(line: str) -> Optional[int]:
    """The cell a separator line (without its line break) starts; None for any other line."""
    match = _SEPARATOR.fullmatch(line)
    return int(match.group(1)) if match else None


def _is_escape(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("%", "!", "?")) or bool(
        _ASSIGNED_ESCAPE.match(stripped) or _HELP.fullmatch(stripped) or _FUTURE.fullmatch(stripped)
    )


def _starts_statement(before: str) -> bool:
    """Whether a line after ``before`` starts a statement: not inside brackets, a string or a
    backslash continuation (where ``% x`` is Python's modulo)."""
    try:
        for _ in tokenize.generate_tokens(io.StringIO(before).readline):
            pass
    except tokenize.TokenError:
        return False
    except SyntaxError:  # an indentation problem: the line still starts a statement
        return True
    return True


@dataclass
class Cell:
    number: int
    #: The cell's text as the notebook holds it.
    source: str
    #: What the engine sees of it: escapes masked, ending with a line break unless empty.
    python: str
    #: Each masked line as it was, with the indentation its mask was given.
    masked: List[Tuple[str, str]] = field(default_factory=list)
    #: Row of its first line in the joined text.
    first_row: int = 1

    def unmasked(self, lines: List[str]) -> str:
        """The cell's text from its lines in the joined text: masks replaced by the lines they
        hide (re-indented only where a fix moved them into or out of a block)."""
        pending = iter(self.masked)
        out = []
        for line in lines:
            body = line.rstrip("\r\n")
            if body.strip() != MASK:
                out.append(line)
                continue
            original, indent = next(pending, (None, None))
            if original is None:
                raise CellsMoved(f"cell {self.number} has a masked line too many")
            now = body[:len(body) - len(body.lstrip())]
            if now != indent:
                original = now + (original[len(indent):] if original.startswith(indent) else original.lstrip())
            out.append(original.rstrip("\r\n") + line[len(body):])
        if next(pending, None) is not None:
            raise CellsMoved(f"cell {self.number} lost a masked line")
        text = "".join(out)
        if self.source and not self.source.endswith(("\n", "\r")) and text.endswith("\n"):
            text = text[:-2] if text.endswith("\r\n") else text[:-1]
        return text


def masked_cell(number: int, source: str) -> Optional[Cell]:
    """The cell with IPython's syntax masked; None when a cell magic makes it another language."""
    lines = physical_lines(source, keepends=True)
    first = lines[0].lstrip() if lines else ""
    if first.startswith("%%") and (first[2:].split() or [""])[0] not in PYTHON_CELL_MAGICS:
        return None
    cell = Cell(number, source, "")
    out: List[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if not (_is_escape(line) and _starts_statement("".join(out))):
            out.append(line)
            index += 1
            continue
        indent = line[:len(line) - len(line.lstrip())]
        while True:  # a backslash at the end continues the escape on the next line
            body = line.rstrip("\r\n")
            out.append(indent + MASK + line[len(body):])
            cell.masked.append((line, indent))
            index += 1
            if not body.endswith("\\") or index == len(lines):
                break
            line = lines[index]
    cell.python = "".join(out)
    if cell.python and not cell.python.endswith(("\n", "\r")):
        cell.python += "\n"
    return cell


class JoinedCells:
    """Code cells, given as ``(number, source)`` in order, joined into one module (``python``)."""

    def __init__(self, sources: Iterable[Tuple[int, str]]) -> None:
        self.cells: List[Cell] = []
        parts: List[str] = []
        row = 1
        for number, source in sources:
            cell = masked_cell(number, source)
            if cell is None:
                continue
            if self.cells:
                parts.append(separator(number) + "\n")
                row += 1
            cell.first_row = row
            self.cells.append(cell)
            parts.append(cell.python)
            row += len(physical_lines(cell.python))
        self.python = "".join(parts)
        self._first_rows = [cell.first_row for cell in self.cells]
        self._lines = {cell.number: physical_lines(cell.source, keepends=True) for cell in self.cells}
        self._by_number = {cell.number: cell for cell in self.cells}

    def cell(self, number: int) -> Cell:
        return self._by_number[number]

    def locate(self, row: int, column: int) -> Tuple[int, int, int]:
        """``(cell, row, column)`` of a joined-text position; a separator's row is the end of
        the cell above it."""
        if not self.cells:
            return 1, row, column
        cell = self.cells[max(0, bisect_right(self._first_rows, row) - 1)]
        lines = self._lines[cell.number]
        inner = row - cell.first_row + 1
        if inner <= len(lines):
            return cell.number, inner, column
        if not lines:
            return cell.number, 1, 1
        if lines[-1].endswith(("\n", "\r")):
            return cell.number, len(lines) + 1, 1
        return cell.number, len(lines), len(lines[-1]) + 1

    def joined_row(self, number: int, row: int) -> int:
        return self._by_number[number].first_row + row - 1

    def split(self, python: str) -> Dict[int, str]:
        """Each cell's text in ``python`` (the joined text after a fix); raises ``CellsMoved``."""
        chunks: List[List[str]] = [[]]
        numbers = [self.cells[0].number] if self.cells else []
        for line in physical_lines(python, keepends=True):
            number = separator_number(line.rstrip("\r\n"))
            if number is None:
                chunks[-1].append(line)
            else:
                chunks.append([])
                numbers.append(number)
        if numbers != [cell.number for cell in self.cells] or (not self.cells and python):
            raise CellsMoved("the cells' separators moved")
        return {cell.number: cell.unmasked(chunk) for cell, chunk in zip(self.cells, chunks)}
