"""A buffer's LibCST module kept between edits: an edit confined to top-level statements in the
middle of the file re-parses only those statements and splices them into the previous module.

The result equals ``cst.parse_module`` of the new text (tests/test_editor_edits.py compares them
node for node after random edits), because a top-level statement that starts at column 0 after a
complete statement tokenizes and parses the same alone as in its file, except where the module
reaches into it. Each of those places is a condition here, and the full parse runs when one fails:

- the module's ``default_indent`` and ``default_newline`` decide how a statement's indentation and
  line breaks are written in its nodes: both must be what the file had, and the file's first
  indented block must come before the edited statements (it decides the indent);
- the header and footer belong to the module: the edited statements are neither the first nor the
  last, and their parse leaves neither;
- the comment lines between two statements go to the first one's block when indented (and the
  blank lines before them too), else to the second: the lines before the first token of the
  edited statements, and of the statement after them, must be empty or comments at column 0.

A text that does not parse raises ``cst.ParserSyntaxError`` from the full parse, and the module
kept stays the last one that parsed.
"""

from __future__ import annotations

import weakref
from typing import List, Optional, Tuple

import libcst as cst

from .cst_walk import StatementNodes

#: Edited statements are parsed after this one, so their leading comments are not a header.
_FIRST = "pass"


class Reparser:
    """The last parsed text and module of one buffer, and where each top-level statement starts
    and ends in the text."""

    def __init__(self) -> None:
        self.text: Optional[str] = None
        self.module: Optional[cst.Module] = None
        #: (start, end) character offsets of each top-level statement; None until asked for, empty
        #: when they cannot be found.
        self.spans: Optional[List[Tuple[int, int]]] = None
        #: Index of the first top-level statement holding an indented block.
        self.first_indented = 0
        #: The kept module's ``nodes_of``, per statement; forgotten with the buffer.
        self.statement_nodes = StatementNodes()
        weakref.finalize(self, self.statement_nodes.close)

    def parse(self, text: str) -> cst.Module:
        """``cst.parse_module(text)``, re-parsing only the edited statements when it can."""
        if text == self.text and self.module is not None:
            return self.module
        if self.module is not None and self.spans is None:
            # found once the buffer changes (codegen of the whole module): not on the first check
            self.spans = _spans(self.text, self.module) or []
        module = self._spliced(text) if self.spans else None
        if module is None:
            module = cst.parse_module(text)
            self._remember(text, module, None)
        return module

    def _remember(self, text: str, module: cst.Module, spans: Optional[List[Tuple[int, int]]]) -> None:
        self.text, self.module, self.spans = text, module, spans
        self.statement_nodes.keep(module)
        self.first_indented = next(
            (index for index, statement in enumerate(module.body) if _has_indented_block(statement)), len(module.body)
        )

    def region(self, text: str) -> Optional[Tuple[int, int, int]]:
        """Where ``text`` differs from the kept text, in whole top-level statements: their start,
        their end in the kept text and in ``text``; None when that reaches the first or the last
        statement (the header and footer), or the kept module's statements are not known."""
        if self.module is None or self.text is None:
            return None
        if self.spans is None:
            self.spans = _spans(self.text, self.module) or []
        touched = self._touched(text) if self.spans else None
        if touched is None:
            return None
        first, last = touched
        return self.spans[first][0], self.spans[last][1], self.spans[last][1] + len(text) - len(self.text)

    def _touched(self, text: str) -> Optional[Tuple[int, int]]:
        """The first and last top-level statement the change touches, counting one that only
        borders it; None when that is the first or the last statement of the module."""
        old, spans = self.text, self.spans
        prefix = _common_prefix(old, text)
        suffix = _common_suffix(old, text, min(len(old), len(text)) - prefix)
        changed_end = len(old) - suffix
        touched = [index for index, (start, end) in enumerate(spans) if start <= changed_end and end >= prefix]
        if not touched or touched[0] == 0 or touched[-1] >= len(spans) - 1:
            return None
        return touched[0], touched[-1]

    def _spliced(self, text: str) -> Optional[cst.Module]:
        module, spans = self.module, self.spans
        touched = self._touched(text)
        if touched is None or touched[0] <= self.first_indented:
            return None
        first, last = touched
        shift = len(text) - len(self.text)
        start, end = spans[first][0], spans[last][1] + shift
        region = text[start:end]
        if not _starts_clean(region) or not _starts_clean(text[end:]):
            return None
        try:
            parsed = cst.parse_module(_FIRST + module.default_newline + region)
        except cst.ParserSyntaxError:
            return None
        if (
            parsed.header or parsed.footer or not parsed.has_trailing_newline or len(parsed.body) < 2
            or parsed.default_indent != module.default_indent or parsed.default_newline != module.default_newline
            or parsed.encoding != module.encoding
        ):
            return None
        statements = parsed.body[1:]
        # one statement is the whole region (no header, no footer): no codegen needed
        new_spans = [(start, end)] if len(statements) == 1 else _statement_spans(parsed, statements, start, region)
        if new_spans is None:
            return None
        body = (*module.body[:first], *statements, *module.body[last + 1:])
        spliced = module.with_changes(body=body)
        after = [(s + shift, e + shift) for s, e in spans[last + 1:]]
        self._remember(text, spliced, spans[:first] + new_spans + after)
        return spliced


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, by halving (each comparison runs in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the longest common suffix, at most ``limit`` (so it does not overlap the prefix)."""
    low, high = 0, limit
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle:len(a) - low] == b[len(b) - middle:len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _starts_clean(text: str) -> bool:
    """Whether every line before the first token is empty or a comment at column 0: no block
    before can claim them."""
    position = 0
    while position < len(text):
        character = text[position]
        if character in "\r\n":
            position += 1
        elif character == "#":
            breaks = [found for found in (text.find("\n", position), text.find("\r", position)) if found != -1]
            if not breaks:
                return True
            position = min(breaks) + 1
        else:
            return not character.isspace() and character != "\\"
    return True


def _has_indented_block(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.IndentedBlock):
        return True
    return not isinstance(node, cst.SimpleStatementLine) and any(_has_indented_block(child) for child in node.children)


def _statement_spans(
    module: cst.Module, statements, offset: int, text: str
) -> Optional[List[Tuple[int, int]]]:
    """Each statement's (start, end) in the file, its code read back from the module; None when
    the codes do not lay end to end over ``text`` (from ``offset`` in the file)."""
    spans, position = [], 0
    for statement in statements:
        code = module.code_for_node(statement)
        if text[position:position + len(code)] != code:
            return None
        spans.append((offset + position, offset + position + len(code)))
        position += len(code)
    return spans if position == len(text) else None


def _spans(text: str, module: cst.Module) -> Optional[List[Tuple[int, int]]]:
    """The top-level statements' spans in ``text``: after the header, end to end, up to the
    footer; None if they are not found so."""
    header = len(module.with_changes(body=(), footer=(), has_trailing_newline=True).code) if module.header else 0
    footer = len(module.with_changes(body=(), header=(), has_trailing_newline=True).code) if module.footer else 0
    if not module.has_trailing_newline:
        return None
    return _statement_spans(module, module.body, header, text[header:len(text) - footer])
