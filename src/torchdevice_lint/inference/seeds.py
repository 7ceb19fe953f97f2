"""Where the device inference can start: the lines the first stage's walk records for it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from .values import Place
from .vocabulary import place_of_device_string


@dataclass
class Seeds:
    """Lines of the nodes a walk of the inference can start from that one look at a node finds,
    before the file's imports are read; the first stage's walk collects them. The torch
    factories, ``torch.nn`` constructors and module classes called are found by name
    afterwards. A function holding none of them is not walked (``FileAnalysis.run``)."""

    #: ``.cpu()`` calls and ``"cpu"`` strings: they make CPU values.
    cpu: List[int] = field(default_factory=list)
    #: ``.numpy()`` and ``.double()`` calls, float64 names and ``"torch.DoubleTensor"``: events.
    events: List[int] = field(default_factory=list)

    def see_call(self, method: str, line: int) -> None:
        """A call of ``<expr>.method(...)``, ``method`` one of ``SEED_METHODS``."""
        (self.cpu if method == "cpu" else self.events).append(line)

    def see_string(self, text: str, line: int) -> None:
        if text[:3] == "cpu" and place_of_device_string(text) is Place.CPU:
            self.cpu.append(line)
        elif text == "torch.DoubleTensor":
            self.events.append(line)


#: The methods whose calls are seeds.
SEED_METHODS = frozenset({"cpu", "numpy", "double"})
