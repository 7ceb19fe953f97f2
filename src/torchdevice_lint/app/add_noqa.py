"""``check --add-noqa``: mark every finding with ``# noqa: CODE`` (ruff's ``--add-noqa``), so a
project can adopt the tool today and fix the backlog later.

The directive goes on the finding's first line, or its last when the first cannot take a comment
(it ends inside a string or with a backslash); an existing ``# noqa: ...`` gets the new codes
added. Files are written like fixes: atomically, and only if unchanged since they were read; a
notebook's cells get their directives and the notebook is written back as a fix is.
"""

from __future__ import annotations

import io
import tokenize
from typing import Dict, List, Optional, Sequence, Set, Tuple

from ..engine.noqa import NOQA, comments, split_codes
from ..model.errors import FileProblem
from ..model.findings import FileResult, Finding
from .sources import SourceError, read_source, write_source


def _commentable_rows(text: str) -> Set[int]:
    """Rows whose end is outside any string and not a line continuation."""
    try:
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        return {t.start[0] for t in tokens if t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT)}
    except (tokenize.TokenError, SyntaxError):
        return set()


def _with_codes(line: str, codes: Sequence[str], comment: Optional[Tuple[int, str]]) -> str:
    """The line with ``codes`` added to its comment's ``# noqa: ...`` (never to a string that
    looks like one), or with a new directive."""
    body = line.rstrip("\r\n")
    ending = line[len(body):]
    match = NOQA.search(comment[1]) if comment else None
    if match is not None and match.group("codes"):
        existing = split_codes(match.group("codes"))
        merged = existing + [code for code in codes if code not in existing]
        start, end = comment[0] + match.start(), comment[0] + match.end()
        return body[:start] + f"# noqa: {', '.join(merged)}" + body[end:] + ending
    return f"{body.rstrip()}  # noqa: {', '.join(codes)}{ending}"


def _joined_rows(source, finding: Finding) -> Tuple[int, int]:
    """The finding's first and last rows in the text the engine checked (a notebook's joined cells)."""
    rows = (finding.location.row, finding.end_location.row)
    if source.notebook is None or finding.cell is None:
        return rows
    return tuple(source.notebook.cells.joined_row(finding.cell, row) for row in rows)


def add_noqa(results: Sequence[FileResult]) -> Tuple[int, List[str]]:
    """Add directives for the findings in ``results``; the number added and one-line errors."""
    added, errors = 0, []
    for result in results:
        if not result.findings:
            continue
        try:
            source = read_source(result.filename)
            rows: Dict[int, List[str]] = {}
            commentable = _commentable_rows(source.python)
            for finding in result.findings:
                row = next((r for r in _joined_rows(source, finding) if r in commentable), None)
                if row is None:
                    errors.append(f"{finding.where}: note: no line of the finding can take a comment")
                elif finding.code not in rows.setdefault(row, []):
                    rows[row].append(finding.code)
            lines = io.StringIO(source.python, newline="").readlines()  # the rows tokenize counts
            directives = comments(source.python)
            for row, codes in rows.items():
                lines[row - 1] = _with_codes(lines[row - 1], codes, directives.get(row))
            if rows:
                text = "".join(lines)
                write_source(source, text if source.notebook is None else source.notebook.with_python(text).text)
                added += len(rows)
        except (SourceError, FileProblem) as error:
            errors.append(str(error))
    return added, errors
