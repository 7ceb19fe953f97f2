"""Node helpers and fix builders shared by the rule families."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Callable, FrozenSet, Optional, Tuple

from ..engine.rule import Rule
from ..knowledge.backends import availability_expression
from ..knowledge.torch_releases import has, lacking, no_fix_note, torch_names
from ..model.fixes import Applicability, Fix
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import string_value

if TYPE_CHECKING:
    from ..engine.context import FileContext

# dtype of each legacy typed tensor class, torch.cuda.FloatTensor and friends.
LEGACY_TENSOR_DTYPES = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "LongTensor": "int64",
    "IntTensor": "int32",
    "ShortTensor": "int16",
    "CharTensor": "int8",
    "ByteTensor": "uint8",
    "BoolTensor": "bool",
}
CUDA_TENSOR_NAMES = tuple(f"torch.cuda.{leaf}" for leaf in LEGACY_TENSOR_DTYPES)


def keyword_arg(name: str, value: cst.BaseExpression) -> cst.Arg:
    """``name=value`` written without spaces, as PEP 8 wants for keyword arguments."""
    tight = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
    return cst.Arg(value, keyword=cst.Name(name), equal=tight)


def is_cuda_string(node: cst.CSTNode) -> bool:
    value = string_value(node)
    return value is not None and names_cuda_device(value, isinstance(node, cst.FormattedString))


def names_cuda_device(text: str, formatted: bool) -> bool:
    """``"cuda"``, ``"cuda:1"``, or an f-string starting ``cuda:`` (``formatted``: ``text`` is its
    leading text)."""
    if formatted:
        return text.startswith("cuda:")
    return text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit())


def built_string(
    ctx: "FileContext", literal: cst.BaseExpression, names_device: Callable[[str], bool]
) -> Optional[Tuple[cst.BaseExpression, int]]:
    """The string built at run time from the literal being visited (``.format(...)`` on it, or
    ``+`` after it) and the depth of its parent above the literal, when ``names_device`` takes
    the text it starts with."""
    text = string_value(literal)
    if text is None or isinstance(literal, cst.FormattedString):
        return None
    parent = ctx.parent(1)
    if isinstance(parent, cst.Attribute) and parent.value is literal and parent.attr.value == "format":
        call = ctx.parent(2)
        if isinstance(call, cst.Call) and call.func is parent and names_device(text.split("{", 1)[0]):
            return call, 3
        return None
    built, depth = literal, 1
    while isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add) and parent.left is built:
        built, depth = parent, depth + 1
        parent = ctx.parent(depth)
    return (built, depth) if built is not literal and names_device(text) else None


def may_name_cuda(text: str) -> bool:
    """What the first stage asks of a placed string, which may be an f-string's leading text."""
    return names_cuda_device(text, False) or names_cuda_device(text, True)


def may_name_cuda_tensor_type(text: str) -> bool:
    """``"torch.cuda.FloatTensor"`` and the other names ``legacy_cuda_tensor`` reads in a string."""
    return text in CUDA_TENSOR_NAMES


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def positional(call: cst.Call) -> list:
    return [arg for arg in call.args if arg.keyword is None and not arg.star]


def has_unpacking(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


def method_name(call: cst.Call) -> Optional[str]:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def legacy_cuda_tensor(ctx: FileContext, node: cst.BaseExpression) -> Optional[str]:
    """``torch.cuda.FloatTensor`` (any alias, or the string ``"torch.cuda.FloatTensor"``) ->
    ``"FloatTensor"``."""
    name = ctx.qualname(node)
    if name is None:
        text = string_value(node) if isinstance(node, cst.SimpleString) else None
        name = text if text and ctx.imports_torch() else None
    if name and name.startswith("torch.cuda."):
        leaf = name[len("torch.cuda."):]
        if leaf in LEGACY_TENSOR_DTYPES:
            return leaf
    return None


def fresh_args(args) -> list:
    """Arguments detached from their old commas, so codegen places commas afresh."""
    return [arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in args]


def availability_check(ctx: FileContext, backend: str = "cuda") -> Optional[str]:
    """How the file checks for ``backend``; None where torch has no check, or the target torch
    lacks it (``torch.backends.mps`` before 1.12, ``torch.xpu`` before 2.4)."""
    if lacking_check(ctx, backend):
        return None
    return availability_expression(backend, ctx.torch_reference())


def lacking_check(ctx: FileContext, backend: str) -> Optional[str]:
    """The name in ``backend``'s availability check that the target torch lacks, if any."""
    missing = lacking(ctx.settings.target_version(), _check_names(backend))
    return missing[0] if missing else None


@lru_cache(maxsize=None)
def _check_names(backend: str) -> FrozenSet[str]:
    check = availability_expression(backend)
    return frozenset(torch_names(check)) if check else frozenset()


def target_has(ctx: FileContext, name: str) -> bool:
    """Whether the file's target torch has ``name`` (``"torch.amp.GradScaler"``)."""
    return has(ctx.settings.target_version(), name)


def no_fix_for_target(ctx: FileContext, name: str) -> str:
    """What a finding adds when the rewrite it would make names ``name``, which the file's
    target torch lacks: the finding then offers no fix."""
    return no_fix_note(ctx.settings.target_torch_version, name)


def guard_statement_fix(rule: Rule, call: cst.Call, message: str, backend: str = "cuda") -> Optional[Fix]:
    """Wrap ``call`` in ``if torch.cuda.is_available():`` (or the check of ``backend``) when it
    is a statement of its own on its own line; anything else (an assignment, an argument) would
    change more than the hazard."""
    ctx = rule.ctx
    expression, statement, container = ctx.parent(1), ctx.parent(2), ctx.parent(3)
    if not (
        isinstance(expression, cst.Expr)
        and expression.value is call
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(container, (cst.IndentedBlock, cst.Module))
    ):
        return None
    check = availability_check(ctx, backend)
    if check is None:
        return None
    test = cst.parse_expression(check)

    def wrap(updated: cst.SimpleStatementLine) -> cst.If:
        return cst.If(
            test=test,
            body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=())]),
            leading_lines=updated.leading_lines,
        )

    return rule.make_fix({statement: wrap}, Applicability.SAFE, message, imports=ctx.torch_imports())


def display_only(rule: Rule, message: str) -> Fix:
    return rule.make_fix({}, Applicability.DISPLAY_ONLY, message)


def is_keyword(arg: "cst.Arg", name: str) -> bool:
    """Whether the argument is passed as ``name=...``."""
    return arg.keyword is not None and arg.keyword.value == name
