"""The file-level pre-pass: functions, classes and where attributes are assigned, moved or
registered, read from statement shapes only (no values)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ..syntax.ast_nodes import child_blocks, dotted_name, last_name, literal_string
from .vocabulary import MOVING_METHODS

Function = Union[ast.FunctionDef, ast.AsyncFunctionDef]
FUNCTION_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)


# -- the file-level pre-pass: statement shapes only ---------------------------------------------
@dataclass
class FileShape:
    """What the pre-pass learns about the file: its functions and classes, and which
    attributes are assigned (or moved, or registered) where."""

    functions: List[Tuple[Function, Optional[ast.ClassDef]]] = field(default_factory=list)
    #: attribute name -> functions containing an assignment or in-place move of ``<obj>.name``.
    attribute_sites: Dict[str, List[Optional[ast.AST]]] = field(default_factory=dict)
    #: name given to ``register_buffer``/``register_parameter``... -> functions doing it.
    registered: Dict[str, List[Optional[ast.AST]]] = field(default_factory=dict)
    uses_setattr: bool = False
    module_classes: set = field(default_factory=set)


#: Statements whose ``value`` is evaluated: a call there may register or move an attribute.
_VALUED = (ast.Expr, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return)


class ShapeWalker:
    def __init__(self) -> None:
        self.shape = FileShape()

    def walk(self, body: Sequence[ast.stmt], function: Optional[ast.AST], klass: Optional[ast.ClassDef]) -> None:
        for statement in body:
            if isinstance(statement, FUNCTION_TYPES):
                self.shape.functions.append((statement, klass))
                self.walk(statement.body, statement, None)
            elif isinstance(statement, ast.ClassDef):
                if any(looks_like_module_base(base) for base in statement.bases):
                    self.shape.module_classes.add(statement.name)
                self.walk(statement.body, function, statement)
            elif isinstance(statement, _VALUED):
                self._simple(statement, function)
            else:
                for inner in child_blocks(statement):
                    self.walk(inner, function, klass)

    def _simple(self, statement: ast.stmt, function: Optional[ast.AST]) -> None:
        targets: List[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets = [statement.target]
        for target in targets:
            for attribute in attribute_targets(target):
                self.shape.attribute_sites.setdefault(attribute, []).append(function)
        call = statement.value
        if not isinstance(call, ast.Call):
            return
        func = call.func
        name = last_name(func)
        if name == "setattr":
            self.shape.uses_setattr = True
        elif name in {"register_buffer", "register_parameter", "register_module", "add_module"} and (call.args or call.keywords):
            first = call.args[0] if call.args else call.keywords[0].value
            registered = literal_string(first)
            if registered:
                self.shape.registered.setdefault(registered, []).append(function)
        elif name in MOVING_METHODS and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute):
            self.shape.attribute_sites.setdefault(func.value.attr, []).append(function)


def attribute_targets(target: ast.expr) -> Iterable[str]:
    if isinstance(target, ast.Attribute):
        yield target.attr
    elif isinstance(target, (ast.Tuple, ast.List)):
        for element in target.elts:
            yield from attribute_targets(element)
    elif isinstance(target, ast.Starred):
        yield from attribute_targets(target.value)


#: How the dotted name of an ``nn.Module`` subclass's base ends.
MODULE_BASE_ENDINGS = ("Module", "nn.Sequential", "ModuleList", "ModuleDict")


def looks_like_module_base(base: ast.expr) -> bool:
    return (dotted_name(base) or "").endswith(MODULE_BASE_ENDINGS)
