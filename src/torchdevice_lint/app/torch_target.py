"""The torch each file is fixed for, the way ruff takes its target Python from
``requires-python``: the lowest release its project's own torch requirement admits.

The project is the file's project root (``project/roots.py``). Read there, in order:
``pyproject.toml`` ``[project]`` dependencies and optional-dependencies, ``requirements*.txt``
(also under ``requirements/``; pip-compile output with ``--hash`` lines too), ``setup.cfg``
``install_requires`` / ``extras_require``, ``setup.py``'s ``install_requires`` /
``extras_require`` found by a static read (it is never executed), and a conda
``environment.yml``/``environment.yaml`` (``pytorch=1.8.1``, ``pytorch::pytorch==1.8``, its
``pip:`` list). Requirements are read with ``packaging``. Every torch requirement counts; the
oldest lower bound wins, because the fixed code must run on every torch the project admits.

A project root that does not mention torch at all (a ``docs/requirements.txt``, a nested
package with other dependencies) says nothing about it: the next root above decides. A file no
project's torch requirement bounds gets ``DEFAULT_TARGET_TORCH_VERSION``.
"""

from __future__ import annotations

import ast
import configparser
import re
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on old interpreters
    import tomli as tomllib

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..model.settings import DEFAULT_TARGET_TORCH_VERSION, Settings
from ..project.roots import REQUIREMENTS_GLOB, forget_project_roots, project_roots

Bound = Tuple[int, int]
#: What a clause's operator says about the lowest release it admits.
_LOWER_BOUND_OPERATORS = ("==", "===", "~=", ">=", ">", "=", "")
#: Where a requirement line's options start: `torch==2.7.1 --hash=sha256:...`, `-f URL`.
_OPTION = re.compile(r"\s-{1,2}[A-Za-z]")
#: A conda match spec: an optional channel, the name, the rest (`pytorch::pytorch>=1.8,<2`).
_CONDA_SPEC = re.compile(r"^\s*(?:[^:\s]+::)?(?P<name>[A-Za-z0-9_.-]+)\s*(?P<rest>.*?)\s*$")
_CONDA_CLAUSE = re.compile(r"^(?P<op>==|>=|<=|!=|~=|>|<|=)?\s*(?P<version>[^=\s]*)")
_CONDA_TORCH = ("pytorch", "torch")


@dataclass(frozen=True)
class TorchTarget:
    """A file's target torch: the version, where it came from, and the project root whose
    requirement gave it (None when no project mentions torch)."""

    version: str
    source: str
    root: Optional[Path] = None


def lower_bound(requirement: str) -> Optional[Bound]:
    """``"torch>=2.1"`` -> ``(2, 1)``; None for another package, a requirement that is not
    PEP 508, or one without a lower bound (``torch``, ``torch<3``, ``torch @ URL``)."""
    parsed = _torch_requirement(requirement)
    if parsed is None:
        return None
    return _bound((spec.operator, spec.version) for spec in parsed.specifier)


def conda_lower_bound(spec: str) -> Optional[Bound]:
    """A conda match spec's lower bound on torch: ``"pytorch=1.8.1"`` -> ``(1, 8)``; None for
    another package or no bound. ``|`` alternatives: the oldest; ``,`` clauses: all hold."""
    parsed = _conda_torch_spec(spec)
    if not parsed:
        return None
    bounds = [_bound(_conda_clauses(alternative)) for alternative in parsed.split("|")]
    return None if any(b is None for b in bounds) else min(bounds)


def infer_target(directory: Path) -> Optional[Tuple[str, str]]:
    """``("2.1", "pyproject.toml [project] dependencies: torch>=2.1")`` for the project rooted
    at ``directory``, or None when it declares no lower bound on torch."""
    bounded = [(bound, where) for where, bound in torch_requirements(directory) if bound is not None]
    if not bounded:
        return None
    (major, minor), where = min(bounded)
    return f"{major}.{minor}", where


def torch_requirements(directory: Path) -> List[Tuple[str, Optional[Bound]]]:
    """Every torch requirement of the project rooted at ``directory``: where it is written
    (with the requirement) and its lower bound, None without one."""
    found = []
    for where, requirement in _pep508_requirements(directory):
        if _torch_requirement(requirement) is not None:
            found.append((f"{where}: {requirement.strip()}", lower_bound(requirement)))
    for where, spec in _conda_requirements(directory):
        if _conda_torch_spec(spec) is not None:
            found.append((f"{where}: {spec.strip()}", conda_lower_bound(spec)))
    return found


def target_for(path: str) -> TorchTarget:
    """The target torch of the file or directory ``path``: from the nearest project root that
    mentions torch, else the default."""
    for root in project_roots(path):
        target = _target_of_root(root)
        if target is not None:
            return target
    return TorchTarget(DEFAULT_TARGET_TORCH_VERSION, "default")


def with_target(settings: Settings, target: TorchTarget) -> Settings:
    return replace(settings, target_torch_version=target.version, target_torch_source=target.source)


def forget_targets() -> None:
    """Drop every cached answer (the editor calls this when a project file changes)."""
    _target_of_root.cache_clear()
    forget_project_roots()


@lru_cache(maxsize=1024)
def _target_of_root(root: Path) -> Optional[TorchTarget]:
    """The root's target; None when it does not mention torch at all."""
    requirements = torch_requirements(root)
    if not requirements:
        return None
    inferred = infer_target(root)
    if inferred is not None:
        return TorchTarget(inferred[0], inferred[1], root)
    unbounded = requirements[0][0]
    return TorchTarget(DEFAULT_TARGET_TORCH_VERSION, f"default ({unbounded} has no lower bound)", root)


def _torch_requirement(text: str) -> Optional[Requirement]:
    try:
        requirement = Requirement(text.strip())
    except InvalidRequirement:
        return None
    return requirement if canonicalize_name(requirement.name) == "torch" else None


def _conda_torch_spec(spec: str) -> Optional[str]:
    """The version part of a conda spec naming torch (``""`` for none); None for another package."""
    match = _CONDA_SPEC.match(spec)
    if match is None or match.group("name").lower() not in _CONDA_TORCH:
        return None
    rest = match.group("rest")
    bracket = re.search(r"version\s*=\s*['\"]?([^'\"\]]+)", rest) if rest.startswith("[") else None
    if bracket:
        return bracket.group(1)
    if rest.startswith("=") and not rest.startswith("=="):
        return rest[1:].split("=")[0]  # `=1.8.1=build`: the version, fuzzy
    return rest.split()[0] if rest.split() else ""


def _conda_clauses(alternative: str) -> Iterator[Tuple[str, str]]:
    for clause in alternative.split(","):
        match = _CONDA_CLAUSE.match(clause.strip())
        if match and match.group("version"):
            yield match.group("op") or "", match.group("version")


def _bound(clauses: Iterable[Tuple[str, str]]) -> Optional[Bound]:
    """The lowest (major, minor) every clause admits; None when no clause bounds from below."""
    bounds = []
    for operator, version in clauses:
        if operator not in _LOWER_BOUND_OPERATORS:
            continue
        text = version.strip()
        while text.endswith((".*", "*")):
            text = text[:-2] if text.endswith(".*") else text[:-1]
        try:
            release = Version(text).release
        except InvalidVersion:
            continue
        bounds.append((release + (0,))[:2])
    return max(bounds) if bounds else None


def _pep508_requirements(directory: Path) -> Iterator[Tuple[str, str]]:
    yield from _from_pyproject(directory / "pyproject.toml")
    requirement_files = sorted(directory.glob(REQUIREMENTS_GLOB)) + sorted(directory.glob("requirements/*.txt"))
    for path in requirement_files:
        yield from _from_requirements_file(path, directory)
    yield from _from_setup_cfg(directory / "setup.cfg")
    yield from _from_setup_py(directory / "setup.py")
    yield from _from_environment_pip(directory)


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
    """pip's requirement lines: ``\\`` continues a line, ``#`` after a space starts a comment,
    options (``-r``, ``--hash=...``, ``-f URL``) are not requirements."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return
    name = path.relative_to(directory).as_posix()
    for number, text in _logical_lines(lines):
        text = _OPTION.split(f" {text}", 1)[0].strip()
        if text:
            yield f"{name}:{number}", text


def _logical_lines(lines: Sequence[str]) -> Iterator[Tuple[int, str]]:
    start, parts = None, []
    for number, line in enumerate(lines, 1):
        line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if start is None:
            start = number
        if line.rstrip().endswith("\\"):
            parts.append(line.rstrip()[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts).strip()
        start, parts = None, []
    if parts:
        yield start, " ".join(parts).strip()


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


def _environments(directory: Path) -> Iterator[Tuple[str, list]]:
    """Each conda environment file's name and ``dependencies`` list."""
    for name in ("environment.yml", "environment.yaml"):
        path = directory / name
        if not path.is_file():
            continue
        import yaml  # a base dependency; imported only where a conda environment is declared

        try:
            environment = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
        except (OSError, yaml.YAMLError):
            continue
        dependencies = environment.get("dependencies") if isinstance(environment, dict) else None
        if isinstance(dependencies, list):
            yield name, dependencies


def _conda_requirements(directory: Path) -> Iterator[Tuple[str, str]]:
    """The conda match specs of the environment files (``("environment.yml", "pytorch=1.8.1")``)."""
    for name, dependencies in _environments(directory):
        for item in dependencies:
            if isinstance(item, str):
                yield name, item


def _from_environment_pip(directory: Path) -> Iterator[Tuple[str, str]]:
    """The ``pip:`` lists of the environment files: PEP 508 requirements."""
    for name, dependencies in _environments(directory):
        for item in dependencies:
            if isinstance(item, dict):
                for requirement in _strings(item.get("pip")):
                    yield f"{name} pip", requirement


def _literal_strings(node: ast.AST) -> List[str]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _strings(value) -> Iterable[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _lines(value: str) -> List[str]:
    return [line.split("#", 1)[0].strip() for line in value.splitlines() if line.split("#", 1)[0].strip()]
