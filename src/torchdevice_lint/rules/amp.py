"""Deprecated device-bound spellings of mixed precision and attention-kernel choice:
``torch.cuda.amp.autocast``/``GradScaler``/``custom_fwd``/``custom_bwd`` and
``torch.cpu.amp.autocast``/``GradScaler`` (-> ``torch.amp`` with a device type), and
``torch.backends.cuda.sdp_kernel`` (-> ``torch.nn.attention.sdpa_kernel``).

One rule, TDV302, for all of them: each is an alias torch keeps for one device and warns about
(FutureWarning) on every use, and each fix is the same rename with the device made explicit,
written only where the target torch has the new name. Like the other CUDA-only calls, a line
that runs only where CUDA is (an availability check, a worker spawned once per GPU, code only
such code calls) is left alone: on a CPU or a Mac it never runs. So is the old spelling in the
branch a version shim keeps for a torch without the new one (the other branch spells it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Resolved, Triggers
from ..model.fixes import Applicability, ImportSpec, needs_target
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import import_aliases, source_of
from .support.common import display_only, fresh_args, keyword_arg
from .support.examples import LAZY_KERNEL_FUNCTION

Release = Tuple[int, int]

#: An option asking for AMP (``{}``: how it is declared) and the code it decides.
AMP_OPTION = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--use_amp', {})\n"
USE_AMP = "import torch\n\n# --use_amp: {}\ndef train(args):\n    if args.use_amp:\n        return torch.cuda.amp.GradScaler()\n"
AUTOCAST_POSITIONAL = ("enabled", "dtype", "cache_enabled")
SCALER_POSITIONAL = ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled")


@dataclass(frozen=True)
class Replacement:
    """What a deprecated name becomes: ``new`` (after the torch module) from torch ``since``,
    else ``older`` from its own release; ``device`` is the device type it was bound to."""

    new: str
    device: str
    since: Release
    #: The old signature's positional parameters: the new one takes the device type first and
    #: another order (autocast's second slot is ``dtype``), so they move as keywords.
    positional: Tuple[str, ...] = ()
    #: ``custom_fwd``/``custom_bwd``: the device goes in the keyword-only ``device_type=``.
    device_keyword: bool = False
    older: Optional[Tuple[str, Release]] = None

    def spelling(self, target: Release) -> Optional[str]:
        if target >= self.since:
            return self.new
        if self.older is not None and target >= self.older[1]:
            return self.older[0]
        return None


# First releases: ``torch.autocast`` 1.10 and the ``torch.amp`` module 1.12 (timm issue #1935),
# ``torch.amp.GradScaler`` 2.3, ``torch.amp.custom_fwd``/``custom_bwd`` with ``device_type=`` 2.4.
REPLACEMENTS: Dict[str, Replacement] = {
    "torch.cuda.amp.autocast": Replacement("amp.autocast", "cuda", (1, 12), AUTOCAST_POSITIONAL, older=("autocast", (1, 10))),
    "torch.cuda.amp.GradScaler": Replacement("amp.GradScaler", "cuda", (2, 3), SCALER_POSITIONAL),
    "torch.cpu.amp.autocast": Replacement("amp.autocast", "cpu", (1, 12), AUTOCAST_POSITIONAL, older=("autocast", (1, 10))),
    "torch.cpu.amp.GradScaler": Replacement("amp.GradScaler", "cpu", (2, 3), SCALER_POSITIONAL),
    "torch.cuda.amp.custom_fwd": Replacement("amp.custom_fwd", "cuda", (2, 4), device_keyword=True),
    "torch.cuda.amp.custom_bwd": Replacement("amp.custom_bwd", "cuda", (2, 4), device_keyword=True),
}

SDP_KERNEL = "torch.backends.cuda.sdp_kernel"
#: ``sdp_kernel``'s flags in its positional order, and the backend each enables (True by default).
SDP_FLAGS = ("enable_flash", "enable_math", "enable_mem_efficient", "enable_cudnn")
#: The backends in the order ``sdp_kernel`` lists them for ``sdpa_kernel`` (torch 2.13's own shim).
SDP_BACKENDS = (
    ("enable_flash", "FLASH_ATTENTION"), ("enable_mem_efficient", "EFFICIENT_ATTENTION"),
    ("enable_math", "MATH"), ("enable_cudnn", "CUDNN_ATTENTION"),
)
#: ``torch.nn.attention.sdpa_kernel`` came in 2.3 (pytorch#114689, merged after 2.2 branched);
#: the fix may name ``SDPBackend.CUDNN_ATTENTION``, which 2.4 surely has.
SDPA_KERNEL_SINCE: Release = (2, 4)


#: A training step, and a script that starts ``run`` in ``nprocs`` processes each calling it.
WORKER_STEP = "from torch.cuda.amp import autocast\n\ndef train_step(model, x, fp16):\n    with autocast(enabled=fp16):\n        return model(x)\n"
SPAWNED_WORKER = (
    "import torch\nimport torch.multiprocessing as mp\nfrom example import train_step\n\n"
    "def main(args):\n    n_gpus = torch.cuda.device_count()\n    mp.spawn(run, nprocs={nprocs}, args=(args,))\n\n"
    "def run(rank, args):\n    model = build(args).to(rank)\n    for x in loader(args):\n        train_step(model, x, args.fp16).sum().backward()\n"
)


class CudaAmpApi(Rule):
    code = "TDV302"
    name = "cuda-amp-api"
    hazard_without_cuda = True
    message = "`{0}` is deprecated{1}; use {2}"
    fix_title = "Use `{}`"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for the deprecated device-bound spellings: `torch.cuda.amp.autocast`, "
        "`torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd`/`custom_bwd` (decorators, bare "
        "or called), `torch.cpu.amp.autocast`, `torch.cpu.amp.GradScaler` and "
        "`torch.backends.cuda.sdp_kernel`."
    )
    why = (
        "Each is an alias torch keeps for one device and warns about on every use; the CUDA ones "
        "only know CUDA. `torch.amp` takes the device type, so the same line can later follow the "
        "run-time device, and `torch.nn.attention.sdpa_kernel` names the attention backends it "
        "enables instead of the ones it turns off. One rule holds them all: the hazard and the "
        "fix, a rename with the device made explicit, are the same. Code that runs only where "
        "CUDA is (under an availability check, in a worker started once per GPU, in functions "
        "only such code calls) is not reported, nor the old name in the fallback branch of a "
        "conditional whose other branch already spells the new one (a shim for older torch)."
    )
    fix_safety_note = (
        'The fix writes `torch.amp.autocast("cuda", ...)`, `torch.amp.GradScaler("cpu", ...)`, '
        '`@torch.amp.custom_fwd(device_type="cuda")`, `sdpa_kernel([SDPBackend.MATH, ...])` (the '
        "backends the old flags left on), which behave exactly like the deprecated calls on every "
        "device. Where a device is at hand (a `device` bound to a device where the line runs, not "
        "one that may be None; inside `forward`, an input known to be a tensor) the CUDA autocast "
        "and scaler fixes write its type instead, "
        "`torch.amp.autocast(device.type)` (`torch.device(device).type` when `device` may be a "
        "string), so mixed precision follows the device: that fix is unsafe, because on the CPU "
        "autocast then really computes in bfloat16 where the CUDA call was disabled. Each fix "
        "writes only names the target torch has (`target-torch-version`): `torch.amp.autocast` "
        "from 1.12 (`torch.autocast` for 1.10 and 1.11), `GradScaler` from 2.3, `custom_fwd`/"
        "`custom_bwd` from 2.4, `sdpa_kernel` from 2.4; below that the fix is a suggestion only."
    )
    # the names' parts anywhere (cheap), then a reference that resolves to one: ``.cpu()`` and
    # ``from torch.amp import autocast`` hold every part of ``torch.cpu.amp.autocast``
    triggers = Triggers(names=[*REPLACEMENTS, SDP_KERNEL]) & Resolved([*REPLACEMENTS, SDP_KERNEL])
    valid = (
        Valid('import torch\nwith torch.amp.autocast("cuda"):\n    pass\n'),
        Valid('import torch\nscaler = torch.amp.GradScaler("cuda")\n'),
        Valid("from apex import amp\nmodel, opt = amp.initialize(model, opt)\n"),
        Valid("import torch\nwith torch.autocast(device_type=device.type):\n    pass\n"),
        # only with --use_amp, off by default: the user asked for a CUDA feature (MAZiqing/FEDformer@c0f6b97
        # exp/exp_main.py:104, run.py:86)
        Valid(USE_AMP.format("action='store_true'"), files={"run.py": AMP_OPTION.format("action='store_true'")}),
        # a compatibility shim binds the name to whichever torch has (state-spaces/mamba@e9594ce,
        # mamba_ssm/utils/torch.py:13-21)
        Valid(
            "import torch\nif hasattr(torch.amp, 'custom_fwd'):\n    from torch.amp import custom_fwd\nelse:\n"
            "    from torch.cuda.amp import custom_fwd\n\nclass F(torch.autograd.Function):\n    @staticmethod\n"
            "    @custom_fwd\n    def forward(ctx, x):\n        return x\n"
        ),
        Valid("from torch.nn.attention import SDPBackend, sdpa_kernel\nwith sdpa_kernel(SDPBackend.MATH):\n    pass\n"),
        # a line that runs only where CUDA is never runs on a CPU or a Mac
        Valid("import torch\nif torch.cuda.is_available():\n    scaler = torch.cuda.amp.GradScaler()\n"),
        # jaywalnut310/vits@2e561ba train.py:45-50,113: one worker per GPU, none without one
        Valid(WORKER_STEP, files={"train.py": SPAWNED_WORKER.format(nprocs="n_gpus")}),
        # ultralytics/yolov3@97b87b1 train.py:345: the old name only where torch lacks the new one
        Valid(
            'import torch\nscaler = torch.amp.GradScaler("cuda", enabled=amp) if TORCH_2_4 else torch.cuda.amp.GradScaler(enabled=amp)\n'
        ),
    )
    invalid = (
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    y = model(x)\n",
            fixed='import torch\nwith torch.amp.autocast("cuda"):\n    y = model(x)\n',
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(enabled=use_amp)\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda", enabled=use_amp)\n',
        ),
        Invalid(
            "from torch.cuda.amp import autocast, GradScaler\n\nscaler = GradScaler()\nwith autocast(dtype=torch.float16):\n    pass\n",
            fixed='import torch\n\nscaler = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda", dtype=torch.float16):\n    pass\n',
            count=2,
        ),
        # positional arguments keep their meaning: the new second slot is dtype
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(use_amp):\n    y = model(x)\n",
            fixed='import torch\nwith torch.amp.autocast("cuda", enabled=use_amp):\n    y = model(x)\n',
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler(2.0**16, 2.0, enabled=use_amp)\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda", init_scale=2.0**16, growth_factor=2.0, enabled=use_amp)\n',
        ),
        Invalid(
            "import torch as th\n\n@th.cuda.amp.autocast()\ndef forward(x):\n    return x\n",
            fixed='import torch as th\n\n@th.amp.autocast("cuda")\ndef forward(x):\n    return x\n',
        ),
        # torch 1.10 and 1.11 have the generic autocast, not yet the torch.amp module
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(enabled=True):\n    pass\n",
            fixed='import torch\nwith torch.autocast("cuda", enabled=True):\n    pass\n',
            config={"target-torch-version": "1.11"},
        ),
        # a device at hand: its type, so autocast follows the device (unsafe: CPU autocast is real)
        Invalid(
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "scaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    y = model(x)\n",
            fixed='import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "scaler = torch.amp.GradScaler(device.type)\nwith torch.amp.autocast(device.type):\n    y = model(x)\n",
            applicability=Applicability.UNSAFE,
            count=2,
        ),
        Invalid(
            "import torch\n\ndef train(model, batch, device):\n    with torch.cuda.amp.autocast():\n        return model(batch)\n",
            fixed='import torch\n\ndef train(model, batch, device):\n    with torch.amp.autocast(torch.device(device).type):\n        return model(batch)\n',
            applicability=Applicability.UNSAFE,
        ),
        Invalid(
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n        with torch.cuda.amp.autocast(enabled=False):\n            return self.head(x.float())\n",
            fixed='import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n        with torch.amp.autocast(x.device.type, enabled=False):\n            return self.head(x.float())\n',
            applicability=Applicability.UNSAFE,
        ),
        # a decorator runs where the `def` stands: another function's `device` is not bound there
        Invalid(
            "import torch\n\n@torch.cuda.amp.autocast(enabled=False)\ndef head(x):\n    return x.float()\n\n"
            'def main():\n    device = torch.device("cpu")\n    return head(torch.ones(2, device=device))\n',
            fixed='import torch\n\n@torch.amp.autocast("cuda", enabled=False)\ndef head(x):\n    return x.float()\n\n'
            'def main():\n    device = torch.device("cpu")\n    return head(torch.ones(2, device=device))\n',
        ),
        # a `device` callers may leave None is no device: `torch.device(None)` raises
        Invalid(
            "import torch\n\ndef train(model, batch, device=None):\n    with torch.cuda.amp.autocast():\n        return model(batch)\n",
            fixed='import torch\n\ndef train(model, batch, device=None):\n    with torch.amp.autocast("cuda"):\n        return model(batch)\n',
        ),
        # forward's input may be a tuple: no `.device` of it
        Invalid(
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, inputs):\n        with torch.cuda.amp.autocast():\n            return self.head(*inputs)\n",
            fixed='import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, inputs):\n        with torch.amp.autocast("cuda"):\n            return self.head(*inputs)\n',
        ),
        # EleutherAI/gpt-neox@ea7aefd megatron/model/moe_mlp.py:32-38: bare decorators
        Invalid(
            "import torch\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"
            "    def forward(ctx, x):\n        return x\n\n    @staticmethod\n    @torch.cuda.amp.custom_bwd\n"
            "    def backward(ctx, grad):\n        return grad\n",
            fixed=(
                'import torch\n\nclass Fn(torch.autograd.Function):\n    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n'
                '    def forward(ctx, x):\n        return x\n\n    @staticmethod\n    @torch.amp.custom_bwd(device_type="cuda")\n'
                "    def backward(ctx, grad):\n        return grad\n"
            ),
            count=2,
        ),
        Invalid(
            "import torch\nfrom torch.cuda.amp import custom_fwd\n\n@custom_fwd(cast_inputs=torch.float32)\ndef forward(ctx, x):\n    return x\n",
            fixed='import torch\n\n@torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)\ndef forward(ctx, x):\n    return x\n',
        ),
        Invalid(
            "import torch\nwith torch.cpu.amp.autocast(True, torch.bfloat16):\n    y = model(x)\nscaler = torch.cpu.amp.GradScaler()\n",
            fixed='import torch\nwith torch.amp.autocast("cpu", enabled=True, dtype=torch.bfloat16):\n    y = model(x)\nscaler = torch.amp.GradScaler("cpu")\n',
            count=2,
        ),
        # the flags that stay on become the backends listed (unset flags are on)
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):\n    pass\n",
            fixed=(
                "import torch\nfrom torch.nn.attention import SDPBackend, sdpa_kernel\n\n"
                "with sdpa_kernel([SDPBackend.MATH, SDPBackend.CUDNN_ATTENTION]):\n    pass\n"
            ),
        ),
        # lucidrains/vit-pytorch@69d24fe vit_pytorch/simple_flash_attn_vit.py:61: flags unknown here
        Invalid(
            "import torch\nwith torch.backends.cuda.sdp_kernel(**config._asdict()):\n    pass\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
            config={"target-torch-version": "2.3"},
        ),
        # as many workers as the caller asks for: they start on a CPU too
        Invalid(
            WORKER_STEP,
            fixed='import torch\n\ndef train_step(model, x, fp16):\n    with torch.amp.autocast("cuda", enabled=fp16):\n        return model(x)\n',
            files={"train.py": SPAWNED_WORKER.format(nprocs="args.world_size")},
        ),
        # the other branch is no newer spelling: the old one runs wherever amp is on
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler() if use_amp else None\n",
            fixed='import torch\nscaler = torch.amp.GradScaler("cuda") if use_amp else None\n',
        ),
        # a decorator runs at import, in code that drives a CUDA-only kernel too
        Invalid(
            LAZY_KERNEL_FUNCTION.code.replace("    @staticmethod\n", "    @staticmethod\n    @torch.cuda.amp.custom_fwd\n"), files=LAZY_KERNEL_FUNCTION.files,
            fixed=LAZY_KERNEL_FUNCTION.code.replace("    @staticmethod\n", '    @staticmethod\n    @torch.amp.custom_fwd(device_type="cuda")\n'),
        ),
        # --use_amp on by default: every run takes it
        Invalid(
            USE_AMP.format("default=True"), files={"run.py": "from example import train\n" + AMP_OPTION.format("default=True") + "train(parser.parse_args())\n"},
            fixed=USE_AMP.format("default=True").replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")'),
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._imports: Optional[Dict[str, int]] = None

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        name = self.ctx.qualname(node.func)
        if name == SDP_KERNEL and self._bound_once(node.func):
            self._sdp_kernel(node)
        elif name in REPLACEMENTS and self._bound_once(node.func) and not self._shim_fallback(REPLACEMENTS[name]):
            self._rename(node, node.func, name, REPLACEMENTS[name], node.args)

    def visit_Decorator(self, node: cst.Decorator) -> None:
        """``@torch.cuda.amp.custom_fwd`` without a call: it becomes one, with the device."""
        if self.ctx.guarded:
            return
        target = node.decorator
        name = self.ctx.qualname(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
        replacement = REPLACEMENTS.get(name)
        if replacement is not None and replacement.device_keyword and self._bound_once(target):
            self._rename(target, target, name, replacement, None)

    def _bound_once(self, func: cst.BaseExpression) -> bool:
        """Not a name that another import of the file may bind to the new spelling (a
        version shim: ``try: from torch.amp import custom_fwd except: from torch.cuda.amp ...``)."""
        if not isinstance(func, cst.Name):
            return True
        if self._imports is None:
            self._imports = _import_counts(self.ctx.module)
        return self._imports.get(func.value, 0) <= 1

    def _shim_fallback(self, replacement: Replacement) -> bool:
        """In one branch of the nearest conditional whose other branch calls the new spelling:
        ``torch.amp.GradScaler("cuda") if TORCH_2_4 else torch.cuda.amp.GradScaler()``
        (ultralytics/yolov3@97b87b1 train.py:345). The old name runs only where the code's own
        test says the new one is missing, like the import shims ``_bound_once`` leaves alone."""
        stack = self.ctx.stack
        for parent, child in zip(reversed(stack[:-1]), reversed(stack[1:])):
            if isinstance(parent, (cst.FunctionDef, cst.ClassDef)):
                return False
            if isinstance(parent, (cst.If, cst.IfExp)) and child in (parent.body, parent.orelse):
                other = parent.orelse if child is parent.body else parent.body
                return other is not None and self._calls_new(other, replacement)
        return False

    def _calls_new(self, branch: cst.CSTNode, replacement: Replacement) -> bool:
        from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

        spellings = {f"torch.{replacement.new}"} | ({f"torch.{replacement.older[0]}"} if replacement.older else set())
        return any(self.ctx.qualname(call.func) in spellings for call in nodes_of(branch, cst.Call))

    def _rename(self, node, func, name: str, replacement: Replacement, args: Optional[List[cst.Arg]]) -> None:
        spelling = replacement.spelling(self.ctx.settings.target_version())
        torch_name = self.ctx.torch_reference()
        new = f"torch.{replacement.new}"
        cuda = name.startswith("torch.cuda.")
        message = self.message.format(name, " and CUDA-only" if cuda else "", f"`{new}` with a device type")
        device = f'"{replacement.device}"'
        type_code = self._device_type() if cuda and not replacement.device_keyword else None

        def shown(spelled: str) -> str:
            argument = f"device_type={device}" if replacement.device_keyword else f"{type_code or device}, ..."
            return self.fix_title.format(f"torch.{spelled}({argument})")

        suggestion = display_only(self, shown(replacement.new))
        if spelling is None:
            spelled, first = replacement.older or (replacement.new, replacement.since)
            self.report(node, message, display_only(self, needs_target(shown(spelled), first)))
            return
        if args is not None and any(arg.star for arg in args):
            self.report(node, message, suggestion)
            return
        if replacement.device_keyword:
            given = list(args or ())
            head = [arg for arg in given if arg.keyword is None]
            new_args = head + [keyword_arg("device_type", cst.SimpleString(device))] + given[len(head):]
        elif sum(1 for arg in args if arg.keyword is None) > len(replacement.positional):
            self.report(node, message, suggestion)
            return
        else:
            new_args = [cst.Arg(cst.parse_expression(type_code or device))] + _as_keywords(args, replacement.positional)
        call = cst.Call(cst.parse_expression(f"{torch_name}.{spelling}"), fresh_args(new_args))

        def rewrite(updated: cst.CSTNode) -> cst.CSTNode:
            return call if args is None else updated.with_changes(func=call.func, args=call.args)

        removable = ()
        if isinstance(func, cst.Name):
            module, _, leaf = name.rpartition(".")
            removable = (ImportSpec(module, leaf, func.value if func.value != leaf else None),)
        fix = self.make_fix(
            {node: rewrite},
            Applicability.UNSAFE if type_code else None,
            message=shown(spelling),
            imports=self.ctx.torch_imports(),
            removable_imports=removable,
        )
        self.report(node, message, fix)

    def _sdp_kernel(self, node: cst.Call) -> None:
        """``sdp_kernel(enable_flash=False)`` -> ``sdpa_kernel([<the backends left on>])``."""
        message = self.message.format(SDP_KERNEL, "", "`torch.nn.attention.sdpa_kernel` with the backends it enables")
        flags = _literal_flags(node.args)
        free = all(
            self.ctx.aliases.get(name, f"torch.nn.attention.{name}") == f"torch.nn.attention.{name}"
            and (name in self.ctx.aliases or name not in self.ctx.bound_names(self.ctx.module))
            for name in ("sdpa_kernel", "SDPBackend")
        )
        title = self.fix_title.format("torch.nn.attention.sdpa_kernel([...])")
        if flags is None or not free:
            self.report(node, message, display_only(self, title))
            return
        if self.ctx.settings.target_version() < SDPA_KERNEL_SINCE:
            self.report(node, message, display_only(self, needs_target(title, SDPA_KERNEL_SINCE)))
            return
        backends = ", ".join(f"SDPBackend.{member}" for flag, member in SDP_BACKENDS if flags[flag])
        call = cst.parse_expression(f"sdpa_kernel([{backends}])")
        removable = ()
        if isinstance(node.func, cst.Name):
            removable = (ImportSpec("torch.backends.cuda", "sdp_kernel", node.func.value if node.func.value != "sdp_kernel" else None),)
        fix = self.make_fix(
            {node: lambda _: call},
            message=self.fix_title.format(source_of(call)),
            imports=[ImportSpec("torch.nn.attention", "SDPBackend"), ImportSpec("torch.nn.attention", "sdpa_kernel")],
            removable_imports=removable,
        )
        self.report(node, message, fix)

    def _device_type(self) -> Optional[str]:
        """The type of a device already at hand, or None: ``device.type`` for a ``device``
        that only ever holds a ``torch.device``, ``torch.device(device).type`` for one that may
        be a string, ``x.device.type`` for a ``forward`` input known to be a tensor. Only a
        device proven there (``engine/devices.py``): not a name the fix would bind itself."""
        choice = self.ctx.device_expression()
        if choice.needs_binding or choice.inline:
            return None
        if choice.code.endswith(".device") or self.ctx.devices.holds_torch_device(choice.code):
            return f"{choice.code}.type"
        return f"{self.ctx.torch_reference()}.device({choice.code}).type"


def _import_counts(module: cst.Module) -> Dict[str, int]:
    """How many import statements of a file bind each local name."""
    from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

    counts: Dict[str, int] = {}
    for statement in nodes_of(module, cst.Import, cst.ImportFrom):
        for local in import_aliases(statement):
            counts[local] = counts.get(local, 0) + 1
    return counts


def _literal_flags(args) -> Optional[Dict[str, bool]]:
    """``sdp_kernel``'s flags when every argument is a literal ``True``/``False`` (unset ones are
    True); None when one is unknown here (``**config``)."""
    flags = dict.fromkeys(SDP_FLAGS, True)
    for index, arg in enumerate(args):
        name = arg.keyword.value if arg.keyword is not None else (SDP_FLAGS[index] if index < len(SDP_FLAGS) else None)
        value = arg.value.value if isinstance(arg.value, cst.Name) else None
        if arg.star or name not in flags or value not in ("True", "False"):
            return None
        flags[name] = value == "True"
    return flags


def _as_keywords(args, positional: Tuple[str, ...]) -> list:
    """Positional arguments of the old signature written as keywords of the new one."""
    names = iter(positional)
    return [arg if arg.keyword is not None else keyword_arg(next(names), arg.value) for arg in args]


RULES = (CudaAmpApi,)
