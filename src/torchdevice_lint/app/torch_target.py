"""The target torch version a project declares, the way ruff takes its target Python from
``requires-python``: the lowest release the project's own ``torch`` requirement admits.

Read, in order: ``pyproject.toml`` ``[project]`` dependencies and optional-dependencies,
``requirements*.txt`` (also under ``requirements/``), ``setup.cfg`` ``install_requires`` /
``extras_require``, and ``setup.py``'s ``install_requires`` / ``extras_require`` found by a
static read of the file (it is never executed). Every ``torch`` requirement found counts; the
oldest lower bound wins, because the fixed code must run on every torch the project admits.
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on old interpreters
    import tomli as tomllib

from ..model.settings import Settings

# "torch", then extras, then the version part up to a marker: "torch[opt] >=2.1,<3 ; python_version..."
_REQUIREMENT = re.compile(r"^\s*torch\s*(?:\[[^\]]*\])?\s*(?P<spec>[^;#@]*)", re.IGNORECASE)
_CLAUSE = re.compile(r"^\s*(?P<op>~=|==|>=|>|===)\s*v?(?P<version>\d+(?:\.\d+)*)(?P<rest>[.*\w+-]*)\s*$")
_PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")


def lower_bound(requirement: str) -> Optional[Tuple[int, int]]:
    """``"torch>=2.1"`` -> ``(2, 1)``; None for another package or a requirement without a
    lower bound (``torch``, ``torch<3``)."""
    match = _REQUIREMENT.match(requirement)
    if match is None:
        return None
    rest = requirement[match.start("spec"):].lstrip()
    if rest[:1].isalnum() or rest[:1] in "_-.":
        return None  # torchvision, torch-geometric, torch_npu...
    bounds = []
    for clause in match.group("spec").split(","):
        parsed = _CLAUSE.match(clause)
        if parsed is None:
            continue
        parts = [int(part) for part in parsed.group("version").split(".")]
        major, minor = (parts + [0])[:2]
        bounds.append((major, minor))
    return max(bounds) if bounds else None


def with_inferred_target(settings: Settings, start: Path, configured: bool) -> Settings:
    """``settings`` with the target of the project around ``start`` unless one is configured."""
    if configured:
        return settings
    directory = project_directory(start)
    inferred = infer_target(directory) if directory is not None else None
    if inferred is None:
        return settings
    version, source = inferred
    return replace(settings, target_torch_version=version, target_torch_source=source)


def infer_target(directory: Path) -> Optional[Tuple[str, str]]:
    """``("2.1", "pyproject.toml [project] dependencies: torch>=2.1")`` for the project rooted
    at ``directory``, or None when it declares no lower bound on torch."""
    found: List[Tuple[Tuple[int, int], str]] = []
    for where, requirement in _requirements(directory):
        bound = lower_bound(requirement)
        if bound is not None:
            found.append((bound, f"{where}: {requirement.strip()}"))
    if not found:
        return None
    bound, source = min(found)
    return f"{bound[0]}.{bound[1]}", source


def project_directory(start: Path) -> Optional[Path]:
    """The nearest directory at or above ``start`` holding a project file or requirements."""
    current = start if start.is_dir() else start.parent
    for directory in [current, *current.parents]:
        if any((directory / name).is_file() for name in _PROJECT_FILES) or any(directory.glob("requirements*.txt")):
            return directory
    return None


def _requirements(directory: Path) -> Iterator[Tuple[str, str]]:
    yield from _from_pyproject(directory / "pyproject.toml")
    requirement_files = sorted(directory.glob("requirements*.txt")) + sorted(directory.glob("requirements/*.txt"))
    for path in requirement_files:
        yield from _from_requirements_file(path, directory)
    yield from _from_setup_cfg(directory / "setup.cfg")
    yield from _from_setup_py(directory / "setup.py")


def _from_pyproject(path: Path) -> Iterator[Tuple[str, str]]:
    if not path.is_file():
        return
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, RecursionError, tomllib.TOMLDecodeError):
        return
    if not isinstance(project, dict):
        return
    for requirement in _strings(project.get("dependencies")):
        yield "pyproject.toml [project] dependencies", requirement
    extras = project.get("optional-dependencies")
    if isinstance(extras, dict):
        for extra, requirements in extras.items():
            for requirement in _strings(requirements):
                yield f"pyproject.toml [project.optional-dependencies] {extra}", requirement


def _from_requirements_file(path: Path, directory: Path) -> Iterator[Tuple[str, str]]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    name = path.relative_to(directory).as_posix()
    for number, line in enumerate(lines, 1):
        text = line.split(" #", 1)[0].strip()
        if text and not text.startswith(("#", "-")):
            yield f"{name}:{number}", text


def _from_setup_cfg(path: Path) -> Iterator[Tuple[str, str]]:
    if not path.is_file():
        return
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError):
        return
    if parser.has_option("options", "install_requires"):
        for requirement in _lines(parser.get("options", "install_requires")):
            yield "setup.cfg install_requires", requirement
    if parser.has_section("options.extras_require"):
        for extra, value in parser.items("options.extras_require"):
            for requirement in _lines(value):
                yield f"setup.cfg extras_require {extra}", requirement


def _from_setup_py(path: Path) -> Iterator[Tuple[str, str]]:
    """``setup(install_requires=[...])`` read with ``ast``: list literals, or a module-level name
    assigned one; anything computed is skipped."""
    if not path.is_file():
        return
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return
    assigned = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            assigned[statement.targets[0].id] = statement.value
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup"):
            continue
        for keyword in node.keywords:
            value = assigned.get(keyword.value.id, keyword.value) if isinstance(keyword.value, ast.Name) else keyword.value
            if keyword.arg == "install_requires":
                for requirement in _literal_strings(value):
                    yield "setup.py install_requires", requirement
            elif keyword.arg == "extras_require" and isinstance(value, ast.Dict):
                for item in value.values:
                    for requirement in _literal_strings(item):
                        yield "setup.py extras_require", requirement


def _literal_strings(node: ast.AST) -> List[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _strings(value) -> Iterable[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _lines(value: str) -> List[str]:
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]
