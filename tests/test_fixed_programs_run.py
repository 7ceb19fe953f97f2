"""Programs that stop on a machine without CUDA run there once `torchdevice-fix --unsafe-fixes`
has rewritten them: the hazards of TDV302-TDV306, each in the shape real code has it. The program
and its fixed version run in one fresh CPU-only interpreter (`CUDA_VISIBLE_DEVICES=""`,
FutureWarning made an error, as a CI that treats deprecations as failures does): the original
fails with the error users report, the fixed one prints what it computed."""

import json
import subprocess
import sys
import textwrap

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.fixer import fix_source

torch = pytest.importorskip("torch")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="the programs fail only without CUDA")

#: Runs each program named on the command line as ``__main__``; prints how each ended.
RUNNER = """
import contextlib, io, json, runpy, sys, warnings
warnings.simplefilter("error", FutureWarning)
ends = []
for path in sys.argv[1:]:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(path, run_name="__main__")
        ends.append({"printed": printed.getvalue().split()})
    except Exception as error:
        ends.append({"error": f"{type(error).__name__}: {error}"})
print(json.dumps(ends))
"""


def fixed(source, **table):
    engine = api.engine(settings_from_table({"select": ["TDV"], **table}))
    return fix_source(engine, "program.py", source, unsafe=True).source


def fails_then_runs(source, tmp_path, error, expected_output, **table):
    (tmp_path / "original.py").write_text(source)
    (tmp_path / "fixed.py").write_text(fixed(source, **table))
    result = subprocess.run(
        [sys.executable, "-c", RUNNER, "original.py", "fixed.py"],
        capture_output=True, text=True, cwd=tmp_path, env={"CUDA_VISIBLE_DEVICES": "", "PATH": ""},
    )
    assert result.returncode == 0, result.stderr
    original, after_fix = json.loads(result.stdout.splitlines()[-1])
    assert error in original.get("error", ""), original
    assert after_fix == {"printed": expected_output}


@pytest.mark.skipif(torch.version.cuda is not None, reason="torch.version.cuda is None only on builds without CUDA")
def test_cuda_version_read_at_import(tmp_path):
    """transformer-xl's proj_adaptive_softmax.py reads the CUDA major version at import."""
    source = textwrap.dedent("""\
        import torch

        CUDA_MAJOR = int(torch.version.cuda.split('.')[0])
        CUDA_MINOR = int(torch.version.cuda.split('.')[1])
        print(CUDA_MAJOR >= 9)
    """)
    fails_then_runs(source, tmp_path, "AttributeError: 'NoneType' object has no attribute 'split'", ["False"])


@cpu_only
def test_per_gpu_batch_and_rank_modulo(tmp_path):
    source = textwrap.dedent("""\
        import torch

        class Trainer:
            def __init__(self, batch_size, accumulation):
                self.n_gpu = torch.cuda.device_count()
                self.per_gpu = batch_size // self.n_gpu
                self.accumulation = accumulation // torch.cuda.device_count()

        trainer = Trainer(64, 8)
        local = 5 % torch.cuda.device_count()
        print(trainer.per_gpu, trainer.accumulation, local)
    """)
    fails_then_runs(source, tmp_path, "ZeroDivisionError", ["64", "8", "0"])


@cpu_only
def test_cuda_event_timing_becomes_host_timing(tmp_path):
    source = textwrap.dedent("""\
        import torch

        def bench(fn, iters=3):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / iters

        ms = bench(lambda: torch.ones(64, 64) @ torch.ones(64, 64))
        print(type(ms).__name__, ms >= 0)
    """)
    fails_then_runs(source, tmp_path, "RuntimeError", ["float", "True"])


def test_torch_event_timing_becomes_host_timing(tmp_path):
    """`torch.Event` is no way out: the CPU backend refuses to record it."""
    source = textwrap.dedent("""\
        import torch

        start = torch.Event(enable_timing=True)
        end = torch.Event(enable_timing=True)
        start.record()
        torch.ones(8).sum()
        end.record()
        print(start.elapsed_time(end) >= 0)
    """)
    if torch.accelerator.is_available():
        pytest.skip("torch.Event records on an accelerator")
    fails_then_runs(source, tmp_path, "doesn't support events", ["True"], **{"target-torch-version": "2.6"})


def test_deprecated_amp_and_attention_spellings(tmp_path):
    """mamba/gpt-neox style autograd functions, CPU autocast and a kernel choice, run with
    FutureWarning as an error: each deprecated spelling stops the program, the fixed one runs."""
    source = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        from torch.cuda.amp import custom_bwd, custom_fwd

        class Square(torch.autograd.Function):
            @staticmethod
            @custom_fwd
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @custom_bwd
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return 2 * x * grad

        x = torch.ones(3, requires_grad=True)
        Square.apply(x).sum().backward()
        with torch.cpu.amp.autocast():
            y = torch.ones(2, 2) @ torch.ones(2, 2)
        q = torch.ones(1, 2, 4, 8)
        with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
            out = F.scaled_dot_product_attention(q, q, q)
        print(x.grad.tolist(), y.dtype, tuple(out.shape))
    """)
    fails_then_runs(
        source, tmp_path, "FutureWarning", ["[2.0,", "2.0,", "2.0]", "torch.bfloat16", "(1,", "2,", "4,", "8)"]
    )


def test_process_group_backend_asked_of_torch(tmp_path):
    """TDV303 from target 2.8: the backend torch registers for the device at hand (gloo here)."""
    source = textwrap.dedent("""\
        import tempfile
        import torch
        import torch.distributed as dist

        store = tempfile.mktemp()
        dist.init_process_group(backend="nccl", init_method="file://" + store, rank=0, world_size=1)
        total = torch.ones(2)
        dist.all_reduce(total)
        print(dist.get_backend(), total.tolist())
        dist.destroy_process_group()
    """)
    if torch.accelerator.is_available():
        pytest.skip("the device here has its own backend")
    fails_then_runs(source, tmp_path, "NCCL", ["gloo", "[1.0,", "1.0]"], **{"target-torch-version": "2.8"})


@cpu_only
def test_rank_modulo_in_a_gloo_group(tmp_path):
    """fairseq's pgslm cont_metrics.py: a gloo group starts on a CPU, then the rank's GPU is
    the rank modulo a count of 0."""
    source = textwrap.dedent("""\
        import tempfile
        import torch
        import torch.distributed as dist

        def main(rank, world_size):
            dist.init_process_group(backend="gloo", init_method="file://" + tempfile.mktemp(), world_size=world_size, rank=rank)
            try:
                print(rank % torch.cuda.device_count(), dist.get_backend())
            finally:
                dist.destroy_process_group()

        main(0, 1)
    """)
    fails_then_runs(source, tmp_path, "ZeroDivisionError", ["0", "gloo"])


@cpu_only
def test_nccl_group_then_rank_modulo(tmp_path):
    """swav's init_distributed_mode: TDV303 gives the NCCL group its gloo fallback, and the
    fixer's next pass divides by at least one GPU."""
    source = textwrap.dedent("""\
        import tempfile
        import torch
        import torch.distributed as dist

        def init_distributed_mode(rank, world_size):
            dist.init_process_group(backend="nccl", init_method="file://" + tempfile.mktemp(), world_size=world_size, rank=rank)
            gpu_to_work_on = rank % torch.cuda.device_count()
            print(gpu_to_work_on, dist.get_backend())
            dist.destroy_process_group()

        init_distributed_mode(0, 1)
    """)
    assert "max(1, torch.cuda.device_count())" in fixed(source)
    fails_then_runs(source, tmp_path, "NCCL", ["0", "gloo"])


@cpu_only
def test_ddp_output_device_cleared_with_device_ids(tmp_path):
    """jind11/TextFooler's BERT/extract_features.py: ``DistributedDataParallel(model,
    device_ids=[local_rank], output_device=local_rank)`` raises ValueError for a CPU module while
    either argument names a GPU; the fix clears both where CUDA is missing."""
    (tmp_path / "dist_utils.py").write_text(textwrap.dedent("""\
        import tempfile
        import torch.distributed as dist

        def init_distributed_mode():
            dist.init_process_group(backend="gloo", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
    """))
    source = textwrap.dedent("""\
        import torch
        import torch.distributed as dist
        from dist_utils import init_distributed_mode

        local_rank = 1
        init_distributed_mode()
        try:
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2), device_ids=[local_rank],
                                                              output_device=local_rank)
            print(tuple(model(torch.ones(1, 2)).shape))
        finally:
            dist.destroy_process_group()
    """)
    fails_then_runs(source, tmp_path, "ValueError", ["(1,", "2)"])
