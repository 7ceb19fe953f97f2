"""Backend APIs (``torch.cuda``, ``torch.mps``, ``torch.xpu``, ``torch.accelerator``) that raise
where their backend is missing (TDV301), and timing with device events (TDV306), whose fix
rewrites the whole idiom. The deprecated device-bound spellings (TDV302) are in ``amp.py``."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Resolved, Triggers, Unguarded
from ..knowledge.backends import availability_expression, missing_text
from ..model.fixes import Applicability, ImportSpec, needs_target
from ..syntax.cst_lazy import cst
from ..knowledge.event_timing import (
    ACCELERATOR_SINCE, EVENT_CLASSES, TimingIdiom, event_class, kept_in_container, reads, timing_idiom,
)
from ..syntax.cst_nodes import dotted_name, source_of
from .support.common import display_only, guard_statement_fix
from .support.examples import GPU_CLASS_ON_BY_DEFAULT, GPU_ONLY_CLASS, VISIBLE_GPUS
from .device_queries import parenthesized

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


_SET_DEVICE = "import torch\n\ndef train(args):\n    if args.{} != '-1':\n        torch.cuda.set_device(0)\n"
_WARM_UP = "import torch\n\ndef warm_up(num):\n    for i in range(num):\n        {}\n"
_PREFETCHER = "import torch\n\nclass CUDAPrefetcher:\n    def __init__(self, loader):\n        self.stream = torch.cuda.Stream()\n"


class UnguardedCudaApi(Rule):
    code = "TDV301"
    name = "unguarded-cuda-api"
    hazard_without_cuda = True
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
        "A call that is a statement of its own is wrapped in `if torch.cuda.is_available():` (or `torch.backends.mps.is_available()`, "
        "`torch.xpu.is_available()`, `torch.accelerator.is_available()`), which keeps machines with the backend unchanged. "
        "A call whose value is used (an assignment, an argument, a `with` item) gets a suggestion only."
    )
    triggers = Unguarded(RAISING_CALLS.matching_calls)
    valid = (
        Valid("import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"),
        Valid("import torch\nif torch.backends.mps.is_available():\n    torch.mps.synchronize()\n    torch.mps.empty_cache()\n"),
        Valid("import torch\ntorch.mps.manual_seed(0)\ntorch.xpu.empty_cache()\ntorch.xpu.manual_seed(0)\n"),
        Valid('import torch\n\ndef sync(device):\n    if device.type == "xpu":\n        torch.xpu.synchronize()\n'),
        Valid("import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"),
        # a parameter bound again to a conjunction with the check (facebookresearch/ijepa@52c1ae9 src/utils/logging.py:13)
        Valid("import torch\n\ndef timer(closure, log_timings=True):\n    log_timings = log_timings and torch.cuda.is_available()\n    if log_timings:\n        torch.cuda.synchronize()\n"),
        Valid("import torch\ndevice = torch.accelerator.current_accelerator()\nn = torch.accelerator.device_count()\n"),
        Valid("import torch\ntorch.cuda.empty_cache()\ntorch.cuda.manual_seed(0)\n"),
        # past a return where CUDA is missing, whatever the other branches do (FoundationVision/VAR@78b9539 dist.py:22-32)
        Valid("import os\nimport torch\n\ndef initialize():\n    if not torch.cuda.is_available():\n        return\n    elif 'RANK' not in os.environ:\n"
              "        torch.cuda.set_device(0)\n        return\n    torch.cuda.set_device(int(os.environ['RANK']) % torch.cuda.device_count())\n"),
        # a helper called only past such a return (lrjconan/GRAN@fc9c04a utils/data_parallel.py:17,77-91)
        Valid("import torch\n\ndef balance(ids):\n    return [torch.cuda.get_device_properties(i) for i in ids]\n\n"
              "class Parallel:\n    def __init__(self, ids):\n        if not torch.cuda.is_available():\n            return\n        balance(ids)\n",
              files={"train.py": "from example import Parallel\nParallel()\n"}),
        # once per GPU: never without one (ashawkey/stable-dreamfusion@5550b91 nerf/utils.py:1344-1345)
        Valid("import torch\nfor i in range(torch.cuda.device_count()):\n    print(torch.cuda.get_device_name(i))\n"),
        # built only where the config asks for CUDA (swz30/Restormer@df766d5 basicsr/train.py:195)
        Valid(_PREFETCHER, files={"train.py": "from example import CUDAPrefetcher\n\ndef train(opt, loader):\n    if opt.get('prefetch_mode') == 'cuda':\n        return CUDAPrefetcher(loader)\n"}),
        Valid("import torch\n\ndef gpu_memory():\n    num = torch.cuda.device_count()\n    for i in range(num):\n        torch.cuda.mem_get_info(i)\n"),  # a count named first (ashawkey/stable-dreamfusion@5550b91 nerf/utils.py:1345)
        Valid("from numba import cuda\ncuda.synchronize()\n"),
        Valid("import torch\n\ndef t(x):\n    if x.is_cuda:\n        torch.cuda.synchronize()\n"),
        Valid(
            "import pytest\nimport torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\n"
            "def test_gpu():\n    torch.cuda.synchronize()\n"
        ),
        Valid("import torch\nn = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"),
        Valid("import torch\n\ndef run(self):\n    if self.cuda_device is not None:\n        torch.cuda.set_device(self.cuda_device)\n"),
        Valid(_SET_DEVICE.format("visible_gpus"), files=VISIBLE_GPUS),
        # `-d -2`, "a GPU if there is one", names none itself (tbepler/protein-sequence-embedding-iclr2019@be32cff train_lm_pfam.py:34,97-98)
        Valid("import torch\n\ndef train(args):\n    d = args.device\n    if d >= 0:\n        torch.cuda.set_device(d)\n",
              files={"opts.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('-d', '--device', type=int, default=-2)\n"}),
        # a name derived from the option: `device_id` is -1 unless the user names GPUs
        Valid(
            'import torch\n\ndef train(args):\n    device = "cpu" if args.visible_gpus == "-1" else "cuda"\n'
            '    device_id = 0 if device == "cuda" else -1\n    if device_id >= 0:\n        torch.cuda.set_device(device_id)\n',
            files=VISIBLE_GPUS,
        ),
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
        *(Valid(f"import torch\nif {flag}:\n    torch.cuda.set_device(args.gpu)\n") for flag in ("args.distributed", "args['distributed']", "self.distributed_mode")),
        *GPU_ONLY_CLASS,  # where `use_cuda = use_cuda and torch.cuda.is_available()` holds, or after `use_cuda = False` without CUDA
    )
    invalid = (
        GPU_CLASS_ON_BY_DEFAULT,
        # a CUDA-named class runs wherever it is used (a callback on by default)
        Invalid(
            "import torch\n\nclass CUDACallback:\n    def on_train_epoch_end(self, trainer):\n        torch.cuda.synchronize()\n",
            fixed=(
                "import torch\n\nclass CUDACallback:\n    def on_train_epoch_end(self, trainer):\n"
                "        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n"
            ),
        ),
        # a count the caller passes may be any number
        Invalid(_WARM_UP.format("torch.cuda.synchronize(i)"), fixed=_WARM_UP.format("if torch.cuda.is_available():\n            torch.cuda.synchronize(i)")),
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
        # a CUDA check says nothing about MPS
        Invalid(
            'import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    torch.mps.synchronize()\n',
            fixed='import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\nelse:\n    if torch.backends.mps.is_available():\n        torch.mps.synchronize()\n',
        ),
        # an option choosing a dataset is no request for CUDA; a default naming GPU 0 already picks CUDA
        Invalid(_SET_DEVICE.format("dataset"), fixed=_SET_DEVICE.format("dataset").replace("        torch", "        if torch.cuda.is_available():\n            torch"),
                files={"opts.py": VISIBLE_GPUS["opts.py"].replace("visible_gpus", "dataset"), "main.py": "from example import train\ntrain(args)\n"}),
        Invalid(_SET_DEVICE.format("visible_gpus"), fixed=_SET_DEVICE.format("visible_gpus").replace("        torch", "        if torch.cuda.is_available():\n            torch"),
                files={"opts.py": VISIBLE_GPUS["opts.py"].replace("'-1'", "'0'"), "main.py": "from example import train\ntrain(args)\n"}),
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
        check = availability_expression(backend, self.ctx.torch_reference())  # named even where the target lacks it
        self.report(node, self.message.format(backend, leaf, missing_text(backend), check), fix)


class CudaEventTiming(Rule):
    code = "TDV306"
    name = "cuda-event-timing"
    hazard_without_cuda = True
    message = "`{}` times with {} events, which raise on a machine without {}: time on the host"
    fix_title = "Time on the host: `time.perf_counter()` after synchronizing the device"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for timing with device events: `start.elapsed_time(end)` where both are "
        "`torch.cuda.Event(...)` (or `torch.Event(...)`) that the code records, outside an "
        "availability check, and such events kept in a list or a dict (`self.starts[key].append(event)`) "
        "and read where the class or module keeps them. One finding per measurement; TDV301 reports "
        "the event's creation too."
    )
    why = (
        "`torch.cuda.Event` cannot even be created without CUDA, and `torch.Event` does not help: "
        "on a CPU-only machine its `record()` raises `cpu backend doesn't support events`. A "
        "benchmark or a training loop that logs its step time stops there. A rule of its own, not "
        "part of TDV301: a guard around the creation leaves every record and reading to raise, so "
        "the fix rewrites the whole measurement at once."
    )
    fix_safety_note = (
        "Unsafe: the fix rewrites the idiom to host timing. Each event becomes a float, each "
        "`record()` becomes `if torch.cuda.is_available(): torch.cuda.synchronize()` followed by "
        "`start = time.perf_counter()`, each `event.synchronize()` that synchronisation, and "
        "`start.elapsed_time(end)` becomes `(end - start) * 1000` (milliseconds, as before). On a "
        "GPU this measures wall time around synchronisations instead of the stream's own clock, "
        "and the stream a `record(stream)` named is dropped. `torch.Event` needs "
        "`torch.accelerator` (2.6) for its synchronisation; below it the fix is a suggestion. No fix "
        "where the events are used in any other way (stored, passed on, queried)."
    )
    triggers = Resolved(list(EVENT_CLASSES), calls=True) & Triggers(calls="elapsed_time")
    valid = (
        # events kept in lists only where CUDA is: the loop over them finds none on a CPU
        Valid(
            "import torch\n\nclass Timer:\n    def start(self):\n        if torch.cuda.is_available():\n"
            "            event = torch.cuda.Event(enable_timing=True)\n            event.record()\n            self.events.append(event)\n\n"
            "    def total(self):\n        return sum(a.elapsed_time(b) for a, b in zip(self.events, self.events[1:]))\n"
        ),
        # a class that keeps no events: another timer's method of the same name
        Valid(
            "import torch\n\nclass Steps:\n    def __init__(self):\n        self.event = torch.cuda.Event(enable_timing=True)\n"
            "        self.timers = []\n\n    def total(self):\n        return sum(t.elapsed_time(t.origin) for t in self.timers)\n"
        ),
        Valid(
            "import torch\nif torch.cuda.is_available():\n    start = torch.cuda.Event(enable_timing=True)\n"
            "    end = torch.cuda.Event(enable_timing=True)\n    start.record()\n    end.record()\n"
            "    print(start.elapsed_time(end))\n"
        ),
        Valid("import time\nstart = time.perf_counter()\nelapsed = time.perf_counter() - start\n"),
        # another library's timer with an elapsed_time method
        Valid("import torch\ntimer = Timer()\ntimer.start()\nprint(timer.elapsed_time(timer))\n"),
        Valid(
            "import pytest\nimport torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\n"
            "def test_speed():\n    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)\n"
            "    a.record()\n    b.record()\n    assert a.elapsed_time(b) >= 0\n"
        ),
    )
    invalid = (
        Invalid(
            "import torch\n\ndef bench(fn):\n    start = torch.cuda.Event(enable_timing=True)\n"
            "    end = torch.cuda.Event(enable_timing=True)\n    start.record()\n    fn()\n    end.record()\n"
            "    end.synchronize()\n    return start.elapsed_time(end) / 1000\n",
            fixed=(
                "import torch\nimport time\n\ndef bench(fn):\n    start = 0.0\n    end = 0.0\n"
                "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    start = time.perf_counter()\n"
                "    fn()\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    end = time.perf_counter()\n"
                "    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n    return (end - start) * 1000 / 1000\n"
            ),
        ),
        # EleutherAI/gpt-neox@ea7aefd megatron/devutil.py:37-47: recorded in a closure
        Invalid(
            "import torch\n\ndef monitor(metric, fn):\n    start_event = torch.cuda.Event(enable_timing=True)\n"
            "    end_event = torch.cuda.Event(enable_timing=True)\n\n    def timed():\n        start_event.record()\n"
            "        fn()\n        end_event.record()\n        metric.append(1 / start_event.elapsed_time(end_event))\n"
            "    return timed\n",
            fixed=(
                "import torch\nimport time\n\ndef monitor(metric, fn):\n    start_event = 0.0\n    end_event = 0.0\n\n"
                "    def timed():\n        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n"
                "        start_event = time.perf_counter()\n        fn()\n        if torch.cuda.is_available():\n"
                "            torch.cuda.synchronize()\n        end_event = time.perf_counter()\n"
                "        metric.append(1 / ((end_event - start_event) * 1000))\n    return timed\n"
            ),
        ),
        # NVlabs/stylegan2-ada-pytorch@d72cc7d training/training_loop.py:213-386: attributes, streams, None checks
        Invalid(
            "import torch\nfor phase in phases:\n    phase.start_event = None\n    if rank == 0:\n"
            "        phase.start_event = torch.cuda.Event(enable_timing=True)\n        phase.end_event = torch.cuda.Event(enable_timing=True)\n"
            "for phase in phases:\n    if phase.start_event is not None:\n        phase.start_event.record(torch.cuda.current_stream(device))\n"
            "    phase.end_event.record(torch.cuda.current_stream(device))\n"
            "    value = phase.start_event.elapsed_time(phase.end_event)\n",
            fixed=(
                "import torch\nimport time\n\nfor phase in phases:\n    phase.start_event = None\n    if rank == 0:\n"
                "        phase.start_event = 0.0\n        phase.end_event = 0.0\nfor phase in phases:\n"
                "    if phase.start_event is not None:\n        if torch.cuda.is_available():\n            torch.cuda.synchronize()\n"
                "        phase.start_event = time.perf_counter()\n    if torch.cuda.is_available():\n        torch.cuda.synchronize()\n"
                "    phase.end_event = time.perf_counter()\n    value = (phase.end_event - phase.start_event) * 1000\n"
            ),
        ),
        Invalid(
            "import torch\nstart, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)\nstart.record()\n"
            "end.record()\nprint(start.elapsed_time(end))\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(
            "import torch\nstart = torch.Event(enable_timing=True)\nend = torch.Event(enable_timing=True)\nstart.record()\n"
            "end.record()\nprint(start.elapsed_time(end))\n",
            fixed=(
                "import torch\nimport time\n\nstart = 0.0\nend = 0.0\nif torch.accelerator.is_available():\n"
                "    torch.accelerator.synchronize()\nstart = time.perf_counter()\nif torch.accelerator.is_available():\n"
                "    torch.accelerator.synchronize()\nend = time.perf_counter()\nprint((end - start) * 1000)\n"
            ),
            config={"target-torch-version": "2.6"},
        ),
        # facebookresearch/fairseq@3d262bb examples/textless_nlp/gslm/unit2speech/tacotron2/utils.py:92-133
        # (CudaTimer): events appended to lists and read in a loop; no name follows them, so no rewrite
        Invalid(
            "import collections\nimport torch\n\nclass CudaTimer:\n    def start(self, key):\n"
            "        s = torch.cuda.Event(enable_timing=True)\n        s.record()\n        self.start_events[key].append(s)\n\n"
            "    def stop(self, key):\n        e = torch.cuda.Event(enable_timing=True)\n        e.record()\n"
            "        self.end_events[key].append(e)\n\n    def reset(self):\n"
            "        self.start_events = collections.defaultdict(list)\n        self.end_events = collections.defaultdict(list)\n\n"
            "    def value(self, k):\n        time = 0\n        for start, end in zip(self.start_events[k], self.end_events[k]):\n"
            "            time += start.elapsed_time(end)\n        return time\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # the benchmark idiom (common in public kernels' bench scripts; no project here pinned):
        # events made by a comprehension, read pairwise
        Invalid(
            "import torch\nevents = [torch.cuda.Event(enable_timing=True) for _ in range(3)]\nfor event in events:\n"
            "    event.record()\nprint([a.elapsed_time(b) for a, b in zip(events, events[1:])])\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # events kept in a list: no rewrite (an attribute or keyword named like one is no use of it)
        Invalid(
            "import torch\nstart = torch.cuda.Event(enable_timing=True)\nend = torch.cuda.Event(enable_timing=True)\n"
            "events = [start, end]\nstart.record()\nend.record()\nstream.end(end=1)\nprint(start.elapsed_time(end))\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._reported: Set[tuple] = set()
        #: id(class or module) -> the backend of events its code keeps in containers.
        self._kept: Dict[int, str] = {}
        #: Readings no named event explains, with the class or module around each.
        self._unnamed: List[Tuple[cst.Call, int]] = []

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        created = event_class(self.ctx, node)
        if created is not None:
            if kept_in_container(self.ctx.stack, self.ctx.enclosing_function() or self.ctx.module):
                self._kept.setdefault(id(self._holder()), EVENT_CLASSES[created])
            return
        if not reads(node) or node.args[0].star:
            return
        start, end = dotted_name(node.func.value), dotted_name(node.args[0].value)
        scope = self._scope(start) if start and end else None
        if scope is None or self._scope(end) is not scope:
            self._unnamed.append((node, id(self._holder())))
            return
        idiom = timing_idiom(self.ctx, scope, start, end)
        key = (id(scope), frozenset(idiom.names)) if idiom is not None else None
        if key is None or key in self._reported:
            return
        self._reported.add(key)
        self.report(node, self._message(node, idiom.backend), self._fix(idiom) or display_only(self, self.fix_title))

    def leave_Module(self, node: cst.Module) -> None:
        """Readings of events taken out of a list or a dict (fairseq's ``CudaTimer``), where
        the class or module around them keeps events in one: reported, never rewritten (no
        name follows the events through the container)."""
        for reading, holder in self._unnamed:
            if holder in self._kept:
                self.report(reading, self._message(reading, self._kept[holder]), display_only(self, self.fix_title))

    def _message(self, reading: cst.Call, backend: str) -> str:
        kind, machine = ("CUDA", "CUDA") if backend == "cuda" else ("`torch.Event`", "an accelerator")
        return self.message.format(source_of(reading), kind, machine)

    def _holder(self) -> cst.CSTNode:
        return self.ctx.enclosing_class() or self.ctx.module

    def _scope(self, name: str) -> Optional[cst.CSTNode]:
        """Where the event ``name`` is created: the class for ``self.`` names, else the
        innermost function around the reading (or the module) whose own statements create it."""
        if name.startswith("self."):
            return self.ctx.enclosing_class()
        functions = [scope for scope in self.ctx.scopes if isinstance(scope, cst.FunctionDef)]
        for scope in [*reversed(functions), self.ctx.module]:
            if any(event_class(self.ctx, value) for value in self.ctx.assigned_values(scope).get(name, ())):
                return scope
        return None

    def _fix(self, idiom: TimingIdiom):
        ctx = self.ctx
        functions = [scope for scope in ctx.scopes if isinstance(scope, cst.FunctionDef)]
        clock_taken = ctx.aliases.get("time", "time") != "time" or any("time" in ctx.bound_names(f) for f in functions)
        if clock_taken or not idiom.rewritable:
            return None
        if idiom.backend == "accelerator" and ctx.settings.target_version() < ACCELERATOR_SINCE:
            return display_only(self, needs_target(self.fix_title, ACCELERATOR_SINCE))
        torch_name, module = ctx.torch_reference(), idiom.backend
        sync = cst.parse_statement(f"if {torch_name}.{module}.is_available():\n    {torch_name}.{module}.synchronize()\n")

        def synchronized(updated: cst.SimpleStatementLine) -> cst.If:
            return sync.with_changes(leading_lines=updated.leading_lines)

        def clocked(updated: cst.SimpleStatementLine) -> cst.FlattenSentinel:
            event = source_of(updated.body[0].value.func.value)
            clock = cst.parse_statement(f"{event} = time.perf_counter()\n")
            return cst.FlattenSentinel([synchronized(updated), clock.with_changes(trailing_whitespace=updated.trailing_whitespace)])

        def interval(parenthesize: bool):
            def replace(updated: cst.Call) -> cst.BaseExpression:
                span = cst.parse_expression(f"({source_of(updated.args[0].value)} - {source_of(updated.func.value)}) * 1000")
                return parenthesized(span) if parenthesize else span
            return replace

        replacements = {creation: (lambda _: cst.Float("0.0")) for creation in idiom.creations}
        replacements.update({record: clocked for record in idiom.records})
        replacements.update({wait: synchronized for wait in idiom.waits})
        replacements.update({reading: interval(id(reading) in idiom.inside_operators) for reading in idiom.readings})
        return self.make_fix(replacements, imports=[*ctx.torch_imports(), ImportSpec("time")])


RULES = (UnguardedCudaApi, CudaEventTiming)
