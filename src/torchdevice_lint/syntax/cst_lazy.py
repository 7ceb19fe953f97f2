"""LibCST, imported the first time one of its names is used.

Importing LibCST costs more CPU than checking a typical file, and most files are ruled out by
the first stage (``first_stage/``) without it: a run over such files, or an editor's check of
one, never pays for it. Modules on that path write ``from ..syntax.cst_lazy import cst`` and use ``cst``
as the module; they must not touch it at import time (``tests/test_first_stage.py`` checks).
``libcst.matchers`` is not used on the checking path at all: importing it costs more CPU than
LibCST itself (``cst_walk.nodes_of`` does what ``findall`` did there).
"""

from __future__ import annotations

import importlib
import types


class _LazyModule(types.ModuleType):
    def __getattr__(self, name: str):
        module = importlib.import_module(self.__name__)
        # Later lookups find the module's names here, at the cost of a module attribute.
        vars(self).update((key, value) for key, value in vars(module).items() if not key.startswith("__"))
        return getattr(module, name)


cst = _LazyModule("libcst")
