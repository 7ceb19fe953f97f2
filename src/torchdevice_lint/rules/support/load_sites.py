"""Where TDV501 may report, read on CPython's tree for the first stage: a file whose loads all
stand behind a check, pass a ``map_location`` the file never sets to None, or read a dataset's
files is not parsed with LibCST for it."""

from __future__ import annotations

import ast
from typing import List, Optional, Set

from ...first_stage.facts import Facts
from ...first_stage.triggers import Resolved
from ...syntax.ast_nodes import dotted_name, import_aliases, nodes_below
from .saved_files import LOADERS, dataset_base


def may_lack_map_location(call: ast.Call) -> bool:
    """The calls ``visit_Call`` looks at further: an argument and no unpacking, and a
    ``map_location`` that is a bare name (maybe None) or absent with at most one positional
    argument."""
    if not (call.args or call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return False
    if any(k.arg is None for k in call.keywords):
        return False
    location = _location(call)
    return isinstance(location, ast.Name) if location is not None else len(call.args) <= 1


_LOADS = Resolved(LOADERS, calls=True, accepts=may_lack_map_location)


def load_sites(facts: Facts) -> List[ast.Call]:
    """The loads TDV501 may report (silent where ``ctx.guarded`` holds): not one given
    ``map_location=name`` where no assignment of the file binds ``name = None`` (``may_be_none``),
    nor one without it inside a dataset class (``in_dataset_class``) whose base resolves the
    same through every import of the file, one of them a statement of the module's own."""
    loads = list(_LOADS.matching_calls(facts))
    if not loads or facts.tree is None:
        return loads
    named = [call for call in loads if _location(call) is not None]
    none_bound = _bound_to_none(facts.tree) if named else set()
    datasets = _dataset_classes(facts) if len(named) < len(loads) else []
    return [
        call for call in loads
        if (_location(call).id in none_bound if _location(call) is not None else not _innermost_is_one(call, facts.definitions, datasets))
    ]


def _location(call: ast.Call) -> Optional[ast.expr]:
    return next((keyword.value for keyword in call.keywords if keyword.arg == "map_location"), None)


def _bound_to_none(tree: ast.Module) -> Set[str]:
    return {
        target.id for node in nodes_below(tree) if type(node) is ast.Assign and type(node.value) is ast.Constant
        and node.value.value is None for target in node.targets if type(target) is ast.Name
    }


def _dataset_classes(facts: Facts) -> List[ast.ClassDef]:
    """The classes with a base that surely resolves to a torch (torchvision, PyG) dataset, as
    ``FileContext.qualname`` does: the module's own import statements bind its first name, and
    no import of the file (nor the project's) binds it otherwise."""
    own = {local for statement in facts.tree.body for local in import_aliases(statement)}
    found = []
    for definition in facts.definitions:
        if type(definition) is not ast.ClassDef:
            continue
        for base in definition.bases:
            head, dot, rest = (dotted_name(base) or "").partition(".")
            bound = facts.imports.get(head, ())
            if head in own and len(bound) == 1 and dataset_base(next(iter(bound)) + dot + rest):
                found.append(definition)
                break
    return found


def _innermost_is_one(call: ast.Call, definitions: List[ast.AST], classes: List[ast.ClassDef]) -> bool:
    """Whether the innermost class around ``call`` is one of ``classes``."""
    if not classes:
        return False
    where = (call.lineno, call.col_offset)
    around = [
        node for node in definitions if type(node) is ast.ClassDef
        and (node.lineno, node.col_offset) <= where <= (node.end_lineno, node.end_col_offset)
    ]
    return bool(around) and max(around, key=lambda node: (node.lineno, node.col_offset)) in classes
