"""Running the engine over files: one result per file, errors as one-line messages, and the
fixer's writes. The front ends (CLI, pre-commit) call these.

Nothing a single file does stops the run: read, parse and write problems become that file's
``FileError``, and so do an unexpected exception (reported as an internal error to file as a
bug) and an analysis that outlasts ``per-file-timeout``, so the other files are still checked
and fixed."""

from __future__ import annotations

import contextlib
import signal
import threading
from dataclasses import dataclass, field
from typing import Dict, Iterator, Optional

from ..engine.engine import Engine, to_finding
from ..model.errors import FileError, OverBudget, file_error
from ..model.findings import FileResult
from ..syntax.lines import physical_lines
from ..syntax.diffs import unified_diff
from .notebooks import notebook_diff
from .sources import SourceChanged, SourceError, SourceFile, read_source, write_source

#: How often a fix is recomputed when the file keeps changing on disk before it can be written.
WRITE_ATTEMPTS = 3


def fix_source(engine: Engine, path: str, text: str, unsafe: bool):
    """``analysis.fixer.fix_source``, imported when the first file is fixed: it needs LibCST,
    which a ``check`` of files without candidates never imports."""
    from ..engine.fixer import fix_source as fix

    return fix(engine, path, text, unsafe)


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise ``OverBudget`` in the block once it has used ``seconds`` of CPU time (user time:
    a busy machine does not make a file time out). Main thread of a process with
    ``setitimer`` only; elsewhere, and for 0, no limit. Native code, such as LibCST's parser,
    is interrupted when it returns to Python."""
    if not seconds or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(number, frame):
        raise OverBudget(seconds)

    previous = signal.signal(signal.SIGVTALRM, expire)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def check_file(engine: Engine, path: str, with_edits: bool = False, source: Optional[SourceFile] = None) -> FileResult:
    budget = engine.settings.per_file_timeout
    try:
        source = source or read_source(path)
        with time_limit(budget):
            result = engine.check_source(path, source.python, with_edits=with_edits)
            return result if source.notebook is None else source.notebook.in_cells(result)
    except (OverBudget, Exception) as error:  # noqa: BLE001 - one file's bug must not end the run
        return FileResult(path, error=file_error(path, error))


@dataclass
class FixResult:
    path: str
    original: str = ""
    fixed: str = ""
    applied: Dict[str, int] = field(default_factory=dict)
    remaining: FileResult = None
    error: Optional[FileError] = None
    #: What was read, so the write can tell whether the file changed since.
    source: Optional[SourceFile] = None

    @property
    def changed(self) -> bool:
        return self.error is None and self.fixed != self.original

    def diff(self) -> str:
        if self.source is not None and self.source.notebook is not None:
            return notebook_diff(self.path, self.original, self.fixed)
        return "".join(
            unified_diff(
                physical_lines(self.original, keepends=True),
                physical_lines(self.fixed, keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            )
        )


class StopOnInterrupt:
    """While active (main thread only), a first SIGINT asks the run to stop after the file at
    hand rather than raising ``KeyboardInterrupt`` inside it: library code can swallow or wrap
    an interrupt raised in the middle of a parse. A second SIGINT interrupts at once (writes
    still finish, see ``sources.write_source``)."""

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def _handle(self, number, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> "StopOnInterrupt":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


def fix_file(
    engine: Engine, path: str, unsafe: bool, write: bool, source: Optional[SourceFile] = None
) -> FixResult:
    """Fix one file; with ``write`` the file is replaced atomically, and only if it changed.
    If the file changes on disk between the read and the write, the fix is recomputed from the
    new contents (a few times), never written over the other change."""
    for _ in range(WRITE_ATTEMPTS):
        result = _fix_once(engine, path, unsafe, source)
        if result.error is not None or not (write and result.changed):
            return result
        try:
            write_source(result.source, result.fixed)
            return result
        except SourceChanged:
            source = None  # re-read and fix what is there now
        except SourceError as error:
            return _unwritten(result, file_error(path, error))
    return _unwritten(result, FileError(path, "file kept changing on disk while it was being fixed; left as it is"))


def _unwritten(result: FixResult, error: FileError) -> FixResult:
    """A fix that could not be written: nothing was fixed, and the file's findings are those of
    the error line, not of the text that was never written."""
    result.error = error
    result.applied = {}
    result.remaining = None
    return result


def _fix_once(engine: Engine, path: str, unsafe: bool, source: Optional[SourceFile]) -> FixResult:
    result = FixResult(path)
    budget = engine.settings.per_file_timeout
    try:
        source = source or read_source(path)
        result.source = source
        result.original = source.text
        with time_limit(budget):
            outcome = fix_source(engine, path, source.python, unsafe)
            remaining = FileResult(path, findings=[to_finding(path, raw, outcome.final, False) for raw in outcome.remaining])
            notebook = source.notebook and source.notebook.with_python(outcome.source)
    except (OverBudget, Exception) as error:  # noqa: BLE001 - one file's bug must not end the run
        result.error = file_error(path, error)
        return result
    result.fixed = outcome.source if notebook is None else notebook.text
    result.applied = outcome.applied
    result.remaining = remaining if notebook is None else notebook.in_cells(remaining)
    return result
