"""The project model: every module of a project read once (``facts.module_facts``), cached by
content hash, and combined into what the rules ask of the whole project.

A file's project is the nearest directory above it that marks one (``pyproject.toml``,
``setup.py``, ``setup.cfg``, ``requirements*.txt``, ``environment.yml``, ``.git``); in a bare
tree of scripts, the parent of its outermost package (``__init__.py`` folders). Where no file on
disk is known (a buffer on stdin), the model is empty and each file is judged alone.
"""

from __future__ import annotations

import ast
import hashlib
import os
import warnings
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from ..knowledge.flags import OptionDefaults
from .facts import ModuleFacts, module_facts

ROOT_MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", "environment.yml", "environment.yaml", ".git")
#: Folders never read for the model (virtualenvs, caches, build output).
SKIPPED = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "__pycache__", "build", "dist", "node_modules", "site-packages"})
#: A project with more Python files than this is read only where the files asked for are.
MAX_FILES = 20_000


def project_root(path: str) -> Optional[Path]:
    """The root of the project holding ``path`` (a file, or a buffer named as one), or None where
    its folder is not on disk (``-``, ``<stdin>``)."""
    if path in ("-", "stdin") or path.startswith("<"):
        return None
    file = Path(os.path.abspath(path))
    if not file.parent.is_dir() or file.is_dir():
        return None
    for folder in file.parents:
        if any((folder / marker).exists() for marker in ROOT_MARKERS) or any(folder.glob("requirements*.txt")):
            return folder
        if folder == Path.home() or folder.parent == folder:
            break
    top = file.parent
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return top


class Project:
    """One project's modules, their facts, and the option defaults they make together."""

    def __init__(self, root: Path, cache: Optional["FactsCache"] = None) -> None:
        self.root = root
        self.cache = cache if cache is not None else FactsCache()
        self.modules: Dict[str, ModuleFacts] = {}
        self._defaults: Optional[OptionDefaults] = None
        for file in python_files(root):
            self.modules[str(file)] = self.cache.facts_of_file(file)

    def update(self, path: str, text: str) -> None:
        """An editor's buffer replaces the file's facts on disk."""
        self.modules[os.path.abspath(path)] = self.cache.facts_of_text(text)
        self._defaults = None

    @property
    def option_defaults(self) -> OptionDefaults:
        if self._defaults is None:
            self._defaults = combined_defaults(self.modules.values())
        return self._defaults

    def builds_cuda_kernels(self) -> bool:
        return any(facts.builds_cuda_kernels for facts in self.modules.values())


def combined_defaults(modules: Iterable[ModuleFacts]) -> OptionDefaults:
    """Every option with one default (options defined with defaults that disagree have none),
    and every copy and predicate of an option, from all the modules."""
    options: Dict[str, object] = {}
    unknown = set()
    copies: Dict[str, str] = {}
    predicates: Dict[str, list] = {}
    for facts in modules:
        unknown.update(facts.unknown_options)
        for name, default in facts.options.items():
            if name in options and options[name] != default:
                unknown.add(name)
            options.setdefault(name, default)
        for name, copied in facts.copies.items():
            copies.setdefault(name, copied)
        for name, test in facts.predicates.items():
            predicates.setdefault(name, test)
    return OptionDefaults({name: value for name, value in options.items() if name not in unknown}, copies, predicates)


def python_files(root: Path) -> Iterator[Path]:
    count = 0
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED and not name.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                count += 1
                if count > MAX_FILES:
                    return
                yield Path(folder) / name


class FactsCache:
    """Module facts by content hash, so a second run (or another worker) reads each file's bytes
    but parses only the changed ones."""

    def __init__(self) -> None:
        self.by_hash: Dict[str, ModuleFacts] = {}

    def facts_of_file(self, file: Path) -> ModuleFacts:
        try:
            data = file.read_bytes()
        except OSError:
            return ModuleFacts()
        return self._facts(data)

    def facts_of_text(self, text: str) -> ModuleFacts:
        return self._facts(text.encode("utf-8", "surrogatepass"))

    def _facts(self, data: bytes) -> ModuleFacts:
        key = hashlib.sha256(data).hexdigest()
        if key not in self.by_hash:
            self.by_hash[key] = _parse_facts(data)
        return self.by_hash[key]


def _parse_facts(data: bytes) -> ModuleFacts:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = compile(data, "<project>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ModuleFacts()
    return module_facts(tree)


class Projects:
    """The projects of a run, each read once, by root."""

    def __init__(self) -> None:
        self.cache = FactsCache()
        self._by_root: Dict[Path, Project] = {}
        self._roots: Dict[str, Optional[Path]] = {}

    def of(self, path: str) -> Optional[Project]:
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = project_root(path)
        root = self._roots[folder]
        if root is None:
            return None
        if root not in self._by_root:
            self._by_root[root] = Project(root, self.cache)
        return self._by_root[root]

    def option_defaults(self, path: str) -> OptionDefaults:
        project = self.of(path)
        return project.option_defaults if project is not None else OptionDefaults()

    def roots(self) -> List[Tuple[Path, int]]:
        return [(root, len(project.modules)) for root, project in self._by_root.items()]
