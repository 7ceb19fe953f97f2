"""The availability checks the first stage reads on CPython's tree, for certain.

``cst_guards.classify`` decides a condition's sign with the file's imports and its user-flag
defaults, which only the LibCST pass knows. Some conditions have the same sign whatever those
are: ``torch.cuda.is_available()`` (any call named ``is_available`` or ``device_count``),
``self.cuda_device is not None`` (a name read as a flag, never a flag's default), ``x.is_cuda``,
a bare name the module's own bindings decide (``NameSigns``), and ``not`` and ``and`` of them.
The batched pass only ever adds guard coverage, so what these cover (an ``if`` branch, a
conditional expression's arm, the rest of an ``and``, the body of a ``def cuda(self)`` override
or of a CUDA-skipping test) is guarded for the rules that ask ``ctx.guarded``
(``first_stage.triggers.Unguarded``): a file whose candidates all stand there is not parsed
with LibCST for them. What this module cannot read for certain it leaves uncovered.
"""

from __future__ import annotations

import ast
from bisect import bisect_right
from itertools import accumulate
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..syntax.ast_nodes import dotted_name, last_name
from . import cst_guards as guards
from .backends import BACKEND_TENSOR_FLAGS
from .flags import HOLDS_AVAILABILITY, binding_values

Position = Tuple[int, int]
#: The sign ``cst_guards.classify`` gives, or None when it may depend on the imports or flags.
Sign = Optional[int]
#: The sign of a bare name tested as a condition (``if cuda:``), or None.
NameSigns = Callable[[str], Sign]


def sign(test: ast.expr, names: Optional[NameSigns] = None) -> Sign:
    """``cst_guards.classify(test)`` where it holds for any imports and flag defaults, else None.
    ``names``: what the module's bindings say of a bare name (``module_name_signs``)."""
    kind = type(test)
    if kind is ast.UnaryOp and type(test.op) is ast.Not:
        inner = sign(test.operand, names)
        return None if inner is None else -inner
    if kind is ast.BoolOp and type(test.op) is ast.And:
        signs = [sign(value, names) for value in test.values]
        if guards.POSITIVE in signs:
            return guards.POSITIVE  # one conjunct that proves CUDA is enough, however nested
        if None in signs:
            return None
        return guards.NEGATIVE if all(s == guards.NEGATIVE for s in signs) else guards.NEUTRAL
    if kind is ast.Call:
        return guards.POSITIVE if last_name(test.func) in ("is_available", "device_count") else None
    if kind is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Is, ast.IsNot):
        right = test.comparators[0]
        if type(right) is ast.Constant and right.value is None:
            flag = guards.flag_name_sign(last_name(test.left) or "")
            return flag if type(test.ops[0]) is ast.IsNot else -flag
    if kind is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) in (ast.Eq, ast.NotEq):
        compared = _device_string_sign(test.left, test.comparators[0])
        if compared is not None:
            return compared if type(test.ops[0]) is ast.Eq else -compared
    if kind is ast.Name or kind is ast.Attribute:
        tested = last_name(test)
        if tested == "is_cuda" or tested in BACKEND_TENSOR_FLAGS:
            return guards.POSITIVE  # a tensor's own flag
        if kind is ast.Name and names is not None:
            return names(test.id)
    return None


def _device_string_sign(left: ast.expr, right: ast.expr) -> Sign:
    """``prefetch_mode == "cuda"``, ``args.device != "cpu"``: a value compared with a CUDA device
    string (or "gpu") is the device in use, as ``cst_guards`` reads it, whatever the value is;
    with "cpu", the other way. Other backends' strings are left to the LibCST pass."""
    if any(type(side) is ast.Call and last_name(side.func) in ("is_available", "device_count") for side in (left, right)):
        return None
    for side in (left, right):
        if type(side) is ast.Constant and type(side.value) is str:
            if side.value.startswith("cuda") or side.value == "gpu":
                return guards.POSITIVE
            return guards.NEGATIVE if side.value == "cpu" else None
    return None


def module_name_signs(tree: ast.Module) -> NameSigns:
    """``classify``'s sign of ``if name:`` where the module alone decides it: no function takes
    a parameter of that name, and every binding of it is an availability check
    (``cuda = torch.cuda.is_available()``), or each is the same constant, or none is a
    constant or a copied option (then the name's own words decide: ``if use_cuda:``)."""
    verdicts: Optional[dict] = None  # the module's bindings, read once a bare name is tested
    known: Dict[str, Sign] = {}

    def name_sign(name: str) -> Sign:
        nonlocal verdicts
        if name not in known:
            if verdicts is None:
                verdicts = binding_values(tree)
            known[name] = _name_sign(name, verdicts)
        return known[name]

    return name_sign


def _name_sign(name: str, verdicts: dict) -> Sign:
    if ("parameter", name) in verdicts:
        return None  # a caller's value: the project's to say
    verdict = verdicts.get(("name", name))
    if verdict == HOLDS_AVAILABILITY:
        return guards.POSITIVE
    flag = guards.flag_name_sign(name)
    if flag == guards.NEUTRAL or type(verdict) is tuple:
        return None  # no flag, or a copy of an option whose default the project knows
    if type(verdict) is bool:
        return guards.NEUTRAL if verdict == (flag == guards.POSITIVE) else flag
    return None if guards.names_cuda_feature(name) else flag


def _span(nodes: Sequence[ast.AST]) -> Tuple[Position, Position]:
    first, last = nodes[0], nodes[-1]
    return (first.lineno, first.col_offset), (last.end_lineno, last.end_col_offset)


def covered_spans(
    conditions: Iterable[ast.AST], definitions: Iterable[ast.AST], names: Optional[NameSigns] = None
) -> List[Tuple[Position, Position]]:
    """The source spans the checks among ``conditions`` (``if`` statements, conditional
    expressions, ``and`` operations) and ``definitions`` (functions and classes) cover."""
    spans = []
    for node in conditions:
        kind = type(node)
        if kind is ast.If or kind is ast.IfExp:
            decided = sign(node.test, names)
            if decided == guards.POSITIVE:
                spans.append(_span(node.body if kind is ast.If else [node.body]))
            elif decided == guards.NEGATIVE and node.orelse:
                spans.append(_span(node.orelse if kind is ast.If else [node.orelse]))
        elif kind is ast.BoolOp and type(node.op) is ast.And:
            for index, value in enumerate(node.values[:-1]):
                if sign(value, names) == guards.POSITIVE:
                    spans.append(_span(node.values[index + 1:]))
                    break
    for node in definitions:
        if _guards_its_body(node):
            spans.append(_span(node.body))
    return spans


def _guards_its_body(definition: ast.AST) -> bool:
    """``def cuda(self)`` and ``move_to_cuda`` helpers; a decorator named for CUDA or a GPU, or
    ``skipif(not <available>)`` / ``skipunless(<available>)`` (the batched pass's ``_scope``)."""
    if type(definition) is not ast.ClassDef and guards.delegates_to_cuda(definition.name):
        return True
    for decorator in definition.decorator_list:
        target = decorator.func if type(decorator) is ast.Call else decorator
        last = (dotted_name(target) or "").lower().rsplit(".", 1)[-1]
        if guards.names_cuda(last):
            return True
        if type(decorator) is ast.Call and decorator.args and last in ("skipif", "skipunless"):
            if sign(decorator.args[0]) == (guards.NEGATIVE if last == "skipif" else guards.POSITIVE):
                return True
    return False


class Coverage:
    """Answers whether a node starts inside a covered span."""

    def __init__(self, spans: List[Tuple[Position, Position]]) -> None:
        spans.sort()
        self.starts = [start for start, _ in spans]
        # the furthest end among the spans starting at or before each one: a position is
        # covered when a span that starts before it ends after it
        self.reach = list(accumulate((end for _, end in spans), max))

    def covers(self, node: ast.AST) -> bool:
        position = (node.lineno, node.col_offset)
        index = bisect_right(self.starts, position) - 1
        return index >= 0 and self.reach[index] > position


_OPERATORS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}


def option_test(test: ast.expr) -> Optional[list]:
    """``[option, len taken, operator, integer]`` for ``len(self.opt.gpu_ids) > 0``,
    ``opt.gpu >= 0`` or a bare ``self.args.cuda``; None for anything else."""
    operator = operand = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        operator = _OPERATORS.get(type(test.ops[0]))
        comparator = test.comparators[0]
        if isinstance(comparator, ast.UnaryOp) and isinstance(comparator.op, ast.USub):
            comparator = comparator.operand
            sign = -1
        else:
            sign = 1
        if operator is None or not isinstance(comparator, ast.Constant) or type(comparator.value) is not int:
            return None
        operand, test = sign * comparator.value, test.left
    measured = isinstance(test, ast.Call) and last_name(test.func) == "len" and len(test.args) == 1
    if measured:
        test = test.args[0]
    return [test.attr, measured, operator, operand] if isinstance(test, ast.Attribute) else None
