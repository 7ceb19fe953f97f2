"""What the first stage and the inference read of CPython ``ast`` nodes: names, call arguments
in source order, literals, imports."""

from __future__ import annotations

import ast
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

#: Fields that never hold a node a walk reads: names and numbers, and the leaves ``ast``
#: makes for contexts and operators (a third of all nodes; ``ast.iter_child_nodes`` yields them).
_LEAF_FIELDS = frozenset({
    "ctx", "op", "ops", "id", "attr", "arg", "asname", "module", "level", "kind", "type_comment",
    "is_async", "conversion", "simple",
})
#: Node type -> the fields a walk descends into.
CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


def node_fields(kind: type) -> Tuple[str, ...]:
    """The fields of ``kind`` that may hold nodes (``CHILD_FIELDS``, filled on first ask)."""
    fields = CHILD_FIELDS[kind] = tuple(name for name in kind._fields if name not in _LEAF_FIELDS)
    return fields


def nodes_below(tree: ast.AST) -> List[ast.AST]:
    """``tree`` and every node in it but contexts and operators, a level at a time: what
    ``ast.walk`` yields of them at a third of its cost (no generator per node)."""
    found: List[ast.AST] = []
    level = [tree]
    AST, fields_of = ast.AST, CHILD_FIELDS.get
    while level:
        found.extend(level)
        below: list = []
        extend, append = below.extend, below.append
        for node in level:
            kind = type(node)
            fields = fields_of(kind)
            if fields is None:  # a leaf type has an empty tuple, found once
                fields = node_fields(kind)
            for name in fields:
                child = getattr(node, name, None)
                if type(child) is list:
                    extend(child)
                elif isinstance(child, AST):
                    append(child)
        level = [child for child in below if isinstance(child, AST)]  # lists hold None (``{**d}``) and str (``global``)
    return found


def dotted_name(node: Optional[ast.AST]) -> Optional[str]:
    """``a.b.c`` for a chain of attributes on a name, else None. (The inference asks this of
    nearly every expression, several times: types are compared exactly, as CPython's parser
    makes no subclasses.)"""
    kind = type(node)
    if kind is ast.Name:
        return node.id
    if kind is not ast.Attribute:
        return None
    parts: List[str] = [node.attr]
    node = node.value
    while type(node) is ast.Attribute:
        parts.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    parts.append(node.id)
    parts.reverse()
    return ".".join(parts)


def last_name(node: Optional[ast.AST]) -> Optional[str]:
    """``c`` for ``a.b.c`` or ``c``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


class Arg(NamedTuple):
    """One argument of a call, as written: ``keyword`` is None for a positional one, ``star``
    is ``"*"`` or ``"**"`` for unpacking."""

    keyword: Optional[str]
    star: str
    value: ast.expr


def call_args(call: ast.Call) -> List[Arg]:
    """Every argument in source order (``ast`` keeps positionals and keywords apart)."""
    args = [Arg(None, "*", a.value) if isinstance(a, ast.Starred) else Arg(None, "", a) for a in call.args]
    keywords = [Arg(k.arg, "" if k.arg is not None else "**", k.value) for k in call.keywords]
    if not keywords or not args:
        return args + keywords
    merged = args + keywords
    merged.sort(key=lambda arg: (arg.value.lineno, arg.value.col_offset))
    return merged


def positional_args(call: ast.Call) -> List[ast.expr]:
    return [arg for arg in call.args if not isinstance(arg, ast.Starred)]


def keyword_value(call: ast.Call, name: str) -> Optional[ast.expr]:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def literal_string(node: Optional[ast.AST]) -> Optional[str]:
    if isinstance(node, ast.Constant) and type(node.value) is str:
        return node.value
    return None


def is_main_check(test: ast.expr) -> bool:
    """``__name__ == "__main__"``: the test of a script's own block."""
    return (
        isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
        and len(test.comparators) == 1 and literal_string(test.comparators[0]) == "__main__"
    )


def is_integer(node: ast.AST) -> bool:
    """An integer literal (``True`` is not one)."""
    return isinstance(node, ast.Constant) and type(node.value) is int


def is_literal(node: ast.AST) -> bool:
    """A number or ``True``/``False``, possibly signed."""
    if isinstance(node, ast.UnaryOp):
        return is_literal(node.operand)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, complex, bool)


def fstring_head(node: ast.JoinedStr) -> Optional[str]:
    """The literal text an f-string starts with, if it starts with text."""
    head = node.values[0] if node.values else None
    return head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else None


def child_blocks(statement: ast.stmt) -> List[Sequence[ast.stmt]]:
    """The statement lists nested in a compound statement (not in nested functions' bodies:
    those are statements of their own)."""
    blocks: List[Sequence[ast.stmt]] = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(statement, name, None)
        if isinstance(block, list) and block:
            blocks.append(block)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    for case in getattr(statement, "cases", ()):
        blocks.append(case.body)
    return blocks


def import_aliases(node: ast.AST) -> Dict[str, str]:
    """Local name -> qualified name bound by one import statement (relative and star imports
    bind nothing the inference can name)."""
    bound: Dict[str, str] = {}
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname is not None:
                bound[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                bound[top] = top
    elif isinstance(node, ast.ImportFrom):
        if node.level or node.module is None:
            return bound
        for alias in node.names:
            if alias.name == "*":
                return {}
            bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def file_aliases(statements: Iterable[ast.stmt]) -> Dict[str, str]:
    """Every import of the file in source order, the later binding of a name winning: what
    the LibCST pass knows once it reaches the end of the module."""
    aliases: Dict[str, str] = {}
    for statement in statements:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            aliases.update(import_aliases(statement))
        else:
            for block in child_blocks(statement):
                aliases.update(file_aliases(block))
    return aliases


#: Patterns that capture a name (``match`` is Python 3.10+).
_CAPTURES = tuple(getattr(ast, kind) for kind in ("MatchAs", "MatchStar") if hasattr(ast, kind))
_MAPPING = getattr(ast, "MatchMapping", ())


def parameter_names(function: ast.AST) -> List[str]:
    """Every parameter a ``def`` or ``lambda`` names, ``*args`` and ``**kwargs`` too (none for
    anything else)."""
    arguments = getattr(function, "args", None)
    if not isinstance(arguments, ast.arguments):
        return []
    every = (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
    return [argument.arg for argument in every if argument is not None]


def bound_names(statement: ast.stmt) -> List[str]:
    """Names a statement binds in its own scope (nested functions, classes and lambdas are not
    entered, their names are)."""
    names: List[str] = []
    stack: List[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not statement:
            names.append(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.extend(import_aliases(node))
        elif isinstance(node, _CAPTURES) and node.name:
            names.append(node.name)
        elif _MAPPING and isinstance(node, _MAPPING) and node.rest:
            names.append(node.rest)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.append(node.name)
        stack.extend(ast.iter_child_nodes(node))
    return names


def block_statements(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of a body and of the blocks in it, not of functions or classes defined
    there: a walk over statements, far cheaper than one over every node."""
    for statement in body:
        yield statement
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for block in ("body", "orelse", "finalbody"):
            yield from block_statements(getattr(statement, block, []))
        for handler in getattr(statement, "handlers", []):
            yield from block_statements(handler.body)
