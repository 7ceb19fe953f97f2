"""The default device: code that makes every new tensor a CUDA tensor."""

from __future__ import annotations

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Triggers
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import source_of
from .common import display_only, guard_statement_fix, is_cuda_string, legacy_cuda_tensor


class CudaDefaultDevice(Rule):
    code = "TDV103"
    name = "cuda-default-device"
    message = "`{}` makes every new tensor a CUDA tensor, so tensor creation raises without CUDA"
    fix_title = "Only set the CUDA default when CUDA is available"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.set_default_tensor_type(torch.cuda.*Tensor)` and "
        '`torch.set_default_device("cuda")`.'
    )
    why = (
        "After either call every factory (`torch.zeros`, `torch.tensor`, ...) creates CUDA "
        "tensors; on a CPU-only machine the call itself or the first factory raises."
    )
    fix_safety_note = "The fix wraps the call in `if torch.cuda.is_available():`; CUDA machines behave as before."
    triggers = Triggers(names=("torch.set_default_tensor_type", "torch.set_default_device"))
    valid = (
        Valid("import torch\ntorch.set_default_tensor_type(torch.FloatTensor)\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    torch.set_default_device("cuda")\n'),
        Valid('import torch\ntorch.set_default_device("cpu")\n'),
        Valid("import torch\ntorch.set_default_dtype(torch.float64)\n"),
    )
    invalid = (
        Invalid(
            "import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n",
            fixed="import torch\nif torch.cuda.is_available():\n    torch.set_default_tensor_type(torch.cuda.FloatTensor)\n",
        ),
        Invalid(
            'import torch\n\ndef setup():\n    torch.set_default_tensor_type("torch.cuda.HalfTensor")\n',
            fixed='import torch\n\ndef setup():\n    if torch.cuda.is_available():\n        torch.set_default_tensor_type("torch.cuda.HalfTensor")\n',
        ),
        Invalid(
            'import torch as th\nth.set_default_device("cuda:0")  # all new tensors on GPU\n',
            fixed='import torch as th\nif th.cuda.is_available():\n    th.set_default_device("cuda:0")  # all new tensors on GPU\n',
        ),
        Invalid(
            'from torch import set_default_device\nset_default_device("cuda")\n',
            fixed='from torch import set_default_device\nimport torch\n\nif torch.cuda.is_available():\n    set_default_device("cuda")\n',
        ),
        Invalid(
            'import torch\nok = torch.set_default_device("cuda") or True\n',
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded or not node.args:
            return
        name = self.ctx.qualname(node.func)
        value = node.args[0].value
        if name == "torch.set_default_tensor_type":
            hazard = legacy_cuda_tensor(self.ctx, value) is not None
        elif name == "torch.set_default_device":
            hazard = is_cuda_string(value) or (
                isinstance(value, cst.Call)
                and self.ctx.qualname(value.func) == "torch.device"
                and bool(value.args)
                and is_cuda_string(value.args[0].value)
            )
        else:
            return
        if not hazard:
            return
        message = self.message.format(source_of(node))
        fix = guard_statement_fix(self, node, self.fix_title) or display_only(
            self, "Call it only under `if torch.cuda.is_available():`"
        )
        self.report(node, message, fix)


RULES = (CudaDefaultDevice,)
