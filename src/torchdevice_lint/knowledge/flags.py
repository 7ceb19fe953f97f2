"""User flags that choose the GPU by default are not availability checks.

``def totensor(data, cuda=True): ... if cuda: data.cuda()`` and
``parser.add_argument("--cuda", default=True)`` run the CUDA branch on a CPU-only machine unless
the user says otherwise, so such a branch is reported like unguarded code. A flag derived from an
availability check (``args.cuda = not args.no_cuda and torch.cuda.is_available()``) stays a guard.
An opt-out flag parsed in another file (``opt.no_cuda``) is taken as off, argparse's default.
A parameter (or the attribute ``__init__`` copies it to) that every call in the project passes
the same option (``MultiBoxLoss(..., args.cuda)`` with ``--cuda`` defaulting to True) has that
option's default.
"""

from __future__ import annotations

import ast
from typing import Callable, Dict, Optional, Tuple
from weakref import WeakKeyDictionary

from ..syntax.cst_lazy import cst
from ..syntax.ast_nodes import last_name as ast_last_name
from ..syntax.ast_nodes import nodes_below
from ..syntax.ast_parse import Unparsable
from ..syntax.cst_nodes import defined_method, last_name, parameter_names, string_value
from .project_facts import ProjectFacts, compare

AVAILABILITY_WORDS = ("is_available", "device_count")


def mentions_availability(node: cst.CSTNode) -> bool:
    from ..syntax.cst_walk import nodes_of

    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value in AVAILABILITY_WORDS
        for call in nodes_of(node, cst.Call)
    )


_CST_OPERATORS = {
    "GreaterThan": ">", "GreaterThanEqual": ">=", "LessThan": "<", "LessThanEqual": "<=", "Equal": "==", "NotEqual": "!=",
}


def option_test(node: cst.BaseExpression) -> Optional[list]:
    """``[option, len taken, operator, integer]`` for ``len(opt.gpu_ids) > 0``, ``args.gpu >= 0``,
    ``args.cuda > 0`` or a bare ``opt.cuda`` (as ``ast_guards.option_test`` reads ``ast``)."""
    operator = operand = None
    if isinstance(node, cst.Comparison):
        if len(node.comparisons) != 1:
            return None
        target = node.comparisons[0]
        operator = _CST_OPERATORS.get(type(target.operator).__name__)
        comparator, sign = target.comparator, 1
        if isinstance(comparator, cst.UnaryOperation) and isinstance(comparator.operator, cst.Minus):
            comparator, sign = comparator.expression, -1
        if operator is None or not isinstance(comparator, cst.Integer):
            return None
        operand, node = sign * int(comparator.value, 0), node.left
    measured = isinstance(node, cst.Call) and last_name(node.func) == "len" and len(node.args) == 1
    if measured:
        node = node.args[0].value
    return [node.attr.value, measured, operator, operand] if isinstance(node, cst.Attribute) else None


def _opts_out(name: str) -> bool:
    """``no_cuda``, ``disable_cuda``, ``cpu_only``: flags the user sets to leave the GPU, off
    unless given (argparse's ``store_true``)."""
    lowered = name.lower()
    return lowered.startswith(("no_", "disable_")) and ("cuda" in lowered or "gpu" in lowered) or lowered in {
        "cpu", "use_cpu", "cpu_only", "force_cpu"
    }


def _constant(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


class FlagDefaults:
    """Default values of the file's user flags, read lazily: parameters with a boolean
    default, ``add_argument`` options, attributes assigned ``not other_flag``."""

    def __init__(self, module: cst.Module, project: ProjectFacts = ProjectFacts()) -> None:
        self.module = module
        self.project = project
        self._attributes: Optional[Dict[str, Optional[bool]]] = None
        #: (id of the function, parameter) -> default: each condition on it asks again.
        self._parameters: Dict[Tuple[int, str], Optional[bool]] = {}
        #: (id of the function, parameter) -> the default of the option every caller passes.
        self._passed: Dict[Tuple[int, str], Optional[bool]] = {}
        #: ("name" or "attribute", name) -> what its bindings give it; one walk, read lazily.
        self._binding_values: Optional[Dict[Tuple[str, str], object]] = None

    def default(
        self, flag: cst.BaseExpression, function: Optional[cst.FunctionDef], klass: Optional[cst.ClassDef] = None
    ) -> Optional[bool]:
        """The flag's default (a condition on it: its value then), or None when unknown or
        derived from an availability check. Options parsed in other modules, the attributes that
        copy them, one-line predicates that test them and the options every caller passes come
        from the project. ``klass``: the class ``function`` is a method of."""
        if isinstance(flag, cst.Name):
            passed = self._passed_default(flag.value, function, klass)
            return passed if passed is not None else self._parameter_default(flag.value, function)
        if isinstance(flag, (cst.Attribute, cst.Subscript)):
            name = flag.attr.value if isinstance(flag, cst.Attribute) else string_key(flag)
            if name is None:
                return None
            known = self.option_default(name)
            # an option of this file (or one derived here), the project's, or a config's key (``config['cuda']``)
            if known is not None or name in self._attribute_defaults() or isinstance(flag, cst.Subscript):
                return known
            if klass is not None and isinstance(flag.value, cst.Name) and flag.value.value == "self":
                passed = self._copied_parameter_default(name, klass)
                if passed is not None:
                    return passed
            return False if _opts_out(name) else None  # ``opt.no_cuda``: a store_true opt-out
        if isinstance(flag, cst.Call) and not flag.args and isinstance(flag.func, (cst.Name, cst.Attribute)):
            test = self.project.predicates.get(last_name(flag.func) or "")
            return self.project.holds(test) if test is not None else None
        test = option_test(flag) if isinstance(flag, (cst.Comparison, cst.Call)) else None
        if test is None:
            return None
        option, measured, operator, operand = test
        own = None if measured else self._attribute_defaults().get(option)
        if own is not None:  # a boolean option of this file: ``args.cuda > 0`` on a store_true one
            return own if operator is None else compare(operator, int(own), operand)
        return self.project.holds(test)

    def holds_availability(
        self, flag: cst.BaseExpression, function: Optional[cst.FunctionDef], python_tree: Callable[[], ast.Module],
    ) -> bool:
        """Whether every binding of ``flag`` in the module is an availability check or a
        conjunction with one (``self.pin_memory = loader.pin_memory and torch.cuda.is_available()``):
        then ``if flag:`` holds only where CUDA is there. A parameter is never one."""
        if isinstance(flag, cst.Attribute):
            if flag.attr.value in self.project.availability_options:
                return True
            key = ("attribute", flag.attr.value)
        elif isinstance(flag, cst.Name):
            if function is not None and flag.value in parameter_names(function) and not _rebound_first(function, flag.value):
                return turned_off_first(function, flag.value)
            key = ("name", flag.value)
        else:
            return False
        return self._bound_values(python_tree).get(key) == HOLDS_AVAILABILITY

    def constant_name(self, name: str, python_tree: Callable[[], ast.Module]) -> Optional[bool]:
        """The constant every binding in the module gives ``name`` (``use_cuda = True`` then
        ``if use_cuda:``, Tianxiaomo/pytorch-YOLOv4@a65d219 models.py:479), or the default of
        the option every binding copies (``cuda = config['cuda']``); None if any binding is
        something else or a function takes a parameter of that name."""
        value = self._bound_values(python_tree).get(("name", name))
        if isinstance(value, tuple):
            return self.option_default(value[1])
        return value if isinstance(value, bool) else None

    def key_assigned(self, key: str, python_tree: Callable[[], ast.Module]) -> bool:
        """Whether the module sets the key ``key`` of some mapping (BLINK elq/main_dense.py:623
        ``biencoder_params["no_cuda"] = ... not torch.cuda.is_available()``): not a config's."""
        return ("key", key) in self._bound_values(python_tree)

    def option_default(self, name: str) -> Optional[bool]:
        """The default of the option (or config setting) ``name``, as this file reads it."""
        defaults = self._attribute_defaults()
        if name in defaults:
            return defaults[name]
        return self.project.holds([name, False, None, None])

    def _bound_values(self, python_tree: Callable[[], ast.Module]) -> Dict[Tuple[str, str], object]:
        if self._binding_values is None:
            try:
                tree = python_tree()  # CPython's tree of the same source, walked once
            except Unparsable:
                tree = ast.Module(body=[], type_ignores=[])  # nothing known about any name
            self._binding_values = binding_values(tree)
        return self._binding_values

    def _passed_default(self, name: str, function: Optional[cst.FunctionDef], klass: Optional[cst.ClassDef]) -> Optional[bool]:
        """The default of the option every call of ``function`` passes as its parameter ``name``
        (a method's calls skip ``self``; ``__init__``'s are the class's), unless the function
        assigns the parameter again."""
        if function is None or not self.project.arguments:
            return None
        key = (id(function), name)
        if key not in self._passed:
            self._passed[key] = self._read_passed_default(name, function, klass)
        return self._passed[key]

    def _read_passed_default(self, name: str, function: cst.FunctionDef, klass: Optional[cst.ClassDef]) -> Optional[bool]:
        params = function.params
        positional = list(params.posonly_params) + list(params.params)
        method = klass is not None and not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators
        )
        names = [param.name.value for param in positional][1 if method else 0:]
        if name not in names and name not in (param.name.value for param in params.kwonly_params):
            return None
        if any(a.targets[0].target.value == name for a in _assignments(function.body, cst.Name)):
            return None
        initializer = method and function.name.value == "__init__"
        callee = klass.name.value if initializer else function.name.value
        receiver = klass.name.value if method and not initializer else None
        index, accepts = names.index(name) if name in names else None, accepting(function, len(names))
        if initializer and callee not in self.project.arguments and not any(key.startswith(callee + "@") for key in self.project.parameter_calls):
            return self._heirs_passed_default(klass, index, name, accepts)  # never built under its own name
        return self.project.passed_default(callee, index, name, receiver, accepts)

    def _heirs_passed_default(self, klass: cst.ClassDef, index: Optional[int], name: str, accepts) -> Optional[bool]:
        """A base class built only through its subclasses of this file that keep its
        ``__init__`` (ayumiymk/aster.pytorch@be67004 lib/evaluators.py:24-30,129 ``Evaluator(...,
        args.cuda)`` builds ``BaseEvaluator``): the default every call of those passes."""
        heirs = [
            statement.name.value for statement in self.module.body
            if isinstance(statement, cst.ClassDef) and any(last_name(base.value) == klass.name.value for base in statement.bases)
            and defined_method(statement, "__init__") is None
        ]
        defaults = {self.project.passed_default(heir, index, name, None, accepts) for heir in heirs}
        return defaults.pop() if heirs and len(defaults) == 1 else None

    def _copied_parameter_default(self, attribute: str, klass: cst.ClassDef) -> Optional[bool]:
        """``self.use_gpu = use_gpu`` in ``__init__``: the default every call of the class passes."""
        init = defined_method(klass, "__init__")
        if init is None:
            return None
        copied = [
            a.value.value for a in _assignments(init.body, cst.Attribute)
            if a.targets[0].target.attr.value == attribute and isinstance(a.targets[0].target.value, cst.Name)
            and a.targets[0].target.value.value == "self" and isinstance(a.value, cst.Name)
        ]
        return self._passed_default(copied[0], init, klass) if len(copied) == 1 else None

    def _parameter_default(self, name: str, function: Optional[cst.FunctionDef]) -> Optional[bool]:
        if function is None:
            return None
        key = (id(function), name)
        if key not in self._parameters:
            self._parameters[key] = self._read_parameter_default(name, function)
        return self._parameters[key]

    def _read_parameter_default(self, name: str, function: cst.FunctionDef) -> Optional[bool]:
        params = function.params
        for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            if param.name.value == name:
                value = _constant(param.default)
                if value is None:
                    return None
                reassigned = [a for a in _assignments(function.body, cst.Name) if a.targets[0].target.value == name]
                return None if any(mentions_availability(a.value) for a in reassigned) else value
        return None

    def _attribute_defaults(self) -> Dict[str, Optional[bool]]:
        if self._attributes is None:
            found: Dict[str, Optional[bool]] = {}
            from ..syntax.cst_walk import nodes_of

            nodes = nodes_of(self.module, cst.Call, cst.Assign)  # one walk of the module for both
            for call in (n for n in nodes if type(n) is cst.Call and isinstance(n.func, cst.Attribute) and n.func.attr.value == "add_argument"):
                dest, default = _argparse_flag(call)
                if dest is not None and default is not None:
                    found.setdefault(dest, default)
            derived = set()
            for assign in (n for n in nodes if type(n) is cst.Assign and _single_target(n, cst.Attribute)):
                name = assign.targets[0].target.attr.value
                if mentions_availability(assign.value):
                    derived.add(name)
                elif isinstance(assign.value, cst.UnaryOperation) and isinstance(assign.value.operator, cst.Not):
                    negated = found.get(last_name(assign.value.expression) or "")
                    if negated is not None:
                        found[name] = not negated
            for name in derived:
                found[name] = None
            self._attributes = found
        return self._attributes


def accepting(function: cst.FunctionDef, positional: int) -> Callable[..., bool]:
    """Whether ``function`` (``positional``: how many arguments a call may pass by position,
    ``self`` aside) takes a call passing that many positional arguments (-1: unknown), those
    keywords and maybe ``**kwargs``: not too many, none it does not name, and every parameter
    without a default given (``net.train()`` is no call of ``def train(loader, net, cuda=True)``)."""
    params = function.params
    named = {p.name.value for p in list(params.params) + list(params.kwonly_params)}  # not positional-only ones
    many = isinstance(params.star_arg, cst.Param)
    anything = params.star_kwarg is not None
    ordered = list(params.posonly_params) + list(params.params)
    required = [(index, p.name.value) for index, p in enumerate(ordered[len(ordered) - positional:]) if p.default is None]
    required_keywords = [p.name.value for p in params.kwonly_params if p.default is None]

    def accepts(count: int, keywords: list, unpacked: bool = False) -> bool:
        if not (many or count <= positional) or not (anything or all(keyword in named for keyword in keywords)):
            return False
        return count < 0 or unpacked or (
            all(index < count or name in keywords for index, name in required) and all(name in keywords for name in required_keywords)
        )

    return accepts


def _implies_availability(value: ast.expr) -> bool:
    """``torch.cuda.is_available()``, ``torch.cuda.device_count()``, or ``x and <one of them>``."""
    if isinstance(value, ast.Call):
        return ast_last_name(value.func) in AVAILABILITY_WORDS
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
        return any(_implies_availability(operand) for operand in value.values)
    return False


#: Nodes whose ``target`` binds a name other than by ``=``.
_OTHER_BINDINGS = (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.NamedExpr, ast.comprehension)


def _rebound_first(function: cst.FunctionDef, name: str) -> bool:
    """Whether the function's first statement (after its docstring) binds the parameter ``name``
    again, so that what a caller passes is read only through it (facebookresearch/ijepa@52c1ae9
    src/utils/logging.py:13 ``log_timings = log_timings and torch.cuda.is_available()``)."""
    statements = _statements(function)
    first = statements[0].body[0] if statements and isinstance(statements[0], cst.SimpleStatementLine) else None
    return isinstance(first, cst.Assign) and len(first.targets) == 1 and isinstance(first.targets[0].target, cst.Name) and (
        first.targets[0].target.value == name
    )


def turned_off_first(function: cst.CSTNode, name: str) -> bool:
    """Whether the function first turns the parameter ``name`` off where CUDA is missing
    (yuqinie98/PatchTST@204c21e PatchTST_self_supervised/src/basics.py:54 ``if not
    torch.cuda.is_available(): use_cuda = False``, src/learner.py:385 ``device = "cpu"``): past
    that, it is true, or CUDA, only where CUDA is."""
    statements = _statements(function) if isinstance(function, cst.FunctionDef) else []
    first = statements[0] if statements else None
    if not (isinstance(first, cst.If) and first.orelse is None and isinstance(first.test, cst.UnaryOperation)):
        return False
    asked = first.test.expression
    if not (isinstance(first.test.operator, cst.Not) and isinstance(asked, cst.Call) and last_name(asked.func) == "is_available"):
        return False
    if not (isinstance(asked.func, cst.Attribute) and last_name(asked.func.value) == "cuda"):
        return False
    body = [small for line in first.body.body if isinstance(line, cst.SimpleStatementLine) for small in line.body]
    return len(body) == len(first.body.body) and bool(body) and all(
        isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value == name
        and ((isinstance(small.value, cst.Name) and small.value.value in ("False", "None")) or string_value(small.value) == "cpu")
        for small in body
    )


def _statements(function: cst.FunctionDef) -> list:
    """The function's statements after its docstring."""
    statements = list(function.body.body) if isinstance(function.body, cst.IndentedBlock) else []
    if statements and isinstance(statements[0], cst.SimpleStatementLine) and isinstance(statements[0].body[0], cst.Expr):
        statements = statements[1:]
    return statements


#: What every binding of a name in a module gives it: an availability check (or a conjunction
#: with one), one constant (True/False), a copy of one option (``(COPIES, name)``), or something
#: else (None).
HOLDS_AVAILABILITY = "availability"
COPIES = "copies"


def copied_option(value: ast.expr) -> Optional[str]:
    """``args.cuda`` and ``config['cuda']`` -> ``cuda``: the option a value reads."""
    if isinstance(value, ast.Attribute):
        return value.attr
    if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Constant) and isinstance(value.slice.value, str):
        return value.slice.value
    return None


def string_key(subscript: cst.Subscript) -> Optional[str]:
    """``config['cuda']`` -> ``cuda``."""
    index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
    return string_value(index.value) if isinstance(index, cst.Index) else None


#: ``binding_values`` of each tree still in use: the first stage and the LibCST pass ask of the same one.
_VALUES: "WeakKeyDictionary[ast.Module, Dict[Tuple[str, str], object]]" = WeakKeyDictionary()


def binding_values(tree: ast.Module) -> Dict[Tuple[str, str], object]:
    """``_binding_values(tree)``, read once per tree."""
    values = _VALUES.get(tree)
    if values is None:
        values = _VALUES[tree] = _binding_values(tree)
    return values


def _binding_values(tree: ast.Module) -> Dict[Tuple[str, str], object]:
    """For each name, attribute name and string key the module binds: HOLDS_AVAILABILITY when every binding
    is one ``=`` of a value implying availability, True or False when every binding is one ``=``
    of that constant, None otherwise (any other binding, a tuple target, an import, a ``def``, a
    ``with ... as``, or a function parameter of that name). ``("parameter", name)`` is there
    for every parameter's name. One walk of CPython's tree."""
    verdicts: Dict[Tuple[str, str], object] = {}

    def bound(target: ast.expr, value: object) -> None:
        if isinstance(target, ast.Attribute):
            key = ("attribute", target.attr)
        elif isinstance(target, ast.Subscript):
            option = copied_option(target)
            if option is None:
                return
            key = ("key", option)
        elif isinstance(target, ast.Name):
            key = ("name", target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                bound(element, None)
            return
        elif isinstance(target, ast.Starred):
            bound(target.value, None)
            return
        else:
            return
        earlier = verdicts.get(key, value)
        verdicts[key] = value if earlier == value else None

    parameters = set()
    for node in nodes_below(tree):
        kind = type(node)
        if kind is ast.Assign:
            value = None
            if len(node.targets) == 1:
                constant = node.value.value if type(node.value) is ast.Constant else None
                copied = copied_option(node.value)
                value = HOLDS_AVAILABILITY if _implies_availability(node.value) else (
                    constant if isinstance(constant, bool) else (COPIES, copied) if copied else None
                )
            for target in node.targets:
                bound(target, value)
        elif kind in _OTHER_BINDINGS:
            bound(node.target, None)
        elif kind is ast.withitem and node.optional_vars is not None:
            bound(node.optional_vars, None)
        elif kind in (ast.Import, ast.ImportFrom):
            for alias in node.names:
                verdicts[("name", alias.asname or alias.name.split(".")[0])] = None
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef) or kind is ast.ExceptHandler and node.name:
            verdicts[("name", node.name)] = None
        elif kind is ast.arg:
            parameters.add(node.arg)
    for name in parameters:  # a parameter never holds a check, and its value is the caller's
        verdicts[("parameter", name)] = True
        key = ("name", name)
        if verdicts.get(key) is not HOLDS_AVAILABILITY:
            verdicts[key] = None
    return verdicts


def _assignments(root: cst.CSTNode, target_type: type) -> list:
    """``x = ...`` statements with one target of ``target_type`` in ``root``'s tree, in order
    (``matchers.findall`` would rebuild the whole tree: about a LibCST parse for a module)."""
    from ..syntax.cst_walk import nodes_of

    return [a for a in nodes_of(root, cst.Assign) if _single_target(a, target_type)]


def _single_target(assign: cst.Assign, target_type: type) -> bool:
    return len(assign.targets) == 1 and type(assign.targets[0].target) is target_type


def _argparse_flag(call: cst.Call):
    """(dest, default) of ``add_argument("--use-cuda", default=True)`` or of a
    ``store_true``/``store_false`` option; (None, None) when not a boolean option."""
    options = [string_value(a.value) for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    # argparse's dest: the first long option, else the first short one (`-no_cuda`)
    flags = [o for o in options if o and o.startswith("--")] or [o for o in options if o and o.startswith("-")]
    dest = string_value(keywords["dest"]) if "dest" in keywords else (
        flags[0].lstrip("-").replace("-", "_") if flags else None
    )
    default = _constant(keywords.get("default"))
    action = string_value(keywords["action"]) if "action" in keywords else None
    if default is None and action in ("store_true", "store_false"):
        default = action == "store_false"
    return dest, default
