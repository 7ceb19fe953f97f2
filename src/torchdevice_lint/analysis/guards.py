"""Recognising conditions that check for CUDA or another accelerator, so code behind them is
not reported.

``classify(test, qualname)`` returns POSITIVE when the condition being true means CUDA is there
(``torch.cuda.is_available()``, ``x.is_cuda``, ``device.type == "cuda"``, ``use_cuda``),
NEGATIVE when it being true means CUDA is absent (``not torch.cuda.is_available()``,
``device == "cpu"``, ``args.no_cuda``), and NEUTRAL otherwise.
"""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from .syntax import last_name, string_value

POSITIVE, NEUTRAL, NEGATIVE = 1, 0, -1

AVAILABILITY_CALLS = {
    "torch.cuda.is_available",
    "torch.accelerator.is_available",
    "torch.cuda.device_count",
    "torch.accelerator.device_count",
    "torch.cuda.is_initialized",
}

QualName = Callable[[cst.BaseExpression], Optional[str]]


def names_cuda(name: str) -> bool:
    lowered = name.lower()
    return "cuda" in lowered or "gpu" in lowered


def _flag_name(name: str) -> int:
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


def classify(test: cst.BaseExpression, qualname: QualName) -> int:
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -classify(test.expression, qualname)
    if isinstance(test, cst.BooleanOperation):
        left, right = classify(test.left, qualname), classify(test.right, qualname)
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
        if last == "startswith" and isinstance(test.func, cst.Attribute) and test.args:
            return _compare_device_string(string_value(test.args[0].value))
        if last is not None:
            return _flag_name(last) if last.startswith(("is_", "has_", "use_", "can_", "on_", "no_")) else NEUTRAL
        return NEUTRAL
    if isinstance(test, cst.Comparison):
        return _classify_comparison(test, qualname)
    if isinstance(test, (cst.Name, cst.Attribute)):
        name = last_name(test)
        if name == "is_cuda" or name in BACKEND_TENSOR_FLAGS:
            return POSITIVE
        return _flag_name(name) if name else NEUTRAL
    return NEUTRAL


def _classify_comparison(test: cst.Comparison, qualname: QualName) -> int:
    if len(test.comparisons) != 1:
        return NEUTRAL
    target = test.comparisons[0]
    operator = target.operator
    left, right = test.left, target.comparator
    # args.gpu is not None / self.cuda_device is None
    if isinstance(right, cst.Name) and right.value == "None" and isinstance(operator, (cst.Is, cst.IsNot)):
        flag = _flag_name(last_name(left) or "")
        return flag if isinstance(operator, cst.IsNot) else -flag
    # device_count() > 0 / >= 1 / == 0
    for side, other in ((left, right), (right, left)):
        if isinstance(side, cst.Call) and (
            qualname(side.func) in AVAILABILITY_CALLS or last_name(side.func) == "device_count"
        ):
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

#: Device types other than CUDA that raise where their backend is missing, with the hardware
#: they need (for messages).
OTHER_BACKENDS = {
    "mps": "MPS (Apple silicon)",
    "xpu": "XPU (an Intel GPU)",
    "npu": "NPU (Ascend, torch_npu)",
    "hpu": "HPU (Intel Gaudi)",
    "xla": "XLA (a TPU, torch_xla)",
}
#: ``x.is_mps`` and friends: true only for a tensor that is on that accelerator.
BACKEND_TENSOR_FLAGS = {f"is_{backend}" for backend in OTHER_BACKENDS}


def backend_of_device_string(value: Optional[str]) -> Optional[str]:
    """``"mps"``, ``"xpu:1"`` -> the backend named; None for CUDA, the CPU and anything else."""
    if not value:
        return None
    backend, _, index = value.partition(":")
    if backend in OTHER_BACKENDS and (not index or index.isdigit()):
        return backend
    return None


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
