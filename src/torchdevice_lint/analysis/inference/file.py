"""Intraprocedural device inference for the TDV4xx rules.

Every function body (and the module body) is walked once in statement order with an
environment mapping names and dotted names (``x``, ``self.w``, ``batch.ids``) to what is known
about their value: on a device, on the module's device (``forward``'s tensors, parameters,
buffers, submodule outputs), on the CPU, or a plain Python value. Anything else is unknown and
never produces a finding: precision matters more than recall, so branches join to unknown
unless both sides agree, loops iterate to a fixed point, and calls that could move a value
forget what was known about it.

The result of a file's analysis is a list of events (``.numpy()`` on a device tensor, an
operation mixing a device tensor with a non-0-dim CPU tensor) that the rules in
``dataflow.py`` turn into findings and fixes. It is computed once per file and shared by the
three rules.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Dict, List, Optional

from ..lazycst import cst
from ..syntax import last_name, source_of
from .calls import CallWalk
from .expressions import ExpressionWalk
from .shape import ShapeWalker, block_statements
from .statements import StatementWalk
from .values import PYTHON, PYTHON_SCALAR, ClassFacts, Env, FileInference, Place, Scope, Value, join_envs
from .vocabulary import DEFAULT_DEVICE_SETTERS, MOVE_OVERRIDES, NO_GRAD_CONTEXTS, literal_string, place_of_device_string

if TYPE_CHECKING:
    from ..context import FileContext


class FunctionWalk(StatementWalk, ExpressionWalk, CallWalk):
    """One function body (or the module body) walked in statement order."""


class FileAnalysis:
    """The pre-pass, then every function; methods start from their class facts: what
    ``__init__`` alone assigned to ``self``."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.result = FileInference()
        walker = ShapeWalker()
        walker.walk(ctx.module.body, None, None)
        self.shape = walker.shape
        self.default_device_changed = any(setter in ctx.source for setter in DEFAULT_DEVICE_SETTERS)
        self.class_facts: Dict[int, ClassFacts] = {}

    def run(self) -> FileInference:
        FunctionWalk(self, Scope(self.ctx.module)).block(self.ctx.module.body, {})
        for function, klass in self.shape.functions:
            if klass is not None and function.name.value == "__init__":
                continue  # walked while the class facts are gathered
            facts = self.facts_for(klass) if klass is not None else None
            self.walk_function(function, klass, facts)
        for function, klass in self.shape.functions:
            if klass is not None and function.name.value == "__init__" and id(klass) not in self.class_facts:
                self.facts_for(klass)
        return self.result

    def walk_function(self, function: cst.FunctionDef, klass: Optional[cst.ClassDef], facts: Optional[ClassFacts]) -> FunctionWalk:
        env: Env = {}
        tensor_params: List[str] = []
        params = list(function.params.posonly_params) + list(function.params.params)
        method = klass is not None and not any(last_name(d.decorator) == "staticmethod" for d in function.decorators)
        forward = method and function.name.value == "forward"
        for index, param in enumerate(params + list(function.params.kwonly_params)):
            name = param.name.value
            annotation = param.annotation.annotation if param.annotation is not None else None
            annotated = source_of(annotation) if annotation is not None else ""
            tensor_annotation = "Tensor" in annotated and "[" not in annotated.replace("Optional[", "")
            if forward and tensor_annotation:
                env[name] = Value(Place.MODULE, tensor=True)
                tensor_params.append(name)
            elif annotated in {"int", "float", "bool", "str"}:
                env[name] = PYTHON_SCALAR if annotated in {"int", "float"} else PYTHON
            elif forward and index == 1 and not annotated and param in params and param.default is None:
                # forward's input is on the module's device, whatever the device
                env[name] = Value(Place.MODULE)
                tensor_params.append(name)
            elif param.default is not None and literal_string(param.default) is not None:
                env[name] = Value(Place.PYTHON, device_spec=place_of_device_string(literal_string(param.default)))
            else:
                env[name] = None
        for star in (function.params.star_arg, function.params.star_kwarg):
            if isinstance(star, cst.Param):
                env[star.name.value] = None
        scope = Scope(function, tuple(tensor_params), facts, tensor_function=bool(tensor_params))
        walk = FunctionWalk(self, scope)
        if any(self.ctx.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) in NO_GRAD_CONTEXTS for d in function.decorators):
            walk.no_grad = 1
        end = walk.suite(function.body, env)
        walk.final_env = join_envs([end, *walk.returns])
        return walk

    def facts_for(self, klass: cst.ClassDef) -> ClassFacts:
        """What every method may assume about ``self.<attr>``: only attributes assigned in
        ``__init__`` and nowhere else in the file."""
        known = self.class_facts.get(id(klass))
        if known is not None:
            return known
        methods = {s.name.value: s for s in block_statements(klass.body) if isinstance(s, cst.FunctionDef)}
        module_like = klass.name.value in self.shape.module_classes or "forward" in methods
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


_CACHE: "weakref.WeakKeyDictionary[FileContext, FileInference]" = weakref.WeakKeyDictionary()


def infer(ctx: FileContext) -> FileInference:
    """The file's device inference, computed once and shared by the TDV4xx rules."""
    result = _CACHE.get(ctx)
    if result is None:
        result = FileAnalysis(ctx).run()
        _CACHE[ctx] = result
    return result


def value_at(env: Env, key: str, scope: Scope) -> Optional[Value]:
    """What ``key`` held in a recorded environment (class facts fill in ``self.`` attributes)."""
    if key in env:
        return env[key]
    if scope.class_facts is not None and key.startswith("self.") and key.count(".") == 1:
        return scope.class_facts.attributes.get(key)
    return None
