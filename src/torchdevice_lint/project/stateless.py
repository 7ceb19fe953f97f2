"""The project's ``nn.Module`` classes that hold no parameter, buffer or submodule.

``Module.cuda()`` moves only what a module registers, so on a machine without CUDA it raises only
when there is something to move: ``class get_loss(nn.Module)`` whose methods keep nothing but
numbers makes ``MODEL.get_loss().cuda()`` a no-op there, as ``nn.CrossEntropyLoss().cuda()`` is.
Proven conservatively: a base that cannot be resolved, a metaclass, a decorator, an attribute of
``self`` set to anything but a constant (``self.loss = nn.MSELoss()`` registers a submodule), a
``register_buffer`` or ``setattr`` call, or a class-level value other than a constant leaves the
class unproven. A name the project also defines as a function or method is never proven: a call
of it may return anything.
"""

from __future__ import annotations

import ast
import os
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from ..inference.vocabulary import PARAMETERLESS_MODULES
from ..syntax.ast_nodes import dotted_name, nodes_below

#: ``nn.Module`` itself, as its imports resolve.
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
#: Calls that put a tensor or a module into a module whatever their arguments are.
REGISTERING = frozenset({"register_buffer", "register_parameter", "add_module", "register_module", "setattr", "__setattr__"})

Classes = Dict[str, Optional[List[str]]]


def module_classes(tree: ast.Module, imports: Mapping[str, str]) -> Classes:
    """The module's top-level classes (``imports``: local name -> the dotted name it binds):
    name -> its bases as their imports resolve them
    (``nn.Module`` -> ``torch.nn.Module``; a project class by the name written), or None where
    the class may hold a parameter, a buffer or a submodule."""
    functions = {s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    found: Classes = {}
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            twice = statement.name in found or statement.name in functions
            found[statement.name] = None if twice else _bases_of_empty(statement, imports)
    return found


def _bases_of_empty(cls: ast.ClassDef, imports: Mapping[str, str]) -> Optional[List[str]]:
    if cls.keywords or cls.decorator_list or not cls.bases or not _holds_nothing(cls):
        return None
    bases = [_resolved(base, imports) for base in cls.bases]
    return None if None in bases else bases


def _resolved(base: ast.expr, imports: Mapping[str, str]) -> Optional[str]:
    written = dotted_name(base)
    if written is None:
        return None
    head, _, rest = written.partition(".")
    full = imports.get(head)
    if full is None:
        return written
    return f"{full}.{rest}" if rest else full


def _holds_nothing(cls: ast.ClassDef) -> bool:
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not _method_keeps_constants(statement):
                return False
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            if statement.value is not None and not _constant(statement.value):
                return False
        elif not isinstance(statement, (ast.Expr, ast.Pass, ast.ClassDef)) or (
            isinstance(statement, ast.Expr) and not isinstance(statement.value, ast.Constant)
        ):
            return False
    return True


def _method_keeps_constants(method: ast.AST) -> bool:
    """Whether the method sets no attribute of its first argument but to a constant (or to one
    of its own arguments whose default is a constant other than None) and registers nothing."""
    positional = method.args.posonlyargs + method.args.args
    if not positional:
        return True
    me = positional[0].arg
    constant_defaults = _constant_defaults(method.args)
    allowed: Set[int] = set()
    nodes = nodes_below(method)
    for node in nodes:
        if isinstance(node, ast.Call) and (
            (isinstance(node.func, ast.Attribute) and node.func.attr in REGISTERING)
            or (isinstance(node.func, ast.Name) and node.func.id in REGISTERING | {"vars"})
        ):
            return False
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            kept = _constant(node.value) or (isinstance(node.value, ast.Name) and node.value.id in constant_defaults)
            if kept:
                allowed.update(id(target) for target in targets if _attribute_of(target, me))
    for node in nodes:
        if isinstance(node, ast.Attribute) and _rooted_at(node, me):
            if node.attr == "__dict__" or (isinstance(node.ctx, ast.Store) and id(node) not in allowed):
                return False
    return True


def _constant_defaults(arguments: ast.arguments) -> Set[str]:
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is not None]
    return {
        arg.arg for arg, default in pairs
        if _constant(default) and not (isinstance(default, ast.Constant) and default.value is None)
    }


def _attribute_of(target: ast.expr, me: str) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me


def _rooted_at(node: ast.expr, me: str) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == me


def _constant(value: ast.expr) -> bool:
    """A number, string, bool, None, or a tuple of those (``-1`` included)."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        return isinstance(value.operand, ast.Constant)
    return isinstance(value, ast.Tuple) and all(_constant(element) for element in value.elts)


def parameterless_classes(classes: Mapping[str, Classes], callables: Mapping[str, Iterable[str]]) -> Dict[str, Tuple[str, ...]]:
    """Of the classes of every module (by path), those proven empty under every definition of
    their name in the project -> the names of the modules and packages that define them (a
    call's qualified name must go through one). ``callables``: by path, the functions and
    methods the module defines, whose names are never proven."""
    defined: Dict[str, List[Optional[List[str]]]] = {}
    where: Dict[str, Set[str]] = {}
    for path, found in classes.items():
        places = _places(path)
        for name, bases in found.items():
            defined.setdefault(name, []).append(bases)
            where.setdefault(name, set()).update(places)
    called = {name.rsplit(".", 1)[-1] for names in callables.values() for name in names}
    project = set().union(*where.values()) if where else set()
    proven: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, definitions in defined.items():
            if name in proven or name in called:
                continue
            if all(bases is not None and all(_empty_base(base, proven, project) for base in bases) for bases in definitions):
                proven.add(name)
                changed = True
    return {name: tuple(sorted(where[name])) for name in sorted(proven)}


def _places(path: str) -> FrozenSet[str]:
    folder, file = os.path.split(path)
    return frozenset({os.path.splitext(file)[0], os.path.basename(folder)})


def _empty_base(base: str, proven: Set[str], project: Set[str]) -> bool:
    if base in MODULE_BASES:
        return True
    module, _, leaf = base.rpartition(".")
    if module == "torch.nn":
        return leaf in PARAMETERLESS_MODULES
    inside = not module or module.startswith(".") or module.split(".")[0] in project
    return inside and leaf in proven
