"""Checkpoints a project ships: where the tensors of a ``.pt`` file in the tree were saved, read
without torch.

``torch.load(os.path.join(os.path.dirname(__file__), '../data/pnet.pt'))`` (facenet-pytorch
models/mtcnn.py:34) restores the tensors where they were saved; when the file in the project
holds only CPU storages, no machine lacks that device. The storage locations are the persistent
ids of the file's pickle (``('storage', FloatStorage, '0', 'cpu', 4)``): in ``<name>/data.pkl``
of a zip-format file (torch >= 1.6), or in the main pickle of a legacy file. The pickle's opcodes
are walked with ``pickletools``, never executed. Only files named by a literal in a module that
loads something are read, each once per size and modification time.
"""

from __future__ import annotations

import ast
import io
import os
import pickletools
import re
import zipfile
from typing import Dict, Iterable, List, Optional, Tuple

#: Literal paths of files the model reads: checkpoints by their usual extensions.
CHECKPOINT = re.compile(r"^[\w.\-/]+\.(pt|pth|pth\.tar|ckpt|bin|pkl|tar|model)$")
#: A file larger than this is not read (a shipped model of that size is rare, and reading it costly).
MAX_BYTES = 256 * 1024 * 1024
#: The first pickle of a legacy (non-zip) ``torch.save`` file.
LEGACY_MAGIC = 0x1950A86A20F9469CFC6C

_PUSHES_STRING = {"BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_MEMO_PUT = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GET = {"GET", "BINGET", "LONG_BINGET"}
_TUPLES = {"TUPLE1": 1, "TUPLE2": 2, "TUPLE3": 3}
_MARK = object()

#: (path, size, modification time) -> whether every storage is on the CPU (None: unreadable).
_READ: Dict[Tuple[str, int, int], Optional[bool]] = {}


def checkpoint_literals(node: ast.AST, found: List[str]) -> None:
    """What one node of a module's walk names as a checkpoint file (``'../data/pnet.pt'``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and CHECKPOINT.match(node.value):
        if node.value not in found:
            found.append(node.value)


def shipped_files(candidates: Iterable[str]) -> Dict[str, bool]:
    """Absolute path -> whether it holds CPU storages only, for every one of ``candidate_paths``
    that is a ``torch.save`` file."""
    shipped: Dict[str, bool] = {}
    for path in candidates:
        on_cpu = cpu_only(path)
        if on_cpu is not None:
            shipped[path] = on_cpu
    return shipped


def candidate_paths(root: str, modules: Iterable[Tuple[str, Iterable[str]]]) -> List[str]:
    """Where the files the modules name may be: beside each module, and under the project root."""
    found: Dict[str, None] = {}
    for module, literals in modules:
        for literal in literals:
            for base in (os.path.dirname(module), root):
                found.setdefault(os.path.normpath(os.path.join(base, literal)))
    return list(found)


def cpu_only(path: str) -> Optional[bool]:
    """Whether every tensor storage of the ``torch.save`` file at ``path`` was saved from the
    CPU; None where it is no such file (missing, too large, another format)."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path) or status.st_size > MAX_BYTES:
        return None
    key = (path, status.st_size, status.st_mtime_ns)
    if key not in _READ:
        locations = storage_locations(path)
        _READ[key] = None if locations is None else all(location == "cpu" for location in locations)
    return _READ[key]


def storage_locations(path: str) -> Optional[List[str]]:
    """The location tag of each storage (``'cpu'``, ``'cuda:0'``), or None where the file is not
    a ``torch.save`` file this reader understands."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                names = [name for name in archive.namelist() if name == "data.pkl" or name.endswith("/data.pkl")]
                if len(names) != 1:
                    return None
                return _persistent_locations(io.BytesIO(archive.read(names[0])))
        with open(path, "rb") as handle:
            return _legacy_locations(handle)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, IndexError, KeyError, TypeError):
        return None


def _legacy_locations(handle) -> Optional[List[str]]:
    """A legacy file is pickles one after another: the magic number, the protocol version, the
    system's description, then the object with the storages' persistent ids."""
    magic = _single_value(handle)
    if magic != LEGACY_MAGIC:
        return None
    _single_value(handle)
    _single_value(handle)
    return _persistent_locations(handle)


def _single_value(handle):
    """The value of a pickle holding one integer (the magic number); None for anything else."""
    values = [arg for opcode, arg, _ in pickletools.genops(handle) if opcode.name in ("LONG1", "BININT", "BININT1", "BININT2")]
    return values[0] if len(values) == 1 else None


def _persistent_locations(handle) -> List[str]:
    """The fourth item of every ``('storage', type, key, location, ...)`` persistent id: the
    opcodes are run on a stack of strings, tuples and placeholders."""
    stack: list = []
    memo: dict = {}
    locations: List[str] = []
    for opcode, argument, _ in pickletools.genops(handle):
        name = opcode.name
        if name in _PUSHES_STRING:
            stack.append(argument if isinstance(argument, str) else None)
        elif name == "MARK":
            stack.append(_MARK)
        elif name == "TUPLE":
            start = len(stack) - 1 - stack[::-1].index(_MARK)
            items = tuple(stack[start + 1:])
            del stack[start:]
            stack.append(items)
        elif name in _TUPLES:
            count = _TUPLES[name]
            items = tuple(stack[-count:])
            del stack[-count:]
            stack.append(items)
        elif name in _MEMO_PUT:
            memo[argument] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in _MEMO_GET:
            stack.append(memo[argument])
        elif name in ("BINPERSID", "PERSID"):
            identifier = stack.pop() if name == "BINPERSID" else argument
            if isinstance(identifier, tuple) and len(identifier) > 3 and identifier[0] == "storage":
                locations.append(identifier[3] if isinstance(identifier[3], str) else "unknown")
            else:
                locations.append("unknown")
            stack.append(None)
        else:
            _apply(opcode, stack)
    return locations


def _apply(opcode, stack: list) -> None:
    """Any other opcode: pop what it takes (the items down to the mark, then those below it, for
    the opcodes that take a mark) and push a placeholder for each item it gives."""
    before = opcode.stack_before
    if pickletools.markobject in before:
        start = len(stack) - 1 - stack[::-1].index(_MARK)
        del stack[start:]
        below = before.index(pickletools.markobject)
    else:
        below = len(before)
    if below:
        del stack[-below:]
    stack.extend(None for _ in opcode.stack_after)
