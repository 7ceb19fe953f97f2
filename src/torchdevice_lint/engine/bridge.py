"""The inference's findings in the LibCST tree the rules report and fix on.

The inference runs on CPython's tree in the first stage (``file.py``); a file whose inference
finds something is then parsed with LibCST, and each node an event names is found there by
kind and position (``positions.cst_nodes_at``).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Optional

from ..inference.values import FileInference

if TYPE_CHECKING:
    from ..syntax.cst_lazy import cst
    from .context import FileContext


def infer(ctx: "FileContext") -> FileInference:
    """The file's inference: the first stage's, or computed here when the engine ran without
    it (one CPython parse)."""
    if ctx.inference is None:
        from ..first_stage.facts import parse_facts

        ctx.inference = parse_facts(ctx.source, ctx.python_tree()).inferred()
    return ctx.inference


def cst_node(ctx: "FileContext", node: ast.AST) -> Optional["cst.CSTNode"]:
    """The LibCST node standing where ``node`` stands in ``ctx.module``."""
    inference = infer(ctx)
    if inference.located is None:
        from ..syntax.positions import cst_nodes_at

        inference.located = cst_nodes_at(ctx.module, ctx.source, inference.reported_nodes(), ctx.statement_first_lines)
    return inference.located.get(id(node))
