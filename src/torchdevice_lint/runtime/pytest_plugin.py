"""pytest plugin: run device-dependent tests on every device, and mark CUDA-only tests.

* ``torch_device`` yields a ``torch.device`` once per device leg: ``cpu``, ``cuda`` and the legs
  named by ``--torchdevice-devices``, the ``TORCHDEVICE_DEVICES`` environment variable or the
  ``torchdevice_devices`` ini option (comma-separated, e.g. ``simcuda,mps``). A leg whose device is
  absent is skipped with the reason. ``simcuda`` is the simulated CUDA device of
  :mod:`torchdevice_lint.runtime.simdevice`: the test runs with a virtual ``cuda:0`` on the CPU, which
  catches tensors left on the CPU. A project's own ``torch_device`` fixture overrides this one.
* ``torch_device_name`` is the leg's name as listed (``"cuda"``, ``"simcuda"``).
* ``@pytest.mark.cuda`` skips a test unless CUDA is available; the ``cuda`` legs of
  ``torch_device`` carry the mark too, so ``-m "not cuda"`` deselects them.

The plugin is loaded into every pytest run once the package is installed, so torch is imported
only when a test asks for a device.
"""

from __future__ import annotations

import os
from typing import Iterator, List, Optional

import pytest

DEFAULT_DEVICES = ("cpu", "cuda")
SIMULATED_DEVICE = "simcuda"
ENVIRONMENT_VARIABLE = "TORCHDEVICE_DEVICES"
_CUDA_MARK_HELP = "cuda: the test needs a CUDA device; it is skipped when torch.cuda.is_available() is False"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchdevice", "torch_device fixture (torchdevice-lint)")
    group.addoption(
        "--torchdevice-devices",
        dest="torchdevice_devices",
        default=None,
        metavar="DEVICES",
        help="comma-separated device legs run by the torch_device fixture besides cpu and cuda, "
        f"e.g. '{SIMULATED_DEVICE},mps' (also ${ENVIRONMENT_VARIABLE}, ini torchdevice_devices)",
    )
    parser.addini(
        "torchdevice_devices",
        help=f"device legs for the torch_device fixture besides cpu and cuda (e.g. {SIMULATED_DEVICE})",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _CUDA_MARK_HELP)


def device_legs(config: pytest.Config) -> List[str]:
    """cpu, cuda, then the extra legs from the option, else the environment, else the ini file."""
    extra = (
        config.getoption("torchdevice_devices")
        or os.environ.get(ENVIRONMENT_VARIABLE)
        or config.getini("torchdevice_devices")
    )
    legs = list(DEFAULT_DEVICES)
    for name in (part.strip() for part in (extra or "").split(",")):
        if name and name not in legs:
            legs.append(name)
    return legs


def _is_cuda_leg(name: str) -> bool:
    return name == "cuda" or name.startswith("cuda:")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``torch_device_name`` (and so this plugin's ``torch_device``); a user's own
    ``torch_device`` that does not ask for ``torch_device_name`` is left unparametrized."""
    if "torch_device_name" not in metafunc.fixturenames:
        return
    legs = device_legs(metafunc.config)
    metafunc.parametrize(
        "torch_device_name",
        [pytest.param(name, marks=pytest.mark.cuda) if _is_cuda_leg(name) else name for name in legs],
        ids=legs,
        scope="function",
    )


def absent_reason(name: str) -> Optional[str]:
    """Why the device leg ``name`` cannot run here, or None when it can."""
    if name == "cpu":
        return None
    import torch

    if name == SIMULATED_DEVICE:
        if torch.cuda.is_available():
            return "a real CUDA device is present; the cuda leg runs on it instead"
        return None

    try:
        device = torch.device(name)
    except RuntimeError as error:
        return f"{name!r} is not a device torch {torch.__version__} knows: {error}"
    if device.type == "cuda":
        if not torch.cuda.is_available():
            if torch.version.cuda is None:
                return f"CUDA is not available: torch {torch.__version__} is a build without CUDA"
            return "CUDA is not available: no CUDA device is visible (driver, CUDA_VISIBLE_DEVICES)"
        if device.index is not None and device.index >= torch.cuda.device_count():
            return f"{name} is absent: only {torch.cuda.device_count()} CUDA device(s) visible"
        return None
    backend = getattr(torch, device.type, None)
    is_available = getattr(backend, "is_available", None)
    if callable(is_available):
        return None if is_available() else f"{device.type} is not available on this machine"
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    if accelerator is not None and accelerator.type == device.type:
        return None
    return f"{device.type} is not available on this machine"


@pytest.fixture
def torch_device(torch_device_name: str) -> Iterator["object"]:
    """A ``torch.device`` for the current leg; on ``simcuda`` the test runs inside the simulation."""
    reason = absent_reason(torch_device_name)
    if reason is not None:
        pytest.skip(f"{torch_device_name} leg skipped: {reason}")
    if torch_device_name == SIMULATED_DEVICE:
        from .simdevice import simulated_cuda

        with simulated_cuda() as device:
            yield device
        return
    import torch

    yield torch.device(torch_device_name)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests marked ``cuda``, and the ``cuda`` legs of ``torch_device``, without CUDA."""
    if item.get_closest_marker("cuda") is None:
        return
    reason = absent_reason("cuda")
    if reason is not None:
        pytest.skip(f"needs CUDA: {reason}")
