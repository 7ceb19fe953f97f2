"""Which names of a function certainly hold a tensor when a statement runs: what a fix may
write ``name.device`` of.

A must-analysis over the function's statements, on CPython's tree. A name is known to be a
tensor when it is a parameter annotated as one (``x: torch.Tensor``, without a ``None``
default), when it was assigned something that can only be a tensor (a torch factory, a tensor
method or arithmetic on a known tensor, an index into one), or when a statement that certainly
ran before read an attribute only tensors have (``x.size(0)``, ``x.dim()``, ``x.device``): a
list of crops, a tuple of outputs or an int would have raised there. Branches keep only what
every path knows, a loop's body may not run, and a handler or ``finally`` may start anywhere in
its ``try``; anything rebound to an unknown value is forgotten.
"""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, Iterable, List, Optional, Set

from .vocabulary import (
    ARRAY_SHAPING,
    ELEMENTWISE_COMBINERS,
    ELEMENTWISE_UNARY,
    LIST_COMBINERS,
    PRODUCT_COMBINERS,
    TORCH_CPU_SOURCES,
)

#: Attributes and methods that tensors have and lists, tuples, numbers, strings, dicts and
#: ``nn.Module`` do not: reading one of a value that is none of those raises.
TENSOR_ONLY_ATTRIBUTES = frozenset({
    "size", "dim", "device", "is_cuda", "unsqueeze", "permute", "contiguous", "numel", "expand",
    "masked_fill", "masked_fill_", "detach", "new_zeros", "new_ones", "new_empty", "new_full",
    "new_tensor", "element_size", "get_device", "data_ptr", "is_contiguous", "nelement",
})
#: ``torch.<name>(...)`` calls whose result is one tensor (``torch.where(c)`` and ``torch.max(x, d)``
#: return tuples, so reductions are left out).
TENSOR_FUNCTIONS = (TORCH_CPU_SOURCES | LIST_COMBINERS | ELEMENTWISE_COMBINERS | PRODUCT_COMBINERS) - {"where"}
#: Methods of a tensor whose result is one tensor.
TENSOR_METHODS = ELEMENTWISE_UNARY | ARRAY_SHAPING | {
    "view", "reshape", "squeeze", "to", "cuda", "cpu", "sum", "mean", "prod", "narrow",
    "index_select", "gather", "masked_select", "matmul", "mm", "bmm", "norm",
}
TENSOR_VIEWS = frozenset({"data", "T", "mT"})
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TRY_TYPES = tuple(getattr(ast, kind) for kind in ("Try", "TryStar") if hasattr(ast, kind))

Known = Optional[FrozenSet[str]]  # None: no path reaches the statement


def is_tensor_annotation(annotation: Optional[ast.expr]) -> bool:
    """``Tensor``, ``torch.Tensor``, ``torch.FloatTensor``, or one of them quoted; not a
    container or an ``Optional``."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        text = annotation.value.strip()
        return text.replace(".", "").isidentifier() and text.rsplit(".", 1)[-1].endswith("Tensor")
    if isinstance(annotation, ast.Name):
        return annotation.id.endswith("Tensor")
    if isinstance(annotation, ast.Attribute):
        return annotation.attr.endswith("Tensor")
    return False


def unconditional_parts(node: ast.AST) -> Iterable[ast.AST]:
    """The sub-expressions of ``node`` that are evaluated whenever it is: not the arms of a
    conditional expression, the operands of ``and``/``or`` after the first, lambdas, or the
    inside of comprehensions (only their first iterable)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, ast.IfExp):
            stack.append(current.test)
        elif isinstance(current, ast.BoolOp):
            stack.append(current.values[0])
        elif isinstance(current, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            stack.append(current.generators[0].iter)
        elif isinstance(current, (ast.Lambda, *FUNCTIONS, ast.ClassDef)):
            continue
        else:
            stack.extend(ast.iter_child_nodes(current))


def evidence(node: Optional[ast.AST]) -> Set[str]:
    """Names read with a tensor-only attribute wherever ``node`` certainly evaluates."""
    if node is None:
        return set()
    return {
        part.value.id
        for part in unconditional_parts(node)
        if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name) and part.attr in TENSOR_ONLY_ATTRIBUTES
    }


def assigned_names(nodes: Iterable[ast.AST]) -> Set[str]:
    """Every name bound anywhere in ``nodes`` (nested functions and classes bind only their name)."""
    names: Set[str] = set()
    stack = list(nodes)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        elif hasattr(ast, "MatchAs") and isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif hasattr(ast, "MatchMapping") and isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
        stack.extend(ast.iter_child_nodes(node))
    return names


def meet(states: Iterable[Known]) -> Known:
    reached = [state for state in states if state is not None]
    if not reached:
        return None
    result = reached[0]
    for state in reached[1:]:
        result = result & state
    return result


class TensorFacts:
    """The names known to be tensors when each statement of one function starts."""

    def __init__(self, function: ast.AST, qualname) -> None:
        #: ``qualname(node)``: the imported name an expression refers to (``th.zeros`` -> ``torch.zeros``).
        self.qualname = qualname
        self.before: Dict[int, FrozenSet[str]] = {}
        self.statements: List[ast.stmt] = []
        self.block(function.body, frozenset(self.tensor_parameters(function)))

    @staticmethod
    def tensor_parameters(function: ast.AST) -> Set[str]:
        arguments = function.args
        positional = list(arguments.posonlyargs) + list(arguments.args)
        defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
        defaults += list(arguments.kw_defaults)
        return {
            param.arg
            for param, default in zip(positional + list(arguments.kwonlyargs), defaults)
            if is_tensor_annotation(param.annotation) and default is None
        }

    def at(self, statement: ast.stmt) -> FrozenSet[str]:
        return self.before.get(id(statement), frozenset())

    def statement_holding(self, node: ast.AST) -> Optional[ast.stmt]:
        """The innermost statement of the function whose range holds ``node``."""
        position = (node.lineno, node.col_offset)
        best = None
        for statement in self.statements:
            if (statement.lineno, statement.col_offset) <= position <= (statement.end_lineno, statement.end_col_offset):
                if best is None or (statement.lineno, statement.col_offset) >= (best.lineno, best.col_offset):
                    best = statement
        return best

    # -- the walk -------------------------------------------------------------------------
    def block(self, statements: List[ast.stmt], known: Known) -> Known:
        for statement in statements:
            known = self.statement(statement, known)
        return known

    def statement(self, statement: ast.stmt, known: Known) -> Known:
        self.statements.append(statement)
        self.before[id(statement)] = known if known is not None else frozenset()
        if known is None:
            self.nested(statement)
            return None
        if isinstance(statement, ast.If):
            known = known | evidence(statement.test)
            return meet([self.block(statement.body, known), self.block(statement.orelse, known)])
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            head = statement.test if isinstance(statement, ast.While) else statement.iter
            entry = (known | evidence(head)) - assigned_names([statement])
            self.block(statement.body, entry)
            self.block(statement.orelse, entry)
            return entry
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                known = known | evidence(item.context_expr)
            entry = known - assigned_names(item.optional_vars for item in statement.items if item.optional_vars)
            out = self.block(statement.body, entry)
            # a context manager may swallow an exception anywhere in the body
            return meet([out, entry - assigned_names(statement.body)])
        if isinstance(statement, TRY_TYPES):
            everything = known - assigned_names([statement])
            self.block(statement.orelse, self.block(statement.body, known))
            for handler in statement.handlers:
                self.block(handler.body, known - assigned_names(statement.body) - {handler.name or ""})
            self.block(statement.finalbody, everything)
            return everything
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            self.nested(statement)
            return known - {statement.name}
        if hasattr(ast, "Match") and isinstance(statement, ast.Match):
            entry = (known | evidence(statement.subject)) - assigned_names([statement])
            for case in statement.cases:
                self.block(case.body, entry)
            return entry
        return self.simple(statement, known)

    def nested(self, statement: ast.stmt) -> None:
        """Statements no path reaches (or another function's) are recorded as knowing nothing."""
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            return
        for child in ast.iter_child_nodes(statement):
            if isinstance(child, ast.stmt):
                self.statement(child, None)
            elif isinstance(child, ast.excepthandler) or (hasattr(ast, "match_case") and isinstance(child, ast.match_case)):
                for inner in child.body:
                    self.statement(inner, None)

    def simple(self, statement: ast.stmt, known: FrozenSet[str]) -> Known:
        if isinstance(statement, ast.Assign):
            known = known | evidence(statement.value)
            tensor = self.is_tensor(statement.value, known)
            for target in statement.targets:
                known = self.bind(target, tensor, known)
            return known
        if isinstance(statement, ast.AnnAssign):
            if statement.value is None:
                return known
            known = known | evidence(statement.value)
            return self.bind(statement.target, self.is_tensor(statement.value, known), known)
        if isinstance(statement, ast.AugAssign):
            known = known | evidence(statement.value)
            kept = isinstance(statement.target, ast.Name) and statement.target.id in known
            return self.bind(statement.target, kept, known)
        if isinstance(statement, (ast.Return, ast.Raise)):
            return None
        if isinstance(statement, (ast.Break, ast.Continue)):
            return None
        if isinstance(statement, (ast.Expr, ast.Assert)):
            return known | evidence(statement.value if isinstance(statement, ast.Expr) else statement.test)
        return known - assigned_names([statement])

    def bind(self, target: ast.expr, tensor: bool, known: FrozenSet[str]) -> FrozenSet[str]:
        if isinstance(target, ast.Name):
            return known | {target.id} if tensor else known - {target.id}
        return known - assigned_names([target])

    def is_tensor(self, node: ast.expr, known: FrozenSet[str]) -> bool:
        """Whether ``node`` can only evaluate to a tensor (or raise)."""
        if isinstance(node, ast.Name):
            return node.id in known
        if isinstance(node, ast.Call):
            name = self.qualname(node.func)
            if name is not None:
                return name.startswith("torch.") and name[len("torch."):] in TENSOR_FUNCTIONS
            func = node.func
            return isinstance(func, ast.Attribute) and func.attr in TENSOR_METHODS and self.is_tensor(func.value, known)
        if isinstance(node, ast.BinOp):
            left = self.is_tensor(node.left, known)
            return left or (self.is_tensor(node.right, known) and isinstance(node.left, ast.Constant))
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
            return self.is_tensor(node.operand, known)
        if isinstance(node, ast.Subscript):
            return self.is_tensor(node.value, known)
        if isinstance(node, ast.Attribute) and node.attr in TENSOR_VIEWS:
            return self.is_tensor(node.value, known)
        return False
