"""Intraprocedural device inference for the TDV4xx rules (see ``file.py`` for the method). It
reads CPython's tree; ``engine/bridge.py`` finds its nodes in the LibCST tree the rules report on.

values      the lattice: where a value lives, joins, the events the rules read
vocabulary  the PyTorch names it knows
shape       the file-level pre-pass (functions, classes, attribute sites)
statements  the statement walk; expressions and calls: what an expression evaluates to
seeds       where its walks can start (lines the first stage's walk records)
file        one file: every function, class facts, the shared result
"""

from .file import infer_tree, value_at
from .values import FileInference, Mix, Place

__all__ = ["FileInference", "Mix", "Place", "infer_tree", "value_at"]
