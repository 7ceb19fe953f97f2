"""The package's shape: folders are layers, each importing only its own layer or those below it,
no import circle, no folder over 15 modules, no module over 500 lines.

Every import counts: at the top of a module, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("...")`` with a literal name. The runtime half (simulated devices, the
pytest plugin) stands apart: it imports no other layer and no layer imports it.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "torchdevice_lint"
#: Bottom to top. The package's own ``__init__`` (the version) is below them all.
LAYERS = (
    ("model",), ("syntax",), ("knowledge",), ("inference",), ("first_stage",), ("project",), ("engine",),
    ("rules",), ("app",), ("api",), ("cli", "flake8", "server", "__main__"),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
APART = "runtime"
MAX_MODULES_PER_FOLDER = 15
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool) -> set:
    """Absolute names of every module (and ``from`` target) the source imports, anywhere."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def _graph() -> dict:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    graph = {}
    for path in paths:
        name = _module_name(path)
        found = imported_names(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def _cycle(graph: dict):
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return trail + [node, target]
            if target not in state:
                found = visit(target, trail + [node])
                if found:
                    return found
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def _layer(module: str):
    """The layer's rank, ``APART``, or -1 for the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return APART if parts[1] == APART else RANK[parts[1]]


def test_every_import_counts_function_level_type_checking_and_import_module():
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ..engine import context\n"
        "def f():\n    from ..rules import all_rules\n"
        "importlib.import_module('torchdevice_lint.app.cache')\n"
    )
    found = imported_names(source, "torchdevice_lint.syntax.lines", is_package=False)
    assert {"torchdevice_lint.engine.context", "torchdevice_lint.rules", "torchdevice_lint.app.cache"} <= found


def test_no_import_circle():
    assert _cycle(_graph()) is None


def test_the_circle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_every_folder_is_a_known_layer():
    unknown = {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"} - set(RANK) - {APART}
    assert unknown == set()


@pytest.mark.parametrize("module, targets", sorted(_graph().items()))
def test_a_module_imports_only_its_own_layer_and_those_below(module, targets):
    layer = _layer(module)
    if layer == APART:
        assert {t for t in targets if _layer(t) not in (APART, -1)} == set()
        return
    assert {t for t in targets if _layer(t) == APART or _layer(t) > layer} == set()


def test_no_folder_holds_more_than_15_modules():
    crowded = {
        str(folder.relative_to(PACKAGE)): count
        for folder in [PACKAGE, *PACKAGE.rglob("*/")]
        if folder.name != "__pycache__"
        and (count := len([p for p in folder.glob("*.py") if p.name != "__init__.py"])) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_module_over_500_lines():
    too_long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_long == {}


def test_every_rule_module_is_in_the_rule_list():
    """A family module left out of ``rules.FAMILIES`` would silently never run."""
    from torchdevice_lint import rules

    defining = {
        path.stem for path in (PACKAGE / "rules").glob("*.py")
        if "\nRULES = " in path.read_text(encoding="utf-8")
    }
    assert defining == {family.__name__.rpartition(".")[2] for family in rules.FAMILIES}
