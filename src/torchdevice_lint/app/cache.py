"""Results of unchanged files, kept between runs (ruff-style), so a re-run costs a hash per file.

One JSON file per (tool build, settings, output mode) in the cache directory maps each checked
file's absolute path to the SHA-256 of its bytes and its result. A file whose bytes hash the same
gets its stored result back; anything else is checked again. Changing the settings or the tool
(its version, or any of its source files: an editable install changes without a version bump)
selects another cache file, so stale results are never returned. The directory holds nothing
else of value: deleting it only makes the next run cold.

The directory is the tool's own: it must be new or empty when first used, and the tool then
writes its ``CACHEDIR.TAG`` there. A directory that holds anything else and no such tag (a folder
of the user's, named by ``--cache-dir``) is refused, and pruning deletes only files named as
this module names them, in a directory with its tag: never a file it did not write.

An entry is used only if it is exactly what this build writes: each carries a SHA-256 over its
path, digest and result, and the result must match the schema (known rule codes and names,
positive positions, known fix kinds). A truncated, corrupt or hand-edited entry is a miss, never
an error and never a finding. The checksum catches corruption and editing, not someone who
recomputes it: whoever may write the cache directory may as well write the checked files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import stat
import tempfile
import time
import weakref
from pathlib import Path
from typing import Dict, Iterator, Optional, Sequence, Tuple

from .. import __version__
from ..model.errors import FileError
from ..model.findings import Edit, FileResult, Finding, FixInfo, Location
from ..model.fixes import Applicability
from ..model.settings import ConfigError, Settings
from ..project.model import Projects
from ..project.prints import StoredPrints
from ..project.prints import well_formed as prints_well_formed
from ..project.stored import FactsCache, facts_entry, facts_from_entry, prints_checksum
from ..rules import all_rules

CACHE_DIR_NAME = ".torchdevice_cache"
CACHE_DIR_ENV = "TORCHDEVICE_LINT_CACHE_DIR"
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


#: Cache files (one per settings and tool build) unused for this long are deleted, and at most
#: ``MAX_CACHE_FILES`` are kept: each edit of an editable install or of the settings starts one.
MAX_AGE_SECONDS = 30 * 24 * 3600
MAX_CACHE_FILES = 8
#: The tag (https://bford.info/cachedir/) that marks a directory as this tool's cache, and the
#: names of the only files pruning may delete there.
CACHE_TAG = "Signature: 8a477f597d28d172789f06886806bc55\n# torchdevice-lint result cache\n"
_MARKERS = ("CACHEDIR.TAG", ".gitignore")
_CACHE_FILE = re.compile(r"(results|facts)-[0-9a-f]{20}\.json")


def default_cache_dir(settings: Settings, project_root: Optional[Path] = None) -> Path:
    """``$TORCHDEVICE_LINT_CACHE_DIR``, else ``.torchdevice_cache`` in the project root; a
    run outside any project keeps its cache in the user's cache directory instead of writing
    into whatever directory it was started in."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    if project_root is not None:
        return Path(project_root) / CACHE_DIR_NAME
    digest = hashlib.sha256(os.path.abspath(settings.root).encode()).hexdigest()[:16]
    return user_cache_root() / digest


def user_cache_root() -> Path:
    """``$XDG_CACHE_HOME/torchdevice-lint`` (``~/.cache/torchdevice-lint``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "torchdevice-lint"


def is_own_directory(directory: Path) -> bool:
    """Whether ``directory`` holds the tag this tool writes, as a regular file (a link or a
    FIFO planted under that name proves nothing, and is never opened through)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        descriptor = os.open(Path(directory) / "CACHEDIR.TAG", flags)
    except OSError:
        return False
    with os.fdopen(descriptor, "rb") as handle:
        return stat.S_ISREG(os.fstat(descriptor).st_mode) and handle.read(len(CACHE_TAG) + 1) == CACHE_TAG.encode()


def check_cache_directory(directory: Path) -> None:
    """Raise ConfigError unless ``directory`` may be the cache: absent, empty (but for marker
    names), or tagged by this tool."""
    directory = Path(directory)
    if not os.path.lexists(directory) or is_own_directory(directory):
        return
    try:
        foreign = [name for name in os.listdir(directory) if name not in _MARKERS]
    except NotADirectoryError:
        raise ConfigError(f"cache directory {str(directory)!r} is not a directory") from None
    except OSError as error:
        raise ConfigError(f"cache directory {str(directory)!r} cannot be read: {error.strerror}") from None
    if foreign:
        raise ConfigError(
            f"cache directory {str(directory)!r} is not torchdevice-lint's (it holds other files and no CACHEDIR.TAG "
            "of torchdevice-lint), so it is not used: name a new or empty directory, or pass --no-cache"
        )


def prune(directory: Path, keep: Path, now: Optional[float] = None) -> None:
    """Delete cache files of other settings or builds that are old, or beyond the newest few:
    only in a directory tagged as this tool's, and only files named as it names them."""
    now = time.time() if now is None else now
    if not is_own_directory(directory):
        return
    try:
        candidates = [
            (path.stat().st_mtime, path)
            for path in directory.iterdir() if _CACHE_FILE.fullmatch(path.name) and path != keep
        ]
    except OSError:
        return
    candidates.sort(reverse=True)
    in_use = {cache.path for cache in _LIVE}
    seen = {"results": 0, "facts": 0}
    for modified, path in candidates:
        kind = path.name.split("-", 1)[0]
        seen[kind] += 1
        if path in in_use:
            continue
        if seen[kind] > _KEPT[kind] or now - modified > MAX_AGE_SECONDS:
            with contextlib.suppress(OSError):
                path.unlink()


#: The cache objects alive in this process: pruning never deletes their files (a run with more
#: settings groups than ``MAX_CACHE_FILES`` would otherwise delete its own groups' results).
_LIVE: "weakref.WeakSet" = weakref.WeakSet()
#: How many files of each kind pruning keeps besides the one being saved: results of the newest
#: settings and builds, and the project facts of the newest build.
_KEPT = {"results": MAX_CACHE_FILES - 1, "facts": 1}


def _tool_fingerprint() -> str:
    """The version plus the size and modification time of every module of the package."""
    parts = [__version__]
    for path in sorted(_PACKAGE_DIR.rglob("*.py")):
        stat = path.stat()
        parts.append(f"{path.relative_to(_PACKAGE_DIR)}:{stat.st_size}:{stat.st_mtime_ns}")
    return "\n".join(parts)


def content_hash(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


class ResultCache:
    """Load with the settings of this run, ``get``/``put`` per file, ``save`` once at the end."""

    def __init__(self, directory: Path, settings: Settings, with_edits: bool) -> None:
        check_cache_directory(directory)
        self.directory = Path(directory)
        key_material = json.dumps(
            {"tool": _tool_fingerprint(), "settings": dataclasses.asdict(settings), "with_edits": with_edits},
            sort_keys=True,
            default=str,
        )
        self.path = self.directory / f"results-{hashlib.sha256(key_material.encode()).hexdigest()[:20]}.json"
        self._entries: Dict[str, list] = self._load()
        self._changed = False
        _LIVE.add(self)

    def _load(self) -> Dict[str, list]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                entries = json.load(handle)
        except (OSError, ValueError, RecursionError):
            return {}  # absent, unreadable, cut short or not JSON: start cold
        return entries if isinstance(entries, dict) else {}

    def get(self, path: str, digest: str) -> Optional[FileResult]:
        key = os.path.abspath(path)
        entry = self._entries.get(key)
        if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == digest):
            return None
        data = entry[1]
        if entry[2] != _entry_checksum(key, digest, data) or not _valid_result(data):
            return None  # corrupt, edited or from another build: check the file again
        return _result_from_dict(path, data)

    def forget_missing(self) -> None:
        """Drop the entries of files that no longer exist (renamed, deleted)."""
        missing = [path for path in self._entries if not os.path.exists(path)]
        for path in missing:
            del self._entries[path]
        self._changed = self._changed or bool(missing)

    def put(self, path: str, digest: str, result: FileResult) -> None:
        key = os.path.abspath(path)
        data = _result_to_dict(result)
        self._entries[key] = [digest, data, _entry_checksum(key, digest, data)]
        self._changed = True

    def save(self) -> None:
        """Write atomically; a cache that cannot be written only costs the next run its speed,
        and a failed write (a full disk) leaves no temporary file behind."""
        self.forget_missing()
        if not self._changed:
            with contextlib.suppress(OSError):
                os.utime(self.path)  # in use: pruning keeps what runs still read
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _mark_as_cache(self.directory)
            handle, temporary = tempfile.mkstemp(prefix=".results-", suffix=".tmp", dir=self.directory)
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump(self._entries, stream, separators=(",", ":"))
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            return
        prune(self.directory, keep=self.path)


def _mark_as_cache(directory: Path) -> None:
    """Claim the directory as the tool's and tell git and backup tools (CACHEDIR.TAG) to leave
    it alone; the tag first, so a run stopped in between leaves a directory that is its own or
    empty. The files are created, never opened through an existing name: a dangling symbolic
    link planted there would otherwise make the tool write wherever it points."""
    for name, text in (
        ("CACHEDIR.TAG", CACHE_TAG),
        (".gitignore", "# Created by torchdevice-lint; safe to delete.\n*\n"),
    ):
        try:
            descriptor = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        except FileExistsError:
            continue  # there already, or a link: left alone either way
        with os.fdopen(descriptor, "w") as stream:
            stream.write(text)


def _entry_checksum(key: str, digest: str, data) -> str:
    try:
        material = json.dumps([key, digest, data], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return ""
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


_APPLICABILITY = {level.value for level in Applicability}


def _is_location(value) -> bool:
    return (
        isinstance(value, dict) and set(value) == {"row", "column"}
        and all(type(value[k]) is int and value[k] >= 1 for k in value)
    )


def _has_keys(item: dict, keys: set) -> bool:
    """Exactly ``keys``, or those and a notebook's ``cell`` (a positive int)."""
    return set(item) == keys or (set(item) == keys | {"cell"} and type(item["cell"]) is int and item["cell"] >= 1)


def _valid_fix(fix) -> bool:
    return (
        isinstance(fix, dict) and set(fix) == {"applicability", "message", "edits"}
        and fix["applicability"] in _APPLICABILITY and isinstance(fix["message"], str)
        and isinstance(fix["edits"], list)
        and all(
            isinstance(edit, dict) and _has_keys(edit, {"content", "location", "end_location"})
            and isinstance(edit["content"], str) and _is_location(edit["location"]) and _is_location(edit["end_location"])
            for edit in fix["edits"]
        )
    )


def _valid_finding(item, names: Dict[str, str]) -> bool:
    return (
        isinstance(item, dict)
        and _has_keys(item, {"code", "name", "message", "filename", "location", "end_location", "fix", "scope", "statement"})
        and isinstance(item["code"], str) and names.get(item["code"]) == item["name"]
        and isinstance(item["scope"], str) and isinstance(item["statement"], str)
        and isinstance(item["message"], str) and isinstance(item["filename"], str)
        and _is_location(item["location"]) and _is_location(item["end_location"])
        and (item["fix"] is None or _valid_fix(item["fix"]))
    )


def _valid_result(data) -> bool:
    """Whether ``data`` has exactly the shape ``_result_to_dict`` writes."""
    if not (isinstance(data, dict) and set(data) == {"parsed", "error", "findings"}):
        return False
    if type(data["parsed"]) is not bool or not (data["error"] is None or isinstance(data["error"], str)):
        return False
    names = {rule.code: rule.name for rule in all_rules()}
    return isinstance(data["findings"], list) and all(_valid_finding(item, names) for item in data["findings"])


def _location(data: dict) -> Location:
    return Location(data["row"], data["column"])


def _result_to_dict(result: FileResult) -> dict:
    return {
        "parsed": result.parsed,
        "error": result.error.message if result.error else None,
        # with what a baseline matches findings by (``project/baseline.py``), which JSON output leaves out
        "findings": [{**finding.as_dict(), "scope": finding.scope, "statement": finding.statement} for finding in result.findings],
    }


def _result_from_dict(path: str, data: dict) -> FileResult:
    """The stored result, with every file name set to the path as given in this run."""
    findings = []
    for item in data["findings"]:
        fix = item["fix"]
        findings.append(
            Finding(
                code=item["code"],
                name=item["name"],
                message=item["message"],
                filename=path,
                location=_location(item["location"]),
                end_location=_location(item["end_location"]),
                fix=None if fix is None else FixInfo(
                    applicability=Applicability(fix["applicability"]),
                    message=fix["message"],
                    edits=[
                        Edit(edit["content"], _location(edit["location"]), _location(edit["end_location"]), edit.get("cell"))
                        for edit in fix["edits"]
                    ],
                ),
                scope=item["scope"],
                statement=item["statement"],
                cell=item.get("cell"),
            )
        )
    error = data["error"]
    return FileResult(
        filename=path,
        findings=findings,
        error=None if error is None else FileError(path, error),
        parsed=data["parsed"],
    )


class StoredFacts:
    """The project model's module facts by content hash, kept in the cache directory between
    runs (one file per tool build), so a second run parses only the modules that changed.

    Each entry is the facts' fields as ``marshal`` bytes (base64 in a JSON file) with a SHA-256
    over hash and bytes, checked before they are read: ``marshal`` reads what ``literal_eval``
    took 1.2 s for in 700 modules at once, and an entry read back is written back as it was. An
    entry whose checksum is wrong is a miss; one whose checksum holds was written by this build
    (the file is named by it), so its fields are not checked one by one (0.1 s in 536 modules).
    The directory is trusted as Python trusts ``__pycache__``, which holds ``marshal`` data too."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"facts-{hashlib.sha256(_tool_fingerprint().encode()).hexdigest()[:20]}.json"
        #: The entries read back, by hash: saved again as they are, unread or not.
        self._entries: Dict[str, list] = {}
        #: Project fingerprints by project digest (``project.prints``), with their checksums.
        self._prints: Dict[str, list] = {}

    def load(self) -> Tuple[FactsCache, StoredPrints]:
        """The stored module facts, each read only when a project asks for it, and the stored
        project fingerprints whose checksums and shapes hold."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                stored = json.load(handle)
        except (OSError, ValueError, RecursionError):
            stored = {}
        if not (isinstance(stored, dict) and isinstance(stored.get("modules"), dict) and isinstance(stored.get("projects"), dict)):
            stored = {"modules": {}, "projects": {}}
        self._entries = stored["modules"]
        prints = {}
        for digest, entry in stored["projects"].items():
            if isinstance(entry, list) and len(entry) == 2 and entry[1] == prints_checksum(digest, entry[0]) and prints_well_formed(entry[0]):
                prints[digest] = entry[0]
                self._prints[digest] = entry
        return FactsCache(stored=self._entries, read=facts_from_entry), StoredPrints(prints)

    def save(self, cache: FactsCache, prints: StoredPrints) -> None:
        """Write the facts of this run's modules and its projects' fingerprints (atomically, as
        ``ResultCache.save``), only when some were parsed or computed: the facts of modules and
        the fingerprints of project states no project of the run holds are dropped then."""
        if not cache.parsed and not prints.changed:
            with contextlib.suppress(OSError):
                os.utime(self.path)
            return
        modules = {key: cache_entry for key, cache_entry in self._entries.items() if key in cache.used}
        modules.update((key, facts_entry(key, facts)) for key, facts in cache.by_hash.items() if key not in modules)
        projects = {digest: entry for digest, entry in self._prints.items() if digest in prints.held}
        projects.update((digest, [entry, prints_checksum(digest, entry)]) for digest, entry in prints.changed.items())
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _mark_as_cache(self.directory)
            handle, temporary = tempfile.mkstemp(prefix=".facts-", suffix=".tmp", dir=self.directory)
        except OSError:
            return
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                json.dump({"modules": modules, "projects": projects}, stream, separators=(",", ":"))
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


@contextlib.contextmanager
def stored_projects(directory: Optional[Path], checked: Sequence[str] = (), named: Sequence[str] = ()) -> Iterator[Projects]:
    """A project model whose module facts come from ``directory`` (a results cache directory)
    and go back to it once read; without a directory, a model kept in memory only. ``checked``
    and ``named``: the files the run checks and the folders named for it (``Projects``)."""
    store = StoredFacts(directory) if directory is not None else None
    cache, prints = store.load() if store is not None else (None, None)
    projects = Projects(cache, checked, named, prints)
    yield projects
    if store is not None:
        store.save(projects.cache, prints)
