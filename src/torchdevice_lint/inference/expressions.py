"""What an expression evaluates to: names, attributes, subscripts and the dispatch of calls."""

from __future__ import annotations

import ast
from typing import List, Optional

from ..syntax.ast_nodes import call_args, dotted_name, fstring_head, is_integer
from .values import (
    LIST,
    ON_DEVICE,
    PYTHON,
    PYTHON_SCALAR,
    TENSOR_PLACES,
    Env,
    Place,
    Rank,
    Value,
    join_values,
)
from .vocabulary import (
    ARRAY_FACTORIES,
    ARRAY_SHAPING,
    COMPARISONS,
    DATA_FACTORIES,
    ELEMENTWISE_COMBINERS,
    ELEMENTWISE_UNARY,
    FUNCTIONAL_COMBINERS,
    FUNCTIONAL_TENSOR_KEYWORDS,
    KEEPING_METHODS,
    LEGACY_CPU_CONSTRUCTORS,
    LIKE_FACTORIES,
    LIST_COMBINERS,
    MODULE_WRAPPERS,
    OPERATORS,
    PRODUCT_COMBINERS,
    PYTHON_ATTRIBUTES,
    SAME_DEVICE_OTHER,
    SCALAR_BUILTINS,
    SIZE_FACTORIES,
    VIEW_ATTRIBUTES,
    is_parameterless_module,
    place_of_device_string,
)


class ExpressionWalk:
    """Mixed into ``FunctionWalk``: the state (``ctx``, ``scope``, ``analysis``) is the
    statement walk's."""

    def expr(self, node: ast.expr, env: Env) -> Optional[Value]:
        kind = type(node)
        if kind is ast.Name:
            return self.lookup(node.id, env)
        if kind is ast.Constant:
            value = node.value
            if type(value) is str:
                return Value(Place.PYTHON, device_spec=place_of_device_string(value) if value else None)
            if value is None or type(value) is bool or type(value) is bytes:
                return PYTHON
            return PYTHON_SCALAR if value is not Ellipsis else None
        if kind is ast.JoinedStr:
            for part in node.values:
                if isinstance(part, ast.FormattedValue):
                    self.expr(part.value, env)
            head = fstring_head(node)
            return Value(Place.PYTHON, device_spec=place_of_device_string(head) if head is not None else None)
        if kind is ast.Attribute:
            return self.attribute(node, env)
        if kind is ast.Call:
            return self.call(node, env)
        if kind is ast.BinOp:
            left = self.expr(node.left, env)
            right = self.expr(node.right, env)
            if isinstance(node.op, ast.MatMult):
                return self.combine(node, [(left, node.left), (right, node.right)], Rank.UNKNOWN)
            if isinstance(node.op, OPERATORS):
                return self.combine(node, [(left, node.left), (right, node.right)])
            return None
        if kind is ast.Compare:
            left = self.expr(node.left, env)
            values = [self.expr(comparator, env) for comparator in node.comparators]
            if len(node.ops) == 1 and isinstance(node.ops[0], COMPARISONS):
                return self.combine(node, [(left, node.left), (values[0], node.comparators[0])])
            return PYTHON
        if kind is ast.UnaryOp:
            operand = self.expr(node.operand, env)
            return PYTHON if isinstance(node.op, ast.Not) else operand
        if kind is ast.BoolOp:
            joined = self.expr(node.values[0], env)
            for other in node.values[1:]:
                joined = join_values(joined, self.expr(other, env))
            return joined
        if kind is ast.IfExp:
            self.expr(node.test, env)
            body, orelse = self.expr(node.body, env), self.expr(node.orelse, env)
            if any(arm is not None and arm.device_spec is not None for arm in (body, orelse)):
                return Value(Place.PYTHON, device_spec=self.device_target(node, env))
            return join_values(body, orelse)
        if kind is ast.Subscript:
            return self.subscript(node, env)
        if kind is ast.Tuple or kind is ast.List:
            elements = tuple(self.expr(e, env) if not isinstance(e, ast.Starred) else self._starred(e, env) for e in node.elts)
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return None
            if all(e is not None and e.place in (Place.PYTHON, Place.LIST) for e in elements):
                return LIST
            return Value(Place.SEQUENCE, elements=elements)
        if kind is ast.ListComp or kind is ast.GeneratorExp or kind is ast.SetComp:
            inner = dict(env)
            for generator in node.generators:
                self.expr(generator.iter, inner)
                self.assign(generator.target, None, inner)
                for condition in generator.ifs:
                    self.expr(condition, inner)
            element = self.expr(node.elt, inner)
            return LIST if element is not None and element.place == Place.PYTHON and kind is ast.ListComp else None
        if kind is ast.NamedExpr:
            value = self.expr(node.value, env)
            self.assign(node.target, value, env)
            return value
        if kind is ast.Dict:
            for key, value in zip(node.keys, node.values):
                if key is not None:
                    self.expr(key, env)
                self.expr(value, env)
            return None
        if kind is ast.Await or kind is ast.Yield:
            if node.value is not None:
                self.expr(node.value, env)
            return None
        return None

    def _starred(self, element: ast.Starred, env: Env) -> None:
        self.expr(element.value, env)
        return None

    def attribute(self, node: ast.Attribute, env: Env) -> Optional[Value]:
        key = dotted_name(node)
        if key is not None and (key in env or (key.startswith("self.") and self.scope.class_facts is not None)):
            known = self.lookup(key, env)
            if known is not None or key in env:
                return known
        if self.ctx.qualname(node) is not None:
            return None
        base = self.expr(node.value, env)
        attr = node.attr
        if base is None or base.place not in TENSOR_PLACES:
            return None
        if attr in PYTHON_ATTRIBUTES:
            if attr == "device":
                return Value(Place.PYTHON, device_spec=base.place)
            return PYTHON
        if attr in VIEW_ATTRIBUTES:
            return Value(base.place, tensor=True, grad_free=base.grad_free or attr == "data", rank=base.rank if attr != "grad" else base.rank)
        if base.place in ON_DEVICE and not base.tensor:
            return Value(base.place)  # a module's parameter, a model output's field
        return None

    def subscript(self, node: ast.Subscript, env: Env) -> Optional[Value]:
        base = self.expr(node.value, env)
        index = node.slice
        indices = index.elts if isinstance(index, ast.Tuple) else [index]
        for element in indices:
            if not isinstance(element, ast.Slice):
                self.expr(element, env)
        if base is None:
            return None
        if base.place in ON_DEVICE:
            return Value(base.place, grad_free=base.grad_free)
        if base.place == Place.CPU and base.tensor:
            return Value(Place.CPU, tensor=True, grad_free=base.grad_free, origins=base.origins, stuck_attributes=base.stuck_attributes)
        if base.place == Place.LIST:
            return PYTHON
        if base.place == Place.SEQUENCE and len(indices) == 1 and is_integer(indices[0]):
            position = indices[0].value
            if -len(base.elements) <= position < len(base.elements):
                return base.elements[position]
        return None

    # -- calls --------------------------------------------------------------------------------
    def call(self, node: ast.Call, env: Env) -> Optional[Value]:
        """Arguments are evaluated in source order; ``args`` holds their values in the order
        of ``call_args(node)``."""
        func = node.func
        arguments = call_args(node)
        name = self.ctx.qualname(func)
        if name is not None:
            args = [self.expr(arg.value, env) for arg in arguments]
            for arg in arguments:
                self._forget_argument(arg.value, env)
            return self.torch_call(node, name, args, env) if name == "torch" or name.startswith("torch.") else None
        key = dotted_name(func)
        callee_known = key is not None and (key in env or (key.startswith("self.") and key.count(".") == 1 and self.lookup(key, env) is not None))
        if isinstance(func, ast.Attribute) and not callee_known:
            receiver = self.expr(func.value, env)
            args = [self.expr(arg.value, env) for arg in arguments]
            result = self.method_call(node, func.attr, receiver, args, env)
            receiver_key = dotted_name(func.value)
            if receiver_key is not None and (receiver is None or not receiver.tensor):
                self.forget_under(receiver_key, env)
                if receiver is not None and receiver.place in TENSOR_PLACES and func.attr not in KEEPING_METHODS:
                    self.bind(receiver_key, None, env)  # a module's own method may move it
            for arg in arguments:
                self._forget_argument(arg.value, env)
            return result
        callee = self.expr(func, env)
        args = [self.expr(arg.value, env) for arg in arguments]
        for arg in arguments:
            self._forget_argument(arg.value, env)
        if callee is None and isinstance(func, ast.Name) and func.id not in env:
            return self.constructor_call(func.id)
        return self.module_call(node, callee, args, env)

    def _forget_argument(self, argument: ast.expr, env: Env) -> None:
        """A call that receives a module may move it; one that receives any object may
        rebind its attributes. Tensors cannot change device in place."""
        key = dotted_name(argument)
        if key is None:
            return
        self.forget_under(key, env)
        known = env.get(key)
        if known is not None and not known.tensor and known.place in TENSOR_PLACES:
            env[key] = None

    def constructor_call(self, name: str) -> Optional[Value]:
        if name in self.analysis.shape.module_classes:
            return self.fresh(Place.CPU, module=True, constructor=name)
        if name in SCALAR_BUILTINS:
            return PYTHON_SCALAR
        if name == "range":
            return LIST
        return None

    def fresh(self, place: Place, **kwargs) -> Value:
        """A value computed here: free of grad under ``no_grad``."""
        if self.no_grad:
            kwargs["grad_free"] = True
        return Value(place, **kwargs)

    def torch_call(self, node: ast.Call, name: str, args: List[Optional[Value]], env: Env) -> Optional[Value]:
        parts = name.split(".")
        leaf = parts[-1]
        namespace = ".".join(parts[:-1])
        arguments = call_args(node)
        positional = [arg for arg in arguments if arg.keyword is None and not arg.star]
        if name == "torch.device":
            return Value(Place.PYTHON, device_spec=self.device_target(node, env))
        if namespace == "torch":
            if leaf in SIZE_FACTORIES | ARRAY_FACTORIES | DATA_FACTORIES | {"randint"} or leaf in LEGACY_CPU_CONSTRUCTORS:
                return self.factory(node, leaf, env)
            if leaf in LIKE_FACTORIES:
                return self.like_factory(node, args[0] if args else None, env)
            if leaf == "from_numpy":
                return self.fresh(Place.CPU, rank=Rank.ARRAY, tensor=True, grad_free=True)
            if leaf in LIST_COMBINERS and positional:
                sequence = args[arguments.index(positional[0])]
                if sequence is not None and sequence.place == Place.SEQUENCE:
                    listed = positional[0].value
                    items = list(listed.elts) if isinstance(listed, (ast.List, ast.Tuple)) else [None] * len(sequence.elements)
                    operands = list(zip(sequence.elements, items))
                    return self.combine(node, operands, Rank.ARRAY)
                return None
            if leaf in ELEMENTWISE_COMBINERS | PRODUCT_COMBINERS:
                operands = [(args[arguments.index(arg)], arg.value) for arg in positional]
                rank = Rank.UNKNOWN if leaf in PRODUCT_COMBINERS else None
                return self.combine(node, operands, rank)
            if leaf in ELEMENTWISE_UNARY or leaf in SAME_DEVICE_OTHER or leaf in ARRAY_SHAPING:
                return self.same_place(args[0] if args else None, leaf)
        if name in {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
            first = args[0] if args else None
            if first is not None and first.place in TENSOR_PLACES:
                return Value(first.place, tensor=True, rank=first.rank, parameter=True)
            return None
        if namespace == "torch.nn.functional":
            if leaf in FUNCTIONAL_COMBINERS and len(positional) >= 2:
                matched = positional[:3] + [arg for arg in arguments if arg.keyword in FUNCTIONAL_TENSOR_KEYWORDS]
                operands = [(args[arguments.index(arg)], arg.value) for arg in matched]
                return self.combine(node, operands, Rank.UNKNOWN)
            return self.same_place(args[0] if args else None, leaf)
        if name in MODULE_WRAPPERS:
            return None
        if namespace == "torch.nn" and leaf[:1].isupper():
            if is_parameterless_module(leaf, [arg.keyword for arg in arguments]):
                return None  # device-neutral: never a CPU operand
            return self.fresh(Place.CPU, module=True, constructor=leaf)
        return None

    def same_place(self, source: Optional[Value], method: str) -> Optional[Value]:
        if source is None or source.place not in TENSOR_PLACES or source.module:
            return None
        if source.place == Place.CPU:
            if method in ELEMENTWISE_UNARY:
                rank = source.rank
            elif method in ARRAY_SHAPING:
                rank = Rank.ARRAY
            else:
                rank = Rank.UNKNOWN
            keep_origins = rank == Rank.ARRAY or method in ELEMENTWISE_UNARY
            return self.fresh(
                Place.CPU, rank=rank, tensor=True, grad_free=source.grad_free or method == "detach",
                origins=source.origins if keep_origins else None, stuck_attributes=source.stuck_attributes,
            )
        return self.fresh(source.place, tensor=True, grad_free=source.grad_free or method == "detach")
