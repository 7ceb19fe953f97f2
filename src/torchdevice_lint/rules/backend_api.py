"""Backend APIs (``torch.cuda``, ``torch.mps``, ``torch.xpu``, ``torch.accelerator``) that raise
where their backend is missing, and deprecated CUDA-only spellings."""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Resolved, Triggers, Unguarded
from ..knowledge.backends import availability_expression, missing_text
from ..knowledge.torch_releases import newest_available
from ..model.fixes import Applicability, ImportSpec
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import source_of
from .common import display_only, fresh_args, guard_statement_fix, keyword_arg, no_fix_for_target

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

# The other backends' calls that raise where the backend is missing (measured on the same CPU
# build). Silent there, and not reported: ``torch.mps.manual_seed``, ``torch.xpu.empty_cache``,
# ``torch.xpu.manual_seed``, the ``torch.xpu`` memory statistics, ``device_count``,
# ``is_available`` and ``torch.accelerator.current_accelerator``.
RAISING_BACKEND_CALLS = {
    "mps": {
        "synchronize", "empty_cache", "current_allocated_memory", "driver_allocated_memory",
        "recommended_max_memory", "get_rng_state", "seed", "Event", "set_per_process_memory_fraction",
        "compile_shader", "profiler.start",
    },
    "xpu": {
        "synchronize", "current_device", "current_stream", "get_device_name", "get_device_properties",
        "get_device_capability", "init", "initial_seed", "mem_get_info", "set_device", "set_stream",
        "set_per_process_memory_fraction", "get_rng_state", "reset_peak_memory_stats", "Event", "Stream",
        "can_device_access_peer", "device",
    },
    "accelerator": {
        "synchronize", "current_device_index", "current_device_idx", "set_device_index", "set_device_idx",
        "current_stream", "set_stream", "empty_cache", "empty_host_cache", "get_memory_info",
        "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved", "memory_stats",
        "reset_peak_memory_stats", "reset_accumulated_memory_stats", "get_device_capability",
    },
}


def raising_backend_call(name: str):
    """``"torch.mps.synchronize"`` -> ``("mps", "synchronize")`` for a call that raises where
    its backend is missing; None otherwise."""
    parts = name.split(".", 2)
    if len(parts) != 3 or parts[0] != "torch":
        return None
    backend, leaf = parts[1], parts[2]
    calls = RAISING_CUDA_CALLS if backend == "cuda" else RAISING_BACKEND_CALLS.get(backend, ())
    return (backend, leaf) if leaf in calls else None


#: The calls TDV301 reports where no availability check guards them.
RAISING_CALLS = Resolved(
    [f"torch.cuda.{leaf}" for leaf in RAISING_CUDA_CALLS]
    + [f"torch.{backend}.{leaf}" for backend, leaves in RAISING_BACKEND_CALLS.items() for leaf in leaves],
    calls=True,
)


class UnguardedCudaApi(Rule):
    code = "TDV301"
    name = "unguarded-cuda-api"
    message = "`torch.{0}.{1}()` raises {2}; guard it with `{3}`"
    fix_title = "Call it only if the backend is available"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.cuda` calls that raise on a CPU-only build or machine (`synchronize`, "
        "`set_device`, `current_device`, `get_device_name`, `Event`, `Stream`, "
        "`reset_peak_memory_stats`, `get_rng_state`, `init`, `device(...)`, ...) outside a CUDA "
        "availability check, and the same for the other backends' modules: `torch.mps` "
        "(`synchronize`, `empty_cache`, `Event`, memory queries...), `torch.xpu` (`synchronize`, "
        "`current_device`, `get_device_name`, ...) and `torch.accelerator` (`synchronize`, "
        "`current_device_index`, `empty_cache` and the memory functions), each outside its own "
        "check (`torch.backends.mps.is_available()`, `torch.xpu.is_available()`, "
        "`torch.accelerator.is_available()`, `device.type == \"mps\"`, ...)."
    )
    why = (
        "These calls raise `AssertionError`, `AttributeError` or `RuntimeError` without CUDA, so "
        "a timing line or a device query stops the whole program on a laptop or a CPU CI runner. "
        "`torch.cuda.empty_cache()`, `manual_seed()` and `memory_allocated()` are silent on CPU "
        "and are not reported, nor are `torch.mps.manual_seed()`, `torch.xpu.empty_cache()` and "
        "`torch.xpu.manual_seed()`. `torch.mps.empty_cache()` and every `torch.accelerator` call "
        "but `is_available`, `device_count` and `current_accelerator` raise there (`Cannot access "
        "accelerator device when none is available.`)."
    )
    fix_safety_note = (
        "A call that is a statement of its own is wrapped in `if torch.cuda.is_available():` (or "
        "`torch.backends.mps.is_available()`, `torch.xpu.is_available()`, "
        "`torch.accelerator.is_available()`), which keeps machines with the backend unchanged. A call whose value is used (an assignment, an argument, "
        "a `with` item) gets a suggestion only."
    )
    triggers = Unguarded(RAISING_CALLS.matching_calls)
    valid = (
        Valid("import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"),
        Valid("import torch\nif torch.backends.mps.is_available():\n    torch.mps.synchronize()\n    torch.mps.empty_cache()\n"),
        Valid("import torch\ntorch.mps.manual_seed(0)\ntorch.xpu.empty_cache()\ntorch.xpu.manual_seed(0)\n"),
        Valid('import torch\n\ndef sync(device):\n    if device.type == "xpu":\n        torch.xpu.synchronize()\n'),
        Valid("import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"),
        Valid("import torch\ndevice = torch.accelerator.current_accelerator()\nn = torch.accelerator.device_count()\n"),
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
        Invalid(
            "import torch\n\ndef free():\n    torch.mps.empty_cache()\n",
            fixed="import torch\n\ndef free():\n    if torch.backends.mps.is_available():\n        torch.mps.empty_cache()\n",
        ),
        Invalid(
            "import torch as th\nth.xpu.synchronize()\n",
            fixed="import torch as th\nif th.xpu.is_available():\n    th.xpu.synchronize()\n",
        ),
        Invalid(
            "import torch\ntorch.accelerator.synchronize()\n",
            fixed="import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n",
            config={"target-torch-version": "2.6"},
        ),
        # the guard is a name too: a target torch without `torch.accelerator` gets a suggestion
        Invalid(
            "import torch\ntorch.accelerator.synchronize()\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
            config={"target-torch-version": "2.5"},
        ),
        # a CUDA check says nothing about MPS
        Invalid(
            'import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    torch.mps.synchronize()\n',
            fixed='import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    if torch.backends.mps.is_available():\n        torch.mps.synchronize()\n',
        ),
        Invalid(
            "import torch\nused = torch.accelerator.memory_allocated()\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        name = self.ctx.qualname(node.func)
        found = raising_backend_call(name) if name is not None else None
        if found is None:
            return
        backend, leaf = found
        suggestion = RAISING_CUDA_CALLS[leaf] if backend == "cuda" else "a guard"
        fix = guard_statement_fix(self, node, self.fix_title, backend) or display_only(self, f"Use {suggestion}")
        check = availability_expression(backend, self.ctx.torch_reference())
        self.report(node, self.message.format(backend, leaf, missing_text(backend), check), fix)


#: What each deprecated ``torch.cuda.amp`` call becomes, newest spelling first; the first the
#: target torch has is written (``knowledge/torch_releases.py``).
AMP_REPLACEMENTS = {
    "autocast": ("torch.amp.autocast", "torch.autocast"),
    "GradScaler": ("torch.amp.GradScaler",),
}


class CudaAmpApi(Rule):
    code = "TDV302"
    name = "cuda-amp-api"
    message = "`torch.cuda.amp.{0}` is deprecated and CUDA-only; use `{1}` with a device type"
    #: For a target torch older than any device-generic spelling.
    message_before_replacement = "`torch.cuda.amp.{0}` is CUDA-only"
    fix_title = 'Use `torch.{}("cuda", ...)`'
    fix_safety = Applicability.SAFE
    what = "Checks for `torch.cuda.amp.autocast(...)` and `torch.cuda.amp.GradScaler(...)`."
    why = (
        "Both are deprecated aliases that only know CUDA (they warn on every call). `torch.amp` "
        "takes the device type, so the same line can later follow the run-time device."
    )
    fix_safety_note = (
        'The fix writes `torch.amp.autocast("cuda", ...)` / `torch.amp.GradScaler("cuda", ...)`, '
        "which behave exactly like the deprecated calls on every device. Where a device is at hand "
        "(a `device` in scope, the input's device inside `forward`) the fix writes its type instead, "
        "`torch.amp.autocast(device.type)` (`torch.device(device).type` when `device` may be a "
        "string), so mixed precision follows the device: that fix is unsafe, because on the CPU "
        "autocast then really computes in bfloat16 where the CUDA call was disabled. "
        "The target torch (`target-torch-version`) decides the spelling: `torch.amp.autocast` from "
        "1.12, `torch.autocast` from 1.10; `torch.amp.GradScaler` needs torch 2.3. Below that the "
        "finding says so and offers no fix."
    )
    triggers = Triggers(names=[f"torch.cuda.amp.{leaf}" for leaf in AMP_REPLACEMENTS])
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
        # each target torch gets the spelling it has, or no fix and the reason
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast(enabled=use_amp):\n    y = model(x)\n",
            fixed='import torch\nwith torch.autocast("cuda", enabled=use_amp):\n    y = model(x)\n',
            config={"target-torch-version": "1.10"},
        ),
        Invalid(
            "import torch\nwith torch.cuda.amp.autocast():\n    y = model(x)\n",
            config={"target-torch-version": "1.8"},
            offers_fix=False,
        ),
        Invalid(
            "import torch\nscaler = torch.cuda.amp.GradScaler()\n",
            config={"target-torch-version": "2.2"},
            offers_fix=False,
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
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        with torch.cuda.amp.autocast(enabled=False):\n            return self.head(x.float())\n",
            fixed='import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        with torch.amp.autocast(x.device.type, enabled=False):\n            return self.head(x.float())\n',
            applicability=Applicability.UNSAFE,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.qualname(node.func)
        if name is None or not name.startswith("torch.cuda.amp."):
            return
        leaf = name[len("torch.cuda.amp."):]
        if leaf not in AMP_REPLACEMENTS:
            return
        written = newest_available(self.ctx.settings.target_version(), AMP_REPLACEMENTS[leaf])
        if written is None:
            message = self.message_before_replacement.format(leaf)
            self.report(node, message + no_fix_for_target(self.ctx, AMP_REPLACEMENTS[leaf][-1]))
            return
        message = self.message.format(leaf, written)
        title = self.fix_title.format(written[len("torch."):])
        if any(a.star for a in node.args) or sum(1 for a in node.args if a.keyword is None) > len(OLD_AMP_POSITIONAL[leaf]):
            self.report(node, message, display_only(self, title))
            return
        replacement = cst.parse_expression(self.ctx.torch_reference() + written[len("torch"):])
        type_code = self._device_type()
        device_type = cst.Arg(cst.parse_expression(type_code or '"cuda"'))

        def replace(updated: cst.Call) -> cst.Call:
            return updated.with_changes(func=replacement, args=[device_type] + _as_keywords(updated.args, leaf))

        removable = ()
        if isinstance(node.func, cst.Name):
            local = node.func.value
            removable = (ImportSpec("torch.cuda.amp", leaf, local if local != leaf else None),)
        fix = self.make_fix(
            {node: replace},
            Applicability.UNSAFE if type_code else None,
            message=f"Use `{written}({type_code}, ...)`" if type_code else title,
            imports=self.ctx.torch_imports(),
            removable_imports=removable,
        )
        self.report(node, message, fix)


    def _device_type(self) -> Optional[str]:
        """The type of a device already at hand, or None: ``device.type`` for a ``device``
        bound to ``torch.device(...)``/``torch.accelerator``, ``torch.device(device).type`` for
        one that may be a string, ``x.device.type`` inside ``forward``."""
        choice = self.ctx.device_expression()
        if choice.needs_binding or not all(part.isidentifier() for part in choice.code.split(".")):
            return None
        if choice.code.endswith(".device") or _binds_torch_device(self.ctx, choice.code):
            return f"{choice.code}.type"
        return f"{self.ctx.torch_reference()}.device({choice.code}).type"


def _binds_torch_device(ctx, name: str) -> bool:
    """Whether the module-level or innermost-function assignment of ``name`` is a
    ``torch.device``: a ``torch.device(...)`` call or a ``torch.accelerator`` expression."""
    function = ctx.enclosing_function()
    scopes = [function.body] if function is not None and name in ctx.bound_names(function) else [ctx.module]
    for block in scopes:
        for statement in block.body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.Assign) and any(
                    isinstance(t.target, cst.Name) and t.target.value == name for t in small.targets
                ):
                    value = small.value
                    if isinstance(value, cst.Call) and ctx.qualname(value.func) == "torch.device":
                        return True
                    if isinstance(value, (cst.IfExp, cst.BooleanOperation)) and "current_accelerator" in source_of(value):
                        return True
    return False


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
