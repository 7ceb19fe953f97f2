"""Dtypes that some accelerators refuse: float64 on Apple's MPS."""

from __future__ import annotations

from ..engine.bridge import cst_node, infer
from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Inferred, Triggers
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import source_of
from .common import display_only
from .dataflow import ON_DEVICE


class Float64OnMps(Rule):
    code = "TDV601"
    name = "float64-on-mps"
    message = "`{}` makes a float64 tensor on the device: MPS (Apple silicon) has no float64 and raises there"
    fix_title = "Use float32 on the device (convert to float64 on the CPU if the precision is needed)"
    fix_safety = Applicability.DISPLAY_ONLY
    default_enabled = False
    what = (
        "Checks for float64 tensors on a tensor known to be on a device (moved with `.to(device)`/"
        "`.cuda()` or created with `device=`): `.double()`, `.to(torch.float64)`, "
        "`.type(torch.DoubleTensor)`, a factory with `dtype=torch.float64` and a device, "
        "`.to(device, torch.float64)`, and `.double().to(device)`. Opt-in (select `TDV601`): on "
        "real code most such tensors belong to CUDA-only projects that never meet MPS."
    )
    why = (
        "MPS refuses float64: `Cannot convert a MPS Tensor to float64 dtype as the MPS framework "
        "doesn't support float64. Please use float32 instead.` Code that runs on CUDA and the CPU "
        "fails on every Mac. Tensors whose device is unknown are not reported."
    )
    fix_safety_note = (
        "No automatic fix: float32 changes the numbers, and keeping float64 means computing on "
        "the CPU. The suggestion is float32 on the device, float64 only on the host."
    )
    triggers = ON_DEVICE & Triggers(
        calls="double", names=("torch.float64", "torch.double", "torch.DoubleTensor"), strings="torch.DoubleTensor"
    ) & Inferred(lambda inference: bool(inference.float64_calls))
    valid = (
        Valid("import torch\nx = torch.ones(3).double()\nprint(x.sum())\n"),
        Valid("import torch\n\ndef f(x, device):\n    x = x.double()\n    return x.cpu().numpy()\n"),
        Valid("import torch\n\ndef f(x, device):\n    y = x.to(device).float()\n    return y.to(torch.float32)\n"),
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float64)\ny = torch.zeros(3, dtype=torch.float32, device='cuda')\n"),
        Valid("import torch\n\ndef f(batch, device):\n    stats = batch.cpu().double()\n    return stats.mean()\n"),
        # look-alikes: a method of another object, a numpy dtype on the host
        Valid("import numpy as np\nimport torch\na = np.zeros(3, dtype=np.float64)\nval = parser.double()\n"),
    )
    invalid = (
        Invalid(
            "import torch\n\ndef f(x, device):\n    x = x.to(device)\n    return x.double().sum()\n",
            fixed=None,
        ),
        Invalid(
            "import torch\n\ndef make(n, device):\n    return torch.zeros(n, dtype=torch.float64, device=device)\n",
            fixed=None,
        ),
        Invalid(
            "import numpy as np\nimport torch\n\ndef load(a, device):\n    return torch.from_numpy(a).double().to(device)\n",
            fixed=None,
        ),
        Invalid(
            "import torch\n\ndef f(x, device):\n    return x.to(device, torch.double)\n",
            fixed=None,
        ),
        Invalid(
            "import torch\n\ndef f(model, device):\n    model = model.to(device)\n    model = model.type(torch.DoubleTensor)\n    return model\n",
            fixed=None,
        ),
        Invalid(
            "import torch\nx = torch.ones(3).cuda()\ny = x.to(dtype=torch.float64)\n",
            fixed=None,
        ),
    )

    def leave_Module(self, node: cst.Module) -> None:
        seen = set()
        for event in infer(self.ctx).float64_calls:
            call = cst_node(self.ctx, event)
            if id(event) in seen or call is None:
                continue
            seen.add(id(event))
            self.report(call, self.message.format(_short(call)), display_only(self, self.fix_title))


def _short(call: cst.Call) -> str:
    text = source_of(call)
    return text if len(text) <= 60 else text[:57] + "..."


RULES = (Float64OnMps,)
