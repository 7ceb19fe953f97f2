"""Calls that create, move or combine tensors: factories, ``.to()``, module calls, and the
mixing of device and CPU operands that TDV402 reports."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from ..syntax.ast_nodes import (
    call_args,
    dotted_name,
    fstring_head,
    is_integer,
    is_literal,
    keyword_value,
    last_name,
    literal_string,
    positional_args,
)
from .statements import is_false_literal
from .values import (
    MAX_RECORDED_ENTRIES,
    ON_DEVICE,
    PYTHON,
    PYTHON_SCALAR,
    TENSOR_PLACES,
    Env,
    Mix,
    NumpyCall,
    Operand,
    Place,
    Rank,
    Value,
)
from .vocabulary import (
    ARRAY_SHAPING,
    DATA_FACTORIES,
    DTYPES,
    ELEMENTWISE_UNARY,
    LEGACY_CPU_CONSTRUCTORS,
    NEW_FACTORIES,
    PRODUCT_COMBINERS,
    PYTHON_METHODS,
    RECURRENT_MODULES,
    SAME_DEVICE_OTHER,
    SIZE_FACTORIES,
    TENSOR_METHOD_COMBINERS,
    names_a_device,
    place_of_device_string,
    size_rank,
)


class CallWalk:
    """Mixed into ``FunctionWalk``: calls whose result or operands the device depends on."""

    def factory(self, node: ast.Call, leaf: str, env: Env) -> Optional[Value]:
        """``torch.zeros(...)`` and friends: on the ``device=`` given, else on the CPU."""
        positional = positional_args(node)
        requires_grad = keyword_value(node, "requires_grad")
        grad_free = not (requires_grad is not None and not is_false_literal(requires_grad))
        if leaf in DATA_FACTORIES or leaf in LEGACY_CPU_CONSTRUCTORS:
            rank = self.data_rank(positional[0] if positional else None, env, legacy=leaf in LEGACY_CPU_CONSTRUCTORS)
            if rank is None:
                return None
        elif leaf in SIZE_FACTORIES:
            size = keyword_value(node, "size")
            rank = size_rank([size] if size is not None else positional[:1] if leaf == "full" else positional)
        elif leaf == "randint":
            size = keyword_value(node, "size")
            shaped = [size] if size is not None else [arg for arg in positional if isinstance(arg, (ast.Tuple, ast.List))]
            rank = size_rank(shaped[:1])
        else:
            rank = Rank.ARRAY
        device_arg = keyword_value(node, "device")
        if device_arg is not None:
            target = self.device_target(device_arg, env)
            if target is None:
                return None
            dtype = keyword_value(node, "dtype")
            if target == Place.DEVICE and dtype is not None and self.is_float64(dtype) and not self.recording:
                self.analysis.result.float64_calls.append(node)
            return self.fresh(target, rank=rank if target == Place.CPU else Rank.UNKNOWN, tensor=True, grad_free=grad_free)
        if self.analysis.default_device_changed or self.default_device_context:
            return None
        if leaf in LEGACY_CPU_CONSTRUCTORS and self.ctx.qualname(node.func) != f"torch.{leaf}":
            return None
        result = self.analysis.result
        if not self.recording and result.recorded_entries + len(env) <= MAX_RECORDED_ENTRIES:
            result.recorded_entries += len(env)
            result.factory_sites[id(node)] = dict(env)
        return self.fresh(Place.CPU, rank=rank, tensor=True, grad_free=grad_free, origins=frozenset([node]))

    def data_rank(self, data: Optional[ast.expr], env: Env, legacy: bool) -> Optional[Rank]:
        """Rank of ``torch.tensor(data)``; None when data may be a tensor (the copy stays put)."""
        if legacy:
            return Rank.ARRAY  # torch.FloatTensor(2, 3) / (list) / () are never 0-dim
        if data is None:
            return None
        if is_literal(data):
            return Rank.SCALAR
        if isinstance(data, (ast.List, ast.Tuple, ast.ListComp)):
            return Rank.ARRAY
        if isinstance(data, ast.Name):
            known = self.lookup(data.id, env)
            if known is not None and known.place == Place.LIST:
                return Rank.ARRAY
            if known is not None and known.place == Place.PYTHON and known.rank == Rank.SCALAR:
                return Rank.SCALAR
        return None

    def like_factory(self, node: ast.Call, source: Optional[Value], env: Env) -> Optional[Value]:
        device_arg = keyword_value(node, "device")
        if device_arg is not None:
            target = self.device_target(device_arg, env)
            return self.fresh(target, tensor=True, grad_free=True) if target is not None else None
        if source is None or source.place not in TENSOR_PLACES:
            return None
        return self.fresh(source.place, tensor=True, grad_free=True, rank=source.rank if source.place == Place.CPU else Rank.UNKNOWN, origins=source.origins)

    def device_target(self, node: ast.expr, env: Env) -> Optional[Place]:
        """Where a device argument (``device=``, ``.to(...)``) points, on a GPU machine."""
        text = literal_string(node)
        if text is not None:
            return place_of_device_string(text)
        if isinstance(node, ast.JoinedStr):
            head = fstring_head(node)
            return place_of_device_string(head) if head is not None else None
        if is_integer(node):
            return Place.DEVICE
        if isinstance(node, ast.IfExp):
            body, orelse = self.device_target(node.body, env), self.device_target(node.orelse, env)
            if body == orelse:
                return body
            if body == Place.DEVICE and self.ctx.availability_checked(node.test):
                return Place.DEVICE
            return None
        if isinstance(node, ast.Call):
            name = self.ctx.qualname(node.func)
            arguments = call_args(node)
            if name == "torch.device" and arguments:
                first = self.device_target(arguments[0].value, env)
                return first if first is not None else (Place.DEVICE if literal_string(arguments[0].value) is None else None)
            return None
        if isinstance(node, ast.Attribute) and node.attr == "device":
            key = dotted_name(node)
            if key is not None and key in env:
                known = env[key]
                return known.device_spec if known is not None else None
            base = self.expr(node.value, env)
            if base is None:
                return Place.DEVICE  # following another tensor's device: on the GPU with it
            return base.place if base.place in TENSOR_PLACES and not base.module else None
        key = dotted_name(node)
        if key is not None:
            known = self.lookup(key, env)
            if known is not None:
                return known.device_spec
            return Place.DEVICE if names_a_device(key.rsplit(".", 1)[-1]) else None
        return None

    def to_target(self, node: ast.Call, env: Env) -> Tuple[str, Optional[Place]]:
        """What ``.to(...)`` does: ("move", place), ("keep", None) for a dtype cast, or
        ("unknown", None)."""
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(k.arg is None for k in node.keywords):
            return "unknown", None
        device_arg = keyword_value(node, "device")
        positional = positional_args(node)
        if device_arg is not None:
            target = self.device_target(device_arg, env)
            return ("move", target) if target is not None else ("unknown", None)
        if not positional:
            return ("keep", None) if node.keywords else ("unknown", None)
        first = positional[0]
        name = self.ctx.qualname(first)
        if name is not None and name.startswith("torch.") and name.split(".")[-1] in DTYPES:
            return "keep", None
        last = last_name(first)
        if last is not None and "dtype" in last.lower():
            return "keep", None
        key = dotted_name(first)
        if key is not None:
            known = self.lookup(key, env)
            if known is not None and known.place in TENSOR_PLACES and known.tensor:
                return "move", known.place
        target = self.device_target(first, env)
        return ("move", target) if target is not None else ("unknown", None)

    def method_call(self, node: ast.Call, method: str, receiver: Optional[Value], args: List[Optional[Value]], env: Env) -> Optional[Value]:
        if method == "numpy":
            force = keyword_value(node, "force")
            if receiver is not None and receiver.place == Place.DEVICE and (force is None or is_false_literal(force)) and not self.recording:
                self.analysis.result.numpy_calls.append(NumpyCall(node, receiver))
            return None
        if not self.recording and self.makes_float64_on_device(node, method, receiver, env):
            self.analysis.result.float64_calls.append(node)
        if receiver is not None and receiver.place not in TENSOR_PLACES:
            return None
        if method == "cuda":
            return self.moved(receiver, Place.DEVICE)
        if method == "cpu":
            return self.moved(receiver, Place.CPU)
        if method == "to":
            action, place = self.to_target(node, env)
            if action == "move":
                return self.moved(receiver, place)
            if action == "keep" and receiver is not None:
                return replace(receiver, grad_free=receiver.grad_free or bool(self.no_grad))
            return None
        if receiver is None or receiver.module or receiver.moved_in_place:
            return None
        if method in PYTHON_METHODS:
            return PYTHON_SCALAR if method in {"item", "dim", "numel", "nelement", "element_size", "get_device"} or (method == "size" and (node.args or node.keywords)) else PYTHON
        if method in NEW_FACTORIES:
            device_arg = keyword_value(node, "device")
            if device_arg is not None:
                target = self.device_target(device_arg, env)
                return self.fresh(target, tensor=True, grad_free=True) if target is not None else None
            if receiver.place == Place.CPU:
                return self.fresh(Place.CPU, tensor=True, grad_free=True, rank=Rank.UNKNOWN, origins=receiver.origins)
            return self.fresh(receiver.place, tensor=True, grad_free=True)
        if method == "type_as" and args:
            other = args[0]
            return self.same_place(other, "float") if other is not None else None
        if method in TENSOR_METHOD_COMBINERS:
            func = node.func
            operands = [(receiver, func.value)] + [(args[index], arg.value) for index, arg in enumerate(call_args(node)) if arg.keyword is None and not arg.star]
            rank = Rank.UNKNOWN if method in PRODUCT_COMBINERS else None
            return self.combine(node, operands, rank)
        if method in ELEMENTWISE_UNARY or method in SAME_DEVICE_OTHER or method in ARRAY_SHAPING:
            return self.same_place(receiver, method)
        return None

    def is_float64(self, node: ast.expr) -> bool:
        return self.ctx.qualname(node) in {"torch.float64", "torch.double", "torch.DoubleTensor"} or (
            literal_string(node) == "torch.DoubleTensor"
        )

    def makes_float64_on_device(self, node: ast.Call, method: str, receiver: Optional[Value], env: Env) -> bool:
        """TDV601: ``x.double()``/``x.to(torch.float64)``/``x.type(torch.DoubleTensor)`` of a
        tensor or module on a device; ``y.to(device, torch.float64)``; ``y.double().to(device)``."""
        on_device = receiver is not None and receiver.place == Place.DEVICE
        if method == "double":
            return on_device and not (node.args or node.keywords)
        if method == "type":
            arguments = call_args(node)
            return on_device and bool(arguments) and self.is_float64(arguments[0].value)
        if method != "to":
            return False
        dtype = keyword_value(node, "dtype")
        casts = [dtype] if dtype is not None else [arg for arg in positional_args(node) if self.is_float64(arg)]
        action, place = self.to_target(node, env)
        if casts and self.is_float64(casts[0]):
            return (action == "keep" and on_device) or (action == "move" and place == Place.DEVICE)
        source = node.func.value
        source_dtype = keyword_value(source, "dtype") if isinstance(source, ast.Call) else None
        made_float64 = isinstance(source, ast.Call) and (
            last_name(source.func) == "double" or (source_dtype is not None and self.is_float64(source_dtype))
        )
        return made_float64 and action == "move" and place == Place.DEVICE

    def moved(self, receiver: Optional[Value], place: Place) -> Value:
        """The result of ``.to(place)``/``.cuda()``/``.cpu()``: what it is stays, where changes."""
        if receiver is None:
            return self.fresh(place)
        if receiver.place == place:
            return replace(receiver, grad_free=receiver.grad_free or bool(self.no_grad))
        rank = receiver.rank if place == Place.CPU and receiver.place == Place.CPU else Rank.UNKNOWN
        return self.fresh(
            place, tensor=receiver.tensor, module=receiver.module, moved_in_place=receiver.moved_in_place,
            rank=rank, grad_free=receiver.grad_free, constructor=receiver.constructor,
        )

    def module_call(self, node: ast.Call, callee: Optional[Value], args: List[Optional[Value]], env: Env) -> Optional[Value]:
        """``model(x)``: a module moved to a device returns device tensors for device inputs."""
        if callee is None or callee.place not in TENSOR_PLACES or callee.tensor or callee.parameter:
            return None
        tensors: List[Tuple[Optional[Value], ast.expr]] = []
        must_match: List[Tuple[Optional[Value], ast.expr]] = []
        positional = 0
        for value, arg in zip(args, call_args(node)):
            if value is not None and value.place == Place.SEQUENCE and isinstance(arg.value, (ast.Tuple, ast.List)):
                items = list(zip(value.elements, arg.value.elts))
            else:
                items = [(value, arg.value)]
            tensors.extend(items)
            if arg.keyword is None and not arg.star:
                # the input, and an RNN's initial state; other arguments (a loss's targets
                # and lengths) may legally stay on the CPU for some modules
                if positional == 0 or (positional == 1 and callee.constructor in RECURRENT_MODULES):
                    must_match.extend(items)
                positional += 1
        operands = [self.operand(value, expression) for value, expression in tensors if value is not None and value.place in TENSOR_PLACES and not value.module]
        if callee.module:
            if callee.place in ON_DEVICE:
                cpu = [
                    self.operand(value, expression) for value, expression in must_match
                    if value is not None and value.place == Place.CPU and value.tensor and value.rank == Rank.ARRAY
                ]
                partners = tuple(o for o in operands if o.value.place in ON_DEVICE)
                if cpu:
                    self.record_mix(node, Operand(callee, dotted_name(node.func)), cpu, partners, module_call=True)
            else:
                device = [
                    self.operand(value, expression) for value, expression in must_match
                    if value is not None and value.place == Place.DEVICE and not value.module
                ]
                if device:
                    self.record_mix(node, device[0], [Operand(callee, dotted_name(node.func))], tuple(device[1:]), module_call=True)
        places = {o.value.place for o in operands}
        if callee.place in ON_DEVICE and (Place.DEVICE in places or Place.MODULE in places):
            return self.fresh(callee.place)
        return None

    def operand(self, value: Value, expression: Optional[ast.expr]) -> Operand:
        return Operand(value, dotted_name(expression) if expression is not None else None)

    def combine(self, node: ast.AST, operands: Sequence[Tuple[Optional[Value], ast.expr]], rank: Optional[Rank] = None) -> Optional[Value]:
        """An operation whose tensor operands must share a device (0-dim CPU ones excepted).
        ``rank`` is the result's rank for CPU operands when it is not elementwise."""
        unknown = False
        tensors: List[Operand] = []
        for value, expression in operands:
            if value is None:
                unknown = True
            elif value.module or value.moved_in_place or value.place in (Place.SEQUENCE, Place.LIST):
                unknown = True
            elif value.place in TENSOR_PLACES:
                tensors.append(self.operand(value, expression))
        device_side = [o for o in tensors if o.value.place in ON_DEVICE]
        cpu_arrays = [o for o in tensors if o.value.place == Place.CPU and o.value.rank == Rank.ARRAY]
        if device_side and cpu_arrays:
            explicit = [o for o in device_side if o.value.place == Place.DEVICE]
            first = (explicit or device_side)[0]
            partners = tuple(o for o in device_side if o is not first)
            self.record_mix(node, first, cpu_arrays, partners)
        grad_free = bool(self.no_grad) or (not unknown and all(o.value.grad_free for o in tensors))
        if any(o.value.place == Place.DEVICE for o in tensors):
            return self.fresh(Place.DEVICE, tensor=True, grad_free=grad_free)
        if device_side:
            return self.fresh(Place.MODULE, tensor=True, grad_free=grad_free)
        if unknown:
            return None
        if not tensors:
            scalars = all(value is not None and value.rank == Rank.SCALAR for value, _ in operands)
            return PYTHON_SCALAR if scalars else PYTHON
        cpu = [o.value for o in tensors]
        if rank is None:
            if any(v.rank == Rank.ARRAY for v in cpu):
                rank = Rank.ARRAY
            elif all(v.rank == Rank.SCALAR for v in cpu):
                rank = Rank.SCALAR
            else:
                rank = Rank.UNKNOWN
        non_scalar = [v for v in cpu if v.rank != Rank.SCALAR]
        origins: Optional[frozenset] = frozenset()
        for v in non_scalar:
            origins = origins | v.origins if origins is not None and v.origins is not None else None
        stuck = frozenset().union(*(v.stuck_attributes for v in cpu))
        return Value(Place.CPU, rank=rank, tensor=True, grad_free=grad_free, origins=origins or None, stuck_attributes=stuck)

    def record_mix(self, node: ast.AST, device_side: Operand, cpu_sides: Sequence[Operand], partners: Tuple[Operand, ...], module_call: bool = False) -> None:
        if self.recording:
            return
        self.analysis.result.mixes.append(Mix(node, device_side, tuple(cpu_sides), partners, self.scope, module_call))
