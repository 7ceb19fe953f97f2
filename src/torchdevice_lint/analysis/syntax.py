"""Small readers of LibCST nodes that every layer uses: dotted names, string literals, and
the names an import statement binds."""

from __future__ import annotations

from typing import Dict, Optional

from .lazycst import cst


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def last_name(node: cst.BaseExpression) -> Optional[str]:
    """``x`` for ``x`` and ``a.b.x``: the name an expression ends in."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return None


def string_value(node: cst.CSTNode) -> Optional[str]:
    """A plain string literal's value, or the leading text of an f-string (``f"cuda:{i}"``)."""
    if isinstance(node, cst.SimpleString):
        try:
            value = node.evaluated_value
        except Exception:  # noqa: BLE001 - byte strings and odd prefixes
            return None
        return value if isinstance(value, str) else None
    if isinstance(node, cst.FormattedString) and node.parts:
        head = node.parts[0]
        if isinstance(head, cst.FormattedStringText):
            return head.value
    return None


def import_aliases(node: cst.CSTNode) -> Dict[str, str]:
    """Local name -> qualified name bound by one import statement."""
    bound: Dict[str, str] = {}
    if isinstance(node, cst.Import):
        for alias in node.names:
            full = dotted_name(alias.name)
            if full is None:
                continue
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                bound[alias.asname.name.value] = full
            else:
                top = full.split(".")[0]
                bound[top] = top
    elif isinstance(node, cst.ImportFrom):
        if node.relative or node.module is None or isinstance(node.names, cst.ImportStar):
            return bound
        module = dotted_name(node.module)
        if module is None:
            return bound
        for alias in node.names:
            if not isinstance(alias.name, cst.Name):
                continue
            local = alias.name.value
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                local = alias.asname.name.value
            bound[local] = f"{module}.{alias.name.value}"
    return bound


def source_of(node: cst.CSTNode) -> str:
    """The code of one node, for messages."""
    return cst.Module([]).code_for_node(node)
