"""Recognising conditions that check for CUDA or another accelerator, so code behind them is
not reported.

``classify(test, qualname)`` returns POSITIVE when the condition being true means CUDA is there
(``torch.cuda.is_available()``, ``x.is_cuda``, ``device.type == "cuda"``, ``use_cuda``),
NEGATIVE when it being true means CUDA is absent (``not torch.cuda.is_available()``,
``device == "cpu"``, ``args.no_cuda``), and NEUTRAL otherwise.
"""

from __future__ import annotations

from typing import Callable, Collection, FrozenSet, Optional

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name, last_name, string_value
from .backends import BACKEND_TENSOR_FLAGS, OTHER_BACKENDS, backend_of_device_string
from .flags import compare, option_test

POSITIVE, NEUTRAL, NEGATIVE = 1, 0, -1

AVAILABILITY_CALLS = {
    "torch.cuda.is_available",
    "torch.accelerator.is_available",
    "torch.cuda.device_count",
    "torch.accelerator.device_count",
    "torch.cuda.is_initialized",
}

QualName = Callable[["cst.BaseExpression"], Optional[str]]


def names_cuda(name: str) -> bool:
    lowered = name.lower()
    return "cuda" in lowered or "gpu" in lowered


def delegates_to_cuda(function_name: str) -> bool:
    """``def cuda(self)`` (an override of ``Module.cuda``) and ``move_to_cuda(sample)``-style
    helpers exist to do the move: their callers decide whether CUDA is there."""
    name = function_name.lstrip("_").lower()
    return name == "cuda" or name.endswith(("to_cuda", "to_gpu"))


def flag_name_sign(name: str) -> int:
    """``use_cuda``/``args.gpu`` read as CUDA flags; ``no_cuda``/``cpu_only`` as their negation."""
    lowered = name.lower()
    if not ("cuda" in lowered or "gpu" in lowered):
        if lowered in {"cpu", "use_cpu", "cpu_only", "force_cpu", "on_cpu"}:
            return NEGATIVE
        return _backend_flag_name(lowered)
    if lowered.startswith(("no_", "not_", "disable", "without_")) or "no_cuda" in lowered:
        return NEGATIVE
    return POSITIVE


def _compare_device_string(value: Optional[str]) -> int:
    if value is None:
        return NEUTRAL
    if value.startswith("cuda") or value == "gpu" or backend_of_device_string(value):
        return POSITIVE
    if value == "cpu":
        return NEGATIVE
    return NEUTRAL


#: The default of a user flag (None: unknown, or derived from an availability check).
FlagDefault = Callable[["cst.BaseExpression"], Optional[bool]]


def classify(test: cst.BaseExpression, qualname: QualName, flag_default: Optional[FlagDefault] = None) -> int:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -classify(test.expression, qualname, flag_default)
    if isinstance(test, cst.BooleanOperation):
        left, right = classify(test.left, qualname, flag_default), classify(test.right, qualname, flag_default)
        if isinstance(test.operator, cst.And):
            # "a and b" true implies both: any conjunct that proves CUDA is enough.
            return POSITIVE if POSITIVE in (left, right) else (NEGATIVE if left == right == NEGATIVE else NEUTRAL)
        return NEGATIVE if NEGATIVE in (left, right) and POSITIVE not in (left, right) else (
            POSITIVE if left == right == POSITIVE else NEUTRAL
        )
    if isinstance(test, cst.Call):
        func_name = qualname(test.func)
        if func_name in AVAILABILITY_CALLS:
            return POSITIVE
        last = last_name(test.func)
        if last in {"is_available", "device_count"}:
            return POSITIVE
        if last == "isinstance" and len(test.args) == 2:
            # ``isinstance(x, torch.cuda.FloatTensor)``: true only for a CUDA tensor, like ``x.is_cuda``
            kind = qualname(test.args[1].value) or ""
            return POSITIVE if kind.startswith("torch.cuda.") and kind.endswith("Tensor") else NEUTRAL
        if last == "startswith" and isinstance(test.func, cst.Attribute) and test.args:
            return _compare_device_string(string_value(test.args[0].value))
        if last is not None and last.startswith(("is_", "has_", "use_", "can_", "on_", "no_")):
            return _unless_on_by_default(test, flag_name_sign(last), flag_default)
        return NEUTRAL
    if isinstance(test, cst.Comparison):
        sign = _classify_comparison(test, qualname)
        if sign == NEUTRAL and flag_default is not None:
            return _compared_option(test, flag_default)
        return sign
    if isinstance(test, (cst.Name, cst.Attribute)):
        name = last_name(test)
        if name == "is_cuda" or name in BACKEND_TENSOR_FLAGS:
            return POSITIVE
        return _unless_on_by_default(test, flag_name_sign(name) if name else NEUTRAL, flag_default)
    return NEUTRAL


def _unless_on_by_default(flag: cst.BaseExpression, sign: int, flag_default: Optional[FlagDefault]) -> int:
    """A user flag's sign, or NEUTRAL when its default already picks the GPU: the branch it
    decides runs on a CPU-only machine unless the user says otherwise."""
    if sign != NEUTRAL and flag_default is not None:
        default = flag_default(flag)
        if default is not None and default == (sign == POSITIVE):
            return NEUTRAL
    return sign


def _compared_option(test: cst.Comparison, flag_default: FlagDefault) -> int:
    """``args.cuda > 0``, ``len(opt.gpu_ids) > 0``, ``args.gpu >= 0``, ``args.num_gpu == 0`` on a
    CUDA-named option. Its sense comes from the option's "off" value (no GPUs counted, or index
    -1): true there means CUDA is absent (NEGATIVE), false means present (POSITIVE). It guards
    only when the project's default keeps the GPU branch from running; NEUTRAL otherwise."""
    tested = option_test(test)
    if tested is None or tested[2] is None or flag_name_sign(tested[0]) != POSITIVE:
        return NEUTRAL
    name, measured, operator, operand = tested
    off = -1 if not measured and name.lower() in INDEX_OPTIONS else 0
    sense = NEGATIVE if compare(operator, off, operand) else POSITIVE
    default = flag_default(test)
    if default is None or default == (sense == POSITIVE):
        return NEUTRAL
    return sense


#: Options holding a GPU's index, whose "no GPU" value is -1 (counts and switches use 0).
INDEX_OPTIONS = frozenset({"gpu", "gpu_id", "gpuid", "gpu_index", "device_id", "cuda_device", "gpu_ids"})


def _availability_call(node: Optional[cst.BaseExpression], qualname: QualName) -> bool:
    """``torch.cuda.device_count()``, ``torch.cuda.is_available()`` and the like."""
    return isinstance(node, cst.Call) and (
        qualname(node.func) in AVAILABILITY_CALLS or last_name(node.func) == "device_count"
    )


def _classify_comparison(test: cst.Comparison, qualname: QualName) -> int:
    if len(test.comparisons) != 1:
        return NEUTRAL
    target = test.comparisons[0]
    operator = target.operator
    left, right = test.left, target.comparator
    # args.gpu is not None / self.cuda_device is None
    if isinstance(right, cst.Name) and right.value == "None" and isinstance(operator, (cst.Is, cst.IsNot)):
        flag = flag_name_sign(last_name(left) or "")
        return flag if isinstance(operator, cst.IsNot) else -flag
    # device_count() > 0 / >= 1 / == 0
    for side, other in ((left, right), (right, left)):
        if _availability_call(side, qualname):
            if isinstance(other, cst.Integer):
                count = int(other.value, 0)
                if isinstance(operator, (cst.GreaterThan,)) and side is left:
                    return POSITIVE
                if isinstance(operator, cst.GreaterThanEqual) and side is left and count >= 1:
                    return POSITIVE
                if isinstance(operator, cst.Equal) and count == 0:
                    return NEGATIVE
                if isinstance(operator, cst.NotEqual) and count == 0:
                    return POSITIVE
            return NEUTRAL
    sign = NEUTRAL
    for side in (left, right):
        sign = sign or _compare_device_string(string_value(side)) or _compare_device_collection(side)
    if sign == NEUTRAL:
        return NEUTRAL
    if isinstance(operator, (cst.Equal, cst.Is, cst.In)):
        return sign
    if isinstance(operator, (cst.NotEqual, cst.IsNot, cst.NotIn)):
        return -sign
    return NEUTRAL


# -- every accelerator, not only CUDA (issue 12) ---------------------------------------------

def _backend_flag_name(lowered: str) -> int:
    """``use_mps``/``args.xpu``/``mps_available`` read as flags for that backend (one of the
    name's ``_``-separated words is the backend: ``timestamps`` is not), ``no_mps`` negated."""
    words = lowered.split("_")
    if not any(word in OTHER_BACKENDS for word in words):
        return NEUTRAL
    return NEGATIVE if words[0] in {"no", "not", "disable", "without"} else POSITIVE


def _compare_device_collection(node: cst.BaseExpression) -> int:
    """``device.type in ("cuda", "mps")``: every member an accelerator is a positive check,
    ``in ("cpu",)`` a negative one."""
    if not isinstance(node, (cst.Tuple, cst.List, cst.Set)) or not node.elements:
        return NEUTRAL
    signs = {_compare_device_string(string_value(element.value)) for element in node.elements}
    return signs.pop() if len(signs) == 1 else NEUTRAL


def terminates(block: cst.BaseSuite) -> bool:
    """Whether a branch always leaves the enclosing block (return, raise, skip, exit...)."""
    if isinstance(block, cst.SimpleStatementSuite):
        statements = list(block.body)
    elif isinstance(block, cst.IndentedBlock) and block.body:
        last = block.body[-1]
        if not isinstance(last, cst.SimpleStatementLine):
            return False
        statements = list(last.body)
    else:
        return False
    if not statements:
        return False
    last_small = statements[-1]
    if isinstance(last_small, (cst.Return, cst.Raise, cst.Continue, cst.Break)):
        return True
    if isinstance(last_small, cst.Expr) and isinstance(last_small.value, cst.Call):
        name = last_name(last_small.value.func)
        return name in {"skip", "skipTest", "exit", "_exit", "abort", "fail"}
    return False


# -- distributed-only code ------------------------------------------------------------------
# Code that runs only inside a multi-process run (after ``init_process_group``, behind
# ``if args.distributed:`` or past ``if world_size == 1: return``) is launched for GPUs; its one
# portability hazard is the process group's backend, which TDV303 reports. Measured on 26 real
# projects: 31 of 54 false alarms of TDV101/102/301/501 were such code.

#: Flags that say the run is distributed (``args.distributed``, ``ddp``...).
DISTRIBUTED_FLAGS = frozenset(
    {"distributed", "is_distributed", "ddp", "use_ddp", "is_ddp", "multiprocessing_distributed", "use_distributed"}
)
#: Calls that are true only inside an initialised process group.
DISTRIBUTED_CALLS = frozenset({"is_initialized", "is_dist_avail_and_initialized", "is_distributed", "is_dist_initialized"})
#: Process counts: more than one means a multi-process (or multi-GPU) run.
PROCESS_COUNTS = frozenset(
    {"world_size", "get_world_size", "num_gpus", "n_gpu", "n_gpus", "ngpu", "ngpus", "num_processes", "nprocs", "num_replicas"}
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
    if isinstance(test, (cst.Name, cst.Attribute)):
        return POSITIVE if (last_name(test) or "").lower() in DISTRIBUTED_FLAGS else NEUTRAL
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


def _process_count(node: cst.BaseExpression) -> bool:
    target = node.func if isinstance(node, cst.Call) else node
    return (last_name(target) or "").lower() in PROCESS_COUNTS


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
    (``rank = int(os.environ["RANK"])``): what follows runs distributed."""
    if not isinstance(statement, cst.SimpleStatementLine):
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


def _needs_process_group(call: cst.Call, qualname: QualName) -> bool:
    name = qualname(call.func) or ""
    return name.startswith("torch.distributed.") and name.rsplit(".", 1)[-1] in PROCESS_GROUP_CALLS


def distributed_setups(module: cst.Module) -> FrozenSet[str]:
    """``init_process_group`` and the module's functions whose body calls it at top level
    (``def setup(rank, world): dist.init_process_group(...)``)."""
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


# -- programs that refuse to start without GPUs ----------------------------------------------
def gpu_gated_program(module: cst.Module, qualname: QualName) -> bool:
    """Whether the ``__main__`` block runs the program only where GPUs are: it exits unless an
    availability check holds (``if not verify_min_gpu_count(2): exit()``, the check maybe in a
    function of the file), or spawns one process per GPU (``mp.spawn(main,
    nprocs=torch.cuda.device_count())``, none without a GPU). The file's functions then only
    run on GPU machines."""
    checks = {
        statement.name.value
        for statement in module.body
        if isinstance(statement, cst.FunctionDef) and _returns_availability(statement, qualname)
    }
    for statement in module.body:
        if isinstance(statement, cst.If) and _is_main_check(statement.test) and isinstance(statement.body, cst.IndentedBlock):
            return _gates(statement.body.body, checks, qualname)
    return False


def _is_main_check(test: cst.BaseExpression) -> bool:
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == "__name__"
        and string_value(test.comparisons[0].comparator) == "__main__"
    )


def _returns_availability(function: cst.FunctionDef, qualname: QualName) -> bool:
    body = function.body.body if isinstance(function.body, cst.IndentedBlock) else ()
    returns = [
        small.value
        for statement in body
        if isinstance(statement, cst.SimpleStatementLine)
        for small in statement.body
        if isinstance(small, cst.Return) and small.value is not None
    ]
    return bool(returns) and all(_mentions_availability(value, qualname) for value in returns)


def _mentions_availability(value: cst.BaseExpression, qualname: QualName) -> bool:
    if classify(value, qualname) == POSITIVE:
        return True
    if isinstance(value, cst.BooleanOperation):
        return _mentions_availability(value.left, qualname) or _mentions_availability(value.right, qualname)
    return False


def _counts_devices(value: Optional[cst.BaseExpression], qualname: QualName, counts: Collection[str]) -> bool:
    if isinstance(value, (cst.Name, cst.Attribute)):
        return dotted_name(value) in counts
    return _availability_call(value, qualname)


def spawned_per_gpu(module: cst.Module, qualname: QualName) -> FrozenSet[str]:
    """Functions of the file started by ``mp.spawn(worker, nprocs=n)`` where ``n`` counts the
    GPUs (``torch.cuda.device_count()``, or a name or ``args.ngpus_per_node`` assigned it):
    without a GPU no such process starts."""
    from ..syntax.cst_walk import nodes_of  # read-only: ``findall`` would rebuild the whole module

    counts = {
        dotted_name(target.target)
        for assign in nodes_of(module, cst.Assign)
        if _counts_devices(assign.value, qualname, ())
        for target in assign.targets
        if dotted_name(target.target)
    }
    spawned = set()
    for call in nodes_of(module, cst.Call):
        if last_name(call.func) != "spawn":
            continue
        positional = [arg.value for arg in call.args if arg.keyword is None]
        nprocs = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "nprocs"), None)
        if nprocs is None and len(positional) > 2:
            nprocs = positional[2]  # spawn(fn, args, nprocs)
        if positional and isinstance(positional[0], cst.Name) and _counts_devices(nprocs, qualname, counts):
            spawned.add(positional[0].value)
    return frozenset(spawned)


def _gates(body, checks: Collection[str], qualname: QualName) -> bool:
    counts: set = set()
    for statement in body:
        if isinstance(statement, cst.If) and statement.orelse is None and terminates(statement.body):
            test = statement.test
            if classify(test, qualname) == NEGATIVE:
                return True
            if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                inner = test.expression
                if isinstance(inner, cst.Call) and last_name(inner.func) in checks:
                    return True
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign) and _counts_devices(small.value, qualname, ()):
                counts.update(t.target.value for t in small.targets if isinstance(t.target, cst.Name))
            call = getattr(small, "value", None)
            if isinstance(call, cst.Call) and last_name(call.func) == "spawn":
                nprocs = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "nprocs"), None)
                if _counts_devices(nprocs, qualname, counts):
                    return True
    return False
