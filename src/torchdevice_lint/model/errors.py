"""What stops one file, and the one line printed for it: the run goes on with the other files."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FileError:
    filename: str
    message: str
    #: Depends on more than the file's bytes (a time limit ran out): never cached.
    transient: bool = False

    def __str__(self) -> str:
        return f"{self.filename}: error: {self.message}"


class FileProblem(Exception):
    """What stops one file (it cannot be read, parsed or fixed): the file gets this one-line
    message instead of findings, and the run goes on."""


class OverBudget(BaseException):
    """A file's time is up. A BaseException, like KeyboardInterrupt, so that no handler of
    ordinary errors between the timer and the runner swallows it."""

    def __init__(self, seconds: float = 0.0) -> None:
        super().__init__(seconds)
        self.seconds = seconds


def file_error(path: str, error: BaseException) -> FileError:
    """The one mapping from what stopped a file to the line printed for it."""
    if isinstance(error, OverBudget):
        return FileError(path, f"took longer than per-file-timeout ({error.seconds:g} CPU seconds); skipped", transient=True)
    if isinstance(error, FileProblem):
        return FileError(path, str(error).split(": error: ", 1)[-1])
    if isinstance(error, RecursionError):
        return FileError(path, "file is nested too deeply to analyse")
    detail = (str(error).strip().splitlines() or [""])[0][:200]
    return FileError(path, f"internal error ({error.__class__.__name__}: {detail}); please report this as a bug")
