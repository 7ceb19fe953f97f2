"""What a tensor on a device cannot do that a CPU tensor can, found by the device inference:
leave for NumPy without ``.cpu()`` (TDV401), or hold float64 on Apple's MPS (TDV601)."""

from __future__ import annotations

from ..engine.bridge import cst_node, infer
from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Inferred, Triggers
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import source_of
from .support.common import display_only, may_meet_mps
from .support.kernel_examples import KERNEL_FUNCTION, KERNEL_SETUP
from .dataflow import ON_DEVICE


def _method(receiver: cst.BaseExpression, name: str) -> cst.Call:
    return cst.Call(func=cst.Attribute(value=receiver, attr=cst.Name(name)))


def _is_method_call(node: cst.BaseExpression, name: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name


class NumpyOnDeviceTensor(Rule):
    code = "TDV401"
    name = "numpy-on-device-tensor"
    message = "`.numpy()` on a tensor that is on a device raises `TypeError` on an accelerator (a CUDA GPU, a Mac's MPS)"
    fix_title = "Copy the tensor to the CPU before `.numpy()`"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `.numpy()` on a tensor known to have been moved to or created on a device "
        "(`.cuda()`, `.to(device)`, `device=`, outputs of a module moved to a device) with no "
        "`.cpu()` in between."
    )
    why = (
        "`.numpy()` only works on CPU tensors: on a CUDA tensor it raises `TypeError: can't "
        "convert cuda:0 device type tensor to numpy`, and on one that requires grad `RuntimeError: "
        "Can't call numpy() on Tensor that requires grad`. Code tested on a CPU-only machine "
        "passes and fails on the first GPU run."
    )
    fix_safety_note = (
        "`.cpu()` is a no-op for CPU tensors, so the fix keeps the meaning on every device. "
        "`.detach()` is inserted too unless the tensor is known not to require grad (made by a "
        "factory, detached, or computed under `torch.no_grad()`); the array is the same."
    )
    triggers = Triggers(calls="numpy") & ON_DEVICE & Inferred(lambda inference: bool(inference.numpy_calls))
    valid = (
        Valid("import torch\nx = torch.ones(3).cuda()\nprint(x.cpu().numpy())\n"),
        Valid(
            "import torch\nx = torch.ones(3)\nif torch.cuda.is_available():\n    x = x.cuda()\n"
            "print(x.numpy())\n"
        ),
        Valid("def to_array(t):\n    return t.numpy()\n"),
        Valid("import torch\n\ndef f(x, device):\n    x = x.to(device)\n    x = x.cpu()\n    return x.numpy()\n"),
        Valid("import torch\nx = torch.ones(3).to(torch.float16)\ny = x.to('cpu', non_blocking=True)\nprint(x.numpy(), y.numpy())\n"),
        Valid(
            "import torch\n\nclass Runner:\n    def __init__(self):\n        self.buffer = torch.zeros(3).cuda()\n\n"
            "    def reset(self):\n        self.buffer = torch.zeros(3)\n\n    def dump(self):\n        return self.buffer.numpy()\n"
        ),
        Valid("import torch\nx = torch.ones(3).cuda()\nprint(x.numpy(force=True))\n"),
        Valid(
            "import torch\nx = torch.ones(2)\nfor batch in loader:\n    x = batch.cuda()\n    x = x.cpu()\nprint(x.numpy())\n"
        ),
    )
    invalid = (
        Invalid(
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(3).to(device)\nprint(x.numpy())\n",
            fixed='import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(3).to(device)\nprint(x.cpu().numpy())\n",
        ),
        Invalid(
            "import torch\n\ndef predict(model, batch, device):\n    model.to(device)\n    out = model(batch.to(device))\n    return out.numpy()\n",
            fixed="import torch\n\ndef predict(model, batch, device):\n    model.to(device)\n    out = model(batch.to(device))\n    return out.detach().cpu().numpy()\n",
        ),
        Invalid(
            "import torch\nx = torch.zeros(4).cuda()\nfor _ in range(3):\n    x = x * 2\nprint(x.numpy())\n",
            fixed="import torch\nx = torch.zeros(4).cuda()\nfor _ in range(3):\n    x = x * 2\nprint(x.cpu().numpy())\n",
        ),
        Invalid(
            "import torch\n\nclass Evaluator:\n    def __init__(self, model, device):\n        self.model = model.to(device)\n"
            "        self.device = device\n\n    def predict(self, batch):\n        with torch.no_grad():\n"
            "            logits = self.model(batch.to(self.device))\n        return logits.numpy()\n",
            fixed="import torch\n\nclass Evaluator:\n    def __init__(self, model, device):\n        self.model = model.to(device)\n"
            "        self.device = device\n\n    def predict(self, batch):\n        with torch.no_grad():\n"
            "            logits = self.model(batch.to(self.device))\n        return logits.cpu().numpy()\n",
        ),
        Invalid(
            "import torch\n\ndef f(x, flag, device):\n    if flag:\n        y = x.to(device)\n    else:\n"
            "        y = torch.zeros(3, device=device)\n    return y.numpy()\n",
            fixed="import torch\n\ndef f(x, flag, device):\n    if flag:\n        y = x.to(device)\n    else:\n"
            "        y = torch.zeros(3, device=device)\n    return y.detach().cpu().numpy()\n",
        ),
        Invalid(
            'import torch\npred = torch.randn(2, 3, device="cuda").softmax(-1)\nprint(pred.detach().numpy())\n',
            fixed='import torch\npred = torch.randn(2, 3, device="cuda").softmax(-1)\nprint(pred.detach().cpu().numpy())\n',
        ),
        Invalid(
            "import torch\n\ndef split(x, y):\n    a, b = x.cuda(), y\n    return a.numpy(), (a + 1).numpy()\n",
            fixed="import torch\n\ndef split(x, y):\n    a, b = x.cuda(), y\n    return a.detach().cpu().numpy(), (a + 1).detach().cpu().numpy()\n",
            count=2,
        ),
    )

    def leave_Module(self, node: cst.Module) -> None:
        for event in infer(self.ctx).numpy_calls:
            call = cst_node(self.ctx, event.call)
            if call is None:
                continue
            detach = not event.receiver.grad_free

            def replace(updated: cst.Call, detach: bool = detach) -> cst.Call:
                receiver = updated.func.value
                if detach and not _is_method_call(receiver, "detach"):
                    receiver = _method(receiver, "detach")
                return updated.with_changes(func=updated.func.with_changes(value=_method(receiver, "cpu")))

            title = "Insert `.detach().cpu()` before `.numpy()`" if detach else "Insert `.cpu()` before `.numpy()`"
            self.report(call, fix=self.make_fix({call: replace}, message=title))


_ON_DEVICE_DOUBLE = "import torch\n\ndef f(x, device):\n    x = x.to(device)\n    return x.double().sum()\n"


class Float64OnMps(Rule):
    code = "TDV601"
    name = "float64-on-mps"
    message = "`{}` makes a float64 tensor on the device: MPS (Apple silicon) has no float64 and raises there"
    fix_title = "Use float32 on the device (convert to float64 on the CPU if the precision is needed)"
    fix_safety = Applicability.DISPLAY_ONLY
    default_enabled = False
    hazard_without_cuda = True  # a Mac has no CUDA: code that only drives a CUDA-only kernel never meets MPS
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
        # snap-stanford/pretrain-gnns@8b20528 chem/finetune.py:33: a project that never names MPS picks
        # CUDA or the CPU, so float64 on its device never meets MPS
        Valid(_ON_DEVICE_DOUBLE, files={"train.py": "import torch\n"}),
        # the self-test of a CUDA-only kernel (fundamentalvision/Deformable-DETR@11169a6 models/ops/test.py:38)
        Valid(KERNEL_FUNCTION + "\n\nx = torch.randn(8).cuda().double()\ny = FusedAct.apply(x)\n", files={"setup.py": KERNEL_SETUP}),
    )
    invalid = (
        Invalid(_ON_DEVICE_DOUBLE, fixed=None),
        Invalid(_ON_DEVICE_DOUBLE, fixed=None, files={"train.py": "from example import f\ndevice = 'mps'\nf(x, device)\n"}),
        # facebookresearch/detr@29901c5 util/misc.py:51: the fix of the CUDA literal makes the device MPS on a Mac
        Invalid(
            "import torch\n\ndef reduce(count, total):\n    return torch.tensor([count, total], dtype=torch.float64, device='cuda')\n",
            fixed=None,
            files={"train.py": "import torch\nfrom example import reduce\nreduce(1, 2)\n"},
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
        if not may_meet_mps(self.ctx):
            return
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


RULES = (NumpyOnDeviceTensor, Float64OnMps)
