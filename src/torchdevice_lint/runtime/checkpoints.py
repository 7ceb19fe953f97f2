"""``torch.save`` and ``torch.load`` on a simulated device: a checkpoint records the location a
real device would (``cuda:0``, ``mps:0``) and loads back onto the simulated device, and a
checkpoint of another device fails as it would on the simulated machine."""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, Iterator, Optional

import torch

from .simulated import Simulation

_SAVED_POINTERS_ATTRIBUTE = "_torchdevice_lint_simulated_storages"


def _simulated_location(pointers: "Dict[int, str]", storage) -> Optional[str]:
    if isinstance(storage, torch.UntypedStorage):
        return pointers.get(storage.data_ptr())
    return None


def _saved_pointers() -> "Dict[int, str]":
    """Storages of tagged tensors in the object a simulated ``torch.save`` is writing, with the
    location a real device would record (``cuda:0``, ``mps:0``).

    torch cannot unregister a location tagger, so one is registered per process and its mapping
    is kept on ``torch.serialization``, which outlives re-imports of this module (pytester drops
    and re-imports it); the mapping is empty, and the tagger inert, outside a simulated save."""
    pointers = getattr(torch.serialization, _SAVED_POINTERS_ATTRIBUTE, None)
    if pointers is None:
        pointers = {}
        setattr(torch.serialization, _SAVED_POINTERS_ATTRIBUTE, pointers)
        torch.serialization.register_package(
            1,  # ahead of torch's own cpu tagger (priority 10)
            functools.partial(_simulated_location, pointers),
            lambda storage, location: None,
        )
    return pointers


def saved_tensors(obj: Any) -> Iterator[torch.Tensor]:
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


def simulated_save(simulation: Simulation, real_save: Callable) -> Callable:
    @functools.wraps(real_save)
    def save(obj, f, *args, **kwargs):
        pointers = _saved_pointers()
        location = str(simulation.device)
        pointers.update(
            (tensor.untyped_storage().data_ptr(), location)
            for tensor in saved_tensors(obj)
            if simulation.is_tagged(tensor)
        )
        try:
            return real_save(obj, f, *args, **kwargs)
        finally:
            pointers.clear()

    return save


def simulated_load(simulation: Simulation, real_load: Callable) -> Callable:
    """``torch.load`` that restores storages saved on the simulated device type as tagged CPU
    tensors, and raises for other devices what this build raises (a CUDA checkpoint under the
    simulated MPS device fails as on a Mac). ``map_location`` given as a device, string or dict
    is honoured, a callable one is passed through unchanged."""

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
            resolved = simulation.resolve(target)
            if resolved.type == simulation.backend.type:
                simulated_pointers.add(storage.data_ptr())
                return storage
            return torch.serialization.default_restore_location(storage, str(resolved))

        result = real_load(f, restore, *args, **kwargs)
        for tensor in saved_tensors(result):
            if tensor.untyped_storage().data_ptr() in simulated_pointers:
                simulation.set_tag(tensor, simulation.device)
        return result

    return load
