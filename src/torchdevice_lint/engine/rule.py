"""Rule base class and the examples every rule carries.

A rule is a small class: metadata (code, name, message, fix title, fix safety), its own valid and
invalid examples, what a file must contain for it to fire (``triggers``, checked by the first
stage in ``first_stage/`` before LibCST parses anything),
and ``visit_<Node>``/``leave_<Node>`` handlers called by the engine's single batched pass. One
instance is created per checked file, so a rule may keep per-file state on ``self``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Optional, Sequence

from ..first_stage.triggers import EVERY_FILE, Trigger
from ..model.fixes import Applicability, Fix

if TYPE_CHECKING:
    import libcst as cst

    from .context import FileContext


@dataclass(frozen=True)
class Valid:
    code: str
    #: ``[tool.torchdevice-lint]`` keys this example is checked with, e.g. a target version.
    config: Optional[dict] = field(default=None, hash=False)
    #: Other modules of the example's project (path -> code), for what the project model reads:
    #: an option defined in ``main.py``, a predicate in another class.
    files: Optional[dict] = field(default=None, hash=False)


@dataclass(frozen=True)
class Invalid:
    """Code the rule reports; ``fixed`` is the exact result of applying its fix (None: no fix
    is applied, e.g. display-only); ``applicability`` overrides the rule's default level for
    this example; ``count`` is the number of findings expected; ``config`` holds the
    ``[tool.torchdevice-lint]`` keys it is checked with; ``files`` the other modules of its
    project (path -> code); ``offers_fix`` False: the findings offer no fix at all (none is
    correct for the target torch)."""

    code: str
    fixed: Optional[str] = None
    applicability: Optional[Applicability] = None
    count: int = 1
    config: Optional[dict] = field(default=None, hash=False)
    files: Optional[dict] = field(default=None, hash=False)
    offers_fix: bool = True


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[Optional[str]] = None
    fix_safety: ClassVar[Applicability] = Applicability.DISPLAY_ONLY
    #: False for a rule that offers no fix, not even a suggestion (the README says "no fix").
    offers_fix: ClassVar[bool] = True
    #: "What it does" and "Why is this bad?" of the rule page.
    what: ClassVar[str] = ""
    why: ClassVar[str] = ""
    #: Extra sentences for the "Fix safety" section.
    fix_safety_note: ClassVar[str] = ""
    #: Opt-in rules (TDV9xx) run only when selected explicitly.
    default_enabled: ClassVar[bool] = True
    #: Its hazard is a machine without CUDA: moot in code that can only run on CUDA (code that
    #: drives a CUDA-only extension kernel, reported once at the build by TDV310).
    hazard_without_cuda: ClassVar[bool] = False
    #: What a file must contain for the rule to fire (sound: tests/test_first_stage.py).
    triggers: ClassVar[Trigger] = EVERY_FILE
    valid: ClassVar[Sequence[Valid]] = ()
    invalid: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, ctx: "FileContext") -> None:
        self.ctx = ctx

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        fix: Optional[Fix] = None,
    ) -> None:
        self.ctx.report(self, node, message or self.message, fix)

    def make_fix(
        self,
        replacements: dict,
        applicability: Optional[Applicability] = None,
        message: Optional[str] = None,
        **kwargs,
    ) -> Fix:
        return Fix(
            message=message or self.fix_title or "",
            applicability=applicability or self.fix_safety,
            replacements=replacements,
            **kwargs,
        )
