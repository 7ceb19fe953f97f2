"""The project's ``nn.Module`` classes that hold no parameter, buffer or submodule.

``Module.cuda()`` moves only what a module registers, so on a machine without CUDA it raises only
when there is something to move: ``class get_loss(nn.Module)`` whose methods keep nothing but
numbers makes ``MODEL.get_loss().cuda()`` a no-op there, as ``nn.CrossEntropyLoss().cuda()`` is.
A submodule that holds nothing itself (``self.loss = nn.CrossEntropyLoss()``, or a project class
proven empty the same way) gives ``.cuda()`` nothing to move either. Proven conservatively: a base
that cannot be resolved, a metaclass, a decorator, an attribute of ``self`` set to anything else
(``nn.CrossEntropyLoss(weight=w)`` registers a buffer), a ``register_buffer`` or ``setattr``
call, or a class-level value other than a constant leaves the class unproven. A name the project also defines as a function or method is never proven: a call
of it may return anything.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Set, Tuple

from ..inference.vocabulary import PARAMETERLESS_MODULES, is_parameterless_module
from ..syntax.ast_nodes import block_statements, dotted_name, nodes_below

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
    """Its bases, then the project classes of the submodules it holds (each must be empty too)."""
    held = _Held()
    if cls.keywords or cls.decorator_list or not cls.bases or not _holds_nothing(cls, imports, held):
        return None
    bases = [_resolved(base, imports) for base in cls.bases]
    return None if None in bases else bases + [name for name in held.classes if name not in bases]


def _resolved(base: ast.expr, imports: Mapping[str, str]) -> Optional[str]:
    written = dotted_name(base)
    if written is None:
        return None
    head, _, rest = written.partition(".")
    full = imports.get(head)
    if full is None:
        return written
    return f"{full}.{rest}" if rest else full


@dataclass
class _Held:
    """What a class's methods keep besides constants: instances of project classes (``classes``,
    each to be proven empty in turn) and attributes set from arguments (``arguments``), which the
    class must never call (a module handed in is called; a number or a flag is not)."""

    classes: List[str] = field(default_factory=list)
    arguments: Set[str] = field(default_factory=set)
    called: Set[str] = field(default_factory=set)


def _holds_nothing(cls: ast.ClassDef, imports: Mapping[str, str], held: _Held) -> bool:
    for statement in cls.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not _method_keeps_constants(statement, imports, held):
                return False
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            if statement.value is not None and not _constant(statement.value):
                return False
        elif not isinstance(statement, (ast.Expr, ast.Pass, ast.ClassDef)) or (
            isinstance(statement, ast.Expr) and not _inert(statement.value)
        ):
            return False
    return not (held.arguments & held.called)


def _inert(value: ast.expr) -> bool:
    """A docstring, also one written as an f-string with nothing to format (Julie-tang00/Point-BERT
    @ce5a6e1 extensions/chamfer_dist/__init__.py:62 ``f''' Chamder Distance L1 '''``)."""
    return type(value) is ast.Constant or (type(value) is ast.JoinedStr and all(type(part) is ast.Constant for part in value.values))


def _method_keeps_constants(method: ast.AST, imports: Mapping[str, str], held: _Held) -> bool:
    """Whether the method sets no attribute of its first argument but to a constant, to one of
    its own arguments (not one defaulting to None, a slot for a module) or to a submodule that
    holds nothing (a torch one, ``nn.CrossEntropyLoss()``, or a project class's), and registers
    nothing; what it keeps and calls goes to ``held``."""
    positional = method.args.posonlyargs + method.args.args
    if not positional:
        return True
    me = positional[0].arg
    arguments = _arguments_not_none(method.args)
    allowed: Set[int] = set()
    nodes = nodes_below(method)
    for node in nodes:
        if isinstance(node, ast.Call):
            if (isinstance(node.func, ast.Attribute) and node.func.attr in REGISTERING) or (
                isinstance(node.func, ast.Name) and node.func.id in REGISTERING | {"vars"}
            ):
                return False
            held.called.update(_kept_attribute(node.func, me))
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = [target for target in (node.targets if isinstance(node, ast.Assign) else [node.target]) if _attribute_of(target, me)]
            from_argument = isinstance(node.value, ast.Name) and node.value.id in arguments
            if targets and (
                from_argument or _constant(node.value) or _plain_tensor(node.value, imports)
                or _empty_submodule(node.value, imports, held.classes)
            ):
                allowed.update(id(target) for target in targets)
                if from_argument:
                    held.arguments.update(target.attr for target in targets)
    for node in nodes:
        if isinstance(node, ast.Attribute) and _rooted_at(node, me):
            if node.attr == "__dict__" or (isinstance(node.ctx, ast.Store) and id(node) not in allowed):
                return False
    return True


def _kept_attribute(func: ast.expr, me: str) -> List[str]:
    """``self.net(x)`` and ``self.net.encode(x)`` call ``net``."""
    while isinstance(func, ast.Attribute):
        if isinstance(func.value, ast.Name) and func.value.id == me:
            return [func.attr]
        func = func.value
    return []


def _empty_submodule(value: ast.expr, imports: Mapping[str, str], held: List[str]) -> bool:
    """``nn.Softmax(dim=1)``, ``nn.CrossEntropyLoss()`` (no ``weight``), or a project class's
    instance (``MaskedCrossEntropyLoss()``), which ``held`` then names."""
    if not isinstance(value, ast.Call):
        return False
    name = _resolved(value.func, imports)
    if name is None:
        return False
    module, _, leaf = name.rpartition(".")
    if module == "torch.nn":
        return is_parameterless_module(leaf, [keyword.arg for keyword in value.keywords] + [None] * len(value.args))
    if module.startswith("torch"):
        return False
    held.append(name)
    return True


def _arguments_not_none(arguments: ast.arguments) -> Set[str]:
    """The method's arguments, but those defaulting to None (or to anything but a constant)."""
    positional = arguments.posonlyargs + arguments.args
    defaults = dict(zip([arg.arg for arg in positional[len(positional) - len(arguments.defaults):]], arguments.defaults))
    defaults.update((arg.arg, default) for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is not None)
    return {
        arg.arg for arg in positional[1:] + arguments.kwonlyargs
        if arg.arg not in defaults or (_constant(defaults[arg.arg]) and not (isinstance(defaults[arg.arg], ast.Constant) and defaults[arg.arg].value is None))
    }


def _attribute_of(target: ast.expr, me: str) -> bool:
    return isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == me


def _rooted_at(node: ast.expr, me: str) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id == me


#: Tensor methods whose result is a plain tensor again (never a parameter or a module).
_TENSOR_METHODS = frozenset({"cuda", "cpu", "to", "float", "double", "long", "int", "half", "bool", "detach", "clone"})


def _plain_tensor(value: ast.expr, imports: Mapping[str, str]) -> bool:
    """A tensor made by a ``torch.*`` function (``-torch.log(torch.tensor(t)).cuda()``,
    CoinCheung/BiSeNet@6b4b67a old/loss.py:15): an attribute holding it is not registered, so
    ``Module.cuda()`` leaves it where it is."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    if not isinstance(value, ast.Call):
        return False
    if isinstance(value.func, ast.Attribute) and value.func.attr in _TENSOR_METHODS:
        return _plain_tensor(value.func.value, imports)
    name = _resolved(value.func, imports) or ""
    head, _, function = name.partition(".")
    return head == "torch" and function.islower() and function.isidentifier()


def _constant(value: ast.expr) -> bool:
    """A number, string, bool, None, or a tuple of those (``-1`` included)."""
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        return isinstance(value.operand, ast.Constant)
    return isinstance(value, ast.Tuple) and all(_constant(element) for element in value.elts)


def module_factories(tree: ast.Module, imports: Mapping[str, str]) -> Dict[str, List[str]]:
    """Its top-level functions every ``return`` of which gives a new module: a class called
    there, or a name every binding of which in the function calls one (``get_criterion(p)``
    choosing a loss by configuration), or a class a module-level registry maps a name to
    (``return __factory[name]()``, JDAI-CV/image-captioning@d39126d losses/__init__.py:5-17) ->
    those classes (torch's own left out, once proven empty)."""
    found: Dict[str, List[str]] = {}
    registries = _registries(tree)
    for statement in tree.body:
        if not isinstance(statement, ast.FunctionDef):
            continue
        returned: List[Optional[ast.expr]] = []
        bound: Dict[str, List[Optional[ast.expr]]] = {}
        for node in block_statements(statement.body):
            if isinstance(node, ast.Return):
                returned.append(node.value)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                bound.setdefault(node.targets[0].id, []).append(node.value)
            else:  # another binding of a name: its value is not known
                for name in _bound_otherwise(node):
                    bound.setdefault(name, []).append(None)
        if not returned or None in returned:
            continue
        made = [value for given in returned for value in (bound.get(given.id, [None]) if isinstance(given, ast.Name) else [given])]
        made = [made_one for value in made for made_one in _registered(value, registries)]
        classes: List[str] = []
        if all(value is not None and _empty_submodule(value, imports, classes) for value in made):
            found[statement.name] = sorted(set(classes))
    return found


def _registries(tree: ast.Module) -> Dict[str, List[ast.expr]]:
    """Module-level dicts bound once whose every value is a name: ``{'CrossEntropy': CrossEntropy}``."""
    found: Dict[str, List[ast.expr]] = {}
    bound: Dict[str, int] = {}
    for statement in tree.body:
        for name in _bound_otherwise(statement):  # ``registry["x"] = X`` adds to it: a second binding
            bound[name] = bound.get(name, 0) + 1
        if (
            isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Dict) and statement.value.values
            and all(isinstance(value, ast.Name) for value in statement.value.values)
        ):
            found[statement.targets[0].id] = list(statement.value.values)
    return {name: values for name, values in found.items() if bound.get(name) == 1}


def _registered(value: Optional[ast.expr], registries: Mapping[str, List[ast.expr]]) -> List[Optional[ast.expr]]:
    """``registry[key]()`` as a call of each class the registry holds; any other value as it is."""
    if (
        isinstance(value, ast.Call) and not value.args and not value.keywords and isinstance(value.func, ast.Subscript)
        and isinstance(value.func.value, ast.Name) and value.func.value.id in registries
    ):
        return [ast.Call(func=held, args=[], keywords=[]) for held in registries[value.func.value.id]]
    return [value]


def _bound_otherwise(statement: ast.stmt) -> List[str]:
    """The names a statement binds other than by ``name = value`` (unpacking, ``+=``, loops, ``with``)."""
    if isinstance(statement, ast.Assign):
        places = statement.targets
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
        places = [statement.target]
    elif isinstance(statement, (ast.With, ast.AsyncWith)):
        places = [item.optional_vars for item in statement.items if item.optional_vars is not None]
    else:
        return []
    return [node.id for place in places for node in ast.walk(place) if isinstance(node, ast.Name)]


def parameterless_classes(
    classes: Mapping[str, Classes], callables: Mapping[str, Iterable[str]], factories: Mapping[str, Mapping[str, List[str]]],
) -> Dict[str, Tuple[str, ...]]:
    """Of the classes of every module (by path), those proven empty under every definition of
    their name in the project -> the names of the modules and packages that define them (a
    call's qualified name must go through one). ``callables``: by path, the functions and
    methods the module defines, whose names are never proven but as ``factories`` (by path)
    every definition of which makes only proven classes."""
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
    found = {name: tuple(sorted(where[name])) for name in sorted(proven)}
    empty_everywhere: Dict[str, List[bool]] = {}
    for path, names in callables.items():
        for name in names:  # a method of the same name may return anything
            made = factories.get(path, {}).get(name)
            empty = made is not None and all(_empty_base(made_class, proven, project) for made_class in made)
            empty_everywhere.setdefault(name.rsplit(".", 1)[-1], []).append(empty)
    for path, defined_here in factories.items():
        for name in defined_here:
            if name not in defined and all(empty_everywhere.get(name, [False])):
                found[name] = tuple(sorted(set(found.get(name, ())) | _places(path)))
    return found


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
