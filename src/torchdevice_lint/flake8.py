"""flake8 adapter: the same engine and findings as ``torchdevice-lint check``.

flake8 applies its own ``--select``/``--ignore``/``# noqa`` to what the plugin yields. Opt-in
rules (TDV9xx) are yielded only when flake8's selection names them explicitly (e.g.
``--extend-select TDV9``), so they stay off by default as in ``check``. Each file is judged for
its own target torch, the one ``check`` gives it (``target-torch-version`` of the configuration
that governs it, else its project's torch requirement).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Sequence, Tuple

from . import __version__, api
from .app.config import SettingsResolver
from .app.torch_target import target_for
from .engine.engine import Engine
from .model.settings import ConfigError


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
    _selection: Tuple[str, ...] = ("TDV",)
    #: One engine per target torch version, all sharing the project model.
    _engines: Dict[str, Engine] = {}
    _projects = api.Projects()
    _resolver = SettingsResolver()

    def __init__(self, tree, filename: str = "stdin", lines: Sequence[str] = ()) -> None:
        # flake8's own ``ast`` is the engine's first stage: most files are never parsed again.
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options) -> None:
        cls._selection = ("TDV",) + _explicitly_selected(options)
        cls._engines, cls._projects = {}, api.Projects()

    @classmethod
    def _engine_for(cls, filename: str) -> Engine:
        try:
            target = cls._resolver(filename).target_torch_version
        except ConfigError:  # flake8 reports its own configuration; this one only chooses the target
            target = target_for(filename).version
        if target not in cls._engines:
            settings = api.Settings(select=cls._selection, target_torch_version=target)
            cls._engines[target] = api.engine(settings, projects=cls._projects)
        return cls._engines[target]

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        result = self._engine_for(self.filename).check_source(self.filename, source, tree=self.tree)
        for finding in result.findings:
            yield (
                finding.location.row,
                finding.location.column - 1,
                f"{finding.code} {finding.message}",
                type(self),
            )

