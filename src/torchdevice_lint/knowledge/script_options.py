"""The argparse options a script defines, and the statements it runs that read one it does not.

Each option's dest and default come from its ``add_argument`` call. A script that reads an
option its own parser never defines fails on every machine: mahmoodlab/MCAT@b9cca63 main.py:164 reads ``args.inst_loss``, which none of its 32
``add_argument`` calls defines and nothing assigns: ``AttributeError`` on any machine, before
``main(args)`` trains; Ahmednull/L2CS-Net@a4d8f7f test.py:85 reads ``args.bins`` the same way.
The statements after such a line never run, nor does what only they call: no line there raises
*because* CUDA is missing. Conservative: one parser, every option written as a literal, no
sub-parsers, parents or ``parse_known_args``, the namespace handed to no function but those the
module defines or imports by name before the line, and, in the whole project, nothing that sets
the option (``args.inst_loss = ...``) or attributes by a computed name (``setattr(args, k, v)``,
``vars(args).update``, ``__dict__``).
"""

from __future__ import annotations

import ast
from typing import Dict, Iterator, List, Optional, Set

from ..syntax.ast_nodes import bound_names, is_main_check, last_name, literal_string, nodes_below


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def option_dest(call: ast.Call) -> Optional[str]:
    """argparse's dest: ``dest=``, else the first long option, else the first short one (a
    positional argument's name where the call has no option); None where none is a literal."""
    dest_node = _keyword(call, "dest")
    if dest_node is not None:
        return literal_string(dest_node)
    flags: List[str] = [flag for flag in map(literal_string, call.args) if flag]
    chosen = next((flag for flag in flags if flag.startswith("--")), None) or next((flag for flag in flags if flag.startswith("-")), None)
    if chosen is None:
        return flags[0] if flags else None
    return chosen.lstrip("-").replace("-", "_")


def read_option(call: ast.Call, options: Dict[str, object], unknown: List[str], backend_lines: List[int]) -> None:
    """An option's dest and default into ``options`` (``store_true`` options default to False,
    ``store_false`` ones to True); a required option's into ``unknown``, a positional
    argument's nowhere; the lines of a ``--*backend*`` option into ``backend_lines``."""
    flags = [literal_string(argument) for argument in call.args]
    longs = [flag for flag in flags if flag and flag.startswith("--")]
    if any("backend" in flag for flag in longs):
        backend_lines.extend(range(call.lineno, (call.end_lineno or call.lineno) + 1))
    if _keyword(call, "dest") is None and not any(flag and flag.startswith("-") for flag in flags):
        return  # a positional argument: the user gives it
    dest = option_dest(call)
    if dest is None or dest in options or dest in unknown:
        return
    required = _keyword(call, "required")
    if required is not None and not (type(required) is ast.Constant and required.value is False):
        unknown.append(dest)  # the user gives it: it has no default
        return
    action_node = _keyword(call, "action")
    action = literal_string(action_node) if action_node is not None else None
    default = _keyword(call, "default")
    if default is None:
        options[dest] = (action == "store_false") if action in ("store_true", "store_false") else None
        return
    try:
        options[dest] = ast.literal_eval(default)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        unknown.append(dest)


#: What a module does that may give its namespace options its parser does not list.
_OPEN_PARSER = frozenset({"add_subparsers", "parse_known_args", "parse_intermixed_args", "from_yaml", "load_config"})
#: The caller of a module-level call below the ``i``-th statement that may fail on every
#: machine is ``AFTER_FAILURE + str(i)``: it runs only where the project model finds none of
#: the first ``i + 1`` fails (``reached._runs``).
AFTER_FAILURE = "<after a failing line>"
#: How many such statements a module's facts keep.
_MOST = 8


def failing_statements(tree: ast.Module) -> List[list]:
    """``[first, last, end, options]`` of each statement the script runs, in order, that reads
    options its parser does not define: its lines, the last line of what would run after it
    (the module's, or its ``__main__`` block's), and those options, where the module is such a
    script (the project model confirms no other module sets them)."""
    defined = _defined_options(tree)
    if defined is None:
        return []
    # functions it defines or imports by name: the project model reads what the project's set
    local = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))} | {
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    parsing = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and _parses(node)}
    namespace: Optional[str] = None
    found: List[list] = []
    module_end = tree.body[-1].end_lineno if tree.body else 0
    main_ends = {id(inner): block.end_lineno for block in tree.body if isinstance(block, ast.If) and is_main_check(block.test) for inner in block.body}
    for statement in _run_in_order(tree.body):
        if namespace is not None:
            if _hands_away(statement, namespace, local):
                break
            read = _undefined_reads(statement, namespace, defined)
            if read:
                last = statement.end_lineno or statement.lineno
                found.append([statement.lineno, last, main_ends.get(id(statement), module_end), sorted(read)])
                if len(found) == _MOST:
                    break
        bound = _bound_namespace(statement, parsing)
        if bound is not None:
            namespace = bound
        elif namespace is not None and _rebinds(statement, namespace, local):
            namespace = None
    return found


#: Calls that give a namespace attributes: ``setattr(args, "k", v)``, ``parser.set_defaults(k=v)``,
#: ``vars(args).update(d)``.
SETTERS = frozenset({"setattr", "set_defaults", "update"})


def read_setter(call: ast.Call, called: str, stored: Set[str]) -> bool:
    """Adds to ``stored`` the attribute names a setter gives; whether it gives them by a
    computed name (``setattr(args, k, v)``, ``vars(args).update(d)``)."""
    if called == "setattr":
        name = call.args[1] if len(call.args) > 1 else None
        if type(name) is ast.Constant and type(name.value) is str:
            stored.add(name.value)
            return False
        return True
    if called == "set_defaults":
        stored.update(keyword.arg for keyword in call.keywords if keyword.arg)
        return any(keyword.arg is None for keyword in call.keywords)
    return type(call.func) is ast.Attribute and type(call.func.value) is ast.Call and last_name(call.func.value.func) == "vars"


def after_failure(line: int, failing: List[list]) -> str:
    """The caller of a module-level call at ``line``: ``AFTER_FAILURE`` and the index of the
    last statement above it that may fail, where it runs only if that one does not; else ""."""
    below = [index for index, (_, last, end, _) in enumerate(failing) if last < line <= end]
    return f"{AFTER_FAILURE}{below[-1]}" if below else ""


def _defined_options(tree: ast.Module) -> Optional[Set[str]]:
    """The dests of the module's one parser, the defaults it sets and every attribute the
    module assigns; None where the namespace may hold others: also where the parser is handed
    to another function, which may add options (GuoLanqing/ShadowFormer@f721581 train.py:12
    ``options.Options().init(argparse.ArgumentParser(...)).parse_args()``)."""
    parsers, defined = 0, set()
    handed: Set[str] = set()  # the names passed to calls
    parser_names: Set[str] = set()  # the names bound to a parser
    for node in nodes_below(tree):
        if type(node) is ast.Attribute:
            if node.attr == "__dict__":
                return None
            if type(node.ctx) is ast.Store:
                defined.add(node.attr)
            continue
        if type(node) is ast.Assign and type(node.value) is ast.Call and last_name(node.value.func) == "ArgumentParser":
            parser_names.update(target.id for target in node.targets if type(target) is ast.Name)
        if type(node) is not ast.Call:
            continue
        for argument in (*node.args, *(keyword.value for keyword in node.keywords)):
            if type(argument) is ast.Name:
                handed.add(argument.id)
            elif type(argument) is ast.Call and last_name(argument.func) == "ArgumentParser":
                return None
        called = last_name(node.func)
        if called == "ArgumentParser":
            parsers += 1
            if any(keyword.arg in ("parents", "fromfile_prefix_chars") for keyword in node.keywords):
                return None
        elif called in _OPEN_PARSER:
            return None
        elif called in SETTERS:
            if read_setter(node, called, defined):
                return None
        elif called in ("add_argument", "add_option"):
            dest = option_dest(node)
            if dest is None or any(literal_string(argument) is None for argument in node.args) or any(k.arg is None for k in node.keywords):
                return None
            defined.add(dest)
    return defined if parsers == 1 and not parser_names & handed else None


def _parses(function: ast.FunctionDef) -> bool:
    """A function that builds the namespace: it calls ``parse_args`` and returns a value."""
    nodes = list(nodes_below(function))
    return any(type(node) is ast.Call and last_name(node.func) == "parse_args" for node in nodes) and any(
        type(node) is ast.Return and node.value is not None for node in nodes
    )


def _run_in_order(body: List[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements a script runs whatever its input, in order: its own, and those of its
    ``if __name__ == "__main__":`` block."""
    for statement in body:
        if isinstance(statement, ast.If) and is_main_check(statement.test):
            yield from statement.body
        else:
            yield statement


def _bound_namespace(statement: ast.stmt, parsing: Set[str]) -> Optional[str]:
    """The name ``args = parser.parse_args()`` (or ``args = parse_args()``, a local function
    that builds it) binds."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
        return None
    value = statement.value
    if not isinstance(value, ast.Call):
        return None
    if isinstance(value.func, ast.Attribute) and value.func.attr == "parse_args":
        return statement.targets[0].id
    if isinstance(value.func, ast.Name) and value.func.id in parsing:
        return statement.targets[0].id
    return None


def _rebinds(statement: ast.stmt, namespace: str, local: Set[str]) -> bool:
    """Whether the statement binds the name to another value than the namespace a local
    function gives back (``args = get_custom_exp_code(args)``)."""
    if namespace not in bound_names(statement):
        return False
    value = getattr(statement, "value", None)
    return not (
        isinstance(statement, ast.Assign) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
        and value.func.id in local and any(isinstance(arg, ast.Name) and arg.id == namespace for arg in value.args)
    )


#: Callees that read a namespace without setting options: ``print(args)``, ``logger.info(args)``.
_READERS = frozenset({"print", "pprint", "vars", "str", "repr", "format", "info", "debug", "warning", "log", "write"})


def _hands_away(statement: ast.stmt, namespace: str, local: Set[str]) -> bool:
    """Whether the statement passes the namespace itself to a call of a function defined
    elsewhere (which may set an option), or binds another name to it."""
    for node in _executed(statement):
        if type(node) is ast.Call:
            passed = [*node.args, *(keyword.value for keyword in node.keywords)]
            if any(isinstance(value, ast.Name) and value.id == namespace for value in passed):
                if not (isinstance(node.func, ast.Name) and node.func.id in local) and last_name(node.func) not in _READERS:
                    return True
        elif type(node) is ast.Assign and isinstance(node.value, ast.Name) and node.value.id == namespace:
            return True
    return False


def _undefined_reads(statement: ast.stmt, namespace: str, defined: Set[str]) -> Set[str]:
    """The options not defined the statement surely reads as ``namespace.<option>``: in a simple
    statement, or in the test of an ``if`` or ``while`` (not in the branches)."""
    if isinstance(statement, (ast.If, ast.While)):
        root: ast.AST = statement.test
    elif isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
        root = statement
    else:
        return set()
    nodes = list(_executed(root))
    called = {id(node.func) for node in nodes if type(node) is ast.Call}  # ``args._get_kwargs()``: a method
    return {
        node.attr for node in nodes
        if type(node) is ast.Attribute and type(node.ctx) is ast.Load and isinstance(node.value, ast.Name)
        and node.value.id == namespace and node.attr not in defined and not node.attr.startswith("_") and id(node) not in called
    }


def _executed(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes below ``root`` that run with it: not those of a lambda, a nested definition or
    the right of a short-circuit or a conditional expression."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not root:
            continue
        if isinstance(node, ast.BoolOp):
            stack.append(node.values[0])
            continue
        if isinstance(node, ast.IfExp):
            stack.append(node.test)
            continue
        stack.extend(ast.iter_child_nodes(node))
