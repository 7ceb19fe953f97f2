"""Reading and writing Python files without changing what a fix did not touch.

What happens to each kind of input (every problem is one line on stderr and the run goes on):

- The encoding (PEP 263 cookie, UTF-8 BOM), line endings (LF, CRLF, CR), tabs and a missing
  final newline round-trip byte for byte: the text is decoded from the bytes as they are and
  encoded back with the same codec; nothing is normalised.
- Empty files are valid Python and simply have no findings.
- A notebook (``.ipynb``) is read as JSON (``notebooks.py``): the engine checks its code cells
  joined (``SourceFile.python``), and a fix writes the whole JSON text back.
- Bytes that do not decode in the declared encoding, NUL bytes, files larger than
  ``MAX_FILE_BYTES``, anything that is not a regular file (a FIFO named ``x.py`` would block the
  read) and unreadable files are errors for that file only.
- A symbolic link named on the command line is followed, and a fix is written to the file it
  points to, so the link stays a link (``discovery`` skips links met while walking).
- Writes are atomic: a temporary file in the same directory, fsynced, given the original's mode
  bits, then renamed over the target. Under an exclusive lock on the target, just before the
  rename, the bytes on disk are compared with the bytes the fix was computed from; if another
  process changed the file in between, ``SourceChanged`` is raised and nothing is written. A file
  with other hard links is rewritten in place under the lock instead, so every name sees the fix.
  A file without any write permission bit is read-only even for root. SIGINT, SIGTERM and SIGHUP
  are held back during the write, so a stopped run leaves each file old or new and no temporary
  file behind; after SIGKILL, the next write into that directory removes the temporary file.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import stat
import tempfile
import threading
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Set

from ..model.errors import FileProblem
from ..syntax.ast_parse import source_encoding
from .notebooks import Notebook, is_notebook, parse_notebook

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: atomic replace without the cross-process lock
    fcntl = None

#: Larger files are generated data, not code to fix; LibCST would take minutes on them.
MAX_FILE_BYTES = 4 * 1024 * 1024


class SourceError(FileProblem):
    """A file that cannot be read or written as Python source; the message is one line."""


class SourceChanged(SourceError):
    """The file on disk is no longer the one the fix was computed from."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    encoding: str
    #: The bytes read, to detect a change on disk before a fix is written over them.
    raw: Optional[bytes] = None
    #: A notebook's cells, for a ``.ipynb`` file (``text`` is then its JSON).
    notebook: Optional[Notebook] = None

    @property
    def python(self) -> str:
        """The text the engine checks: the file's, or a notebook's code cells joined."""
        return self.text if self.notebook is None else self.notebook.cells.python

    def texts_by_frame(self) -> Dict[str, str]:
        """The texts code frames are cut from: the file's, and each checked cell's of a notebook."""
        return {self.path: self.text, **(self.notebook.cell_texts() if self.notebook else {})}


def decode(path: str, raw: bytes) -> SourceFile:
    if b"\0" in raw:
        raise SourceError(f"{path}: error: file contains NUL bytes, so it is not Python source")
    if is_notebook(path):
        try:
            text = raw.decode("utf-8")
            return SourceFile(path, text, "utf-8", raw, parse_notebook(path, text))
        except UnicodeDecodeError as error:
            raise SourceError(f"{path}: error: cannot decode notebook: {error}") from None
        except FileProblem as error:
            raise SourceError(str(error)) from None
    try:
        encoding = source_encoding(raw)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise SourceError(f"{path}: error: cannot decode file: {reason}") from None
    return SourceFile(path, text, encoding, raw)


def read_source(path: str) -> SourceFile:
    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            raise SourceError(f"{path}: error: not a regular file; skipped")
        if status.st_size > MAX_FILE_BYTES:
            raise SourceError(
                f"{path}: error: file is too large ({status.st_size / 2**20:.1f} MiB, "
                f"limit {MAX_FILE_BYTES // 2**20} MiB); skipped"
            )
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise SourceError(f"{path}: error: cannot read file: {error.strerror or error}") from None
    return decode(path, raw)


def write_source(source: SourceFile, text: str) -> None:
    """Replace the file with ``text``, keeping its encoding, mode bits and hard links; raise
    ``SourceChanged`` instead if the file no longer holds ``source.raw``."""
    target = os.path.realpath(source.path)
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as error:
        raise SourceError(f"{source.path}: error: the fix cannot be written in {source.encoding}: {error.reason}") from None
    try:
        with _deferred_signals():
            _write(source, target, data)
    except OSError as error:
        raise SourceError(f"{source.path}: error: cannot write file: {error.strerror or error}") from None


def _write(source: SourceFile, target: str, data: bytes) -> None:
    status = os.stat(target)
    if not status.st_mode & 0o222 or not os.access(target, os.W_OK):  # root may write anything: ask the mode
        raise PermissionError(13, "file is read-only")
    if status.st_nlink > 1:  # a rename would leave the other names with the old text
        with _locked(target) as handle:
            _check_unchanged(source, handle)
            _write_in_place(target, data)
        return
    copy = _Copy(target, data, status)  # written and flushed to disk before the lock is taken
    try:
        with _locked(target) as handle:
            now = os.fstat(handle.fileno())
            if (now.st_mode, now.st_uid, now.st_gid, now.st_nlink) != (status.st_mode, status.st_uid, status.st_gid, 1):
                raise SourceChanged(f"{source.path}: error: file changed on disk while it was being fixed")
            _check_unchanged(source, handle)
            copy.move_to(target)  # right after the comparison: the window is a read and a rename
    finally:
        copy.discard()


def _check_unchanged(source: SourceFile, handle: io.BufferedReader) -> None:
    if source.raw is not None and handle.read() != source.raw:
        raise SourceChanged(f"{source.path}: error: file changed on disk while it was being fixed")


def _write_in_place(target: str, data: bytes) -> None:
    with open(target, "r+b") as stream:
        stream.write(data)
        stream.truncate()
        stream.flush()
        os.fsync(stream.fileno())


#: Temporary files are ``.torchdevice-PID-XXXX.tmp``: a run killed by SIGKILL mid-write leaves
#: one behind, which the next write into that directory removes once PID is gone.
TEMPORARY = re.compile(r"^\.torchdevice-(\d+)-[^/]*\.tmp$")
_swept: Set[str] = set()


class _Copy:
    """The new contents in a temporary file in the target's directory, fsynced, with the
    original's mode bits (and owner where allowed), until ``move_to`` renames it over the target."""

    def __init__(self, target: str, data: bytes, original: os.stat_result) -> None:
        directory = os.path.dirname(target)
        _sweep(directory)
        descriptor, self.name = tempfile.mkstemp(prefix=f".torchdevice-{os.getpid()}-", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
                stream.flush()
                os.fsync(stream.fileno())
                os.fchmod(stream.fileno(), stat.S_IMODE(original.st_mode))
                with contextlib.suppress(OSError):  # only possible as root or for one's own group
                    os.fchown(stream.fileno(), original.st_uid, original.st_gid)
        except BaseException:
            self.discard()
            raise

    def move_to(self, target: str) -> None:
        os.replace(self.name, target)
        self.name = None

    def discard(self) -> None:
        if self.name is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.name)
            self.name = None


def _sweep(directory: str) -> None:
    """Remove the temporary files of runs that were killed mid-write (once per directory)."""
    if directory in _swept:
        return
    _swept.add(directory)
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            match = TEMPORARY.match(name)
            if match and not _alive(int(match.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(directory, name))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process
    return True


@contextlib.contextmanager
def _locked(target: str) -> Iterator[io.BufferedReader]:
    """The target opened for reading under an exclusive ``flock``. Another writer replaces the
    file rather than changing it, so after waiting for the lock we make sure the path still
    names the inode we locked, and reopen it if not."""
    while True:
        handle = open(target, "rb")
        try:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if os.path.samestat(os.fstat(handle.fileno()), os.stat(target)):
                break
        except BaseException:
            handle.close()
            raise
        handle.close()
    try:
        yield handle
    finally:
        handle.close()  # closing releases the lock


#: Signals that end a run and are held back while a file is written.
_DEFERRED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def _deferred_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back until the block is done (main thread only, where
    Python delivers them), then act on them as before: a write is never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: List[int] = []
    previous = {number: signal.signal(number, lambda number, frame: received.append(number)) for number in _DEFERRED}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(received):
            handler = previous[number]
            if callable(handler):
                handler(number, None)
            elif handler == signal.SIG_DFL and number == signal.SIGINT:
                raise KeyboardInterrupt
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), number)  # the default action: end the process, as it would have
