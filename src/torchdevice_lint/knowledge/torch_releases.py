"""Which torch release first has each name a fix may write, and the device binding each target
gets. One table: fixes ask it before they write a name, the fixer refuses a result that names
something the target torch lacks, and the tests run every rule's fixes at several targets
against it (and import every name on the installed torch).

Releases are ``(major, minor)``. The table starts at 0.4, which brought ``torch.device``,
``torch.tensor`` and the dtypes; a target older than that gets no fix that needs a device.
Sources: each release's documentation and notes; the ``torch.accelerator`` rows are checked
against the 2.6-2.9 documentation, where ``current_device_index``/``set_device_index`` replaced
2.6's ``current_device_idx``/``set_device_idx`` in 2.7, the ``device_index`` context manager came
in 2.8 and the memory functions in 2.9. ``torch.accelerator`` has no ``get_device_name`` and no
``manual_seed_all`` in any release: no fix may write them.
"""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Set, Tuple, Union

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
    "torch.device": (0, 4),
    "torch.tensor": (0, 4),
    "torch.empty": (0, 4),
    "torch.cuda.is_available": (0, 4),  # these three are older still; the table claims nothing before 0.4
    "torch.cuda.synchronize": (0, 4),
    "torch.version.cuda": (0, 4),
    **{f"torch.{dtype}": (0, 4) for dtype in _DTYPES},
    "torch.bool": (1, 2),
    "torch.bfloat16": (1, 3),
    # device-generic autocast: ``torch.autocast(device_type, ...)`` in 1.10 ("torch.autocast and
    # torch.cpu.amp.autocast are new in version 1.10", https://pytorch.org/docs/2.1/amp.html); the
    # ``torch.amp`` package (``torch.amp.autocast``) in 1.12: through 1.11 the class lived in
    # ``torch/autocast_mode.py`` (torch.cpu.amp's autocast subclassed ``torch.autocast_mode.autocast``,
    # https://android.googlesource.com/platform/external/pytorch/+/2506baf9c2/torch/cpu/amp/autocast_mode.py),
    # and "the torch.amp namespace was added in PyTorch 1.12.0"
    # (https://discuss.pytorch.org/t/module-torch-has-no-attribute-amp/172026)
    "torch.autocast": (1, 10),
    "torch.amp.autocast": (1, 12),
    "torch.backends.mps.is_available": (1, 12),
    "torch.amp.GradScaler": (2, 3),  # takes the device type first
    "torch.amp.custom_fwd": (2, 4),  # with ``device_type=``
    "torch.amp.custom_bwd": (2, 4),
    "torch.xpu.is_available": (2, 4),
    # ``sdpa_kernel`` came in 2.3 (pytorch#114689); the members TDV302 names are dated with it,
    # ``CUDNN_ATTENTION`` with 2.4 (no earlier than any release that has them)
    "torch.nn.attention.sdpa_kernel": (2, 3),
    **{f"torch.nn.attention.SDPBackend.{member}": (2, 3) for member in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH")},
    "torch.nn.attention.SDPBackend.CUDNN_ATTENTION": (2, 4),
    "torch.distributed.get_default_backend_for_device": (2, 6),
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


def device_binding(target: Release) -> Optional[str]:
    """The expression the module-level ``device`` is bound to for torch ``target``; None for a
    torch without ``torch.device`` (before 0.4)."""
    return next((code for code in DEVICE_BINDINGS if all(has(target, name) for name in torch_names(code))), None)


def binding_expression(settings: "Settings") -> Optional[str]:
    """What the fixer binds ``settings.device_name`` to: ``device-expression``, else the binding
    of the target torch (None where it has none: no fix then needs the binding)."""
    return settings.device_expression or device_binding(settings.target_version())


def binding_imports(settings: "Settings") -> List[ImportSpec]:
    """Imports the binding needs: ``device-import``, and torch when the expression uses it."""
    specs = parse_import(settings.device_import) if settings.device_import else []
    if re.search(r"\btorch\.", binding_expression(settings) or ""):
        specs.append(ImportSpec("torch"))
    return specs


def no_fix_note(target: str, name: str) -> str:
    """What a finding adds when its rewrite would write ``name``, which torch ``target`` lacks:
    the finding then offers no fix. ``withheld_for_target`` reads it back."""
    return (
        f"; no fix for the target torch {target}: `{name}` needs torch {release_text(FIRST_RELEASE[name])} "
        "(set `target-torch-version`, or require a newer torch)"
    )


_NO_FIX_NOTE = re.compile(r"; no fix for the target torch [^:]+: `([\w.]+)` needs torch (\d+\.\d+) ")


def withheld_for_target(message: str) -> Optional[Tuple[str, str]]:
    """``("torch.amp.GradScaler", "2.3")`` for a finding whose message carries ``no_fix_note``
    (from cached findings too); None for any other finding."""
    match = _NO_FIX_NOTE.search(message)
    return (match.group(1), match.group(2)) if match else None


def release_text(release: Release) -> str:
    return ".".join(str(part) for part in release)


def torch_names(code: Union[str, ast.AST]) -> Set[str]:
    """The dotted torch names ``code`` (source or its ``ast``) uses, by the names its imports
    bind (``import torch as th``: ``th.amp.autocast`` is ``torch.amp.autocast``; a bare
    expression reads ``torch`` as torch). Names behind ``hasattr(torch, "npu")`` belong to vendor
    packages and are left out. One walk: a parent comes before its children."""
    tree = ast.parse(code) if isinstance(code, str) else code
    roots = {"torch": "torch"}
    chains: List[ast.Attribute] = []
    inner: Set[int] = set()
    checked: List[Tuple[str, str]] = []  # hasattr(<root>, "<name>")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if id(node) not in inner:
                chains.append(node)
            inner.add(id(node.value))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    roots[alias.asname or "torch"] = alias.name if alias.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch" and not node.level:
            for alias in node.names:
                roots[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr"
            and len(node.args) == 2 and isinstance(node.args[0], ast.Name)
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
        ):
            checked.append((node.args[0].id, node.args[1].value))
    vendored = tuple(f"{roots[root]}.{name}" for root, name in checked if root in roots)
    names = set()
    for chain in chains:
        dotted = _dotted(chain, roots)
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
