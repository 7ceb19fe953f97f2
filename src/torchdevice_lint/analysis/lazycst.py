"""LibCST, imported the first time one of its names is used.

Importing LibCST costs more CPU than checking a typical file, and most files are ruled out by
the first stage (``prefilter.py``) without it: a run over such files, or an editor's check of
one, never pays for it. Modules on that path write ``from .lazycst import cst`` and use ``cst``
as the module; they must not touch it at import time (``tests/test_prefilter.py`` checks).
"""

from __future__ import annotations

import types


class _LazyLibCST(types.ModuleType):
    def __getattr__(self, name: str):
        import libcst

        # Later lookups find LibCST's names here, at the cost of a module attribute.
        vars(self).update((key, value) for key, value in vars(libcst).items() if not key.startswith("__"))
        return getattr(libcst, name)


cst = _LazyLibCST("libcst")
