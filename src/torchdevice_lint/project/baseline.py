"""A baseline: today's findings, frozen in a file, so that a check reports only new ones.

A finding is known by its rule, its file (relative to the baseline's directory), the functions
and classes around it and the normalised code of its statement (``Finding.scope`` and
``Finding.statement``), never its line: lines inserted above it, a reformatted file or a moved
function leave it matched. Identical statements in one scope are counted: a third
``x = x.cuda()`` where the baseline holds two is new. The file is JSON, one finding per line,
sorted, with posix paths, so that it diffs well in review.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..model.findings import FileResult, Finding
from ..model.settings import ConfigError, Settings

VERSION = 1
#: (file, code, scope, statement)
Key = Tuple[str, str, str, str]


def _relative(filename: str, directory: Path) -> str:
    """``filename`` from the baseline's directory, with ``/`` on every system."""
    absolute = os.path.abspath(filename)
    try:
        return Path(os.path.relpath(absolute, directory)).as_posix()
    except ValueError:  # another drive on Windows
        return Path(absolute).as_posix()


class Baseline:
    """The findings a baseline file holds, by key, and where it lives."""

    def __init__(self, path: str, counts: Optional[Dict[Key, int]] = None) -> None:
        self.path = path
        self.directory = Path(os.path.abspath(path)).parent
        self.counts: Counter = Counter(counts or {})

    def key(self, finding: Finding) -> Key:
        return (_relative(finding.filename, self.directory), finding.code, finding.scope or "", finding.statement or "")

    def file_key(self, filename: str) -> str:
        return _relative(filename, self.directory)


def load(path: str) -> Baseline:
    """The baseline in ``path``; ``ConfigError`` (one line, exit 2) if it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as error:
        raise ConfigError(f"baseline {path}: cannot read it: {error.strerror or error}") from None
    except ValueError as error:
        raise ConfigError(f"baseline {path}: not JSON: {error}") from None
    entries = data.get("findings") if isinstance(data, dict) and data.get("version") == VERSION else None
    if not isinstance(entries, list):
        raise ConfigError(f"baseline {path}: not a torchdevice-lint baseline (version {VERSION})")
    counts: Counter = Counter()
    for entry in entries:
        if not _valid_entry(entry):
            raise ConfigError(f"baseline {path}: malformed entry {json.dumps(entry)[:120]}")
        counts[(entry["file"], entry["code"], entry["scope"], entry["statement"])] += entry.get("count", 1)
    return Baseline(path, counts)


def _valid_entry(entry) -> bool:
    fields = ("file", "code", "scope", "statement")
    return (
        isinstance(entry, dict)
        and all(isinstance(entry.get(name), str) for name in fields)
        and set(entry) <= set(fields) | {"count"}
        and (type(entry.get("count", 1)) is int and entry.get("count", 1) >= 1)
    )


@dataclasses.dataclass
class Filtered:
    """A run's results with the baselined findings taken out, and how many were."""

    results: List[FileResult]
    baselined: Counter  # code -> findings the baseline held
    #: Findings the baseline holds for the files checked that were not found: fixed since.
    fixed: int
    path: str

    def summary(self) -> str:
        total = sum(self.baselined.values())
        line = f"{total} finding{'s' if total != 1 else ''} baselined in {self.path}."
        if self.fixed:
            line += f" {self.fixed} fixed since: rewrite it with `--write-baseline {self.path}` to drop them."
        return line


def filter_results(baseline: Baseline, results: Sequence[FileResult]) -> Filtered:
    """Each result without the findings the baseline holds: per key, as many as it counts,
    the first in the file's order."""
    kept, baselined, fixed = [], Counter(), 0
    by_file: Dict[str, Dict[Key, int]] = {}
    for key, count in baseline.counts.items():
        by_file.setdefault(key[0], {})[key] = count
    for result in results:
        if result.error is not None:
            kept.append(result)
            continue
        seen: Counter = Counter()
        new = []
        for finding in result.findings:
            key = baseline.key(finding)
            seen[key] += 1
            if seen[key] <= baseline.counts.get(key, 0):
                baselined[finding.code] += 1
            else:
                new.append(finding)
        held = by_file.get(baseline.file_key(result.filename), {})
        fixed += sum(max(0, count - seen[key]) for key, count in held.items())
        kept.append(dataclasses.replace(result, findings=new))
    return Filtered(kept, baselined, fixed, baseline.path)


def write(path: str, results: Iterable[FileResult], previous: Optional[Baseline] = None) -> int:
    """Write every finding of ``results`` to ``path``; returns how many. Entries of
    ``previous`` are kept for files this run did not check (or could not: a syntax error)
    while they exist, so a run over part of the project rewrites only that part."""
    baseline = Baseline(path)
    checked = set()
    for result in results:
        if result.error is not None:
            continue
        checked.add(baseline.file_key(result.filename))
        for finding in result.findings:
            baseline.counts[baseline.key(finding)] += 1
    if previous is not None:
        for key, count in previous.counts.items():
            if key[0] not in checked and (previous.directory / key[0]).is_file():
                baseline.counts[key] = count
    _write_atomically(path, render(baseline.counts))
    return sum(baseline.counts.values())


def render(counts: Dict[Key, int]) -> str:
    """The file's text: one finding per line, sorted, ``count`` only where above one."""
    lines = []
    for (file, code, scope, statement), count in sorted(counts.items()):
        entry = {"file": file, "code": code, "scope": scope, "statement": statement}
        if count > 1:
            entry["count"] = count
        lines.append("    " + json.dumps(entry, ensure_ascii=False))
    body = ",\n".join(lines)
    return f'{{\n  "version": {VERSION},\n  "findings": [\n{body}{chr(10) if lines else ""}  ]\n}}\n'


def _write_atomically(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".baseline-", suffix=".tmp", dir=directory)
    except OSError as error:
        raise ConfigError(f"baseline {path}: cannot write it: {error.strerror or error}") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # a file to commit, not mkstemp's private 0600
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise ConfigError(f"baseline {path}: cannot write it: {error.strerror or error}") from None


def configured(settings: Settings, given: Optional[str] = None, disabled: bool = False) -> Optional[Baseline]:
    """The baseline a run reads: ``given`` (``--baseline``), else the ``baseline`` of
    ``settings`` (relative to its pyproject.toml); none with ``--no-baseline``."""
    if disabled or not (given or settings.baseline):
        return None
    if given:
        return load(given)
    path = os.path.join(settings.root, settings.baseline)
    return load(os.path.relpath(path) if os.path.abspath(path).startswith(os.getcwd() + os.sep) else path)


def apply(baseline: Optional[Baseline], results: Sequence[FileResult]) -> Tuple[List[FileResult], Optional[Filtered]]:
    """``results`` less what ``baseline`` holds (all of them without one), and the count."""
    if baseline is None:
        return list(results), None
    filtered = filter_results(baseline, results)
    return filtered.results, filtered


def rewrite(path: str, results: Iterable[FileResult]) -> int:
    """``write`` over the file at ``path``, keeping its entries for files not checked."""
    return write(path, results, load(path) if os.path.exists(path) else None)
