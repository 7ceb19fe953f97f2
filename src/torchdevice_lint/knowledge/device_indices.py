"""Expressions that name an accelerator by its index: an integer literal, a variable named like
an index (``local_rank``), an element of a list the project's options fill with GPU indices by
default (``opt.gpu_ids[0]`` with ``--gpu_ids`` defaulting to ``"0"``), and what
``DistributedDataParallel`` is imported as (its ``device_ids`` fail for a module on the CPU)."""

from __future__ import annotations

from typing import Callable, Optional

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name
from .project_facts import ProjectFacts


#: Variables that hold a device index in real code (``args.gpu``, ``self.local_rank``...).
INDEX_NAMES = frozenset(
    {"rank", "local_rank", "gpu", "gpu_id", "gpu_idx", "gpu_index", "device_id", "device_idx",
     "device_index", "local_gpu", "gpu_rank"}
)


def integer_device(node: cst.BaseExpression, project: ProjectFacts = ProjectFacts()) -> bool:
    """An integer literal, a variable named like a device index, or an element of a list that
    the project's options fill with GPU indices by default (``opt.gpu_ids[0]``, ``gpu_ids[0]``
    where ``--gpu_ids`` defaults to ``"0"``)."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, (cst.Name, cst.Attribute)):
        return (last_name(node) or "").lower() in INDEX_NAMES
    if isinstance(node, cst.Subscript) and len(node.slice) == 1:
        index = node.slice[0].slice
        indexed = last_name(node.value) if isinstance(node.value, (cst.Name, cst.Attribute)) else None
        return (
            isinstance(index, cst.Index) and isinstance(index.value, cst.Integer)
            and indexed is not None and project.lists_gpus(indexed)
        )
    return False


#: What ``DistributedDataParallel`` is imported as (``DDP``, ``nn.parallel.DistributedDataParallel``).
DISTRIBUTED_DATA_PARALLEL = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
     "torch.nn.DistributedDataParallel"}
)


def ddp_device_ids(call: cst.Call, qualname: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[cst.BaseExpression]:
    """The list given as ``device_ids=`` to ``DistributedDataParallel``, when it names any device."""
    if qualname(call.func) not in DISTRIBUTED_DATA_PARALLEL:
        return None
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "device_ids":
            listed = isinstance(arg.value, (cst.List, cst.Tuple)) and bool(arg.value.elements)
            return arg.value if listed else None
    return None
