"""The file names a path expression writes, as the project's saves and loads are matched by them:
``os.path.join(d, "feat.pth")`` -> ``feat.pth``, ``f"{epoch}.pkl"`` -> ``{}.pkl``,
``'%s_net_%s.pth' % (epoch, name)`` -> ``{}_net_{}.pth``; and the saves that write CPU data
(``torch.save(x.cpu(), f)``, a state dict saved after its module moved to the CPU)."""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional

from ..syntax.ast_nodes import dotted_name, last_name, nodes_below


def _assigned(root: ast.AST) -> Dict[str, List[Optional[ast.expr]]]:
    """Name -> the value of each assignment to it in ``root``; None where a name is unpacked
    from another value (``x, y = torch.load(path)``), whose part it gets is not read here."""
    bound: Dict[str, List[Optional[ast.expr]]] = {}
    for node in nodes_below(root):
        if type(node) is ast.Assign:
            for target in node.targets:
                if type(target) is ast.Name:
                    bound.setdefault(target.id, []).append(node.value)
                elif type(target) in (ast.Tuple, ast.List):
                    for name in target.elts:
                        if type(name) is ast.Name:
                            bound.setdefault(name.id, []).append(None)
    return bound


def bound_file_names(variable: str, root: ast.AST) -> List[str]:
    """The file names the values bound to ``variable`` in ``root`` write
    (``fname = os.path.join(kd_dir, "best_pred_run{}.pt".format(run))`` -> ``best_pred_run{}.pt``),
    through the names they are built from (``os.path.join(d, save_filename)``)."""
    bound = {name: [value for value in values if value is not None] for name, values in _assigned(root).items()}
    values = bound.get(variable, [])
    inner = {node.id for value in values for node in nodes_below(value) if type(node) is ast.Name}
    return [name for value in values + [v for n in sorted(inner) for v in bound.get(n, [])] for name in file_names(value)]


#: A string that names a file: ``"model.ckpt"``, ``'{}.pkl'`` (placeholders written ``{}``).
_FILE_NAME = re.compile(r"^[\w.\-/{}]*\.\w+$")
#: A glob pattern's wildcards (``?????``, ``*``, ``[0-9]``), and placeholders side by side.
_GLOB_WILDCARD = re.compile(r"\?+|\*+|\[[^\]/]*\]")
_REPEATED_PLACEHOLDER = re.compile(r"(?:\{\})+")
#: A ``%`` placeholder: ``'%s_net_%s.pth' % (epoch, name)`` names the family ``{}_net_{}.pth``.
_PERCENT_PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgr]")


def file_name_key(text: str) -> Optional[str]:
    """The file name a string writes, with its placeholders as ``{}`` (``"out/{epoch:03d}.pt"``
    -> ``{}.pt``, ``'%s_net_%s.pth'`` -> ``{}_net_{}.pth``), and the names a glob pattern
    matches likewise (``"stagelvl1_?????.pth"`` -> ``stagelvl1_{}.pth``); None when it names no file."""
    value = _PERCENT_PLACEHOLDER.sub("{}", re.sub(r"\{[^{}]*\}", "{}", text))
    value = _REPEATED_PLACEHOLDER.sub("{}", _GLOB_WILDCARD.sub("{}", value))
    return value.rsplit("/", 1)[-1] if _FILE_NAME.match(value) else None


def concatenated(parts: List[Optional[str]]) -> str:
    """The text of a path joined with ``+`` from literals (str) and other values (None, ``{}``):
    ``model_dir + '/' + name + "stagelvl1_" + str(step) + '.pth'`` -> ``{}/{}stagelvl1_{}.pth``
    (cwmok/LapIRN@c17fb75 Code/Train_LapIRN_diff.py:150,170)."""
    return "".join("{}" if part is None else part for part in parts)


def file_names(path: ast.expr) -> List[str]:
    """The file names a path expression writes (``os.path.join(d, "feat.pth")`` -> ``feat.pth``,
    ``f"{epoch}.pkl"`` -> ``{}.pkl``), as ``rules/support/saved_files.path_keys`` keys them."""
    names = []
    template_parts = set()  # an f-string's literal parts name no file by themselves
    for node in nodes_below(path):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # ``d + '/' + name + '.pth'``: one template
            name = file_name_key(concatenated(_added(node)))
        elif isinstance(node, ast.JoinedStr):
            template_parts.update(map(id, node.values))
            name = file_name_key(_template(node))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in template_parts:
            name = file_name_key(node.value)
        else:
            continue
        if name is not None:
            names.append(name)
    return names


def _added(node: ast.expr) -> List[Optional[str]]:
    """The operands of a chain of ``+``: each string literal's text, None for any other."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _added(node.left) + _added(node.right)
    if isinstance(node, ast.JoinedStr):
        return [_template(node)]
    return [node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None]


def _template(node: ast.JoinedStr) -> str:
    """``f"{epoch}.pkl"`` -> ``{}.pkl``."""
    return "".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values)


def moves_to_cpu(value: ast.expr) -> bool:
    """Whether a saved value is moved to the CPU in the call (``torch.save(pred.cpu(), f)``)."""
    return any(isinstance(node, ast.Call) and last_name(node.func) == "cpu" for node in nodes_below(value))


#: Calls that make a CPU tensor from data whatever their arguments (``torch.from_numpy(a)``,
#: ``torch.LongTensor(labels)``), and methods that keep a tensor's device while changing its type.
_CPU_MAKERS = frozenset({"from_numpy", "FloatTensor", "LongTensor", "IntTensor", "ByteTensor", "DoubleTensor", "BoolTensor"})
_TYPE_CASTS = frozenset({"long", "float", "int", "double", "byte", "bool", "half", "contiguous", "clone"})


def built_on_cpu(save: ast.Call, scope: ast.AST) -> bool:
    """Whether every tensor a save writes was made on the CPU from data: ``torch.from_numpy``,
    ``torch.LongTensor(list)`` (not ``torch.cuda.LongTensor``), cast or not, alone or in a tuple
    or list, directly or through names every binding of which in ``scope`` is such
    (facebookresearch/GradientEpisodicMemory@34c6b8e data/raw/raw.py:34-49)."""
    bound = _assigned(scope)

    def made(value: Optional[ast.expr], depth: int) -> bool:
        if type(value) in (ast.Tuple, ast.List):
            return bool(value.elts) and all(made(item, depth) for item in value.elts)
        if type(value) is ast.Name:
            values = bound.get(value.id, ())
            return depth > 0 and bool(values) and all(made(item, depth - 1) for item in values)
        if type(value) is not ast.Call:
            return False
        function = value.func
        if type(function) is ast.Attribute and function.attr in _TYPE_CASTS and not value.args and not value.keywords:
            return made(function.value, depth)
        module, _, made_by = (dotted_name(function) or "").rpartition(".")  # ``torch.LongTensor``, not a bare name
        return made_by in _CPU_MAKERS and bool(module) and "cuda" not in module.split(".") and not value.keywords

    return bool(save.args) and made(save.args[0], 3)


def state_after_cpu(save: ast.Call, scope: ast.AST) -> bool:
    """``net.cpu()`` then ``torch.save(net.state_dict(), path)``, or of a name bound to the state
    dict (CoinCheung/BiSeNet@6b4b67a old/train.py:167-169), or of the module itself
    (``model = model.cpu()`` then ``torch.save(model, path)``, tbepler/protein-sequence-embedding-
    iclr2019@be32cff train_lm_pfam.py:250-254): the last move of each saved module before the
    save is ``.cpu()``."""
    saved = save.args[0]
    values = [value for value in _assigned(scope).get(saved.id, ()) if value is not None] if type(saved) is ast.Name else [saved]
    states = [[node for node in nodes_below(value) if type(node) is ast.Call and last_name(node.func) == "state_dict"] for value in values]
    if type(saved) is ast.Name and not any(states):
        owners = {saved.id}
    elif all(states):
        owners = {_root_name(state.func.value) if type(state.func) is ast.Attribute else None for found in states for state in found}
    else:
        return False
    if not owners or None in owners:
        return False
    for owner in owners:
        moves = [
            node for node in nodes_below(scope)
            if type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr in ("cpu", "cuda", "to")
            and _root_name(node.func.value) == owner and node.lineno < save.lineno
        ]
        last = max(moves, key=lambda node: (node.lineno, node.col_offset), default=None)
        if last is None or last.func.attr != "cpu" or type(last.func.value) is not ast.Name or _maybe_skipped(last, save, scope):
            return False
    return True


def parameters_moved_to_cpu(save: ast.Call, scope: ast.AST) -> bool:
    """BasicSR's ``save_network`` (swz30/Restormer@df766d5 basicsr/models/base_model.py:234-244,
    cszn/KAIR@fc1732f models/model_base.py:151-156): ``state_dict = net.state_dict()``, each
    parameter moved in place (``for key, param in state_dict.items(): state_dict[key] =
    param.cpu()``), then that dict, or one that holds it, saved: a network's weights on the CPU."""
    saved = save.args[0]
    if type(saved) is not ast.Name:
        return False
    states, moved, held = set(), set(), {}
    for node in nodes_below(scope):
        if type(node) is ast.Assign and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if type(target) is ast.Name and type(value) is ast.Call and last_name(value.func) == "state_dict":
                states.add(target.id)
            elif type(target) is ast.Subscript and type(target.value) is ast.Name and type(value) is ast.Name:
                held.setdefault(target.value.id, set()).add(value.id)
        elif type(node) is ast.For:
            owner = _iterated_dict(node.iter)
            if owner is not None and any(_moves_item_to_cpu(inner, owner) for inner in nodes_below(node)):
                moved.add(owner)
    on_cpu = states & moved
    return saved.id in on_cpu or bool(held.get(saved.id, set()) & on_cpu)


def _iterated_dict(iterated: ast.expr) -> Optional[str]:
    """The name a loop goes through the keys or items of: ``state.items()``, ``state.keys()``, ``state``."""
    if type(iterated) is ast.Name:
        return iterated.id
    if type(iterated) is ast.Call and type(iterated.func) is ast.Attribute and iterated.func.attr in ("items", "keys"):
        return iterated.func.value.id if type(iterated.func.value) is ast.Name else None
    return None


def _moves_item_to_cpu(node: ast.AST, owner: str) -> bool:
    """``owner[key] = param.cpu()``, or ``.to("cpu")``, ``.to(torch.device("cpu"))``
    (naoto0804/pytorch-AdaIN@47950d0 train.py:131-133)."""
    if type(node) is not ast.Assign or len(node.targets) != 1:
        return False
    target, value = node.targets[0], node.value
    return (
        type(target) is ast.Subscript and type(target.value) is ast.Name and target.value.id == owner
        and type(value) is ast.Call and _to_cpu(value)
    )


def _to_cpu(call: ast.Call) -> bool:
    """``x.cpu()``, ``x.to("cpu")``, ``x.to(torch.device("cpu"))``, ``x.to(device="cpu")``."""
    called = last_name(call.func)
    if called == "cpu":
        return True
    if called != "to" or len(call.args) + len(call.keywords) != 1:
        return False
    device = call.args[0] if call.args else call.keywords[0].value if call.keywords[0].arg == "device" else None
    if type(device) is ast.Call and last_name(device.func) == "device" and len(device.args) == 1:
        device = device.args[0]
    return type(device) is ast.Constant and device.value == "cpu"


def _maybe_skipped(move: ast.Call, save: ast.Call, scope: ast.AST) -> bool:
    """Whether a branch or loop holds the move but not the save: the move may not run first
    (THUDM/GraphMAE@b14f080 main_graph.py:179-188 moves to the CPU only when it trained)."""
    for node in nodes_below(scope):
        if type(node) in _BRANCHING and node is not scope and _within(move, node) and not _within(save, node):
            return True
    return False


_BRANCHING = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.IfExp)


def _within(inner: ast.AST, outer: ast.AST) -> bool:
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and (
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)
    )


def _root_name(node: ast.expr) -> Optional[str]:
    """``net`` of ``net.module``; None where the chain does not start at a name."""
    name = dotted_name(node)
    return name.partition(".")[0] if name else None
