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

import enum
import weakref
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from ..core import guards
from ..core.context import BindingCollector, FileContext, dotted_name, import_aliases, last_name
from .common import source_of

MAX_LOOP_PASSES = 3


class Place(enum.Enum):
    DEVICE = "device"  # moved to or created on an accelerator (on a GPU machine)
    MODULE = "module"  # on the module's device: forward's tensors, parameters, buffers
    CPU = "cpu"
    PYTHON = "python"  # a number, string, bool, None, shape: not a tensor
    LIST = "list"  # a Python list or tuple of plain values (data for ``torch.tensor``)
    SEQUENCE = "sequence"  # a tuple or list literal whose elements are tracked one by one


class Rank(enum.Enum):
    SCALAR = "0-dim"  # a legal partner of a device tensor
    ARRAY = "n-dim"
    UNKNOWN = "unknown"


ON_DEVICE = (Place.DEVICE, Place.MODULE)
TENSOR_PLACES = (Place.DEVICE, Place.MODULE, Place.CPU)


@dataclass(frozen=True)
class Value:
    place: Place
    rank: Rank = Rank.UNKNOWN
    #: Known not to require grad (factories, ``.detach()``, computed under ``no_grad``).
    grad_free: bool = False
    #: Known to be a tensor, not a module or a container that has ``.to()``.
    tensor: bool = False
    #: Known to be an ``nn.Module`` (a call with tensors of the other side raises).
    module: bool = False
    #: Moved in place by a bare ``obj.to(device)``: a module or the like, only ever called.
    moved_in_place: bool = False
    #: An ``nn.Parameter``: it moves with its module.
    parameter: bool = False
    #: For modules: the class name (``LSTM``), which tells which call arguments must match.
    constructor: Optional[str] = None
    #: For CPU values: the factory calls without ``device=`` that made it (a fix gives them
    #: ``device=``); None when some part did not come from such a factory.
    origins: Optional[frozenset] = None
    #: Plain (unregistered) tensor attributes set in ``__init__`` this value comes from.
    stuck_attributes: frozenset = frozenset()
    #: For Python values that name a device: where it points.
    device_spec: Optional[Place] = None
    elements: Tuple[Optional["Value"], ...] = ()


PYTHON = Value(Place.PYTHON)
PYTHON_SCALAR = Value(Place.PYTHON, rank=Rank.SCALAR)
LIST = Value(Place.LIST)


@dataclass
class Scope:
    """What the analysis knows about the function being walked."""

    node: cst.CSTNode  # FunctionDef or Module
    #: Tensor parameters, in order: their values are on the module's device.
    tensor_params: Tuple[str, ...] = ()
    class_facts: Optional["ClassFacts"] = None
    #: Inside forward or a function receiving tensors, where TDV403 applies.
    tensor_function: bool = False


@dataclass(frozen=True)
class NumpyCall:
    call: cst.Call
    receiver: Value


@dataclass(frozen=True)
class Operand:
    value: Value
    #: Dotted name of the operand when it is a plain name (``x``, ``self.w``), for fixes.
    key: Optional[str]


@dataclass(frozen=True)
class Mix:
    """An operation combining a device-side operand with a non-0-dim CPU operand."""

    node: cst.CSTNode
    device_side: Operand
    cpu_sides: Tuple[Operand, ...]
    #: Other device-side tensors of the operation whose names could spell the device.
    device_partners: Tuple[Operand, ...]
    scope: Scope
    #: A module called with tensors of the other side (no fix can be written at the call).
    module_call: bool = False


@dataclass
class FileInference:
    numpy_calls: List[NumpyCall] = field(default_factory=list)
    mixes: List[Mix] = field(default_factory=list)
    #: id(factory call) -> the environment where it was evaluated.
    factory_sites: Dict[int, Dict[str, Optional[Value]]] = field(default_factory=dict)


@dataclass
class ClassFacts:
    module_like: bool
    attributes: Dict[str, Optional[Value]] = field(default_factory=dict)


# -- vocabulary -------------------------------------------------------------------------------
_SIZE_FACTORIES = {"zeros", "ones", "empty", "rand", "randn", "full"}
_ARRAY_FACTORIES = {"arange", "range", "linspace", "logspace", "eye", "randperm", "tril_indices", "triu_indices"}
_DATA_FACTORIES = {"tensor", "as_tensor", "asarray"}
_LEGACY_CPU_CONSTRUCTORS = {
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
    "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
}
_LIKE_FACTORIES = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"}
_NEW_FACTORIES = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}

#: torch functions whose tensor arguments must share a device; the first group takes a list.
_LIST_COMBINERS = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"}
_ELEMENTWISE_COMBINERS = {
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "maximum", "minimum", "eq", "ne", "lt", "gt", "le", "ge", "where", "atan2", "pow",
    "remainder", "fmod", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "lerp", "hypot", "masked_fill",
}
_PRODUCT_COMBINERS = {"matmul", "mm", "bmm", "dot", "outer", "cdist", "einsum", "addmm", "baddbmm", "kron", "cross"}
_FUNCTIONAL_COMBINERS = {
    "linear", "bilinear", "embedding", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "kl_div", "cosine_similarity", "pairwise_distance", "conv1d", "conv2d", "conv3d",
}
#: Tensor-to-tensor functions and methods: the result stays where the (first) input is.
_ELEMENTWISE_UNARY = {
    "abs", "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sigmoid", "tanh", "relu",
    "gelu", "silu", "sin", "cos", "floor", "ceil", "round", "trunc", "sign", "clamp", "clip",
    "clamp_min", "clamp_max", "reciprocal", "square", "erf", "logical_not", "bitwise_not",
    "nan_to_num", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte",
    "char", "contiguous", "clone", "detach", "flip", "roll", "t", "transpose", "permute",
    "softmax", "log_softmax", "dropout", "masked_fill", "fill_", "zero_", "requires_grad_",
    "pin_memory", "tril", "triu", "cumsum", "cumprod", "normalize", "layer_norm", "pad",
    "leaky_relu", "elu", "softplus", "interpolate",
}
_ARRAY_SHAPING = {"unsqueeze", "flatten", "expand", "expand_as", "repeat", "repeat_interleave", "view_as", "reshape_as", "unflatten"}
_SAME_DEVICE_OTHER = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "std", "var",
    "norm", "view", "reshape", "squeeze", "narrow", "select", "index_select", "gather",
    "masked_select", "nonzero", "topk", "sort", "argsort", "chunk", "split", "unbind",
    "diagonal", "diag", "matmul", "mm", "bmm", "einsum", "unique", "logsumexp", "all", "any",
    "where", "outer", "T",
}
_TENSOR_METHOD_COMBINERS = (_ELEMENTWISE_COMBINERS | _PRODUCT_COMBINERS | {"add_", "sub_", "mul_", "div_", "masked_fill_"}) - {"where"}
_PYTHON_METHODS = {"item", "tolist", "size", "dim", "numel", "nelement", "element_size", "get_device", "data_ptr", "stride", "is_contiguous"}
_PYTHON_ATTRIBUTES = {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "grad_fn", "layout", "is_leaf", "names", "is_sparse"}
_VIEW_ATTRIBUTES = {"T", "mT", "H", "mH", "data", "real", "imag", "grad"}
_DTYPES = {
    "float", "float32", "float64", "float16", "half", "bfloat16", "double", "int", "int8",
    "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
}
_NO_GRAD_CONTEXTS = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
_DEFAULT_DEVICE_SETTERS = ("set_default_device", "set_default_tensor_type")
#: Methods that move a module in place (and do nothing to a tensor's binding).
_MOVING_METHODS = {"to", "cuda", "cpu"}
#: Class methods that change how ``.to()`` treats attributes.
_MOVE_OVERRIDES = {"_apply", "to", "cuda", "cpu", "_load_from_state_dict"}
_OPERATORS = (
    cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.FloorDivide, cst.Modulo, cst.Power,
    cst.BitAnd, cst.BitOr, cst.BitXor, cst.LeftShift, cst.RightShift,
)
_AUG_OPERATORS = (
    cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign, cst.FloorDivideAssign,
    cst.ModuloAssign, cst.PowerAssign, cst.BitAndAssign, cst.BitOrAssign, cst.BitXorAssign,
    cst.MatrixMultiplyAssign,
)
_FUNCTIONAL_TENSOR_KEYWORDS = {"weight", "bias", "target", "pos_weight"}
_RECURRENT_MODULES = {"RNN", "LSTM", "GRU"}
_SCALAR_BUILTINS = {"len", "int", "float", "round", "abs"}
#: Module methods that leave the module where it is.
_MODULE_KEEPING_METHODS = {"train", "eval", "parameters", "named_parameters", "zero_grad", "state_dict", "load_state_dict", "requires_grad_", "modules", "children", "named_modules", "buffers"}
#: Methods after which a receiver that may be a module is still where it was.
_KEEPING_METHODS = (
    _MOVING_METHODS | _MODULE_KEEPING_METHODS | _PYTHON_METHODS | _ELEMENTWISE_UNARY | _ARRAY_SHAPING
    | _SAME_DEVICE_OTHER | _TENSOR_METHOD_COMBINERS | _NEW_FACTORIES | {"numpy", "type_as"}
)
_COMPARISONS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _positional(call: cst.Call) -> List[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def _string(node: cst.BaseExpression) -> Optional[str]:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _place_of_device_string(text: str) -> Optional[Place]:
    if text == "cpu" or text.startswith("cpu:"):
        return Place.CPU
    if text.split(":")[0] in {"cuda", "mps", "xpu", "npu", "hpu", "gpu"}:
        return Place.DEVICE
    return None


def _names_a_device(name: str) -> bool:
    lowered = name.lower()
    if "dtype" in lowered:
        return False
    parts = lowered.strip("_").split("_")
    return "device" in lowered or "dev" in parts or "gpu" in parts or lowered.endswith("rank") or "cuda" in parts


def _is_literal(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.UnaryOperation):
        return _is_literal(node.expression)
    return isinstance(node, (cst.Integer, cst.Float, cst.Imaginary)) or (
        isinstance(node, cst.Name) and node.value in {"True", "False"}
    )


def _size_rank(args: Sequence[cst.Arg]) -> Rank:
    """Rank of a tensor whose size is given by these arguments (``zeros(2, 3)``, ``zeros(())``)."""
    if not args or any(arg.star for arg in args):
        return Rank.UNKNOWN
    if len(args) == 1:
        only = args[0].value
        if isinstance(only, (cst.Tuple, cst.List)):
            return Rank.ARRAY if only.elements else Rank.SCALAR
    return Rank.ARRAY


def _join(a: Optional[Value], b: Optional[Value]) -> Optional[Value]:
    if a is b or a == b:
        return a
    if a is None or b is None or a.place != b.place:
        return None
    if a.place == Place.SEQUENCE:
        if len(a.elements) != len(b.elements):
            return None
        return replace(a, elements=tuple(_join(x, y) for x, y in zip(a.elements, b.elements)))
    origins = a.origins | b.origins if a.origins is not None and b.origins is not None else None
    return Value(
        place=a.place,
        rank=a.rank if a.rank == b.rank else Rank.UNKNOWN,
        grad_free=a.grad_free and b.grad_free,
        tensor=a.tensor and b.tensor,
        module=a.module and b.module,
        moved_in_place=a.moved_in_place and b.moved_in_place,
        constructor=a.constructor if a.constructor == b.constructor else None,
        parameter=a.parameter and b.parameter,
        origins=origins,
        stuck_attributes=a.stuck_attributes | b.stuck_attributes,
        device_spec=a.device_spec if a.device_spec == b.device_spec else None,
    )


Env = Dict[str, Optional[Value]]


def _join_envs(envs: Iterable[Optional[Env]]) -> Optional[Env]:
    live = [env for env in envs if env is not None]
    if not live:
        return None
    if len(live) == 1:
        return dict(live[0])
    keys = set().union(*live)
    joined: Env = {}
    for key in keys:
        value = live[0].get(key)
        present = key in live[0]
        for other in live[1:]:
            present = present and key in other
            value = _join(value, other.get(key))
        # A key absent on one side falls back to class facts there: unknown after the join.
        joined[key] = value if present else None
    return joined


def _element_of(value: Optional[Value]) -> Optional[Value]:
    """What unpacking or iterating a value yields."""
    if value is None:
        return None
    if value.place in ON_DEVICE:
        return Value(value.place)
    if value.place == Place.CPU and value.tensor:
        return Value(Place.CPU, tensor=True, grad_free=value.grad_free, origins=value.origins)
    if value.place == Place.LIST:
        return PYTHON
    return None


# -- the file-level pre-pass: statement shapes only ---------------------------------------------
@dataclass
class _FileShape:
    """What the pre-pass learns about the file: its functions and classes, and which
    attributes are assigned (or moved, or registered) where."""

    functions: List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = field(default_factory=list)
    #: attribute name -> functions containing an assignment or in-place move of ``<obj>.name``.
    attribute_sites: Dict[str, List[Optional[cst.CSTNode]]] = field(default_factory=dict)
    #: name given to ``register_buffer``/``register_parameter``... -> functions doing it.
    registered: Dict[str, List[Optional[cst.CSTNode]]] = field(default_factory=dict)
    uses_setattr: bool = False
    module_classes: set = field(default_factory=set)


def _statement_calls(statement: cst.CSTNode) -> Iterable[cst.Call]:
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            value = getattr(small, "value", None)
            if isinstance(value, cst.Call):
                yield value


class _ShapeWalker:
    def __init__(self) -> None:
        self.shape = _FileShape()

    def walk(self, body: Sequence[cst.CSTNode], function: Optional[cst.CSTNode], klass: Optional[cst.ClassDef]) -> None:
        for statement in body:
            if isinstance(statement, cst.FunctionDef):
                self.shape.functions.append((statement, klass))
                self.walk(_block(statement.body), statement, None)
            elif isinstance(statement, cst.ClassDef):
                if any(_looks_like_module_base(base.value) for base in statement.bases):
                    self.shape.module_classes.add(statement.name.value)
                self.walk(_block(statement.body), function, statement)
            elif isinstance(statement, cst.SimpleStatementLine):
                self._simple(statement, function)
            else:
                for inner in _child_blocks(statement):
                    self.walk(inner, function, klass)

    def _simple(self, statement: cst.SimpleStatementLine, function: Optional[cst.CSTNode]) -> None:
        for small in statement.body:
            targets: List[cst.BaseExpression] = []
            if isinstance(small, cst.Assign):
                targets = [t.target for t in small.targets]
            elif isinstance(small, (cst.AugAssign, cst.AnnAssign)):
                targets = [small.target]
            for target in targets:
                for attribute in _attribute_targets(target):
                    self.shape.attribute_sites.setdefault(attribute, []).append(function)
        for call in _statement_calls(statement):
            func = call.func
            name = last_name(func)
            if name == "setattr":
                self.shape.uses_setattr = True
            elif name in {"register_buffer", "register_parameter", "register_module", "add_module"} and call.args:
                registered = _string(call.args[0].value)
                if registered:
                    self.shape.registered.setdefault(registered, []).append(function)
            elif name in _MOVING_METHODS and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Attribute):
                self.shape.attribute_sites.setdefault(func.value.attr.value, []).append(function)


def _attribute_targets(target: cst.BaseExpression) -> Iterable[str]:
    if isinstance(target, cst.Attribute):
        yield target.attr.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _attribute_targets(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _attribute_targets(target.value)


def _looks_like_module_base(base: cst.BaseExpression) -> bool:
    name = dotted_name(base) or ""
    return name.endswith("Module") or name.endswith(("nn.Sequential", "ModuleList", "ModuleDict"))


def _block(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    if isinstance(suite, cst.IndentedBlock):
        return suite.body
    return [cst.SimpleStatementLine(body=suite.body)]


def _child_blocks(statement: cst.CSTNode) -> List[Sequence[cst.CSTNode]]:
    blocks: List[Sequence[cst.CSTNode]] = []
    body = getattr(statement, "body", None)
    if isinstance(body, cst.BaseSuite):
        blocks.append(_block(body))
    for handler in getattr(statement, "handlers", ()):
        blocks.append(_block(handler.body))
    for case in getattr(statement, "cases", ()):
        blocks.append(_block(case.body))
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        blocks.append([orelse])
    elif orelse is not None:
        blocks.append(_block(orelse.body))
    final = getattr(statement, "finalbody", None)
    if final is not None:
        blocks.append(_block(final.body))
    return blocks


# -- the walk ----------------------------------------------------------------------------------
class _FunctionWalk:
    def __init__(self, analysis: "_FileAnalysis", scope: Scope) -> None:
        self.analysis = analysis
        self.ctx = analysis.ctx
        self.scope = scope
        self.recording = 0  # > 0 while a loop body is walked to find its fixed point
        self.no_grad = 0
        self.default_device_context = 0
        self.loop_exits: List[List[Env]] = []
        self.returns: List[Env] = []

    # -- blocks and statements ----------------------------------------------------------------
    def block(self, statements: Sequence[cst.CSTNode], env: Env) -> Optional[Env]:
        for statement in statements:
            env = self.statement(statement, env)
            if env is None:
                return None
        return env

    def suite(self, suite: cst.BaseSuite, env: Env) -> Optional[Env]:
        return self.block(_block(suite), env)

    def statement(self, statement: cst.CSTNode, env: Env) -> Optional[Env]:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                env = self.small_statement(small, env)
                if env is None:
                    return None
            return env
        if isinstance(statement, cst.If):
            self.expr(statement.test, env)
            taken = self.suite(statement.body, dict(env))
            if statement.orelse is None:
                other: Optional[Env] = env
            elif isinstance(statement.orelse, cst.If):
                other = self.statement(statement.orelse, dict(env))
            else:
                other = self.suite(statement.orelse.body, dict(env))
            return _join_envs([taken, other])
        if isinstance(statement, (cst.For, cst.While)):
            return self.loop(statement, env)
        if isinstance(statement, cst.With):
            return self.with_statement(statement, env)
        if isinstance(statement, (cst.Try, cst.TryStar)):
            return self.try_statement(statement, env)
        if isinstance(statement, cst.FunctionDef):
            env[statement.name.value] = None  # walked on its own
            return env
        if isinstance(statement, cst.ClassDef):
            env.pop(statement.name.value, None)  # calling it constructs (a module, maybe)
            return env
        # match statements and anything newer: forget what they may bind, report nothing inside
        return self.forget_bindings(statement, env)

    def forget_bindings(self, statement: cst.CSTNode, env: Env) -> Env:
        collector = BindingCollector(statement)
        statement.visit(collector)
        for name in collector.names:
            self.assign_key(name, None, env)
        return env

    def small_statement(self, small: cst.CSTNode, env: Env) -> Optional[Env]:
        if isinstance(small, cst.Assign):
            value = self.expr(small.value, env)
            for target in small.targets:
                self.assign(target.target, value, env)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self.assign(small.target, self.expr(small.value, env), env)
        elif isinstance(small, cst.AugAssign):
            current = self.expr(small.target, env)
            value = self.expr(small.value, env)
            if isinstance(small.operator, _AUG_OPERATORS):
                matmul = isinstance(small.operator, cst.MatrixMultiplyAssign)
                result = self.combine(small, [(current, small.target), (value, small.value)], Rank.UNKNOWN if matmul else None)
                if current is not None and current.place == Place.CPU and current.rank == Rank.ARRAY and value is not None and value.place in ON_DEVICE:
                    result = current  # the in-place operation raises: the target stays on the CPU
            else:
                result = None
            self.assign(small.target, result, env)
        elif isinstance(small, cst.Expr):
            self.expression_statement(small.value, env)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                self.expr(small.value, env)
            self.returns.append(env)
            return None
        elif isinstance(small, cst.Raise):
            if small.exc is not None:
                self.expr(small.exc, env)
            return None
        elif isinstance(small, (cst.Break, cst.Continue)):
            if self.loop_exits:
                self.loop_exits[-1].append(dict(env))
            return None
        elif isinstance(small, cst.Assert):
            self.expr(small.test, env)
        elif isinstance(small, cst.Del):
            for target in _flatten_targets(small.target):
                key = dotted_name(target)
                if key:
                    self.assign_key(key, None, env)
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            for name in import_aliases(small):
                self.assign_key(name, None, env)
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            for item in small.names:
                self.assign_key(item.name.value, None, env)
        return env

    def expression_statement(self, value: cst.BaseExpression, env: Env) -> None:
        """``model.to(device)`` on its own moves a module in place (a tensor stays where it is)."""
        result = self.expr(value, env)
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)):
            return
        method = value.func.attr.value
        key = dotted_name(value.func.value)
        if method not in _MOVING_METHODS or key is None:
            return
        receiver = self.lookup(key, env)
        if receiver is not None and receiver.tensor:
            return  # an unassigned ``x.to(device)``: x itself does not move
        if result is not None and result.place in (Place.DEVICE, Place.CPU):
            if receiver is not None and receiver.module:
                self.assign_key(key, Value(result.place, module=True), env)
            else:
                self.assign_key(key, Value(result.place, moved_in_place=True), env)

    def loop(self, statement, env: Env) -> Optional[Env]:
        is_for = isinstance(statement, cst.For)
        iterated = self.expr(statement.iter, env) if is_for else None
        head = dict(env)
        self.recording += 1
        try:
            for _ in range(MAX_LOOP_PASSES):
                end, exits = self.loop_body(statement, head, iterated)
                widened = _join_envs([head, end, *exits])
                if widened == head:
                    break
                head = widened
            else:
                head = {key: (value if end is not None and end.get(key) == value else None) for key, value in head.items()}
        finally:
            self.recording -= 1
        end, exits = self.loop_body(statement, head, iterated)
        after = _join_envs([head, end, *exits])
        if statement.orelse is not None:
            after = _join_envs([self.suite(statement.orelse.body, dict(head)), *exits]) if after is not None else None
        return after

    def loop_body(self, statement, head: Env, iterated: Optional[Value]) -> Tuple[Optional[Env], List[Env]]:
        env = dict(head)
        if isinstance(statement, cst.For):
            self.assign(statement.target, _element_of(iterated), env)
        else:
            self.expr(statement.test, env)
        self.loop_exits.append([])
        try:
            end = self.suite(statement.body, env)
        finally:
            exits = self.loop_exits.pop()
        return end, exits

    def with_statement(self, statement: cst.With, env: Env) -> Optional[Env]:
        no_grad = default_device = 0
        for item in statement.items:
            self.expr(item.item, env)
            context = item.item.func if isinstance(item.item, cst.Call) else item.item
            name = self.ctx.qualname(context)
            if name in _NO_GRAD_CONTEXTS:
                no_grad = 1
            elif name == "torch.device" or (name is None and _names_a_device(last_name(context) or "")):
                default_device = 1
            if item.asname is not None:
                self.assign(item.asname.name, None, env)
        self.no_grad += no_grad
        self.default_device_context += default_device
        try:
            return self.suite(statement.body, env)
        finally:
            self.no_grad -= no_grad
            self.default_device_context -= default_device

    def try_statement(self, statement, env: Env) -> Optional[Env]:
        body_end = self.suite(statement.body, dict(env))
        # an exception may leave the body anywhere: handlers start from what both ends agree on
        raised = _join_envs([env, body_end])
        ends = []
        for handler in statement.handlers:
            start = dict(raised)
            if handler.name is not None:
                self.assign(handler.name.name, None, start)
            ends.append(self.suite(handler.body, start))
        if statement.orelse is not None and body_end is not None:
            body_end = self.suite(statement.orelse.body, body_end)
        joined = _join_envs([body_end, *ends])
        if statement.finalbody is not None:
            start = joined if joined is not None else dict(raised)
            final = self.suite(statement.finalbody.body, dict(start))
            return final if joined is not None else None
        return joined

    # -- bindings --------------------------------------------------------------------------
    def assign(self, target: cst.BaseExpression, value: Optional[Value], env: Env) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = [e.value for e in target.elements]
            starred = any(isinstance(e, cst.StarredElement) for e in target.elements)
            if value is not None and value.place == Place.SEQUENCE and not starred and len(value.elements) == len(elements):
                for element, item in zip(elements, value.elements):
                    self.assign(element, item, env)
            else:
                for element in elements:
                    self.assign(element, None if isinstance(element, cst.StarredElement) else _element_of(value), env)
            return
        if isinstance(target, cst.StarredElement):
            self.assign(target.value, None, env)
            return
        if isinstance(target, cst.Subscript):
            self.expr(target.value, env)
            return
        key = dotted_name(target)
        if key is not None:
            self.assign_key(key, value, env)
        elif isinstance(target, cst.Attribute):
            self.expr(target.value, env)

    def assign_key(self, key: str, value: Optional[Value], env: Env) -> None:
        prefix = key + "."
        for stale in [k for k in env if k.startswith(prefix)]:
            env[stale] = None
        env[key] = value

    def forget_under(self, key: str, env: Env) -> None:
        """A call received ``key``: what was known about its attributes may have changed."""
        prefix = key + "."
        for stale in [k for k in env if k.startswith(prefix)]:
            env[stale] = None

    def lookup(self, key: str, env: Env) -> Optional[Value]:
        if key in env:
            return env[key]
        facts = self.scope.class_facts
        if facts is not None and key.startswith("self.") and key.count(".") == 1:
            return facts.attributes.get(key)
        return None

    # -- expressions ------------------------------------------------------------------------
    def expr(self, node: cst.BaseExpression, env: Env) -> Optional[Value]:
        if isinstance(node, cst.Name):
            if node.value in {"True", "False", "None"}:
                return PYTHON
            return self.lookup(node.value, env)
        if isinstance(node, (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString)):
            if isinstance(node, cst.SimpleString):
                text = _string(node)
                return Value(Place.PYTHON, device_spec=_place_of_device_string(text) if text else None)
            return PYTHON if isinstance(node, cst.ConcatenatedString) else PYTHON_SCALAR
        if isinstance(node, cst.FormattedString):
            for part in node.parts:
                if isinstance(part, cst.FormattedStringExpression):
                    self.expr(part.expression, env)
            head = node.parts[0] if node.parts else None
            spec = _place_of_device_string(head.value) if isinstance(head, cst.FormattedStringText) else None
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
            if isinstance(node.operator, _OPERATORS):
                return self.combine(node, [(left, node.left), (right, node.right)])
            return None
        if isinstance(node, cst.Comparison):
            left = self.expr(node.left, env)
            values = [self.expr(target.comparator, env) for target in node.comparisons]
            if len(node.comparisons) == 1 and isinstance(node.comparisons[0].operator, _COMPARISONS):
                comparator = node.comparisons[0].comparator
                return self.combine(node, [(left, node.left), (values[0], comparator)])
            return PYTHON
        if isinstance(node, cst.UnaryOperation):
            operand = self.expr(node.expression, env)
            return PYTHON if isinstance(node.operator, cst.Not) else operand
        if isinstance(node, cst.BooleanOperation):
            return _join(self.expr(node.left, env), self.expr(node.right, env))
        if isinstance(node, cst.IfExp):
            self.expr(node.test, env)
            body, orelse = self.expr(node.body, env), self.expr(node.orelse, env)
            if any(arm is not None and arm.device_spec is not None for arm in (body, orelse)):
                return Value(Place.PYTHON, device_spec=self.device_target(node, env))
            return _join(body, orelse)
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
        if attr in _PYTHON_ATTRIBUTES:
            if attr == "device":
                return Value(Place.PYTHON, device_spec=base.place)
            return PYTHON
        if attr in _VIEW_ATTRIBUTES:
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
                if receiver is not None and receiver.place in TENSOR_PLACES and func.attr.value not in _KEEPING_METHODS:
                    env[receiver_key] = None  # a module's own method may move it
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
        if name in _SCALAR_BUILTINS:
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
        positional = _positional(node)
        if name == "torch.device":
            return Value(Place.PYTHON, device_spec=self.device_target(node, env))
        if namespace == "torch":
            if leaf in _SIZE_FACTORIES | _ARRAY_FACTORIES | _DATA_FACTORIES | {"randint"} or leaf in _LEGACY_CPU_CONSTRUCTORS:
                return self.factory(node, leaf, env)
            if leaf in _LIKE_FACTORIES:
                return self.like_factory(node, args[0] if args else None, env)
            if leaf == "from_numpy":
                return self.fresh(Place.CPU, rank=Rank.ARRAY, tensor=True, grad_free=True)
            if leaf in _LIST_COMBINERS and positional:
                sequence = self.expr_value_of(positional[0], node, args)
                if sequence is not None and sequence.place == Place.SEQUENCE:
                    listed = positional[0].value
                    items = [item.value for item in listed.elements] if isinstance(listed, (cst.List, cst.Tuple)) else [None] * len(sequence.elements)
                    operands = list(zip(sequence.elements, items))
                    return self.combine(node, operands, Rank.ARRAY)
                return None
            if leaf in _ELEMENTWISE_COMBINERS | _PRODUCT_COMBINERS:
                operands = [(self.expr_value_of(arg, node, args), arg.value) for arg in positional]
                rank = Rank.UNKNOWN if leaf in _PRODUCT_COMBINERS else None
                return self.combine(node, operands, rank)
            if leaf in _ELEMENTWISE_UNARY or leaf in _SAME_DEVICE_OTHER or leaf in _ARRAY_SHAPING:
                return self.same_place(args[0] if args else None, leaf)
        if name in {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}:
            first = args[0] if args else None
            if first is not None and first.place in TENSOR_PLACES:
                return Value(first.place, tensor=True, rank=first.rank, parameter=True)
            return None
        if namespace == "torch.nn.functional":
            if leaf in _FUNCTIONAL_COMBINERS and len(positional) >= 2:
                matched = positional[:3] + [arg for arg in node.args if arg.keyword is not None and arg.keyword.value in _FUNCTIONAL_TENSOR_KEYWORDS]
                operands = [(self.expr_value_of(arg, node, args), arg.value) for arg in matched]
                return self.combine(node, operands, Rank.UNKNOWN)
            return self.same_place(args[0] if args else None, leaf)
        if namespace == "torch.nn" and leaf[:1].isupper():
            return self.fresh(Place.CPU, module=True, constructor=leaf)
        return None

    def expr_value_of(self, arg: cst.Arg, call: cst.Call, values: List[Optional[Value]]) -> Optional[Value]:
        return values[list(call.args).index(arg)]

    def same_place(self, source: Optional[Value], method: str) -> Optional[Value]:
        if source is None or source.place not in TENSOR_PLACES or source.module:
            return None
        if source.place == Place.CPU:
            if method in _ELEMENTWISE_UNARY:
                rank = source.rank
            elif method in _ARRAY_SHAPING:
                rank = Rank.ARRAY
            else:
                rank = Rank.UNKNOWN
            keep_origins = rank == Rank.ARRAY or method in _ELEMENTWISE_UNARY
            return self.fresh(
                Place.CPU, rank=rank, tensor=True, grad_free=source.grad_free or method == "detach",
                origins=source.origins if keep_origins else None, stuck_attributes=source.stuck_attributes,
            )
        return self.fresh(source.place, tensor=True, grad_free=source.grad_free or method == "detach")

    def factory(self, node: cst.Call, leaf: str, env: Env) -> Optional[Value]:
        """``torch.zeros(...)`` and friends: on the ``device=`` given, else on the CPU."""
        positional = _positional(node)
        grad_free = not (_keyword(node, "requires_grad") and not _is_false(_keyword(node, "requires_grad").value))
        if leaf in _DATA_FACTORIES or leaf in _LEGACY_CPU_CONSTRUCTORS:
            rank = self.data_rank(positional[0].value if positional else None, env, legacy=leaf in _LEGACY_CPU_CONSTRUCTORS)
            if rank is None:
                return None
        elif leaf in _SIZE_FACTORIES:
            size = _keyword(node, "size")
            rank = _size_rank([size] if size else positional[:1] if leaf == "full" else positional)
        elif leaf == "randint":
            size = _keyword(node, "size")
            shaped = [size] if size else [arg for arg in positional if isinstance(arg.value, (cst.Tuple, cst.List))]
            rank = _size_rank(shaped[:1])
        else:
            rank = Rank.ARRAY
        device_arg = _keyword(node, "device")
        if device_arg is not None:
            target = self.device_target(device_arg.value, env)
            if target is None:
                return None
            return self.fresh(target, rank=rank if target == Place.CPU else Rank.UNKNOWN, tensor=True, grad_free=grad_free)
        if self.analysis.default_device_changed or self.default_device_context:
            return None
        if leaf in _LEGACY_CPU_CONSTRUCTORS and self.ctx.qualname(node.func) != f"torch.{leaf}":
            return None
        if not self.recording:
            self.analysis.result.factory_sites[id(node)] = dict(env)
        return self.fresh(Place.CPU, rank=rank, tensor=True, grad_free=grad_free, origins=frozenset([node]))

    def data_rank(self, data: Optional[cst.BaseExpression], env: Env, legacy: bool) -> Optional[Rank]:
        """Rank of ``torch.tensor(data)``; None when data may be a tensor (the copy stays put)."""
        if legacy:
            return Rank.ARRAY  # torch.FloatTensor(2, 3) / (list) / () are never 0-dim
        if data is None:
            return None
        if _is_literal(data):
            return Rank.SCALAR
        if isinstance(data, (cst.List, cst.Tuple, cst.ListComp)):
            return Rank.ARRAY
        if isinstance(data, cst.Name):
            known = self.lookup(data.value, env)
            if known is not None and known.place == Place.LIST:
                return Rank.ARRAY
            if known is not None and known.place == Place.PYTHON and known.rank == Rank.SCALAR:
                return Rank.SCALAR
        return None

    def like_factory(self, node: cst.Call, source: Optional[Value], env: Env) -> Optional[Value]:
        device_arg = _keyword(node, "device")
        if device_arg is not None:
            target = self.device_target(device_arg.value, env)
            return self.fresh(target, tensor=True, grad_free=True) if target is not None else None
        if source is None or source.place not in TENSOR_PLACES:
            return None
        return self.fresh(source.place, tensor=True, grad_free=True, rank=source.rank if source.place == Place.CPU else Rank.UNKNOWN, origins=source.origins)

    def device_target(self, node: cst.BaseExpression, env: Env) -> Optional[Place]:
        """Where a device argument (``device=``, ``.to(...)``) points, on a GPU machine."""
        text = _string(node)
        if text is not None:
            return _place_of_device_string(text)
        if isinstance(node, cst.FormattedString):
            head = node.parts[0] if node.parts else None
            return _place_of_device_string(head.value) if isinstance(head, cst.FormattedStringText) else None
        if isinstance(node, cst.Integer):
            return Place.DEVICE
        if isinstance(node, cst.IfExp):
            body, orelse = self.device_target(node.body, env), self.device_target(node.orelse, env)
            if body == orelse:
                return body
            if guards.classify(node.test, self.ctx.qualname) == guards.POSITIVE and body == Place.DEVICE:
                return Place.DEVICE
            return None
        if isinstance(node, cst.Call):
            name = self.ctx.qualname(node.func)
            if name == "torch.device" and node.args:
                first = self.device_target(node.args[0].value, env)
                return first if first is not None else (Place.DEVICE if _string(node.args[0].value) is None else None)
            return None
        if isinstance(node, cst.Attribute) and node.attr.value == "device":
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
            return Place.DEVICE if _names_a_device(key.rsplit(".", 1)[-1]) else None
        return None

    def to_target(self, node: cst.Call, env: Env) -> Tuple[str, Optional[Place]]:
        """What ``.to(...)`` does: ("move", place), ("keep", None) for a dtype cast, or
        ("unknown", None)."""
        if any(arg.star for arg in node.args):
            return "unknown", None
        device_arg = _keyword(node, "device")
        positional = _positional(node)
        if device_arg is not None:
            target = self.device_target(device_arg.value, env)
            return ("move", target) if target is not None else ("unknown", None)
        if not positional:
            return ("keep", None) if node.args else ("unknown", None)
        first = positional[0].value
        name = self.ctx.qualname(first)
        if name is not None and name.startswith("torch.") and name.split(".")[-1] in _DTYPES:
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

    def method_call(self, node: cst.Call, method: str, receiver: Optional[Value], args: List[Optional[Value]], env: Env) -> Optional[Value]:
        if method == "numpy":
            force = _keyword(node, "force")
            if receiver is not None and receiver.place == Place.DEVICE and (force is None or _is_false(force.value)) and not self.recording:
                self.analysis.result.numpy_calls.append(NumpyCall(node, receiver))
            return None
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
        if method in _PYTHON_METHODS:
            return PYTHON_SCALAR if method in {"item", "dim", "numel", "nelement", "element_size", "get_device"} or (method == "size" and node.args) else PYTHON
        if method in _NEW_FACTORIES:
            device_arg = _keyword(node, "device")
            if device_arg is not None:
                target = self.device_target(device_arg.value, env)
                return self.fresh(target, tensor=True, grad_free=True) if target is not None else None
            if receiver.place == Place.CPU:
                return self.fresh(Place.CPU, tensor=True, grad_free=True, rank=Rank.UNKNOWN, origins=receiver.origins)
            return self.fresh(receiver.place, tensor=True, grad_free=True)
        if method == "type_as" and args:
            other = args[0]
            return self.same_place(other, "float") if other is not None else None
        if method in _TENSOR_METHOD_COMBINERS:
            func = node.func
            operands = [(receiver, func.value)] + [(args[index], arg.value) for index, arg in enumerate(node.args) if arg.keyword is None and not arg.star]
            rank = Rank.UNKNOWN if method in _PRODUCT_COMBINERS else None
            return self.combine(node, operands, rank)
        if method in _ELEMENTWISE_UNARY or method in _SAME_DEVICE_OTHER or method in _ARRAY_SHAPING:
            return self.same_place(receiver, method)
        return None

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

    def module_call(self, node: cst.Call, callee: Optional[Value], args: List[Optional[Value]], env: Env) -> Optional[Value]:
        """``model(x)``: a module moved to a device returns device tensors for device inputs."""
        if callee is None or callee.place not in TENSOR_PLACES or callee.tensor or callee.parameter:
            return None
        tensors: List[Tuple[Optional[Value], cst.BaseExpression]] = []
        must_match: List[Tuple[Optional[Value], cst.BaseExpression]] = []
        positional = 0
        for value, arg in zip(args, node.args):
            if value is not None and value.place == Place.SEQUENCE and isinstance(arg.value, (cst.Tuple, cst.List)):
                items = list(zip(value.elements, (e.value for e in arg.value.elements)))
            else:
                items = [(value, arg.value)]
            tensors.extend(items)
            if arg.keyword is None and not arg.star:
                # the input, and an RNN's initial state; other arguments (a loss's targets
                # and lengths) may legally stay on the CPU for some modules
                if positional == 0 or (positional == 1 and callee.constructor in _RECURRENT_MODULES):
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

    def operand(self, value: Value, expression: Optional[cst.BaseExpression]) -> Operand:
        return Operand(value, dotted_name(expression) if expression is not None else None)

    def combine(self, node: cst.CSTNode, operands: Sequence[Tuple[Optional[Value], cst.BaseExpression]], rank: Optional[Rank] = None) -> Optional[Value]:
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

    def record_mix(self, node: cst.CSTNode, device_side: Operand, cpu_sides: Sequence[Operand], partners: Tuple[Operand, ...], module_call: bool = False) -> None:
        if self.recording:
            return
        self.analysis.result.mixes.append(Mix(node, device_side, tuple(cpu_sides), partners, self.scope, module_call))


def _is_false(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Name) and node.value in {"False", "None"}


def _flatten_targets(target: cst.BaseExpression) -> Iterable[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _flatten_targets(element.value)
    else:
        yield target


# -- files, classes and functions ----------------------------------------------------------------
class _FileAnalysis:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.result = FileInference()
        walker = _ShapeWalker()
        walker.walk(ctx.module.body, None, None)
        self.shape = walker.shape
        self.default_device_changed = any(setter in ctx.source for setter in _DEFAULT_DEVICE_SETTERS)
        self.class_facts: Dict[int, ClassFacts] = {}

    def run(self) -> FileInference:
        _FunctionWalk(self, Scope(self.ctx.module)).block(self.ctx.module.body, {})
        for function, klass in self.shape.functions:
            if klass is not None and function.name.value == "__init__":
                continue  # walked while the class facts are gathered
            facts = self.facts_for(klass) if klass is not None else None
            self.walk_function(function, klass, facts)
        for function, klass in self.shape.functions:
            if klass is not None and function.name.value == "__init__" and id(klass) not in self.class_facts:
                self.facts_for(klass)
        return self.result

    def walk_function(self, function: cst.FunctionDef, klass: Optional[cst.ClassDef], facts: Optional[ClassFacts]) -> _FunctionWalk:
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
            elif param.default is not None and _string(param.default) is not None:
                env[name] = Value(Place.PYTHON, device_spec=_place_of_device_string(_string(param.default)))
            else:
                env[name] = None
        for star in (function.params.star_arg, function.params.star_kwarg):
            if isinstance(star, cst.Param):
                env[star.name.value] = None
        scope = Scope(function, tuple(tensor_params), facts, tensor_function=bool(tensor_params))
        walk = _FunctionWalk(self, scope)
        if any(self.ctx.qualname(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator) in _NO_GRAD_CONTEXTS for d in function.decorators):
            walk.no_grad = 1
        end = walk.suite(function.body, env)
        walk.final_env = _join_envs([end, *walk.returns])
        return walk

    def facts_for(self, klass: cst.ClassDef) -> ClassFacts:
        """What every method may assume about ``self.<attr>``: only attributes assigned in
        ``__init__`` and nowhere else in the file."""
        known = self.class_facts.get(id(klass))
        if known is not None:
            return known
        methods = {s.name.value: s for s in _block(klass.body) if isinstance(s, cst.FunctionDef)}
        module_like = klass.name.value in self.shape.module_classes or "forward" in methods
        facts = ClassFacts(module_like)
        self.class_facts[id(klass)] = facts
        init = methods.get("__init__")
        if init is None or self.shape.uses_setattr or _MOVE_OVERRIDES & set(methods):
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
        result = _FileAnalysis(ctx).run()
        _CACHE[ctx] = result
    return result


def value_at(env: Env, key: str, scope: Scope) -> Optional[Value]:
    """What ``key`` held in a recorded environment (class facts fill in ``self.`` attributes)."""
    if key in env:
        return env[key]
    if scope.class_facts is not None and key.startswith("self.") and key.count(".") == 1:
        return scope.class_facts.attributes.get(key)
    return None
