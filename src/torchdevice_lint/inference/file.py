"""Intraprocedural device inference for the TDV4xx rules.

Every function body (and the module body) is walked once in statement order with an
environment mapping names and dotted names (``x``, ``self.w``, ``batch.ids``) to what is known
about their value: on a device, on the module's device (``forward``'s tensors, parameters,
buffers, submodule outputs), on the CPU, or a plain Python value. Anything else is unknown and
never produces a finding: precision matters more than recall, so branches join to unknown
unless both sides agree, loops iterate to a fixed point, and calls that could move a value
forget what was known about it.

The result of a file's analysis is a list of events (``.numpy()`` on a device tensor, an
operation mixing a device tensor with a non-0-dim CPU tensor, a float64 tensor made on a
device) that the rules in ``dataflow.py`` and ``device_tensors.py`` turn into findings and fixes. It
reads CPython's ``ast``: the first stage runs it once per file (``first_stage.triggers.Inferred``), and
only a file where it finds something is parsed with LibCST for those rules (``engine/bridge.py``).
"""

from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ..syntax.ast_nodes import last_name, literal_string
from ..syntax.cst_nodes import qualified
from .calls import CallWalk
from .expressions import ExpressionWalk
from .shape import FUNCTION_TYPES, Function, ShapeWalker
from .source import SourceContext
from .statements import StatementWalk
from .values import PYTHON, PYTHON_SCALAR, ClassFacts, Env, FileInference, Place, Scope, Value, join_envs
from .vocabulary import (
    DEFAULT_DEVICE_SETTERS,
    MOVE_OVERRIDES,
    NO_GRAD_CONTEXTS,
    TORCH_CPU_SOURCES,
    place_of_device_string,
)

if TYPE_CHECKING:
    from .seeds import Seeds


class FunctionWalk(StatementWalk, ExpressionWalk, CallWalk):
    """One function body (or the module body) walked in statement order."""


class FileAnalysis:
    """The pre-pass, then every function that can start a CPU value or an event; methods
    start from their class facts: what ``__init__`` alone assigned to ``self``."""

    def __init__(
        self, ctx: SourceContext, seeds: "Seeds", calls: Dict[str, List[ast.Call]], walk_every_function: bool = False
    ) -> None:
        self.ctx = ctx
        self.result = FileInference()
        walker = ShapeWalker()
        walker.walk(ctx.tree.body, None, None)
        self.shape = walker.shape
        self.default_device_changed = any(setter in ctx.source for setter in DEFAULT_DEVICE_SETTERS)
        self.class_facts: Dict[int, ClassFacts] = {}
        self.walk_every_function = walk_every_function
        self.cpu_lines, self.seed_lines = self.seed_lines_of(seeds, calls)

    def seed_lines_of(self, seeds: "Seeds", calls_by_name: Dict[str, List[ast.Call]]) -> Tuple[List[int], List[int]]:
        """The sorted lines of every node a walk can start a CPU value from, and of every node
        it can start a CPU value, a CPU module or an event from. Every CPU tensor starts at a
        torch factory, ``.cpu()`` or a ``"cpu"`` string; every CPU module at a ``torch.nn``
        constructor or a module class of the file; ``.numpy()`` events need the call and
        float64 ones ``.double()`` or a float64 name. A walk knows nothing of other functions'
        values, so a function holding none of these has nothing to report."""
        cpu, others = list(seeds.cpu), list(seeds.events)
        classes = self.shape.module_classes
        for dotted, calls in calls_by_name.items():
            name = qualified(dotted, self.ctx.aliases)
            if name is not None and name.startswith("torch.") and name[6:] in TORCH_CPU_SOURCES:
                cpu.extend(call.lineno for call in calls)
            elif dotted in classes or (name is not None and name.startswith("torch.nn.")):
                others.extend(call.lineno for call in calls)
        cpu.sort()
        return cpu, sorted(cpu + others)

    def run(self) -> FileInference:
        if self.walk_every_function or self.module_body_holds_seeds():
            FunctionWalk(self, Scope(self.ctx.tree)).block(self.ctx.tree.body, {})
        for function, klass in self.shape.functions:
            if klass is not None and function.name == "__init__":
                continue  # walked while the class facts are gathered
            if self.walk_every_function or holds(function, self.seed_lines) or self.init_makes_cpu_values(klass):
                facts = self.facts_for(klass) if klass is not None else None
                self.walk_function(function, klass, facts)
        for function, klass in self.shape.functions:
            if klass is not None and function.name == "__init__" and id(klass) not in self.class_facts:
                if self.walk_every_function or holds(function, self.seed_lines):
                    self.facts_for(klass)
        return self.result

    def module_body_holds_seeds(self) -> bool:
        """Whether a seed stands outside the functions and classes of the module body (which
        are walked on their own, or never)."""
        lines = self.seed_lines
        inside = 0
        for statement in self.ctx.tree.body:
            if isinstance(statement, DEFINITIONS):
                first, last = span(statement)
                inside += bisect_right(lines, last) - bisect_left(lines, first)
        return inside < len(lines)

    def init_makes_cpu_values(self, klass: Optional[ast.ClassDef]) -> bool:
        """Whether the class facts a method starts from may hold a CPU value: only CPU tensors
        stay CPU values there (modules become the module's device, or unknown)."""
        if klass is None:
            return False
        init = class_methods(klass).get("__init__")
        return init is not None and holds(init, self.cpu_lines)

    def walk_function(self, function: Function, klass: Optional[ast.ClassDef], facts: Optional[ClassFacts]) -> FunctionWalk:
        env: Env = {}
        tensor_params: List[str] = []
        arguments = function.args
        params = list(arguments.posonlyargs) + list(arguments.args)
        # defaults belong to the last positional parameters, and to keyword-only ones
        defaults = [None] * (len(params) - len(arguments.defaults)) + list(arguments.defaults)
        defaults += list(arguments.kw_defaults)
        method = klass is not None and not any(last_name(d) == "staticmethod" for d in function.decorator_list)
        forward = method and function.name == "forward"
        for index, (param, default) in enumerate(zip(params + list(arguments.kwonlyargs), defaults)):
            name = param.arg
            annotated = self.ctx.text_of(param.annotation) if param.annotation is not None else ""
            tensor_annotation = "Tensor" in annotated and "[" not in annotated.replace("Optional[", "")
            if forward and tensor_annotation:
                env[name] = Value(Place.MODULE, tensor=True)
                tensor_params.append(name)
            elif annotated in {"int", "float", "bool", "str"}:
                env[name] = PYTHON_SCALAR if annotated in {"int", "float"} else PYTHON
            elif forward and index == 1 and not annotated and index < len(params) and default is None:
                # forward's input is on the module's device, whatever the device
                env[name] = Value(Place.MODULE)
                tensor_params.append(name)
            elif default is not None and literal_string(default) is not None:
                env[name] = Value(Place.PYTHON, device_spec=place_of_device_string(literal_string(default)))
            else:
                env[name] = None
        for star in (arguments.vararg, arguments.kwarg):
            if star is not None:
                env[star.arg] = None
        scope = Scope(function, tuple(tensor_params), facts, tensor_function=bool(tensor_params))
        walk = FunctionWalk(self, scope)
        if any(self.ctx.qualname(d.func if isinstance(d, ast.Call) else d) in NO_GRAD_CONTEXTS for d in function.decorator_list):
            walk.no_grad = 1
        end = walk.block(function.body, env)
        walk.final_env = join_envs([end, *walk.returns])
        return walk

    def facts_for(self, klass: ast.ClassDef) -> ClassFacts:
        """What every method may assume about ``self.<attr>``: only attributes assigned in
        ``__init__`` and nowhere else in the file."""
        known = self.class_facts.get(id(klass))
        if known is not None:
            return known
        methods = class_methods(klass)
        module_like = klass.name in self.shape.module_classes or "forward" in methods
        facts = ClassFacts(module_like)
        self.class_facts[id(klass)] = facts
        init = methods.get("__init__")
        if init is None or self.shape.uses_setattr or MOVE_OVERRIDES & set(methods):
            return facts
        walk = self.walk_function(init, klass, ClassFacts(module_like))
        final = walk.final_env or {}
        own_methods = set(methods.values())
        for key, value in final.items():
            if not key.startswith("self.") or key.count(".") != 1 or value is None:
                continue
            attr = key[len("self."):]
            sites = self.shape.attribute_sites.get(attr, [])
            if attr in self.shape.registered or any(site is not init for site in sites):
                continue
            facts.attributes[key] = self.fact(key, value, module_like)
        if module_like:
            for attr, sites in self.shape.registered.items():
                if all(site in own_methods for site in sites):
                    facts.attributes[f"self.{attr}"] = Value(Place.MODULE, tensor=True)
        return facts

    def fact(self, key: str, value: Value, module_like: bool) -> Optional[Value]:
        if value.parameter:
            return Value(Place.MODULE, tensor=True) if module_like else None
        if value.place == Place.CPU and value.tensor:
            return Value(Place.CPU, rank=value.rank, tensor=True, grad_free=value.grad_free, stuck_attributes=frozenset([key]))
        if value.place == Place.CPU and value.module:
            return Value(Place.MODULE, module=True, constructor=value.constructor) if module_like else None
        if value.place == Place.DEVICE:
            return Value(Place.DEVICE, tensor=value.tensor, module=value.module, moved_in_place=value.moved_in_place, constructor=value.constructor)
        if value.place in (Place.PYTHON, Place.LIST):
            return value
        return None


def infer_tree(
    tree: ast.Module,
    source: str,
    seeds: "Seeds",
    calls: Dict[str, List[ast.Call]],
    walk_every_function: bool = False,
) -> FileInference:
    """The device inference of one file, on CPython's tree: the TDV4xx rules and TDV601 read
    it, and the first stage asks it whether they have anything to report (``Facts.inferred``).
    ``seeds`` and ``calls`` (dotted name of the called expression -> those calls) are where its
    walks can start, as the first stage's walk found them; ``walk_every_function`` also walks
    the functions that hold no seed, as a reference for the tests."""
    return FileAnalysis(SourceContext(tree, source), seeds, calls, walk_every_function).run()


#: Statements walked on their own (functions), or never (class bodies).
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def span(definition: ast.stmt) -> Tuple[int, int]:
    """The first and last line of a function or class, decorators included."""
    first = min([decorator.lineno for decorator in definition.decorator_list] + [definition.lineno])
    return first, definition.end_lineno


def holds(definition: ast.stmt, lines: List[int]) -> bool:
    """Whether one of the sorted ``lines`` is within the definition."""
    first, last = span(definition)
    index = bisect_left(lines, first)
    return index < len(lines) and lines[index] <= last


def class_methods(klass: ast.ClassDef) -> Dict[str, Function]:
    """The functions of a class body by name (the last one of a name, as Python binds it)."""
    return {statement.name: statement for statement in klass.body if isinstance(statement, FUNCTION_TYPES)}


def value_at(env: Env, key: str, scope: Scope) -> Optional[Value]:
    """What ``key`` held in a recorded environment (class facts fill in ``self.`` attributes)."""
    if key in env:
        return env[key]
    if scope.class_facts is not None and key.startswith("self.") and key.count(".") == 1:
        return scope.class_facts.attributes.get(key)
    return None
