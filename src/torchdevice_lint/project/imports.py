"""What a module's imports of other modules of its project bring into it.

``from utils import *`` binds ``torch`` in a script that never imports it when ``utils.py`` does
``import torch``; ``from utils import device`` binds the project's device, portable or not, as
``utils.py`` defines it at module level. Modules are found as Python finds them when the
script's folder (or the project's root, or a folder between) is on ``sys.path``: ``utils`` is
``utils.py`` or ``utils/__init__.py`` there; a relative module counts from the importer's package.
Only the project's own modules are read: what ``torch`` or any installed package exports is not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Set, Tuple

from .facts import ModuleFacts, imported_name

#: Star imports and re-exports followed this deep (``models/__init__.py`` -> ``models/base.py``...).
MAX_DEPTH = 4


class ImportResolver:
    """Finds the project's modules by import name and says what each one exports."""

    def __init__(self, root: Path, modules: Mapping[str, ModuleFacts]) -> None:
        self.root = root
        self.modules = modules
        self._exports: Dict[str, Tuple[Dict[str, str], Dict[str, str]]] = {}
        #: (importing folder, module) -> ``_candidates``: a folder's modules import much the same.
        self._found: Dict[Tuple[str, str], List[str]] = {}

    def brought(self, path: str) -> Tuple[Dict[str, str], Dict[str, str]]:
        """(torch names, device kinds) that the module at ``path`` takes from the project's other
        modules, by local name; names it binds by its own imports of anything else are left out."""
        facts = self.modules.get(path)
        if facts is None:
            return {}, {}
        return self._taken(path, facts, MAX_DEPTH, set())

    def _taken(self, path: str, facts: ModuleFacts, depth: int, seen: Set[str]) -> Tuple[Dict[str, str], Dict[str, str]]:
        names: Dict[str, str] = {}
        devices: Dict[str, str] = {}
        for module in facts.star_imports:
            target = self.find(path, module)
            if target is None or target in seen:
                continue
            exported_names, exported_devices = self.exports(target, depth - 1, seen | {path})
            names.update((local, name) for local, name in exported_names.items() if local not in facts.imports)
            devices.update((local, kind) for local, kind in exported_devices.items() if local not in facts.imports)
        for local, imported in facts.imports.items():
            module, colon, name = imported.partition(":")
            if not colon:
                continue
            target = self.find(path, module)
            if target is None or target in seen:
                continue
            exported_names, exported_devices = self.exports(target, depth - 1, seen | {path})
            if name in exported_names:
                names[local] = exported_names[name]
            if name in exported_devices:
                devices[local] = exported_devices[name]
        return names, devices

    def exports(self, path: str, depth: int, seen: Set[str]) -> Tuple[Dict[str, str], Dict[str, str]]:
        """The torch names and module-level devices a module offers others, by name (what a star
        import takes when it has no ``__all__``, else what ``__all__`` lists)."""
        if path in self._exports:
            return self._exports[path]
        facts = self.modules[path]
        names = {local: target for local, target in map(_torch_name, facts.imports.items()) if target is not None}
        devices = dict(facts.devices)
        if depth > 0:
            taken_names, taken_devices = self._taken(path, facts, depth, seen)
            for local, name in taken_names.items():
                names.setdefault(local, name)
            for local, kind in taken_devices.items():
                if local not in facts.devices:
                    devices[local] = kind
        public = set(facts.public) if facts.public is not None else None
        names = {local: name for local, name in names.items() if _offered(local, public)}
        devices = {local: kind for local, kind in devices.items() if _offered(local, public)}
        if depth == MAX_DEPTH - 1:  # a complete answer (deeper ones are cut short): kept for the next importer
            self._exports[path] = (names, devices)
        return names, devices

    def imported(self, importer: str) -> Set[str]:
        """The project's modules that the module at ``importer`` imports by name."""
        found = (self.find(importer, imported.partition(":")[0]) for imported in self.modules[importer].imports.values())
        return {target for target in found if target is not None}

    def find(self, importer: str, module: str) -> Optional[str]:
        """The path of the project's module ``module`` as ``importer`` imports it, or None."""
        key = (os.path.dirname(importer), module)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = self._candidates(importer, module)
        return next((candidate for candidate in found if candidate != importer), None)

    def _candidates(self, importer: str, module: str) -> List[str]:
        """The project's modules that ``module`` may name from ``importer``'s folder, nearest first
        (the same for every module of the folder, but the importer itself)."""
        found = []
        dots = len(module) - len(module.lstrip("."))
        parts = [part for part in module[dots:].split(".") if part]
        folder = os.path.dirname(importer)
        if dots:
            for _ in range(dots - 1):
                folder = os.path.dirname(folder)
            bases = [folder]
        else:
            bases = [folder, *_folders_up_to(os.path.dirname(folder), str(self.root))]
        tail = "".join(os.sep + part for part in parts)  # joined by hand: 16,000 ``os.path.join`` cost 0.05 s
        for base in bases:
            place = base.rstrip(os.sep) + tail
            for candidate in (place + ".py", place + os.sep + "__init__.py") if parts else (place + os.sep + "__init__.py",):
                if candidate in self.modules:
                    found.append(candidate)
        return found


def _folders_up_to(folder: str, root: str) -> List[str]:
    """``folder`` and the folders above it, up to ``root`` included, where it lies in ``root``."""
    inside = root if root.endswith(os.sep) else root + os.sep
    found = []
    while folder == root or folder.startswith(inside):
        found.append(folder)
        above = os.path.dirname(folder)
        if above == folder:
            break
        folder = above
    return found


def _torch_name(item: Tuple[str, str]) -> Tuple[str, Optional[str]]:
    """``("nn", "torch.nn")`` for ``import torch.nn as nn``, ``("F", "torch.nn.functional")`` for
    ``from torch.nn import functional as F``; the target None for anything not from torch."""
    local, imported = item
    target = imported_name(imported)
    return local, target if target == "torch" or target.startswith("torch.") else None


def _offered(name: str, public: Optional[Set[str]]) -> bool:
    return name in public if public is not None else not name.startswith("_")
