"""Settings: rule selection, suppression and fix policy, from ``[tool.torchdevice-lint]``."""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence

if TYPE_CHECKING:
    from .rule import ImportSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on old interpreters
    import tomli as tomllib

DEFAULT_DEVICE_EXPRESSION = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'
# The module-level device binding per target-torch-version, newest first (DESIGN.md).
# ``current_accelerator()`` returns None on a CPU-only machine, hence the CPU fallback.
DEVICE_EXPRESSIONS_BY_TARGET = (
    ((2, 7), 'torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")'),
    ((2, 6), 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
    ((0, 0), DEFAULT_DEVICE_EXPRESSION),
)
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".eggs", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".torchdevice_cache",
)


class ConfigError(Exception):
    """Bad configuration: reported as a usage error (exit code 2)."""


@dataclass(frozen=True)
class Settings:
    select: Sequence[str] = ("TDV",)
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    per_file_ignores: Dict[str, Sequence[str]] = field(default_factory=dict)
    unsafe_fixes: bool = False
    device_name: str = "device"
    #: The module-level binding's value; None: chosen from ``target_torch_version``.
    device_expression: Optional[str] = None
    #: An import the device expression needs, e.g. ``from deepspeed.accelerator import get_accelerator``.
    device_import: Optional[str] = None
    exclude: Sequence[str] = DEFAULT_EXCLUDES
    extend_exclude: Sequence[str] = ()
    target_torch_version: str = "2.4"
    #: Directory that relative per-file-ignores and exclude patterns are matched against.
    root: str = "."

    def target_version(self) -> tuple:
        """``target-torch-version`` as a comparable tuple, ``"2.6"`` -> ``(2, 6)``."""
        return parse_version(self.target_torch_version)

    def binding_expression(self) -> str:
        """The expression the fixer binds ``device_name`` to at module level."""
        if self.device_expression:
            return self.device_expression
        target = self.target_version()
        return next(code for minimum, code in DEVICE_EXPRESSIONS_BY_TARGET if target >= minimum)

    def binding_imports(self) -> List["ImportSpec"]:
        """Imports the binding needs: ``device-import``, and torch when the expression uses it."""
        from .rule import ImportSpec

        specs = parse_import(self.device_import) if self.device_import else []
        if re.search(r"\btorch\.", self.binding_expression()):
            specs.append(ImportSpec("torch"))
        return specs

    def with_overrides(self, **changes) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def is_enabled(self, code: str, default_enabled: bool, extra_ignores: Iterable[str] = ()) -> bool:
        """ruff's selection: the most specific matching prefix wins, ignore wins ties; opt-in
        rules need a prefix that names their family (``TDV9``) or the code itself."""
        selected = _longest_prefix(code, list(self.select) + list(self.extend_select))
        ignored = _longest_prefix(code, list(self.ignore) + list(extra_ignores))
        if selected <= ignored:
            return False
        return default_enabled or selected > len("TDV")

    def ignores_for(self, path: str) -> List[str]:
        relative = _relative(path, self.root)
        codes: List[str] = []
        for pattern, pattern_codes in self.per_file_ignores.items():
            if _path_matches(relative, pattern):
                codes.extend(pattern_codes)
        return codes


def parse_version(text: str) -> tuple:
    try:
        parts = tuple(int(part) for part in text.strip().split(".")[:2])
    except ValueError:
        raise ConfigError(f"target-torch-version must look like '2.4', not {text!r}") from None
    return parts + (0,) * (2 - len(parts))


def parse_import(text: str) -> List["ImportSpec"]:
    """``"from a.b import c as d, e"`` / ``"import a.b"`` -> the imports it names."""
    import libcst as cst

    from .context import dotted_name
    from .rule import ImportSpec

    try:
        statement = cst.parse_statement(text.strip() + "\n")
    except cst.ParserSyntaxError:
        statement = None
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else None
    if isinstance(small, cst.Import):
        return [
            ImportSpec(dotted_name(alias.name), asname=alias.asname.name.value if alias.asname else None)
            for alias in small.names
        ]
    if isinstance(small, cst.ImportFrom) and not small.relative and not isinstance(small.names, cst.ImportStar):
        module = dotted_name(small.module)
        return [
            ImportSpec(module, alias.name.value, alias.asname.name.value if alias.asname else None)
            for alias in small.names
        ]
    raise ConfigError(f"device-import must be one absolute import statement, not {text!r}")


def _longest_prefix(code: str, prefixes: Iterable[str]) -> int:
    best = 0
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if prefix == "ALL":
            prefix = "TDV"
        if prefix and code.startswith(prefix):
            best = max(best, len(prefix))
    return best


def _relative(path: str, root: str) -> str:
    try:
        return Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
    except ValueError:
        return Path(path).as_posix()


def _path_matches(relative: str, pattern: str) -> bool:
    """gitignore-style: a pattern without a slash matches any path component or the basename;
    with a slash it is anchored at the root; ``**`` crosses directories; a trailing ``/``
    matches a directory and everything below it."""
    pattern = pattern.strip()
    if not pattern:
        return False
    directory_only = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    parts = relative.split("/")
    if "/" not in pattern:
        candidates = parts if not directory_only else parts[:-1] or parts
        return any(fnmatch.fnmatchcase(part, pattern) for part in candidates)
    pattern = pattern.lstrip("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    regex_pattern = pattern.replace("**/", "\x00").replace("**", "*")
    for prefix in prefixes:
        if _glob_with_globstar(prefix, regex_pattern):
            return True
    return False


def _glob_with_globstar(path: str, pattern: str) -> bool:
    if "\x00" not in pattern:
        return fnmatch.fnmatchcase(path, pattern)
    head, _, tail = pattern.partition("\x00")
    if head and not path.startswith(head.rstrip("/")):
        return False
    rest = path[len(head):] if head else path
    segments = rest.split("/")
    return any(_glob_with_globstar("/".join(segments[i:]), tail) for i in range(len(segments)))


def is_excluded(path: str, settings: Settings) -> bool:
    relative = _relative(path, settings.root)
    return any(_path_matches(relative, p) for p in list(settings.exclude) + list(settings.extend_exclude))


_KEYS = {
    "select": "codes",
    "extend-select": "codes",
    "ignore": "codes",
    "per-file-ignores": "table",
    "unsafe-fixes": "bool",
    "device-name": "str",
    "device-expression": "str",
    "device-import": "str",
    "exclude": "codes",
    "extend-exclude": "codes",
    "target-torch-version": "str",
}


def find_pyproject(start: str) -> Optional[Path]:
    current = Path(os.path.abspath(start))
    if current.is_file():
        current = current.parent
    for directory in [current, *current.parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_settings(start: str = ".", config_file: Optional[str] = None) -> Settings:
    """Settings from the nearest pyproject.toml with a ``[tool.torchdevice-lint]`` table."""
    path = Path(config_file) if config_file else find_pyproject(start)
    if path is None:
        return Settings(root=os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or "."))
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read configuration: {error}") from None
    table = data.get("tool", {}).get("torchdevice-lint", {})
    return settings_from_table(table, source=str(path), root=str(path.parent))


def settings_from_table(table: dict, source: str = "configuration", root: str = ".") -> Settings:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.torchdevice-lint] must be a table")
    values = {}
    for key, value in table.items():
        kind = _KEYS.get(key)
        if kind is None:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{source}: unknown key {key!r} in [tool.torchdevice-lint] (known keys: {known})")
        values[key.replace("-", "_")] = _check_value(key, kind, value, source)
    settings = Settings(root=root, **values)
    settings.target_version()  # reject a malformed version now, not at the first fix
    try:
        settings.binding_imports()  # and a malformed device-import
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    _check_expression(settings.binding_expression(), source)
    if "exclude" in values:
        settings = replace(settings, exclude=tuple(values["exclude"]))
    return settings


def _check_expression(code: str, source: str) -> None:
    import libcst as cst

    try:
        cst.parse_expression(code)
    except cst.ParserSyntaxError:
        raise ConfigError(f"{source}: device-expression is not a Python expression: {code!r}") from None


def _check_value(key: str, kind: str, value, source: str):
    if kind == "codes":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: {key} must be a list of strings")
        return tuple(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {key} must be true or false")
        return value
    if kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(f"{source}: {key} must be a non-empty string")
        return value
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(isinstance(c, str) for c in v) for v in value.values()
    ):
        raise ConfigError(f"{source}: {key} must map glob patterns to lists of codes")
    return {pattern: tuple(codes) for pattern, codes in value.items()}


def split_codes(text: Optional[str]) -> Optional[List[str]]:
    """``"TDV1, TDV501"`` -> ``["TDV1", "TDV501"]`` for command-line options."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]
