"""Source positions for the few nodes a file reports, without LibCST's whole-module pass.

``MetadataWrapper(...).resolve(PositionProvider)`` generates the code of the entire module with
position bookkeeping on every token and node: about twice the parse of the file. A finding needs
the positions of one node, and every top-level statement starts at column 0 on a known line, so
only the statements that contain findings are generated with bookkeeping (LibCST's own
``PositionProvidingCodegenState``, so the ranges are exactly ``PositionProvider``'s). The line
each of those statements starts on is read from CPython's tree of the file when there is one
(``statement_first_lines``), else counted by generating the statements before them plainly; the
statements after the last one are not generated at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst._position import CodeRange
from libcst.metadata.position_provider import NEWLINE_RE, PositionProvidingCodegenState

from .cst_walk import TRIVIA_TYPES, walk
from .lines import physical_lines

if TYPE_CHECKING:
    import ast


class _Positions:
    """Stands in for the provider the codegen state writes ranges into."""

    def __init__(self) -> None:
        self._computed: Dict[cst.CSTNode, CodeRange] = {}


class _Sink(_Positions):
    """The same, writing into a dictionary of ours."""

    def __init__(self, computed: Dict[cst.CSTNode, CodeRange]) -> None:
        self._computed = computed


class _FastPositionState(PositionProvidingCodegenState):
    """LibCST's state, with a shortcut for the common token that holds no line break."""

    def _update_position(self, value: str) -> None:
        if "\n" in value or "\r" in value:
            segments = NEWLINE_RE.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
        else:
            self.column += len(value)


def _line_breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


def statement_positions(
    module: cst.Module, statements: Iterable[cst.CSTNode], first_lines: Optional[Dict[int, int]] = None
) -> Dict[cst.CSTNode, CodeRange]:
    """``PositionProvider`` ranges of every node inside the given top-level statements of
    ``module`` (other nodes are absent). ``first_lines`` (``statement_first_lines``) tells
    where each statement starts; without it the statements before are generated to count."""
    wanted = {id(statement) for statement in statements}
    positions = _Positions()
    counter = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    for line in module.header:
        line._codegen(counter)
    next_line = 1 + _line_breaks("".join(counter.tokens))
    for statement in module.body:
        if not wanted:
            break
        if first_lines is not None:
            next_line = first_lines[id(statement)]
        if id(statement) in wanted:
            wanted.discard(id(statement))
            state = _FastPositionState(
                default_indent=module.default_indent,
                default_newline=module.default_newline,
                provider=positions,
                line=next_line,
            )
            statement._codegen(state)
            next_line = state.line
        elif first_lines is None:
            counter.tokens.clear()
            statement._codegen(counter)
            next_line += _line_breaks("".join(counter.tokens))
    return positions._computed


def statement_first_lines(module: cst.Module, tree: "ast.Module") -> Optional[Dict[int, int]]:
    """id(top-level statement) -> the line its code starts on, blank and comment lines before
    it included, read from CPython's tree of the same source (a ``;`` line is one LibCST
    statement and several ``ast`` ones); None where the two do not pair up."""
    pairs = _paired(module.body, tree.body)
    return None if pairs is None else {id(statement): _first_line(statement, first) for statement, first in pairs}


def _paired(statements: Sequence[cst.CSTNode], python: Sequence["ast.stmt"]) -> Optional[List[Tuple[cst.CSTNode, "ast.stmt"]]]:
    """Each LibCST statement of a block with the first ``ast`` statement it holds; None where
    the two blocks do not pair up."""
    pairs = []
    index = 0
    for statement in statements:
        if index >= len(python):
            return None
        pairs.append((statement, python[index]))
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return pairs if index == len(python) else None


def _first_line(statement: cst.CSTNode, first: "ast.stmt") -> int:
    code_line = min([first.lineno, *(decorator.lineno for decorator in getattr(first, "decorator_list", ()))])
    return code_line - len(statement.leading_lines)


def _cst_children(statement: cst.CSTNode) -> List[Tuple[cst.CSTNode, int]]:
    """The statements directly inside a compound statement in source order, an ``elif``
    included, each with how many ``ast`` statements it is (``a; b`` is two)."""
    children: List[Tuple[cst.CSTNode, int]] = []
    suites = [getattr(statement, "body", None)]
    suites += [handler.body for handler in getattr(statement, "handlers", ())]
    suites += [case.body for case in getattr(statement, "cases", ())]
    orelse = getattr(statement, "orelse", None)
    if isinstance(orelse, cst.If):
        suites.append(orelse)
    elif orelse is not None:
        suites.append(orelse.body)
    final = getattr(statement, "finalbody", None)
    suites.append(final.body if final is not None else None)
    for suite in suites:
        if isinstance(suite, cst.If):
            children.append((suite, 1))
        elif isinstance(suite, cst.IndentedBlock):
            children.extend((s, len(s.body) if isinstance(s, cst.SimpleStatementLine) else 1) for s in suite.body)
        elif isinstance(suite, cst.SimpleStatementSuite):
            children.append((suite, len(suite.body)))
    return children


def _ast_children(statement: "ast.stmt") -> List["ast.stmt"]:
    """The same statements in ``ast``, in the same order."""
    children = list(getattr(statement, "body", ()))
    for handler in getattr(statement, "handlers", ()):
        children.extend(handler.body)
    for case in getattr(statement, "cases", ()):
        children.extend(case.body)
    return children + list(getattr(statement, "orelse", ())) + list(getattr(statement, "finalbody", ()))


def statement_twins(module: cst.Module, tree: "ast.Module") -> Optional[Dict[int, "ast.stmt"]]:
    """id(top-level statement) -> the first ``ast`` statement it holds; None where the two trees
    do not pair up."""
    pairs = _paired(module.body, tree.body)
    return None if pairs is None else {id(statement): first for statement, first in pairs}


def statement_code(module: cst.Module, statement: cst.CSTNode, indents: Sequence[str] = ()) -> str:
    """The code of ``statement`` as the file holds it inside blocks indented by ``indents``."""
    state = CodegenState(default_indent=module.default_indent, default_newline=module.default_newline)
    state.indent_tokens = list(indents)
    statement._codegen(state)
    return "".join(state.tokens)


def _child_offsets(statement: cst.CSTNode, memo: dict) -> Dict[int, int]:
    """id(child) -> how many ``ast`` statements come before it in ``statement``, once per
    statement and ``memo``: a function of 10,000 lines with a finding on each would otherwise be
    scanned once per finding (quadratic)."""
    key = ("cst", id(statement))
    if key not in memo:
        offsets: Dict[int, int] = {}
        offset = 0
        for child, size in _cst_children(statement):
            offsets.setdefault(id(child), offset)
            offset += size
        memo[key] = offsets
    return memo[key]


def _ast_children_of(statement: "ast.stmt", memo: dict) -> List["ast.stmt"]:
    key = ("ast", id(statement))
    if key not in memo:
        memo[key] = _ast_children(statement)
    return memo[key]


def innermost_statement(
    module: cst.Module, ancestors: Sequence[cst.CSTNode], first: "ast.stmt", memo: Optional[dict] = None
) -> Optional[Tuple[cst.CSTNode, int, List[str]]]:
    """The innermost statement of an indented block among ``ancestors`` (the module, its
    top-level statement, ... down to a reported node), with its first line, read from its
    ``ast`` twin ``first`` finds, and the indentation of the blocks around it: what generating
    that statement alone needs to give ``PositionProvider``'s ranges. None for the top-level
    statement itself, or where the two trees do not pair up. ``memo`` (a dict kept while the
    trees are) makes the lookups of many findings in one block cost linear time in total."""
    memo = {} if memo is None else memo
    current, twin = ancestors[1], first
    found = None
    indents: List[str] = []
    for node in ancestors[2:]:
        if isinstance(node, cst.IndentedBlock):
            indents.append(module.default_indent if node.indent is None else node.indent)
            continue
        if not isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            continue
        offset = _child_offsets(current, memo).get(id(node))
        if offset is None:
            return found
        python = _ast_children_of(twin, memo)
        if offset >= len(python):
            return None
        is_elif = isinstance(current, cst.If) and current.orelse is node  # generated only by its ``if``
        current, twin = node, python[offset]
        if not is_elif:
            found = (node, _first_line(node, twin), list(indents))
    return found


def node_positions(
    module: cst.Module,
    nodes: Sequence[Tuple[cst.CSTNode, Sequence[cst.CSTNode]]],
    tree: Optional["ast.Module"] = None,
) -> Dict[cst.CSTNode, CodeRange]:
    """Ranges covering each ``(node, its ancestors)``: the stack from the module down to where
    it was reported. With CPython's ``tree`` of the source, each node is placed by generating
    only the innermost statement holding it (a method, not its whole class); without, the
    top-level statement. A node reported after the walk left its statement (at the end of the
    module) comes with the module alone: the statements holding those are found by one cheap
    walk, stopping at the last one."""
    pairs = _paired(module.body, tree.body) if tree is not None else None
    twins = {id(statement): first for statement, first in pairs} if pairs is not None else {}
    first_lines = {id(statement): _first_line(statement, first) for statement, first in pairs} if pairs is not None else None
    positions: Dict[cst.CSTNode, CodeRange] = {}
    body = {id(statement) for statement in module.body}
    whole: List[cst.CSTNode] = []
    unplaced: Set[int] = set()
    generated: Set[int] = set()
    memo: dict = {}
    for node, ancestors in nodes:
        top = ancestors[1] if len(ancestors) > 1 else None
        if top is None or id(top) not in body:
            unplaced.add(id(node))
            continue
        if node in positions:
            continue
        inner = None
        if pairs is not None:
            held = [id(ancestor) for ancestor in ancestors]
            if id(node) in held:  # a statement reported while a node inside it was visited
                ancestors = ancestors[: held.index(id(node)) + 1]
            inner = innermost_statement(module, ancestors, twins[id(top)], memo)
        if inner is None or id(inner[0]) in generated:
            whole.append(top)
            continue
        statement, line, indents = inner
        generated.add(id(statement))
        state = _FastPositionState(
            default_indent=module.default_indent, default_newline=module.default_newline, provider=_Sink(positions), line=line
        )
        state.indent_tokens = indents
        statement._codegen(state)
        if node not in positions:
            whole.append(top)
    if unplaced:
        whole.extend(_statements_holding(module, unplaced))
    if whole:
        positions.update(statement_positions(module, whole, first_lines))
    return positions


class _Finder(cst.CSTVisitor):
    def __init__(self, wanted: Set[int]) -> None:
        super().__init__()
        self.wanted = wanted
        self.found = False

    def on_visit(self, node: cst.CSTNode) -> bool:
        if id(node) in self.wanted:
            self.wanted.discard(id(node))
            self.found = True
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        return None


def _statements_holding(module: cst.Module, wanted: Set[int]) -> List[cst.CSTNode]:
    holding = []
    for statement in module.body:
        if not wanted:
            break
        finder = _Finder(wanted)
        walk(statement, finder, skip=TRIVIA_TYPES)
        if finder.found:
            holding.append(statement)
    return holding


#: LibCST's node type for each kind of ``ast`` node the inference reports.
_SAME_KIND = {"Call": cst.Call, "BinOp": cst.BinaryOperation, "Compare": cst.Comparison, "AugAssign": cst.AugAssign}


def cst_nodes_at(
    module: cst.Module, source: str, nodes: Sequence["ast.AST"], first_lines: Optional[Dict[int, int]]
) -> Dict[int, cst.CSTNode]:
    """id(ast node) -> the LibCST node of the same kind over the same range of ``source``.
    Both parsers leave an expression's own parentheses out of its range; ``ast`` counts
    columns in UTF-8 bytes, LibCST in characters. Only the top-level statements holding the
    nodes are generated with position bookkeeping (all of them without ``first_lines``)."""
    rows = {node.lineno for node in nodes}
    if not rows:
        return {}
    lines = physical_lines(source, keepends=True)

    def char_column(row: int, byte_column: int) -> int:
        line = lines[row - 1] if row - 1 < len(lines) else ""
        return byte_column if line.isascii() else len(line.encode("utf-8", "surrogatepass")[:byte_column].decode("utf-8", "surrogatepass"))

    holding = list(module.body)
    if first_lines is not None:
        starts = [first_lines[id(statement)] for statement in holding] + [len(lines) + 2]
        holding = [
            statement for index, statement in enumerate(holding)
            if any(starts[index] <= row < starts[index + 1] for row in rows)
        ]
    computed = statement_positions(module, holding, first_lines)
    at_range = {
        (type(node), code_range.start.line, code_range.start.column, code_range.end.line, code_range.end.column): node
        for node, code_range in computed.items()
        if type(node) in _CST_KINDS
    }
    found: Dict[int, cst.CSTNode] = {}
    for node in nodes:
        kind = _SAME_KIND.get(type(node).__name__)
        key = (
            kind, node.lineno, char_column(node.lineno, node.col_offset),
            node.end_lineno, char_column(node.end_lineno, node.end_col_offset),
        )
        if key in at_range:
            found[id(node)] = at_range[key]
    return found


_CST_KINDS = frozenset(_SAME_KIND.values())
