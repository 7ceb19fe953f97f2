"""``torch.cuda`` APIs that raise on a CPU-only machine or are deprecated CUDA-only spellings."""

from __future__ import annotations

import libcst as cst

from ..analysis.fixes import Applicability, ImportSpec
from ..analysis.rule import Invalid, Rule, Valid
from .common import display_only, fresh_args, guard_statement_fix, keyword_arg

# Measured on the CPU build of torch 2.13.0: each of these raises when called (DESIGN.md).
RAISING_CUDA_CALLS = {
    "synchronize": "`torch.accelerator.synchronize()` under a guard, or nothing on CPU",
    "set_device": "pass `device=` to the code that needs it",
    "current_device": "the `device` chosen at start-up",
    "get_device_name": "a guard, or `device.type`",
    "get_device_properties": "a guard",
    "get_device_capability": "a guard",
    "Event": "`time.perf_counter()` on CPU, CUDA events under a guard",
    "Stream": "a guard",
    "current_stream": "a guard",
    "default_stream": "a guard",
    "reset_peak_memory_stats": "a guard",
    "reset_max_memory_allocated": "a guard",
    "get_rng_state": "`torch.get_rng_state()` on CPU",
    "init": "a guard",
    "device": "a guard, or `torch.device(...)` passed explicitly",
    "mem_get_info": "a guard",
    "ipc_collect": "a guard",
    "initial_seed": "`torch.initial_seed()`",
    "set_per_process_memory_fraction": "a guard",
}


class UnguardedCudaApi(Rule):
    code = "TDV301"
    name = "unguarded-cuda-api"
    message = "`torch.cuda.{}()` raises on a machine without a GPU; guard it with `torch.cuda.is_available()`"
    fix_title = "Call it only if CUDA is available"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.cuda` calls that raise on a CPU-only build or machine (`synchronize`, "
        "`set_device`, `current_device`, `get_device_name`, `Event`, `Stream`, "
        "`reset_peak_memory_stats`, `get_rng_state`, `init`, `device(...)`, ...) outside a CUDA "
        "availability check."
    )
    why = (
        "These calls raise `AssertionError`, `AttributeError` or `RuntimeError` without CUDA, so "
        "a timing line or a device query stops the whole program on a laptop or a CPU CI runner. "
        "`torch.cuda.empty_cache()`, `manual_seed()` and `memory_allocated()` are silent on CPU "
        "and are not reported."
    )
    fix_safety_note = (
        "A call that is a statement of its own is wrapped in `if torch.cuda.is_available():`, which "
        "keeps CUDA machines unchanged. A call whose value is used (an assignment, an argument, "
        "a `with` item) gets a suggestion only."
    )
    triggers = ("cuda",)
    valid = (
        Valid("import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"),
        Valid("import torch\ntorch.cuda.empty_cache()\ntorch.cuda.manual_seed(0)\n"),
        Valid("from numba import cuda\ncuda.synchronize()\n"),
        Valid("import torch\n\ndef t(x):\n    if x.is_cuda:\n        torch.cuda.synchronize()\n"),
        Valid(
            "import pytest\nimport torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\n"
            "def test_gpu():\n    torch.cuda.synchronize()\n"
        ),
        Valid("import torch\nn = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"),
        Valid("import torch\n\ndef run(self):\n    if self.cuda_device is not None:\n        torch.cuda.set_device(self.cuda_device)\n"),
        Valid("import torch\n\ndef move_to_cuda(sample, device=None):\n    device = device or torch.cuda.current_device()\n"),
        # distributed-only code: the process group's backend is the hazard (TDV303)
        Valid(
            "import torch\nimport torch.distributed as dist\n\ndef ddp_setup(rank, world_size):\n"
            "    torch.cuda.set_device(rank)\n    dist.init_process_group('nccl', rank=rank, world_size=world_size)\n"
        ),
        Valid(
            "import os\nimport torch\n\ndef main():\n    local_rank = int(os.environ['LOCAL_RANK'])\n"
            "    torch.cuda.set_device(local_rank)\n"
        ),
        Valid("import torch\nif args.distributed:\n    torch.cuda.set_device(args.gpu)\n"),
    )
    invalid = (
        # a CUDA-named class runs wherever it is used (a callback on by default)
        Invalid(
            "import torch\n\nclass CUDACallback:\n    def on_train_epoch_end(self, trainer):\n        torch.cuda.synchronize()\n",
            fixed=(
                "import torch\n\nclass CUDACallback:\n    def on_train_epoch_end(self, trainer):\n"
                "        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n"
            ),
        ),
        Invalid(
            "import torch\n\ndef step():\n    torch.cuda.synchronize()  # wait for kernels\n",
            fixed="import torch\n\ndef step():\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()  # wait for kernels\n",
        ),
        Invalid(
            "from torch.cuda import synchronize as sync\nsync()\n",
            fixed="from torch.cuda import synchronize as sync\nimport torch\n\nif torch.cuda.is_available():\n    sync()\n",
        ),
        Invalid(
            "from torch import cuda\ncuda.set_device(0)\n",
            fixed="from torch import cuda\nimport torch\n\nif torch.cuda.is_available():\n    cuda.set_device(0)\n",
        ),
        Invalid(
            "import torch as th\nstart = th.cuda.Event(enable_timing=True)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\nwith torch.cuda.device(1):\n    pass\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\nprint(torch.cuda.get_device_name(0))\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        name = self.ctx.qualname(node.func)
        if name is None or not name.startswith("torch.cuda."):
            return
        leaf = name[len("torch.cuda."):]
        if leaf not in RAISING_CUDA_CALLS:
            return
        fix = guard_statement_fix(self, node, self.fix_title) or display_only(
            self, f"Use {RAISING_CUDA_CALLS[leaf]}"
        )
        self.report(node, self.message.format(leaf), fix)


AMP_REPLACEMENTS = {"autocast": (1, 10), "GradScaler": (2, 3)}


class CudaAmpApi(Rule):
    code = "TDV302"
    name = "cuda-amp-api"
    message = "`torch.cuda.amp.{0}` is deprecated and CUDA-only; use `torch.amp.{0}` with a device type"
    fix_title = 'Use `torch.amp.{}("cuda", ...)`'
    fix_safety = Applicability.SAFE
    what = "Checks for `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`."
    why = (
        "Both are deprecated aliases that only know CUDA (they warn on every call). `torch.amp` "
        "takes the device type, so the same line can later follow the run-time device."
    )
    fix_safety_note = (
        'The fix writes `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`, '
        "which behave exactly like the deprecated calls on every device. `torch.amp.GradScaler` "
        "needs torch 2.3 (`target-torch-version`); below that the fix is a suggestion only."
    )
    triggers = ("amp",)
    valid = (
        Valid('import torch\nwith torch.amp.autocast("cuda"):\n    pass\n'),
        Valid('import torch\nscaler = torch.amp.GradScaler("cuda")\n'),
        Valid("from apex import amp\nmodel, opt = amp.initialize(model, opt)\n"),
        Valid("import torch\nwith torch.autocast(device_type=device.type):\n    pass\n"),
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
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.qualname(node.func)
        if name is None or not name.startswith("torch.cuda.amp."):
            return
        leaf = name[len("torch.cuda.amp."):]
        if leaf not in AMP_REPLACEMENTS:
            return
        message = self.message.format(leaf)
        if self.ctx.settings.target_version() < AMP_REPLACEMENTS[leaf] or any(a.star for a in node.args):
            self.report(node, message, display_only(self, self.fix_title.format(leaf)))
            return
        if sum(1 for a in node.args if a.keyword is None) > len(OLD_AMP_POSITIONAL[leaf]):
            self.report(node, message, display_only(self, self.fix_title.format(leaf)))
            return
        replacement = cst.parse_expression(f"{self.ctx.torch_reference()}.amp.{leaf}")
        device_type = cst.Arg(cst.SimpleString('"cuda"'))

        def replace(updated: cst.Call) -> cst.Call:
            return updated.with_changes(func=replacement, args=[device_type] + _as_keywords(updated.args, leaf))

        removable = ()
        if isinstance(node.func, cst.Name):
            local = node.func.value
            removable = (ImportSpec("torch.cuda.amp", leaf, local if local != leaf else None),)
        fix = self.make_fix(
            {node: replace},
            message=self.fix_title.format(leaf),
            imports=self.ctx.torch_imports(),
            removable_imports=removable,
        )
        self.report(node, message, fix)


# The deprecated signatures' positional parameters: ``torch.amp``'s take the device type first
# and a different order (autocast's second slot is ``dtype``), so they move as keywords.
OLD_AMP_POSITIONAL = {
    "autocast": ("enabled", "dtype", "cache_enabled"),
    "GradScaler": ("init_scale", "growth_factor", "backoff_factor", "growth_interval", "enabled"),
}


def _as_keywords(args, leaf: str) -> list:
    """Positional arguments of the old signature written as keywords of the new one."""
    names = iter(OLD_AMP_POSITIONAL[leaf])
    keyworded = [
        arg if arg.keyword is not None else keyword_arg(next(names), arg.value)
        for arg in args
    ]
    return fresh_args(keyworded)


RULES = (UnguardedCudaApi, CudaAmpApi)
