"""Code that only runs in a multi-process distributed run: after ``init_process_group``, behind
``if args.distributed:`` or past ``if world_size == 1: return``. Such code is launched for GPUs;
its one portability hazard is the process group's backend, which TDV303 reports."""

from __future__ import annotations

from typing import Callable, Collection, FrozenSet, Optional

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name, last_name, string_value
from .backends import COLLECTIVES
from .cst_guards import NEGATIVE, NEUTRAL, POSITIVE, QualName, refuses, terminates
from .flags import mentions_availability

# -- distributed-only code ------------------------------------------------------------------
# Code that runs only inside a multi-process run (after ``init_process_group``, behind
# ``if args.distributed:`` or past ``if world_size == 1: return``) is launched for GPUs; its one
# portability hazard is the process group's backend, which TDV303 reports. Measured on 26 real
# projects: 31 of 54 false alarms of TDV101/102/301/501 were such code.

#: The words of a flag that says the run is distributed (``args.distributed``, ``use_ddp``,
#: ``self.distributed_mode``: kkoutini/PaSST@2a5c818 ex_audioset.py:130,274), and the words that
#: make such a name something else (``no_ddp``, ``dist_backend``, a URL or a port).
DISTRIBUTED_WORDS = frozenset({"distributed", "ddp"})
_NOT_A_DISTRIBUTED_FLAG = frozenset({"no", "not", "non", "disable", "disabled", "single", "backend", "url", "port", "init", "method", "sampler"})
#: Calls that are true only inside an initialised process group.
DISTRIBUTED_CALLS = frozenset({"is_initialized", "is_dist_avail_and_initialized", "is_distributed", "is_dist_initialized"})
#: Process counts: more than one means a multi-process (or multi-GPU) run.
PROCESS_COUNTS = frozenset(
    {"world_size", "get_world_size", "num_gpus", "n_gpu", "n_gpus", "ngpu", "ngpus", "num_processes", "nprocs", "num_replicas", "num_nodes", "nnodes"}
)
#: The call that creates the process group. Helpers that may create it (dino's
#: ``init_distributed_mode`` also serves single-GPU runs) are not trusted by name.
DISTRIBUTED_SETUPS = frozenset({"init_process_group"})


def distributed(test: cst.BaseExpression) -> int:
    """POSITIVE when the condition being true means a multi-process distributed run,
    NEGATIVE when it means a single process, NEUTRAL otherwise."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -distributed(test.expression)
    if isinstance(test, cst.BooleanOperation):
        left, right = distributed(test.left), distributed(test.right)
        if isinstance(test.operator, cst.And):
            return POSITIVE if POSITIVE in (left, right) else (NEGATIVE if left == right == NEGATIVE else NEUTRAL)
        return NEGATIVE if NEGATIVE in (left, right) and POSITIVE not in (left, right) else (
            POSITIVE if left == right == POSITIVE else NEUTRAL
        )
    if isinstance(test, cst.Call):
        return POSITIVE if last_name(test.func) in DISTRIBUTED_CALLS else NEUTRAL
    if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)):
        words = set((_flag_name(test) or "").lower().split("_"))
        return POSITIVE if words & DISTRIBUTED_WORDS and not words & _NOT_A_DISTRIBUTED_FLAG else NEUTRAL
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        return _compare_process_count(test.left, test.comparisons[0].operator, test.comparisons[0].comparator)
    return NEUTRAL


def other_branches_exit(statement: cst.If) -> bool:
    """``if args.distributed: ... elif ...: raise ... else: raise``: past the statement the run
    is distributed, since every other branch leaves (moco's main_worker)."""
    if distributed(statement.test) != POSITIVE or statement.orelse is None:
        return False
    branch = statement.orelse
    while isinstance(branch, cst.If):
        if not terminates(branch.body):
            return False
        branch = branch.orelse
        if branch is None:
            return False  # an elif with nothing after it falls through
    return terminates(branch.body)


def _flag_name(node: cst.BaseExpression) -> Optional[str]:
    """The name a flag is read by: ``distributed``, ``args.distributed``, or ``args['distributed']``
    after ``args = vars(parser.parse_args())`` (MhLiao/DB@65ca77a train.py:52-57)."""
    if isinstance(node, cst.Subscript):
        index = node.slice[0].slice if len(node.slice) == 1 else None
        return string_value(index.value) if isinstance(index, cst.Index) else None
    return last_name(node)


def _process_count(node: cst.BaseExpression) -> bool:
    target = node.func if isinstance(node, cst.Call) else node
    return (_flag_name(target) or "").lower() in PROCESS_COUNTS


def _compare_process_count(left: cst.BaseExpression, operator: cst.BaseCompOp, right: cst.BaseExpression) -> int:
    """``world_size > 1`` / ``1 < n_gpu`` POSITIVE; ``world_size == 1`` / ``<= 1`` NEGATIVE."""
    if _process_count(left) and isinstance(right, cst.Integer):
        count, flipped = int(right.value, 0), False
    elif _process_count(right) and isinstance(left, cst.Integer):
        count, flipped = int(left.value, 0), True
    else:
        return NEUTRAL
    if flipped:  # 1 < n  ==  n > 1
        mirror = {cst.LessThan: cst.GreaterThan, cst.GreaterThan: cst.LessThan,
                  cst.LessThanEqual: cst.GreaterThanEqual, cst.GreaterThanEqual: cst.LessThanEqual}
        operator = mirror.get(type(operator), type(operator))()
    if isinstance(operator, cst.GreaterThan) and count >= 1 or isinstance(operator, cst.GreaterThanEqual) and count >= 2:
        return POSITIVE
    if isinstance(operator, cst.NotEqual) and count == 1:
        return POSITIVE
    if isinstance(operator, cst.Equal) and count == 1 or isinstance(operator, cst.LessThanEqual) and count == 1:
        return NEGATIVE
    if isinstance(operator, cst.LessThan) and count == 2:
        return NEGATIVE
    return NEUTRAL


#: Process counts that count GPUs: more than one means the run has (or the user asked for)
#: several GPUs, so it is CUDA-only by construction.
GPU_COUNTS = frozenset(name for name in PROCESS_COUNTS if "gpu" in name)


def several_gpus(test: cst.BaseExpression) -> bool:
    """``args.num_gpus > 1``, ``n_gpu >= 2``: a branch taken only with several GPUs (a count
    from ``device_count()`` is an availability check already)."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return False
    left, right = test.left, test.comparisons[0].comparator
    return (_counts_gpus(left) or _counts_gpus(right)) and _compare_process_count(
        left, test.comparisons[0].operator, right
    ) == POSITIVE


def _counts_gpus(node: cst.BaseExpression) -> bool:
    target = node.func if isinstance(node, cst.Call) else node
    return (last_name(target) or "").lower() in GPU_COUNTS


#: Variables a distributed launcher (torchrun) sets; reading one with ``os.environ[...]``
#: raises KeyError in any other run.
LAUNCHER_VARIABLES = frozenset({"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"})


#: torch.distributed calls that raise unless a process group exists: collectives, the rank
#: queries, and FSDP's optimizer-state exchanges (``FSDP.scatter_full_optim_state_dict``).
PROCESS_GROUP_CALLS = frozenset({
    "barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object", "all_gather_into_tensor",
    "broadcast", "broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather",
    "gather_object", "scatter", "scatter_object_list", "all_to_all", "all_to_all_single", "get_rank",
    "get_world_size", "new_group", "full_optim_state_dict", "scatter_full_optim_state_dict",
    "shard_full_optim_state_dict", "sharded_optim_state_dict", "optim_state_dict", "optim_state_dict_to_load",
})


def sets_up_distributed(
    statement: cst.CSTNode, setups: Collection[str] = DISTRIBUTED_SETUPS, qualname: Optional[QualName] = None
) -> bool:
    """A statement that creates the process group (``dist.init_process_group(...)``, or a call
    of one of ``setups``: this file's functions that do), needs one (``dist.barrier()``, given
    ``qualname`` to tell torch's from others) or reads the launcher's rank
    (``rank = int(os.environ["RANK"])``): what follows runs distributed. Nothing does with no
    ``setups`` (``distributed_setups`` of a file whose process groups are on gloo)."""
    if not setups or not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        value = getattr(small, "value", None)
        if isinstance(value, cst.Call) and last_name(value.func) in setups:
            return True
        if isinstance(value, cst.Call) and qualname is not None and _needs_process_group(value, qualname):
            return True
        if isinstance(small, cst.Assign) and _reads_launcher_variable(value):
            return True
    return False


def _on_gloo(call: cst.Call) -> bool:
    backend = _backend_argument(call)
    return isinstance(backend, cst.SimpleString) and string_value(backend) == "gloo"


def _backend_argument(call: cst.Call) -> Optional[cst.BaseExpression]:
    """What ``init_process_group(...)`` is given as its backend (keyword or first argument)."""
    backend = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "backend"), None)
    if backend is None and call.args and call.args[0].keyword is None and not call.args[0].star:
        backend = call.args[0].value
    return backend


def _needs_process_group(call: cst.Call, qualname: QualName) -> bool:
    name = qualname(call.func) or ""
    return name.startswith("torch.distributed.") and name.rsplit(".", 1)[-1] in PROCESS_GROUP_CALLS


def distributed_setups(module: cst.Module) -> FrozenSet[str]:
    """``init_process_group`` and the module's functions whose body calls it at top level
    (``def setup(rank, world): dist.init_process_group(...)``). Empty where every process group
    the module starts is on gloo (layumi/Person_reID_baseline_pytorch@82ff40f train_DDP.py:104,
    launched by DDP.sh): its distributed code runs on a CPU, so none of it is GPU-only."""
    from ..syntax.cst_walk import nodes_of  # as in ``starts_gpu_only_group``

    starts = [call for call in nodes_of(module, cst.Call) if last_name(call.func) == "init_process_group"]
    if starts and all(_on_gloo(call) for call in starts):
        return frozenset()
    names = set(DISTRIBUTED_SETUPS)
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef) and isinstance(statement.body, cst.IndentedBlock):
            if any(sets_up_distributed(inner) for inner in statement.body.body):
                names.add(statement.name.value)
    return frozenset(names)


def _reads_launcher_variable(value: Optional[cst.BaseExpression]) -> bool:
    if isinstance(value, cst.Call) and last_name(value.func) == "int" and len(value.args) == 1:
        value = value.args[0].value
    if not (isinstance(value, cst.Subscript) and last_name(value.value) == "environ" and len(value.slice) == 1):
        return False
    index = value.slice[0].slice
    return isinstance(index, cst.Index) and string_value(index.value) in LAUNCHER_VARIABLES




def starts_gpu_only_group(module: cst.Module, qualname: QualName, classify: Callable[[cst.BaseExpression], int]) -> bool:
    """Whether the file starts its process group with a backend only a GPU has, outside an
    availability check (``init_process_group(backend="nccl")``): no distributed run of the file
    starts on a CPU until TDV303's fix gives the backend its fallback. A backend chosen by the
    user (``args.dist_backend``), under a check or left to torch can be gloo on a CPU."""
    from ..syntax.cst_walk import nodes_of  # as in ``spawned_per_gpu``: LibCST loads only when asked

    starts = [call for call in nodes_of(module, cst.Call) if qualname(call.func) == "torch.distributed.init_process_group"]
    if not starts:
        return False
    checked = set()
    for statement in nodes_of(module, cst.If):
        sign = classify(statement.test)
        branch = statement.body if sign == POSITIVE else statement.orelse if sign == NEGATIVE else None
        if branch is not None:
            checked.update(id(call) for call in nodes_of(branch, cst.Call))
    assigned: dict = {}  # ``args.dist_backend = "nccl"`` (detr, mae): the backend a name carries
    for assign in nodes_of(module, cst.Assign):
        for target in assign.targets:
            assigned.setdefault(dotted_name(target.target), []).append(assign.value)
    return any(id(call) not in checked and _gpu_only_backend(call, qualname, assigned) for call in starts)


def _gpu_only_backend(call: cst.Call, qualname: QualName, assigned: dict) -> bool:
    """A backend only a GPU has: a literal, ``Backend.NCCL``, or a name every assignment of
    the file binds to such a literal."""
    backend = _backend_argument(call)
    if backend is None:
        return False
    values = assigned.get(dotted_name(backend), ()) if isinstance(backend, (cst.Name, cst.Attribute)) else ()
    return any(_gpu_only_value(value, qualname) for value in [backend, *values]) and all(
        _gpu_only_value(value, qualname) for value in values
    )


def _gpu_only_value(value: cst.BaseExpression, qualname: QualName) -> bool:
    if isinstance(value, cst.SimpleString):
        return string_value(value) in COLLECTIVES
    return qualname(value) == "torch.distributed.Backend.NCCL"


def refuses_without_gpu(function: cst.FunctionDef, classify: Callable[[cst.BaseExpression], int]) -> bool:
    """Whether ``function`` stops at once without CUDA (``assert torch.cuda.is_available(),
    "Distributed mode requires CUDA."``, tacotron2's ``init_distributed``): in distributed
    set-up, the code's own word that its distributed mode is for GPUs."""
    for statement in getattr(function.body, "body", ()):
        if isinstance(statement, cst.SimpleStatementLine):
            if any(
                isinstance(small, cst.Assert) and classify(small.test) == POSITIVE and mentions_availability(small.test)
                for small in statement.body
            ):
                return True
        elif isinstance(statement, cst.If) and statement.orelse is None and refuses(statement.body):
            if classify(statement.test) == NEGATIVE and mentions_availability(statement.test):
                return True
    return False
