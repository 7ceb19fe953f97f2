"""The bindings of one name in one scope, as Python binds names (NFKC-normalized), with the
value each binds: what a fix must know before it writes or inserts that name."""

from __future__ import annotations

import unicodedata
from typing import List, Optional

from .cst_lazy import cst
from .cst_nodes import import_aliases


def normalized(name: str) -> str:
    """The name Python binds: identifiers are NFKC-normalized (a fullwidth ``ｔｏｒｃｈ`` is ``torch``)."""
    return unicodedata.normalize("NFKC", name)


class BindingValues(cst.CSTVisitor):
    """Every binding of one name directly in a scope, with the value bound (None for a binding
    that is no plain assignment: a loop target, an import, a ``def``, ``x += ...``)."""

    def __init__(self, root: cst.CSTNode, name: str) -> None:
        super().__init__()
        self.root, self.name = root, name
        self.values: List[Optional[cst.BaseExpression]] = []

    def _names(self, target: cst.CSTNode) -> bool:
        return isinstance(target, cst.Name) and normalized(target.value) == self.name

    def _unpacked(self, target: cst.CSTNode) -> bool:
        if isinstance(target, (cst.Tuple, cst.List)):
            return any(self._unpacked(element.value) for element in target.elements)
        if isinstance(target, cst.StarredElement):
            return self._unpacked(target.value)
        return self._names(target)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.root:
            return True
        if self._names(node.name):
            self.values.append(None)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if node is self.root:
            return True
        if self._names(node.name):
            self.values.append(None)
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return node is self.root

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if self._names(target.target):
                self.values.append(node.value)
            elif self._unpacked(target.target):
                self.values.append(None)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None and self._names(node.target):
            self.values.append(node.value)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if self._names(node.target):
            self.values.append(None)

    def visit_For(self, node: cst.For) -> None:
        if self._unpacked(node.target):
            self.values.append(None)

    def visit_AsName(self, node: cst.AsName) -> None:
        if self._unpacked(node.name):
            self.values.append(None)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        if self._names(node.target):
            self.values.append(node.value)

    def visit_Import(self, node: cst.Import) -> None:
        if any(normalized(local) == self.name for local in import_aliases(node)):
            self.values.append(None)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar) or any(normalized(local) == self.name for local in import_aliases(node)):
            self.values.append(None)


def all_params(params: cst.Parameters) -> List[cst.Param]:
    found = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            found.append(star)
    return found
