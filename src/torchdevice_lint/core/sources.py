"""Finding, reading and writing Python files without changing what a fix did not touch:
the encoding (PEP 263 cookie, BOM) and line endings round-trip, writes are atomic."""

from __future__ import annotations

import io
import os
import tempfile
import tokenize
from dataclasses import dataclass
from typing import Iterable, List, Tuple

from .config import Settings, is_excluded


class SourceError(Exception):
    """A file that cannot be read as Python source; the message is one line."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str
    encoding: str


def discover(paths: Iterable[str], settings: Settings) -> Tuple[List[str], List[str]]:
    """Python files under ``paths`` (directories walked, excludes applied to what the walk
    finds; a file named explicitly is always checked), and one-line errors for missing paths."""
    files: List[str] = []
    errors: List[str] = []
    seen = set()
    for path in paths:
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.isdir(path):
            candidates = _walk(path, settings)
        else:
            errors.append(f"{path}: error: no such file or directory")
            continue
        for candidate in candidates:
            key = os.path.normpath(candidate)
            if key not in seen:
                seen.add(key)
                files.append(candidate)
    return files, errors


def _walk(root: str, settings: Settings) -> List[str]:
    found = []
    for directory, subdirectories, filenames in os.walk(root):
        subdirectories[:] = sorted(
            d for d in subdirectories
            if not os.path.islink(os.path.join(directory, d))
            and not is_excluded(os.path.join(directory, d) + "/", settings)
        )
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                path = os.path.join(directory, filename)
                if not is_excluded(path, settings):
                    found.append(path)
    return found


def decode(path: str, raw: bytes) -> SourceFile:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        text = raw.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise SourceError(f"{path}: error: cannot decode file: {reason}") from None
    return SourceFile(path, text, encoding)


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise SourceError(f"{path}: error: cannot read file: {error.strerror or error}") from None
    return decode(path, raw)


def write_source(source: SourceFile, text: str) -> None:
    """Replace the file atomically (temporary file + rename), keeping its mode bits."""
    path = source.path
    data = text.encode(source.encoding)
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    handle, temporary = tempfile.mkstemp(prefix=".torchdevice-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
