"""Where a finding stands, in terms that survive edits around it: the functions and classes
enclosing it and the code of its statement, normalised. A baseline (``project/baseline.py``) matches
findings by these rather than by line, so lines inserted above a finding or a reformatted file
leave it matched."""

from __future__ import annotations

import ast
import hashlib
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from .cst_walk import TRIVIA_TYPES, walk

#: The blocks of a compound statement or clause: a node reached through any other child stands
#: in its header (``if <test>:``, a decorator, a default, ``except <type>:``).
_BLOCKS = ("body", "orelse", "handlers", "finalbody", "cases")
_CLAUSES = (cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase)
#: Longer normalised statements are kept as their start and a digest of the whole.
MAX_STATEMENT = 200
_ELLIPSIS = cst.IndentedBlock(body=[cst.SimpleStatementLine(body=[cst.Expr(cst.Ellipsis())])])

Path = Tuple[cst.CSTNode, ...]


def paths_to(pairs: Sequence[Tuple[cst.CSTNode, Sequence[cst.CSTNode]]]) -> Dict[int, Path]:
    """id(node) -> the nodes from the module down to it, for each ``(node, ancestors)``: the
    stack where it was reported. A node below the stack's last node (a rule reporting a child,
    or the dataflow reporting at the end of the module) is searched for under it, one walk per
    such subtree."""
    paths: Dict[int, Path] = {}
    searches: Dict[int, Tuple[Sequence[cst.CSTNode], Set[int]]] = {}
    for node, ancestors in pairs:
        held = [id(ancestor) for ancestor in ancestors]
        if id(node) in held:
            paths[id(node)] = tuple(ancestors[: held.index(id(node)) + 1])
        elif ancestors:
            searches.setdefault(id(ancestors[-1]), (ancestors, set()))[1].add(id(node))
    for ancestors, wanted in searches.values():
        finder = _PathFinder(wanted)
        walk(ancestors[-1], finder, skip=TRIVIA_TYPES)
        for key, below in finder.found.items():
            paths[key] = tuple(ancestors[:-1]) + below
    return paths


class _PathFinder(cst.CSTVisitor):
    def __init__(self, wanted: Set[int]) -> None:
        super().__init__()
        self.wanted = wanted
        self.stack: List[cst.CSTNode] = []
        self.found: Dict[int, Path] = {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        self.stack.append(node)
        if id(node) in self.wanted:
            self.found[id(node)] = tuple(self.stack)
        return len(self.found) < len(self.wanted)

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self.stack.pop()


def scope_of(path: Path) -> str:
    """``Trainer.fit``: the functions and classes whose body holds the node, outermost first;
    ``""`` at module level. A decorator or a default belongs to the scope around its ``def``."""
    names = [
        parent.name.value
        for parent, child in zip(path, path[1:])
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and child is parent.body
    ]
    return ".".join(names)


def statement_of(path: Path, written: Optional[Dict[int, str]] = None) -> str:
    """The code of the innermost statement holding the node, as ``ast.unparse`` writes it on
    one line: layout, comments, quotes and brackets added by a formatter do not change it. For a
    node in a compound statement's header the header stands for it (``if x: ...``).
    ``written`` (id of the statement -> its text) keeps a statement written once for all the
    findings in it: a line with 500 findings was otherwise written 500 times."""
    written = {} if written is None else written
    for index in range(len(path) - 1, 0, -1):
        node, child = path[index], path[index + 1] if index + 1 < len(path) else None
        if isinstance(node, cst.BaseSmallStatement):
            if id(node) not in written:
                written[id(node)] = normalised(_code(node))
            return written[id(node)]
        if isinstance(node, (cst.BaseCompoundStatement, *_CLAUSES)) and not _in_block(node, child):
            key = -id(node)  # the header, not the statement
            if key not in written:
                written[key] = normalised(_code(_header(node, path[index - 1])))
            return written[key]
    return ""


def _in_block(node: cst.CSTNode, child) -> bool:
    if child is None:
        return False
    for name in _BLOCKS:
        value = getattr(node, name, None)
        if value is child or (isinstance(value, (tuple, list)) and any(item is child for item in value)):
            return True
    return False


def _header(node: cst.CSTNode, parent: cst.CSTNode) -> cst.CSTNode:
    """The statement with every block emptied (``...``); a clause inside its own statement."""
    if isinstance(node, _CLAUSES):
        clause = node.with_changes(body=_ELLIPSIS)
        if isinstance(node, cst.MatchCase):
            return parent.with_changes(cases=[clause])
        return parent.with_changes(body=_ELLIPSIS, handlers=[clause], orelse=None, finalbody=None)
    if isinstance(node, cst.Match):
        return node.with_changes(cases=[node.cases[0].with_changes(body=_ELLIPSIS)])
    changes = {"body": _ELLIPSIS}
    if getattr(node, "orelse", None) is not None:
        changes["orelse"] = None
    return node.with_changes(**changes)


def _code(node: cst.CSTNode) -> str:
    return cst.Module(body=[]).code_for_node(node)


def normalised(code: str) -> str:
    """``code`` parsed and written back by CPython (``ast.unparse``) on one line; the code
    itself, its whitespace collapsed, where CPython cannot parse it alone."""
    try:
        code = ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        pass
    text = " ".join(code.split())
    if len(text) > MAX_STATEMENT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        text = f"{text[:MAX_STATEMENT - 40]} ... sha256:{digest}"
    return text
