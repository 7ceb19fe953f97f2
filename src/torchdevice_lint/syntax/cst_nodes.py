"""Small readers of LibCST nodes that every layer uses: dotted names, string literals, and
the names an import statement binds."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

from .cst_lazy import cst


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def qualified(dotted: Optional[str], aliases: Mapping[str, str]) -> Optional[str]:
    """A dotted name through a file's imports: ``th.cuda.synchronize`` -> ``torch.cuda.synchronize``
    after ``import torch as th``; None when its first name is not imported. Both trees' readers
    (LibCST's here, CPython's in ``inference/nodes.py``) give the dotted name."""
    if dotted is None:
        return None
    head, dot, rest = dotted.partition(".")
    base = aliases.get(head)
    return None if base is None else base + dot + rest


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


def parameters(function: cst.FunctionDef) -> List[cst.Param]:
    """The function's parameters in order, ``*args`` and ``**kwargs`` included."""
    params = function.params
    starred = [param for param in (params.star_arg, params.star_kwarg) if isinstance(param, cst.Param)]
    return [*params.posonly_params, *params.params, *params.kwonly_params, *starred]


def parameter_names(function: cst.FunctionDef) -> set:
    """Every name the function's parameters bind."""
    return {param.name.value for param in parameters(function)}


def defined_method(klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    """The method ``name`` a class body defines itself (not one it inherits), or None."""
    return next((s for s in klass.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)


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


def statements_after(stack: Sequence[cst.CSTNode], index: int) -> List[cst.CSTNode]:
    """The statements that run after ``stack[index]`` in its function (or module): those after it
    in its block, and after each block holding it (``if path: try: ... except: ...`` then the save)."""
    after: List[cst.CSTNode] = []
    for position in range(index, 0, -1):
        node, block = stack[position], stack[position - 1]
        if isinstance(block, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            break
        body = getattr(block, "body", None)
        if isinstance(body, (list, tuple)) and node in body:
            after.extend(body[body.index(node) + 1:])
    return after
