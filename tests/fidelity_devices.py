"""Device fixtures for the fidelity tests (tests/test_fidelity_*.py): each test states what a
real device does and runs on the simulated device and, where this machine has one, on the real
device too, so that one test checks both columns of a row of the fidelity table in
docs/simulated-devices.md.

``device`` runs on every leg, ``cuda_device`` on CUDA's (``simcuda``, ``cuda``), ``mps_device``
on MPS's (``simmps``, ``mps``). A real leg without its device is skipped.
"""

import contextlib

import pytest
import torch

from torchdevice_lint.runtime.simdevice import BACKENDS, simulated_device

CUDA_LEGS = ("simcuda", "cuda")
MPS_LEGS = ("simmps", "mps")


def _real_device_missing(leg: str) -> bool:
    if leg == "cuda":
        return not torch.cuda.is_available()
    return not torch.backends.mps.is_available()


@contextlib.contextmanager
def on_leg(leg: str):
    """The leg's device, inside its simulation for a simulated leg."""
    if leg in BACKENDS:
        with simulated_device(leg) as device:
            yield device
        return
    if _real_device_missing(leg):
        pytest.skip(f"no real {leg} device on this machine")
    yield torch.device(leg, 0)


@pytest.fixture(params=CUDA_LEGS + MPS_LEGS)
def device(request):
    with on_leg(request.param) as leg_device:
        yield leg_device


@pytest.fixture(params=CUDA_LEGS)
def cuda_device(request):
    with on_leg(request.param) as leg_device:
        yield leg_device


@pytest.fixture(params=MPS_LEGS)
def mps_device(request):
    with on_leg(request.param) as leg_device:
        yield leg_device
