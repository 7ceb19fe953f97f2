"""The backends torch runs on, one table: device type, the hardware it needs (for messages), how
a program checks for it, whether tensors have a method that moves them there, and the collective
backend that only runs on it. Every rule, guard reader and the inference read it from here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional


@dataclass(frozen=True)
class Backend:
    #: The device type: ``torch.device(name)``, ``"name:0"``, ``x.is_<name>``.
    name: str
    #: What the backend needs, as messages name it.
    hardware: str
    #: Where it is missing, as messages name it.
    missing: str
    #: The availability check, ``{t}`` standing for how the file spells ``torch``; None where
    #: torch itself has none (XLA).
    availability: Optional[str]
    #: Tensors and modules have ``.<name>()`` moving them there.
    device_method: bool = False
    #: The ``torch.distributed`` backend that runs only on this device (measured on CPU-only torch
    #: 2.13: "Distributed package doesn't have NCCL/XCCL built in", "Unknown backend type hccl"),
    #: and its display name.
    collective: Optional[str] = None
    collective_name: str = ""
    #: The devices it runs on, for the collective's message.
    devices: str = ""


BACKENDS: Dict[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend("cuda", "CUDA (an NVIDIA GPU)", "without CUDA (CPU-only, a Mac)", "{t}.cuda.is_available()",
                device_method=True, collective="nccl", collective_name="NCCL", devices="CUDA GPUs"),
        Backend("mps", "MPS (Apple silicon)", "without MPS (anything but an Apple-silicon Mac)",
                "{t}.backends.mps.is_available()"),
        # ``torch.npu`` and ``torch.hpu`` exist only once their vendor package is imported.
        Backend("xpu", "XPU (an Intel GPU)", "without XPU (an Intel GPU)", "{t}.xpu.is_available()",
                device_method=True, collective="xccl", collective_name="XCCL", devices="Intel GPUs"),
        Backend("npu", "NPU (Ascend, torch_npu)", "without an Ascend NPU", 'hasattr({t}, "npu") and {t}.npu.is_available()',
                device_method=True, collective="hccl", collective_name="HCCL", devices="Ascend NPUs"),
        Backend("hpu", "HPU (Intel Gaudi)", "without an Intel Gaudi HPU", 'hasattr({t}, "hpu") and {t}.hpu.is_available()',
                device_method=True),
        Backend("xla", "XLA (a TPU, torch_xla)", "without XLA (a TPU)", None),
    )
}
#: ``torch.accelerator``: whichever accelerator the machine has.
ACCELERATOR = Backend("accelerator", "an accelerator", "on a machine without any accelerator", "{t}.accelerator.is_available()")

#: The modules of the accelerators' own APIs: torch's (``torch.cuda``, ``torch.mps``, ``torch.xpu``,
#: ``torch.mtia``) and those an out-of-tree backend registers (``torch.npu``, ``torch.hpu``, torch_musa's
#: ``torch.musa``, Rebellions' ``torch.rbln``, AWS Neuron's ``torch.neuron``). XLA's is torch_xla's own.
ACCELERATOR_MODULES = tuple(f"torch.{name}" for name in BACKENDS if name != "xla") + (
    "torch.mtia", "torch.musa", "torch.rbln", "torch.neuron",
)
#: Those and ``torch.cpu``: every module a project may confine to its platform layer (TDV905).
DEVICE_MODULES = ACCELERATOR_MODULES + ("torch.cpu",)
#: The device types other than CUDA, with the hardware each needs.
OTHER_BACKENDS: Dict[str, str] = {name: backend.hardware for name, backend in BACKENDS.items() if name != "cuda"}
#: ``x.xpu()`` and friends (``.cuda()`` has rules of its own).
DEVICE_METHODS = tuple(name for name, backend in BACKENDS.items() if backend.device_method and name != "cuda")
#: ``x.is_mps`` and friends: true only for a tensor that is on that accelerator.
BACKEND_TENSOR_FLAGS = frozenset(f"is_{name}" for name in OTHER_BACKENDS)
#: Collective backend -> the backend whose devices it needs (``"nccl"`` -> CUDA).
COLLECTIVES: Dict[str, Backend] = {backend.collective: backend for backend in BACKENDS.values() if backend.collective}
#: Device types a program may name for "the GPU" (``"gpu"`` is no torch device, but code says it).
ACCELERATOR_DEVICE_TYPES = frozenset(BACKENDS) | {"gpu"}


def backend_of_device_string(value: Optional[str]) -> Optional[str]:
    """``"mps"``, ``"xpu:1"`` -> the backend named; None for CUDA, the CPU and anything else."""
    if not value:
        return None
    backend, _, index = value.partition(":")
    if backend in OTHER_BACKENDS and (not index or index.isdigit()):
        return backend
    return None


def availability_expression(backend: str, torch_name: str = "torch") -> Optional[str]:
    """How a program checks that ``backend`` (or ``"accelerator"``) is there, or None."""
    entry = ACCELERATOR if backend == ACCELERATOR.name else BACKENDS.get(backend)
    return entry.availability.format(t=torch_name) if entry and entry.availability else None


def missing_text(backend: str) -> str:
    """Where ``backend``'s calls raise, for messages."""
    return (ACCELERATOR if backend == ACCELERATOR.name else BACKENDS[backend]).missing
