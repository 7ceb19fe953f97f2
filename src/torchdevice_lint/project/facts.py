"""What one module tells the rest of its project, read from CPython's tree in one walk.

A line is judged with what the whole project says: ``if self.use_gpu:`` is no availability check
when ``--gpu_ids`` defaults to ``"0"`` in ``options/base_options.py`` and ``use_gpu`` only reads
it. Each module contributes the command-line options it defines with their defaults, the
attributes and one-line predicates that copy or test an option, the files it saves from
``.cpu()`` values, and what it builds or calls of extension kernels (``kernels.py``). The facts are plain data, cached by the module's content hash.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..syntax.ast_nodes import last_name, literal_string
from .calls import CallFacts, origins, read_node
from .kernels import KernelReader
from .shipped import checkpoint_literals

#: A constant an option defaults to (what ``ast.literal_eval`` gives: bool, int, str, None...).
Default = Any


@dataclass
class ModuleFacts:
    #: Option dest (``parser.add_argument("--gpu_ids", default="0")`` -> ``gpu_ids``) -> its default.
    options: Dict[str, Default] = field(default_factory=dict)
    #: Options whose default is no constant.
    unknown_options: List[str] = field(default_factory=list)
    #: A name or attribute that copies an option (``self.use_gpu = opt.cuda``) -> that option's last name.
    copies: Dict[str, str] = field(default_factory=dict)
    #: A function or method whose one statement returns a test of an option
    #: (``def use_gpu(self): return len(self.opt.gpu_ids) > 0``) -> that test: ``[option, len
    #: taken, comparison operator or None, the integer compared with or None]``.
    predicates: Dict[str, list] = field(default_factory=dict)
    #: The names of the files it saves ``.cpu()`` values to (``torch.save(x.cpu(), "feat.pth")``).
    cpu_saved_files: List[str] = field(default_factory=list)
    #: What it says of extension kernels (``kernels.KernelReader.facts``): builds, imports, the
    #: scopes that call into an imported module, whether it tests for the CPU.
    kernels: dict = field(default_factory=dict)
    #: Who it calls with which device arguments, and what it defines with a CUDA device default.
    calls: CallFacts = field(default_factory=CallFacts)
    #: Checkpoint file names written as literals in a module that loads (``'../data/pnet.pt'``).
    checkpoint_files: List[str] = field(default_factory=list)


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CONDITIONS = (ast.If, ast.IfExp)


def module_facts(tree: ast.Module) -> ModuleFacts:
    """The facts of one module's tree, in one walk (each top-level piece with its scope, for
    the kernels' facts)."""
    facts = ModuleFacts()
    kernels = KernelReader(tree)
    known = origins(tree)
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and not any(last_name(base) == "Function" for base in statement.bases):
            read_node(statement, facts.calls, known)  # kernels.roots() walks its pieces, not the class node
    for root, scope in kernels.roots():
        for node in ast.walk(root):
            kind = type(node)  # CPython's parser makes no subclasses: compared exactly, as fast as it gets
            if kind is ast.Call:
                _read_call(node, facts)
                kernels.read_call(node, scope)
            elif kind is ast.Assign:
                if len(node.targets) == 1:
                    _read_copy(node.targets[0], node.value, facts)
            elif kind in _FUNCTIONS:
                _read_predicate(node, facts)
            elif kind in _CONDITIONS:
                kernels.read_test(node.test)
            read_node(node, facts.calls, known)
            checkpoint_literals(node, facts.checkpoint_files)
    facts.kernels = kernels.facts()
    if not any(name.partition("@")[0] == "load" for name in facts.calls.calls):
        facts.checkpoint_files.clear()
    return facts


def _read_call(call: ast.Call, facts: ModuleFacts) -> None:
    name = last_name(call.func)
    if name == "save" and len(call.args) > 1 and _moves_to_cpu(call.args[0]):
        facts.cpu_saved_files.extend(file_names(call.args[1]))
    elif name == "add_argument":
        _read_option(call, facts)


#: A string that names a file: ``"model.ckpt"``, ``'{}.pkl'`` (placeholders written ``{}``).
_FILE_NAME = re.compile(r"^[\w.\-/{}]*\.\w+$")


def file_names(path: ast.expr) -> List[str]:
    """The file names a path expression writes (``os.path.join(d, "feat.pth")`` -> ``feat.pth``,
    ``f"{epoch}.pkl"`` -> ``{}.pkl``), as ``rules/saved_files.path_keys`` keys them."""
    names = []
    for node in ast.walk(path):
        if isinstance(node, ast.JoinedStr):
            value = "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = re.sub(r"\{[^{}]*\}", "{}", node.value)
        else:
            continue
        if _FILE_NAME.match(value):
            names.append(value.rsplit("/", 1)[-1])
    return names


def _moves_to_cpu(value: ast.expr) -> bool:
    return any(isinstance(node, ast.Call) and last_name(node.func) == "cpu" for node in ast.walk(value))


def _keyword(call: ast.Call, name: str) -> Optional[ast.expr]:
    return next((keyword.value for keyword in call.keywords if keyword.arg == name), None)


def _read_option(call: ast.Call, facts: ModuleFacts) -> None:
    """argparse's dest (``dest=``, else the first long option, else the first short one) and
    default (``store_true`` options default to False, ``store_false`` ones to True)."""
    flags = [literal_string(argument) for argument in call.args]
    longs = [flag for flag in flags if flag and flag.startswith("--")]
    shorts = [flag for flag in flags if flag and flag.startswith("-")]
    dest_node = _keyword(call, "dest")
    dest = literal_string(dest_node) if dest_node is not None else (
        (longs or shorts)[0].lstrip("-").replace("-", "_") if longs or shorts else None
    )
    if dest is None or dest in facts.options or dest in facts.unknown_options:
        return
    action_node = _keyword(call, "action")
    action = literal_string(action_node) if action_node is not None else None
    default = _keyword(call, "default")
    if default is None:
        facts.options[dest] = (action == "store_false") if action in ("store_true", "store_false") else None
        return
    try:
        facts.options[dest] = ast.literal_eval(default)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        facts.unknown_options.append(dest)


def _read_copy(target: ast.expr, value: ast.expr, facts: ModuleFacts) -> None:
    """``self.use_gpu = opt.use_gpu`` and ``cuda = args.cuda``: the target copies the option."""
    copied = value.attr if isinstance(value, ast.Attribute) else None
    name = last_name(target)
    if copied and name and copied != name:
        facts.copies.setdefault(name, copied)


def _read_predicate(function: ast.AST, facts: ModuleFacts) -> None:
    body = [statement for statement in function.body if not _is_docstring(statement)]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        test = option_test(body[0].value)
        if test is not None:
            facts.predicates.setdefault(function.name, test)


_OPERATORS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}


def option_test(test: ast.expr) -> Optional[list]:
    """``[option, len taken, operator, integer]`` for ``len(self.opt.gpu_ids) > 0``,
    ``opt.gpu >= 0`` or a bare ``self.args.cuda``; None for anything else."""
    operator = operand = None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        operator = _OPERATORS.get(type(test.ops[0]))
        comparator = test.comparators[0]
        if isinstance(comparator, ast.UnaryOp) and isinstance(comparator.op, ast.USub):
            comparator = comparator.operand
            sign = -1
        else:
            sign = 1
        if operator is None or not isinstance(comparator, ast.Constant) or type(comparator.value) is not int:
            return None
        operand, test = sign * comparator.value, test.left
    measured = isinstance(test, ast.Call) and last_name(test.func) == "len" and len(test.args) == 1
    if measured:
        test = test.args[0]
    return [test.attr, measured, operator, operand] if isinstance(test, ast.Attribute) else None


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
