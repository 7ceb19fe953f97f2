"""Placement by integer index: ``.to(0)``, ``.to(local_rank)``, ``torch.device(0)``, ``device=0``.

An integer device means "accelerator number N". On a CPU-only build of torch 2.13 each of these
raises ``RuntimeError: Cannot access accelerator device when none is available.`` (constructing
``torch.device(0)`` included). ``device_ids=[0]`` is left alone: ``nn.DataParallel`` ignores it
without a GPU, and ``DistributedDataParallel`` only runs inside a process group.
"""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.facts import INTEGER
from ..first_stage.triggers import Arguments
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, source_of
from .common import availability_check, method_name, positional

#: Variables that hold a device index in real code (``args.gpu``, ``self.local_rank``...).
INDEX_NAMES = frozenset(
    {"rank", "local_rank", "gpu", "gpu_id", "gpu_idx", "gpu_index", "device_id", "device_idx",
     "device_index", "local_gpu", "gpu_rank"}
)


def integer_device(node: cst.BaseExpression) -> bool:
    """An integer literal, or a variable named like a device index."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, (cst.Name, cst.Attribute)):
        return (last_name(node) or "").lower() in INDEX_NAMES
    return False


class HardcodedDeviceIndex(Rule):
    code = "TDV104"
    name = "hardcoded-device-index"
    message = "integer device `{}` names an accelerator: it raises on a CPU-only machine"
    fix_title = "Fall back to the CPU when no accelerator is available"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for integers used as a device: `.to(0)`, `.to(local_rank)`, `torch.device(0)`, "
        "`torch.ones(2, device=rank)`. A variable counts when its name says it is an index "
        "(`rank`, `local_rank`, `gpu`, `gpu_id`, `device_id`...)."
    )
    why = (
        "An integer device is the index of an accelerator. Without one, torch raises "
        "`RuntimeError: Cannot access accelerator device when none is available.`, even when "
        "only constructing `torch.device(0)`."
    )
    fix_safety_note = (
        "The fix keeps the index where an accelerator is available and uses the CPU elsewhere: "
        '`.to(rank if torch.accelerator.is_available() else "cpu")` for target torch 2.6 and '
        "later, `torch.cuda.is_available()` below (a Mac then runs on the CPU)."
    )
    # what ``_device_argument`` and ``integer_device`` look at, as the first stage sees it
    triggers = Arguments(INDEX_NAMES | {INTEGER}, calls=("device", "to"), keywords="device")
    valid = (
        Valid('import torch\nx = torch.ones(2).to("cpu")\ny = x.to(torch.float16)\n'),
        Valid("import torch\nif torch.cuda.is_available():\n    x = torch.ones(2).to(0)\n"),
        Valid("import torch\nmodel = torch.nn.DataParallel(model, device_ids=[0])\n"),
        Valid("import torch\nx = torch.ones(2).to(device)\ny = x.to(rank_dtype)\n"),
        Valid("import torch\nx = torch.ones(2, device=device)\nn = count(device=0)\n"),
        Valid("import torch\nif args.distributed:\n    model = model.to(args.gpu)\n"),
        Valid("import torch\nx = torch.ones(2).to(0)  # noqa: TDV104\n"),
        # the program exits unless GPUs are there, or spawns one process per GPU
        Valid(
            "import sys\nimport torch\n\ndef enough_gpus(n=2):\n    return torch.cuda.is_available() and torch.cuda.device_count() >= n\n\n"
            "def demo(rank):\n    model = Net().to(rank)\n\n"
            'if __name__ == "__main__":\n    if not enough_gpus(2):\n        sys.exit()\n    demo(0)\n'
        ),
        Valid(
            "import torch\nimport torch.multiprocessing as mp\n\nclass Trainer:\n    def __init__(self, model, gpu_id):\n"
            "        self.model = model.to(gpu_id)\n\n"
            'if __name__ == "__main__":\n    world_size = torch.cuda.device_count()\n    mp.spawn(main, nprocs=world_size)\n'
        ),
    )
    invalid = (
        Invalid(
            "import torch\nx = torch.ones(2).to(0)\n",
            fixed='import torch\nx = torch.ones(2).to(0 if torch.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\n\ndef train(model, batch, local_rank):\n    return model(batch.to(local_rank))\n",
            fixed='import torch\n\ndef train(model, batch, local_rank):\n    return model(batch.to(local_rank if torch.cuda.is_available() else "cpu"))\n',
        ),
        Invalid(
            "import torch\ndevice = torch.device(0)\n",
            fixed='import torch\ndevice = torch.device(0 if torch.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch as th\nmask = th.zeros(4, device=self.gpu_id)\n",
            fixed='import torch as th\nmask = th.zeros(4, device=self.gpu_id if th.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\nmodel = model.to(device=0, dtype=torch.float16)\n",
            fixed='import torch\nmodel = model.to(device=0 if torch.cuda.is_available() else "cpu", dtype=torch.float16)\n',
        ),
        Invalid(
            "import torch\nx = torch.ones(2).to(local_rank)\n",
            fixed='import torch\nx = torch.ones(2).to(local_rank if torch.accelerator.is_available() else "cpu")\n',
            config={"target-torch-version": "2.6"},
        ),
        Invalid(
            "from torch import device\ndev = device(1)\n",
            fixed='from torch import device\nimport torch\n\ndev = device(1 if torch.cuda.is_available() else "cpu")\n',
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        index = self._device_argument(node)
        if index is None:
            return
        # with torch.accelerator (2.6) an integer is an index of the current accelerator (MPS, XPU... too)
        check = cst.parse_expression(availability_check(self.ctx, "accelerator") or availability_check(self.ctx, "cuda"))

        def fall_back(updated: cst.BaseExpression) -> cst.BaseExpression:
            return cst.IfExp(test=check, body=updated, orelse=cst.SimpleString('"cpu"'))

        fix = self.make_fix({index: fall_back}, imports=self.ctx.torch_imports())
        self.report(index, self.message.format(source_of(index)), fix)

    def _device_argument(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        args = positional(call)
        name = self.ctx.qualname(call.func)
        if name == "torch.device":
            return args[0].value if len(args) == 1 and integer_device(args[0].value) else None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device" and integer_device(arg.value):
                torch_call = name is not None and name.startswith("torch.")
                return arg.value if torch_call or method_name(call) is not None else None
        if method_name(call) == "to" and args and integer_device(args[0].value):
            return args[0].value
        return None


RULES = (HardcodedDeviceIndex,)
