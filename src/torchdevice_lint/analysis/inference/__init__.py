"""Intraprocedural device inference for the TDV4xx rules (see ``file.py`` for the method).

values      the lattice: where a value lives, joins, the events the rules read
vocabulary  the PyTorch names it knows
shape       the file-level pre-pass (functions, classes, attribute sites)
statements  the statement walk; expressions and calls: what an expression evaluates to
nodes       what the walk reads of CPython ``ast`` nodes
file        one file: every function, class facts, the shared result
located     the result's nodes in the LibCST tree the rules report on
"""

from .file import infer_tree, value_at
from .located import cst_node, infer
from .values import FileInference, Mix, Place

__all__ = ["FileInference", "Mix", "Place", "cst_node", "infer", "infer_tree", "value_at"]
