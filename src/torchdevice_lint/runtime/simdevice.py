"""Simulated devices for CPU-only machines: ``simcuda`` (one CUDA device) and ``simmps`` (an
Apple-silicon Mac's MPS device).

Code that is portable on a CPU-only machine can still mix devices: a mask built with
``torch.ones(n)`` inside ``forward`` runs fine when everything is on the CPU and crashes on the
first GPU it meets. A simulation makes a CPU-only machine behave like one with that device so
that such bugs surface in CPU-only CI. Tensors stay CPU tensors and carry a virtual ``cuda:0``
or ``mps:0`` (see :mod:`.simulated`):

* moving (``.to(device)``, ``.cuda()``, ``Module.to``) and creating (``device=...``) tag tensors;
  ``.cpu()``/``.to("cpu")`` return untagged copies; results inherit their inputs' tag; a wrapper on
  the same storage (``Variable(x)``, ``nn.Parameter(x)``) keeps it;
* ``x.device``, ``x.is_cuda``/``x.is_mps``, ``x.get_device()`` report the virtual device;
* an operation that combines a tagged tensor with an untagged one of one dimension or more raises
  the ``RuntimeError`` the device raises, ``.numpy()`` on a tagged tensor the ``TypeError``;
* ``simmps`` refuses float64 with MPS's own ``TypeError`` and the operators MPS has no kernel
  for (:mod:`.mps_kernels`), and behaves like a Mac without CUDA (``torch.cuda.is_available()``
  is False, ``.cuda()`` raises); ``simcuda`` has no MPS and reads as a CUDA build;
* the backend module (``torch.cuda`` or ``torch.mps``/``torch.backends.mps``) and
  ``torch.accelerator`` report one available device; events and synchronisation are host-side
  stand-ins; ``torch.load``/``torch.save`` keep the virtual location of storages; device
  generators, autocast dtypes (:mod:`.simulated_amp`) and one-GPU ``DataParallel``
  (:mod:`.simulated_parallel`) work as on the device.

Numerics, streams and memory are not modelled; docs/simulated-devices.md has the fidelity table
(what each simulation does against the real device) and what is not modelled.

Run a program under one with
``python -m torchdevice_lint.runtime.simdevice [--device simmps] program.py [args]``, or use
``with simulated_cuda():``/``with simulated_mps():`` in-process (the pytest plugin's legs do that).
"""

from __future__ import annotations

import argparse
import contextlib
import runpy
import sys
from typing import Any, Dict, Iterator

import torch

from . import simulated_apis as apis
from . import torch_internals
from .checkpoints import simulated_load, simulated_save
from .mps_kernels import missing_kernel_check
from .simulated import Backend, SimulatedDeviceMode, Simulation, forget_all_tags, simulated_pin_memory
from .simulated_amp import AutocastMirror
from .simulated_parallel import parallel_patches

MPS_FLOAT64_ERROR = (
    "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
    "Please use float32 instead."
)
SIMCUDA = Backend(leg="simcuda", type="cuda", label="Simulated CUDA (torchdevice-lint, tensors live on the CPU)")
SIMMPS = Backend(
    leg="simmps",
    type="mps",
    label="Simulated MPS (torchdevice-lint, tensors live on the CPU)",
    refused_dtypes={torch.float64: (TypeError, MPS_FLOAT64_ERROR)},
)
BACKENDS = {backend.leg: backend for backend in (SIMCUDA, SIMMPS)}
DEVICE_NAME = SIMCUDA.label


@contextlib.contextmanager
def _patched(module: Any, replacements: Dict[str, Any]) -> Iterator[None]:
    """Replace attributes of ``module`` (a module or a class) for the duration; attributes it
    does not hold itself (this torch lacks them, or a class inherits them) are added and removed
    again."""
    missing = object()
    originals = {name: vars(module).get(name, missing) for name in replacements}
    try:
        for name, value in replacements.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in originals.items():
            if value is missing:
                delattr(module, name)
            else:
                setattr(module, name, value)


def _default_tensor_type(real, mode: SimulatedDeviceMode):
    def set_default_tensor_type(tensor_type):
        dtype = apis.legacy_cuda_dtype(tensor_type)
        if dtype is None or mode.simulation.backend.type != "cuda":
            mode.default_device = None
            return real(tensor_type)
        torch.set_default_dtype(dtype)
        mode.default_device = mode.simulation.device

    return set_default_tensor_type


def _default_device(real, mode: SimulatedDeviceMode):
    """torch keeps its own default-device mode at the bottom of the mode stack, below the
    simulation, so a simulated default device is applied by the simulation itself."""

    def set_default_device(device):
        resolved = mode.simulation.resolve(device)
        if resolved is not None and resolved.type == mode.simulation.backend.type:
            mode.default_device = mode.simulation.device
            return real(None)
        mode.default_device = None
        return real(device)

    return set_default_device


def _backend_patches(stack: contextlib.ExitStack, simulation: Simulation) -> Dict[Any, Any]:
    """Patch the backend modules for ``simulation``; the Tensor methods it handles itself."""
    if simulation.backend.type == "cuda":
        stack.enter_context(_patched(torch.cuda, apis.cuda_patches(simulation)))
        for module, replacements in apis.cuda_build_patches().items():
            stack.enter_context(_patched(module, replacements))
        stack.enter_context(_patched(torch_internals.scatter_gather_module(), parallel_patches(simulation)))
        return {torch.Tensor.cuda: apis.tensor_cuda, torch.Tensor.type: apis.tensor_type}
    stack.enter_context(_patched(torch.cuda, apis.cuda_absent_patches()))
    stack.enter_context(_patched(torch.mps, apis.mps_patches(simulation)))
    stack.enter_context(_patched(torch.backends.mps, apis.mps_backend_patches()))
    return {torch.Tensor.cuda: apis.tensor_cuda_missing, torch.Tensor.type: apis.tensor_type}


@contextlib.contextmanager
def simulated_device(leg: str) -> Iterator[torch.device]:
    """Make this process look like a machine with the device of ``leg`` (``simcuda`` or
    ``simmps``); yields that device."""
    with simulation(leg) as active:
        yield active.device


@contextlib.contextmanager
def simulation(leg: str) -> Iterator[Simulation]:
    """``simulated_device`` yielding the :class:`Simulation`, whose ``placements`` tell
    whether the program put anything on the device."""
    backend = BACKENDS[leg]
    torch_internals.require()
    if backend.type == "cuda" and torch_internals.cuda_is_compiled() and torch.cuda.device_count() > 0:
        raise RuntimeError("a real CUDA device is present; simulating one would hide it")
    if backend.type == "mps" and torch.backends.mps.is_available():
        raise RuntimeError("a real MPS device is present; simulating one would hide it")
    active = Simulation(backend)
    forget_all_tags()
    with contextlib.ExitStack() as stack:
        stack.callback(forget_all_tags)
        stack.enter_context(_patch_torch(stack, active))
        if backend.type == "mps":
            stack.enter_context(missing_kernel_check(active))
        yield active


def _patch_torch(stack: contextlib.ExitStack, active: Simulation) -> SimulatedDeviceMode:
    """Enter every patch of torch ``active`` needs on ``stack``; returns the mode, not entered."""
    module, replacements = torch_internals.int_device_parse_to(active.backend.type)
    stack.enter_context(_patched(module, replacements))
    mode = SimulatedDeviceMode(active, _backend_patches(stack, active))
    stack.enter_context(_patched(torch.accelerator, apis.accelerator_patches(active)))
    autocast = AutocastMirror(active.backend.type)
    stack.callback(autocast.restore)
    stack.enter_context(_patched(torch, autocast.patches()))
    stack.enter_context(
        _patched(
            torch,
            {
                "load": simulated_load(active, torch.load),
                "save": simulated_save(active, torch.save),
                "set_default_tensor_type": _default_tensor_type(torch.set_default_tensor_type, mode),
                "set_default_device": _default_device(torch.set_default_device, mode),
                "Generator": apis.generator_type(active),
            },
        )
    )
    stack.enter_context(_patched(torch.Tensor, {"pin_memory": simulated_pin_memory(active)}))
    return mode


def simulated_cuda() -> "contextlib.AbstractContextManager[torch.device]":
    """Make this process look like a machine with one CUDA device; yields that device."""
    return simulated_device(SIMCUDA.leg)


def simulated_mps() -> "contextlib.AbstractContextManager[torch.device]":
    """Make this process look like an Apple-silicon Mac (MPS, no CUDA); yields the MPS device."""
    return simulated_device(SIMMPS.leg)


def main(argv=None) -> int:
    """``python -m torchdevice_lint.runtime.simdevice [--device simmps] program.py [args...]``:
    run a program as ``__main__`` on a simulated device."""
    parser = argparse.ArgumentParser(
        prog="python -m torchdevice_lint.runtime.simdevice",
        description="Run a Python program on a simulated device (tensors stay on the CPU).",
    )
    parser.add_argument("--device", choices=sorted(BACKENDS), default=SIMCUDA.leg, help="default: simcuda")
    parser.add_argument("program", help="the program to run as __main__")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, help="its arguments")
    options = parser.parse_args(sys.argv[1:] if argv is None else argv)
    sys.argv = [options.program, *options.arguments]
    with simulated_device(options.device):
        runpy.run_path(options.program, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
