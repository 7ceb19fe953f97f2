"""TDV900: ``# noqa`` directives that suppress nothing (ruff's RUF100, opt-in as it is in ruff).

The engine finds them after every other rule has run, since only then is it known which
directives were needed (``analysis.noqa``); this class carries the rule's metadata and examples.
"""

from __future__ import annotations

from ..engine.noqa import UNUSED_NOQA
from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Triggers


class UnusedNoqa(Rule):
    code = UNUSED_NOQA
    name = "unused-noqa"
    message = "Unused `noqa` directive (unused: {codes})"
    fix_title = "Remove the unused codes from the directive"
    default_enabled = False
    what = (
        "Checks for `# noqa: TDV...` directives naming a code that reports nothing on that line: "
        "the hazard was fixed, the code moved, or the code is not selected."
    )
    why = (
        "A stale directive hides the next real finding on the line. Bare `# noqa` and other "
        "tools' codes (`# noqa: E501`) are left alone: flake8 or ruff may need them."
    )
    fix_safety_note = "No fix is applied: delete the codes named (or the whole comment) by hand."
    triggers = Triggers(text=("noqa", "NOQA"))
    valid = (
        Valid("import torch\nx = torch.ones(2)  # noqa\n"),
        Valid("import torch\nx = torch.ones(2)  # noqa: E501\n"),
        Valid('import torch\nhelp_text = "write # noqa: TDV101 after the line"\n'),
        Valid('"""Write `# noqa: TDV101` after the line to keep it."""\nimport torch\n'),
        Valid("# torchdevice-lint: noqa\nimport torch\nx = torch.ones(2)  # noqa: TDV101\n"),
    )
    invalid = (
        Invalid("import torch\nx = torch.ones(2)  # noqa: TDV101\n"),
        Invalid("import torch\nx = torch.ones(2)  # noqa: E501, TDV102\n"),
        Invalid("x = 1  # noqa:TDV3\ny = 2  # NOQA: TDV501\n", count=2),
        Invalid('import torch\nstate = torch.load("m.pt", map_location="cpu")  # noqa: TDV501\n'),
    )


RULES = (UnusedNoqa,)
