"""Project roots: the nearest directory at or above a file that declares a Python project or its
environment. A monorepo holds several, each with its own torch (``app/torch_target.py``); the
project model (``project/model.py``) reads a project's modules from the same markers, and the
files a project holds (``project_files``).

Answers are cached per directory for the life of the process (a run, or an editor session until
``forget_project_roots`` after a project file changes).
"""

from __future__ import annotations

import fnmatch
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Optional

from ..model.settings import ignore_file_spec
from .configs import CONFIG_SUFFIXES, DOC_SUFFIXES, TEXT_SUFFIXES

#: Files that make a directory a project root.
PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml")
#: And any ``requirements*.txt``.
REQUIREMENTS_GLOB = "requirements*.txt"
#: Every file the settings or the target torch of a project are read from, as glob patterns
#: below a workspace (what an editor watches).
PROJECT_FILE_PATTERNS = tuple(f"**/{name}" for name in PROJECT_FILES) + (
    f"**/{REQUIREMENTS_GLOB}", "**/requirements/*.txt",
)


def is_project_file(path: str) -> bool:
    """Whether a change to ``path`` can change settings or a target torch."""
    name = os.path.basename(path)
    return name in PROJECT_FILES or fnmatch.fnmatch(name, REQUIREMENTS_GLOB) or (
        os.path.basename(os.path.dirname(path)) == "requirements" and name.endswith(".txt")
    )


def declared_root(path: str) -> Optional[Path]:
    """The nearest directory at or above ``path`` (a file or a directory) holding one of
    ``PROJECT_FILES`` or a ``requirements*.txt``; None outside any project."""
    return _root_at_or_above(str(_directory_of(path)))


def project_roots(path: str) -> Iterator[Path]:
    """The project roots at or above ``path``, nearest first: a project nested in another, then
    the one around it."""
    root = declared_root(path)
    while root is not None:
        yield root
        root = None if root.parent == root else _root_at_or_above(str(root.parent))


def forget_project_roots() -> None:
    """Drop the cached answers (a project file was added or removed)."""
    _root_at_or_above.cache_clear()
    settings_root_at_or_above.cache_clear()


#: What marks the root a configuration's relative paths start from.
SETTINGS_ROOT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


@lru_cache(maxsize=4096)
def settings_root_at_or_above(directory: str) -> Optional[Path]:
    """The nearest folder at or above ``directory`` holding one of ``SETTINGS_ROOT_FILES``
    (asked once per folder of a run: its ancestors' answers are shared)."""
    here = Path(directory)
    if any((here / name).exists() for name in SETTINGS_ROOT_FILES):
        return here
    return None if here.parent == here else settings_root_at_or_above(str(here.parent))


def _packages(setup: Path) -> bool:
    """Whether a ``setup.py`` is a packaging script (it names ``setup(`` or setuptools), not a
    module of a package that happens to bear the name (jannerm/trajectory-transformer@8834a6e
    trajectory/utils/setup.py holds the argument parser: its folder is a package of the project)."""
    try:
        with open(setup, "rb") as handle:
            text = handle.read(_SETUP_BYTES)
    except OSError:
        return False
    return any(word in text for word in (b"setup(", b"setuptools", b"distutils"))


def builds_only_a_kernel(directory: Path) -> bool:
    """Whether a folder is marked only by a ``setup.py`` that builds a C++/CUDA extension
    (hszhao/PointWeb@f31fe05 lib/pointops/setup.py): the build of a kernel the project around
    it calls, not a project of its own."""
    if (directory / ".git").exists() or any((directory / name).is_file() for name in PROJECT_FILES if name != "setup.py"):
        return False
    try:
        with open(directory / "setup.py", "rb") as handle:
            text = handle.read(_SETUP_BYTES)
        if any(directory.glob(REQUIREMENTS_GLOB)):
            return False
    except OSError:
        return False
    return any(word in text for word in _KERNEL_BUILDS)


#: What a ``setup.py`` that builds a kernel names (``torch.utils.cpp_extension``'s builders).
_KERNEL_BUILDS = (b"CUDAExtension", b"CppExtension", b"cpp_extension")


#: How much of a ``setup.py`` is read for ``_packages``: a packaging script names itself early.
_SETUP_BYTES = 1 << 20


def _directory_of(path: str) -> Path:
    """``path`` itself for a directory (or a name without a suffix, which may not exist yet: an
    editor's buffer), else the directory holding the file."""
    absolute = Path(os.path.abspath(path))
    return absolute if absolute.is_dir() or not absolute.suffix else absolute.parent


@lru_cache(maxsize=4096)
def _root_at_or_above(directory: str) -> Optional[Path]:
    here = Path(directory)
    if is_project_root(here):
        return here
    return None if here.parent == here else _root_at_or_above(str(here.parent))


def is_project_root(directory: Path) -> bool:
    """A folder holding a project file (``pyproject.toml``, a packaging ``setup.py``, ``requirements*.txt``...)."""
    if any((directory / name).is_file() for name in PROJECT_FILES if name != "setup.py") or _packages(directory / "setup.py"):
        return True
    try:
        return any(candidate.is_file() for candidate in directory.glob(REQUIREMENTS_GLOB))
    except OSError:
        return False


#: Folders never read for the model (virtualenvs, caches, build output).
SKIPPED = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "__pycache__", "build", "dist", "node_modules", "site-packages"})


def marks_a_project(folder: Path) -> bool:
    """Whether ``folder`` is a project's root: it holds a marker (``pyproject.toml``, ``.git``...)."""
    return (folder / ".git").exists() or is_project_root(folder)


def project_files(root: Path) -> Iterator[Path]:
    """The project's modules, YAML configs and docs, leaving out what its top-level ``.gitignore``
    ignores (downloaded data, vendored checkouts): git does not hold them, so neither does the
    project; and the folders below that are projects of their own (a checkout inside a folder
    of scripts)."""
    ignored = _root_gitignore(root)
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        relative = here.relative_to(root).as_posix()
        prefix = "" if relative == "." else relative + "/"
        subfolders[:] = [
            name for name in subfolders
            if name not in SKIPPED and not name.startswith(".") and not (ignored and ignored.match(prefix + name, is_dir=True))
            and not (marks_a_project(here / name) and not builds_only_a_kernel(here / name))
            and not (here / name / "pyvenv.cfg").exists()  # a virtualenv
        ]
        yield from (
            here / name for name in files
            if (name.endswith(".py") or _read_beside_modules(name)) and not (ignored and ignored.match(prefix + name))
        )


def _read_beside_modules(name: str) -> bool:
    """A YAML config, or a file that documents how the project runs (``README``, ``run.sh``)."""
    if name.startswith("."):
        return False
    return name.endswith(CONFIG_SUFFIXES + DOC_SUFFIXES + TEXT_SUFFIXES) or name.lower().startswith("readme")


def _root_gitignore(root: Path):
    """The root's ``.gitignore`` as patterns, or None (none there, or unreadable)."""
    try:
        lines = (root / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return ignore_file_spec(lines)
