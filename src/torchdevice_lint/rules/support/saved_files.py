"""What a file knows about the files it loads: the ones it writes itself, and what they hold.

TDV501 reports a load that may restore CUDA tensors. It is silent when the file shows that the
loaded file holds CPU content: a save of ``.cpu()`` tensors to the same path, a cache it writes
when the file is missing, a Dataset's data file (``loaded_values.py``: what the program does with
what it loads). Measured on 26 real projects (bench/realcode.py).
"""

from __future__ import annotations

import os
import re
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Optional, Set, Tuple

from ...knowledge import cst_guards as guards
from ...knowledge.file_names import concatenated, file_name_key
from ...syntax.cst_lazy import cst
from ...syntax.cst_nodes import last_name, source_of, statements_after
from .common import keyword, method_name

if TYPE_CHECKING:
    from ...engine.context import FileContext

LOADERS = {"torch.load", "torch.jit.load"}
SAVERS = {"torch.save", "torch.jit.save"}
#: Builtins and path classes that build any path: no family of files.
_GENERIC_PATHS = frozenset({"str", "open", "Path", "PurePath", "join", "format", "print"})
#: Existence checks: ``os.path.isfile(p)``, ``os.path.exists(p)``, ``p.is_file()``, ``p.exists()``.
_EXISTENCE_CHECKS = {"isfile", "exists", "is_file"}
#: Calls that create a folder (the cache a missing folder is filled as).
_FOLDER_MAKERS = frozenset({"os.makedirs", "os.mkdir"})


def path_keys(path: cst.BaseExpression) -> FrozenSet[str]:
    """What identifies the file a path expression names: its code without spaces, the file
    names written in it (``os.path.join(args.dump, "feat.pth")`` -> ``feat.pth``), and the
    project function that builds it (``get_checkpoint_path(epoch)`` -> ``get_checkpoint_path()``)."""
    keys = {re.sub(r"\s+", "", source_of(path))}
    if isinstance(path, cst.Call) and isinstance(path.func, cst.Name) and path.func.value not in _GENERIC_PATHS:
        keys.add(f"{path.func.value}()")
    return frozenset(keys) | _file_names(path)


def _file_names(path: cst.BaseExpression) -> FrozenSet[str]:
    """The file names written in a path expression: ``'%s_net_%s.pth' % (epoch, name)`` ->
    ``{}_net_{}.pth``."""
    names = set()
    for literal in nodes_of_type(path, cst.SimpleString, cst.FormattedString, cst.BinaryOperation):
        if isinstance(literal, cst.BinaryOperation):  # ``model_dir + '/' + name + '.pth'``: one template
            value = concatenated(_added(literal)) if isinstance(literal.operator, cst.Add) else None
        else:
            value = literal.evaluated_value if isinstance(literal, cst.SimpleString) else _template(literal)
        name = file_name_key(value) if isinstance(value, str) else None
        if name is not None:
            names.add(name)
    return frozenset(names)


def _added(node: cst.BaseExpression) -> list:
    """The operands of a chain of ``+``: each string literal's text, None for any other."""
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
        return _added(node.left) + _added(node.right)
    if isinstance(node, cst.SimpleString) and isinstance(node.evaluated_value, str):
        return [node.evaluated_value]
    return [_template(node) if isinstance(node, cst.FormattedString) else None]


def named_file_names(path: cst.BaseExpression, values_of: Callable[[str], Iterable[cst.BaseExpression]]) -> FrozenSet[str]:
    """The file names held by the names a path is built from: ``os.path.join(self.save_dir,
    save_filename)`` with ``save_filename = '%s_net_%s.pth' % (epoch, name)`` -> ``{}_net_{}.pth``."""
    names = {node.value for node in nodes_of_type(path, cst.Name)}
    return frozenset().union(*(_file_names(value) for name in names for value in values_of(name)))


def nodes_of_type(root: cst.CSTNode, *node_types: type) -> list:
    from ...syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

    return nodes_of(root, *node_types)


def attribute_named(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Attribute) and node.attr.value == name


def _template(literal: cst.FormattedString) -> str:
    """``f"{epoch}.pkl"`` -> ``{}.pkl``."""
    return "".join(part.value if isinstance(part, cst.FormattedStringText) else "{}" for part in literal.parts)


def unopened(path: cst.BaseExpression) -> cst.BaseExpression:
    """``open(path, "rb")`` -> ``path``."""
    if isinstance(path, cst.Call) and isinstance(path.func, cst.Name) and path.func.value == "open" and path.args:
        return path.args[0].value
    return path


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
                finder = self._finder()
                for save, path in finder.saves:
                    if any(method_name(call) == "cpu" for call in nodes_of_type(save.args[0].value, cst.Call)):
                        keys |= path_keys(path)
                        # ``fname = os.path.join(d, "pred.pt")`` then ``torch.save(x.cpu(), fname)``
                        for value in finder.bound.get(path.value, ()) if isinstance(path, cst.Name) else (path,):
                            keys |= path_keys(value) | named_file_names(value, lambda name: finder.bound.get(name, ()))
            self._cpu_keys = frozenset(keys)
        return self._cpu_keys

    def _finder(self) -> "_SaveFinder":
        """Every ``torch.save(value, path)`` with its path (through ``with open(path) as f``)."""
        from ...syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``Module.visit`` rebuilds the tree

        finder = _SaveFinder(self.ctx)
        walk(self.ctx.module, finder, skip=TRIVIA_TYPES)
        return finder


class _SaveFinder:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.stack: list = []
        self.saves: list = []
        #: Name -> the values simple assignments bind to it, anywhere in the file.
        self.bound: Dict[str, list] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self.bound.setdefault(node.targets[0].target.value, []).append(node.value)
        if isinstance(node, cst.Call) and len(node.args) > 1 and self.ctx.qualname(node.func) in SAVERS:
            target = node.args[1].value
            path = opened_path(target, self.stack) or target
            self.saves.append((node, path))
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def cache_written_when_missing(stack, keys: FrozenSet[str], qualname) -> bool:
    """A cache the program writes on this machine the first time it runs: ``if
    os.path.isfile(p): x = torch.load(p) else: ...; torch.save(x, p)``; the same with a branch
    that returns (``if exists(p): return torch.load(p)``, the save below it); and ``try: x =
    torch.load(p) except: pass`` with the save below (facebookresearch/BLINK@5fe254d
    blink/biencoder/eval_biencoder.py:179-199). A family of files (``checkpoint_{}.pth``) is no
    cache: loading step N and saving the current step is a resume (xcmyz/FastSpeech@1e1a61b
    train.py:47-49,174)."""
    keys = frozenset(key for key in keys if "{}" not in key)
    for index, node in enumerate(stack[:-1]):
        inner = stack[index + 1]
        if isinstance(node, cst.If) and inner is node.body:
            checked = _existence_checked_path(node.test)
            if checked is None:
                continue
            written = _saves_in(node.orelse, keys, qualname) if node.orelse is not None else frozenset()
            if not written and guards.terminates(node.body):
                written = _saves_in(statements_after(stack, index), keys, qualname)
            if written and (path_keys(checked) & written or _makes_folder(node.orelse, checked, qualname)):
                return True
        elif isinstance(node, cst.Try) and inner is node.body and node.handlers:
            if not any(guards.terminates(handler.body) for handler in node.handlers) and _saves_in(statements_after(stack, index), keys, qualname):
                return True
    return False


def saved_in_same_loop(stack, keys: FrozenSet[str], qualname) -> bool:
    """``for epoch ...: if stopper.stop(): net.load_state_dict(torch.load(path(stopper.best)));
    break`` with ``torch.save(..., path(epoch))`` in the same loop: a reload that ends the loop
    reads what its earlier rounds wrote on this machine (twitter-research/tgn@d55bbe6
    train_self_supervised.py:293-302). A load that goes on with the loop (a resume) may not."""
    ends_loop = False
    for node in reversed(stack):
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return False
        if isinstance(node, (cst.For, cst.While)):
            return ends_loop and bool(_saves_in(node.body, keys, qualname))
        if isinstance(node, cst.IndentedBlock) and not ends_loop:
            ends_loop = guards.terminates(node)
    return False


def _saves_in(root, keys: FrozenSet[str], qualname) -> FrozenSet[str]:
    """The keys of every file saved in ``root`` (a node or a list of them), if one of them is
    among ``keys``: the load's file is written there, with its companions."""
    saved: Set[str] = set()
    for call in (call for part in (root if isinstance(root, list) else [root]) for call in nodes_of_type(part, cst.Call)):
        if len(call.args) > 1 and qualname(call.func) in SAVERS:
            saved |= path_keys(call.args[1].value)
    return frozenset(saved) if saved & keys else frozenset()


def _makes_folder(root, checked: cst.BaseExpression, qualname) -> bool:
    """Whether ``root`` (the branch that runs where ``checked`` is missing) creates that folder:
    the files it saves there are the cache (galsang/BiDAF-pytorch@8e16379 model/data.py:46-64,
    ``if os.path.exists(dataset_path): torch.load(...)``, else ``os.makedirs(dataset_path)`` and
    the saves)."""
    wanted = path_keys(checked)
    return root is not None and any(
        qualname(call.func) in _FOLDER_MAKERS and call.args and path_keys(call.args[0].value) & wanted
        for call in nodes_of_type(root, cst.Call)
    )


def _existence_checked_path(test: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """``os.path.isfile(p)``, ``p.exists()``, also as a part of ``a and b``."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _existence_checked_path(test.left) or _existence_checked_path(test.right)
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
            return any(dataset_base(ctx.qualname(base.value) or "") for base in scope.bases)
    return False


def dataset_base(name: str) -> bool:
    """torch's, torchvision's and PyG's datasets (``InMemoryDataset`` loads what its own
    ``process()`` collated on this machine)."""
    return name.endswith("Dataset") and name.startswith(
        ("torch.utils.data.", "torchvision.datasets.", "torch_geometric.data.", "torch_geometric.datasets.")
    )


def restored_by_ray_tune(ctx: FileContext) -> bool:
    """In a Ray Tune trainable that takes ``checkpoint_dir`` and saves under
    ``tune.checkpoint_dir(...)`` (twitter-research/graph-neural-pde@af9047e src/ray_tune.py:130-142):
    Ray Tune passes the folder only to restore a trial from what the same tuning run saved."""
    from ...syntax.bindings import all_params

    function = ctx.enclosing_function()
    if function is None or not any(param.name.value == "checkpoint_dir" for param in all_params(function.params)):
        return False
    return any(ctx.qualname(call.func) == "ray.tune.checkpoint_dir" for call in nodes_of_type(function, cst.Call))


def retried_with_map_location(ctx: FileContext) -> bool:
    """Inside ``try:`` whose ``except RuntimeError:`` (or broader) loads again with a
    ``map_location`` (black0017/MedicalZooPytorch@8f40dab lib/medzoo/BaseModelClass.py:53): the
    error a CPU machine meets is the one the program catches."""
    stack = ctx.stack
    for index, node in enumerate(stack[:-1]):
        if isinstance(node, cst.Try) and stack[index + 1] is node.body:
            for handler in node.handlers:
                caught = {last_name(n) for n in nodes_of_type(handler.type, cst.Name, cst.Attribute)} if handler.type else {"Exception"}
                if caught & {"RuntimeError", "Exception", "BaseException"} and any(
                    ctx.qualname(call.func) in LOADERS and keyword(call, "map_location") is not None
                    for call in nodes_of_type(handler.body, cst.Call)
                ):
                    return True
    return False


def may_be_none(ctx: FileContext, name: str) -> bool:
    """Whether the innermost function (or the module) assigns ``name = None`` with no
    availability check deciding any assignment of ``name``: ``map_location=None`` restores
    tensors where they were saved (ENAS: ``None`` unless ``--num_gpu 0``, default 1).
    ``map_location = None`` then ``if not torch.cuda.is_available(): map_location = "cpu"``
    is fine and stays silent."""
    from ...syntax.cst_walk import TRIVIA_TYPES, walk  # read-only: ``visit`` rebuilds the tree

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


def shipped_on_cpu(ctx: FileContext, path: cst.BaseExpression) -> bool:
    """Whether ``path`` names a checkpoint that lies in the project and holds CPU storages only
    (``project/shipped.py`` read it): ``'data/pnet.pt'``, ``os.path.join(os.path.dirname(__file__),
    '../data/pnet.pt')``, directly or through a name bound once in the function."""
    shipped = ctx.project.shipped_files
    if not shipped:
        return False
    if isinstance(path, cst.Name):
        path = single_binding(ctx, path.value)
    place = _literal_path(path) if path is not None else None
    if place is None:
        return False
    beside_file, relative = place
    folder = os.path.dirname(os.path.abspath(ctx.path))
    bases = [folder] if beside_file else [folder, *(str(parent) for parent in Path(folder).parents)]
    found = [shipped[c] for c in (os.path.normpath(os.path.join(base, relative)) for base in bases) if c in shipped]
    return bool(found) and all(found)


def global_file_names(ctx: FileContext, name: str) -> FrozenSet[str]:
    """The file names the module-level bindings of ``name`` hold, where the enclosing function
    reads it without binding it (ethanfetaya/NRI@e63fcb0 train.py:95,144,305 ``encoder_file``)."""
    if ctx.enclosing_function() is None or ctx.devices.shadowed_here(name):
        return frozenset()
    values = [
        assign.value for statement in ctx.module.body if not isinstance(statement, (cst.FunctionDef, cst.ClassDef))
        for assign in nodes_of_type(statement, cst.Assign)
        if any(isinstance(t.target, cst.Name) and t.target.value == name for t in assign.targets)
    ]
    return frozenset().union(*(_file_names(value) for value in values))


def single_binding(ctx: FileContext, name: str) -> Optional[cst.BaseExpression]:
    """The value of the one ``name = ...`` in the enclosing function (or the module), nested
    scopes included; None where there are none or several."""
    values = _plain_assignments(ctx, ctx.enclosing_function() or ctx.module).get(name, ())
    return values[0] if len(values) == 1 else None


def binding_above(ctx: FileContext, name: str) -> Optional[cst.BaseExpression]:
    """The value of ``name = ...`` in the statement just above the one being visited, or above
    it in the same block with nothing between that binds the name again: the value the name
    holds there when it is bound several times in the function (cwmok/LapIRN@c17fb75
    Code/Train_LapIRN_diff.py:170-171, rebound below in a branch that never runs)."""
    stack = ctx.stack
    for index in range(len(stack) - 1, 0, -1):
        block = stack[index - 1]
        if isinstance(stack[index], (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            return None
        if isinstance(block, (cst.IndentedBlock, cst.Module)) and stack[index] in block.body:
            above = block.body[: block.body.index(stack[index])]
            for statement in reversed(above):
                assigned = [assign for assign in nodes_of_type(statement, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.With)
                            if name in _bound_by(assign)]
                if not assigned:
                    continue
                simple = isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and statement.body[0] is assigned[0]
                return assigned[0].value if simple and isinstance(assigned[0], cst.Assign) and len(assigned) == 1 else None
            return None
    return None


def _bound_by(node: cst.CSTNode) -> Set[str]:
    """The names an assignment, a loop or a ``with`` binds (not ``self.x``, not ``d[k]``)."""
    if isinstance(node, cst.Assign):
        targets = [target.target for target in node.targets]
    elif isinstance(node, cst.With):
        targets = [item.asname.name for item in node.items if item.asname]
    else:  # ``+=``, an annotated assignment, a loop
        targets = [node.target]
    names: Set[str] = set()
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name):
            names.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            targets.extend(element.value for element in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)
    return names


def returned_by_its_saver(ctx: FileContext, path: cst.BaseExpression) -> bool:
    """``best = self._train(...)`` then ``torch.load(best)``, where ``_train`` returns only the
    path it saves to (songyouwei/ABSA-PyTorch@9a7c6c1 train.py:94,129-130,176-177): what this
    run wrote moments before, on this machine."""
    if not isinstance(path, cst.Name) or ctx.enclosing_function() is None:
        return False
    value = single_binding(ctx, path.value)
    if not isinstance(value, cst.Call):
        return False
    called = value.func
    if isinstance(called, cst.Attribute) and isinstance(called.value, cst.Name) and called.value.value == "self":
        called = called.attr
    if not isinstance(called, cst.Name):
        return False
    savers = [function for function in nodes_of_type(ctx.module, cst.FunctionDef) if function.name.value == called.value]
    if len(savers) != 1:
        return False
    saved = {
        call.args[1].value.value for call in nodes_of_type(savers[0].body, cst.Call)
        if len(call.args) > 1 and isinstance(call.args[1].value, cst.Name) and ctx.qualname(call.func) in SAVERS
    }
    returned = [statement.value for statement in nodes_of_type(savers[0].body, cst.Return)]
    return bool(returned) and all(isinstance(value, cst.Name) and value.value in saved for value in returned)


def _plain_assignments(ctx: FileContext, scope: cst.CSTNode) -> Dict[str, list]:
    """Name -> the value of each ``=`` binding it in ``scope``: one walk per scope and file,
    where a file with many loads in one function walked it once per load."""
    by_scope = _ASSIGNMENTS.get(ctx)
    if by_scope is None:
        by_scope = _ASSIGNMENTS[ctx] = {}
    found = by_scope.get(id(scope))
    if found is None:
        found = by_scope[id(scope)] = {}
        for assign in nodes_of_type(scope, cst.Assign):
            for name in {t.target.value for t in assign.targets if isinstance(t.target, cst.Name)}:
                found.setdefault(name, []).append(assign.value)
    return found


#: FileContext -> id(scope) -> ``_plain_assignments`` of it; gone with the context (whose tree
#: keeps every scope, and so its id, alive).
_ASSIGNMENTS: "weakref.WeakKeyDictionary[FileContext, Dict[int, Dict[str, list]]]" = weakref.WeakKeyDictionary()


#: ``os.path.dirname(__file__)``, ``Path(__file__).parent``: the module's folder.
_FILE_FOLDER = "<folder of __file__>"


def _literal_path(node: cst.BaseExpression) -> Optional[Tuple[bool, str]]:
    """(relative to the module's folder, the relative path) of a path built from literals."""
    parts = _path_parts(node)
    if not parts or any(part is None for part in parts):
        return None
    beside_file = parts[0] == _FILE_FOLDER
    rest = parts[1:] if beside_file else parts
    if not rest or _FILE_FOLDER in rest:
        return None
    return beside_file, os.path.join(*rest)


def _path_parts(node: cst.BaseExpression) -> list:
    if isinstance(node, cst.SimpleString):
        return [node.evaluated_value if isinstance(node.evaluated_value, str) else None]
    if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Divide):
        return _path_parts(node.left) + _path_parts(node.right)
    if isinstance(node, cst.Attribute) and node.attr.value == "parent" and _is_file_path(node.value):
        return [_FILE_FOLDER]
    if isinstance(node, cst.Call) and node.args:
        name = last_name(node.func)
        if name == "join":
            return [part for arg in node.args for part in _path_parts(arg.value)]
        if name == "dirname" and _is_file_path(node.args[0].value):
            return [_FILE_FOLDER]
    return [None]


def _is_file_path(node: cst.BaseExpression) -> bool:
    """``__file__``, ``os.path.abspath(__file__)``, ``Path(__file__)``, ``Path(__file__).resolve()``."""
    while isinstance(node, cst.Call):
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("resolve", "absolute") and not node.args:
            node = node.func.value
        elif last_name(node.func) in ("abspath", "realpath", "Path") and len(node.args) == 1:
            node = node.args[0].value
        else:
            return False
    return isinstance(node, cst.Name) and node.value == "__file__"
