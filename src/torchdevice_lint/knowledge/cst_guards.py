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
from .flags import option_test, string_key
from .project_facts import compare

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


#: Words of flags that choose a feature only CUDA has in the code that reads them (torch.cuda.amp,
#: apex): the user asks for the GPU by setting one (``--use_amp``, ``--fp16``).
CUDA_FEATURE_WORDS = frozenset({"amp", "fp16", "apex"})


def flag_name_sign(name: str) -> int:
    """``use_cuda``/``args.gpu``/``use_amp`` read as CUDA flags; ``no_cuda``/``cpu_only`` as
    their negation."""
    lowered = name.lower()
    if names_cuda_feature(lowered):
        return NEGATIVE if lowered.startswith(("no_", "not_", "disable")) else POSITIVE
    if not ("cuda" in lowered or "gpu" in lowered):
        if lowered in {"cpu", "use_cpu", "cpu_only", "force_cpu", "on_cpu"}:
            return NEGATIVE
        return _backend_flag_name(lowered)
    if lowered.startswith(("no_", "not_", "disable", "without_")) or "no_cuda" in lowered:
        return NEGATIVE
    return POSITIVE


def names_cuda_feature(name: str) -> bool:
    """Whether a flag's name says it turns on a CUDA-only feature (``use_amp``, ``fp16``)."""
    return bool(CUDA_FEATURE_WORDS.intersection(name.lower().split("_")))


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


#: Whether a name or attribute holds the result of an availability check (``ok = x and
#: torch.cuda.is_available()``; ``self.pin_memory = ... and torch.cuda.is_available()``).
HoldsAvailability = Callable[["cst.BaseExpression"], bool]


def classify(
    test: cst.BaseExpression, qualname: QualName, flag_default: Optional[FlagDefault] = None,
    holds_availability: Optional[HoldsAvailability] = None,
) -> int:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -classify(test.expression, qualname, flag_default, holds_availability)
    if isinstance(test, cst.BooleanOperation):
        left, right = (classify(side, qualname, flag_default, holds_availability) for side in (test.left, test.right))
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
    if isinstance(test, cst.Subscript):  # ``params["no_cuda"]``: the key names the flag
        key = _flag_name(test)
        return _unless_on_by_default(test, flag_name_sign(key), flag_default) if key else NEUTRAL
    if isinstance(test, (cst.Name, cst.Attribute)):
        name = last_name(test)
        if name == "is_cuda" or name in BACKEND_TENSOR_FLAGS:
            return POSITIVE
        if holds_availability is not None and holds_availability(test):
            return POSITIVE
        return _unless_on_by_default(test, flag_name_sign(name) if name else NEUTRAL, flag_default)
    return NEUTRAL


def _unless_on_by_default(flag: cst.BaseExpression, sign: int, flag_default: Optional[FlagDefault]) -> int:
    """A user flag's sign, or NEUTRAL when its default already picks the GPU: the branch it
    decides runs on a CPU-only machine unless the user says otherwise. A flag for a CUDA-only
    feature guards only where it is known to be off by default (``config['amp']`` may be on)."""
    default = flag_default(flag) if sign != NEUTRAL and flag_default is not None else None
    if default is not None and default == (sign == POSITIVE):
        return NEUTRAL
    if default is None and names_cuda_feature(_flag_name(flag) or ""):
        return NEUTRAL
    return sign


def _flag_name(flag: cst.BaseExpression) -> Optional[str]:
    """``args.use_amp`` -> ``use_amp``; ``params["no_cuda"]`` -> ``no_cuda``."""
    if isinstance(flag, cst.Subscript):
        return string_key(flag)
    return last_name(flag.func) if isinstance(flag, cst.Call) else last_name(flag)


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


def availability_call(node: Optional[cst.BaseExpression], qualname: QualName) -> bool:
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
        if availability_call(side, qualname):
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
    sign = _compare_device_string(_tensor_type(left, right, qualname) or _tensor_type(right, left, qualname))
    for side in (left, right):
        sign = sign or _compare_device_string(_device_string(side, qualname)) or _compare_device_collection(side)
    if sign == NEUTRAL:
        return NEUTRAL
    if isinstance(operator, (cst.Equal, cst.Is, cst.In)):
        return sign
    if isinstance(operator, (cst.NotEqual, cst.IsNot, cst.NotIn)):
        return -sign
    return NEUTRAL


def _tensor_type(call: cst.BaseExpression, name: cst.BaseExpression, qualname: QualName) -> Optional[str]:
    """``x.type() == 'torch.cuda.HalfTensor'`` and ``type(x) is torch.cuda.FloatTensor`` test the
    device: "cuda" for a ``torch.cuda.`` type, "cpu" for another ``torch.`` one (WaveGlow's
    glow.py, xcmyz/FastSpeech@1e1a61b :265, Shen-Lab/GraphCL@b4d7501
    adversarialRobustness_Component/code/common/graph_embedding.py:104,168)."""
    if not isinstance(call, cst.Call):
        return None
    if not call.args and isinstance(call.func, cst.Attribute) and call.func.attr.value == "type":
        kind = string_value(name)
    elif isinstance(call.func, cst.Name) and call.func.value == "type" and len(call.args) == 1 and not call.args[0].keyword:
        kind = qualname(name)
    else:
        return None
    if kind is None or not kind.startswith("torch.") or not kind.endswith("Tensor"):
        return None
    return "cuda" if kind.startswith("torch.cuda.") else "cpu"


def _device_string(node: cst.BaseExpression, qualname: QualName) -> Optional[str]:
    """``"cpu"``, and ``torch.device("cpu")`` (THUDM/GCC@20398aa gcc/models/graph_encoder.py:155)."""
    if isinstance(node, cst.Call) and len(node.args) == 1 and not node.args[0].keyword and qualname(node.func) == "torch.device":
        node = node.args[0].value
    return string_value(node)


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


def refuses(block: cst.BaseSuite) -> bool:
    """Whether a branch stops the program with an error: it ends in ``raise``, ``abort()`` or
    ``sys.exit(...)`` with a message or non-zero status (a test's skip, ``SkipTest``, ``return``
    and a plain ``sys.exit()`` end quietly)."""
    if not terminates(block):
        return False
    body = block.body if isinstance(block, cst.SimpleStatementSuite) else block.body[-1].body
    last = body[-1]
    if isinstance(last, cst.Raise):
        raised = last.exc.func if isinstance(last.exc, cst.Call) else last.exc
        return "skip" not in (last_name(raised) or "").lower()
    if not (isinstance(last, cst.Expr) and isinstance(last.value, cst.Call)):
        return False
    call = last.value
    if last_name(call.func) == "abort":
        return True
    # ``sys.exit()`` and ``exit(0)`` end a run that has nothing to do here, without an error
    return last_name(call.func) in {"exit", "_exit"} and bool(call.args) and not (
        isinstance(call.args[0].value, cst.Integer) and call.args[0].value.value == "0"
    )


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
        if isinstance(statement, cst.If) and is_main_check(statement.test) and isinstance(statement.body, cst.IndentedBlock):
            return _gates(statement.body.body, checks, qualname)
    return False


def is_main_check(test: cst.BaseExpression) -> bool:
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
    return availability_call(value, qualname)


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
        worker = call.args[0].value if call.args and call.args[0].keyword is None else None
        if isinstance(worker, cst.Name) and _counts_devices(process_count(call), qualname, counts):
            spawned.add(worker.value)
    return frozenset(spawned)


def process_count(call: cst.Call) -> Optional[cst.BaseExpression]:
    """The ``nprocs`` a ``spawn(fn, args, nprocs)`` (or ``start_processes``) call is given, by
    keyword or third in place; None where it takes the default."""
    given = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "nprocs"), None)
    positional = [arg.value for arg in call.args if arg.keyword is None]
    return given if given is not None or len(positional) < 3 else positional[2]


def _gates(body, checks: Collection[str], qualname: QualName) -> bool:
    counts: set = set()
    for statement in body:
        if isinstance(statement, cst.If) and statement.orelse is None and terminates(statement.body) and not refuses(statement.body):
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


#: Packages that run on NVIDIA GPUs only: a branch that imports one is taken only where CUDA is.
NVIDIA_ONLY_PACKAGES = frozenset({"tensorrt", "torch2trt", "pycuda"})


def imports_nvidia_only(block: cst.BaseSuite) -> bool:
    """Whether the block's own statements import an NVIDIA-only package (Megvii-BaseDetection/
    YOLOX@6ddff48 tools/demo.py:122-128: ``if trt_file is not None: from torch2trt import TRTModule``)."""
    if not isinstance(block, cst.IndentedBlock):
        return False
    for line in block.body:
        for small in line.body if isinstance(line, cst.SimpleStatementLine) else ():
            if isinstance(small, cst.ImportFrom) and small.module is not None and not small.relative:
                names = [dotted_name(small.module)]
            elif isinstance(small, cst.Import):
                names = [dotted_name(alias.name) for alias in small.names]
            else:
                continue
            if any(name and name.split(".")[0] in NVIDIA_ONLY_PACKAGES for name in names):
                return True
    return False
