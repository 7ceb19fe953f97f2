"""Node helpers and fix builders shared by the rule families."""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, FrozenSet, Optional, Tuple

from ...engine.rule import Rule
from ...inference.vocabulary import RETURNING_ITSELF, is_parameterless_module
from ...knowledge import ast_guards
from ...knowledge.backends import availability_expression
from ...knowledge.cst_guards import NEGATIVE, POSITIVE
from ...knowledge.torch_releases import has, lacking, no_fix_note, torch_names
from ...model.fixes import Applicability, Fix
from ...syntax.cst_lazy import cst
from ...syntax.cst_nodes import last_name, parameter_names, source_of, string_value

if TYPE_CHECKING:
    from ...engine.context import FileContext

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


def appended(updated: cst.Call, new_arg: cst.Arg) -> cst.Call:
    """Append after the last argument, keeping the call's layout: one argument a line
    stays so, and what followed the last argument (its comma, a comment, the line
    break before ``)``) now follows the new one."""
    args = list(updated.args)
    last = args[-1]
    opening = updated.whitespace_before_args
    separator = cst.SimpleWhitespace(" ")
    if isinstance(opening, cst.ParenthesizedWhitespace):  # a line break (no comment) and the same indent
        separator = cst.ParenthesizedWhitespace(indent=opening.indent, last_line=opening.last_line)
        after = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        if isinstance(after, cst.ParenthesizedWhitespace):
            # ``path,  # note`` keeps its comma and comment; the new line ends like it did
            args[-1] = last.with_changes(
                comma=last.comma.with_changes(whitespace_after=after.with_changes(indent=separator.indent, last_line=separator.last_line))
            )
            closing = cst.ParenthesizedWhitespace(indent=after.indent, last_line=after.last_line)
            return updated.with_changes(args=args + [new_arg.with_changes(comma=cst.Comma(whitespace_after=closing))])
    args[-1] = last.with_changes(
        comma=cst.Comma(whitespace_after=separator), whitespace_after_arg=cst.SimpleWhitespace("")
    )
    added = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    return updated.with_changes(args=args + [added])


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
    """The string built at run time from the literal being visited (``.format(...)`` or ``%`` on it,
    or ``+`` after it) and the depth of its parent above the literal, when ``names_device`` takes
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
    if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Modulo) and parent.left is literal:
        return (parent, 2) if names_device(text.split("%", 1)[0]) else None  # ``"cuda:%d" % rank``
    built, depth = literal, 1
    while isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add) and parent.left is built:
        built, depth = parent, depth + 1
        parent = ctx.parent(depth)
    return (built, depth) if built is not literal and names_device(text) else None


def only_asks(above: cst.CSTNode) -> bool:
    """Whether a ``torch.device(...)`` under ``above`` is only compared or named:
    ``x.device != torch.device("cuda")``, ``device.type == torch.device("cuda").type`` (the
    device-choosing helper of stable-baselines3, copied into vwxyzjn/cleanrl@fe8d8a0
    cleanrl_utils/buffers.py:133). Constructing a device object raises nowhere."""
    return isinstance(above, (cst.Comparison, cst.ComparisonTarget)) or (
        isinstance(above, cst.Attribute) and above.attr.value == "type"
    )


def names_a_device(target: cst.BaseExpression) -> bool:
    """An assignment target named like a device (``device``, ``self.dev_device``...)."""
    name = last_name(target)
    return name is not None and "device" in name.lower()


def defines_device(ctx: "FileContext") -> bool:
    """Whether the statement being visited binds a device (``device = device or
    torch.device("cuda")``, a parameter default): writing the run-time ``device`` there
    would refer to the name being defined."""
    for depth in range(1, len(ctx.stack)):
        ancestor = ctx.parent(depth)
        if isinstance(ancestor, cst.Assign):
            return any(names_a_device(t.target) for t in ancestor.targets)
        if isinstance(ancestor, cst.AnnAssign):
            return names_a_device(ancestor.target)
        if isinstance(ancestor, cst.Param):
            return True
        if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return False
    return False


def argument_usage(ctx: "FileContext", call: cst.Call, arg: cst.Arg) -> Optional[str]:
    """How a device literal passed as ``arg`` is used: ``"use"`` (where a device goes),
    ``"define"`` (a ``--device`` default), ``"device-call"`` (``torch.device(...)``), or None."""
    name = ctx.qualname(call.func)
    if name is not None and (name.startswith("torch.cuda.") or name == "torch.set_default_device"):
        return None  # reported by the more specific TDV301 / TDV103
    if name == "torch.device":
        return "device-call" if arg is (positional(call) or [None])[0] or is_keyword(arg, "type") else None
    method = method_name(call)
    if method == "cuda":
        return None  # TDV101
    if is_keyword(arg, "device") or is_keyword(arg, "map_location"):
        return "use"
    if method == "to" and positional(call) and arg is positional(call)[0]:
        return "use"
    if name in {"torch.load", "torch.jit.load"} and len(positional(call)) > 1 and arg is positional(call)[1]:
        return "use"
    if is_keyword(arg, "default") and method == "add_argument":
        flags = [string_value(a.value) for a in positional(call)]
        if any(flag and "device" in flag for flag in flags):
            return "define"
    return None


def may_name_cuda(text: str) -> bool:
    """What the first stage asks of a placed string, which may be an f-string's leading text."""
    return names_cuda_device(text, False) or names_cuda_device(text, True)


def may_name_cuda_tensor_type(text: str) -> bool:
    """``"torch.cuda.FloatTensor"`` and the other names ``legacy_cuda_tensor`` reads in a string."""
    return text in CUDA_TENSOR_NAMES


def keyword_is(argument: Optional[cst.CSTNode], name: str) -> bool:
    """Whether ``argument`` is the call argument ``name=...``."""
    return isinstance(argument, cst.Arg) and argument.keyword is not None and argument.keyword.value == name


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


#: Arguments of ``.cuda()`` that ``.to(device)`` takes as they are.
_KEPT_CUDA_KEYWORDS = {"non_blocking", "memory_format"}


def report_device_method(rule: Rule, node: cst.Call, message: str) -> None:
    """``x.cuda()``, ``x.xpu()``...: replaced by ``x.to(device)``, keeping ``non_blocking``."""
    receiver = node.func.value
    if rule.ctx.qualname(receiver) is not None and not (
        isinstance(receiver, cst.Name) and rule.ctx.rebinds_import(receiver.value)
    ):
        return  # a module or class attribute (``numba.cuda(...)``), not a tensor method
    if _holds_nothing_to_move(rule.ctx, receiver):
        return  # ``nn.CrossEntropyLoss().cuda()``, ``loss = ProjectLoss()``: nothing to move, it never raises
    if _own_method(rule.ctx, receiver, node.func.attr.value):
        return  # ``self.cuda(*items)`` of a plain class that defines ``cuda`` (its own code is judged)
    method = node.func.attr.value
    if any(arg.star for arg in node.args):
        rule.report(node, message, display_only(rule, f"Replace `.{method}(...)` with `.to(device, ...)`"))
        return
    avoid = receiver.value if isinstance(receiver, cst.Name) else None
    choice = rule.ctx.device_expression(avoid=avoid, evaluated_before=receiver)

    def replace(updated: cst.Call) -> cst.Call:
        kept = [a for a in updated.args if a.keyword is not None and a.keyword.value in _KEPT_CUDA_KEYWORDS]
        return updated.with_changes(
            func=updated.func.with_changes(attr=cst.Name("to")),
            args=[cst.Arg(choice.expression())] + fresh_args(kept),
        )

    fix = rule.make_fix({node: replace}, needs_device_binding=choice.needs_binding, imports=choice.imports())
    rule.report(node, message, fix)


def _holds_nothing_to_move(ctx, receiver: cst.BaseExpression) -> bool:
    """A module made here, or a name every assignment of which in its scope makes one (either
    arm of ``A() if moco else B()``), that holds no parameter or buffer: a torch class (``nn.ReLU()``) or one of the project's
    (``ProjectFacts.parameterless_classes``)."""
    if isinstance(receiver, cst.Call):
        return _parameterless(ctx, receiver)
    if isinstance(receiver, cst.Attribute) and isinstance(receiver.value, cst.Name) and receiver.value.value == "self":
        return _attribute_holds_nothing(ctx, receiver.attr.value)
    if not isinstance(receiver, cst.Name):
        return False
    name = receiver.value
    scope = ctx.enclosing_function() or ctx.module
    if isinstance(scope, cst.FunctionDef) and name in parameter_names(scope):
        return False
    made = [value for value in ctx.assigned_values(scope).get(name, ()) if not _moved_itself(value, name)]
    arms = [arm for value in made for arm in ((value.body, value.orelse) if isinstance(value, cst.IfExp) else (value,))]
    return bool(arms) and all(isinstance(arm, cst.Call) and _parameterless(ctx, arm) for arm in arms)


#: Wrappers that hold the module they are given and nothing else.
_DATA_PARALLEL = frozenset({"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.DistributedDataParallel"})


def _attribute_holds_nothing(ctx, attribute: str) -> bool:
    """``self.<attribute>`` where every assignment in the class's methods makes a module that
    holds nothing to move, maybe cast (``.float()``) or wrapped in ``DataParallel`` (AbnerHqC/
    GaitSet@5535943 model/model.py:59-62: ``TripletLoss(...).float()``, then
    ``nn.DataParallel(self.triplet_loss)``, then ``.cuda()``)."""
    klass = next((scope for scope in reversed(ctx.scopes) if isinstance(scope, cst.ClassDef)), None)
    if klass is None:
        return False
    name = f"self.{attribute}"
    made = []
    for method in klass.body.body:
        if isinstance(method, cst.FunctionDef):
            made.extend(ctx.assigned_values(method).get(name, ()))
    for index, value in enumerate(made):
        while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in RETURNING_ITSELF:
            value = value.func.value  # ``TripletLoss(...).float()``; ``self.loss.cuda()``
        if isinstance(value, cst.Call) and ctx.qualname(value.func) in _DATA_PARALLEL and value.args:
            value = value.args[0].value
        made[index] = value
    kept = [value for value in made if not (isinstance(value, cst.Attribute) and source_of(value) == name)]
    return bool(kept) and all(isinstance(value, cst.Call) and _parameterless(ctx, value) for value in kept)


def _own_method(ctx, receiver: cst.BaseExpression, method: str) -> bool:
    """``self.<method>(...)`` in a class with no base that defines ``method`` itself
    (knazeri/edge-connect@3142579 src/edge_connect.py:102,408: ``def cuda(self, *args)`` moves
    to the configured device): no tensor's or module's method is called."""
    if not (isinstance(receiver, cst.Name) and receiver.value == "self"):
        return False
    klass = next((scope for scope in reversed(ctx.scopes) if isinstance(scope, cst.ClassDef)), None)
    if klass is None or any(last_name(base.value) != "object" for base in klass.bases):
        return False
    return any(isinstance(statement, cst.FunctionDef) and statement.name.value == method for statement in klass.body.body)


def _moved_itself(value: Optional[cst.BaseExpression], name: str) -> bool:
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in RETURNING_ITSELF
        and isinstance(value.func.value, cst.Name) and value.func.value.value == name
    )


def _parameterless(ctx, call: cst.Call) -> bool:
    name = ctx.qualname(call.func)
    if name is not None and name.startswith(("torch.nn.", "timm.loss.")):
        keywords = [arg.keyword.value if arg.keyword is not None else None for arg in call.args]
        return is_parameterless_module(name.rsplit(".", 1)[-1], keywords)
    leaf = call.func.value if isinstance(call.func, cst.Name) else call.func.attr.value if isinstance(call.func, cst.Attribute) else None
    places = ctx.project.parameterless_classes.get(leaf) if leaf is not None else None
    # a project class: called by a name no import explains (``MODEL.get_loss()`` of a module
    # imported at run time), or through a module or package of the project that defines it
    return places is not None and (name is None or any(part in places for part in name.split(".")[:-1]))


def report_device_literal(rule, literal: cst.BaseExpression, replaced: cst.CSTNode, inline: bool) -> None:
    """Report a literal used as a device: where it defines one (``inline``), guard it with the
    rule's availability check and fallback; where it is used in place, put the device chosen at
    run time in place of ``replaced``."""
    text = source_of(literal)
    message = rule.message_for(literal, text)
    check = rule.availability_for(literal)
    if inline and check is None:
        fix = display_only(rule, rule.fix_title)
    elif inline:
        quote = "'" if text.lstrip("rRbBuUfF").startswith("'") else '"'
        parenthesized = isinstance(rule.ctx.parent(), cst.IfExp)  # an arm of another conditional

        def guarded(_: cst.CSTNode) -> cst.BaseExpression:
            # the fallback is read when the fix is applied: the file's convention is known then
            expression = cst.parse_expression(f"{text} if {check} else {rule.fallback_for(quote)}")
            return expression.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if parenthesized else expression

        fix = rule.make_fix({replaced: guarded}, imports=rule.ctx.torch_imports())
    else:
        choice = rule.ctx.device_expression()
        fix = rule.make_fix(
            {replaced: lambda _: choice.expression()}, needs_device_binding=choice.needs_binding, imports=choice.imports()
        )
    rule.report(literal, message, fix)


def may_meet_mps(ctx: "FileContext", through_fixes: bool = True) -> bool:
    """Whether a tensor this file puts on a device can be on a Mac's MPS. A project that never
    names MPS picks CUDA or the CPU; only a CUDA hard-code in the file (``.cuda()``, a ``"cuda"``
    device outside an availability check) brings MPS in, once the placement fixes make it
    follow the best device (and the file keeps one device convention): ``through_fixes`` counts
    that. Unknown project: True."""
    if not ctx.project.never_mps or "mps" in ctx.source:
        return True
    return through_fixes and _hard_codes_cuda(ctx.python_tree())


def _hard_codes_cuda(tree: ast.AST) -> bool:
    pending = [tree]
    while pending:
        node = pending.pop()
        kind = type(node)
        if kind is ast.If or kind is ast.IfExp:
            sign = ast_guards.sign(node.test)
            body, orelse = (node.body, node.orelse) if kind is ast.If else ([node.body], [node.orelse])
            pending.append(node.test)
            pending.extend(orelse if sign == POSITIVE else body if sign == NEGATIVE else body + orelse)
        elif kind is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "cuda":
            return True
        elif kind is ast.Constant and type(node.value) is str and node.value.partition(":")[0] == "cuda":
            return True
        else:
            pending.extend(ast.iter_child_nodes(node))
    return False
