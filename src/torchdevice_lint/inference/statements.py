"""The walk over one function body: statements, blocks, loops to a fixed point, bindings."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Protocol, Sequence, Set, Tuple

from ..syntax.ast_nodes import bound_names, dotted_name, import_aliases, last_name
from .shape import FileShape
from .source import SourceContext
from .values import MAX_LOOP_PASSES, ON_DEVICE, Env, FileInference, Place, Rank, Scope, Value, element_of, join_envs
from .vocabulary import AUG_OPERATORS, MOVING_METHODS, NO_GRAD_CONTEXTS, names_a_device


class WalkedFile(Protocol):
    """What a function's walk reads of its file's analysis (``file.FileAnalysis``)."""

    ctx: SourceContext
    result: FileInference
    shape: FileShape
    default_device_changed: bool


#: ``try`` statements: ``except*`` is Python 3.11+.
TRY_TYPES = tuple(getattr(ast, kind) for kind in ("Try", "TryStar") if hasattr(ast, kind))
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
FOR_TYPES = (ast.For, ast.AsyncFor)
#: ``match`` (Python 3.10+).
MATCH_TYPES = tuple(getattr(ast, kind) for kind in ("Match",) if hasattr(ast, kind))


class StatementWalk:
    """Statements of one body in order, each updating the environment; ``None`` is an
    environment no path reaches (after ``return``/``raise``)."""

    def __init__(self, analysis: WalkedFile, scope: Scope) -> None:
        self.analysis = analysis
        self.ctx = analysis.ctx
        self.scope = scope
        self.recording = 0  # > 0 while a loop body is walked to find its fixed point
        self.no_grad = 0
        self.default_device_context = 0
        self.loop_exits: List[List[Env]] = []
        self.returns: List[Env] = []
        #: key -> the dotted keys under it ever bound by this walk ("a" -> {"a.b", "a.b.c"}), so
        #: forgetting what is known under a key does not scan the whole environment.
        self.keys_under: Dict[str, Set[str]] = {}

    # -- blocks and statements ----------------------------------------------------------------
    def block(self, statements: Sequence[ast.stmt], env: Env) -> Optional[Env]:
        for statement in statements:
            env = self.statement(statement, env)
            if env is None:
                return None
        return env

    def statement(self, statement: ast.stmt, env: Env) -> Optional[Env]:
        if isinstance(statement, ast.If):
            self.expr(statement.test, env)
            taken = self.block(statement.body, dict(env))
            other = self.block(statement.orelse, dict(env)) if statement.orelse else env
            return join_envs([taken, other])
        if isinstance(statement, LOOP_TYPES):
            return self.loop(statement, env)
        if isinstance(statement, (ast.With, ast.AsyncWith)):
            return self.with_statement(statement, env)
        if isinstance(statement, TRY_TYPES):
            return self.try_statement(statement, env)
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[statement.name] = None  # walked on its own
            return env
        if isinstance(statement, ast.ClassDef):
            env.pop(statement.name, None)  # calling it constructs (a module, maybe)
            return env
        if isinstance(statement, MATCH_TYPES):
            # forget what the match may bind, report nothing inside
            for name in bound_names(statement):
                self.assign_key(name, None, env)
            return env
        return self.small_statement(statement, env)

    def small_statement(self, small: ast.stmt, env: Env) -> Optional[Env]:
        if isinstance(small, ast.Assign):
            value = self.expr(small.value, env)
            for target in small.targets:
                self.assign(target, value, env)
        elif isinstance(small, ast.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.expr(small.value, env), env)
        elif isinstance(small, ast.AugAssign):
            current = self.expr(small.target, env)
            value = self.expr(small.value, env)
            if isinstance(small.op, AUG_OPERATORS):
                matmul = isinstance(small.op, ast.MatMult)
                result = self.combine(small, [(current, small.target), (value, small.value)], Rank.UNKNOWN if matmul else None)
                if current is not None and current.place == Place.CPU and current.rank == Rank.ARRAY and value is not None and value.place in ON_DEVICE:
                    result = current  # the in-place operation raises: the target stays on the CPU
            else:
                result = None
            self.assign(small.target, result, env)
        elif isinstance(small, ast.Expr):
            self.expression_statement(small.value, env)
        elif isinstance(small, ast.Return):
            if small.value is not None:
                self.expr(small.value, env)
            self.returns.append(env)
            return None
        elif isinstance(small, ast.Raise):
            if small.exc is not None:
                self.expr(small.exc, env)
            return None
        elif isinstance(small, (ast.Break, ast.Continue)):
            if self.loop_exits:
                self.loop_exits[-1].append(dict(env))
            return None
        elif isinstance(small, ast.Assert):
            self.expr(small.test, env)
        elif isinstance(small, ast.Delete):
            for deleted in small.targets:
                for target in flatten_targets(deleted):
                    key = dotted_name(target)
                    if key:
                        self.assign_key(key, None, env)
        elif isinstance(small, (ast.Import, ast.ImportFrom)):
            for name in import_aliases(small):
                self.assign_key(name, None, env)
        elif isinstance(small, (ast.Global, ast.Nonlocal)):
            for name in small.names:
                self.assign_key(name, None, env)
        return env

    def expression_statement(self, value: ast.expr, env: Env) -> None:
        """``model.to(device)`` on its own moves a module in place (a tensor stays where it is)."""
        result = self.expr(value, env)
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
            return
        method = value.func.attr
        key = dotted_name(value.func.value)
        if method not in MOVING_METHODS or key is None:
            return
        receiver = self.lookup(key, env)
        if receiver is not None and receiver.tensor:
            return  # an unassigned ``x.to(device)``: x itself does not move
        if result is not None and result.place in (Place.DEVICE, Place.CPU):
            if receiver is not None and receiver.module:
                self.assign_key(key, Value(result.place, module=True), env)
            else:
                self.assign_key(key, Value(result.place, moved_in_place=True), env)

    def loop(self, statement, env: Env) -> Optional[Env]:
        is_for = isinstance(statement, FOR_TYPES)
        iterated = self.expr(statement.iter, env) if is_for else None
        head = dict(env)
        self.recording += 1
        try:
            for _ in range(MAX_LOOP_PASSES):
                end, exits = self.loop_body(statement, head, iterated)
                widened = join_envs([head, end, *exits])
                if widened == head:
                    break
                head = widened
            else:
                head = {key: (value if end is not None and end.get(key) == value else None) for key, value in head.items()}
        finally:
            self.recording -= 1
        end, exits = self.loop_body(statement, head, iterated)
        after = join_envs([head, end, *exits])
        if statement.orelse:
            after = join_envs([self.block(statement.orelse, dict(head)), *exits]) if after is not None else None
        return after

    def loop_body(self, statement, head: Env, iterated: Optional[Value]) -> Tuple[Optional[Env], List[Env]]:
        env = dict(head)
        if isinstance(statement, FOR_TYPES):
            self.assign(statement.target, element_of(iterated), env)
        else:
            self.expr(statement.test, env)
        self.loop_exits.append([])
        try:
            end = self.block(statement.body, env)
        finally:
            exits = self.loop_exits.pop()
        return end, exits

    def with_statement(self, statement, env: Env) -> Optional[Env]:
        no_grad = default_device = 0
        for item in statement.items:
            self.expr(item.context_expr, env)
            context = item.context_expr.func if isinstance(item.context_expr, ast.Call) else item.context_expr
            name = self.ctx.qualname(context)
            if name in NO_GRAD_CONTEXTS:
                no_grad = 1
            elif name == "torch.device" or (name is None and names_a_device(last_name(context) or "")):
                default_device = 1
            if item.optional_vars is not None:
                self.assign(item.optional_vars, None, env)
        self.no_grad += no_grad
        self.default_device_context += default_device
        try:
            return self.block(statement.body, env)
        finally:
            self.no_grad -= no_grad
            self.default_device_context -= default_device

    def try_statement(self, statement, env: Env) -> Optional[Env]:
        body_end = self.block(statement.body, dict(env))
        # an exception may leave the body anywhere: handlers start from what both ends agree on
        raised = join_envs([env, body_end])
        ends = []
        for handler in statement.handlers:
            start = dict(raised)
            if handler.name is not None:
                self.assign_key(handler.name, None, start)
            ends.append(self.block(handler.body, start))
        if statement.orelse and body_end is not None:
            body_end = self.block(statement.orelse, body_end)
        joined = join_envs([body_end, *ends])
        if statement.finalbody:
            start = joined if joined is not None else dict(raised)
            final = self.block(statement.finalbody, dict(start))
            return final if joined is not None else None
        return joined

    # -- bindings --------------------------------------------------------------------------
    def assign(self, target: ast.expr, value: Optional[Value], env: Env) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            elements = target.elts
            starred = any(isinstance(e, ast.Starred) for e in elements)
            if value is not None and value.place == Place.SEQUENCE and not starred and len(value.elements) == len(elements):
                for element, item in zip(elements, value.elements):
                    self.assign(element, item, env)
            else:
                for element in elements:
                    self.assign(element, None if isinstance(element, ast.Starred) else element_of(value), env)
            return
        if isinstance(target, ast.Starred):
            self.assign(target.value, None, env)
            return
        if isinstance(target, ast.Subscript):
            self.expr(target.value, env)
            return
        key = dotted_name(target)
        if key is not None:
            self.assign_key(key, value, env)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value, env)

    def assign_key(self, key: str, value: Optional[Value], env: Env) -> None:
        self.forget_under(key, env)
        self.bind(key, value, env)

    def bind(self, key: str, value: Optional[Value], env: Env) -> None:
        """``env[key] = value``, the way every dotted key must enter an environment."""
        parts = key.split(".")
        for end in range(1, len(parts)):
            self.keys_under.setdefault(".".join(parts[:end]), set()).add(key)
        env[key] = value

    def forget_under(self, key: str, env: Env) -> None:
        """A call received ``key``: what was known about its attributes may have changed."""
        for stale in self.keys_under.get(key, ()):
            if stale in env:
                env[stale] = None

    def lookup(self, key: str, env: Env) -> Optional[Value]:
        if key in env:
            return env[key]
        facts = self.scope.class_facts
        if facts is not None and key.startswith("self.") and key.count(".") == 1:
            return facts.attributes.get(key)
        return None




def is_false_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and (node.value is False or node.value is None)


def flatten_targets(target: ast.expr) -> Iterable[ast.expr]:
    if isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from flatten_targets(element)
    else:
        yield target
