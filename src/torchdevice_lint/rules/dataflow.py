"""Dataflow: hazards that need to know where a tensor lives, from the device inference in
``inference/``. Each finding needs both sides known; unknown values are never reported."""

from __future__ import annotations

import ast
from typing import List, Optional, Sequence, Set

from ..engine.bridge import cst_node, infer
from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Inferred, Triggers
from ..inference import FileInference, Mix, Place, value_at
from ..inference.shape import MODULE_BASE_ENDINGS
from ..inference.vocabulary import TORCH_CPU_SOURCES
from ..model.fixes import Applicability, Fix
from ..syntax.cst_lazy import cst
from ..syntax.ast_nodes import dotted_name
from ..syntax.cst_nodes import qualified, source_of
from .support.common import display_only, keyword, keyword_arg, may_meet_mps
from .support.examples import CPU_ARM, PORTABLE_MIX, PORTABLE_MIX_FIXED, STATELESS_LAYER_CALL

# What the inference must see before it can report anything (first_stage/): a value on
# a device comes from `.cuda()`, `.to(...)` or `device=`; one on the module's device from a
# module class (forward's inputs, parameters, buffers, submodules); a CPU tensor from a torch
# factory, `.cpu()`, `.to(...)` or `device=`; a CPU module from `torch.nn` or a module class.
ON_DEVICE = Triggers(calls=("cuda", "to"), keywords="device")
_MODULE_CLASS = Triggers(names="forward", bases=[ending.rsplit(".", 1)[-1] for ending in MODULE_BASE_ENDINGS])
_CPU_TENSOR = Triggers(names=[f"torch.{leaf}" for leaf in TORCH_CPU_SOURCES], calls=("cpu", "to"), keywords="device")
_CPU_MODULE = Triggers(names="torch.nn") | _MODULE_CLASS
_MIXES = (ON_DEVICE & (_CPU_TENSOR | _CPU_MODULE)) | (_MODULE_CLASS & _CPU_TENSOR)


def _device_keyword(expression: str):
    device = cst.parse_expression(expression)

    def add(updated: cst.Call) -> cst.Call:
        if keyword(updated, "device") is not None or any(arg.star == "**" for arg in updated.args):
            return updated
        args = list(updated.args)
        if args and args[-1].comma is not cst.MaybeSentinel.DEFAULT:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(
            args=args + [keyword_arg("device", device)]
        )

    return add


def _fix_device(rule: Rule, mix: Mix, factories: Sequence[ast.Call]) -> Optional[str]:
    """An expression naming the device-side tensor's device that is valid where every factory
    stands: a device-side operand's ``.device`` if it held the same value there, else the
    ``device`` variable in scope when the other side is known to be on an accelerator."""
    sites = infer(rule.ctx).factory_sites
    if not factories or any(id(f) not in sites for f in factories):
        return None
    candidates = [] if mix.module_call else [mix.device_side]
    candidates += list(mix.device_partners)
    for operand in candidates:
        if operand.key is None or not _is_tensor(rule, mix, operand.key, operand.value, factories):
            continue
        if all(value_at(sites[id(f)], operand.key, mix.scope) == operand.value for f in factories):
            return f"{operand.key}.device"
    if mix.device_side.value.place == Place.MODULE:
        for param in mix.scope.tensor_params:
            held = [value_at(sites[id(f)], param, mix.scope) for f in factories]
            if all(value is not None and value.place == Place.MODULE for value in held) and all(
                _is_tensor(rule, mix, param, value, factories) for value in held
            ):
                return f"{param}.device"
    device_name = rule.ctx.settings.device_name
    if mix.device_side.value.place == Place.DEVICE:
        for factory in factories:
            env = sites[id(factory)]
            if device_name not in env:
                return None
            held = env[device_name]
            if held is None and not _passed_by_every_caller(mix.scope.node, device_name):
                return None
            if held is not None and held.device_spec != Place.DEVICE:
                return None
        return device_name
    return None


def _is_tensor(rule: Rule, mix: Mix, key: str, value, factories: Sequence[ast.Call]) -> bool:
    """Whether ``key`` certainly holds a tensor where each factory stands, so that
    ``key.device`` exists: the inference made it a tensor, or moved it (``.cuda()``,
    ``.to(...)``: lists and numbers have neither) before this operation with tensors, or
    ``inference/tensors.py`` proves it there (the factory's own arguments, evaluated before the
    ``device=`` the fix appends, count). A ``forward`` input alone is no proof: it may be
    a list of crops, a tuple of outputs or an int."""
    if value is not None and (value.tensor or value.place == Place.DEVICE):
        return True
    function = mix.scope.node
    if "." in key or not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    return all(key in rule.ctx.devices.tensors_at_call(function, factory) for factory in factories)


def _passed_by_every_caller(function: ast.AST, name: str) -> bool:
    """A parameter without a default (not one callers may leave None), never rebound."""
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    arguments = function.args
    positional = list(arguments.posonlyargs) + list(arguments.args)
    required = [param.arg for param in positional[: len(positional) - len(arguments.defaults)]]
    required += [param.arg for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is None]
    if name not in required:
        return False
    return not any(
        isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store) for node in ast.walk(function)
    )


def _belongs_to_factory_rule(mix: Mix) -> bool:
    """TDV403 reports CPU factories inside functions that receive tensors; TDV402 the rest."""
    return mix.scope.tensor_function and all(side.value.origins for side in mix.cpu_sides)


def _has_mix(inference: FileInference) -> bool:
    return any(not _belongs_to_factory_rule(mix) for mix in inference.mixes)


def _has_factory_mix(inference: FileInference) -> bool:
    return any(_belongs_to_factory_rule(mix) for mix in inference.mixes)


def _located_fix(rule: Rule, factories: Sequence[ast.Call], replace, message: str) -> Optional[Fix]:
    """The fix giving each factory ``device=``, on the LibCST nodes where they stand."""
    nodes = [cst_node(rule.ctx, factory) for factory in factories]
    if any(node is None for node in nodes):
        return None
    return rule.make_fix({node: replace for node in nodes}, message=message)


class MixedDeviceOperation(Rule):
    code = "TDV402"
    name = "mixed-device-operation"
    message = "`{}` combines a tensor on a device with a CPU tensor: it raises on an accelerator (a CUDA GPU, a Mac's MPS)"
    fix_title = "Create the CPU-side tensor on the other tensor's device"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for operations (arithmetic, comparisons, `torch.cat`/`stack`/`matmul`..., "
        "`F.linear`/losses, calls of a module) combining a tensor known to be on a device with a "
        "tensor known to be on the CPU that is not 0-dim."
    )
    why = (
        "Except for 0-dim CPU tensors and Python scalars, every tensor an operation takes must be "
        "on one device: CUDA raises `Expected all tensors to be on the same device, but found at "
        "least two devices, cuda:0 and cpu!`. A CPU-only test run cannot see it. Plain tensor "
        "attributes set in `__init__` are a classic source: `model.to(device)` moves parameters "
        "and buffers, not them."
    )
    fix_safety_note = (
        "The fix gives the factory that made the CPU tensor `device=<the other tensor>.device` "
        "(or the `device` in scope). It is unsafe because the tensor then lives on the device "
        "wherever else it is used, e.g. a later `.numpy()` on it. Where the CPU side did not come "
        "from a factory in reach (`torch.from_numpy`, `.cpu()`, a plain attribute set in "
        "`__init__`) the fix is a suggestion only."
    )
    triggers = _MIXES & Inferred(_has_mix)
    valid = (
        STATELESS_LAYER_CALL,  # the project's module without parameters runs wherever its input is
        # a module without parameters (a loss, an activation) runs wherever its input is
        Valid(
            "import torch\nfrom torch import nn\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
            "model = nn.Linear(3, 2).to(device)\ncriterion = nn.CrossEntropyLoss()\n"
            "x = torch.randn(4, 3).to(device)\ny = torch.zeros(4, dtype=torch.long).to(device)\n"
            "loss = criterion(model(x), y)\n"
        ),
        Valid("import torch\n\ndef f(x):\n    return x.cuda() * torch.tensor(0.5)\n"),
        Valid("import torch\n\ndef f(x):\n    y = x.cuda()\n    return y * 2.0 + torch.zeros(())\n"),
        Valid("import torch\n\ndef f(a, b):\n    return a.cuda() + b\n"),
        Valid(
            "import torch\n\ndef f(x, use_gpu):\n    if use_gpu:\n        x = x.cuda()\n    return x + torch.ones(3)\n"
        ),
        Valid("import torch\n\ndef f(x):\n    x = x.cuda()\n    return x[torch.arange(3)]\n"),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Scale(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            '        self.register_buffer("scale", torch.ones(3))\n\n    def forward(self, x):\n        return x * self.scale\n'
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Scale(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.scale = torch.ones(3)\n\n    def forward(self, x):\n        self.scale = self.scale.to(x.device)\n"
            "        return x * self.scale\n"
        ),
        Valid("import torch\n\ndef f(x):\n    x = x.cuda()\n    return x + torch.zeros(3, device=x.device)\n"),
        Valid(
            "import torch\nfrom torch import nn\nmodel = nn.Linear(3, 3)\nprepare(model)\nout = model(torch.ones(3).cuda())\n"
        ),
        # meetshah1995/pytorch-semseg@801fb20 train.py:75-77,127 and pytorch/examples@77f55b9
        # distributed/ddp/example.py:39-45: a wrapper runs the module where it is, moving inputs there
        Valid(
            "import torch\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "model = torch.nn.Linear(3, 2).to(device)\n"
            "model = torch.nn.DataParallel(model, device_ids=range(torch.cuda.device_count()))\n"
            "images = torch.randn(4, 3).to(device)\noutputs = model(images)\nmore = model(torch.randn(4, 3))\n"
        ),
        # hzwer/ECCV2022-RIFE@5d8adbd model/oldmodel/IFNet_HD.py:121: a project that never names MPS
        # picks CUDA or the CPU, and a machine without CUDA runs both sides on the CPU
        Valid(PORTABLE_MIX, files={"train.py": "import torch\n"}),
    )
    invalid = (
        Invalid(PORTABLE_MIX, fixed=PORTABLE_MIX_FIXED),
        Invalid(PORTABLE_MIX, fixed=PORTABLE_MIX_FIXED, files={"train.py": "device = 'mps'\n"}),  # a Mac's GPU too
        # a CUDA hard-code that the placement fixes make follow the best device, MPS on a Mac
        Invalid(
            "import torch\nx = torch.randn(8, 3).cuda()\nnoise = torch.randn(8, 3)\ny = x + noise\n",
            fixed="import torch\nx = torch.randn(8, 3).cuda()\nnoise = torch.randn(8, 3, device=x.device)\ny = x + noise\n",
            files={"train.py": "import torch\n"},
        ),
        Invalid(
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.randn(8, 3)\nmask = torch.ones(8, 3)\nx = x.to(device)\nout = x * mask\n",
            fixed='import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.randn(8, 3)\nmask = torch.ones(8, 3, device=device)\nx = x.to(device)\nout = x * mask\n",
        ),
        Invalid(
            "import torch\n\ndef train(device):\n    model = torch.nn.Linear(3, 1).to(device)\n    for step in range(10):\n"
            "        inputs = torch.randn(4, 3)\n        loss = model(inputs).sum()\n",
            fixed="import torch\n\ndef train(device):\n    model = torch.nn.Linear(3, 1).to(device)\n    for step in range(10):\n"
            "        inputs = torch.randn(4, 3, device=device)\n        loss = model(inputs).sum()\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Scale(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.scale = torch.ones(3)\n\n    def forward(self, x):\n        return x * self.scale\n",
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\n\ndef join(emb, arr):\n    feats = torch.from_numpy(arr)\n    emb = emb.cuda()\n"
            "    return torch.cat([emb, feats], dim=1)\n",
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\n\ndef accumulate(batches, device):\n    total = torch.zeros(10)\n    for batch in batches:\n"
            "        total += batch.to(device)\n    return total\n",
            fixed="import torch\n\ndef accumulate(batches, device):\n    total = torch.zeros(10, device=device)\n    for batch in batches:\n"
            "        total += batch.to(device)\n    return total\n",
        ),
        Invalid(
            "import torch\n\ndef f(x, training):\n    x = x.cuda()\n    if training:\n        noise = torch.randn(4)\n"
            "    else:\n        noise = torch.zeros(4)\n    return x + noise\n",
            fixed="import torch\n\ndef f(x, training):\n    x = x.cuda()\n    if training:\n        noise = torch.randn(4, device=x.device)\n"
            "    else:\n        noise = torch.zeros(4, device=x.device)\n    return x + noise\n",
        ),
        Invalid(
            "import torch\n\ndef accuracy(logits, labels):\n    labels = labels.cuda()\n    return (labels == torch.tensor([1, 2, 3])).float().mean()\n",
            fixed="import torch\n\ndef accuracy(logits, labels):\n    labels = labels.cuda()\n    return (labels == torch.tensor([1, 2, 3], device=labels.device)).float().mean()\n",
        ),
        Invalid(
            "import torch\nimport torch.nn.functional as F\n\ndef loss(logits, labels, device):\n"
            "    weights = torch.tensor([1.0, 4.0])\n    return F.cross_entropy(logits.to(device), labels.to(device), weight=weights)\n",
            fixed="import torch\nimport torch.nn.functional as F\n\ndef loss(logits, labels, device):\n"
            "    weights = torch.tensor([1.0, 4.0], device=device)\n    return F.cross_entropy(logits.to(device), labels.to(device), weight=weights)\n",
        ),
    )

    def leave_Module(self, node: cst.Module) -> None:
        if not may_meet_mps(self.ctx):
            return
        for mix in infer(self.ctx).mixes:
            if _belongs_to_factory_rule(mix) or self._stateless_module_called(mix):
                continue
            operation = cst_node(self.ctx, mix.node)
            if operation is not None:
                self.report(operation, self.message.format(_short(operation)), self.fix_for(mix))

    def _stateless_module_called(self, mix: Mix) -> bool:
        """A call of a project's module class with no parameter, buffer or submodule: it runs where its inputs are."""
        return mix.module_call and any(
            side.value.module and side.value.constructor in self.ctx.project.parameterless_classes for side in mix.cpu_sides
        )

    def fix_for(self, mix: Mix) -> Fix:
        stuck = sorted(set().union(*(side.value.stuck_attributes for side in mix.cpu_sides)))
        if stuck:
            names = ", ".join(f"`{name}`" for name in stuck)
            return display_only(
                self,
                f"Register {names} in `__init__` with `self.register_buffer(...)` so that "
                "`.to(device)` moves it with the module",
            )
        if mix.module_call and mix.device_side.value.place != Place.CPU and not all(s.value.origins for s in mix.cpu_sides):
            return display_only(self, "Move the arguments to the module's device before the call")
        factories = _factories(mix)
        expression = _fix_device(self, mix, factories) if factories is not None else None
        message = f"Pass `device={expression}` to the factory"
        fix = _located_fix(self, factories, _device_keyword(expression), message) if expression is not None else None
        return fix or display_only(self, "Move the CPU tensor to the other tensor's device with `.to(...)`")


def _factories(mix: Mix) -> Optional[List[ast.Call]]:
    """The factory calls the CPU sides came from, in source order; None if some side did not
    come from a factory."""
    factories: List[ast.Call] = []
    for side in mix.cpu_sides:
        if not side.value.origins:
            return None
        factories.extend(side.value.origins)
    return sorted(set(factories), key=lambda call: (call.lineno, call.col_offset))


def _short(node: cst.CSTNode, limit: int = 60) -> str:
    text = " ".join(source_of(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_constant(call: cst.Call) -> bool:
    def constant(node: cst.BaseExpression) -> bool:
        if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString)):
            return True
        if isinstance(node, cst.UnaryOperation):
            return constant(node.expression)
        if isinstance(node, (cst.List, cst.Tuple)):
            return all(constant(e.value) for e in node.elements)
        return isinstance(node, cst.Attribute) and node.attr.value in {"float32", "float", "long", "int64", "bool"}

    return all(constant(arg.value) for arg in call.args)


class FactoryWithoutDevice(Rule):
    code = "TDV403"
    name = "factory-without-device"
    message = "`{}` creates a CPU tensor in a function whose tensors are on the module's device"
    fix_title = "Create it on the device of a tensor at hand"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks, inside `forward` and functions that receive tensors, for tensor factories "
        "(`torch.zeros/ones/empty/full/rand*/arange/linspace/eye/tensor` with non-scalar data) "
        "without `device=` whose result meets the function's tensors: an operation with them, or "
        "a call of a submodule."
    )
    why = (
        "The factory creates its tensor on the CPU whatever device the model was moved to, so the "
        "operation raises `Expected all tensors to be on the same device` on an accelerator. The "
        "classic case is an RNN's initial state `h0 = torch.zeros(...)` in `forward`."
    )
    fix_safety_note = (
        "The fix passes `device=<tensor>.device` of the tensor the result meets. It is unsafe "
        "because the tensor then lives on that device everywhere it is used. For a constant, "
        "registering it once in `__init__` with `self.register_buffer(...)` is often better."
    )
    triggers = _MIXES & Inferred(_has_factory_mix)
    valid = (
        Valid(
            "import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x):\n"
            "        return x + torch.arange(x.size(1), device=x.device)\n"
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x):\n"
            "        return x + torch.zeros_like(x) + x.new_ones(x.shape)\n"
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Enc(nn.Module):\n    def forward(self, x):\n"
            "        lengths = torch.tensor([len(s) for s in x])\n        return nn.utils.rnn.pack_padded_sequence(x, lengths)\n"
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Half(nn.Module):\n    def forward(self, x):\n"
            "        return x * torch.tensor(0.5) + x[:, torch.arange(3)]\n"
        ),
        Valid("import torch\n\ndef make(n):\n    return torch.zeros(n) + torch.ones(n)\n"),
        Valid("import torch\n\ndef pad(speech: torch.Tensor, n: int):\n    return torch.cat([speech, torch.zeros(n)])\n"),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.ctc = nn.CTCLoss()\n\n    def forward(self, log_probs, n):\n"
            "        return self.ctc(log_probs, torch.arange(1, n).unsqueeze(0), (n,), (n,))\n"
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x, offset):\n"
            "        return x + (torch.arange(5) + offset)\n"
        ),
        Valid(
            "import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x):\n"
            "        if x.is_cuda:\n            pos = torch.arange(4).cuda()\n        else:\n            pos = torch.arange(4).to(x.device)\n"
            "        return x + pos.to(x.device)\n"
        ),
        # the arm only a machine without CUDA runs, in a project that never picks MPS: all on the CPU
        Valid(CPU_ARM, files={"train.py": "import torch\n"}),
    )
    invalid = (
        # a project that picks MPS runs that arm on a Mac's GPU too
        Invalid(CPU_ARM, files={"train.py": "device = 'mps'\n"}, applicability=Applicability.DISPLAY_ONLY),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x):\n"
            "        pos = torch.arange(x.size(1))\n        return x + pos\n",
            fixed="import torch\nfrom torch import nn\n\nclass Pos(nn.Module):\n    def forward(self, x):\n"
            "        pos = torch.arange(x.size(1), device=x.device)\n        return x + pos\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Encoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.lstm = nn.LSTM(8, 16, batch_first=True)\n\n    def forward(self, x):\n"
            "        h0 = torch.zeros(1, x.size(0), 16)\n        c0 = torch.zeros(1, x.size(0), 16)\n"
            "        out, _ = self.lstm(x, (h0, c0))\n        return out\n",
            fixed="import torch\nfrom torch import nn\n\nclass Encoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.lstm = nn.LSTM(8, 16, batch_first=True)\n\n    def forward(self, x):\n"
            "        h0 = torch.zeros(1, x.size(0), 16, device=x.device)\n        c0 = torch.zeros(1, x.size(0), 16, device=x.device)\n"
            "        out, _ = self.lstm(x, (h0, c0))\n        return out\n",
            count=2,
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Mix(nn.Module):\n    def forward(self, x: torch.Tensor):\n"
            "        weights = torch.tensor([0.2, 0.3, 0.5])\n        return (x * weights).sum(-1)\n",
            fixed="import torch\nfrom torch import nn\n\nclass Mix(nn.Module):\n    def forward(self, x: torch.Tensor):\n"
            "        weights = torch.tensor([0.2, 0.3, 0.5], device=x.device)\n        return (x * weights).sum(-1)\n",
        ),
        # an input nothing shows to be a tensor (here an int) has no `.device`: a suggestion only
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Alive(nn.Module):\n    def forward(self, n_alive):\n"
            "        alive = torch.arange(8) < n_alive\n        return alive\n",
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Noisy(nn.Module):\n    def forward(self, x):\n        outputs = []\n"
            "        for t in range(x.size(1)):\n            noise = torch.randn(x.size(0), 4)\n            outputs.append(x[:, t] + noise)\n"
            "        return torch.stack(outputs, 1)\n",
            fixed="import torch\nfrom torch import nn\n\nclass Noisy(nn.Module):\n    def forward(self, x):\n        outputs = []\n"
            "        for t in range(x.size(1)):\n            noise = torch.randn(x.size(0), 4, device=x.device)\n            outputs.append(x[:, t] + noise)\n"
            "        return torch.stack(outputs, 1)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Noise(nn.Module):\n"
            "    def forward(self, images: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:\n"
            "        return images + mask * scale * torch.randn(images.shape)\n",
            fixed="import torch\nfrom torch import nn\n\nclass Noise(nn.Module):\n"
            "    def forward(self, images: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:\n"
            "        return images + mask * scale * torch.randn(images.shape, device=images.device)\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.proj = nn.Linear(8, 4)\n\n    def forward(self, x):\n        x = self.proj(x)\n"
            "        bias = torch.ones(x.size(-1))\n        return x + bias\n",
            fixed="import torch\nfrom torch import nn\n\nclass Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.proj = nn.Linear(8, 4)\n\n    def forward(self, x):\n        x = self.proj(x)\n"
            "        bias = torch.ones(x.size(-1), device=x.device)\n        return x + bias\n",
        ),
        Invalid(
            "import torch\nfrom torch import nn\n\nclass Drop(nn.Module):\n    def forward(self, x):\n        if self.training:\n"
            "            keep = torch.rand(x.size()) > 0.1\n        else:\n            keep = torch.ones(x.size())\n        return x * keep\n",
            fixed="import torch\nfrom torch import nn\n\nclass Drop(nn.Module):\n    def forward(self, x):\n        if self.training:\n"
            "            keep = torch.rand(x.size(), device=x.device) > 0.1\n        else:\n            keep = torch.ones(x.size(), device=x.device)\n        return x * keep\n",
            count=2,
        ),
    )

    def leave_Module(self, node: cst.Module) -> None:
        if not may_meet_mps(self.ctx):
            return
        reported: Set[int] = set()
        cpu_arms = _cpu_only_arms(self.ctx) if self.ctx.project.never_mps and "mps" not in self.ctx.source else ()
        for mix in infer(self.ctx).mixes:
            if not _belongs_to_factory_rule(mix):
                continue
            for factory in _factories(mix) or ():
                located = cst_node(self.ctx, factory)
                if id(factory) in reported or located is None or any(first <= factory.lineno <= last for first, last in cpu_arms):
                    continue
                reported.add(id(factory))
                self.report(located, self.message_for(located), self.fix_for(mix, factory))

    def message_for(self, factory: cst.Call) -> str:
        message = self.message.format(_short(factory))
        if _is_constant(factory):
            message += "; as a constant it could be registered once in `__init__` with `self.register_buffer(...)`"
        return message

    def fix_for(self, mix: Mix, factory: ast.Call) -> Fix:
        expression = _fix_device(self, mix, [factory])
        fix = _located_fix(self, [factory], _device_keyword(expression), f"Pass `device={expression}`") if expression else None
        return fix or display_only(self, "Pass `device=` of a tensor the function receives")


def _cpu_only_arms(ctx) -> List[tuple]:
    """The line spans of the arms only a machine without CUDA runs (``else:`` of ``if
    torch.cuda.is_available():``, the body of ``if not ...``): in a project that never picks
    MPS, every tensor there is on the CPU."""
    spans = []
    for node in ast.walk(ctx.python_tree()):
        if not isinstance(node, ast.If):
            continue
        test, negated = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, negated = test.operand, True
        if not (isinstance(test, ast.Call) and not test.args and qualified(dotted_name(test.func), ctx.aliases) == "torch.cuda.is_available"):
            continue
        arm = node.body if negated else node.orelse
        if arm:
            spans.append((arm[0].lineno, arm[-1].end_lineno))
    return spans


RULES = (MixedDeviceOperation, FactoryWithoutDevice)
