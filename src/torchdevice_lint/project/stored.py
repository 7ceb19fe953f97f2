"""Module facts by content hash: kept in memory for a run (``FactsCache``), and the form they are
stored in between runs (``facts_entry``/``facts_from_entry``: marshal bytes with a checksum),
with the trees parsed for them kept for the first stage.
"""

from __future__ import annotations

import ast
import base64
import dataclasses
import hashlib
import json
import marshal
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional, Tuple

from ..syntax.ast_parse import Unparsable, compile_python, source_encoding
from . import calls as project_calls
from .configs import CONFIG_SUFFIXES, MAX_CONFIG_BYTES, config_key, config_options
from .facts import ModuleFacts, module_facts

#: A PEP 263 declaration, anywhere in a buffer's first two lines.
_CODING = re.compile(r"coding[:=]")
#: A module larger than this is left out of the model (as the source reader refuses to check it).
MAX_FILE_BYTES = 4 * 1024 * 1024
#: Source characters whose trees are kept for the first stage at a time (``KeptTrees``).
MAX_KEPT_CHARACTERS = 4 * 1024 * 1024


class FactsCache:
    """Module facts by content hash, so a second run (or another worker) reads each file's bytes
    but parses only the changed ones. ``stored`` are entries of an earlier run (the results cache
    directory keeps them), turned into facts by ``read`` (None: a bad entry) only when a project
    asks for them; ``parsed`` counts the modules this run had to parse."""

    def __init__(
        self, stored: Optional[Dict[str, object]] = None,
        read: Optional[Callable[[str, object], Optional[ModuleFacts]]] = None,
    ) -> None:
        self.by_hash: Dict[str, ModuleFacts] = {}
        self.stored = dict(stored or {})
        # a module-level function, not a lambda: the cache travels to worker processes
        self._read = read if read is not None else _nothing_stored
        self.parsed = 0
        #: The hashes of the modules this run's projects hold: what a save keeps.
        self.used: set = set()

    def knows(self, key: str) -> bool:
        return key in self.by_hash or key in self.stored

    def facts_of(self, file: Path, key: str, data: Optional[bytes], trees: Optional["KeptTrees"] = None) -> ModuleFacts:
        """The facts of the module (or YAML config) whose bytes hash to ``key``: stored, or parsed from ``data``
        (its bytes as hashed; read again from ``file`` where not given, for an entry that turned
        out bad, and then believed only if they still hash to ``key``)."""
        if key not in self.by_hash and key in self.stored:
            facts = self._read(key, self.stored.pop(key))
            if facts is not None:
                self.by_hash[key] = facts
        if key not in self.by_hash:
            config = file.suffix in CONFIG_SUFFIXES
            if data is None:
                data = regular_file_bytes(file, MAX_CONFIG_BYTES if config else MAX_FILE_BYTES)
                if data is None or (config_key(data) if config else hashlib.sha256(data).hexdigest()) != key:
                    return ModuleFacts()  # changed since it was hashed: judged with no facts this run
            text = None if config else _text_as_checked(data)
            if config:  # a YAML config: its device settings
                self.by_hash[key] = ModuleFacts(options=config_options(data))
            elif text is None:
                self.by_hash[key] = parse_facts_of(data)
            else:  # parsed as the first stage parses it, which may then take the tree
                tree = _compiled(text)
                self.by_hash[key] = module_facts(tree) if tree is not None else unparsable_facts(data)
                if tree is not None and trees is not None:
                    trees.keep(str(file), text, tree)
            self.parsed += 1
        return self.by_hash[key]


def _nothing_stored(key: str, entry: object) -> Optional[ModuleFacts]:
    return None


class KeptTrees:
    """The CPython trees the model parsed of the files the run checks, kept until the first stage
    asks for them (``take``), so each file is parsed by CPython once. At most ``budget``
    characters of source are kept at a time (a tree takes about 40 bytes of memory a character):
    beyond that, the first stage parses the file again. Trees never travel to another process."""

    def __init__(self, checked: Iterable[str] = (), budget: int = MAX_KEPT_CHARACTERS) -> None:
        self.checked = frozenset(os.path.abspath(path) for path in checked)
        self.budget = budget
        self._kept: Dict[str, Tuple[str, ast.Module]] = {}

    def keep(self, path: str, text: str, tree: ast.Module) -> None:
        if path in self.checked and len(text) <= self.budget:
            self._kept[path] = (text, tree)
            self.budget -= len(text)

    def take(self, path: str, text: str) -> Optional[ast.Module]:
        """The tree kept for ``path`` if it was parsed from ``text``, else None; kept no longer."""
        kept = self._kept.pop(os.path.abspath(path), None)
        if kept is None:
            return None
        self.budget += len(kept[0])
        return kept[1] if kept[0] == text else None

    def __getstate__(self) -> dict:
        return {**vars(self), "_kept": {}}


def regular_file_bytes(file: Path, limit: int = MAX_FILE_BYTES) -> Optional[bytes]:
    """The bytes of a regular file of at most ``limit`` bytes; None for anything else. Opened
    without blocking and checked on the open file: a FIFO named ``x.py`` must not stall the run."""
    try:
        descriptor = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _text_as_checked(data: bytes) -> Optional[str]:
    """The text the checker reads from ``data`` (``app.sources.decode``: in the encoding its BOM or
    coding declaration names, else UTF-8), or None where it cannot decode it."""
    try:
        return data.decode(source_encoding(data))
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None


def parsed_as_checked(text: str) -> Optional[ast.Module]:
    """The ``ast`` the first stage would parse from ``text``; None where it fails, or where a
    coding declaration (searched for broadly) could make the bytes read otherwise."""
    if _CODING.search("\n".join(text.split("\n", 2)[:2])):
        return None
    try:
        return compile_python(text)
    except Unparsable:
        return None


def _compiled(text: str) -> Optional[ast.Module]:
    try:
        return compile_python(text)
    except Unparsable:
        return None


def parse_facts_of(data: bytes) -> ModuleFacts:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(data, "<project>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return unparsable_facts(data)
    return module_facts(tree)


def unparsable_facts(data: bytes) -> ModuleFacts:
    """The facts of a module CPython cannot parse: its top-level imports, and every word of it
    as a name it may use (its calls cannot be told from the rest: hszhao/PointWeb@f31fe05
    model/pointweb/pointweb_seg.py, lyndonzheng/Pluralistic-Inpainting@034a758
    model/pluralistic_model.py call the project's functions)."""
    facts = module_facts(top_level_imports(data))
    facts.calls.mentions = sorted({word.decode() for word in WORD.findall(data)})
    return facts


#: A word of a file's bytes: a name it may use.
WORD = re.compile(rb"[A-Za-z_]\w*")
#: A top-level import's first line, in a module CPython cannot parse.
_IMPORT_LINE = re.compile(rb"^(?:from\s+[\w.]+\s+import\b|import\s+\w)")


def top_level_imports(data: bytes) -> ast.Module:
    """The top-level imports of a module CPython cannot parse (a Python 2 file, hszhao/PointWeb
    @f31fe05 model/pointweb/pointweb_seg.py:74 ``cuda(async=True)``), each parsed alone at its
    own line: the modules it imports are still the project's to know (a ``__main__`` block of
    one of them is then a self-test, not a program)."""
    lines = data.splitlines()
    body = []
    index = 0
    while index < len(lines):
        if not _IMPORT_LINE.match(lines[index]):
            index += 1
            continue
        first = index
        text = lines[index]
        while (text.rstrip().endswith(b"\\") or text.count(b"(") > text.count(b")")) and index + 1 < len(lines) and index - first < 50:
            index += 1
            text += b"\n" + lines[index]
        index += 1
        try:
            statement = compile(text, "<import>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        for node in statement.body:
            body.append(ast.increment_lineno(node, first))
    return ast.Module(body=body, type_ignores=[])


def prints_checksum(digest: str, entry: dict) -> str:
    return hashlib.sha256((digest + "\n" + json.dumps(entry, sort_keys=True)).encode("utf-8", "surrogatepass")).hexdigest()


def facts_checksum(key: str, payload: bytes) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass") + b"\n" + payload).hexdigest()


def facts_entry(key: str, facts: ModuleFacts) -> list:
    payload = marshal.dumps(_plain(dataclasses.astuple(facts)))
    return [base64.b64encode(payload).decode("ascii"), facts_checksum(key, payload)]


def _plain(value):
    """Tuples (``CallFacts`` records too), lists and dicts as ``marshal`` writes them."""
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def facts_from_entry(key, entry) -> Optional[ModuleFacts]:
    if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)):
        return None
    encoded, checksum = entry
    try:
        payload = base64.b64decode(encoded, validate=True)
    except ValueError:
        return None
    if checksum != facts_checksum(key, payload):
        return None
    try:
        fields = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if not (isinstance(fields, tuple) and len(fields) == 28):
        return None
    options, unknown, copies, predicates, saved, kernels, call_fields, checkpoints = fields[:8]
    imports, stars, public, devices, classes, mentions_mps, rebound, availability_rebound, off_rebound, saving_classes, factories, weights_on_cpu, saves, cpu_saves, failing, stored, by_name, passed, read_keys, written_keys = fields[8:]
    calls = project_calls.shaped(call_fields)
    if calls is None:
        return None
    return ModuleFacts(
        options, unknown, copies, predicates, saved, kernels, calls, checkpoints, imports, stars, public, devices, classes,
        mentions_mps, rebound, availability_rebound, off_rebound, saving_classes, factories, weights_on_cpu,
        saves, cpu_saves, failing, stored, by_name, passed, read_keys, written_keys,
    )

