"""What the inference's walks ask of the file: its source text, and what its imports bind."""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Dict, List, Optional

from ..syntax.ast_nodes import dotted_name, file_aliases
from ..syntax.cst_nodes import qualified
from ..syntax.lines import physical_lines


class SourceContext:
    """What the walk asks of the file: its source, and what names its imports bind."""

    def __init__(self, tree: ast.Module, source: str) -> None:
        self.tree = tree
        self.source = source
        self.aliases: Dict[str, str] = file_aliases(tree.body)
        self._lines: Optional[List[bytes]] = None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The imported name an expression refers to (``th.cuda`` -> ``torch.cuda``)."""
        return qualified(dotted_name(node), self.aliases)

    def availability_checked(self, test: ast.expr) -> bool:
        """The condition, true, means an accelerator is there (``cst_guards.classify``, which
        reads LibCST nodes: only such conditions inside device arguments get here)."""
        return _positive_guard(self.text_of(test), tuple(sorted(self.aliases.items())))

    def text_of(self, node: ast.AST) -> str:
        """The node's source, as ``ast.get_source_segment`` (which splits the whole file at
        every call) gives it."""
        if self._lines is None:
            self._lines = [line.encode("utf-8", "surrogatepass") for line in physical_lines(self.source, keepends=True)]
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            return self._lines[first][node.col_offset:node.end_col_offset].decode("utf-8", "surrogatepass")
        pieces = [self._lines[first][node.col_offset:], *self._lines[first + 1:last], self._lines[last][:node.end_col_offset]]
        return b"".join(pieces).decode("utf-8", "surrogatepass")


@lru_cache(maxsize=256)
def _positive_guard(text: str, aliases: tuple) -> bool:
    from ..knowledge import cst_guards as guards
    from ..syntax.cst_lazy import cst
    from ..syntax.cst_nodes import dotted_name as cst_dotted_name

    try:
        test = cst.parse_expression(f"({text})")
    except Exception:  # noqa: BLE001 - a segment LibCST cannot read is no guard
        return False
    bound = dict(aliases)
    return guards.classify(test, lambda node: qualified(cst_dotted_name(node), bound)) == guards.POSITIVE
