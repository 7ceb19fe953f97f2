"""Readers of the two trees, each named for the tree it reads (``ast_*``: CPython's, ``cst_*``:
LibCST's), and the lines and positions both share."""
