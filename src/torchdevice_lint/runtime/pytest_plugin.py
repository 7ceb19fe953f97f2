"""pytest plugin: run device-dependent tests on every device, and mark CUDA-only tests.

* ``torch_device`` yields a ``torch.device`` once per device leg. The legs are ``cpu`` and
  ``cuda`` unless ``--torchdevice-devices``, the ``TORCHDEVICE_DEVICES`` environment variable or
  the ``torchdevice_devices`` ini option (in that order) name them (comma-separated, e.g.
  ``cpu,simcuda,simmps``): the names given replace the defaults. A name that is neither a
  simulated device nor a torch device type fails the run with a usage error. A leg whose device
  is absent is skipped with the reason. ``simcuda`` and ``simmps`` are the simulated CUDA and MPS
  devices of :mod:`torchdevice_lint.runtime.simdevice`: the test runs with a virtual ``cuda:0`` or
  ``mps:0`` on the CPU, which catches tensors left on the CPU (and, on ``simmps``, float64).
  A project's own ``torch_device`` fixture overrides this one.
* ``torch_device_name`` is the leg's name as listed (``"cuda"``, ``"simcuda"``).
* ``@pytest.mark.torchdevice_cuda`` skips a test unless CUDA is available. The ``cuda`` legs of
  ``torch_device`` carry it, so ``-m "not torchdevice_cuda"`` deselects them. The plugin
  registers no other marker and reads no other: a project's own ``cuda`` marker stays its own
  (unregistered, ``--strict-markers`` still rejects it).

The plugin is loaded into every pytest run once the package is installed, so torch is imported
only when a test asks for a device.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, List, Optional

import pytest

DEFAULT_DEVICES = ("cpu", "cuda")
SIMULATED_DEVICES = ("simcuda", "simmps")
# torch device types a leg may name (with an index where the type has several devices).
TORCH_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu", "hpu", "npu", "xla", "mtia", "meta")
ENVIRONMENT_VARIABLE = "TORCHDEVICE_DEVICES"
MARK = "torchdevice_cuda"
MARKER_HELP = f"{MARK}: the test needs a CUDA device; skipped when torch.cuda.is_available() is False"
_LEG = re.compile(r"^(?P<type>[a-z_]+)(?::(?P<index>\d+))?$")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torchdevice", "torch_device fixture (torchdevice-lint)")
    group.addoption(
        "--torchdevice-devices",
        dest="torchdevice_devices",
        default=None,
        metavar="DEVICES",
        help="comma-separated device legs run by the torch_device fixture, replacing the default "
        f"cpu,cuda, e.g. 'cpu,{','.join(SIMULATED_DEVICES)}' (also ${ENVIRONMENT_VARIABLE}, "
        "ini torchdevice_devices)",
    )
    parser.addini(
        "torchdevice_devices",
        help="device legs for the torch_device fixture (default cpu,cuda; e.g. cpu,simcuda)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    device_legs(config)  # a misspelled leg fails the run before collection


def _is_valid_leg(name: str) -> bool:
    if name in SIMULATED_DEVICES:
        return True
    match = _LEG.match(name)
    return match is not None and match.group("type") in TORCH_DEVICE_TYPES


def device_legs(config: pytest.Config) -> List[str]:
    """The legs named by the option, else the environment, else the ini file, else cpu and
    cuda; raises ``pytest.UsageError`` for a name that is no device."""
    named = (
        config.getoption("torchdevice_devices")
        or os.environ.get(ENVIRONMENT_VARIABLE)
        or config.getini("torchdevice_devices")
    )
    legs: List[str] = []
    for name in (part.strip() for part in (named or "").split(",")):
        if name and name not in legs:
            legs.append(name)
    unknown = [name for name in legs if not _is_valid_leg(name)]
    if unknown:
        valid = ", ".join(SIMULATED_DEVICES + TORCH_DEVICE_TYPES)
        raise pytest.UsageError(
            f"--torchdevice-devices: unknown device {', '.join(map(repr, unknown))}; "
            f"valid names: {valid} (a device type may take an index, e.g. cuda:1)"
        )
    return legs or list(DEFAULT_DEVICES)


def _is_cuda_leg(name: str) -> bool:
    return name == "cuda" or name.startswith("cuda:")


_CUDA_LEG_MARK = getattr(pytest.mark, MARK)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``torch_device_name`` (and so this plugin's ``torch_device``); a user's own
    ``torch_device`` that does not ask for ``torch_device_name`` is left unparametrized."""
    if "torch_device_name" not in metafunc.fixturenames:
        return
    legs = device_legs(metafunc.config)
    metafunc.parametrize(
        "torch_device_name",
        [pytest.param(name, marks=_CUDA_LEG_MARK) if _is_cuda_leg(name) else name for name in legs],
        ids=legs,
        scope="function",
    )


def absent_reason(name: str) -> Optional[str]:
    """Why the device leg ``name`` cannot run here, or None when it can."""
    if name == "cpu":
        return None
    import torch

    if name == "simcuda" and torch.cuda.is_available():
        return "a real CUDA device is present; the cuda leg runs on it instead"
    if name == "simmps" and torch.backends.mps.is_available():
        return "a real MPS device is present; the mps leg runs on it instead"
    if name in SIMULATED_DEVICES:
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
    """A ``torch.device`` for the current leg; on ``simcuda``/``simmps`` the test runs inside the
    simulation."""
    reason = absent_reason(torch_device_name)
    if reason is not None:
        pytest.skip(f"{torch_device_name} leg skipped: {reason}")
    if torch_device_name in SIMULATED_DEVICES:
        from .simdevice import simulated_device

        with simulated_device(torch_device_name) as device:
            yield device
        return
    import torch

    yield torch.device(torch_device_name)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests marked ``torchdevice_cuda`` (the ``cuda`` legs of ``torch_device`` among them)
    without CUDA; other projects' ``cuda`` marks are theirs."""
    if item.get_closest_marker(MARK) is None:
        return
    reason = absent_reason("cuda")
    if reason is not None:
        pytest.skip(f"needs CUDA: {reason}")
