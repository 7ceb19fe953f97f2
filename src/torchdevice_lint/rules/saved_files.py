"""What a file knows about the files it loads: the ones it writes itself, and what they hold.

TDV501 reports a load that may restore CUDA tensors. It is silent when the file shows that the
loaded file holds CPU content: a save of ``.cpu()`` tensors to the same path, a cache it writes
when the file is missing, a Dataset's data file, or a value the program itself treats as a numpy
array. Measured on 26 real projects (bench/realcode.py).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, FrozenSet, Iterator, Optional, Set, Tuple

from ..knowledge import cst_guards as guards
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, source_of
from .common import method_name

if TYPE_CHECKING:
    from ..engine.context import FileContext

LOADERS = {"torch.load", "torch.jit.load"}
SAVERS = {"torch.save", "torch.jit.save"}
#: A string literal that names a file: ``"model.ckpt"``, ``'trainfeat.pth'``, or a family of
#: files: ``'{}.pkl'.format(epoch)``, ``f"{epoch}.pkl"`` (placeholders written ``{}``).
_FILE_NAME = re.compile(r"^[\w.\-/{}]*\.\w+$")
#: Existence checks: ``os.path.isfile(p)``, ``os.path.exists(p)``, ``p.is_file()``, ``p.exists()``.
_EXISTENCE_CHECKS = {"isfile", "exists", "is_file"}


def path_keys(path: cst.BaseExpression) -> FrozenSet[str]:
    """What identifies the file a path expression names: its code without spaces, and the
    file names written in it (``os.path.join(args.dump, "feat.pth")`` -> ``feat.pth``)."""
    keys = {re.sub(r"\s+", "", source_of(path))}
    for literal in _nodes_of(path, cst.SimpleString, cst.FormattedString):
        value = literal.evaluated_value if isinstance(literal, cst.SimpleString) else _template(literal)
        if isinstance(value, str):
            value = re.sub(r"\{[^{}]*\}", "{}", value)
            if _FILE_NAME.match(value):
                keys.add(value.rsplit("/", 1)[-1])
    return frozenset(keys)


def _nodes_of(root: cst.CSTNode, *node_types: type) -> list:
    from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

    return nodes_of(root, *node_types)


def _attribute(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == name


def _template(literal: cst.FormattedString) -> str:
    """``f"{epoch}.pkl"`` -> ``{}.pkl``."""
    return "".join(part.value if isinstance(part, cst.FormattedStringText) else "{}" for part in literal.parts)


def opened_path(handle: cst.BaseExpression, stack) -> Optional[cst.BaseExpression]:
    """The path of ``with open(path, ...) as handle`` among the enclosing nodes, if any."""
    if not isinstance(handle, cst.Name):
        return None
    for ancestor in reversed(stack):
        if isinstance(ancestor, cst.With):
            for item in ancestor.items:
                bound = item.asname.name if item.asname else None
                if (
                    isinstance(bound, cst.Name) and bound.value == handle.value
                    and isinstance(item.item, cst.Call) and item.item.args
                ):
                    return item.item.args[0].value
    return None


class SavedFiles:
    """The saves of one file, computed on the first load that needs them."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self._cpu_keys: Optional[FrozenSet[str]] = None

    def cpu_keys(self) -> FrozenSet[str]:
        """Keys of the files this file, or another module of its project, saves from ``.cpu()`` values."""
        if self._cpu_keys is None:
            keys: Set[str] = set(self.ctx.project.cpu_saved_files)
            if "cpu()" in self.ctx.source:
                for save, path in self._saves():
                    if any(method_name(call) == "cpu" for call in _nodes_of(save.args[0].value, cst.Call)):
                        keys |= path_keys(path)
            self._cpu_keys = frozenset(keys)
        return self._cpu_keys

    def _saves(self) -> Iterator[Tuple[cst.Call, cst.BaseExpression]]:
        """Every ``torch.save(value, path)`` with its path (through ``with open(path) as f``)."""
        from ..syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``Module.visit`` rebuilds the tree

        finder = _SaveFinder(self.ctx)
        walk(self.ctx.module, finder, skip=TRIVIA_TYPES)
        return iter(finder.saves)


class _SaveFinder:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.stack: list = []
        self.saves: list = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Call) and len(node.args) > 1 and self.ctx.qualname(node.func) in SAVERS:
            target = node.args[1].value
            path = opened_path(target, self.stack) or target
            self.saves.append((node, path))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def cache_written_when_missing(stack, keys: FrozenSet[str], qualname) -> bool:
    """``if os.path.isfile(p): x = torch.load(p) else: ...; torch.save(x, p)``: a cache the
    program writes on this machine the first time it runs."""
    for index, node in enumerate(stack[:-1]):
        if not (isinstance(node, cst.If) and stack[index + 1] is node.body and node.orelse is not None):
            continue
        checked = _existence_checked_path(node.test)
        if checked is None or not (path_keys(checked) & keys):
            continue
        for call in _nodes_of(node.orelse, cst.Call):
            if len(call.args) > 1 and qualname(call.func) in SAVERS and path_keys(call.args[1].value) & keys:
                return True
    return False


def _existence_checked_path(test: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    if not isinstance(test, cst.Call) or last_name(test.func) not in _EXISTENCE_CHECKS:
        return None
    if test.args:
        return test.args[0].value
    if isinstance(test.func, cst.Attribute):  # ``path.is_file()``
        return test.func.value
    return None


def in_dataset_class(ctx: FileContext) -> bool:
    """Inside a ``torch.utils.data.Dataset`` (or torchvision dataset) subclass: its files hold
    the data a DataLoader serves, which must be CPU tensors (worker processes cannot re-create
    CUDA tensors and ``pin_memory`` refuses them), so they are saved from the CPU."""
    for scope in reversed(ctx.scopes):
        if isinstance(scope, cst.ClassDef):
            return any(_dataset_base(ctx.qualname(base.value) or "") for base in scope.bases)
    return False


def _dataset_base(name: str) -> bool:
    return name.endswith("Dataset") and name.startswith(("torch.utils.data.", "torchvision.datasets."))


def read_as_numpy(ctx: FileContext, load: cst.Call) -> bool:
    """``torch.load(p).numpy()``, or ``data = torch.load(p)`` then ``torch.from_numpy(data[3:])``
    or ``data.numpy()``: the file holds CPU data (both raise on a CUDA tensor on every machine,
    and ``from_numpy`` on anything but a numpy array), with no CUDA storage to restore."""
    stack = ctx.stack
    if len(stack) >= 3 and _attribute(stack[-2], "numpy") and isinstance(stack[-3], cst.Call):
        return stack[-3].func is stack[-2]
    if len(stack) < 2 or not isinstance(stack[-2], cst.Assign) or stack[-2].value is not load:
        return False
    targets = [t.target for t in stack[-2].targets]
    if len(targets) != 1 or not isinstance(targets[0], cst.Name):
        return False
    name = targets[0].value
    for call in _nodes_of(ctx.enclosing_function() or ctx.module, cst.Call):
        if ctx.qualname(call.func) == "torch.from_numpy" and len(call.args) == 1 and _root(call.args[0].value) == name:
            return True
        if method_name(call) == "numpy" and isinstance(call.func.value, cst.Name) and call.func.value.value == name:
            return True
    return False


def _root(expression: cst.BaseExpression) -> Optional[str]:
    while isinstance(expression, (cst.Subscript, cst.Attribute)):
        expression = expression.value
    return expression.value if isinstance(expression, cst.Name) else None


def may_be_none(ctx: FileContext, name: str) -> bool:
    """Whether the innermost function (or the module) assigns ``name = None`` with no
    availability check deciding any assignment of ``name``: ``map_location=None`` restores
    tensors where they were saved (ENAS: ``None`` unless ``--num_gpu 0``, default 1).
    ``map_location = None`` then ``if not torch.cuda.is_available(): map_location = "cpu"``
    is fine and stays silent."""
    from ..syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``visit`` rebuilds the tree

    finder = _AssignmentFinder(ctx, name)
    walk(ctx.enclosing_function() or ctx.module, finder, skip=TRIVIA_TYPES)
    return finder.none_assigned and not finder.decided_by_availability


class _AssignmentFinder:
    def __init__(self, ctx: FileContext, name: str) -> None:
        self.ctx, self.name = ctx, name
        self.tests: list = []
        self.none_assigned = self.decided_by_availability = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if type(node) is cst.If:
            self.tests.append(node.test)
        elif type(node) is cst.Assign:
            self._assign(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if type(original_node) is cst.If:
            self.tests.pop()

    def _assign(self, node: cst.Assign) -> None:
        if not any(isinstance(t.target, cst.Name) and t.target.value == self.name for t in node.targets):
            return
        if isinstance(node.value, cst.Name) and node.value.value == "None":
            self.none_assigned = True
        if any(self.ctx.classify(test) != guards.NEUTRAL for test in self.tests):
            self.decided_by_availability = True
