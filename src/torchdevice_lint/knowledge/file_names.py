"""The file names a path expression writes, as the project's saves and loads are matched by them:
``os.path.join(d, "feat.pth")`` -> ``feat.pth``, ``f"{epoch}.pkl"`` -> ``{}.pkl``,
``'%s_net_%s.pth' % (epoch, name)`` -> ``{}_net_{}.pth``."""

from __future__ import annotations

import ast
import re
from typing import Dict, List, Optional

from ..syntax.ast_nodes import nodes_below


def bound_file_names(variable: str, root: ast.AST) -> List[str]:
    """The file names the values bound to ``variable`` in ``root`` write
    (``fname = os.path.join(kd_dir, "best_pred_run{}.pt".format(run))`` -> ``best_pred_run{}.pt``),
    through the names they are built from (``os.path.join(d, save_filename)``)."""
    bound: Dict[str, List[ast.expr]] = {}
    for node in nodes_below(root):
        if type(node) is ast.Assign:
            for target in node.targets:
                if type(target) is ast.Name:
                    bound.setdefault(target.id, []).append(node.value)
    values = bound.get(variable, [])
    inner = {node.id for value in values for node in nodes_below(value) if type(node) is ast.Name}
    return [name for value in values + [v for n in sorted(inner) for v in bound.get(n, [])] for name in file_names(value)]


#: A string that names a file: ``"model.ckpt"``, ``'{}.pkl'`` (placeholders written ``{}``).
_FILE_NAME = re.compile(r"^[\w.\-/{}]*\.\w+$")
#: A ``%`` placeholder: ``'%s_net_%s.pth' % (epoch, name)`` names the family ``{}_net_{}.pth``.
_PERCENT_PLACEHOLDER = re.compile(r"%[-#0 +]*\d*(?:\.\d+)?[sdifgr]")


def file_name_key(text: str) -> Optional[str]:
    """The file name a string writes, with its placeholders as ``{}`` (``"out/{epoch:03d}.pt"``
    -> ``{}.pt``, ``'%s_net_%s.pth'`` -> ``{}_net_{}.pth``); None when it names no file."""
    value = _PERCENT_PLACEHOLDER.sub("{}", re.sub(r"\{[^{}]*\}", "{}", text))
    return value.rsplit("/", 1)[-1] if _FILE_NAME.match(value) else None


def file_names(path: ast.expr) -> List[str]:
    """The file names a path expression writes (``os.path.join(d, "feat.pth")`` -> ``feat.pth``,
    ``f"{epoch}.pkl"`` -> ``{}.pkl``), as ``rules/support/saved_files.path_keys`` keys them."""
    names = []
    for node in nodes_below(path):
        if isinstance(node, ast.JoinedStr):
            name = file_name_key("".join(part.value if isinstance(part, ast.Constant) else "{}" for part in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = file_name_key(node.value)
        else:
            continue
        if name is not None:
            names.append(name)
    return names
