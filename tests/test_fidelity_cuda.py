"""Fidelity rows of the CUDA column: ``torch.cuda`` and a CUDA build as a program on a one-GPU
machine sees them, checked on ``simcuda`` and (where present) a real CUDA device."""

import pytest

torch = pytest.importorskip("torch")

from fidelity_devices import cuda_device  # noqa: E402,F401


def test_cuda_reports_an_available_device(cuda_device):
    assert torch.cuda.is_available() and torch.cuda.is_initialized()
    assert torch.cuda.device_count() >= 1 and torch.cuda.current_device() == 0
    assert torch.cuda.get_device_name(0)


def test_bf16_support_follows_the_compute_capability(cuda_device):
    capability = torch.cuda.get_device_capability()
    assert torch.cuda.is_bf16_supported(including_emulation=False) == (capability >= (8, 0))
    with torch.autocast("cuda", dtype=torch.bfloat16):  # raised "does not support bfloat16" before
        assert torch.is_autocast_enabled("cuda")


def test_device_properties_agree_with_the_other_queries(cuda_device):
    properties = torch.cuda.get_device_properties(0)
    assert (properties.major, properties.minor) == torch.cuda.get_device_capability(0)
    assert properties.total_memory > 0 and properties.multi_processor_count > 0
    free, total = torch.cuda.mem_get_info()
    assert total == properties.total_memory and 0 <= free <= total


def test_the_build_reports_cuda(cuda_device):
    assert isinstance(torch.version.cuda, str) and torch.version.cuda[0].isdigit()
    assert torch.backends.cuda.is_built()
    assert torch.backends.cudnn.is_available() and isinstance(torch.backends.cudnn.version(), int)


def test_data_parallel_scatters_a_cpu_batch_onto_the_device(cuda_device):
    """With one GPU, DataParallel moves the module to cuda:0, copies the batch there and calls the
    module directly; gradients flow back to the CPU batch."""
    model = torch.nn.DataParallel(torch.nn.Linear(4, 2)).cuda()
    batch = torch.randn(5, 4, requires_grad=True)
    output = model(batch)
    assert output.device == cuda_device and output.shape == (5, 2)
    output.sum().backward()
    assert model.module.weight.grad.device == cuda_device
    assert batch.grad.device.type == "cpu" and batch.grad.shape == (5, 4)


def test_legacy_cuda_tensor_types(cuda_device):
    tensor = torch.cuda.FloatTensor(2, 3)
    assert isinstance(tensor, torch.cuda.FloatTensor) and tensor.device == cuda_device
    assert tensor.type() == "torch.cuda.FloatTensor"
    assert torch.ones(2).type(torch.cuda.LongTensor).type() == "torch.cuda.LongTensor"
    assert torch.ones(2).cuda().is_cuda


def test_events_time_and_streams_synchronize(cuda_device):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.ones(100, device=cuda_device).sum()
    end.record()
    torch.cuda.synchronize()
    assert start.elapsed_time(end) >= 0
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.ones(2, device=cuda_device)
    stream.synchronize()
    torch.cuda.current_stream().wait_stream(stream)


def test_memory_counters_are_byte_counts(cuda_device):
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.reset_max_memory_allocated()
    torch.cuda.reset_accumulated_memory_stats()
    for counter in (torch.cuda.memory_allocated, torch.cuda.max_memory_allocated, torch.cuda.memory_reserved, torch.cuda.max_memory_reserved):
        assert isinstance(counter(), int) and counter() >= 0
    assert torch.cuda.memory_stats()["allocated_bytes.all.peak"] >= 0
    assert isinstance(torch.cuda.memory_summary(), str)
    assert 0 < torch.cuda.get_per_process_memory_fraction() <= 1
    torch.cuda.empty_cache()


def test_the_device_context_selects_device_0(cuda_device):
    with torch.cuda.device(0) as selected:
        assert isinstance(selected, torch.cuda.device)
        assert torch.ones(1, device="cuda").device == cuda_device
    with torch.cuda.device(None):
        assert torch.cuda.current_device() == 0


def test_cuda_seeding_keeps_device_random_numbers_reproducible(cuda_device):
    torch.cuda.manual_seed_all(0)
    torch.manual_seed(1)
    first = torch.randn(2, device=cuda_device)
    torch.manual_seed(1)
    assert torch.equal(first, torch.randn(2, device=cuda_device))
