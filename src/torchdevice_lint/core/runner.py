"""Running the engine over files: one result per file, errors as one-line messages, and the
fixer's writes. The front ends (CLI, pre-commit) call these."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import libcst as cst

from .engine import Engine, syntax_error_message, to_finding
from .findings import FileError, FileResult
from .fixer import FixError, fix_source
from .sources import SourceError, SourceFile, read_source, write_source


def check_file(engine: Engine, path: str, with_edits: bool = False, source: Optional[SourceFile] = None) -> FileResult:
    try:
        source = source or read_source(path)
    except SourceError as error:
        return FileResult(path, error=FileError(path, str(error).split(": error: ", 1)[-1]))
    return engine.check_source(path, source.text, with_edits=with_edits)


def check_files(
    engine: Engine,
    paths: Sequence[str],
    with_edits: bool = False,
    on_done: Optional[Callable[[str], None]] = None,
) -> List[FileResult]:
    """Check each path; ``on_done(path)`` is called after each file (the progress display)."""
    results = []
    for path in paths:
        results.append(check_file(engine, path, with_edits))
        if on_done is not None:
            on_done(path)
    return results


@dataclass
class FixResult:
    path: str
    original: str = ""
    fixed: str = ""
    applied: Dict[str, int] = field(default_factory=dict)
    remaining: FileResult = None
    error: Optional[FileError] = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.fixed != self.original

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.fixed.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


def fix_file(
    engine: Engine, path: str, unsafe: bool, write: bool, source: Optional[SourceFile] = None
) -> FixResult:
    """Fix one file; with ``write`` the file is replaced atomically, and only if it changed."""
    result = FixResult(path)
    try:
        source = source or read_source(path)
        result.original = source.text
        outcome = fix_source(engine, path, source.text, unsafe)
    except SourceError as error:
        result.error = FileError(path, str(error).split(": error: ", 1)[-1])
        return result
    except cst.ParserSyntaxError as error:
        result.error = FileError(path, syntax_error_message(source.text, error))
        return result
    except FixError as error:
        result.error = FileError(path, str(error))
        return result
    result.fixed = outcome.source
    result.applied = outcome.applied
    result.remaining = FileResult(
        path, findings=[to_finding(path, raw, outcome.final, False) for raw in outcome.remaining]
    )
    if write and result.changed:
        write_source(source, result.fixed)
    return result
