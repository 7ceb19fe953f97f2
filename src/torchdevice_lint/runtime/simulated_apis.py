"""Host-side stand-ins for the backend modules a simulated device answers for: ``torch.cuda``
and the legacy ``torch.cuda.FloatTensor`` types for the simulated CUDA device, ``torch.mps`` and
``torch.backends.mps`` for the simulated MPS device, and ``torch.accelerator`` for both.

Nothing runs asynchronously in a simulation, so events measure the host clock, streams and
synchronisation have nothing to wait for, and memory counters read zero.
"""

from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import torch

from .simulated import CPU, SimulatedDeviceMode, Simulation


class SimulatedEvent:
    """``torch.cuda.Event``/``torch.mps.Event`` measured on the host clock."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.enable_timing = enable_timing
        self._recorded_at: Optional[float] = None

    def record(self, stream=None) -> None:
        self._recorded_at = time.perf_counter()

    def synchronize(self) -> None:
        """Host-side work is already finished when Python gets here."""

    def wait(self, stream=None) -> None:
        """Nothing runs asynchronously in the simulation."""

    def query(self) -> bool:
        return self._recorded_at is not None

    def elapsed_time(self, end_event: "SimulatedEvent") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._recorded_at - self._recorded_at) * 1000.0


def _stream_type(simulation: Simulation) -> type:
    class SimulatedStream:
        """``torch.cuda.Stream``: work is done on the host in order, so there is nothing to wait for."""

        def __init__(self, device: Any = None, priority: int = 0) -> None:
            simulation.check_index(device)
            self.device = simulation.device

        def is_capturing(self) -> bool:
            return False

        def query(self) -> bool:
            return True

        def synchronize(self) -> None:
            """Nothing runs asynchronously in the simulation."""

        def wait_stream(self, stream: "SimulatedStream") -> None:
            """Nothing runs asynchronously in the simulation."""

        def wait_event(self, event: SimulatedEvent) -> None:
            """Nothing runs asynchronously in the simulation."""

        def record_event(self, event: Optional[SimulatedEvent] = None) -> SimulatedEvent:
            event = event or SimulatedEvent()
            event.record(self)
            return event

    return SimulatedStream


@dataclass(frozen=True)
class SimulatedDeviceProperties:
    """``torch.cuda.get_device_properties``: an A100-class device (compute capability 8.0, so
    bfloat16 and TF32 are supported), the figures of an A100 40GB."""

    name: str
    major: int = 8
    minor: int = 0
    total_memory: int = 40 * 1024**3
    multi_processor_count: int = 108
    is_integrated: bool = False
    is_multi_gpu_board: bool = False
    warp_size: int = 32
    max_threads_per_multi_processor: int = 2048
    regs_per_multiprocessor: int = 65536
    shared_memory_per_block: int = 48 * 1024
    shared_memory_per_block_optin: int = 163 * 1024
    shared_memory_per_multiprocessor: int = 164 * 1024
    L2_cache_size: int = 40 * 1024**2


SIMULATED_CUDA_VERSION = "12.8"  # what torch.version.cuda reads under simcuda (a CUDA build)
SIMULATED_CUDNN_VERSION = 91000


def generator_type(simulation: Simulation) -> type:
    """``torch.Generator`` that can be created on the simulated device. Its numbers come from the
    CPU algorithm; random functions check its device against their output's, as torch does."""

    real_generator = torch.Generator

    class Generator(real_generator):
        def __new__(cls, device: Any = "cpu"):
            resolved = simulation.resolve(device) or CPU
            if resolved.type not in (CPU.type, simulation.backend.type):
                return real_generator(device=resolved)  # raises what this build raises
            generator = super().__new__(cls)
            generator.simulated_device = resolved
            return generator

        def __init__(self, device: Any = "cpu") -> None:
            """The CPU generator under it is made by ``__new__``."""

        @property
        def device(self) -> torch.device:
            return self.simulated_device

    Generator.__module__, Generator.__qualname__ = "torch", "Generator"
    return Generator


def _noop() -> Callable[..., None]:
    """A backend call with nothing to do when the device is simulated. Each patched name gets
    its own function: torch._dynamo maps every torch function object to one tracing rule and
    fails on an object found under two names."""

    def nothing(*args, **kwargs) -> None:
        return None

    return nothing


def _device_type(simulation: Simulation) -> type:
    class device:
        """``torch.cuda.device(i)``: a class, as torch's own functions check ``isinstance`` against
        it; only device 0 exists (-1 or None select nothing, as in torch)."""

        def __init__(self, index: Any) -> None:
            if index not in (None, -1):
                simulation.check_index(index)
            self.idx = 0

        def __enter__(self) -> "device":
            return self

        def __exit__(self, *exception: Any) -> bool:
            return False

    device.__module__ = "torch.cuda"
    return device


def _zero_memory_stats(device: Any = None) -> Dict[str, int]:
    """``torch.cuda.memory_stats``: every counter reads zero, whichever key a program asks for."""
    return collections.defaultdict(int)


_LEGACY_DTYPES = {
    "FloatTensor": torch.float32,
    "DoubleTensor": torch.float64,
    "HalfTensor": torch.float16,
    "BFloat16Tensor": torch.bfloat16,
    "ByteTensor": torch.uint8,
    "CharTensor": torch.int8,
    "ShortTensor": torch.int16,
    "IntTensor": torch.int32,
    "LongTensor": torch.int64,
    "BoolTensor": torch.bool,
}


class LegacyCudaType(type):
    """``torch.cuda.FloatTensor`` and friends: calling one builds the CPU legacy tensor and tags
    it; ``isinstance`` checks the tag and the dtype."""

    simulation: Simulation

    def __call__(cls, *args, **kwargs):
        return cls.simulation.set_tag(getattr(torch, cls.__name__)(*args, **kwargs), cls.simulation.device)

    def __instancecheck__(cls, instance) -> bool:
        return (
            isinstance(instance, torch.Tensor)
            and cls.simulation.is_tagged(instance)
            and instance.dtype == cls.dtype
        )


def _legacy_cuda_types(simulation: Simulation) -> Dict[str, type]:
    return {
        name: LegacyCudaType(
            name, (), {"dtype": dtype, "simulation": simulation, "__module__": "torch.cuda"}
        )
        for name, dtype in _LEGACY_DTYPES.items()
    }


def legacy_cuda_dtype(tensor_type: Any) -> Optional[torch.dtype]:
    """The dtype of ``torch.cuda.XTensor`` given as the class or its name, else None."""
    if isinstance(tensor_type, LegacyCudaType):
        return tensor_type.dtype
    if isinstance(tensor_type, str) and tensor_type.startswith("torch.cuda."):
        return _LEGACY_DTYPES.get(tensor_type[len("torch.cuda."):])
    return None


def _legacy_name(dtype: torch.dtype) -> str:
    return next(name for name, known in _LEGACY_DTYPES.items() if known == dtype)


def tensor_type(mode: SimulatedDeviceMode, func, args, kwargs):
    """``Tensor.type()``: the name a tensor on the device has (``torch.cuda.FloatTensor``,
    ``torch.mps.FloatTensor``); ``.type(torch.cuda.XTensor)`` moves to the simulated CUDA device,
    a CPU type moves to the CPU."""
    tensor, simulation = args[0], mode.simulation
    requested = kwargs.get("dtype", args[1] if len(args) > 1 else None)
    if requested is None:
        if simulation.is_tagged(tensor):
            return f"torch.{simulation.backend.type}.{_legacy_name(tensor.dtype)}"
        return func(*args, **kwargs)
    dtype = legacy_cuda_dtype(requested)
    if dtype is not None and simulation.backend.type == "cuda":
        return mode.move(tensor, simulation.device, dtype)
    if dtype is not None:
        return func(tensor, requested)  # raises as on a machine without CUDA
    return mode.move(tensor, CPU, func(torch.empty(0, dtype=tensor.dtype), requested).dtype)


def tensor_cuda(mode: SimulatedDeviceMode, func, args, kwargs):
    """``Tensor.cuda(device=None)`` onto the simulated CUDA device."""
    device = kwargs.get("device", args[1] if len(args) > 1 else None)
    target = mode.simulation.resolve("cuda" if device is None else device)
    return mode.move(args[0], target, non_blocking=kwargs.get("non_blocking", False))


def tensor_cuda_missing(mode: SimulatedDeviceMode, func, args, kwargs):
    """``Tensor.cuda()`` where there is no CUDA (the simulated MPS device, on a Mac)."""
    raise AssertionError("Torch not compiled with CUDA enabled")


def _properties_getter(simulation: Simulation) -> Callable[..., SimulatedDeviceProperties]:
    properties = SimulatedDeviceProperties(name=simulation.backend.label)

    def get_device_properties(device: Any = None) -> SimulatedDeviceProperties:
        simulation.check_index(device)
        return properties

    return get_device_properties


def cuda_patches(simulation: Simulation) -> Dict[str, Any]:
    """``torch.cuda`` of a machine with one CUDA device."""
    check = simulation.check_index
    stream = _stream_type(simulation)
    properties = _properties_getter(simulation)
    return {
        **_legacy_cuda_types(simulation),
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "init": _noop(),
        "synchronize": lambda device=None: check(device),
        "set_device": lambda device: check(device),
        "device": _device_type(simulation),
        "get_device_name": lambda device=None: (check(device), simulation.backend.label)[1],
        "get_device_properties": properties,
        "get_device_capability": lambda device=None: (properties(device).major, properties(device).minor),
        "mem_get_info": lambda device=None: (properties(device).total_memory,) * 2,
        "get_arch_list": lambda: ["sm_80"],
        "Event": SimulatedEvent,
        "Stream": stream,
        "current_stream": lambda device=None: stream(device),
        "default_stream": lambda device=None: stream(device),
        "stream": lambda stream: contextlib.nullcontext(stream),
        "empty_cache": _noop(),
        "reset_peak_memory_stats": lambda device=None: check(device),
        "max_memory_allocated": lambda device=None: 0,
        "memory_allocated": lambda device=None: 0,
        "memory_reserved": lambda device=None: 0,
        "memory_stats": _zero_memory_stats,
        "memory_summary": lambda device=None, abbreviated=False: f"{simulation.backend.label}: no memory is allocated",
        "reset_max_memory_allocated": lambda device=None: check(device),
        "reset_accumulated_memory_stats": lambda device=None: check(device),
        "reset_max_memory_cached": lambda device=None: check(device),
        "get_per_process_memory_fraction": lambda device=None: 1.0,
        "set_per_process_memory_fraction": lambda fraction, device=None: check(device),
        "is_current_stream_capturing": lambda: False,
        "is_bf16_supported": lambda including_emulation=True: True,
        # Random numbers on the simulated device come from the CPU generator, which
        # torch.manual_seed seeds; seeding "the device" changes nothing else, as on a GPU.
        "manual_seed": _noop(),
        "manual_seed_all": _noop(),
        "seed": _noop(),
        "seed_all": _noop(),
        "initial_seed": lambda: torch.initial_seed(),
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cuda": torch.set_rng_state(state),
        "get_rng_state_all": lambda: [torch.get_rng_state()],
        "set_rng_state_all": lambda states: torch.set_rng_state(states[0]),
    }


def cuda_build_patches() -> Dict[Any, Dict[str, Any]]:
    """What a CUDA build of torch says about itself, by module."""
    return {
        torch.version: {"cuda": SIMULATED_CUDA_VERSION},
        torch.backends.cuda: {"is_built": lambda: True},
        torch.backends.cudnn: {"is_available": lambda: True, "version": lambda: SIMULATED_CUDNN_VERSION},
    }


def cuda_absent_patches() -> Dict[str, Any]:
    """``torch.cuda`` of a machine without CUDA, even when this one has a GPU."""
    return {"is_available": lambda: False, "device_count": lambda: 0}


def mps_patches(simulation: Simulation) -> Dict[str, Any]:
    """``torch.mps`` of an Apple-silicon Mac."""
    return {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "synchronize": _noop(),
        "empty_cache": _noop(),
        "manual_seed": _noop(),
        "seed": _noop(),
        "get_rng_state": lambda device="mps": torch.get_rng_state(),
        "set_rng_state": lambda state, device="mps": torch.set_rng_state(state),
        "current_allocated_memory": lambda: 0,
        "driver_allocated_memory": lambda: 0,
        "recommended_max_memory": lambda: 0,
        "set_per_process_memory_fraction": _noop(),
        "Event": SimulatedEvent,
    }


def mps_backend_patches() -> Dict[str, Any]:
    """``torch.backends.mps``: built and available."""
    patches: Dict[str, Any] = {"is_available": lambda: True, "is_built": lambda: True}
    if hasattr(torch.backends.mps, "is_macos_or_newer"):
        patches["is_macos_or_newer"] = lambda major, minor: True
    return patches


def accelerator_patches(simulation: Simulation) -> Dict[str, Any]:
    """``torch.accelerator`` with the simulated device as the current accelerator."""
    check = simulation.check_index
    return {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_accelerator": lambda check_available=False: simulation.device,
        "current_device_index": lambda: 0,
        "synchronize": lambda device=None: check(device),
        "set_device_index": lambda device: check(device),
        "current_stream": lambda device=None: _stream_type(simulation)(device),
        "empty_cache": _noop(),
    }
