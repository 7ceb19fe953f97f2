"""Intraprocedural device inference for the TDV4xx rules (see ``file.py`` for the method).

values      the lattice: where a value lives, joins, the events the rules read
vocabulary  the PyTorch names it knows
shape       the file-level pre-pass (functions, classes, attribute sites)
statements  the statement walk; expressions and calls: what an expression evaluates to
file        one file: every function, class facts, the shared result
"""

from .file import infer, value_at
from .values import Mix, Place

__all__ = ["Mix", "Place", "infer", "value_at"]
