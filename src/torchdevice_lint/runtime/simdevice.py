"""A simulated CUDA device for CPU-only machines ("simcuda").

Code that is portable on a CPU-only machine can still mix devices: a mask built with
``torch.ones(n)`` inside ``forward`` runs fine when everything is on the CPU and crashes on the
first GPU it meets. This module makes a CPU-only machine behave like one with a single CUDA device
so that such bugs surface in CPU-only CI. Tensors stay real CPU tensors (so ``.item()``, autograd,
optimizers and DataLoader work unchanged) and carry a virtual ``cuda:0`` tag set by a
``TorchFunctionMode``:

* moving (``.to("cuda")``, ``.cuda()``, ``Module.to``) and creating (``device="cuda"``) tag
  tensors; ``.cpu()``/``.to("cpu")`` return untagged copies; results inherit their inputs' tag;
* ``x.device``, ``x.is_cuda``, ``x.get_device()`` report the virtual device;
* an operation that combines a tagged tensor with an untagged one of one dimension or more raises
  the ``RuntimeError`` real CUDA raises, ``.numpy()`` on a tagged tensor the ``TypeError``;
* ``torch.cuda``/``torch.accelerator`` report one available device, events and synchronisation
  are host-side stand-ins, and ``torch.load``/``torch.save`` keep the virtual tag of storages.

What real CUDA accepts across devices is modelled on PyTorch's documented rules: 0-dim CPU
tensors combine with device tensors, CPU index tensors may index a device tensor, ``copy_`` and
``.data =`` cross devices. Nothing here models numerics (no fp16 autocast), streams, or memory.

Run a program under it with ``python -m torchdevice_lint.runtime.simdevice program.py [args]``, or use
``with simulated_cuda():`` in-process (the pytest plugin's ``simcuda`` device does the latter).
"""

from __future__ import annotations

import contextlib
import functools
import runpy
import sys
import time
import weakref
from typing import Any, Callable, Dict, Iterator, Optional

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._device import _device_constructors

SIMULATED_TYPE = "cuda"
DEVICE_NAME = "Simulated CUDA (torchdevice-lint, tensors live on the CPU)"
_CPU = torch.device("cpu")
_SIMULATED = torch.device(SIMULATED_TYPE, 0)


class _Tags:
    """Which live tensor objects are on the virtual device. Kept outside the tensors so that
    pickling (``torch.save``, ``deepcopy``) never carries the tag along; an entry goes with its
    tensor."""

    _tagged: "Dict[int, weakref.ref]" = {}

    @classmethod
    def has(cls, tensor: torch.Tensor) -> bool:
        entry = cls._tagged.get(id(tensor))
        return entry is not None and entry() is tensor

    @classmethod
    def add(cls, tensor: torch.Tensor) -> None:
        key = id(tensor)
        cls._tagged[key] = weakref.ref(tensor, lambda _ref: cls._tagged.pop(key, None))

    @classmethod
    def discard(cls, tensor: torch.Tensor) -> None:
        if cls.has(tensor):
            del cls._tagged[id(tensor)]


def simulated_device_of(tensor: torch.Tensor) -> torch.device:
    """The device a tensor has in the simulation: the virtual ``cuda:0`` or the CPU."""
    return _SIMULATED if _Tags.has(tensor) else _CPU


def _set_tag(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    if device.type == SIMULATED_TYPE:
        _Tags.add(tensor)
    else:
        _Tags.discard(tensor)
    return tensor


def _tensors(tree: Any) -> Iterator[torch.Tensor]:
    """The tensors in torch-function arguments or results (nested tuples, lists and dicts);
    cheaper than a pytree flatten, which matters because it runs on every operation."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from _tensors(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from _tensors(item)


def _tag_tree(tree: Any, device: torch.device) -> Any:
    for tensor in _tensors(tree):
        _set_tag(tensor, device)
    return tree


def _resolve(device: Any) -> Optional[torch.device]:
    """A device argument as the simulation sees it; raises what CUDA raises for a bad ordinal."""
    if device is None:
        return None
    if isinstance(device, int):
        device = torch.device(SIMULATED_TYPE, device)
    device = torch.device(device)
    if device.type != SIMULATED_TYPE:
        return device
    if device.index not in (None, 0):
        raise RuntimeError("CUDA error: invalid device ordinal (the simulation has one device)")
    return _SIMULATED


def _same_device_error(first: torch.device, second: torch.device, func: Callable) -> RuntimeError:
    name = getattr(func, "__name__", repr(func))
    return RuntimeError(
        "Expected all tensors to be on the same device, but found at least two devices, "
        f"{first} and {second}! (simulated CUDA, in {name})"
    )


def _inputs_device(func: Callable, tensors) -> Optional[torch.device]:
    """The common device of the tensor inputs, raising like CUDA when they disagree.

    Untagged 0-dim tensors are CPU scalars, which PyTorch lets combine with device tensors."""
    found: Optional[torch.device] = None
    for tensor in tensors:
        device = simulated_device_of(tensor)
        if device == _CPU and tensor.dim() == 0:
            continue
        if found is None:
            found = device
        elif device != found:
            raise _same_device_error(found, device, func)
    return found


_SAVED_POINTERS_ATTRIBUTE = "_torchdevice_lint_simulated_storages"


def _simulated_location(pointers: "set[int]", storage) -> Optional[str]:
    if isinstance(storage, torch.UntypedStorage) and storage.data_ptr() in pointers:
        return str(_SIMULATED)
    return None


def _saved_pointers() -> "set[int]":
    """Storages of tagged tensors in the object a simulated ``torch.save`` is writing, so that
    the file records them at ``cuda:0`` as a GPU machine would.

    torch cannot unregister a location tagger, so one is registered per process and its set is
    kept on ``torch.serialization``, which outlives re-imports of this module (pytester drops
    and re-imports it); the set is empty, and the tagger inert, outside a simulated save."""
    pointers = getattr(torch.serialization, _SAVED_POINTERS_ATTRIBUTE, None)
    if pointers is None:
        pointers = set()
        setattr(torch.serialization, _SAVED_POINTERS_ATTRIBUTE, pointers)
        torch.serialization.register_package(
            1,  # ahead of torch's own cpu tagger (priority 10)
            functools.partial(_simulated_location, pointers),
            lambda storage, location: None,
        )
    return pointers


class SimulatedCudaMode(TorchFunctionMode):
    """Tracks the virtual device of every tensor that passes through a torch function."""

    def __init__(self) -> None:
        super().__init__()
        tensor = torch.Tensor
        self.default_device: Optional[torch.device] = None
        self._factories = _device_constructors()
        self._handlers: Dict[Any, Callable] = {
            tensor.to: self._to,
            tensor.cuda: self._cuda,
            tensor.cpu: self._cpu,
            tensor.numpy: self._numpy,
            tensor.__array__: self._numpy,
            tensor.pin_memory: self._pin_memory,
            tensor.get_device: lambda func, args, kwargs: 0 if _Tags.has(args[0]) else -1,
            tensor.copy_: self._copy,
            tensor.__getitem__: self._getitem,
            tensor.__setitem__: self._setitem,
            tensor.type: self._type,
        }
        # Functions that compare or relate tensors without computing on them together.
        self._cross_device = {torch._has_compatible_shallow_copy_type, tensor.is_set_to}
        self._getters: Dict[str, Callable[[torch.Tensor], Any]] = {
            "device": simulated_device_of,
            "is_cuda": lambda t: _Tags.has(t),
            "is_cpu": lambda t: not _Tags.has(t),
        }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        descriptor = getattr(func, "__self__", None)
        if type(descriptor).__name__ == "getset_descriptor":
            return self._descriptor(func, descriptor.__name__, args, kwargs)
        handler = self._handlers.get(func)
        if handler is not None:
            return handler(func, args, kwargs)
        if func in self._cross_device:
            return func(*args, **kwargs)
        return self._generic(func, args, kwargs)

    def _descriptor(self, func, attribute: str, args, kwargs):
        tensor = args[0]
        if func.__name__ == "__get__" and attribute in self._getters:
            return self._getters[attribute](tensor)
        if func.__name__ == "__set__" and attribute == "data":
            func(*args, **kwargs)
            return _set_tag(tensor, simulated_device_of(args[1]))
        if func.__name__ == "__set__" and attribute == "grad" and args[1] is not None:
            if simulated_device_of(args[1]) != simulated_device_of(tensor):
                raise RuntimeError(
                    "assigned grad has data located on a different device (simulated CUDA)"
                )
        return self._generic(func, args, kwargs)

    def _generic(self, func, args, kwargs):
        if "device" in kwargs:
            explicit = _resolve(kwargs["device"])
        elif self.default_device is not None and func in self._factories:
            explicit = self.default_device
        else:
            explicit = None
        source = _inputs_device(func, _tensors((args, kwargs)))
        if explicit is not None and explicit.type == SIMULATED_TYPE:
            kwargs = dict(kwargs, device=_CPU)
        result = func(*args, **kwargs)
        target = explicit if explicit is not None else source
        return result if target is None else _tag_tree(result, target)

    def _move(self, tensor: torch.Tensor, target: torch.device, dtype=None, copy=False, **options):
        """``tensor`` on ``target``: itself when nothing changes, else a copy with autograd kept."""
        if simulated_device_of(tensor) == target:
            converted = tensor.to(dtype=dtype or tensor.dtype, copy=copy, **options)
        else:
            converted = tensor.to(dtype=dtype or tensor.dtype, copy=True, **options)
        return _set_tag(converted, target) if converted is not tensor else tensor

    def _to(self, func, args, kwargs):
        tensor, rest = args[0], args[1:]
        if rest and isinstance(rest[0], torch.Tensor):
            other = rest[0]
            options = {key: kwargs[key] for key in ("non_blocking", "copy") if key in kwargs}
            return self._move(tensor, simulated_device_of(other), other.dtype, **options)
        kwargs = dict(kwargs)
        copy = kwargs.pop("copy", False)
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*rest, **kwargs)
        target = _resolve(device) or simulated_device_of(tensor)
        options = {"non_blocking": non_blocking, "copy": copy}
        if memory_format is not None:
            options["memory_format"] = memory_format
        return self._move(tensor, target, dtype, **options)

    def _cuda(self, func, args, kwargs):
        device = kwargs.get("device", args[1] if len(args) > 1 else None)
        target = _resolve(SIMULATED_TYPE if device is None else device)
        return self._move(args[0], target, non_blocking=kwargs.get("non_blocking", False))

    def _cpu(self, func, args, kwargs):
        return self._move(args[0], _CPU)

    def _numpy(self, func, args, kwargs):
        if _Tags.has(args[0]):
            raise TypeError(
                "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the "
                "tensor to host memory first. (simulated CUDA)"
            )
        return func(*args, **kwargs)

    def _pin_memory(self, func, args, kwargs):
        if _Tags.has(args[0]):
            raise RuntimeError("cannot pin 'torch.cuda.FloatTensor' only dense CPU tensors can be pinned")
        return args[0].clone()

    def _type(self, func, args, kwargs):
        tensor = args[0]
        requested = kwargs.get("dtype", args[1] if len(args) > 1 else None)
        if requested is None:
            return f"torch.cuda.{_legacy_name(tensor.dtype)}" if _Tags.has(tensor) else func(*args, **kwargs)
        dtype = _legacy_cuda_dtype(requested)
        if dtype is not None:
            return self._move(tensor, _SIMULATED, dtype)
        return self._move(tensor, _CPU, func(tensor.detach()[:0], requested).dtype)

    def _copy(self, func, args, kwargs):
        func(*args, **kwargs)
        return args[0]

    def _getitem(self, func, args, kwargs):
        tensor, index = args[0], args[1]
        # CUDA accepts CPU index tensors (they are copied over); only a tagged index must match.
        tagged_indices = [leaf for leaf in _tensors(index) if _Tags.has(leaf)]
        _inputs_device(func, [tensor] + tagged_indices)
        return _tag_tree(func(*args, **kwargs), simulated_device_of(tensor))

    def _setitem(self, func, args, kwargs):
        tensor, index, value = args
        if isinstance(value, torch.Tensor):
            _inputs_device(func, [tensor, value])
        return func(*args, **kwargs)


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


class _LegacyCudaType(type):
    """``torch.cuda.FloatTensor`` and friends: calling one builds the CPU legacy tensor and tags
    it; ``isinstance`` checks the tag and the dtype."""

    def __call__(cls, *args, **kwargs):
        return _set_tag(getattr(torch, cls.__name__)(*args, **kwargs), _SIMULATED)

    def __instancecheck__(cls, instance) -> bool:
        return isinstance(instance, torch.Tensor) and _Tags.has(instance) and instance.dtype == cls.dtype


def _legacy_cuda_types() -> Dict[str, type]:
    return {
        name: _LegacyCudaType(name, (), {"dtype": dtype, "__module__": "torch.cuda"})
        for name, dtype in _LEGACY_DTYPES.items()
    }


def _legacy_cuda_dtype(tensor_type: Any) -> Optional[torch.dtype]:
    """The dtype of ``torch.cuda.XTensor`` given as the class or its name, else None."""
    if isinstance(tensor_type, _LegacyCudaType):
        return tensor_type.dtype
    if isinstance(tensor_type, str) and tensor_type.startswith("torch.cuda."):
        return _LEGACY_DTYPES.get(tensor_type[len("torch.cuda."):])
    return None


def _legacy_name(dtype: torch.dtype) -> str:
    return next(name for name, known in _LEGACY_DTYPES.items() if known == dtype)


def _simulated_set_default_tensor_type(real: Callable, mode: "SimulatedCudaMode") -> Callable:
    @functools.wraps(real)
    def set_default_tensor_type(tensor_type):
        dtype = _legacy_cuda_dtype(tensor_type)
        if dtype is None:
            mode.default_device = None
            return real(tensor_type)
        torch.set_default_dtype(dtype)
        mode.default_device = _SIMULATED

    return set_default_tensor_type


def _simulated_set_default_device(real: Callable, mode: "SimulatedCudaMode") -> Callable:
    """torch keeps its own default-device mode at the bottom of the mode stack, below the
    simulation, so a simulated default device is applied by the simulation itself."""

    @functools.wraps(real)
    def set_default_device(device):
        resolved = _resolve(device)
        if resolved is not None and resolved.type == SIMULATED_TYPE:
            mode.default_device = _SIMULATED
            return real(None)
        mode.default_device = None
        return real(device)

    return set_default_device


class _SimulatedEvent:
    """``torch.cuda.Event`` measured on the host clock."""

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

    def elapsed_time(self, end_event: "_SimulatedEvent") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self._recorded_at is None or end_event._recorded_at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        return (end_event._recorded_at - self._recorded_at) * 1000.0


class _SimulatedStream:
    """``torch.cuda.Stream``: work is done on the host in order, so there is nothing to wait for."""

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        _check_index(device)
        self.device = _SIMULATED

    def is_capturing(self) -> bool:
        return False

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        """Nothing runs asynchronously in the simulation."""

    def wait_stream(self, stream: "_SimulatedStream") -> None:
        """Nothing runs asynchronously in the simulation."""

    def wait_event(self, event: _SimulatedEvent) -> None:
        """Nothing runs asynchronously in the simulation."""

    def record_event(self, event: Optional[_SimulatedEvent] = None) -> _SimulatedEvent:
        event = event or _SimulatedEvent()
        event.record(self)
        return event


class _SimulatedDeviceContext:
    """``torch.cuda.device(i)``: only device 0 exists."""

    def __init__(self, device: Any) -> None:
        _resolve(device if device is not None else 0)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info) -> None:
        return None


def _noop(*args, **kwargs) -> None:
    """A ``torch.cuda`` call with nothing to do when the device is simulated."""


def _check_index(device: Any = None) -> None:
    _resolve(0 if device is None else device)


def _device_name(device: Any = None) -> str:
    _check_index(device)
    return DEVICE_NAME


def _cuda_patches() -> Dict[str, Any]:
    return {
        **_legacy_cuda_types(),
        "is_available": lambda: True,
        "is_initialized": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "init": _noop,
        "synchronize": lambda device=None: _check_index(device),
        "set_device": _check_index,
        "device": _SimulatedDeviceContext,
        "get_device_name": _device_name,
        "get_device_capability": lambda device=None: (_check_index(device), (8, 0))[1],
        "Event": _SimulatedEvent,
        "Stream": _SimulatedStream,
        "current_stream": _SimulatedStream,
        "default_stream": _SimulatedStream,
        "stream": lambda stream: contextlib.nullcontext(stream),
        "empty_cache": _noop,
        "reset_peak_memory_stats": _check_index,
        "max_memory_allocated": lambda device=None: 0,
        "memory_allocated": lambda device=None: 0,
        "is_bf16_supported": lambda including_emulation=True: False,
        "get_rng_state": lambda device="cuda": torch.get_rng_state(),
        "set_rng_state": lambda state, device="cuda": torch.set_rng_state(state),
    }


def _accelerator_patches() -> Dict[str, Any]:
    return {
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_accelerator": lambda check_available=False: _SIMULATED,
        "current_device_index": lambda: 0,
        "synchronize": lambda device=None: _check_index(device),
        "set_device_index": _check_index,
        "current_stream": _SimulatedStream,
        "empty_cache": _noop,
    }


def _saved_tensors(obj: Any) -> Iterator[torch.Tensor]:
    """The tensors ``torch.save``/``torch.load`` handle: those in nested containers, and the
    parameters and buffers of modules among them."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            yield item
        elif isinstance(item, torch.nn.Module):
            yield from item.parameters()
            yield from item.buffers()
        elif isinstance(item, (tuple, list)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _simulated_save(real_save: Callable) -> Callable:
    @functools.wraps(real_save)
    def save(obj, f, *args, **kwargs):
        pointers = _saved_pointers()
        pointers.update(
            tensor.untyped_storage().data_ptr() for tensor in _saved_tensors(obj) if _Tags.has(tensor)
        )
        try:
            return real_save(obj, f, *args, **kwargs)
        finally:
            pointers.clear()

    return save


def _simulated_load(real_load: Callable) -> Callable:
    """``torch.load`` that restores ``cuda`` storages as tagged CPU tensors instead of calling the
    CUDA deserialiser a CPU build lacks; ``map_location`` given as a device, string or dict is
    honoured, a callable one is passed through unchanged."""

    @functools.wraps(real_load)
    def load(f, map_location=None, *args, **kwargs):
        if callable(map_location):
            return real_load(f, map_location, *args, **kwargs)
        simulated_pointers = set()

        def restore(storage, location: str):
            if isinstance(map_location, dict):
                target = map_location.get(location, location)
            else:
                target = location if map_location is None else map_location
            if _resolve(target).type == SIMULATED_TYPE:
                simulated_pointers.add(storage.data_ptr())
            return storage

        result = real_load(f, restore, *args, **kwargs)
        for tensor in _saved_tensors(result):
            if tensor.untyped_storage().data_ptr() in simulated_pointers:
                _set_tag(tensor, _SIMULATED)
        return result

    return load


@contextlib.contextmanager
def _patched(module: Any, replacements: Dict[str, Any]) -> Iterator[None]:
    originals = {name: getattr(module, name) for name in replacements}
    try:
        for name, value in replacements.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in originals.items():
            setattr(module, name, value)


@contextlib.contextmanager
def simulated_cuda() -> Iterator[torch.device]:
    """Make this process look like a machine with one CUDA device; yields that device."""
    if torch.cuda._is_compiled() and torch.cuda.device_count() > 0:
        raise RuntimeError("a real CUDA device is present; simulating one would hide it")
    mode = SimulatedCudaMode()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_patched(torch.cuda, _cuda_patches()))
        stack.enter_context(_patched(torch.accelerator, _accelerator_patches()))
        stack.enter_context(
            _patched(
                torch,
                {
                    "load": _simulated_load(torch.load),
                    "save": _simulated_save(torch.save),
                    "set_default_tensor_type": _simulated_set_default_tensor_type(
                        torch.set_default_tensor_type, mode
                    ),
                    "set_default_device": _simulated_set_default_device(torch.set_default_device, mode),
                },
            )
        )
        stack.enter_context(mode)
        yield _SIMULATED


def main(argv=None) -> int:
    """``python -m torchdevice_lint.runtime.simdevice program.py [args...]``: run a program as
    ``__main__`` on the simulated device."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print("usage: python -m torchdevice_lint.runtime.simdevice PROGRAM.py [ARGS...]", file=sys.stderr)
        return 2
    sys.argv = argv
    with simulated_cuda():
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
