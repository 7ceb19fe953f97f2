"""What an expression evaluates to: names, attributes, subscripts and the dispatch of calls."""

from __future__ import annotations

from typing import List, Optional

from ..lazycst import cst
from ..syntax import dotted_name
from .values import LIST, ON_DEVICE, PYTHON, PYTHON_SCALAR, TENSOR_PLACES, Env, Place, Rank, Value, join_values
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
    OPERATORS,
    PRODUCT_COMBINERS,
    PYTHON_ATTRIBUTES,
    SAME_DEVICE_OTHER,
    SCALAR_BUILTINS,
    SIZE_FACTORIES,
    VIEW_ATTRIBUTES,
    is_parameterless_module,
    literal_string,
    place_of_device_string,
    positional_args,
)


class ExpressionWalk:
    """Mixed into ``FunctionWalk``: the state (``ctx``, ``scope``, ``analysis``) is the
    statement walk's."""

    def expr(self, node: cst.BaseExpression, env: Env) -> Optional[Value]:
        if isinstance(node, cst.Name):
            if node.value in {"True", "False", "None"}:
                return PYTHON
            return self.lookup(node.value, env)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
            if isinstance(node, cst.SimpleString):
                text = literal_string(node)
                return Value(Place.PYTHON, device_spec=place_of_device_string(text) if text else None)
            return PYTHON if isinstance(node, cst.ConcatenatedString) else PYTHON_SCALAR
        if isinstance(node, cst.FormattedString):
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    self.expr(part.expression, env)
            head = node.parts[0] if node.parts else None
            spec = place_of_device_string(head.value) if isinstance(head, cst.FormattedStringText) else None
            return Value(Place.PYTHON, device_spec=spec)
        if isinstance(node, cst.Attribute):
            return self.attribute(node, env)
        if isinstance(node, cst.Call):
            return self.call(node, env)
        if isinstance(node, cst.BinaryOperation):
            left = self.expr(node.left, env)
            right = self.expr(node.right, env)
            if isinstance(node.operator, cst.MatrixMultiply):
                return self.combine(node, [(left, node.left), (right, node.right)], Rank.UNKNOWN)
            if type(node.operator).__name__ in OPERATORS:
                return self.combine(node, [(left, node.left), (right, node.right)])
            return None
        if isinstance(node, cst.Comparison):
            left = self.expr(node.left, env)
            values = [self.expr(target.comparator, env) for target in node.comparisons]
            if len(node.comparisons) == 1 and type(node.comparisons[0].operator).__name__ in COMPARISONS:
                comparator = node.comparisons[0].comparator
                return self.combine(node, [(left, node.left), (values[0], comparator)])
            return PYTHON
        if isinstance(node, cst.UnaryOperation):
            operand = self.expr(node.expression, env)
            return PYTHON if isinstance(node.operator, cst.Not) else operand
        if isinstance(node, cst.BooleanOperation):
            return join_values(self.expr(node.left, env), self.expr(node.right, env))
        if isinstance(node, cst.IfExp):
            self.expr(node.test, env)
            body, orelse = self.expr(node.body, env), self.expr(node.orelse, env)
            if any(arm is not None and arm.device_spec is not None for arm in (body, orelse)):
                return Value(Place.PYTHON, device_spec=self.device_target(node, env))
            return join_values(body, orelse)
        if isinstance(node, cst.Subscript):
            return self.subscript(node, env)
        if isinstance(node, (cst.Tuple, cst.List)):
            elements = tuple(self.expr(e.value, env) if not isinstance(e, cst.StarredElement) else self._starred(e, env) for e in node.elements)
            if any(isinstance(e, cst.StarredElement) for e in node.elements):
                return None
            if all(e is not None and e.place in (Place.PYTHON, Place.LIST) for e in elements):
                return LIST
            return Value(Place.SEQUENCE, elements=elements)
        if isinstance(node, (cst.ListComp, cst.GeneratorExp, cst.SetComp)):
            inner = dict(env)
            for_in = node.for_in
            while for_in is not None:
                self.expr(for_in.iter, inner)
                self.assign(for_in.target, None, inner)
                for condition in for_in.ifs:
                    self.expr(condition.test, inner)
                for_in = for_in.inner_for_in
            element = self.expr(node.elt, inner)
            return LIST if element is not None and element.place == Place.PYTHON and isinstance(node, cst.ListComp) else None
        if isinstance(node, cst.NamedExpr):
            value = self.expr(node.value, env)
            self.assign(node.target, value, env)
            return value
        if isinstance(node, cst.Dict):
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    self.expr(element.key, env)
                self.expr(element.value, env)
            return None
        if isinstance(node, (cst.Await, cst.Yield)):
            inner = getattr(node, "expression", None) or getattr(node, "value", None)
            if isinstance(inner, cst.BaseExpression):
                self.expr(inner, env)
            return None
        return None

    def _starred(self, element: cst.StarredElement, env: Env) -> None:
        self.expr(element.value, env)
        return None

    def attribute(self, node: cst.Attribute, env: Env) -> Optional[Value]:
        key = dotted_name(node)
        if key is not None and (key in env or (key.startswith("self.") and self.scope.class_facts is not None)):
            known = self.lookup(key, env)
            if known is not None or key in env:
                return known
        if self.ctx.qualname(node) is not None:
            return None
        base = self.expr(node.value, env)
        attr = node.attr.value
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

    def subscript(self, node: cst.Subscript, env: Env) -> Optional[Value]:
        base = self.expr(node.value, env)
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                self.expr(element.slice.value, env)
        if base is None:
            return None
        if base.place in ON_DEVICE:
            return Value(base.place, grad_free=base.grad_free)
        if base.place == Place.CPU and base.tensor:
            return Value(Place.CPU, tensor=True, grad_free=base.grad_free, origins=base.origins, stuck_attributes=base.stuck_attributes)
        if base.place == Place.LIST:
            return PYTHON
        if base.place == Place.SEQUENCE and len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            index = node.slice[0].slice.value
            if isinstance(index, cst.Integer):
                position = int(index.value, 0)
                if -len(base.elements) <= position < len(base.elements):
                    return base.elements[position]
        return None

    # -- calls --------------------------------------------------------------------------------
    def call(self, node: cst.Call, env: Env) -> Optional[Value]:
        func = node.func
        name = self.ctx.qualname(func)
        if name is not None:
            args = [self.expr(arg.value, env) for arg in node.args]
            for arg in node.args:
                self._forget_argument(arg.value, env)
            return self.torch_call(node, name, args, env) if name == "torch" or name.startswith("torch.") else None
        key = dotted_name(func)
        callee_known = key is not None and (key in env or (key.startswith("self.") and key.count(".") == 1 and self.lookup(key, env) is not None))
        if isinstance(func, cst.Attribute) and not callee_known:
            receiver = self.expr(func.value, env)
            args = [self.expr(arg.value, env) for arg in node.args]
            result = self.method_call(node, func.attr.value, receiver, args, env)
            receiver_key = dotted_name(func.value)
            if receiver_key is not None and (receiver is None or not receiver.tensor):
                self.forget_under(receiver_key, env)
                if receiver is not None and receiver.place in TENSOR_PLACES and func.attr.value not in KEEPING_METHODS:
                    self.bind(receiver_key, None, env)  # a module's own method may move it
            for arg in node.args:
                self._forget_argument(arg.value, env)
            return result
        callee = self.expr(func, env)
        args = [self.expr(arg.value, env) for arg in node.args]
        for arg in node.args:
            self._forget_argument(arg.value, env)
        if callee is None and isinstance(func, cst.Name) and func.value not in env:
            return self.constructor_call(func.value)
        return self.module_call(node, callee, args, env)

    def _forget_argument(self, argument: cst.BaseExpression, env: Env) -> None:
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

    def torch_call(self, node: cst.Call, name: str, args: List[Optional[Value]], env: Env) -> Optional[Value]:
        parts = name.split(".")
        leaf = parts[-1]
        namespace = ".".join(parts[:-1])
        positional = positional_args(node)
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
                sequence = self.expr_value_of(positional[0], node, args)
                if sequence is not None and sequence.place == Place.SEQUENCE:
                    listed = positional[0].value
                    items = [item.value for item in listed.elements] if isinstance(listed, (cst.List, cst.Tuple)) else [None] * len(sequence.elements)
                    operands = list(zip(sequence.elements, items))
                    return self.combine(node, operands, Rank.ARRAY)
                return None
            if leaf in ELEMENTWISE_COMBINERS | PRODUCT_COMBINERS:
                operands = [(self.expr_value_of(arg, node, args), arg.value) for arg in positional]
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
                matched = positional[:3] + [arg for arg in node.args if arg.keyword is not None and arg.keyword.value in FUNCTIONAL_TENSOR_KEYWORDS]
                operands = [(self.expr_value_of(arg, node, args), arg.value) for arg in matched]
                return self.combine(node, operands, Rank.UNKNOWN)
            return self.same_place(args[0] if args else None, leaf)
        if namespace == "torch.nn" and leaf[:1].isupper():
            if is_parameterless_module(leaf, node):
                return None  # device-neutral: never a CPU operand
            return self.fresh(Place.CPU, module=True, constructor=leaf)
        return None

    def expr_value_of(self, arg: cst.Arg, call: cst.Call, values: List[Optional[Value]]) -> Optional[Value]:
        return values[list(call.args).index(arg)]

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
