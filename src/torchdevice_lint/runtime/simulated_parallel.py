"""``nn.DataParallel`` on the simulated CUDA device. On a machine with one GPU it moves the
module to ``cuda:0``, scatters the inputs there (a CPU batch is copied over) and calls the module
directly; torch does the scatter with CUDA-only kernels and copy streams, so the simulation
supplies the autograd functions ``DataParallel`` calls: copies onto the simulated device, which
autograd follows backwards like any ``.to()``. A second device id raises as on a one-GPU machine.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

import torch

from .simulated import CPU, Simulation


def _split(tensor: torch.Tensor, pieces: int, chunk_sizes: Optional[Sequence[int]], dim: int):
    """How ``comm.scatter`` cuts a tensor: the sizes given, else equal chunks."""
    return tensor.split(list(chunk_sizes), dim) if chunk_sizes else tensor.chunk(pieces, dim)


def _scatter(simulation: Simulation) -> type:
    class Scatter:
        """``Scatter.apply(target_gpus, chunk_sizes, dim, input)``: one chunk on each device."""

        @staticmethod
        def apply(target_gpus: Sequence[Any], chunk_sizes, dim: int, tensor: torch.Tensor):
            devices = [simulation.resolve(device) for device in target_gpus]
            chunks = _split(tensor, len(devices), chunk_sizes, dim)
            return tuple(chunk.to(device) for chunk, device in zip(chunks, devices))

    return Scatter


def _gather(simulation: Simulation) -> type:
    class Gather:
        """``Gather.apply(target_device, dim, *inputs)``: the outputs joined on one device."""

        @staticmethod
        def apply(target_device: Any, dim: int, *inputs: torch.Tensor) -> torch.Tensor:
            if any(simulation.device_of(tensor) == CPU for tensor in inputs):
                raise AssertionError("Gather function not implemented for CPU tensors")
            destination = CPU if target_device in ("cpu", -1) else simulation.resolve(target_device)
            return torch.cat([tensor.to(destination) for tensor in inputs], dim)

    return Gather


def parallel_patches(simulation: Simulation) -> Dict[str, Any]:
    """Replacements for ``torch.nn.parallel.scatter_gather``'s autograd functions."""
    return {"Scatter": _scatter(simulation), "Gather": _gather(simulation)}
