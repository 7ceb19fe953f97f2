"""Jupyter notebooks (``.ipynb``, nbformat 4): read, checked as their code cells joined
(``syntax/cells.py``), findings given back relative to each cell, fixes written back.

- Only code cells are checked, and only in a Python notebook (a kernel or language of another
  name leaves none to check). Markdown and raw cells, outputs, execution counts, ids and
  metadata are never changed; a cell's ``source`` keeps its form (a list of lines or a string).
- A fix is written only when re-serialising the notebook as read gives back its bytes exactly
  (its indentation, key order, escapes in either case (Colab writes ``\u001B``), line endings,
  final newline; ``json`` keeps key order): otherwise the file is reported and left as it is,
  never reformatted.
- A file that is not JSON, or not nbformat 4, is a one-line error and is never rewritten.
- Cells are numbered from 1 among all cells, markdown included, as an editor shows them:
  ``train.ipynb:cell 3:2:5``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Dict, List, Tuple

from ..model.errors import FileProblem
from ..model.findings import Edit, FileResult, Finding, Location
from ..syntax.cells import CellsMoved, JoinedCells
from ..syntax.lines import physical_lines
from ..syntax.diffs import unified_diff

NOTEBOOK_SUFFIX = ".ipynb"
_SYNTAX_AT = re.compile(r"syntax error at (\d+):(\d+):")
#: A ``\uXXXX`` escape (or an escaped backslash, which the next ``u`` does not belong to).
_ESCAPE = re.compile(r"\\\\|\\u[0-9a-fA-F]{4}")
_UPPER_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u[0-9A-F]{0,3}[A-F]")
_SENTINEL = re.compile(r"\\u0000torchdevice:(\d+):(\d+)\"")


class NotebookError(FileProblem):
    """A notebook that cannot be read, or written back as it was; the message is one line."""


def is_notebook(path: str) -> bool:
    return path.endswith(NOTEBOOK_SUFFIX)


def cell_key(path: str, number: int) -> str:
    """The key of a cell's text among the texts code frames are cut from."""
    return f"{path}:cell {number}"


def _source_text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _is_python(document: dict) -> bool:
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return True
    names = [
        (metadata.get("language_info") or {}).get("name") if isinstance(metadata.get("language_info"), dict) else None,
        (metadata.get("kernelspec") or {}).get("language") if isinstance(metadata.get("kernelspec"), dict) else None,
    ]
    return all(name is None or str(name).lower() == "python" for name in names)


def _valid_cell(cell) -> bool:
    if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
        return False
    source = cell.get("source")
    return isinstance(source, str) or (isinstance(source, list) and all(isinstance(line, str) for line in source))


@dataclasses.dataclass
class Notebook:
    path: str
    #: The JSON text as read.
    text: str
    document: dict
    cells: JoinedCells

    # -- writing -------------------------------------------------------------------------------
    def with_python(self, python: str) -> "Notebook":
        """The notebook whose code cells are ``python`` (the joined text after a fix), its
        other bytes as they were; raises ``NotebookError`` where that cannot be written."""
        if python == self.cells.python:
            return self
        try:
            sources = self.cells.split(python)
        except CellsMoved:
            raise NotebookError(f"{self.path}: error: a fix would move code between cells; notebook left unchanged") from None
        cells = list(self.document["cells"])
        for number, source in sources.items():
            cell = cells[number - 1]
            if source != _source_text(cell):
                lines = physical_lines(source, keepends=True)
                cells[number - 1] = {**cell, "source": source if isinstance(cell["source"], str) else lines}
        text = _dumps({**self.document, "cells": cells}, self._layout())
        fixed = parse_notebook(self.path, text)
        if fixed.cells.python != python:
            raise NotebookError(f"{self.path}: error: the fixed cells would not read back as fixed; notebook left unchanged")
        return fixed

    def _layout(self) -> dict:
        """The ``json.dumps`` arguments that give back ``text`` from ``document``."""
        match = re.match(r"\{\r?\n([ ]*)\S", self.text)
        indents = [len(match.group(1))] if match else [None]
        separators = [(",", ": ")] if match else [(", ", ": "), (",", ":")]
        newline = "\r\n" if "\r\n" in self.text else "\n"
        upper = bool(_UPPER_ESCAPE.search(self.text))
        for indent in indents:
            for pair in separators:
                for ascii_only in (False, True):
                    layout = {"indent": indent, "separators": pair, "ensure_ascii": ascii_only, "newline": newline,
                              "final": self.text.endswith(("\n", "\r")), "upper": upper}
                    if _dumps(self.document, layout) == self.text:
                        return layout
        raise NotebookError(
            f"{self.path}: error: the notebook's JSON layout cannot be reproduced, so it is not rewritten; file left unchanged"
        )

    # -- positions -----------------------------------------------------------------------------
    def in_cells(self, result: FileResult) -> FileResult:
        return result_in_cells(self.cells, result)

    def cell_texts(self) -> Dict[str, str]:
        """Each checked cell's text, by ``cell_key``."""
        return {cell_key(self.path, cell.number): cell.source for cell in self.cells.cells}

    def json_rows(self) -> Dict[Tuple[int, int], int]:
        """The row of the notebook's JSON text that holds each (cell, row) of a cell kept as a
        list of lines; empty when the layout cannot be reproduced or puts no line on a row."""
        try:
            layout = self._layout()
        except NotebookError:
            return {}
        if layout["indent"] is None:
            return {}
        cells = list(self.document["cells"])
        for cell in self.cells.cells:
            original = cells[cell.number - 1]
            if isinstance(original["source"], list):
                marks = [f"\0torchdevice:{cell.number}:{row}" for row in range(1, len(original["source"]) + 1)]
                cells[cell.number - 1] = {**original, "source": marks}
        rows = {}
        for row, line in enumerate(_dumps({**self.document, "cells": cells}, layout).splitlines(), start=1):
            match = _SENTINEL.search(line)
            if match:
                rows[int(match.group(1)), int(match.group(2))] = row
        return rows


def result_in_cells(cells: JoinedCells, result: FileResult) -> FileResult:
    """``result`` of the joined cells with every position relative to its cell."""
    error = result.error
    if error is not None:
        message = _SYNTAX_AT.sub(lambda m: "syntax error at cell {}:{}:{}:".format(*cells.locate(int(m.group(1)), int(m.group(2)))), error.message)
        error = dataclasses.replace(error, message=message)
    return dataclasses.replace(result, findings=[finding_in_cells(cells, f) for f in result.findings], error=error)


def finding_in_cells(cells: JoinedCells, finding: Finding) -> Finding:
    number, row, column = cells.locate(finding.location.row, finding.location.column)
    end_number, end_row, end_column = cells.locate(finding.end_location.row, finding.end_location.column)
    if end_number != number:  # never across cells: the end of the cell it starts in
        end_row, end_column = row, column
    fix = finding.fix
    if fix is not None and fix.edits:
        fix = dataclasses.replace(fix, edits=edits_in_cells(cells, fix.edits))
    return dataclasses.replace(finding, location=Location(row, column), end_location=Location(end_row, end_column), fix=fix, cell=number)


def edits_in_cells(cells: JoinedCells, edits: List[Edit]) -> List[Edit]:
    """Edits of the joined text as whole-line edits of the cells they change (a fix in one cell
    may add the device binding to another); none where they would move a separator."""
    from ..engine.edits import line_edits  # LibCST: only once a finding has edits

    try:
        sources = cells.split(_applied(cells.python, edits))
    except CellsMoved:
        return []
    return [
        dataclasses.replace(edit, cell=number)
        for number, source in sources.items()
        if source != cells.cell(number).source
        for edit in line_edits(cells.cell(number).source, source)
    ]


def _dumps(document: dict, layout: dict) -> str:
    text = json.dumps(document, indent=layout["indent"], separators=layout["separators"], ensure_ascii=layout["ensure_ascii"])
    text += "\n" if layout["final"] else ""
    if layout["upper"]:
        text = _ESCAPE.sub(lambda match: match.group()[:2] + match.group()[2:].upper(), text)
    return text.replace("\n", layout["newline"]) if layout["newline"] != "\n" else text


def _applied(text: str, edits: List[Edit]) -> str:
    """``text`` with ``edits`` (1-based rows and code-point columns) applied."""
    lines = physical_lines(text, keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(location: Location) -> int:
        if location.row > len(lines):
            return len(text)
        return starts[location.row - 1] + location.column - 1

    for edit in sorted(edits, key=lambda e: (e.location.row, e.location.column), reverse=True):
        text = text[:offset(edit.location)] + edit.content + text[offset(edit.end_location):]
    return text


def parse_notebook(path: str, text: str) -> Notebook:
    """The notebook in ``text``; raises ``NotebookError`` for one that is not JSON or not nbformat 4."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"{path}: error: not a notebook: invalid JSON at {error.lineno}:{error.colno}: {error.msg}") from None
    except (RecursionError, ValueError) as error:
        raise NotebookError(f"{path}: error: not a notebook: {error.__class__.__name__}") from None
    if not isinstance(document, dict) or "nbformat" not in document:
        raise NotebookError(f"{path}: error: not a notebook: no nbformat field")
    if document["nbformat"] != 4:
        raise NotebookError(f"{path}: error: notebook format {document['nbformat']!r} is not supported (only nbformat 4); skipped")
    cells = document.get("cells")
    if not isinstance(cells, list) or not all(_valid_cell(cell) for cell in cells):
        raise NotebookError(f"{path}: error: not a notebook: 'cells' must be a list of cells, each with a cell_type and a source")
    code = [(number, _source_text(cell)) for number, cell in enumerate(cells, start=1) if cell["cell_type"] == "code"]
    return Notebook(path, text, document, JoinedCells(code if _is_python(document) else []))


def notebook_diff(path: str, before: str, after: str) -> str:
    """A unified diff per changed code cell, headed ``a/PATH:cell N``."""
    old, new = parse_notebook(path, before), parse_notebook(path, after)
    chunks = []
    for cell in old.cells.cells:
        fixed = new.cells.cell(cell.number).source
        if fixed != cell.source:
            chunks.extend(
                unified_diff(
                    _ended(cell.source), _ended(fixed), fromfile=f"a/{cell_key(path, cell.number)}", tofile=f"b/{cell_key(path, cell.number)}"
                )
            )
    return "".join(chunks)


def _ended(text: str) -> List[str]:
    """Lines for a diff: the last gets a line break, so the next header starts a line."""
    lines = physical_lines(text, keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines
