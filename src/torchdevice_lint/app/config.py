"""Configuration: ``[tool.torchdevice-lint]`` of the nearest pyproject.toml, validated into
``Settings``, and the exclude patterns that file discovery applies."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import List, Optional

from ..analysis.settings import ConfigError, Settings, path_matches, relative_path
from .torch_target import with_inferred_target

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on old interpreters
    import tomli as tomllib


def is_excluded(path: str, settings: Settings) -> bool:
    relative = relative_path(path, settings.root)
    return any(path_matches(relative, p) for p in list(settings.exclude) + list(settings.extend_exclude))


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
        root = os.path.abspath(start if os.path.isdir(start) else os.path.dirname(start) or ".")
        return with_inferred_target(Settings(root=root), Path(root), configured=False)
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"{path}: cannot read configuration: {error}") from None
    table = data.get("tool", {}).get("torchdevice-lint", {})
    settings = settings_from_table(table, source=str(path), root=str(path.parent))
    return with_inferred_target(settings, path.parent, configured="target-torch-version" in table)


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
    if "target_torch_version" in values:
        settings = replace(settings, target_torch_source=f"{source} [tool.torchdevice-lint] target-torch-version")
    try:
        settings.target_version()  # reject a malformed version now, not at the first fix
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
