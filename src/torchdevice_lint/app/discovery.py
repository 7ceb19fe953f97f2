"""Which files a run checks: the paths given, directories walked (``.py`` and ``.ipynb`` files),
with gitignore semantics.

- ``exclude``/``extend-exclude`` are gitignore patterns (``pathspec``) relative to the root of the
  configuration that applies (the nearest ``pyproject.toml`` with a ``[tool.torchdevice-lint]``
  table): ``!`` re-includes, a matching directory is not entered.
- ``.gitignore`` and ``.ignore`` files (``.ignore`` wins, as in ruff and ripgrep) and
  ``.git/info/exclude`` are honoured by default (``respect-gitignore``), each file's patterns
  relative to its own directory, a deeper file overriding a shallower one. Above the path given,
  they are read up to the top of the git repository, and not at all outside one.
- A file named explicitly is checked even if excluded, as in ruff and black, unless
  ``--force-exclude`` (what pre-commit hooks pass): then it is skipped when it, or a directory
  above it inside the project, is excluded or ignored.
- Symbolic links met while walking a directory are skipped with a note (a link can point out of
  the tree or form a loop); a link named on the command line is followed.
"""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, List, Optional, Tuple, Union

from ..model.settings import IgnorePatterns, Settings, compiled_patterns, ignore_file_spec, relative_path

IGNORE_FILES = (".gitignore", ".ignore")
#: What a directory walk checks: Python files and Jupyter notebooks (as ruff does since 0.6).
CHECKED_SUFFIXES = (".py", ".ipynb")
SettingsFor = Callable[[str], Settings]


def is_excluded(path: str, settings: Settings, is_dir: bool = False) -> bool:
    """Whether ``exclude``/``extend-exclude`` match ``path`` (relative to the settings' root)."""
    relative = relative_path(path, settings.root)
    if relative.startswith("../") or os.path.isabs(relative):
        relative = relative.rsplit("/", 1)[-1]  # outside the project: only its name can match
    patterns = tuple(settings.exclude) + tuple(settings.extend_exclude)
    return compiled_patterns(patterns).match(relative, is_dir)


def _repository_top(directory: str) -> Optional[str]:
    for candidate in [directory, *_ancestors(directory)]:
        if os.path.exists(os.path.join(candidate, ".git")):
            return candidate
    return None


def _contains(directory: str, path: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def _ancestors(directory: str) -> List[str]:
    found = []
    while True:
        parent = os.path.dirname(directory)
        if parent == directory:
            return found
        found.append(parent)
        directory = parent


class IgnoreFiles:
    """The ``.gitignore``/``.ignore`` patterns of each directory, read once per run."""

    def __init__(self) -> None:
        self._specs: Dict[str, Optional[IgnorePatterns]] = {}

    def _spec(self, directory: str) -> Optional[IgnorePatterns]:
        if directory not in self._specs:
            lines: List[str] = []
            names = list(IGNORE_FILES)
            if os.path.isdir(os.path.join(directory, ".git")):
                names.insert(0, os.path.join(".git", "info", "exclude"))
            for name in names:
                try:
                    with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                        lines.extend(handle.read().splitlines())
                except OSError:
                    continue
            self._specs[directory] = ignore_file_spec(lines) if lines else None
        return self._specs[directory]

    def ignores(self, path: str, is_dir: bool, top: str) -> bool:
        """Whether the ignore files from ``top`` down to ``path``'s directory ignore ``path``
        itself (the deepest file with an opinion decides)."""
        path = os.path.abspath(path)
        directory = os.path.dirname(path)
        for base in [directory, *_ancestors(directory)]:
            spec = self._spec(base)
            if spec is not None:
                verdict = spec.check(os.path.relpath(path, base).replace(os.sep, "/"), is_dir)
                if verdict is not None:
                    return verdict
            if base == top:
                break
        return False


class Discovery:
    """One run's view of what is skipped: its settings per directory and its ignore files."""

    def __init__(self, settings_for: Union[SettingsFor, Settings], respect_gitignore: bool = True) -> None:
        self.settings_for = settings_for if callable(settings_for) else (lambda path: settings_for)
        self.respect_gitignore = respect_gitignore
        self.ignore_files = IgnoreFiles()

    def skipped(self, path: str, is_dir: bool, top: Optional[str]) -> bool:
        """``path`` itself is excluded by the configuration or ignored by an ignore file."""
        parent = os.path.dirname(os.path.abspath(path))
        if is_excluded(path, self.settings_for(parent), is_dir):  # a file's settings are its folder's
            return True
        return self.respect_gitignore and top is not None and self.ignore_files.ignores(path, is_dir, top)

    def forced_out(self, path: str) -> bool:
        """For ``--force-exclude``: ``path`` or a directory above it, below the project root
        (else the repository's top), is excluded or ignored."""
        absolute = os.path.abspath(path)
        directory = os.path.dirname(absolute)
        top = _repository_top(directory)
        ignore_top = top or directory
        if self.skipped(absolute, os.path.isdir(absolute), ignore_top):
            return True
        root = os.path.abspath(self.settings_for(absolute).root)
        limits = [limit for limit in (root, top) if limit and _contains(limit, absolute)]
        if not limits:
            return False
        limit = max(limits, key=len)
        for ancestor in [directory, *_ancestors(directory)]:
            if not _contains(limit, ancestor) or ancestor == limit:
                return False
            if self.skipped(ancestor, True, ignore_top):
                return True
        return False

    def walk(self, root: str, notes: List[str]) -> List[str]:
        absolute_root = os.path.abspath(root)
        top = _repository_top(absolute_root) or absolute_root
        found = []
        for directory, subdirectories, filenames in os.walk(root):
            kept = []
            for name in sorted(subdirectories):
                path = os.path.join(directory, name)
                if self.skipped(path, True, top):
                    continue
                if os.path.islink(path):
                    notes.append(f"{path}: note: symbolic link to a directory skipped")
                    continue
                kept.append(name)
            subdirectories[:] = kept
            for filename in sorted(filenames):
                if filename.endswith(CHECKED_SUFFIXES):
                    path = os.path.normpath(os.path.join(directory, filename))  # "./a.py" -> "a.py", as ruff prints it
                    if self.skipped(path, False, top):
                        continue
                    if os.path.islink(path):
                        notes.append(f"{path}: note: symbolic link skipped (name it explicitly to check its target)")
                        continue
                    found.append(path)
        return found


def discover(
    paths: Iterable[str],
    settings_for: Union[SettingsFor, Settings],
    notes: Optional[List[str]] = None,
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> Tuple[List[str], List[str]]:
    """Python files and notebooks under ``paths`` and one-line errors for paths that are missing or not
    files; symbolic links skipped by the walk are described in ``notes``."""
    discovery = Discovery(settings_for, respect_gitignore)
    notes = notes if notes is not None else []
    files: List[str] = []
    errors: List[str] = []
    seen = set()
    for path in paths:
        if force_exclude and os.path.lexists(path) and discovery.forced_out(path):
            continue
        if os.path.isfile(path):
            candidates = [path]
        elif os.path.isdir(path):
            candidates = discovery.walk(path, notes)
        elif os.path.lexists(path):
            broken = os.path.islink(path) and not os.path.exists(path)  # a link to /dev/zero is not broken
            reason = "broken symbolic link" if broken else "not a regular file or directory"
            errors.append(f"{path}: error: {reason}")
            continue
        else:
            errors.append(f"{path}: error: no such file or directory")
            continue
        for candidate in candidates:
            key = os.path.realpath(candidate)
            if key not in seen:
                seen.add(key)
                files.append(candidate)
    return files, errors
