"""Conditions that a device option's default decides.

``parser.add_argument("-visible_gpus", default="-1")`` then ``device = "cpu" if
args.visible_gpus == "-1" else "cuda"``: with the default the program runs on the CPU, and the
other branch runs only where the user names GPUs, like code under a ``--cuda`` flag off by
default. A comparison of such an option (or of a name one assignment derives from it: ``device_id
= 0 if device == "cuda" else -1`` then ``device_id >= 0``) with a literal therefore guards the
branch the default does not take. Only options about devices count (their name says gpu, cuda or
device) and only defaults that mean "no GPU" (``-1``, ``"cpu"``, ``None``, no GPUs counted or
listed): an option choosing a dataset is no request for CUDA, and a default naming GPU 0 already
picks CUDA. An option some module assigns (a launcher's rank, a parsed list), a name bound more
than once and a parameter stay unknown; ``parameter_guards`` reads parameters every call passes
such an option.
"""

from __future__ import annotations

import ast
import operator as operators
from functools import lru_cache
from typing import Callable, Dict, List, Optional, Tuple, Union

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import parameter_names
from .cst_guards import NEGATIVE, NEUTRAL, POSITIVE
from .project_facts import ProjectFacts

#: A value known at the defaults: ``(value, what decided it)``; None: unknown.
Known = Optional[Tuple[object, int]]
#: What decided a known value, the strongest of its parts: literals only, an option nothing
#: documented turns on (``ProjectFacts.quiet_options``), a device option's default, the test's
#: form whatever the values (membership in an empty literal).
_LITERAL, _QUIET, _DEVICE, _ALWAYS = 0, 1, 2, 3

#: ``value_checks.assigned_values`` of a scope, in its functions too where asked (the file's
#: context keeps one per scope).
Assigned = Callable[[Union["cst.FunctionDef", "cst.Module"], bool], Dict[str, List[Optional["cst.BaseExpression"]]]]

_OPERATORS = {
    "Equal": operators.eq, "NotEqual": operators.ne, "LessThan": operators.lt, "LessThanEqual": operators.le,
    "GreaterThan": operators.gt, "GreaterThanEqual": operators.ge, "Is": operators.is_, "IsNot": operators.is_not,
    "In": lambda left, right: left in right, "NotIn": lambda left, right: left not in right,
}


@lru_cache(maxsize=1)
def _literal_types() -> tuple:
    """The nodes a literal may be (read when asked: the project model imports this module
    without LibCST)."""
    return cst.SimpleString, cst.Integer, cst.Float, cst.UnaryOperation, cst.Tuple, cst.List, cst.ConcatenatedString


#: How many assignments a derived name may be followed through (``device`` -> ``device_id``).
_DEPTH = 4


def about_devices(option: str) -> bool:
    """``visible_gpus``, ``gpu_ids``, ``cuda_device``, ``device``: an option that picks devices."""
    lowered = option.lower()
    return any(word in lowered for word in ("gpu", "cuda", "device"))


#: Options a distributed launcher sets for each worker (-1 where the script runs alone), and
#: those a distributed run is asked for with (mmcv's ``--launcher none``, ``--distributed``).
LAUNCHER_OPTIONS = frozenset({"local_rank", "launcher", "distributed", "dist", "ddp", "use_ddp", "multiprocessing_distributed"})


def _leaves(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    """The operands of a test's ``not``, ``and``, ``or`` and comparisons."""
    if isinstance(test, cst.UnaryOperation):
        return _leaves(test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _leaves(test.left) + _leaves(test.right)
    if isinstance(test, cst.Comparison):
        return [test.left, *(comparison.comparator for comparison in test.comparisons)]
    return [test]


def _switched(test: cst.BaseExpression) -> bool:
    """Whether a test reads a name the code sets (not only literals: ``while True`` is a loop)."""
    return any(isinstance(leaf, cst.Name) and leaf.value not in ("True", "False", "None") for leaf in _leaves(test))


def means_no_gpu(option: str, default: object) -> bool:
    """Whether an option's default leaves the GPU unused: ``-1`` or another negative index
    (``-d -2``, "GPU if available", picks none itself), ``"-1"``, ``"cpu"``, ``None``,
    ``False``, an empty list, 0 for an option that counts GPUs (``num_gpus``), ``""`` for one
    that lists them (``gpu_ids``); ``"none"`` or ``"no"`` for a launcher option (no launcher)."""
    if default is None or isinstance(default, bool):
        return not default
    if isinstance(default, int):
        lowered = option.lower()
        counts = lowered.startswith(("n_", "num", "ngpu", "count")) or lowered.endswith(("gpus", "devices"))
        return default < 0 or (default == 0 and counts)
    if isinstance(default, str) and option in LAUNCHER_OPTIONS:  # mmcv's ``--launcher none``, mammoth's ``--distributed no``
        return default.strip().lower() in ("-1", "", "none", "no")
    if isinstance(default, str):  # ``--device ""`` often asks for the best device there is
        named_gpus = "gpu" in option.lower() or "cuda" in option.lower()
        return default.strip().lower() in (("-1", "cpu", "", "none") if named_gpus else ("-1", "cpu"))
    return isinstance(default, (list, tuple)) and not default


class OptionValues:
    """The file's conditions on device options, read with the project's option defaults."""

    def __init__(self, module: cst.Module, project: ProjectFacts, assigned: Assigned) -> None:
        self.module = module
        self.project = project
        self.assigned = assigned

    def sign(self, test: cst.BaseExpression, scope: Optional[cst.FunctionDef]) -> int:
        """NEGATIVE where ``test`` is true with the defaults and a device option off by default
        decides it (the branch it skips needs the user's GPUs), or a switch the code sets once
        (``load_model = False`` then ``if load_model is True:``, cwmok/LapIRN@c17fb75
        Code/Train_LapIRN_diff.py:101-102: the branch never runs), POSITIVE where it is false
        (also where an option nothing documented turns on decides it: ``if args.resume:``),
        NEUTRAL otherwise. ``scope``: the enclosing function (None: module level)."""
        if not isinstance(test, (cst.Comparison, cst.Name, cst.BooleanOperation, cst.Attribute, cst.UnaryOperation, cst.Call)):
            return NEUTRAL
        known = self._value(test, scope if scope is not None else self.module, _DEPTH)
        if known is None or not (known[1] or _switched(test)):
            return NEUTRAL
        if known[1] == _QUIET and known[0]:
            return NEUTRAL  # what an option nothing turns on skips may be the program's run (``if not args.out: return``)
        return NEGATIVE if known[0] else POSITIVE

    def _value(self, node: cst.BaseExpression, scope: Union[cst.FunctionDef, cst.Module], depth: int) -> Known:
        if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
            inner = self._value(node.expression, scope, depth)
            return None if inner is None else (not inner[0], inner[1])
        if isinstance(node, _literal_types()):
            return self._literal(node)
        if isinstance(node, cst.Name):
            return self._name(node.value, scope, depth)
        if isinstance(node, cst.Attribute):
            return self._option(node.attr.value, node.value)
        if isinstance(node, cst.Call):
            return self._key_read(node)
        if isinstance(node, cst.IfExp):
            test = self._value(node.test, scope, depth)
            if test is None:
                return None
            arm = self._value(node.body if test[0] else node.orelse, scope, depth)
            return None if arm is None else (arm[0], max(test[1], arm[1]))
        if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
            return self._compared(node, scope, depth)
        if isinstance(node, cst.BooleanOperation):
            return self._combined(node, scope, depth)
        return None

    def _compared(self, node: cst.Comparison, scope: Union[cst.FunctionDef, cst.Module], depth: int) -> Known:
        operator = type(node.comparisons[0].operator).__name__
        comparator = node.comparisons[0].comparator
        if operator in ("In", "NotIn") and isinstance(comparator, (cst.List, cst.Tuple, cst.Set, cst.Dict)) and not comparator.elements:
            return operator == "NotIn", _ALWAYS  # ``if self._cur_task in []:``, code switched off (G-U-N/PyCIL@87cc411 models/pa2s.py:70)
        if operator in ("In", "NotIn") and isinstance(comparator, (cst.Name, cst.Attribute)) and self._quiet_key(node.left):
            return operator == "NotIn", _QUIET  # ``"base_weight" in self.args``, a key nothing sets
        compare = _OPERATORS.get(operator)
        left = self._value(node.left, scope, depth)
        right = self._value(node.comparisons[0].comparator, scope, depth) if left is not None else None
        if compare is None or right is None:
            return None
        try:
            return bool(compare(left[0], right[0])), max(left[1], right[1])
        except TypeError:
            return None

    def _combined(self, node: cst.BooleanOperation, scope: Union[cst.FunctionDef, cst.Module], depth: int) -> Known:
        """``a and b`` is false when one side is known false (``or``: true when one is true)."""
        deciding = not isinstance(node.operator, cst.And)
        sides = [self._value(side, scope, depth) for side in (node.left, node.right)]
        for side in sides:
            if side is not None and bool(side[0]) is deciding:
                return deciding, side[1]
        if all(side is not None for side in sides):
            return (not deciding), max(sides[0][1], sides[1][1])
        return None

    def _literal(self, node: cst.BaseExpression) -> Known:
        try:
            return ast.literal_eval(self.module.code_for_node(node).strip()), _LITERAL
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None

    def _name(self, name: str, scope: Union[cst.FunctionDef, cst.Module], depth: int) -> Known:
        """A constant, or a name bound by one assignment in ``scope`` (a parameter is unknown)."""
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name], _LITERAL
        if depth == 0 or isinstance(scope, cst.FunctionDef) and name in parameter_names(scope):
            return None
        values = self.assigned(scope).get(name, ())
        if not values and isinstance(scope, cst.FunctionDef):  # a global the function reads (Transolver's ``eval = args.eval``)
            if len(self.assigned(self.module, True).get(name, ())) != 1:  # one ``global`` rebinding is one more
                return None
            scope, values = self.module, self.assigned(self.module).get(name, ())
        if len(values) != 1 or values[0] is None:
            return None
        return self._value(values[0], scope, depth - 1)

    def _key_read(self, call: cst.Call) -> Known:
        """``config.get("load")`` (or with an off default) of a key nothing sets: its default."""
        if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "get" and 1 <= len(call.args) <= 2):
            return None
        if any(argument.keyword is not None or argument.star for argument in call.args) or not self._quiet_key(call.args[0].value):
            return None
        default = self._literal(call.args[1].value) if len(call.args) == 2 else (None, _LITERAL)
        return None if default is None else (default[0], _QUIET)

    def _quiet_key(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.SimpleString) and node.evaluated_value in self.project.quiet_keys

    def _option(self, name: str, owner: cst.BaseExpression) -> Known:
        """The default of the device option ``name`` (or of the one it copies), when it means no
        GPU and no module of the project assigns it (``ProjectFacts.rebound_options``); of
        ``--local_rank`` too where no launcher of the project would set it; of any option nothing
        documented turns on (``ProjectFacts.quiet_options``), read from a namespace (``args.eval``,
        ``self.opt.resume``; not ``cfg.model.cuda``, a config's own key)."""
        if name in self.project.quiet_options and _namespace(owner):
            return self.project.options[name], _QUIET
        option = name if name in self.project.options else self.project.copies.get(name)
        if option is None or option not in self.project.options:
            return None
        if not (about_devices(option) or option in LAUNCHER_OPTIONS and self.project.unlaunched):
            return None
        default = self.project.options[option]
        if not means_no_gpu(option, default) or option in self.project.rebound_options:
            return None
        return default, _DEVICE


def _namespace(owner: cst.BaseExpression) -> bool:
    """``args`` or ``self.opt``: what holds a parser's options, not a config's nested section."""
    if isinstance(owner, cst.Attribute):
        return isinstance(owner.value, cst.Name) and owner.value.value in ("self", "cls")
    return isinstance(owner, cst.Name) and owner.value not in ("self", "cls")
