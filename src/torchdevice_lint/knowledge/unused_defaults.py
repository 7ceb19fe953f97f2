"""Device defaults that never take effect: every call in the project passes the argument.

``def prepare_z_y(G_batch_size, dim_z, nclasses, device='cuda')`` (BigGAN-PyTorch utils.py:1086)
is harmless when each caller passes ``device=``, and an attrs field ``device: torch.device =
attr.ib(default=torch.device("cuda"))`` when each construction of its class passes the device
(glide-text2im clip/encoders.py:30, built in clip/model_creation.py). The criterion, conservative
where a call is not seen: the project calls the function (or constructs the class) at least once,
never uses it as a value (a callback, a base class), and every call passes the argument by its
keyword or provably by position (``*args`` and ``**kwargs`` prove nothing). A function nobody in
the project calls is someone else's API, and its callers get the default: still reported.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import defined_method, dotted_name, last_name, source_of
from .project_facts import ProjectFacts

#: Class decorators whose classes take their fields as constructor arguments (attrs, dataclasses).
_FIELD_CLASSES = {"s", "attrs", "define", "frozen", "mutable", "dataclass"}
#: Calls that declare one field (``attr.ib(default=...)``, ``dataclasses.field(...)``).
_FIELD_CALLS = {"ib", "attrib", "field"}
#: Bases that add no constructor fields before a class's own.
_PLAIN_BASES = {"object", "Module", "nn.Module", "torch.nn.Module"}


def parameter_default_unused(stack: Sequence[cst.CSTNode], param: cst.Param, project: ProjectFacts) -> bool:
    """Whether the function ``param`` belongs to never reads it (jannerm/diffuser@7ea4228
    diffuser/utils/serialization.py:36 ``load_diffusion(..., device='cuda:0')``), or every call
    of it passes it (an ``__init__``'s calls are its class's)."""
    index = next((i for i in range(len(stack) - 1, -1, -1) if isinstance(stack[i], cst.FunctionDef)), None)
    if index is None or not any(node is param for node in stack[index:]):
        return False
    function = stack[index]
    if _never_read(function, param.name.value):
        return True
    cls = stack[index - 2] if index >= 2 and isinstance(stack[index - 2], cst.ClassDef) else None
    parameters = function.params
    positional = [*parameters.posonly_params, *parameters.params]
    shift = 1 if cls is not None and not _decorated(function, "staticmethod") else 0  # ``self`` is not written at the call
    position: Optional[int] = next((i - shift for i, p in enumerate(positional) if p is param), None)
    if function.name.value == "__init__":
        if cls is None:
            return False
        callee = cls.name.value
    else:
        callee = function.name.value
    # what a call of it must pass (one that does not calls a namesake)
    required = tuple((i - shift, p.name.value) for i, p in enumerate(positional) if p.default is None and i >= shift)
    required += tuple((-1, p.name.value) for p in parameters.kwonly_params if p.default is None)
    return position != -1 and project.always_passed(callee, param.name.value, position, required)


def in_unused_default(stack: Sequence[cst.CSTNode], project: ProjectFacts) -> bool:
    """Whether the visited node lies in a parameter's default that ``parameter_default_unused``."""
    param = next((node for node in reversed(stack) if isinstance(node, cst.Param)), None)
    return param is not None and parameter_default_unused(stack, param, project)


def _never_read(function: cst.FunctionDef, name: str) -> bool:
    """Whether no name in the function's body (nested functions included) is ``name``, nor
    ``locals``/``vars``, which read every parameter."""
    from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

    return not any(node.value in (name, "locals", "vars") for node in nodes_of(function.body, cst.Name))


def bound_unread(stack: Sequence[cst.CSTNode], targets: Sequence[cst.BaseExpression]) -> bool:
    """Whether the visited assignment binds local names that its function never reads: ``device
    = "cuda"`` left over in a function that moves with ``.cuda()`` (tjddus9597/Proxy-Anchor-CVPR2020
    @51db570 code/utils.py:34) selects nothing. Module-level names may be imported: not these."""
    function = next((node for node in reversed(stack) if isinstance(node, cst.FunctionDef)), None)
    if function is None or not targets or not all(isinstance(target, cst.Name) for target in targets):
        return False
    from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

    names = {target.value for target in targets}
    bound = {
        id(target.target if isinstance(target, cst.AssignTarget) else target)
        for statement in nodes_of(function.body, cst.Assign, cst.AnnAssign)
        for target in (statement.targets if isinstance(statement, cst.Assign) else (statement.target,))
    }
    return not any(
        node.value in ("locals", "vars") or (node.value in names and id(node) not in bound)
        for node in nodes_of(function.body, cst.Name)
    ) and not nodes_of(function.body, cst.Global, cst.Nonlocal)


def field_default_unused(stack: Sequence[cst.CSTNode], project: ProjectFacts) -> bool:
    """Whether the visited node lies in the default of an attrs or dataclass field that every
    construction of its class passes (by keyword, or by position where the fields are all
    the class's own)."""
    line = next((i for i in range(len(stack) - 1, -1, -1) if isinstance(stack[i], cst.SimpleStatementLine)), None)
    if line is None or line < 2 or len(stack) < line + 3:
        return False
    cls, statement = stack[line - 2], stack[line + 1]
    if not (isinstance(cls, cst.ClassDef) and stack[line - 1] is cls.body):
        return False
    if not (isinstance(statement, (cst.Assign, cst.AnnAssign)) and stack[line + 2] is statement.value):
        return False
    target = _field_name(statement)
    if target is None or not any(_decorator_name(d.decorator) in _FIELD_CLASSES for d in cls.decorators):
        return False
    body = [s.body[0] for s in cls.body.body if isinstance(s, cst.SimpleStatementLine) and s.body]
    if defined_method(cls, "__init__") is not None:
        return False  # its own constructor decides
    fields = [s for s in body if _is_field(s)]
    plain = all(dotted_name(base.value) in _PLAIN_BASES for base in cls.bases)
    position = next((i for i, field in enumerate(fields) if field is statement), None) if plain else None
    return project.always_passed(cls.name.value, target, position)


def _field_name(statement) -> Optional[str]:
    targets = [statement.target] if isinstance(statement, cst.AnnAssign) else [t.target for t in statement.targets]
    if len(targets) == 1 and isinstance(targets[0], cst.Name) and "device" in targets[0].value.lower():
        return targets[0].value
    return None


def _is_field(statement) -> bool:
    if isinstance(statement, cst.AnnAssign):
        return "ClassVar" not in source_of(statement.annotation.annotation)
    value = statement.value if isinstance(statement, cst.Assign) else None
    return isinstance(value, cst.Call) and _decorator_name(value.func) in _FIELD_CALLS


def _decorated(function: cst.FunctionDef, name: str) -> bool:
    return any(_decorator_name(d.decorator) == name for d in function.decorators)


def _decorator_name(node: cst.BaseExpression) -> Optional[str]:
    """``attr.s(eq=False)`` -> ``s``, ``dataclass`` -> ``dataclass``."""
    return last_name(node.func if isinstance(node, cst.Call) else node)
