"""Branches on a parameter that no call in the project takes.

``class Model: def __init__(self, local_rank=-1): ... if local_rank != -1: DDP(...)`` with every
``Model()`` in the project leaving ``local_rank`` out runs the branch only where a user edits a
call: like code under a flag off by default, it is one the user must ask for. So is
``if use_gpu:`` where every call passes ``use_gpu=opt.use_gpu`` and ``--use_gpu`` is a
``store_true`` option. A function nobody calls, or one a call passes anything else (a value that
takes the branch, a name not known to be off, ``*args``/``**kwargs``: a launcher such as torchrun
may set ``args.local_rank``), keeps its branch.
"""

from __future__ import annotations

import ast
import operator as operators
from typing import Callable, Dict, List, Optional, Tuple

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import defined_method
from .flags import _assignments, accepting
from .option_values import about_devices, means_no_gpu
from .project_facts import ProjectFacts

#: Whether the branch is taken when the tested parameter holds a value (None: cannot tell).
Decision = Callable[[object], Optional[bool]]

_OPERATORS = {
    "Equal": operators.eq, "NotEqual": operators.ne, "LessThan": operators.lt, "LessThanEqual": operators.le,
    "GreaterThan": operators.gt, "GreaterThanEqual": operators.ge, "Is": operators.is_, "IsNot": operators.is_not,
}


class ParameterGuards:
    """The file's conditions on parameters, judged with the calls the project makes
    (``ProjectFacts.parameter_calls``); ``stem`` names the file's module as calls import it."""

    def __init__(self, module: cst.Module, project: ProjectFacts, stem: str) -> None:
        self.module = module
        self.project = project
        self.stem = stem
        #: (id of the function, parameter) -> the values calls give it, None where unknown.
        self._values: Dict[Tuple[int, str], Optional[List[object]]] = {}
        #: (id of a class or block, target type) -> its ``_assignments`` (each tree walked once).
        self._assigned: Dict[Tuple[int, type], list] = {}

    def never_taken(self, test: cst.BaseExpression, function: Optional[cst.FunctionDef], klass: Optional[cst.ClassDef]) -> bool:
        """Whether ``test`` (on a parameter of ``function``, or on ``self.x`` that ``__init__``
        copies one to) is false with its default and with every value the project's calls pass."""
        return self._decided_alike(test, function, klass, False)

    def always_taken(self, test: cst.BaseExpression, function: Optional[cst.FunctionDef], klass: Optional[cst.ClassDef]) -> bool:
        """Whether ``test`` is true with every value the project's calls pass (and the default):
        ``if load_to_cpu:`` where every call passes a ``--cpu`` option on by default leaves the
        ``else:`` to a call the project does not make (biubug6/Pytorch_Retinaface convert_to_onnx.py)."""
        return self._decided_alike(test, function, klass, True)

    def _decided_alike(self, test: cst.BaseExpression, function: Optional[cst.FunctionDef], klass: Optional[cst.ClassDef], taken: bool) -> bool:
        if function is None or not self._called(function.name.value, "__init__", *((klass.name.value,) if klass is not None else ())):
            return False  # no call of the project can reach it: no value is known
        tested = self._tested(test)
        if tested is None:
            return False
        subject, decide = tested
        owner: Optional[cst.FunctionDef] = function
        if isinstance(subject, cst.Attribute):
            if klass is None or not self._called(klass.name.value, "__init__"):
                return False  # nothing the project calls could pass it: no need to read the class
            owner, parameter = self._copied_parameter(subject, klass)
        else:
            parameter = subject.value
            if not self._called(function.name.value, *((klass.name.value,) if klass is not None else ())):
                return False
        if owner is None or parameter is None:
            return False
        key = (id(owner), parameter)
        if key not in self._values:
            self._values[key] = self._passed_values(parameter, owner, klass)
        values = self._values[key]
        return bool(values) and all(decide(value) is taken for value in values)

    def _called(self, *callees: str) -> bool:
        """Whether the project calls any of these names as this module's (what ``_passed_values``
        reads: without a call, no value is known)."""
        return any(f"{callee}@{self.stem}" in self.project.parameter_calls for callee in callees)

    def _assignments(self, root: cst.CSTNode, target_type: type) -> list:
        key = (id(root), target_type)
        found = self._assigned.get(key)
        if found is None:
            found = self._assigned[key] = _assignments(root, target_type)
        return found

    def _copied_parameter(self, attribute: cst.Attribute, klass: cst.ClassDef) -> Tuple[Optional[cst.FunctionDef], Optional[str]]:
        """``(__init__, parameter)`` where ``self.x = parameter`` in ``__init__`` is the class's only
        binding of ``self.x``; ``(None, None)`` otherwise."""
        init = defined_method(klass, "__init__")
        bindings = [
            a for a in self._assignments(klass, cst.Attribute)
            if a.targets[0].target.attr.value == attribute.attr.value
            and isinstance(a.targets[0].target.value, cst.Name) and a.targets[0].target.value.value == "self"
        ]
        if init is None or len(bindings) != 1 or not isinstance(bindings[0].value, cst.Name):
            return None, None
        if not any(bindings[0] is a for a in self._assignments(init.body, cst.Attribute)):
            return None, None
        return init, bindings[0].value.value

    def _tested(self, test: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, Decision]]:
        """The name (or ``self.x``) a condition tests and how its value decides the branch."""
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            inner = self._tested(test.expression)
            if inner is None:
                return None
            subject, decide = inner
            return subject, lambda value: None if decide(value) is None else not decide(value)
        if _subject(test):
            return test, lambda value: bool(value)
        if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
            return None
        compare = _OPERATORS.get(type(test.comparisons[0].operator).__name__)
        left, right = test.left, test.comparisons[0].comparator
        flipped = not (_subject(left) or _measured(left) is not None)
        subject, other = (right, left) if flipped else (left, right)
        literal = self._literal(other)
        measured = _measured(subject)
        if measured is not None:  # ``len(gpu_ids) > 0``: the parameter's length decides
            subject = measured
        if compare is None or not _subject(subject) or literal is None:
            return None
        constant = literal[0]

        def decide(value: object) -> Optional[bool]:
            if measured is not None:
                value = _length(value)
                if value is None:
                    return None
            return _decided(compare, constant, value) if flipped else _decided(compare, value, constant)

        return subject, decide

    def _literal(self, node: cst.BaseExpression) -> Optional[tuple]:
        """``(value,)`` of a literal (``-1``, ``None``, ``"cpu"``), None for anything else."""
        try:
            return (ast.literal_eval(self.module.code_for_node(node).strip()),)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None

    def _passed_values(self, parameter: str, function: cst.FunctionDef, klass: Optional[cst.ClassDef]) -> Optional[List[object]]:
        """The parameter's default (if it has one) and each value the project's calls pass it (an
        option by its default); None where a call passes something else or leaves a parameter
        without default out, nothing calls it, or the function binds the parameter again."""
        params = function.params
        positional = list(params.posonly_params) + list(params.params)
        declared = next((p for p in positional + list(params.kwonly_params) if p.name.value == parameter), None)
        if declared is None:
            return None
        default = self._literal(declared.default) if declared.default is not None else ()
        if default is None or any(a.targets[0].target.value == parameter for a in self._assignments(function.body, cst.Name)):
            return None
        method = klass is not None and any(s is function for s in klass.body.body) and not any(
            isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators
        )
        names = [p.name.value for p in positional][1 if method else 0:]
        index = names.index(parameter) if parameter in names else None
        initializer = method and function.name.value == "__init__"
        callee = klass.name.value if initializer else function.name.value
        receiver = klass.name.value if method and not initializer else None
        accepts = accepting(function, len(names))
        values, counted = list(default), 0
        for count, keywords, unpacked, (passed_positional, passed_keywords, receivers, _) in self.project.parameter_calls.get(f"{callee}@{self.stem}", ()):
            if receiver is not None and receivers and receiver not in receivers or not accepts(count, keywords, unpacked):
                continue  # ``loader.initialize()`` calls another class's method
            counted += 1
            if unpacked or count < 0:
                return None
            if parameter in keywords or (index is not None and count > index):
                value = self._passed_value(passed_positional, passed_keywords, index, parameter)
                if value is None:
                    return None
                values.append(value)
            elif not default:
                return None  # a required parameter left out: a call the model cannot read
        return values if counted else None

    def _passed_value(self, positional: Optional[list], keywords: Optional[dict], index: Optional[int], parameter: str):
        """What a call passes as the parameter: a device option of another module off by default
        (``train(args.visible_gpus)``, ``"-1"``: the CPU) by that default, which a comparison
        reads, any other option by whether it holds (``ProjectFacts.passed_value``)."""
        option = None
        if positional is not None:
            option = positional[index] if index is not None and index < len(positional) else keywords.get(parameter)
        if isinstance(option, str) and about_devices(option) and option not in self.project.rebound_options:
            known, default = self.project.value(option)
            if known and default is not None and means_no_gpu(option, default):
                return default
        return self.project.passed_value(positional, keywords, index, parameter)



def _subject(node: cst.BaseExpression) -> bool:
    """A bare name or ``self.x``: what a condition on a parameter tests."""
    return isinstance(node, cst.Name) or (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"
    )


def _measured(node: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``x`` of ``len(x)`` where ``x`` is a name or ``self.x``; None for anything else."""
    if (
        isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "len"
        and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star
        and _subject(node.args[0].value)
    ):
        return node.args[0].value
    return None


def _length(value: object) -> Optional[int]:
    try:
        return len(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _decided(compare: Callable[[object, object], bool], left: object, right: object) -> Optional[bool]:
    try:
        return bool(compare(left, right))
    except TypeError:
        return None
