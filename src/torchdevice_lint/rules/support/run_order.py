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
    walked = [(statement, *_uses(statement, name)) for statement in _run_in_order(ctx.module) if statement is not function]
    users = [statement for statement, _, mentions in walked if mentions]
    if not any(isinstance(user, (cst.FunctionDef, cst.ClassDef)) for user in users):
        order = [(calls, mentions) for statement, calls, mentions in walked if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))]
    elif len(users) == 1 and isinstance(users[0], cst.FunctionDef) and isinstance(users[0].body, cst.IndentedBlock):
        order = [_uses(statement, name) for statement in users[0].body.body]  # ``train()`` saves, then calls ``test_step()``
    else:
        return False
    first_save, calls = None, []
    for index, (calls_here, mentions) in enumerate(order):
        called = sum(1 for call in calls_here if isinstance(call.func, cst.Name) and call.func.value == name)
        if called < mentions:
            return False  # used as a value (a callback, a thread's target)
        calls.extend([index] * called)
        if first_save is None and any(_saves(ctx, call, keys, saved_by) for call in calls_here):
            first_save = index
    return bool(calls) and len(calls) == len(project_calls) and first_save is not None and first_save < min(calls)


def _run_in_order(module: cst.Module) -> List[cst.CSTNode]:
    """The module's statements, with those of its ``if __name__ == "__main__":`` block in their
    order (cwmok/LapIRN@c17fb75 Code/Train_LapIRN_diff_resize.py: ``train_lvl1()`` saves what
    ``train_lvl2()`` loads)."""
    found: List[cst.CSTNode] = []
    for statement in module.body:
        test = statement.test if isinstance(statement, cst.If) else None
        main = isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__"
        if main and isinstance(statement.body, cst.IndentedBlock) and statement.orelse is None:
            found.extend(statement.body.body)
        else:
            found.append(statement)
    return found


def _saves(ctx: "FileContext", call: cst.Call, keys: FrozenSet[str], saved_by: Callable[[cst.Call], FrozenSet[str]]) -> bool:
    if len(call.args) > 1 and ctx.qualname(call.func) in SAVERS:
        return bool(path_keys(call.args[1].value) & keys)
    return bool(saved_by(call) & keys)


def _uses(root: cst.CSTNode, name: str) -> Tuple[List[cst.Call], int]:
    """The calls in ``root``, and how many times it reads the name ``name`` (not an attribute or
    a keyword so named): one walk."""
    from ...syntax.cst_walk import nodes_of

    nodes = nodes_of(root, cst.Call, cst.Name, cst.Attribute, cst.Arg)
    mentions = sum(
        1 if type(node) is cst.Name and node.value == name
        else -1 if type(node) is cst.Attribute and node.attr.value == name or type(node) is cst.Arg and node.keyword is not None and node.keyword.value == name
        else 0
        for node in nodes
    )
    return [node for node in nodes if type(node) is cst.Call], mentions


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


def save_branches(ctx: "FileContext") -> Tuple[Branches, FrozenSet[Tuple[str, bool]]]:
    """The branches a save lies in, and those of them under a test of a command-line option
    (``if args.do_train:``), by the test's code and the side."""
    return branches_of(ctx.stack), _gated(ctx)


def saved_first(ctx: "FileContext", load: Branches, save: Tuple[Branches, FrozenSet[Tuple[str, bool]]]) -> bool:
    """Whether a save above the load in its function ran first: not in the other branch of an
    ``if`` the load is in, nor in a branch of an ``if`` on an option unless the load is under
    the same test too (``if args.do_train: ... save`` then ``if args.do_test: load``: a test-only
    run reads the file an earlier run saved, salesforce/CodeT5@7de7f69 CodeT5/run_gen.py:334-368;
    twice ``if args.use_validation:``, twitter-research/tgn@d55bbe6 train_supervised.py:231-241)."""
    branches, gated = save
    return not exclusive(load, branches) and (not gated or gated <= _gated(ctx))


def _gated(ctx: "FileContext") -> FrozenSet[Tuple[str, bool]]:
    from ...syntax.cst_walk import nodes_of

    stack, options = ctx.stack, ctx.project.options
    return frozenset(
        (ctx.module.code_for_node(node.test), stack[index + 1] is node.body) for index, node in enumerate(stack[:-1])
        if isinstance(node, cst.If) and (stack[index + 1] is node.body or stack[index + 1] is node.orelse)
        and any(isinstance(part, cst.Attribute) and part.attr.value in options for part in nodes_of(node.test, cst.Attribute))
    )
