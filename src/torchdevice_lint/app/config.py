"""Configuration: ``[tool.torchdevice-lint]`` of the nearest pyproject.toml that has one (per
file, like ruff), validated into ``Settings``."""

from __future__ import annotations

import ast
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..first_stage.triggers import within
from ..knowledge.backends import DEVICE_MODULES
from ..knowledge.torch_releases import binding_imports
from ..model.settings import ConfigError, Settings, parse_version
from ..project.roots import settings_root_at_or_above
from ..rules import all_rules
from .output import FORMATS
from .torch_target import TorchTarget, target_for, with_target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on old interpreters
    import tomli as tomllib


#: Pins the targets note names per target torch before it counts them.
MAX_ORIGINS_LISTED = 4


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
    "per-file-timeout": "seconds",
    "respect-gitignore": "bool",
    "force-exclude": "bool",
    "check-unreached": "bool",
    "baseline": "str",
    "allowed-backend-paths": "codes",
    "banned-backend-apis": "codes",
    "fixable": "codes",
    "unfixable": "codes",
    "output-format": "format",
    "cache-dir": "str",
    "extend": "str",  # another pyproject.toml whose table this one extends (read by ``_extended_table``)
}


def _read_toml(path: Path) -> dict:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read configuration: {error}") from None
    except UnicodeDecodeError as error:  # TOML is UTF-8
        raise ConfigError(f"{path}: cannot read configuration: not UTF-8 (byte {error.start})") from None
    except RecursionError:  # tomllib recurses once per nested array or table
        raise ConfigError(f"{path}: cannot read configuration: nested too deeply") from None


def _table(path: Path) -> Optional[dict]:
    """The ``[tool.torchdevice-lint]`` table of a pyproject.toml, None when it has none."""
    tool = _read_toml(path).get("tool", {})
    return tool.get("torchdevice-lint") if isinstance(tool, dict) else None


def _extended_table(path: Path, seen: Sequence[Path] = ()) -> dict:
    """The table of ``path`` on top of the one its ``extend`` names (relative to ``path``, as in
    ruff), recursively; keys set here replace the extended file's, ``extend-*`` lists add to them."""
    table = _table(path) or {}
    if not isinstance(table, dict) or "extend" not in table:
        return table
    base = table["extend"]
    if not isinstance(base, str) or not base.strip():
        raise ConfigError(f"{path}: extend must be the path of another pyproject.toml")
    base_path = (path.parent / os.path.expandvars(os.path.expanduser(base))).resolve()
    chain = [*seen, path.resolve()]
    if base_path in chain:
        raise ConfigError(f"{path}: extend makes a circle: {' -> '.join(str(p) for p in [*chain, base_path])}")
    if not base_path.is_file():
        raise ConfigError(f"{path}: extend names {base_path}, which does not exist")
    inherited = _extended_table(base_path, chain)
    merged = {**inherited, **table}
    for key in ("extend-select", "extend-exclude"):  # added to, as in ruff, not replaced
        if isinstance(inherited.get(key), list) and isinstance(table.get(key), list):
            merged[key] = inherited[key] + table[key]
    del merged["extend"]
    return merged


def _directory_of(start: str) -> Path:
    current = Path(os.path.abspath(start))
    return current if current.is_dir() or not current.suffix else current.parent


def find_pyproject(start: str) -> Optional[Path]:
    """The nearest pyproject.toml above ``start`` that has a ``[tool.torchdevice-lint]``
    table (one without it is passed over, as ruff passes over one without ``[tool.ruff]``)."""
    for directory in [_directory_of(start), *_directory_of(start).parents]:
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _table(candidate) is not None:
            return candidate
    return None


def find_project_root(start: str) -> Optional[Path]:
    """The nearest directory above ``start`` that is a project: it holds a pyproject.toml,
    setup.py, setup.cfg or a git repository. None outside any project."""
    return settings_root_at_or_above(str(_directory_of(start)))


def load_settings(start: str = ".", config_file: Optional[str] = None) -> Settings:
    """Settings from ``config_file``, else the nearest pyproject.toml with a
    ``[tool.torchdevice-lint]`` table above ``start``; defaults rooted at the project (or the
    current directory) when there is none. The target torch is that of ``start``'s project
    unless the configuration sets one."""
    settings, configured = _configured_settings(start, config_file)
    return settings if configured else with_target(settings, target_for(start))


def _configured_settings(start: str, config_file: Optional[str]) -> Tuple[Settings, bool]:
    """The configuration's settings for ``start``, and whether it sets ``target-torch-version``."""
    path = Path(config_file) if config_file else find_pyproject(start)
    if path is None:
        return Settings(root=str(find_project_root(start) or os.path.abspath("."))), False
    table = _extended_table(path)
    settings = settings_from_table(table, source=str(path), root=str(Path(os.path.abspath(path)).parent))
    return settings, "target-torch-version" in table


def without_target_source(settings: Settings) -> Settings:
    """What findings and fixes depend on: the target's source is a label, so projects that
    target the same torch share one engine, one pool and one cache file."""
    return replace(settings, target_torch_source="")


class SettingsResolver:
    """The settings each file is checked with: those of the nearest pyproject.toml with a
    ``[tool.torchdevice-lint]`` table above it (ruff's hierarchical configuration), or of
    ``--config`` for every file, with the target torch of the file's own project unless the
    configuration sets one, and the command line's ``overrides`` applied on top."""

    def __init__(self, config_file: Optional[str] = None, overrides: Callable[[Settings], Settings] = lambda s: s) -> None:
        self.config_file = config_file
        self.overrides = overrides
        self._by_directory: Dict[str, Settings] = {}
        self._by_source: Dict[str, Tuple[Settings, bool]] = {}
        self._by_target: Dict[tuple, Settings] = {}
        self._targets: Dict[str, Optional[TorchTarget]] = {}
        self._configs: Dict[str, Optional[str]] = {}
        self._by_path: Dict[str, Settings] = {}

    def __call__(self, path: str) -> Settings:
        known = self._by_path.get(path)
        if known is not None:  # asked again for the same name (discovery asks per folder and file)
            return known
        settings = self._by_path[path] = self._settings_of(path)
        return settings

    def _settings_of(self, path: str) -> Settings:
        directory = _directory_of(path)
        settings = self._by_directory.get(str(directory))
        if settings is None:
            config = self.config_file and str(Path(self.config_file).resolve()) or self._config_above(directory)
            key = config or f"defaults:{find_project_root(str(directory))}"
            if key not in self._by_source:
                self._by_source[key] = _configured_settings(str(directory), config)
            configured, sets_target = self._by_source[key]
            target = None if sets_target else target_for(str(directory))
            if (key, target) not in self._by_target:
                chosen = configured if target is None else with_target(configured, target)
                self._by_target[key, target] = self.overrides(chosen)
            settings = self._by_directory[str(directory)] = self._by_target[key, target]
            self._targets[str(directory)] = target
        return settings

    def target_origin(self, path: str) -> str:
        """Where the target torch of ``path`` comes from, with the project root it was read in
        (``projC/environment.yml: pytorch=1.8.1``), for summaries of runs over several projects."""
        settings = self(path)
        target = self._targets[str(_directory_of(path))]
        if target is None or target.root is None or settings.target_torch_source != target.source:
            return settings.target_torch_source
        shown = _shown_path(target.root)
        prefix = "" if shown == "." else f"{shown}/"
        unbounded = "default ("  # a torch requirement without a lower bound: which one
        if target.source.startswith(unbounded):
            return f"{unbounded}{prefix}{target.source[len(unbounded):]}"
        return f"{prefix}{target.source}"

    def groups(self, files: Sequence[str]) -> List[Tuple[Settings, List[str]]]:
        """The files by the settings they are checked with: one group unless configurations
        nest or projects target different torch releases."""
        by_identity: Dict[int, Settings] = {}
        groups: Dict[str, Tuple[Settings, List[str]]] = {}
        for path in files:
            settings = self(path)
            if id(settings) not in by_identity:
                by_identity[id(settings)] = without_target_source(settings)
            shared = by_identity[id(settings)]
            groups.setdefault(repr(shared), (shared, []))[1].append(path)
        return list(groups.values())

    def targets_note(self, files: Sequence[str]) -> str:
        """For a run over projects that target different torch releases: each target and the
        pins it comes from. Empty when every file has the same target."""
        origins: Dict[str, Dict[str, None]] = {}
        for path in files:
            origins.setdefault(self(path).target_torch_version, {})[self.target_origin(path)] = None
        if len(origins) < 2:
            return ""
        lines = ["Target torch per project (fixes write only names it has):"]
        for version in sorted(origins, key=parse_version):
            named = list(origins[version])
            more = f"; and {len(named) - MAX_ORIGINS_LISTED} more" if len(named) > MAX_ORIGINS_LISTED else ""
            lines.append(f"  {version}: {'; '.join(named[:MAX_ORIGINS_LISTED])}{more}")
        return "\n".join(lines)

    def _config_above(self, directory: Path) -> Optional[str]:
        """``find_pyproject``, memoised per directory: each pyproject.toml is read once."""
        key = str(directory)
        if key not in self._configs:
            candidate = directory / "pyproject.toml"
            if candidate.is_file() and _table(candidate) is not None:
                self._configs[key] = str(candidate.resolve())
            else:
                self._configs[key] = None if directory.parent == directory else self._config_above(directory.parent)
        return self._configs[key]


def _shown_path(directory: Path) -> str:
    """``directory`` relative to the working directory when it is below it, else absolute."""
    relative = os.path.relpath(directory)
    return str(directory) if relative.startswith("..") else Path(relative).as_posix()


def settings_from_table(table: dict, source: str = "configuration", root: str = ".") -> Settings:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [tool.torchdevice-lint] must be a table")
    values = {}
    for key, value in table.items():
        kind = _KEYS.get(key)
        if kind is None:
            known = ", ".join(sorted(_KEYS))
            raise ConfigError(f"{source}: unknown key {key!r} in [tool.torchdevice-lint] (known keys: {known})")
        checked = _check_value(key, kind, value, source)
        if key != "extend":  # already followed by ``_extended_table``
            values[key.replace("-", "_")] = checked
    for key in ("select", "extend_select", "ignore", "fixable", "unfixable"):
        try:
            check_codes(values.get(key, ()))
        except ConfigError as error:
            raise ConfigError(f"{source}: {key.replace('_', '-')}: {error}") from None
    for name in values.get("banned_backend_apis", ()):
        if not (all(part.isidentifier() for part in name.split(".")) and within(name, DEVICE_MODULES)):
            # TDV905's trigger looks into these modules only
            raise ConfigError(f"{source}: banned-backend-apis: {name!r} is not a name in {', '.join(DEVICE_MODULES)}")
    for pattern, codes in values.get("per_file_ignores", {}).items():
        try:
            check_codes(codes)
        except ConfigError as error:
            raise ConfigError(f"{source}: per-file-ignores {pattern!r}: {error}") from None
    try:
        settings = Settings(root=root, **values)
        if "target_torch_version" in values:
            settings = replace(settings, target_torch_source=f"{source} [tool.torchdevice-lint] target-torch-version")
        settings.target_version()  # reject a malformed version now, not at the first fix
        binding_imports(settings)  # and a malformed device-import
    except ConfigError as error:
        raise ConfigError(f"{source}: {error}") from None
    if settings.device_expression:
        _check_expression(settings.device_expression, source)
    if "exclude" in values:
        settings = replace(settings, exclude=tuple(values["exclude"]))
    return settings


def _check_expression(code: str, source: str) -> None:
    try:
        compile(code, "<device-expression>", "eval", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        raise ConfigError(f"{source}: device-expression is not a Python expression: {code!r}") from None


def _check_value(key: str, kind: str, value, source: str):
    if kind == "codes":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{source}: {key} must be a list of strings")
        return tuple(value)
    if kind == "seconds":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ConfigError(f"{source}: {key} must be a number of seconds (0: no limit)")
        return float(value)
    if kind == "format":
        if value not in FORMATS:
            raise ConfigError(f"{source}: {key} must be one of {', '.join(sorted(FORMATS))}, not {value!r}")
        return value
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


def check_codes(prefixes: Sequence[str]) -> None:
    """Refuse a code or prefix that names no rule (a typo would silently select nothing)."""
    codes = [rule.code for rule in all_rules()]
    for prefix in prefixes:
        prefix = prefix.strip().upper()
        if not prefix:
            raise ConfigError("empty rule code: it names no rule (see `torchdevice-lint rule --all`)")
        if prefix != "ALL" and not any(code.startswith(prefix) for code in codes):
            raise ConfigError(f"unknown rule code or prefix {prefix!r} (see `torchdevice-lint rule --all`)")
