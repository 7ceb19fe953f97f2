"""Reading ``torch.cuda.device_count()``, which is 0 on a machine without a GPU: the names a
file binds to it, and the checks of it (``if num_gpus > 0:``, ``x if n else 0``), for the rules
whose hazard is that 0 (TDV305 divides by it, TDV307 starts that many processes)."""

from __future__ import annotations

import operator
from typing import Dict, FrozenSet, Optional

from ...engine.rule import Rule
from ...knowledge import cst_distributed as distributed_code
from ...knowledge.cst_guards import NEGATIVE, NEUTRAL, POSITIVE, spawned_per_gpu
from ...knowledge.value_checks import combined
from ...syntax.cst_lazy import cst
from ...syntax.cst_nodes import dotted_name

DEVICE_COUNTS = frozenset(
    {"torch.cuda.device_count", "torch.accelerator.device_count", "torch.xpu.device_count", "torch.mps.device_count"}
)
#: ``count OP k`` holds for a count of 0: then the other branch has a nonzero count.
COMPARISONS = {
    "LessThan": operator.lt, "LessThanEqual": operator.le, "GreaterThan": operator.gt,
    "GreaterThanEqual": operator.ge, "Equal": operator.eq, "NotEqual": operator.ne,
}


def scope_names(rule: Rule, cache: Dict[int, FrozenSet[str]], accepts) -> FrozenSet[str]:
    """The names bound only to values ``accepts`` takes, readable where the node being visited
    runs: those of the innermost function, of the methods of its class for ``self.`` names, and
    of the module for names the function does not bind. ``cache`` keeps them per scope."""
    ctx = rule.ctx
    function = ctx.enclosing_function()
    key = id(function if function is not None else ctx.module)
    if key in cache:
        return cache[key]

    def of(scope: cst.CSTNode) -> FrozenSet[str]:
        values = ctx.assigned_values(scope)
        return frozenset(name for name, found in values.items() if all(v is not None and accepts(v) for v in found))

    names = set(of(ctx.module))
    if function is not None:
        local = ctx.bound_names(function)
        names = {name for name in names if name.split(".")[0] not in local} | of(function)
        owner = ctx.enclosing_class()
        if owner is not None:
            methods = [statement for statement in owner.body.body if isinstance(statement, cst.FunctionDef)]
            names |= {name for method in methods for name in of(method) if name.startswith("self.")}
    cache[key] = frozenset(names)
    return cache[key]


class DeviceCounting:
    """What a rule whose hazard is a count of 0 reads of the file: the counts, their checks,
    and whether the code runs where no GPU is (mixed into the rule, before ``Rule``)."""

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._aliases: Dict[int, FrozenSet[str]] = {}
        #: Every name the file binds a device count to somewhere: all ``scope_names`` can find.
        self._counted: Optional[FrozenSet[str]] = None
        self._gpu_only_group: Optional[bool] = None
        self._workers: Optional[FrozenSet[str]] = None

    def _counts(self, node: cst.BaseExpression) -> bool:
        """A device count: the call, a name bound only to one, a product with one, or ``min()``
        of one and other numbers (AbnerHqC/GaitSet@5535943 model/model.py:101), 0 without a GPU."""
        if isinstance(node, cst.Call):
            if isinstance(node.func, cst.Name) and node.func.value == "min" and all(arg.keyword is None and not arg.star for arg in node.args):
                return any(self._counts(arg.value) for arg in node.args)
            return self.ctx.qualname(node.func) in DEVICE_COUNTS
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply):
            return self._counts(node.left) or self._counts(node.right)
        if isinstance(node, (cst.Name, cst.Attribute)):
            name = dotted_name(node)
            if name not in self._counted_anywhere():
                return False  # most divisors: no scope needs reading
            names = scope_names(self, self._aliases, lambda value: isinstance(value, cst.Call) and self._counts(value))
            return name in names
        return False

    def _counted_anywhere(self) -> FrozenSet[str]:
        if self._counted is None:
            self._counted = frozenset()  # while it is read: ``min(n, ...)`` of a name asks again
            values = self.ctx.assigned_values(self.ctx.module, nested=True)
            self._counted = frozenset(
                name for name, found in values.items() if any(isinstance(value, cst.Call) and self._counts(value) for value in found)
            )
        return self._counted

    def _sign(self, test: cst.BaseExpression) -> int:
        parts = combined(test, self._sign)
        if parts is not None:
            return parts
        if self._counts(test):
            return POSITIVE
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            left, target = test.left, test.comparisons[0]
            compare = COMPARISONS.get(type(target.operator).__name__)
            if compare is None:
                return NEUTRAL
            if self._counts(left) and isinstance(target.comparator, cst.Integer):
                holds_at_zero = compare(0, int(target.comparator.value))
            elif self._counts(target.comparator) and isinstance(left, cst.Integer):
                holds_at_zero = compare(int(left.value), 0)
            else:
                return NEUTRAL
            return NEGATIVE if holds_at_zero else POSITIVE
        return NEUTRAL

    def _runs_without_gpu(self) -> bool:
        """Distributed-only code exempts other rules (a run launched for GPUs), but a process
        group with gloo starts on a CPU, and there the division raises. Not so where no
        distributed run of the file starts without a GPU: a group whose backend only a GPU has
        (TDV303 reports it; after its fix the next pass reports this), a worker spawned once per
        GPU, a set-up function that refuses to run without CUDA (TDV309 reports the refusal)."""
        ctx = self.ctx
        if not ctx.distributed_depth:
            return True
        if self._gpu_only_group is None:  # once per file
            self._gpu_only_group = distributed_code.starts_gpu_only_group(ctx.module, ctx.qualname, ctx.classify)
            self._workers = spawned_per_gpu(ctx.module, ctx.qualname) if "spawn" in ctx.source else frozenset()
        functions = [scope for scope in ctx.scopes if isinstance(scope, cst.FunctionDef)]
        if functions and (functions[0].name.value in self._workers or distributed_code.refuses_without_gpu(functions[-1], ctx.classify)):
            return False
        return not self._gpu_only_group
