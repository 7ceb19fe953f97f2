"""What a program does with what it loads: TDV501 is silent where the use shows the file holds
no CUDA storage (a numpy array, a scheduler's numbers), and its fix is safe where every restored
tensor goes where the program keeps its own (``load_state_dict``, a move)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ...inference.vocabulary import DTYPES
from ...syntax.cst_lazy import cst
from ...syntax.cst_nodes import last_name, statements_after
from .common import method_name
from .saved_files import attribute_named, nodes_of_type

if TYPE_CHECKING:
    from ...engine.context import FileContext


def read_as_numpy(ctx: FileContext, load: cst.Call) -> bool:
    """``torch.load(p).numpy()``, ``torch.from_numpy(torch.load(p))``, or ``data = torch.load(p)`` then ``torch.from_numpy(data[3:])``
    or ``data.numpy()``: the file holds CPU data (both raise on a CUDA tensor on every machine,
    and ``from_numpy`` on anything but a numpy array), with no CUDA storage to restore."""
    stack = ctx.stack
    if len(stack) >= 3 and attribute_named(stack[-2], "numpy") and isinstance(stack[-3], cst.Call):
        return stack[-3].func is stack[-2]
    if len(stack) >= 3 and isinstance(stack[-2], cst.Arg) and isinstance(stack[-3], cst.Call) and len(stack[-3].args) == 1:
        return ctx.qualname(stack[-3].func) == "torch.from_numpy"  # facebookresearch/MUSE@3159355 src/trainer.py:238
    target = _bound_to(stack, load)
    if target is None:
        return False
    name = target.value
    for call in nodes_of_type(ctx.enclosing_function() or ctx.module, cst.Call):
        if ctx.qualname(call.func) == "torch.from_numpy" and len(call.args) == 1 and _root(call.args[0].value) == name:
            return True
        if method_name(call) == "numpy" and isinstance(call.func.value, cst.Name) and call.func.value.value == name:
            return True
    return False


def _bound_to(stack, load: cst.Call) -> Optional[cst.Name]:
    """The name ``name = torch.load(...)`` binds, ``load`` being the last node of ``stack``."""
    assign = stack[-2] if len(stack) >= 2 else None
    if not isinstance(assign, cst.Assign) or assign.value is not load or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    return target if isinstance(target, cst.Name) else None


def _root(expression: cst.BaseExpression) -> Optional[str]:
    while isinstance(expression, (cst.Subscript, cst.Attribute)):
        expression = expression.value
    return expression.value if isinstance(expression, cst.Name) else None


def loaded_into_place(ctx: FileContext, load: cst.Call, importable_too: bool = False) -> bool:
    """Whether every tensor ``load`` restores provably ends where the program keeps its own: the
    result (or a part of it, ``ckpt["model"]``, ``ckpt.get("ema")``) is handed to
    ``load_state_dict``, which copies into the module's or optimizer's tensors wherever they
    are, or moved with ``.to(device)``/``.cuda()``/``.cpu()``; directly, or through a name whose
    every use is such (or a key lookup: ``"epoch" in ckpt``), used at least once, and, at module
    level, in a script (another module cannot import it). State used as it was loaded (an EMA
    shadow, a queue, a memory bank) stays where ``map_location`` put it. ``importable_too``: at
    module level of any module (what the module itself does with it)."""
    stack = ctx.stack
    if _consumed(stack, len(stack) - 1):
        return True
    target = _bound_to(stack, load)
    if target is None:
        return False
    from ...syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``visit`` rebuilds the tree

    scope = ctx.enclosing_function()
    if scope is None and not importable_too and "__main__" not in ctx.source:
        return False
    uses = _Uses(target)
    walk(scope or ctx.module, uses, skip=TRIVIA_TYPES)
    return uses.consumed and uses.count > 0


def loaded_into_network(ctx: FileContext, load: cst.Call) -> bool:
    """Whether ``load`` restores a network's weights: loaded into place (``loaded_into_place``)
    by code that restores no optimizer, scheduler or scaler (whose state a project saves as it
    was, on the GPU it trained on)."""
    if not loaded_into_place(ctx, load, importable_too=True):
        return False
    scope = ctx.enclosing_function()
    code = (ctx.module.code_for_node(scope) if scope is not None else ctx.source).lower()
    return not any(word in code for word in ("optim", "sched", "scaler"))


def loaded_as_module(ctx: FileContext, load: cst.Call) -> bool:
    """``model = torch.load(path)`` then ``model.eval()``: the file holds a whole pickled module
    (tbepler/protein-sequence-embedding-iclr2019@be32cff eval_secstr.py:246-247)."""
    target = _bound_to(ctx.stack, load)
    return target is not None and any(
        method_name(call) == "eval" and isinstance(call.func.value, cst.Name) and call.func.value.value == target.value
        for call in nodes_of_type(ctx.enclosing_function() or ctx.module, cst.Call)
    )


def restores_scheduler(ctx: FileContext) -> bool:
    """``scheduler.load_state_dict(torch.load(p))``: a learning-rate scheduler's state holds
    numbers (``last_epoch``, ``base_lrs``), no tensor to restore on any device. Also through a
    name whose every use, until the name is bound again, is such (lioryariv/idr@44959e7
    code/training/idr_train.py:132: ``data = torch.load(...)``, then
    ``self.scheduler.load_state_dict(data["scheduler_state_dict"])``)."""
    stack = ctx.stack
    if _into_scheduler(stack, len(stack) - 1):
        return True
    target = _bound_to(stack, stack[-1])
    if target is None or len(stack) < 3 or not isinstance(stack[-3], cst.SimpleStatementLine):
        return False
    from ...engine.context import binds_unconditionally  # LibCST: imported once a file is parsed
    from ...syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``visit`` rebuilds the tree

    uses = _SchedulerUses(target.value)
    for statement in statements_after(stack, len(stack) - 3):
        walk(statement, uses, skip=TRIVIA_TYPES)
        if not uses.restored:
            return False
        if binds_unconditionally(statement, target.value):
            break
    return uses.count > 0


def _into_scheduler(stack, index: int) -> bool:
    """Whether ``stack[index]``, through key lookups, is what a scheduler's ``load_state_dict`` gets."""
    node = stack[index]
    while index >= 1 and isinstance(stack[index - 1], cst.Subscript) and stack[index - 1].value is node:
        index -= 1
        node = stack[index]
    if index < 2 or not isinstance(stack[index - 1], cst.Arg) or not isinstance(stack[index - 2], cst.Call):
        return False
    call = stack[index - 2]
    if not (attribute_named(call.func, "load_state_dict") and call.args[0] is stack[index - 1]):
        return False
    receiver = last_name(call.func.value)
    return receiver is not None and "sched" in receiver.lower()


def _assigns(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Assign) and any(isinstance(t.target, cst.Name) and t.target.value == name for t in node.targets)


class _SchedulerUses:
    """Counts the reads of ``name`` that a scheduler restores from; any other read clears
    ``restored``. Reads later in a block that binds the name again read the new value."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stack: list = []
        self.restored = True
        self.count = 0
        #: The blocks (by id) where a statement bound the name again.
        self.rebound_in: set = set()

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if self.restored and type(node) is cst.Name and node.value == self.name:
            if isinstance(self.stack[-2], cst.AssignTarget) or any(id(above) in self.rebound_in for above in self.stack):
                return True
            self.restored = _into_scheduler(self.stack, len(self.stack) - 1)
            self.count += 1
        return self.restored

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()
        if _assigns(original_node, self.name):
            block = next((above for above in reversed(self.stack) if isinstance(above, cst.IndentedBlock)), None)
            if block is not None:
                self.rebound_in.add(id(block))


def _consumed(stack, index: int) -> bool:
    """Whether the value at ``stack[index]`` (the path from the module) goes, through key
    lookups, into ``load_state_dict`` or a move."""
    node = stack[index]
    while index >= 1:
        parent = stack[index - 1]
        if isinstance(parent, cst.Subscript) and parent.value is node:
            node, index = parent, index - 1
        elif attribute_named(parent, "get") and parent.value is node and index >= 2 and _called(stack[index - 2], parent):
            node, index = stack[index - 2], index - 2
        else:
            break
    parent = stack[index - 1] if index >= 1 else None
    holder = stack[index - 2] if index >= 2 else None
    if isinstance(parent, cst.Arg) and parent.value is node and isinstance(holder, cst.Call):
        return method_name(holder) == "load_state_dict"
    if isinstance(parent, cst.Attribute) and parent.value is node and _called(holder, parent):
        return parent.attr.value in ("cuda", "cpu") or (parent.attr.value == "to" and _moves(holder))
    return False


def _called(node: Optional[cst.CSTNode], function: cst.CSTNode) -> bool:
    return isinstance(node, cst.Call) and node.func is function


def _moves(call: cst.Call) -> bool:
    """``.to(device)``, ``.to(device=...)``: not ``.to(torch.float16)``, which keeps the device."""
    if any(arg.keyword is not None and arg.keyword.value == "device" for arg in call.args):
        return True
    first = next((arg.value for arg in call.args if arg.keyword is None and not arg.star), None)
    name = last_name(first) if first is not None else None
    return first is not None and not (name is not None and (name in DTYPES or "dtype" in name.lower()))


class _Uses:
    """Whether each use of the name ``torch.load``'s result is bound to goes into its place
    (``_consumed``) or only reads keys; any other use, or another binding of it, is not."""

    def __init__(self, target: cst.Name) -> None:
        self.target = target
        self.stack: list = []
        self.consumed = True
        self.count = 0

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if self.consumed and type(node) is cst.Name and node.value == self.target.value and node is not self.target:
            self.consumed = _consumed(self.stack, len(self.stack) - 1) or self._reads_keys()
            self.count += 1
        return self.consumed

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()

    def _reads_keys(self) -> bool:
        """``"epoch" in ckpt``, ``ckpt.keys()``."""
        name = self.stack[-1]
        parent = self.stack[-2] if len(self.stack) >= 2 else None
        if isinstance(parent, cst.ComparisonTarget) and parent.comparator is name:
            return isinstance(parent.operator, (cst.In, cst.NotIn))
        return attribute_named(parent, "keys") and len(self.stack) >= 3 and _called(self.stack[-3], parent)
