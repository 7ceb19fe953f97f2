"""Which torch release first has each name a fix may write, and the device binding each target
gets. One table: fixes ask it before they write a name, the fixer refuses a result that names
something the target torch lacks, and the tests run every rule's fixes at several targets
against it (and import every name on the installed torch).

Releases are ``(major, minor)``. The table starts at 1.0: a name recorded at 1.0 may be older.
Sources: each release's documentation and notes; the ``torch.accelerator`` rows are checked
against the 2.6-2.9 documentation, where ``current_device_index``/``set_device_index`` replaced
2.6's ``current_device_idx``/``set_device_idx`` in 2.7, the ``device_index`` context manager came
in 2.8 and the memory functions in 2.9. ``torch.accelerator`` has no ``get_device_name`` and no
``manual_seed_all`` in any release: no fix may write them.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Set, Tuple

from ..model.fixes import ImportSpec
from ..model.settings import parse_import

if TYPE_CHECKING:
    from ..model.settings import Settings

Release = Tuple[int, int]

#: The newest release the table has been checked against: no name it holds was removed up to it.
NEWEST_RELEASE: Release = (2, 15)

_ACCELERATOR_BASICS = (
    "is_available", "device_count", "current_accelerator", "current_stream", "set_stream", "synchronize",
    "current_device_idx", "set_device_idx",
)
_ACCELERATOR_MEMORY = (
    "empty_cache", "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "reset_peak_memory_stats", "reset_accumulated_memory_stats", "get_memory_info",
)
_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8")

FIRST_RELEASE: Dict[str, Release] = {
    "torch.device": (1, 0),
    "torch.tensor": (1, 0),
    "torch.empty": (1, 0),
    "torch.cuda.is_available": (1, 0),
    **{f"torch.{dtype}": (1, 0) for dtype in _DTYPES},
    "torch.bool": (1, 2),
    "torch.bfloat16": (1, 3),
    # device-generic autocast: ``torch.autocast(device_type, ...)`` in 1.10, the ``torch.amp``
    # module (``torch.amp.autocast``) in 1.12
    "torch.autocast": (1, 10),
    "torch.amp.autocast": (1, 12),
    "torch.backends.mps.is_available": (1, 12),
    "torch.amp.GradScaler": (2, 3),  # takes the device type first
    "torch.amp.custom_fwd": (2, 4),  # with ``device_type=``
    "torch.amp.custom_bwd": (2, 4),
    "torch.xpu.is_available": (2, 4),
    **{f"torch.accelerator.{name}": (2, 6) for name in _ACCELERATOR_BASICS},
    "torch.accelerator.current_device_index": (2, 7),
    "torch.accelerator.set_device_index": (2, 7),
    "torch.accelerator.device_index": (2, 8),
    **{f"torch.accelerator.{name}": (2, 9) for name in _ACCELERATOR_MEMORY},
}

#: The module-level device binding, newest first: each target gets the first whose names it has.
#: From 2.6 any accelerator (``current_accelerator()`` is None on a CPU-only machine, hence the
#: explicit CPU); before it CUDA, then MPS (``torch.backends.mps``, 1.12), then the CPU; before
#: 1.12 CUDA or the CPU, the honest form there.
DEVICE_BINDINGS = (
    'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")',
    'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")',
    'torch.device("cuda" if torch.cuda.is_available() else "cpu")',
)


def first_release(name: str) -> Optional[Release]:
    """The first release that has ``name`` (``"torch.amp.GradScaler"`` -> ``(2, 3)``); None for
    a name the table does not hold."""
    return FIRST_RELEASE.get(name)


def has(target: Release, name: str) -> bool:
    """Whether torch ``target`` has ``name``; a name the table does not hold counts as absent."""
    since = FIRST_RELEASE.get(name)
    return since is not None and tuple(target) >= since


def lacking(target: Release, names: Iterable[str]) -> List[str]:
    """Those of ``names`` that the table records as newer than ``target``, sorted; names it does
    not hold are not judged here (the tests require every written name to be in the table)."""
    return sorted(name for name in set(names) if name in FIRST_RELEASE and tuple(target) < FIRST_RELEASE[name])


def newest_available(target: Release, candidates: Iterable[str]) -> Optional[str]:
    """The first of ``candidates`` (newest spelling first) that torch ``target`` has."""
    return next((name for name in candidates if has(target, name)), None)


def device_binding(target: Release) -> str:
    """The expression the module-level ``device`` is bound to for torch ``target``."""
    return next(code for code in DEVICE_BINDINGS if all(has(target, name) for name in torch_names(code)))


def binding_expression(settings: "Settings") -> str:
    """What the fixer binds ``settings.device_name`` to: ``device-expression``, else the binding
    of the target torch."""
    return settings.device_expression or device_binding(settings.target_version())


def binding_imports(settings: "Settings") -> List[ImportSpec]:
    """Imports the binding needs: ``device-import``, and torch when the expression uses it."""
    specs = parse_import(settings.device_import) if settings.device_import else []
    if re.search(r"\btorch\.", binding_expression(settings)):
        specs.append(ImportSpec("torch"))
    return specs


def release_text(release: Release) -> str:
    return ".".join(str(part) for part in release)


def torch_names(code: str) -> Set[str]:
    """The dotted torch names ``code`` uses, by the names its imports bind (``import torch as
    th``: ``th.amp.autocast`` is ``torch.amp.autocast``; a bare expression reads ``torch`` as
    torch). Names behind ``hasattr(torch, "npu")`` belong to vendor packages and are left out."""
    tree = ast.parse(code)
    roots = {"torch": "torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    roots[alias.asname or "torch"] = alias.name if alias.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            for alias in node.names:
                roots[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    vendored = {
        f"{roots[call.args[0].id]}.{call.args[1].value}"
        for call in ast.walk(tree)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "hasattr"
        and len(call.args) == 2 and isinstance(call.args[0], ast.Name) and call.args[0].id in roots
        and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str)
    }
    inner = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            dotted = _dotted(node, roots)
            if dotted and not any(dotted == v or dotted.startswith(v + ".") for v in vendored):
                names.add(dotted)
    return names


def _dotted(node: ast.Attribute, roots: Dict[str, str]) -> Optional[str]:
    parts = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name) or current.id not in roots:
        return None
    return ".".join([roots[current.id], *reversed(parts)])
