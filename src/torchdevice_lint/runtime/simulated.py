"""The core of the simulated devices: which tensors are on the virtual device, and a
``TorchFunctionMode`` that keeps that tag through every operation and raises what the real
device raises.

Tensors stay real CPU tensors (so ``.item()``, autograd, optimizers and DataLoader work unchanged).
A tensor is on the virtual device when its storage was tagged: a wrapper that builds a new tensor
object on the same storage (``Variable(x)``, ``nn.Parameter(x)``, ``x.data``) is on the device
its storage is on, as on a real device.

Which device is simulated (``cuda`` or ``mps``), and what it refuses, is a :class:`Backend`;
:mod:`.simulated_apis` builds the ``torch.cuda``/``torch.mps`` stand-ins and
:mod:`.simdevice` puts the two together.

What real devices accept across devices is modelled on PyTorch's documented rules: 0-dim CPU
tensors combine with device tensors, CPU index tensors may index a device tensor, ``copy_`` and
``.data =`` cross devices.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode

from . import torch_internals

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Backend:
    """A simulated device: its torch type, the leg name, and the dtypes it refuses with the
    exception the real device raises."""

    leg: str
    type: str
    label: str
    refused_dtypes: Dict[torch.dtype, Tuple[type, str]] = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return torch.device(self.type, 0)


class _Tags:
    """Which storages are on the virtual device. A tensor is where its storage is, as on a real
    device, so a new tensor object on a tagged storage (``Variable(x)``, ``nn.Parameter(x)``,
    ``x.data``) is on the device even after the tensor that was tagged is gone. torch keeps one
    Python object per storage for as long as the storage lives, so a weak reference to it ends
    with the storage. Tensors without a storage (sparse...) are tagged themselves.

    Kept outside the tensors so that pickling (``torch.save``, ``deepcopy``) never carries the
    tag along."""

    _tagged: "Dict[int, weakref.ref]" = {}

    @classmethod
    def has(cls, tensor: torch.Tensor) -> bool:
        owner = _storage_of(tensor)
        entry = cls._tagged.get(id(owner))
        return entry is not None and entry() is owner

    @classmethod
    def add(cls, tensor: torch.Tensor) -> None:
        owner = _storage_of(tensor)
        key = id(owner)

        def forget(reference: weakref.ref) -> None:
            if cls._tagged.get(key) is reference:
                del cls._tagged[key]

        cls._tagged[key] = weakref.ref(owner, forget)

    @classmethod
    def discard(cls, tensor: torch.Tensor) -> None:
        if cls.has(tensor):
            del cls._tagged[id(_storage_of(tensor))]

    @classmethod
    def clear(cls) -> None:
        cls._tagged.clear()


def forget_all_tags() -> None:
    """Forget every tag: a simulation starts and ends with all tensors on the CPU, so that a
    tensor tagged under one simulated device is not taken to be on the next one."""
    _Tags.clear()


def _storage_of(tensor: torch.Tensor) -> Any:
    """The storage object under ``tensor``, or the tensor itself when it has none (sparse...)."""
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return tensor


def tensors_in(tree: Any) -> Iterator[torch.Tensor]:
    """The tensors in torch-function arguments or results (nested tuples, lists and dicts);
    cheaper than a pytree flatten, which matters because it runs on every operation."""
    if isinstance(tree, torch.Tensor):
        yield tree
    elif isinstance(tree, (tuple, list)):
        for item in tree:
            yield from tensors_in(item)
    elif isinstance(tree, dict):
        for item in tree.values():
            yield from tensors_in(item)


class Simulation:
    """One active simulated device: tags tensors, resolves device arguments, checks dtypes."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.device = backend.device
        self.placements = 0  # tensors put on the virtual device: did the program use it at all?

    def is_tagged(self, tensor: torch.Tensor) -> bool:
        return _Tags.has(tensor)

    def device_of(self, tensor: torch.Tensor) -> torch.device:
        """The device a tensor has in the simulation: the virtual device or the CPU."""
        return self.device if _Tags.has(tensor) else CPU

    def set_tag(self, tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        if device.type == self.backend.type:
            refusal = self.backend.refused_dtypes.get(tensor.dtype)
            if refusal is not None:
                error, message = refusal
                raise error(message)
            self.placements += 1
            _Tags.add(tensor)
        else:
            _Tags.discard(tensor)
        return tensor

    def tag_tree(self, tree: Any, device: torch.device) -> Any:
        for tensor in tensors_in(tree):
            self.set_tag(tensor, device)
        return tree

    def resolve(self, device: Any) -> Optional[torch.device]:
        """A device argument as the simulation sees it; raises for a bad ordinal like the
        device does (an int is an index on the simulated device)."""
        if device is None:
            return None
        if isinstance(device, int):
            device = torch.device(self.backend.type, device)
        device = torch.device(device)
        if device.type != self.backend.type:
            return device
        if device.index not in (None, 0):
            raise RuntimeError(
                f"{self.backend.type.upper()} error: invalid device ordinal "
                f"(the {self.backend.label} has one device)"
            )
        return self.device

    def check_index(self, device: Any = None) -> None:
        self.resolve(0 if device is None else device)

    def same_device_error(self, first: torch.device, second: torch.device, func: Callable) -> RuntimeError:
        name = getattr(func, "__name__", repr(func))
        return RuntimeError(
            "Expected all tensors to be on the same device, but found at least two devices, "
            f"{first} and {second}! ({self.backend.label}, in {name})"
        )

    def inputs_device(self, func: Callable, tensors) -> Optional[torch.device]:
        """The common device of the tensor inputs, raising like the device when they disagree.

        Untagged 0-dim tensors are CPU scalars, which PyTorch lets combine with device tensors."""
        found: Optional[torch.device] = None
        for tensor in tensors:
            device = self.device_of(tensor)
            if device == CPU and tensor.dim() == 0:
                continue
            if found is None:
                found = device
            elif device != found:
                raise self.same_device_error(found, device, func)
        return found

    def check_generator(self, generator: Any, target: Optional[torch.device]) -> None:
        """Random numbers for a device come from a generator of that device, as on real hardware
        (a CUDA generator handed to ``DataLoader``'s CPU ``randperm`` raises too)."""
        expected, found = (target or CPU).type, generator.device.type
        if found != expected:
            raise RuntimeError(f"Expected a '{expected}' device type for generator but found '{found}'")


class SimulatedDeviceMode(TorchFunctionMode):
    """Tracks the virtual device of every tensor that passes through a torch function.

    ``extra_handlers`` take over particular functions (``Tensor.cuda``, ``Tensor.type``) for
    one backend; each is called as ``handler(mode, func, args, kwargs)``."""

    def __init__(self, simulation: Simulation, extra_handlers: Optional[Dict[Any, Callable]] = None) -> None:
        super().__init__()
        tensor = torch.Tensor
        self.simulation = simulation
        self.default_device: Optional[torch.device] = None
        self._factories = torch_internals.device_constructors()
        self._handlers: Dict[Any, Callable] = {
            tensor.to: self._to,
            tensor.cpu: self._cpu,
            tensor.numpy: self._numpy,
            tensor.__array__: self._numpy,
            tensor.get_device: lambda func, args, kwargs: 0 if simulation.is_tagged(args[0]) else -1,
            tensor.copy_: self._copy,
            tensor.__getitem__: self._getitem,
            tensor.__setitem__: self._setitem,
            # These read only the other tensor's size, so its device does not matter.
            tensor.expand_as: self._sized_like,
            tensor.view_as: self._sized_like,
            tensor.reshape_as: self._sized_like,
            tensor.type_as: self._type_as,
        }
        for func, handler in (extra_handlers or {}).items():
            self._handlers[func] = functools.partial(handler, self)
        # Functions that compare or relate tensors without computing on them together.
        self._cross_device = {torch_internals.shallow_copy_check(), tensor.is_set_to, tensor.untyped_storage}
        device_type = simulation.backend.type
        self._getters: Dict[str, Callable[[torch.Tensor], Any]] = {
            "device": simulation.device_of,
            f"is_{device_type}": simulation.is_tagged,
            "is_cpu": lambda t: not simulation.is_tagged(t),
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
        return self.generic(func, args, kwargs)

    def _descriptor(self, func, attribute: str, args, kwargs):
        tensor, simulation = args[0], self.simulation
        if func.__name__ == "__get__" and attribute in self._getters:
            return self._getters[attribute](tensor)
        if func.__name__ == "__set__" and attribute == "data":
            func(*args, **kwargs)
            return simulation.set_tag(tensor, simulation.device_of(args[1]))
        if func.__name__ == "__set__" and attribute == "grad" and args[1] is not None:
            if simulation.device_of(args[1]) != simulation.device_of(tensor):
                raise RuntimeError(f"assigned grad has data located on a different device ({simulation.backend.label})")
        return self.generic(func, args, kwargs)

    def generic(self, func, args, kwargs):
        """Run ``func`` on the CPU and tag its results with the device it would have run on."""
        simulation = self.simulation
        if "device" in kwargs:
            explicit = simulation.resolve(kwargs["device"])
        elif self.default_device is not None and func in self._factories:
            explicit = self.default_device
        else:
            explicit = None
        source = simulation.inputs_device(func, tensors_in((args, kwargs)))
        if explicit is not None and explicit.type == simulation.backend.type:
            kwargs = dict(kwargs, device=CPU)
        target = explicit if explicit is not None else source
        if kwargs.get("generator") is not None:
            simulation.check_generator(kwargs["generator"], target)
        result = func(*args, **kwargs)
        return result if target is None else simulation.tag_tree(result, target)

    def move(self, tensor: torch.Tensor, target: torch.device, dtype=None, copy=False, **options):
        """``tensor`` on ``target``: itself when nothing changes, else a copy with autograd kept."""
        simulation = self.simulation
        if target.type not in (CPU.type, simulation.backend.type):
            # A device this build lacks (``.to("cuda")`` under the simulated MPS device)
            # raises what this build raises; ``meta`` works as usual.
            return tensor.to(target, dtype=dtype or tensor.dtype, copy=copy, **options)
        if simulation.device_of(tensor) == target:
            converted = tensor.to(dtype=dtype or tensor.dtype, copy=copy, **options)
        else:
            converted = tensor.to(dtype=dtype or tensor.dtype, copy=True, **options)
        if converted is tensor:
            return tensor
        return simulation.set_tag(converted, target)

    def _to(self, func, args, kwargs):
        tensor, rest = args[0], args[1:]
        if rest and isinstance(rest[0], torch.Tensor):
            other = rest[0]
            options = {key: kwargs[key] for key in ("non_blocking", "copy") if key in kwargs}
            return self.move(tensor, self.simulation.device_of(other), other.dtype, **options)
        kwargs = dict(kwargs)
        copy = kwargs.pop("copy", False)
        device, dtype, non_blocking, memory_format = torch_internals.parse_to(*rest, **kwargs)
        target = self.simulation.resolve(device) or self.simulation.device_of(tensor)
        options = {"non_blocking": non_blocking, "copy": copy}
        if memory_format is not None:
            options["memory_format"] = memory_format
        return self.move(tensor, target, dtype, **options)

    def _cpu(self, func, args, kwargs):
        return self.move(args[0], CPU)

    def _numpy(self, func, args, kwargs):
        if self.simulation.is_tagged(args[0]):
            raise TypeError(
                f"can't convert {self.simulation.device} device type tensor to numpy. Use Tensor.cpu() "
                f"to copy the tensor to host memory first. ({self.simulation.backend.label})"
            )
        return func(*args, **kwargs)

    def _sized_like(self, func, args, kwargs):
        return self.simulation.tag_tree(func(*args, **kwargs), self.simulation.device_of(args[0]))

    def _type_as(self, func, args, kwargs):
        """``a.type_as(b)`` is ``a.to(b.options())``: b's dtype and device."""
        other = args[1]
        return self.move(args[0], self.simulation.device_of(other), other.dtype)

    def _copy(self, func, args, kwargs):
        func(*args, **kwargs)
        return args[0]

    def _getitem(self, func, args, kwargs):
        tensor, index = args[0], args[1]
        # Devices accept CPU index tensors (they are copied over); only a tagged index must match.
        tagged_indices = [leaf for leaf in tensors_in(index) if self.simulation.is_tagged(leaf)]
        self.simulation.inputs_device(func, [tensor] + tagged_indices)
        return self.simulation.tag_tree(func(*args, **kwargs), self.simulation.device_of(tensor))

    def _setitem(self, func, args, kwargs):
        tensor, index, value = args
        if isinstance(value, torch.Tensor):
            self.simulation.inputs_device(func, [tensor, value])
        return func(*args, **kwargs)


def simulated_pin_memory(simulation: Simulation) -> Callable:
    """``Tensor.pin_memory`` under a simulation: a device tensor is refused as torch refuses it,
    a CPU tensor is copied (this build cannot pin). It replaces the method itself rather than
    going through the mode, because ``DataLoader(pin_memory=True)`` pins in a thread of its own,
    where the thread-local mode is not active."""

    def pin_memory(tensor: torch.Tensor, device: Any = None) -> torch.Tensor:
        if simulation.is_tagged(tensor):
            scalar = torch.empty(0, dtype=tensor.dtype).type()[len("torch.") : -len("Tensor")]
            device_type = simulation.backend.type.upper()
            raise RuntimeError(
                f"cannot pin '{device_type}{scalar}Type' only dense CPU tensors can be pinned "
                f"({simulation.backend.label})"
            )
        return tensor.clone()

    return pin_memory
