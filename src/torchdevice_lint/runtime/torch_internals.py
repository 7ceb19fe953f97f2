"""The torch APIs the simulated devices lean on that torch does not promise to keep (private
names, or public ones newer than some supported torch), in one place.

A simulation needs every one of them; :func:`require` checks them all before it starts, so an
installed torch that lacks one fails with a message naming what is missing and the versions the
simulation is proven on, instead of an ``AttributeError`` in the middle of a user's program.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Tuple

import torch

PROVEN_TORCH_VERSIONS = ("2.13.0",)  # the versions CI runs the runtime tests on
DOCS = "docs/simulated-devices.md#torch-versions"

# (module, attribute): what each is used for is said where it is looked up below.
REQUIRED: Tuple[Tuple[str, str], ...] = (
    ("torch.utils._device", "_device_constructors"),
    ("torch._C._nn", "_parse_to"),
    ("torch", "_has_compatible_shallow_copy_type"),
    ("torch.cuda", "_is_compiled"),
    ("torch.utils._python_dispatch", "TorchDispatchMode"),
    ("torch.nn.parallel.scatter_gather", "Scatter"),
    ("torch.nn.parallel.scatter_gather", "Gather"),
    ("torch.accelerator", "current_accelerator"),  # public, torch 2.6+
    ("torch", "set_autocast_dtype"),  # public, torch 2.4+ (device-type argument)
)


class UnsupportedTorch(RuntimeError):
    """The installed torch lacks an API the simulated devices need."""


def _lookup(module: str, attribute: str) -> Any:
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        raise UnsupportedTorch(_message([f"{module}.{attribute}"])) from None


def _message(missing: List[str]) -> str:
    return (
        f"the simulated devices need {', '.join(missing)}, which torch {torch.__version__} lacks; "
        f"they are proven on torch {', '.join(PROVEN_TORCH_VERSIONS)} (see {DOCS})"
    )


def missing_apis() -> List[str]:
    """The required APIs the installed torch lacks, as dotted names."""
    missing = []
    for module, attribute in REQUIRED:
        try:
            _lookup(module, attribute)
        except UnsupportedTorch:
            missing.append(f"{module}.{attribute}")
    return missing


def require() -> None:
    """Raise :class:`UnsupportedTorch` naming every required API the installed torch lacks."""
    missing = missing_apis()
    if missing:
        raise UnsupportedTorch(_message(missing))


def device_constructors() -> set:
    """The factory functions that take ``device=`` (``torch.set_default_device`` applies to them)."""
    return _lookup("torch.utils._device", "_device_constructors")()


def parse_to(*args, **kwargs) -> Tuple[Any, Any, bool, Any]:
    """``Tensor.to``'s argument parser: ``(device, dtype, non_blocking, memory_format)``."""
    return _lookup("torch._C._nn", "_parse_to")(*args, **kwargs)


def int_device_parse_to(device_type: str) -> Tuple[Any, Dict[str, Callable]]:
    """``Tensor.to``/``Module.to``'s parser, reading an int device as an index on ``device_type``
    (the module to patch and its replacement). On a machine with an accelerator ``.to(0)`` is
    ``cuda:0`` or ``mps:0``; this CPU build has no accelerator to read it as, and raises."""
    module = importlib.import_module("torch._C._nn")
    real_parse_to = _lookup("torch._C._nn", "_parse_to")

    def as_device(argument: Any) -> Any:
        is_index = isinstance(argument, int) and not isinstance(argument, bool)
        return torch.device(device_type, argument) if is_index else argument

    def parse_to_with_int_devices(*args, **kwargs):
        if args:
            args = (as_device(args[0]),) + args[1:]
        if "device" in kwargs:
            kwargs = dict(kwargs, device=as_device(kwargs["device"]))
        return real_parse_to(*args, **kwargs)

    return module, {"_parse_to": parse_to_with_int_devices}


def shallow_copy_check() -> Callable:
    """The check ``Module.to`` makes before swapping a parameter's data in place: it compares
    tensors of two devices without computing on them."""
    return _lookup("torch", "_has_compatible_shallow_copy_type")


def cuda_is_compiled() -> bool:
    """Whether this torch build has CUDA (``torch.cuda.is_available()`` is patched, this is not)."""
    return _lookup("torch.cuda", "_is_compiled")()


def dispatch_mode_base() -> type:
    """The base class of modes that see every ATen operator (below autograd)."""
    return _lookup("torch.utils._python_dispatch", "TorchDispatchMode")


def scatter_gather_module() -> Any:
    """The module whose ``Scatter``/``Gather`` autograd functions ``DataParallel`` calls."""
    _lookup("torch.nn.parallel.scatter_gather", "Scatter")
    return importlib.import_module("torch.nn.parallel.scatter_gather")
