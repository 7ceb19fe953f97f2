"""Reading and writing Python files without changing what a fix did not touch.

What happens to each kind of input (every problem is one line on stderr and the run goes on):

- The encoding (PEP 263 cookie, UTF-8 BOM), line endings (LF, CRLF, CR), tabs and a missing
  final newline round-trip byte for byte: the text is decoded from the bytes as they are and
  encoded back with the same codec; nothing is normalised.
- Empty files are valid Python and simply have no findings.
- Bytes that do not decode in the declared encoding, NUL bytes, files larger than
  ``MAX_FILE_BYTES``, anything that is not a regular file (a FIFO named ``x.py`` would block the
  read) and unreadable files are errors for that file only.
- A symbolic link named on the command line is followed, and a fix is written to the file it
  points to, so the link stays a link (``discovery`` skips links met while walking).
- Writes are atomic: a temporary file in the same directory, fsynced, given the original's mode
  bits, then renamed over the target. Under an exclusive lock on the target, the bytes on disk are
  compared with the bytes the fix was computed from; if another process changed the file in
  between, ``SourceChanged`` is raised and nothing is written. SIGINT is held back during the
  write, so an interrupted run leaves each file old or new and no temporary file behind.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
import tempfile
import threading
import tokenize
from dataclasses import dataclass
from typing import Iterator, Optional


try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: atomic replace without the cross-process lock
    fcntl = None

#: Larger files are generated data, not code to fix; LibCST would take minutes on them.
MAX_FILE_BYTES = 4 * 1024 * 1024


class SourceError(Exception):
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


def decode(path: str, raw: bytes) -> SourceFile:
    if b"\0" in raw:
        raise SourceError(f"{path}: error: file contains NUL bytes, so it is not Python source")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
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
    """Replace the file atomically with ``text``, keeping its encoding and mode bits; raise
    ``SourceChanged`` instead if the file no longer holds ``source.raw``."""
    target = os.path.realpath(source.path)
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as error:
        raise SourceError(f"{source.path}: error: the fix cannot be written in {source.encoding}: {error.reason}") from None
    try:
        with _deferred_interrupt(), _locked(target) as handle:
            if source.raw is not None and handle.read() != source.raw:
                raise SourceChanged(f"{source.path}: error: file changed on disk while it was being fixed")
            _replace(target, data, os.fstat(handle.fileno()))
    except OSError as error:
        raise SourceError(f"{source.path}: error: cannot write file: {error.strerror or error}") from None


def _replace(target: str, data: bytes, original: os.stat_result) -> None:
    if not os.access(target, os.W_OK):
        raise PermissionError(13, "file is read-only")
    handle, temporary = tempfile.mkstemp(prefix=".torchdevice-", suffix=".tmp", dir=os.path.dirname(target))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, stat.S_IMODE(original.st_mode))
        with contextlib.suppress(OSError):  # only possible as root or for one's own group
            os.chown(temporary, original.st_uid, original.st_gid)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


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


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[None]:
    """Hold SIGINT back until the block is done (main thread only, where Python delivers it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)
        elif received and previous == signal.SIG_DFL:
            raise KeyboardInterrupt
