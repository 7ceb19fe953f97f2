"""The fix model: ruff's three safety levels, node replacements, and the imports a fix needs.

It sits below both the rule base and the settings (which name the imports a device binding
needs), so neither has to import the other.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from .errors import FileProblem

if TYPE_CHECKING:
    import libcst as cst


class FixError(FileProblem):
    """A fix would have produced code that does not parse or compile; nothing is written."""


class Applicability(str, enum.Enum):
    """ruff's three fix safety levels."""

    SAFE = "safe"  # meaning kept on every device: applied by default
    UNSAFE = "unsafe"  # device choice may change: applied with --unsafe-fixes
    DISPLAY_ONLY = "display-only"  # a suggestion, never applied

    @property
    def rank(self) -> int:
        return {"safe": 0, "unsafe": 1, "display-only": 2}[self.value]


# A replacement receives the node as already rewritten by fixes nested inside it, so fixes on
# nested nodes compose instead of overwriting each other.
Replacement = Callable[["cst.CSTNode"], "cst.CSTNode"]


@dataclass(frozen=True)
class ImportSpec:
    """An import a fix needs: ``import module`` or ``from module import obj [as asname]``."""

    module: str
    obj: Optional[str] = None
    asname: Optional[str] = None


@dataclass
class Fix:
    """What a fix changes: node replacements plus file-level needs (imports, a device binding)."""

    message: str
    applicability: Applicability
    replacements: dict = field(default_factory=dict)  # original node -> Replacement
    imports: Sequence[ImportSpec] = ()
    # Imports that may become unused after the fix: removed only if nothing uses them any more.
    removable_imports: Sequence[ImportSpec] = ()
    # True when the fix refers to the module-level device binding the fixer inserts.
    needs_device_binding: bool = False


#: The end of a suggestion a rule gives instead of a fix the target torch lacks; the fixer's
#: summary reads the version back (from cached findings too) to say why a finding remains.
_NEEDS_TARGET = re.compile(r" \(needs `target-torch-version` (\d+(?:\.\d+)*)\)$")


def needs_target(title: str, since: tuple) -> str:
    """``"Use X (needs `target-torch-version` 2.3)"``: a suggestion withheld for the target."""
    return f"{title} (needs `target-torch-version` {'.'.join(str(part) for part in since)})"


def target_needed(fix_message: str) -> Optional[str]:
    """The torch release a withheld fix needs (``"2.3"``), None for any other suggestion."""
    match = _NEEDS_TARGET.search(fix_message)
    return match.group(1) if match else None
