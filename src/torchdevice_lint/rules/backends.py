"""Placement on accelerators other than CUDA: MPS, XPU, NPU, HPU and XLA; and (opt-in, TDV905)
any backend's own API outside a project's platform layer.

TDV105 is one rule rather than TDV101/TDV102 widened: a project that targets one of these
backends on purpose (a Mac-only app, a Gaudi trainer) can turn it off without losing the CUDA
rules, and the message names the hardware each device needs.
"""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Placed, Triggers, Within, within
from ..knowledge.backends import ACCELERATOR_MODULES, DEVICE_METHODS, DEVICE_MODULES, OTHER_BACKENDS, backend_of_device_string
from ..model.fixes import Applicability
from ..model.settings import compiled_patterns, relative_path
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import string_value
from .support.common import availability_check, display_only, method_name, report_device_method
from .placement import HardcodedCudaDevice

# Tensor and module methods that move to a backend: ``.xpu()`` is torch's own, ``.npu()`` and
# ``.hpu()`` are added by torch_npu and Habana's bridge.

_BINDING = 'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'


def literal_backend(node: cst.CSTNode) -> Optional[str]:
    """``"mps"``, ``"xpu:0"``, ``f"xpu:{rank}"`` -> the backend it names."""
    value = string_value(node)
    return None if value is None else backend_named(value, isinstance(node, cst.FormattedString))


def backend_named(text: str, formatted: bool) -> Optional[str]:
    """The backend a device literal's text names (``formatted``: the leading text of an
    f-string, which must end at the index: ``f"xpu:{rank}"``)."""
    if formatted:
        backend = text.partition(":")[0]
        return backend if text.endswith(":") and backend in OTHER_BACKENDS else None
    return backend_of_device_string(text)


def may_name_backend(text: str) -> bool:
    """What the first stage asks of a placed string, which may be an f-string's leading text."""
    return backend_named(text, False) is not None or backend_named(text, True) is not None


class HardcodedBackendDevice(HardcodedCudaDevice):
    code = "TDV105"
    name = "hardcoded-backend-device"
    message = "hard-coded {1} device `{0}`: it raises on every machine without {2}"
    fix_title = "Use a device chosen at run time"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for devices of the accelerators other than CUDA written into the code: "
        '`.xpu()`/`.npu()`/`.hpu()`, and `"mps"`, `"xpu:0"`, `"npu"`, `"hpu"`, `"xla"` literals '
        "used as a device in the places TDV102 checks for `\"cuda\"` (`.to(...)`, `device=`, "
        "`torch.device(...)`, a device variable, parameter default or `--device` option), and "
        "`torch.set_default_device(\"mps\")`. This is one rule for every non-CUDA backend rather "
        "than TDV101/TDV102 widened, so a project written for one backend can turn it off alone."
    )
    why = (
        'Each of these raises where its backend is missing: `torch.zeros(2, device="mps")` '
        '(`NotImplementedError`), `.to("mps")` (`RuntimeError: PyTorch is not linked with support '
        'for mps devices`), `.to("xpu")` and `.xpu()` (`AssertionError: Torch not compiled with '
        "XPU enabled`). Code that picks its device at run time runs on every machine. A literal "
        "behind that backend's own check (`torch.backends.mps.is_available()`, "
        '`torch.xpu.is_available()`, `device.type == "mps"`, `x.is_xpu`) is fine.'
    )
    fix_safety_note = (
        "A literal or method used as a device becomes the `device` in scope (or a module-level one "
        "the fix defines, which tries CUDA, then MPS, then the CPU, or `torch.accelerator` when "
        "`target-torch-version` is 2.6 or later); a literal that defines a device becomes "
        '`"mps" if torch.backends.mps.is_available() else "cpu"` (`torch.xpu.is_available()`, '
        '`hasattr(torch, "npu") and torch.npu.is_available()`...). XLA has no check in torch '
        "itself: its literals get a suggestion only."
    )
    triggers = Triggers(calls=DEVICE_METHODS) | Placed(may_name_backend, as_device=True)
    valid = (
        Valid('import torch\ndevice = torch.device("mps" if torch.backends.mps.is_available() else "cpu")\n'),
        Valid(
            'import torch\nif torch.cuda.is_available():\n    device = "cuda"\n'
            'elif torch.backends.mps.is_available():\n    device = "mps"\nelse:\n    device = "cpu"\n'
        ),
        Valid('import torch\n\ndef f(x, device):\n    if device.type == "mps":\n        x = x.to("mps")\n    return x\n'),
        Valid('import torch\n\ndef f(x):\n    if x.device.type in ("xpu", "cuda"):\n        return x.xpu()\n    return x\n'),
        Valid('import torch\nif torch.xpu.is_available():\n    model = model.xpu()\n'),
        Valid(
            'import torch\nuse_mps = args.mps and torch.backends.mps.is_available()\n'
            'if use_cuda:\n    device = torch.device("cuda")\nelif use_mps:\n    device = torch.device("mps")\n'
        ),
        Valid("import torch\nif torch.accelerator.is_available():\n    x = x.to('xpu:0')\n"),
        # look-alikes: a backend name that is not a device, a method of a module object
        Valid('import torch\nbackend = "xla"\nprint("mps")\nif args.device == "mps":\n    pass\n'),
        Valid('import torch_npu\nx = torch_npu.npu()\nsamples = inputs.to(device)\n'),
        Valid('import torch\nx = torch.ones(2).to("mpsx")\ny = torch.ones(2).to("cpu")\n'),
        Valid('import torch\nx = x.to("xpu")  # noqa: TDV105\n'),
    )
    invalid = (
        Invalid(
            'import torch\nx = torch.ones(2).to("mps")\n',
            fixed="import torch\n\n" + _BINDING + "x = torch.ones(2).to(device)\n",
        ),
        Invalid(
            "import torch\n\ndef run(model, batch, device):\n    model.xpu()\n    return model(batch.xpu(non_blocking=True))\n",
            fixed="import torch\n\ndef run(model, batch, device):\n    model.to(device)\n    return model(batch.to(device, non_blocking=True))\n",
            count=2,
        ),
        Invalid(
            'import torch\n\ndef make(n, device):\n    return torch.zeros(n, device="xpu:0")\n',
            fixed='import torch\n\ndef make(n, device):\n    return torch.zeros(n, device=device)\n',
        ),
        Invalid(
            'import torch as th\ndevice = th.device("mps")\n',
            fixed='import torch as th\ndevice = th.device("mps" if th.backends.mps.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\n\ndef noise(shape, device='xpu'):\n    return torch.randn(shape, device=device)\n",
            fixed="import torch\n\ndef noise(shape, device='xpu' if torch.xpu.is_available() else 'cpu'):\n    return torch.randn(shape, device=device)\n",
        ),
        Invalid(
            'import torch\nimport torch_npu\nDEVICE = "npu:0"\n',
            fixed='import torch\nimport torch_npu\nDEVICE = "npu:0" if hasattr(torch, "npu") and torch.npu.is_available() else "cpu"\n',
        ),
        Invalid(
            'import torch\nx = torch.ones(1).to(torch.device(f"xpu:{rank}"))\n',
            fixed="import torch\n\n" + _BINDING + "x = torch.ones(1).to(device)\n",
        ),
        Invalid(
            'import torch\ndevice = torch.device("xla")\n',
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            'import torch\ntorch.set_default_device("mps")\n',
            fixed="import torch\n\n" + _BINDING + "torch.set_default_device(device)\n",
        ),
        # a name that only contains a backend's letters is no flag for it
        Invalid(
            'import torch\n\ndef f(x, timestamps):\n    if timestamps:\n        x = x.to("mps")\n    return x\n',
            fixed="import torch\n\n" + _BINDING + '\ndef f(x, timestamps):\n    if timestamps:\n        x = x.to(device)\n    return x\n',
        ),
        # another backend's check does not guard this one
        Invalid(
            'import torch\nif torch.cuda.is_available():\n    x = x.cuda()\nelse:\n    x = x.to("mps")\n',
            fixed="import torch\n\n" + _BINDING + "if torch.cuda.is_available():\n    x = x.cuda()\nelse:\n    x = x.to(device)\n",
        ),
        # the fix follows the project's torch: torch.accelerator from 2.6
        Invalid(
            'import torch\nmodel = Net().to("mps")\n',
            fixed=(
                "import torch\n\n"
                'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")\n'
                "model = Net().to(device)\n"
            ),
            config={"target-torch-version": "2.6"},
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        method = method_name(node)
        if method in DEVICE_METHODS and not self.ctx.guarded:
            hardware = OTHER_BACKENDS[method]
            report_device_method(self, node, f"`.{method}()` moves to {hardware} unconditionally and raises on every machine without it")

    def names_device(self, literal: cst.BaseExpression) -> bool:
        return literal_backend(literal) is not None

    def names_template(self, head: str) -> bool:
        return False

    def message_for(self, literal: cst.BaseExpression, text: str) -> str:
        hardware = OTHER_BACKENDS[literal_backend(literal)]
        return self.message.format(text, hardware.split(" (")[0], hardware)

    def availability_for(self, literal: cst.BaseExpression) -> Optional[str]:
        return availability_check(self.ctx, literal_backend(literal))

    def fallback_for(self, quote: str) -> str:
        return f"{quote}cpu{quote}"

    def _argument_usage(self, call: cst.Call, arg: cst.Arg) -> Optional[str]:
        if self.ctx.qualname(call.func) == "torch.set_default_device" and arg is call.args[0]:
            return "use"
        return super()._argument_usage(call, arg)


class BackendApiOutsidePlatformLayer(Rule):
    code = "TDV905"
    name = "backend-api-outside-platform-layer"
    message = "`{}` outside the platform layer (`allowed-backend-paths`): go through the project's device abstraction"
    fix_title = "Call the platform layer, or move this code into it"
    default_enabled = False
    what = (
        "Checks for every use of an accelerator's own API (`torch.cuda`, `torch.mps`, `torch.xpu`, "
        "`torch.mtia`, `torch.npu`, `torch.hpu`, `torch.musa`, `torch.rbln`, `torch.neuron`: calls, "
        "attributes, annotations, names imported from them), guarded or not, in files outside "
        "`allowed-backend-paths` (gitignore patterns, relative to the `pyproject.toml`). "
        '`banned-backend-apis` bans some names instead: `["torch.cuda.empty_cache"]` that one and '
        'whatever is below it, `["torch.cuda", "torch.cpu"]` those modules. An import is not reported, its uses are.'
    )
    why = (
        "Projects that run on several accelerators (vLLM, DeepSpeed, LMCache) route every device call "
        "through one platform layer and ban `torch.cuda` elsewhere with a grep hook. Resolving names "
        "through the imports catches `from torch import cuda` and aliases, and skips comments and strings."
    )
    fix_safety_note = "The replacement is the project's own API: there is no automatic fix."
    triggers = Within(DEVICE_MODULES)
    valid = (
        Valid("import torch\nn = torch.accelerator.device_count()\n"),
        Valid("import torch\ntorch.cuda.synchronize()\n", config={"allowed-backend-paths": ["example.py"]}),
        Valid("import torch\ntorch.cuda.manual_seed(0)\n", config={"banned-backend-apis": ["torch.cuda.empty_cache"]}),
        Valid("from numba import cuda\ncuda.synchronize()\n# torch.cuda.synchronize()\nprint('torch.cuda')\n"),
        Valid("import torch\nok = torch.cuda.is_available()  # noqa: TDV905 - the CUDA graph path\n"),
    )
    invalid = (
        Invalid("import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n", count=2),
        Invalid("from torch import cuda\n\ndef free():\n    cuda.empty_cache()\n"),
        Invalid("import torch\nimport torch.cuda\nfrom torch.cuda import Stream as S\n\ndef run(s: S = S()):\n    return s\n", count=2),
        Invalid("import torch as th\nfree = th.mps.recommended_max_memory() - th.xpu.get_device_properties(0).total_memory\n", count=2),
        Invalid("import torch\ntorch.cuda.empty_cache()\n", config={"banned-backend-apis": ["torch.cuda.empty_cache"]}),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        allowed = tuple(ctx.settings.allowed_backend_paths)
        self.allowed = bool(allowed) and compiled_patterns(allowed).match(relative_path(ctx.path, ctx.settings.root))
        self.banned = tuple(ctx.settings.banned_backend_apis) or ACCELERATOR_MODULES

    def visit_Attribute(self, node: cst.Attribute) -> None:
        parent = self.ctx.parent()
        if not (isinstance(parent, cst.Attribute) and parent.value is node):  # a whole chain, once
            self._check(node, parent)

    def visit_Name(self, node: cst.Name) -> None:
        parent = self.ctx.parent()
        if isinstance(parent, cst.Attribute):
            return  # a chain's head or an attribute's own name: the chain is checked whole
        if isinstance(parent, (cst.FunctionDef, cst.ClassDef, cst.Param)) and parent.name is node:
            return
        if not (isinstance(parent, cst.Arg) and parent.keyword is node):
            self._check(node, parent)

    def _check(self, node: cst.BaseExpression, parent) -> None:
        if self.allowed or isinstance(parent, (cst.Import, cst.ImportFrom, cst.ImportAlias, cst.AsName)):
            return
        name = self.ctx.qualname(node)
        if name is not None and within(name, self.banned):
            self.report(node, self.message.format(name), display_only(self, self.fix_title))


RULES = (HardcodedBackendDevice, BackendApiOutsidePlatformLayer)
