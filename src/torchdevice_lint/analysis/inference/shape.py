"""The file-level pre-pass: functions, classes and where attributes are assigned, moved or
registered, read from statement shapes only (no values)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..lazycst import cst
from ..syntax import dotted_name, last_name
from .vocabulary import MOVING_METHODS, literal_string


# -- the file-level pre-pass: statement shapes only ---------------------------------------------
@dataclass
class FileShape:
    """What the pre-pass learns about the file: its functions and classes, and which
    attributes are assigned (or moved, or registered) where."""

    functions: List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = field(default_factory=list)
    #: attribute name -> functions containing an assignment or in-place move of ``<obj>.name``.
    attribute_sites: Dict[str, List[Optional[cst.CSTNode]]] = field(default_factory=dict)
    #: name given to ``register_buffer``/``register_parameter``... -> functions doing it.
    registered: Dict[str, List[Optional[cst.CSTNode]]] = field(default_factory=dict)
    uses_setattr: bool = False
    module_classes: set = field(default_factory=set)


def statement_calls(statement: cst.CSTNode) -> Iterable[cst.Call]:
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            value = getattr(small, "value", None)
            if isinstance(value, cst.Call):
                yield value


class ShapeWalker:
    def __init__(self) -> None:
        self.shape = FileShape()

    def walk(self, body: Sequence[cst.CSTNode], function: Optional[cst.CSTNode], klass: Optional[cst.ClassDef]) -> None:
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                self.shape.functions.append((statement, klass))
                self.walk(block_statements(statement.body), statement, None)
            elif isinstance(statement, cst.ClassDef):
                if any(looks_like_module_base(base.value) for base in statement.bases):
                    self.shape.module_classes.add(statement.name.value)
                self.walk(block_statements(statement.body), function, statement)
            elif isinstance(statement, cst.SimpleStatementLine):
                self._simple(statement, function)
            else:
                for inner in child_blocks(statement):
                    self.walk(inner, function, klass)

    def _simple(self, statement: cst.SimpleStatementLine, function: Optional[cst.CSTNode]) -> None:
        for small in statement.body:
            targets: List[cst.BaseExpression] = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets = [small.target]
            for target in targets:
                for attribute in attribute_targets(target):
                    self.shape.attribute_sites.setdefault(attribute, []).append(function)
        for call in statement_calls(statement):
            func = call.func
            name = last_name(func)
            if name == "setattr":
                self.shape.uses_setattr = True
            elif name in {"register_buffer", "register_parameter", "register_module", "add_module"} and call.args:
                registered = literal_string(call.args[0].value)
                if registered:
                    self.shape.registered.setdefault(registered, []).append(function)
            elif name in MOVING_METHODS and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
                self.shape.attribute_sites.setdefault(func.value.attr.value, []).append(function)


def attribute_targets(target: cst.BaseExpression) -> Iterable[str]:
    if isinstance(target, cst.Attribute):
        yield target.attr.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from attribute_targets(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from attribute_targets(target.value)


#: How the dotted name of an ``nn.Module`` subclass's base ends.
MODULE_BASE_ENDINGS = ("Module", "nn.Sequential", "ModuleList", "ModuleDict")


def looks_like_module_base(base: cst.BaseExpression) -> bool:
    return (dotted_name(base) or "").endswith(MODULE_BASE_ENDINGS)


def block_statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    return [cst.SimpleStatementLine(body=suite.body)]


def child_blocks(statement: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    blocks: List[Sequence[cst.CSTNode]] = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite):
        blocks.append(block_statements(body))
    for handler in getattr(statement, "handlers", ()):
        blocks.append(block_statements(handler.body))
    for case in getattr(statement, "cases", ()):
        blocks.append(block_statements(case.body))
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        blocks.append([orelse])
    elif orelse is not None:
        blocks.append(block_statements(orelse.body))
    final = getattr(statement, "finalbody", None)
    if final is not None:
        blocks.append(block_statements(final.body))
    return blocks
