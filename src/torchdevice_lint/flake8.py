"""flake8 adapter: the same engine and findings as ``torchdevice-lint check``.

flake8 applies its own ``--select``/``--ignore``/``# noqa`` to what the plugin yields. Opt-in
rules (TDV9xx) are yielded only when flake8's selection names them explicitly (e.g.
``--extend-select TDV9``), so they stay off by default as in ``check``.

What flake8 has no words for comes from the file's ``[tool.torchdevice-lint]`` table: the
platform layer of TDV905 (``allowed-backend-paths``, ``banned-backend-apis``) and the
``baseline``, whose findings are not yielded. ``--torchdevice-baseline FILE`` (or
``torchdevice-baseline = FILE`` in flake8's configuration) names another baseline. Each file is
judged for its own target torch, the one ``check`` gives it (``target-torch-version`` of the
configuration that governs it, else its project's torch requirement).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from . import __version__, api
from .project import baseline as baselines
from .app.config import SettingsResolver
from .engine.engine import Engine
from .model.findings import Finding
from .model.settings import ConfigError

#: The code of the one line a file gets when its configuration cannot be read.
CONFIG_ERROR = "TDV000"


def _explicitly_selected(options) -> Tuple[str, ...]:
    prefixes: List[str] = []
    for name in ("select", "extend_select", "enable_extensions"):
        value = getattr(options, name, None) or ()
        if isinstance(value, str):
            value = value.split(",")
        prefixes.extend(v.strip() for v in value if v and v.strip().upper().startswith("TDV"))
    return tuple(p for p in prefixes if len(p) > len("TDV"))


class Plugin:
    name = "torchdevice-lint"
    version = __version__
    _settings = api.Settings()
    _baseline_option: Optional[str] = None
    _resolver = SettingsResolver()
    _projects = api.Projects()
    _engines: Dict[tuple, Engine] = {}
    _baselines: Dict[str, baselines.Baseline] = {}

    def __init__(self, tree, filename: str = "stdin", lines: Sequence[str] = ()) -> None:
        # flake8's own ``ast`` is the engine's first stage: most files are never parsed again.
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def add_options(cls, manager) -> None:
        manager.add_option(
            "--torchdevice-baseline", metavar="FILE", parse_from_config=True, normalize_paths=True,
            help="report only TDV findings not in FILE (written by `torchdevice-lint check --write-baseline`)",
        )

    @classmethod
    def parse_options(cls, options) -> None:
        cls._settings = api.Settings(select=("TDV",) + _explicitly_selected(options))
        cls._baseline_option = getattr(options, "torchdevice_baseline", None)
        cls._projects = api.Projects()
        cls._engines.clear()
        if cls._baseline_option:
            try:
                cls._baseline(cls._baseline_option)
            except ConfigError as error:
                raise SystemExit(f"flake8: torchdevice-lint: {error}") from None

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        try:
            findings = self._findings()
        except ConfigError as error:  # the file's pyproject.toml or its baseline: one line, on line 1
            yield 1, 0, f"{CONFIG_ERROR} torchdevice-lint cannot check this file: {error}", type(self)
            return
        for finding in findings:
            yield (
                finding.location.row,
                finding.location.column - 1,
                f"{finding.code} {finding.message}",
                type(self),
            )

    def _findings(self) -> List[Finding]:
        project = self._resolver(self.filename)
        result = self._engine(project).check_source(self.filename, "".join(self.lines), tree=self.tree)
        path = self._baseline_option or (os.path.join(project.root, project.baseline) if project.baseline else None)
        if path:
            return baselines.filter_results(self._baseline(path), [result]).results[0].findings
        return result.findings

    @classmethod
    def _engine(cls, project: api.Settings) -> Engine:
        """flake8's selection, with the project's platform layer (and its root, which the
        layer's patterns are relative to) and the file's target torch."""
        layer = (project.root, tuple(project.allowed_backend_paths), tuple(project.banned_backend_apis), project.target_torch_version)
        if layer not in cls._engines:
            cls._engines[layer] = api.engine(
                replace(cls._settings, root=layer[0], allowed_backend_paths=layer[1], banned_backend_apis=layer[2],
                        target_torch_version=layer[3]),
                projects=cls._projects,
            )
        return cls._engines[layer]

    @classmethod
    def _baseline(cls, path: str) -> baselines.Baseline:
        if path not in cls._baselines:
            cls._baselines[path] = baselines.load(path)
        return cls._baselines[path]
