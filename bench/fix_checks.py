"""Checks of a fix's output that know nothing of how the fix chose what to write.

* ``new_pyflakes_problems(before, after)``: undefined names and redefinitions pyflakes reports in
  the fixed text and not in the original (a decorator naming another function's ``device``, a
  ``device = ...`` binding over an imported ``device``).
* ``new_unbound_names(before, after)``: names read where they are not certainly bound when the
  line runs, and not so read in the original. Stricter than pyflakes, which accepts a function
  reading a module-level name assigned anywhere: here a function may only read a module-level
  name bound unconditionally above its ``def`` (what a fix may write), a local must be a parameter
  or bound above on every path, and decorators and defaults are read where the ``def`` stands.

Both compare the sets of (kind or scope, name) before and after, so lines moved by an inserted
binding count the same, and a fix that repeats a name the original already read unbound (a
fragment's ``batch``) adds nothing new. The tests run them on every rule example's fix and every single finding's fix
(tests/test_fix_checks.py); ``bench/fixed_names.py`` runs them on thousands of real files.
"""

from __future__ import annotations

import ast
import builtins
from collections import Counter
from typing import Dict, Iterable, List, Optional, Set, Tuple

from pyflakes import checker, messages

#: What a fix may never add: a use of a name nothing binds, or a second binding of one.
PYFLAKES_KINDS = {
    messages.UndefinedName: "undefined name",
    messages.UndefinedLocal: "undefined name",
    messages.RedefinedWhileUnused: "redefinition",
    messages.ImportShadowedByLoopVar: "redefinition",
}
BUILTINS = frozenset(dir(builtins)) | {"__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__path__", "__package__"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
SCOPES = (*FUNCTIONS, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _parse(source: str) -> Optional[ast.Module]:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def pyflakes_problems(source: str) -> Counter:
    """(kind, name) of each undefined name or redefinition pyflakes reports."""
    tree = _parse(source)
    if tree is None:
        return Counter()
    found = checker.Checker(tree, filename="<fixed>")
    return Counter(
        (PYFLAKES_KINDS[type(message)], str(message.message_args[0]))
        for message in found.messages
        if type(message) in PYFLAKES_KINDS
    )


def new_pyflakes_problems(before: str, after: str) -> List[str]:
    new = set(pyflakes_problems(after)) - set(pyflakes_problems(before))
    return [f"{kind} `{name}`" for kind, name in sorted(new)]


def new_unbound_names(before: str, after: str) -> List[str]:
    new = set(unbound_names(after)) - set(unbound_names(before))
    return [f"`{name}` not bound where it is read ({scope})" for scope, name in sorted(new)]


def unbound_names(source: str) -> Counter:
    """(scope path, name) of each read of a name that is not certainly bound when it runs."""
    tree = _parse(source)
    if tree is None:
        return Counter()
    return _Binder(tree).unbound


# -- the binding check ------------------------------------------------------------------------
def _targets(node: ast.AST) -> Set[str]:
    """Names a binding target binds (``a``, ``a, (b, *c)``)."""
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(element) for element in node.elts)) if node.elts else set()
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return set()


def binds(statement: ast.stmt) -> Set[str]:
    """Names a statement binds whenever it completes."""
    if isinstance(statement, ast.Assign):
        return set().union(*(_targets(target) for target in statement.targets))
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return _targets(statement.target) if getattr(statement, "value", True) is not None else set()
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in statement.names if alias.name != "*"}
    if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, (ast.With, ast.AsyncWith)):  # its body runs through, as straight-line code
        targets = [_targets(item.optional_vars) for item in statement.items if item.optional_vars is not None]
        return set().union(*targets, *(binds(inner) for inner in statement.body))
    return set()


def _locals(scope: ast.AST) -> Set[str]:
    """Names bound anywhere directly in a function, lambda or class (Python's local names)."""
    names: Set[str] = set()
    declared: Set[str] = set()
    if isinstance(scope, (*FUNCTIONS, ast.Lambda)):
        arguments = scope.args
        for param in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
            if param is not None:
                names.add(param.arg)
    stack = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    while stack:
        node = stack.pop()
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
            names.add(node.name)
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return names - declared


class _Binder:
    """Walks the module keeping, for each read name, the scopes it runs in and the statements
    above it in each (the path), and decides whether a binding certainly ran before it."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.unbound: Counter = Counter()
        self.module_names = self._module_names(tree)
        self._locals: Dict[int, Set[str]] = {}
        #: (scope node, [(block, index of the statement on the path)]) from the module inwards.
        self.frames: List[Tuple[ast.AST, List[Tuple[List[ast.stmt], int]]]] = [(tree, [])]
        self.block(tree.body)

    @staticmethod
    def _module_names(tree: ast.Module) -> Set[str]:
        names: Set[str] = set()
        stack: List[ast.AST] = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                names.add(node.name)
                continue
            if isinstance(node, (ast.Lambda, *COMPREHENSIONS)):
                continue
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, ast.ExceptHandler) and node.name:
                names.add(node.name)
            stack.extend(ast.iter_child_nodes(node))
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                names.update(node.names)
        return names

    def locals_of(self, scope: ast.AST) -> Set[str]:
        if id(scope) not in self._locals:
            self._locals[id(scope)] = _locals(scope)
        return self._locals[id(scope)]

    # -- the walk -------------------------------------------------------------------------
    def block(self, statements: List[ast.stmt]) -> None:
        path = self.frames[-1][1]
        for index, statement in enumerate(statements):
            path.append((statements, index))
            self.statement(statement)
            path.pop()

    def statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            for part in statement.decorator_list:
                self.expression(part)
            if isinstance(statement, ast.ClassDef):
                for part in [*statement.bases, *statement.keywords]:
                    self.expression(part)
            else:
                self.arguments(statement.args)
            self.frames.append((statement, []))
            self.block(statement.body)
            self.frames.pop()
            return
        for field, value in ast.iter_fields(statement):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self.block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.excepthandler) or type(item).__name__ == "match_case":
                        if getattr(item, "type", None) is not None:
                            self.expression(item.type)
                        self.block(item.body)
                    elif isinstance(item, ast.AST):
                        self.expression(item)
            elif isinstance(value, ast.AST):
                self.expression(value)

    def arguments(self, arguments: ast.arguments) -> None:
        for default in [*arguments.defaults, *(d for d in arguments.kw_defaults if d is not None)]:
            self.expression(default)

    def expression(self, node: ast.AST) -> None:
        if isinstance(node, ast.Lambda):
            self.arguments(node.args)
            return  # its body runs later, where its own parameters are bound
        if isinstance(node, COMPREHENSIONS):
            self.expression(node.generators[0].iter)
            return  # the comprehension's own names are bound inside it
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if not self.bound(node.id):
                self.unbound[(self.scope_path(), node.id)] += 1
            return
        for child in ast.iter_child_nodes(node):
            self.expression(child)

    def scope_path(self) -> str:
        return "/".join(getattr(scope, "name", "<module>") for scope, _ in self.frames)

    # -- bound or not ---------------------------------------------------------------------
    def bound(self, name: str) -> bool:
        scope, path = self.frames[-1]
        if not isinstance(scope, ast.Module) and name in self.locals_of(scope):
            if isinstance(scope, FUNCTIONS) and name in {p.arg for p in self._params(scope)}:
                return True
            return self.dominated(name, path)
        for outer, _ in self.frames[1:-1]:
            if isinstance(outer, FUNCTIONS) and name in self.locals_of(outer):
                return True  # a closure: the enclosing function has bound it by the time it calls
        if name in self.module_names:
            return self.dominated(name, self.frames[0][1][:1] if len(self.frames) > 1 else self.frames[0][1])
        return name in BUILTINS

    @staticmethod
    def _params(function: ast.AST) -> List[ast.arg]:
        arguments = function.args
        return [p for p in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg] if p]

    @staticmethod
    def dominated(name: str, path: List[Tuple[List[ast.stmt], int]]) -> bool:
        """Whether a statement that certainly ran before the read binds ``name``: one above it
        in a block on its path, or the ``with ... as``/``for``/``except ... as`` it is inside."""
        for depth, (block, index) in enumerate(path):
            if any(name in binds(statement) for statement in block[:index]):
                return True
            holder = block[index]
            inside = depth + 1 < len(path)
            if inside and isinstance(holder, (ast.With, ast.AsyncWith)) and any(
                name in _targets(item.optional_vars) for item in holder.items if item.optional_vars is not None
            ):
                return True
            if inside and isinstance(holder, (ast.For, ast.AsyncFor)) and path[depth + 1][0] is holder.body and name in _targets(holder.target):
                return True
            if inside and isinstance(holder, ast.Try) and any(
                handler.name == name and path[depth + 1][0] is handler.body for handler in holder.handlers
            ):
                return True
        return False


def problems_of_fix(before: str, after: str) -> List[str]:
    """Every problem either check finds in ``after`` that ``before`` did not have."""
    return new_pyflakes_problems(before, after) + new_unbound_names(before, after)


def summary(problems: Iterable[str]) -> Counter:
    return Counter("undefined name" if "not bound" in text or text.startswith("undefined") else "redefinition" for text in problems)
