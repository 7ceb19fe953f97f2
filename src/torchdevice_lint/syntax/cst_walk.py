"""A read-only tree walk, four times cheaper than ``CSTNode.visit`` on real files.

``CSTNode.visit`` rebuilds every node it passes (``_visit_and_replace_children`` constructs and
validates a fresh copy even for a read-only ``CSTVisitor``), which costs almost as much as the
parse itself. This walk calls the visitor's ``on_visit``/``on_leave`` on the same nodes, in the
same order, without building anything: the order of a node type's child fields is recorded once
from LibCST's own ``_visit_and_replace_children`` and then read with ``getattr``.
``on_visit_attribute``/``on_leave_attribute`` are not called.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Collection, Dict, List, Optional, Tuple

import libcst as cst
from libcst import CSTNode

#: Types whose subtrees hold only whitespace and punctuation: no rule looks inside them, so a
#: walk may skip them whole unless a visitor handles one of them.
TRIVIA_TYPES = frozenset(
    [
        cst.Comment, cst.EmptyLine, cst.Newline, cst.ParenthesizedWhitespace, cst.SimpleWhitespace,
        cst.TrailingWhitespace, cst.LeftParen, cst.RightParen, cst.LeftSquareBracket,
        cst.RightSquareBracket, cst.LeftCurlyBrace, cst.RightCurlyBrace, cst.Comma, cst.Dot,
        cst.Colon, cst.Semicolon, cst.AssignEqual, cst.ImportStar,
    ]
    + [
        node_type
        for node_type in vars(cst).values()
        if isinstance(node_type, type)
        and issubclass(node_type, (cst.BaseBinaryOp, cst.BaseBooleanOp, cst.BaseCompOp, cst.BaseUnaryOp,
                                   cst.BaseAugOp))
    ]
)

#: Types with no child but parentheses: a third of the nodes a walk reaches (names, mostly).
#: A walk whose visitor handles none of them has nothing to do in them.
LEAF_TYPES = frozenset([cst.Name, cst.Integer, cst.Float, cst.Imaginary, cst.Ellipsis, cst.FormattedStringText])
#: What a visitor that reads neither punctuation nor leaves by themselves need not enter.
TRIVIA_AND_LEAF_TYPES = TRIVIA_TYPES | LEAF_TYPES

_CHILD_FIELDS: Dict[type, Tuple[str, ...]] = {}


class _FieldOrderRecorder(cst.CSTVisitor):
    """Notes the child fields LibCST visits, in order, without descending."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list = []

    def on_visit(self, node: CSTNode) -> bool:
        return False

    def on_leave(self, original_node: CSTNode) -> None:
        return None

    def on_visit_attribute(self, node: CSTNode, attribute: str) -> None:
        if attribute not in self.fields:
            self.fields.append(attribute)

    def on_leave_attribute(self, original_node: CSTNode, attribute: str) -> None:
        return None


def _child_fields(node: CSTNode) -> Tuple[str, ...]:
    recorder = _FieldOrderRecorder()
    node._visit_and_replace_children(recorder)
    # A field LibCST visits only when set (an f-string's format_spec) comes last in its
    # constructor call, so the dataclass fields not seen yet are appended after the others.
    leftovers = [f.name for f in dataclasses.fields(node) if f.name not in recorder.fields]
    fields = _CHILD_FIELDS[type(node)] = tuple(recorder.fields + leftovers)
    return fields


def walk(root: CSTNode, visitor: cst.CSTVisitor, skip: Collection[type] = ()) -> None:
    """Visit ``root`` and its descendants in ``CSTNode.visit`` order; subtrees rooted at a
    node whose type is in ``skip`` are neither reported nor entered."""
    on_visit: Callable[[CSTNode], bool] = visitor.on_visit
    on_leave: Callable[[CSTNode], None] = visitor.on_leave
    child_fields = _CHILD_FIELDS
    entered = _entered_types(skip)
    is_entered = entered.get

    def visit(node: CSTNode) -> None:
        if on_visit(node):
            for name in child_fields.get(type(node)) or _child_fields(node):
                value = getattr(node, name)
                kind = type(value)
                if kind is tuple or kind is list:
                    for item in value:
                        enters = is_entered(type(item))
                        if enters or (enters is None and _note_type(entered, type(item), skip)):
                            visit(item)
                else:
                    enters = is_entered(kind)
                    if enters or (enters is None and _note_type(entered, kind, skip)):
                        visit(value)
        on_leave(node)

    try:
        visit(root)
    finally:
        # ``visit`` refers to itself through its closure: left so, that cycle keeps the visitor,
        # and through it the tree and the file's context, alive until the cyclic collector runs
        # (in flake8's process, which keeps much more alive, that cost as much as the analysis)
        visit = None  # noqa: F841 - clears the closure's cell


#: skip set -> {type met: whether a walk enters a value of that type (a node not skipped)}.
#: LibCST's node classes are ABCs: ``isinstance`` on them runs ``ABCMeta.__instancecheck__``
#: in Python, the walk's largest cost before the answer was kept by type.
_ENTERED: Dict[frozenset, Dict[type, bool]] = {}


def _entered_types(skip: Collection[type]) -> Dict[type, bool]:
    key = skip if type(skip) is frozenset else frozenset(skip)
    entered = _ENTERED.get(key)
    if entered is None:
        if len(_ENTERED) > 64:  # skip sets come from a few rule selections: never many
            _ENTERED.clear()
        entered = _ENTERED[key] = {}
    return entered


def _note_type(entered: Dict[type, bool], kind: type, skip: Collection[type]) -> bool:
    enters = entered[kind] = issubclass(kind, CSTNode) and kind not in skip
    return enters


class _Collector:
    def __init__(self, node_types: Collection[type]) -> None:
        self.node_types = node_types
        self.found: List[CSTNode] = []

    def on_visit(self, node: CSTNode) -> bool:
        if not self.node_types or type(node) in self.node_types:
            self.found.append(node)
        return True

    def on_leave(self, original_node: CSTNode) -> None:
        return None


def nodes_of(root: CSTNode, *node_types: type) -> List[CSTNode]:
    """Every node of these types in ``root``'s tree, in visit order: ``matchers.findall`` for
    node types, without the rebuild of the tree that ``findall`` (a ``visit``) costs, nor the
    import of ``libcst.matchers`` (more CPU than LibCST's own import). No types: every node but
    whitespace and punctuation."""
    kept = _KEPT.get(id(root))
    types = frozenset(node_types)
    if kept is not None and kept.module is root and types and not types & (TRIVIA_TYPES | {cst.Module}):
        return kept.nodes_of(types)
    collector = _Collector(types)
    walk(root, collector, skip=_skipped_for(types))
    return collector.found


def _skipped_for(types: frozenset) -> frozenset:
    """What a walk collecting ``types`` need not enter: punctuation, and leaves unless asked
    for (a leaf's only children are its parentheses). Kept: a new set has its hash computed anew."""
    skipped = _SKIPPED.get(types)
    if skipped is None:
        skipped = _SKIPPED[types] = (TRIVIA_AND_LEAF_TYPES if types else TRIVIA_TYPES) - types
    return skipped


#: Node types asked for -> ``_skipped_for`` them.
_SKIPPED: Dict[frozenset, frozenset] = {}


class StatementNodes:
    """``nodes_of`` a module the editor keeps between edits, found per top-level statement: an
    edit replaces a few statements (``cst_reparse``) and the others, the same objects (LibCST
    nodes never change), are not walked again. Of the module, the walk collects nothing but its
    statements' nodes (the module and its header and footer lines are none of the types asked)."""

    def __init__(self) -> None:
        self.module: Optional[cst.Module] = None
        #: id(statement) -> (the statement, {node types: its nodes of those types}).
        self.found: Dict[int, Tuple[CSTNode, Dict[frozenset, List[CSTNode]]]] = {}

    def keep(self, module: cst.Module) -> None:
        """Answer for ``module`` from now on, forgetting the statements it no longer holds."""
        self.close()
        held = {id(statement) for statement in module.body}
        self.found = {key: entry for key, entry in self.found.items() if key in held}
        self.module = module
        _KEPT[id(module)] = self

    def close(self) -> None:
        if self.module is not None and _KEPT.get(id(self.module)) is self:
            del _KEPT[id(self.module)]
        self.module = None

    def nodes_of(self, types: frozenset) -> List[CSTNode]:
        found: List[CSTNode] = []
        for statement in self.module.body:
            entry = self.found.get(id(statement))
            if entry is None or entry[0] is not statement:
                entry = self.found[id(statement)] = (statement, {})
            nodes = entry[1].get(types)
            if nodes is None:
                collector = _Collector(types)
                walk(statement, collector, skip=_skipped_for(types))
                nodes = entry[1][types] = collector.found
            found.extend(nodes)
        return found


#: id(module) -> what answers ``nodes_of`` for it; the entry holds the module, so the id stays its.
_KEPT: Dict[int, StatementNodes] = {}
