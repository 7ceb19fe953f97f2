"""The package's shape: no import circles, no module above the size limit, and no layer that
imports a layer above it (analysis < rules < app < front ends; runtime stands apart)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "torchdevice_lint"
LAYERS = {"analysis": 0, "rules": 1, "app": 2, "runtime": 2}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path, modules: set) -> set:
    """Package modules imported at run time (``if TYPE_CHECKING:`` blocks are skipped: they are
    annotations, never executed)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    pending = list(ast.parse(path.read_text(encoding="utf-8")).body)
    while pending:
        node = pending.pop()
        if _is_type_checking_block(node):
            continue
        pending.extend(ast.iter_child_nodes(node))
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
    return {m for m in found if m in modules and m != name}


def _graph() -> dict:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths}
    return {_module_name(p): _imports(p, modules) for p in paths}


def _cycle(graph: dict):
    state = {}

    def visit(node, trail):
        state[node] = "open"
        for target in sorted(graph[node]):
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


def _is_package_init(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists()


def test_no_import_cycles():
    graph = {m: {t for t in targets if not _is_package_init(t)} for m, targets in _graph().items()}
    assert _cycle(graph) is None


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) is not None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def _layer(module: str):
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def test_no_layer_imports_a_layer_above_it():
    upward = [
        (module, target)
        for module, targets in _graph().items()
        for target in targets
        if _layer(module) is not None and _layer(target) is not None and _layer(target) > _layer(module)
    ]
    assert upward == []


def test_no_source_file_over_700_lines():
    too_long = {
        str(path.relative_to(PACKAGE)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 700
    }
    assert too_long == {}
