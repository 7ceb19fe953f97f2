"""What runs before a load in one run of a program: the saves above it, in which branches, and
whether a script's function runs only after the script itself saved the file it loads.

chennnM/GCNII@ca91f56 train.py:79-80,108,117: ``def test(): model.load_state_dict(torch.load(
checkpt_file))`` is called once, at module level, after the training loop that saves
``checkpt_file`` (full-supervised.py:61-62,101,108: from the function that trains): the reload
reads what this run wrote on this machine, like a reload later in the same function. The
function must be defined at module level, used nowhere but in those calls, and called by no
other module of the project (``ProjectFacts.parameter_calls`` counts the calls
of the whole project; without a project nothing is known and nothing is exempt).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, FrozenSet, List, Tuple

from ...syntax.cst_lazy import cst
from .saved_files import SAVERS, path_keys

if TYPE_CHECKING:
    from ...engine.context import FileContext


def reloaded_after_script_saves(ctx: "FileContext", keys: FrozenSet[str], saved_by: Callable[[cst.Call], FrozenSet[str]]) -> bool:
    """The load (file ``keys``) is in a top-level function whose every call comes after a save of
    the file: all in module-level statements, or all in one other top-level function's body.
    ``saved_by(call)``: the keys a call of a function that saves writes (empty for any other)."""
    function = ctx.enclosing_function()
    if function is None or not any(statement is function for statement in ctx.module.body):
        return False
    name = function.name.value
    project_calls = ctx.project.parameter_calls.get(f"{name}@{ctx.parameter_guards.stem}", ())
    if not project_calls:
        return False
    users = [statement for statement in ctx.module.body if statement is not function and _mentions(statement, name)]
    definitions = [user for user in users if isinstance(user, (cst.FunctionDef, cst.ClassDef))]
    if not definitions:
        statements = [statement for statement in ctx.module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))]
    elif len(users) == 1 and isinstance(users[0], cst.FunctionDef) and isinstance(users[0].body, cst.IndentedBlock):
        statements = list(users[0].body.body)  # ``train()`` saves, then calls ``test_step()``
    else:
        return False
    first_save, calls = None, []
    for index, statement in enumerate(statements):
        called = [call for call in _calls(statement) if isinstance(call.func, cst.Name) and call.func.value == name]
        if len(called) < _mentions(statement, name):
            return False  # used as a value (a callback, a thread's target)
        calls.extend(index for _ in called)
        if first_save is None and any(_saves(ctx, call, keys, saved_by) for call in _calls(statement)):
            first_save = index
    return bool(calls) and len(calls) == len(project_calls) and first_save is not None and first_save < min(calls)


def _saves(ctx: "FileContext", call: cst.Call, keys: FrozenSet[str], saved_by: Callable[[cst.Call], FrozenSet[str]]) -> bool:
    if len(call.args) > 1 and ctx.qualname(call.func) in SAVERS:
        return bool(path_keys(call.args[1].value) & keys)
    return bool(saved_by(call) & keys)


def _calls(root: cst.CSTNode) -> List[cst.Call]:
    from ...syntax.cst_walk import nodes_of

    return nodes_of(root, cst.Call)


def _mentions(root: cst.CSTNode, name: str) -> int:
    """How many times ``root`` reads the name ``name`` (not an attribute or keyword so named)."""
    from ...syntax.cst_walk import nodes_of

    names = sum(1 for node in nodes_of(root, cst.Name) if node.value == name)
    attributes = sum(1 for node in nodes_of(root, cst.Attribute) if node.attr.value == name)
    keywords = sum(1 for node in nodes_of(root, cst.Arg) if node.keyword is not None and node.keyword.value == name)
    return names - attributes - keywords


#: The ``(id(If), id(its branch))`` pairs a node lies in.
Branches = FrozenSet[Tuple[int, int]]


def branches_of(stack) -> Branches:
    return frozenset(
        (id(node), id(stack[index + 1]))
        for index, node in enumerate(stack[:-1])
        if isinstance(node, cst.If) and (stack[index + 1] is node.body or stack[index + 1] is node.orelse)
    )


def exclusive(here: Branches, there: Branches) -> bool:
    """Whether two nodes lie in different branches of one ``if`` (``if args.train: save ...
    else: load ...``): the load then reads a file an earlier run saved."""
    branch_of = dict(here)
    return any(test in branch_of and branch_of[test] != branch for test, branch in there)
