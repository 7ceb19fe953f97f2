"""Fidelity rows of the MPS column: an Apple-silicon Mac as a program sees it, checked on
``simmps`` and (where present) a real MPS device."""

import warnings

import pytest

torch = pytest.importorskip("torch")

from fidelity_devices import mps_device  # noqa: E402,F401

from torchdevice_lint.runtime.mps_kernels import FALLBACK_VARIABLE  # noqa: E402
from torchdevice_lint.runtime.simdevice import MPS_FLOAT64_ERROR, simulated_mps  # noqa: E402

FLOAT64_ON_MPS = [
    lambda device: torch.zeros(2, dtype=torch.float64, device=device),
    lambda device: torch.zeros(2, dtype=torch.float64).to(device),
    lambda device: torch.zeros(2, device=device).double(),
    lambda device: torch.zeros(2, device=device).to(torch.float64),
]

# ATen operators without an MPS kernel in torch 2.13, reached the way a program reaches them.
WITHOUT_MPS_KERNEL = {
    "aten::_linalg_eigh": lambda x: torch.linalg.eigh(x @ x.T),
    "aten::linalg_eig": lambda x: torch.linalg.eig(x),
    "aten::poisson": lambda x: torch.poisson(x.abs()),
    "aten::_pdist_forward": lambda x: torch.pdist(x),
    "aten::mode": lambda x: torch.mode(x, dim=0),
    "aten::adaptive_max_pool3d": lambda x: torch.nn.AdaptiveMaxPool3d(2)(x.reshape(1, 1, 4, 2, 2)),
}


@pytest.mark.parametrize("make", FLOAT64_ON_MPS, ids=["create", "move", "double", "convert"])
def test_float64_is_refused_with_the_mps_error(mps_device, make):
    with pytest.raises(TypeError) as refused:
        make(mps_device)
    assert str(refused.value) == MPS_FLOAT64_ERROR
    assert torch.zeros(2, dtype=torch.float64).sum().item() == 0  # on the CPU it is fine


def test_a_mac_has_no_cuda(mps_device):
    assert not torch.cuda.is_available() and torch.cuda.device_count() == 0
    assert torch.version.cuda is None
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        torch.ones(2).cuda()
    with pytest.raises((AssertionError, RuntimeError)):
        torch.cuda.get_device_properties(0)


def test_the_backend_reports_mps(mps_device):
    assert torch.backends.mps.is_available() and torch.backends.mps.is_built()
    assert torch.mps.is_available() and torch.mps.device_count() == 1


def test_torch_mps_functions_work(mps_device):
    torch.mps.manual_seed(0)
    torch.mps.seed()
    torch.mps.set_rng_state(torch.mps.get_rng_state())
    torch.mps.synchronize()
    torch.mps.empty_cache()
    torch.mps.set_per_process_memory_fraction(0.5)
    for counter in (torch.mps.current_allocated_memory, torch.mps.driver_allocated_memory, torch.mps.recommended_max_memory):
        assert isinstance(counter(), int) and counter() >= 0
    start, end = torch.mps.Event(enable_timing=True), torch.mps.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0


@pytest.mark.parametrize("operator", sorted(WITHOUT_MPS_KERNEL))
def test_operators_without_an_mps_kernel_raise(mps_device, operator):
    x = torch.randn(4, 4, device=mps_device)
    with pytest.raises(NotImplementedError, match=f"The operator '{operator}[.']"):
        WITHOUT_MPS_KERNEL[operator](x)
    WITHOUT_MPS_KERNEL[operator](x.cpu())  # the same call on CPU tensors runs


def test_the_fallback_variable_runs_missing_operators_on_the_cpu(monkeypatch):
    """MPS reads the variable when torch loads, so this one runs on ``simmps`` only."""
    monkeypatch.setenv(FALLBACK_VARIABLE, "1")
    with simulated_mps() as device:
        with pytest.warns(UserWarning, match="'aten::poisson' is not currently supported on the MPS backend"):
            counts = torch.poisson(torch.ones(3, device=device))
        assert counts.device == device
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the warning comes once
            torch.poisson(torch.ones(3, device=device))


def test_data_parallel_on_a_mac_leaves_the_batch_where_it_is(mps_device):
    """DataParallel only knows CUDA-like devices: on a Mac it calls the module as it is."""
    model = torch.nn.DataParallel(torch.nn.Linear(4, 2)).to(mps_device)
    assert model(torch.randn(3, 4, device=mps_device)).device == mps_device
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        model(torch.randn(3, 4))
