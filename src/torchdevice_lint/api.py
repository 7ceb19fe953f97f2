"""The public face of torchdevice-lint: what the front ends, the tests and the benchmarks use.

    from torchdevice_lint import api

    result = api.check_source("import torch\nx = torch.zeros(2).cuda()\n", "train.py")
    [finding.code for finding in result.findings]            # ['TDV101']
    api.fix_source("import torch\nx = torch.zeros(2).cuda()\n", "train.py", unsafe=True).source
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Sequence, Type

from .engine.engine import Engine
from .engine.rule import Rule
from .model.findings import FileResult
from .model.settings import Settings
from .project.model import Projects
from .rules import all_rules, rule_by_code

if TYPE_CHECKING:  # the fixer imports LibCST: a check that rules a file out never does
    from .engine.fixer import FixOutcome

__all__ = ["Engine", "FileResult", "Projects", "Rule", "Settings", "all_rules", "check_source", "engine", "fix_source", "rule_by_code"]


def engine(
    settings: Optional[Settings] = None, rules: Optional[Sequence[Type[Rule]]] = None, projects: Optional[Projects] = None
) -> Engine:
    """An engine with every rule (or ``rules``), as far as ``settings`` enables them; with
    ``projects``, each file is judged with what its project says (``project/``)."""
    return Engine(settings or Settings(), all_rules() if rules is None else rules, projects)


def check_source(source: str, path: str = "<string>", settings: Optional[Settings] = None, with_edits: bool = False) -> FileResult:
    """The findings of one file's text (or its one-line error), each fix with its edits when asked."""
    return engine(settings).check_source(path, source, with_edits)


def fix_source(source: str, path: str = "<string>", settings: Optional[Settings] = None, unsafe: bool = False) -> "FixOutcome":
    """The text with every applicable fix applied (safe ones, and unsafe ones with ``unsafe``),
    what was applied and what remains. Raises ``Unparsable`` or ``FixError``."""
    from .engine.fixer import fix_source as fix  # LibCST: imported when something is fixed

    return fix(engine(settings), path, source, unsafe)

