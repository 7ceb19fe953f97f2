"""flake8 adapter: the same engine and findings as ``torchdevice-lint check``.

flake8 applies its own ``--select``/``--ignore``/``# noqa`` to what the plugin yields. Opt-in
rules (TDV9xx) are yielded only when flake8's selection names them explicitly (e.g.
``--extend-select TDV9``), so they stay off by default as in ``check``.
"""

from __future__ import annotations

from typing import Iterator, List, Sequence, Tuple

from . import __version__, api


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
    _engine = api.engine(projects=api.Projects())

    def __init__(self, tree, filename: str = "stdin", lines: Sequence[str] = ()) -> None:
        # flake8's own ``ast`` is the engine's first stage: most files are never parsed again.
        self.tree = tree
        self.filename = filename
        self.lines = lines

    @classmethod
    def parse_options(cls, options) -> None:
        opt_in = _explicitly_selected(options)
        cls._engine = api.engine(api.Settings(select=("TDV",) + opt_in), projects=api.Projects())

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        source = "".join(self.lines)
        result = self._engine.check_source(self.filename, source, tree=self.tree)
        for finding in result.findings:
            yield (
                finding.location.row,
                finding.location.column - 1,
                f"{finding.code} {finding.message}",
                type(self),
            )

