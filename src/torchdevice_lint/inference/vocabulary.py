"""The PyTorch vocabulary the inference knows: factories, combiners, methods that keep or move
a value's device, and small readers of call arguments."""

from __future__ import annotations

import ast
from typing import Optional, Sequence

from ..knowledge.backends import ACCELERATOR_DEVICE_TYPES
from .values import Place, Rank

# -- vocabulary -------------------------------------------------------------------------------
SIZE_FACTORIES = {"zeros", "ones", "empty", "rand", "randn", "full"}
ARRAY_FACTORIES = {"arange", "range", "linspace", "logspace", "eye", "randperm", "tril_indices", "triu_indices"}
DATA_FACTORIES = {"tensor", "as_tensor", "asarray"}
LEGACY_CPU_CONSTRUCTORS = {
    "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
    "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
}
LIKE_FACTORIES = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like"}
NEW_FACTORIES = {"new_zeros", "new_ones", "new_empty", "new_full", "new_tensor"}
#: ``torch.<name>`` calls that make a tensor on the CPU unless given ``device=``.
TORCH_CPU_SOURCES = (
    SIZE_FACTORIES | ARRAY_FACTORIES | DATA_FACTORIES | LEGACY_CPU_CONSTRUCTORS | LIKE_FACTORIES | {"randint", "from_numpy"}
)

#: Names through which a float64 dtype is named (TDV601's events).
FLOAT64_NAMES = frozenset({"float64", "double", "DoubleTensor"})

#: torch functions whose tensor arguments must share a device; the first group takes a list.
LIST_COMBINERS = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack"}
ELEMENTWISE_COMBINERS = {
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide",
    "maximum", "minimum", "eq", "ne", "lt", "gt", "le", "ge", "where", "atan2", "pow",
    "remainder", "fmod", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "lerp", "hypot", "masked_fill",
}
PRODUCT_COMBINERS = {"matmul", "mm", "bmm", "dot", "outer", "cdist", "einsum", "addmm", "baddbmm", "kron", "cross"}
FUNCTIONAL_COMBINERS = {
    "linear", "bilinear", "embedding", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "kl_div", "cosine_similarity", "pairwise_distance", "conv1d", "conv2d", "conv3d",
}
#: Tensor-to-tensor functions and methods: the result stays where the (first) input is.
ELEMENTWISE_UNARY = {
    "abs", "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sigmoid", "tanh", "relu",
    "gelu", "silu", "sin", "cos", "floor", "ceil", "round", "trunc", "sign", "clamp", "clip",
    "clamp_min", "clamp_max", "reciprocal", "square", "erf", "logical_not", "bitwise_not",
    "nan_to_num", "float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte",
    "char", "contiguous", "clone", "detach", "flip", "roll", "t", "transpose", "permute",
    "softmax", "log_softmax", "dropout", "masked_fill", "fill_", "zero_", "requires_grad_",
    "pin_memory", "tril", "triu", "cumsum", "cumprod", "normalize", "layer_norm", "pad",
    "leaky_relu", "elu", "softplus", "interpolate",
}
ARRAY_SHAPING = {"unsqueeze", "flatten", "expand", "expand_as", "repeat", "repeat_interleave", "view_as", "reshape_as", "unflatten"}
SAME_DEVICE_OTHER = {
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "std", "var",
    "norm", "view", "reshape", "squeeze", "narrow", "select", "index_select", "gather",
    "masked_select", "nonzero", "topk", "sort", "argsort", "chunk", "split", "unbind",
    "diagonal", "diag", "matmul", "mm", "bmm", "einsum", "unique", "logsumexp", "all", "any",
    "where", "outer", "T",
}
TENSOR_METHOD_COMBINERS = (ELEMENTWISE_COMBINERS | PRODUCT_COMBINERS | {"add_", "sub_", "mul_", "div_", "masked_fill_"}) - {"where"}
PYTHON_METHODS = {"item", "tolist", "size", "dim", "numel", "nelement", "element_size", "get_device", "data_ptr", "stride", "is_contiguous"}
PYTHON_ATTRIBUTES = {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad", "grad_fn", "layout", "is_leaf", "names", "is_sparse"}
VIEW_ATTRIBUTES = {"T", "mT", "H", "mH", "data", "real", "imag", "grad"}
DTYPES = {
    "float", "float32", "float64", "float16", "half", "bfloat16", "double", "int", "int8",
    "int16", "int32", "int64", "long", "short", "uint8", "bool", "complex64", "complex128",
    "cfloat", "cdouble", "float8_e4m3fn", "float8_e5m2",
}
NO_GRAD_CONTEXTS = {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"}
DEFAULT_DEVICE_SETTERS = ("set_default_device", "set_default_tensor_type")
#: Methods that move a module in place (and do nothing to a tensor's binding).
MOVING_METHODS = {"to", "cuda", "cpu"}
#: Class methods that change how ``.to()`` treats attributes.
MOVE_OVERRIDES = {"_apply", "to", "cuda", "cpu", "_load_from_state_dict"}
#: ``ast`` operators of arithmetic, and of augmented assignments, that combine tensors.
OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor, ast.LShift, ast.RShift)
AUG_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr, ast.BitXor, ast.MatMult)
FUNCTIONAL_TENSOR_KEYWORDS = {"weight", "bias", "target", "pos_weight"}
RECURRENT_MODULES = {"RNN", "LSTM", "GRU"}
SCALAR_BUILTINS = {"len", "int", "float", "round", "abs"}
#: Module methods that leave the module where it is.
MODULE_KEEPING_METHODS = {"train", "eval", "parameters", "named_parameters", "zero_grad", "state_dict", "load_state_dict", "requires_grad_", "modules", "children", "named_modules", "buffers"}
#: Methods after which a receiver that may be a module is still where it was.
KEEPING_METHODS = (
    MOVING_METHODS | MODULE_KEEPING_METHODS | PYTHON_METHODS | ELEMENTWISE_UNARY | ARRAY_SHAPING
    | SAME_DEVICE_OTHER | TENSOR_METHOD_COMBINERS | NEW_FACTORIES | {"numpy", "type_as"}
)
COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)


def place_of_device_string(text: str) -> Optional[Place]:
    if text == "cpu" or text.startswith("cpu:"):
        return Place.CPU
    if text.split(":")[0] in ACCELERATOR_DEVICE_TYPES:
        return Place.DEVICE
    return None


def names_a_device(name: str) -> bool:
    lowered = name.lower()
    if "dtype" in lowered:
        return False
    parts = lowered.strip("_").split("_")
    return "device" in lowered or "dev" in parts or "gpu" in parts or lowered.endswith("rank") or "cuda" in parts


def size_rank(args: Sequence[ast.expr]) -> Rank:
    """Rank of a tensor whose size is given by these arguments (``zeros(2, 3)``, ``zeros(())``)."""
    if not args or any(isinstance(arg, ast.Starred) for arg in args):
        return Rank.UNKNOWN
    if len(args) == 1:
        only = args[0]
        if isinstance(only, (ast.Tuple, ast.List)):
            return Rank.ARRAY if only.elts else Rank.SCALAR
    return Rank.ARRAY


# ``torch.nn`` modules that own no parameters or buffers: they run on whatever device their input
# is on, so they are never a CPU operand (losses count only without weight tensors).
PARAMETERLESS_MODULES = {
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
    "Hardtanh", "Hardswish", "Hardsigmoid", "Softplus", "Softsign", "Softmax", "LogSoftmax", "Softmin",
    "LogSigmoid", "Tanhshrink", "Threshold", "GLU", "Dropout", "Dropout1d", "Dropout2d", "Dropout3d",
    "AlphaDropout", "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d",
    "AvgPool1d", "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d",
    "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ZeroPad2d", "ConstantPad1d",
    "ConstantPad2d", "ReflectionPad2d", "ReplicationPad2d", "CosineSimilarity", "PairwiseDistance",
}
LOSS_WEIGHT_KEYWORDS = {"weight", "pos_weight"}
# Wrappers that run the module they are given where it already is and move their inputs to it
# (DataParallel scatters CPU inputs to its GPUs): neither a fresh CPU module nor a mix of devices.
MODULE_WRAPPERS = {
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
}


def is_parameterless_module(leaf: str, keywords: Sequence[Optional[str]]) -> bool:
    """``nn.ReLU()``, ``nn.CrossEntropyLoss()``: no parameters or buffers to place.
    ``keywords`` names the call's arguments, None for a positional one."""
    if leaf in PARAMETERLESS_MODULES:
        return True
    if leaf.endswith(("Loss", "CrossEntropy")):  # timm.loss.SoftTargetCrossEntropy too
        return not any(keyword is None or keyword in LOSS_WEIGHT_KEYWORDS for keyword in keywords)
    return False


#: Module methods that return the module itself: ``loss = loss.cuda()`` keeps what ``loss`` was.
RETURNING_ITSELF = frozenset({"cuda", "cpu", "to", "train", "eval", "float", "double", "half", "requires_grad_"})
