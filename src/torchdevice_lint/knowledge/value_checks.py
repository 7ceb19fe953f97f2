"""Checks code makes of a value before it relies on it: ``if torch.version.cuda:``,
``if num_gpus > 0:``, ``x if n else 0``, ``if n == 0: return``, ``assert n``, a ``try`` that
catches the error. The availability checks (``cst_guards``) say whether a backend is there;
these say whether one value is usable, read through a ``sign`` the caller gives: POSITIVE when
a test being true means the value is usable, NEGATIVE when its being false does.

Also the names a scope binds only to values of one kind (``n = torch.cuda.device_count()``),
which the rules follow to the code that reads them.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name, last_name
from .cst_guards import NEGATIVE, NEUTRAL, POSITIVE, QualName, availability_call, terminates

Sign = Callable[["cst.BaseExpression"], int]


def runs_only_if(stack: Sequence[cst.CSTNode], sign: Sign, caught: Iterable[str]) -> bool:
    """Whether the last node of ``stack`` (the module down to it) runs only where a test
    ``sign`` reads says the value is usable: in the branch of an ``if``/``while``/conditional
    expression or ``and``/``or`` that the test decides, after ``if <unusable>: return`` or
    ``assert <usable>`` in an enclosing block, or in a ``try`` whose handlers catch one of
    ``caught`` (or ``Exception``)."""
    for node, child in zip(stack, stack[1:]):
        if isinstance(node, (cst.If, cst.While, cst.IfExp)):
            test = sign(node.test)
            if (test == POSITIVE and child is node.body) or (test == NEGATIVE and child is node.orelse):
                return True
        elif isinstance(node, cst.BooleanOperation) and child is node.right:
            if sign(node.left) == (POSITIVE if isinstance(node.operator, cst.And) else NEGATIVE):
                return True
        elif isinstance(node, (cst.IndentedBlock, cst.Module)):
            if any(_leaves_unless(statement, sign) for statement in _statements_before(node.body, child)):
                return True
        elif isinstance(node, cst.Try) and child is node.body and any(_catches(h, caught) for h in node.handlers):
            return True
    return False


def combined(test: cst.BaseExpression, sign: Sign) -> Optional[int]:
    """The sign of ``not``/``and``/``or`` from their parts (``a and b`` true: both hold; ``a or
    b`` false: neither holds); None for any other test."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return -sign(test.expression)
    if isinstance(test, cst.BooleanOperation):
        parts = (sign(test.left), sign(test.right))
        if isinstance(test.operator, cst.And):
            return POSITIVE if POSITIVE in parts else NEUTRAL
        return NEGATIVE if NEGATIVE in parts else NEUTRAL
    return None


def _statements_before(body: Sequence[cst.CSTNode], child: cst.CSTNode) -> Iterable[cst.CSTNode]:
    for statement in body:
        if statement is child:
            return
        yield statement


def _leaves_unless(statement: cst.CSTNode, sign: Sign) -> bool:
    """``if <unusable>: return`` (raise, exit...) or ``assert <usable>``."""
    if isinstance(statement, cst.If) and statement.orelse is None:
        return sign(statement.test) == NEGATIVE and terminates(statement.body)
    return isinstance(statement, cst.SimpleStatementLine) and any(
        isinstance(small, cst.Assert) and sign(small.test) == POSITIVE for small in statement.body
    )


def _catches(handler: cst.ExceptHandler, caught: Iterable[str]) -> bool:
    if handler.type is None:
        return True
    kinds = handler.type.elements if isinstance(handler.type, cst.Tuple) else [handler.type]
    names = {last_name(getattr(kind, "value", kind)) for kind in kinds}
    return not names.isdisjoint({"Exception", "BaseException", *caught})


def assigned_values(scope: cst.CSTNode, nested: bool = False) -> Dict[str, List[Optional[cst.BaseExpression]]]:
    """Dotted name (``n``, ``args.n_gpu``, ``self.start``) -> the value of each assignment to
    it in ``scope``'s statements (None where the value is not one expression: ``+=``, a loop
    variable); ``nested``: also in the functions defined in it."""
    from ..syntax.cst_walk import TRIVIA_AND_LEAF_TYPES, walk  # read-only: ``visit`` rebuilds the tree

    collector = _Assignments(nested)
    body = scope.body if isinstance(scope, cst.Module) else [scope.body]
    for statement in body:
        walk(statement, collector, skip=TRIVIA_AND_LEAF_TYPES)  # a leaf binds nothing itself
    return collector.values


class _Assignments:
    """A visitor for ``cst_walk.walk``: the value of each assignment, by target name."""

    def __init__(self, nested: bool) -> None:
        self.nested = nested
        self.values: Dict[str, list] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        # exact types: LibCST's classes are ABCs (``isinstance`` on them is slow) and these
        # have no subclasses
        kind = type(node)
        if kind is cst.FunctionDef:
            return self.nested
        if kind is cst.Lambda:
            return False
        if kind is cst.Assign:
            for target in node.targets:
                self._bind(target.target, node.value)
        elif kind is cst.AnnAssign or kind is cst.NamedExpr:
            self._bind(node.target, node.value)
        elif kind is cst.AugAssign or kind is cst.For:
            self._bind(node.target, None)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        return None

    def _bind(self, target: cst.BaseExpression, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            values = value.elements if isinstance(value, (cst.Tuple, cst.List)) else ()
            paired = len(values) == len(target.elements)
            for index, element in enumerate(target.elements):
                self._bind(element.value, values[index].value if paired else None)
            return
        name = dotted_name(target)
        if name is not None:
            self.values.setdefault(name, []).append(value)


class NameUse(NamedTuple):
    name: str
    node: cst.CSTNode
    #: Its ancestors, innermost first (four at most).
    parents: tuple
    #: The innermost function around it (the scope itself when none).
    function: cst.CSTNode


def name_uses(scope: cst.CSTNode, names: Set[str]) -> List[NameUse]:
    """Every occurrence of the dotted ``names`` in ``scope``, functions defined in it included."""
    from ..syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``visit`` rebuilds the tree

    finder = _NameUses(names, scope)
    walk(scope, finder, skip=TRIVIA_TYPES)
    return finder.uses


class _NameUses:
    """A visitor for ``cst_walk.walk``: the occurrences of the names, with their ancestors."""

    def __init__(self, names: Set[str], scope: cst.CSTNode) -> None:
        self.names = names
        self.stack: List[cst.CSTNode] = []
        self.functions: List[cst.CSTNode] = [scope]
        self.uses: List[NameUse] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        name = dotted_name(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        parent = self.stack[-1] if self.stack else None
        if getattr(parent, "attr", None) is node or getattr(parent, "keyword", None) is node:
            return False  # ``streamer.end``'s ``end``, ``f(end=...)``'s keyword: other names
        if name in self.names:
            self.uses.append(NameUse(name, node, tuple(reversed(self.stack[-4:])), self.functions[-1]))
            return False
        self.stack.append(node)
        if isinstance(node, cst.FunctionDef) and len(self.stack) > 1:
            self.functions.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if self.stack and self.stack[-1] is original_node:
            self.stack.pop()
            if self.functions[-1] is original_node:
                self.functions.pop()


def clamped_to_device_count(test: cst.BaseExpression, function: Optional[cst.FunctionDef], qualname: QualName) -> bool:
    """``n_gpu_use > 0`` in a function that first does ``if n_gpu_use > n_gpu: n_gpu_use = n_gpu``
    (or ``n_gpu_use = min(n_gpu_use, n_gpu)``) with ``n_gpu = torch.cuda.device_count()``: the
    pytorch-template's ``prepare_device`` (black0017/MedicalZooPytorch@8f40dab
    lib/train/BaseTrainer.py:108-117). True only where that many GPUs exist."""
    if function is None or not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    operator, bound = test.comparisons[0].operator, test.comparisons[0].comparator
    if not (isinstance(test.left, cst.Name) and isinstance(bound, cst.Integer)):
        return False
    least = int(bound.value, 0) + (1 if isinstance(operator, cst.GreaterThan) else 0)
    if not isinstance(operator, (cst.GreaterThan, cst.GreaterThanEqual)) or least < 1:
        return False
    name, statements = test.left.value, list(function.body.body)
    counts = {
        small.targets[0].target.value
        for line in statements if isinstance(line, cst.SimpleStatementLine)
        for small in line.body
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
        and availability_call(small.value, qualname)
    }

    def is_count(node: cst.BaseExpression) -> bool:
        return (isinstance(node, cst.Name) and node.value in counts) or availability_call(node, qualname)

    def clamps(line: cst.CSTNode) -> bool:
        return isinstance(line, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value == name
            and (is_count(small.value) or (
                isinstance(small.value, cst.Call) and last_name(small.value.func) == "min"
                and any(is_count(argument.value) for argument in small.value.args)
            ))
            for small in line.body
        )

    for statement in statements:
        if clamps(statement):
            return True
        if (
            isinstance(statement, cst.If) and statement.orelse is None and isinstance(statement.test, cst.Comparison)
            and isinstance(statement.test.left, cst.Name) and statement.test.left.value == name
            and len(statement.test.comparisons) == 1 and is_count(statement.test.comparisons[0].comparator)
            and isinstance(statement.test.comparisons[0].operator, cst.GreaterThan)
            and any(clamps(line) for line in statement.body.body)
        ):
            return True
        if isinstance(statement, cst.If) and _zeroed_without_gpus(statement, name, is_count):
            return True
    return False


def _zeroed_without_gpus(statement: cst.If, name: str, is_count: Callable[[cst.BaseExpression], bool]) -> bool:
    """``if sys_gpu == 0: n_gpu = 0`` (yassouali/CCT@65d4e5b base/base_trainer.py:74-77): no GPU
    leaves the requested count at zero, whatever its ``elif`` does."""
    test = statement.test
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and is_count(test.left)):
        return False
    target = test.comparisons[0]
    if not (isinstance(target.operator, cst.Equal) and isinstance(target.comparator, cst.Integer) and int(target.comparator.value, 0) == 0):
        return False
    return any(
        isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == name and isinstance(small.value, cst.Integer) and int(small.value.value, 0) == 0
        for line in statement.body.body if isinstance(line, cst.SimpleStatementLine) for small in line.body
    )
