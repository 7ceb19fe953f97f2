"""Autocast on a simulated device. Its tensors are CPU tensors, which CUDA's and MPS's autocast
never touch, so ``torch.autocast("cuda", dtype=torch.bfloat16)`` would compute in float32 and a
program would take another dtype path than on the device. While the simulated device type's
autocast is on, the CPU's autocast runs with its dtype instead: matmuls and convolutions come out
in float16/bfloat16 as on the device (the CPU's autocast op lists are close to CUDA's, not the
same). The CPU's own autocast state (``torch.autocast("cpu")``) is kept apart and restored.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

import torch

CPU_TYPE = "cpu"


class AutocastMirror:
    """Wraps ``torch.set_autocast_enabled``/``set_autocast_dtype`` and their getters."""

    def __init__(self, device_type: str) -> None:
        self.device_type = device_type
        self.real_set_enabled: Callable = torch.set_autocast_enabled
        self.real_set_dtype: Callable = torch.set_autocast_dtype
        self.real_is_enabled: Callable = torch.is_autocast_enabled
        self.real_get_dtype: Callable = torch.get_autocast_dtype
        self.cpu_enabled = self.real_is_enabled(CPU_TYPE)
        self.cpu_dtype = self.real_get_dtype(CPU_TYPE)

    def _apply(self) -> None:
        """Give the CPU's autocast the simulated device's state while that is on, else its own."""
        if self.real_is_enabled(self.device_type):
            enabled, dtype = True, self.real_get_dtype(self.device_type)
        else:
            enabled, dtype = self.cpu_enabled, self.cpu_dtype
        self.real_set_enabled(CPU_TYPE, enabled)
        self.real_set_dtype(CPU_TYPE, dtype)

    def set_enabled(self, *args: Any) -> None:
        device_type, enabled = args if len(args) == 2 else ("cuda", args[0])  # one argument: CUDA
        if device_type == CPU_TYPE:
            self.cpu_enabled = enabled
        else:
            self.real_set_enabled(device_type, enabled)
        self._apply()

    def set_dtype(self, device_type: str, dtype: torch.dtype) -> None:
        if device_type == CPU_TYPE:
            self.cpu_dtype = dtype
        else:
            self.real_set_dtype(device_type, dtype)
        self._apply()

    def is_enabled(self, device_type: str = "cuda") -> bool:
        return self.cpu_enabled if device_type == CPU_TYPE else self.real_is_enabled(device_type)

    def get_dtype(self, device_type: str) -> torch.dtype:
        return self.cpu_dtype if device_type == CPU_TYPE else self.real_get_dtype(device_type)

    def restore(self) -> None:
        """Leave the CPU's autocast as the program left its own state."""
        self.real_set_enabled(CPU_TYPE, self.cpu_enabled)
        self.real_set_dtype(CPU_TYPE, self.cpu_dtype)

    def patches(self) -> Dict[str, Any]:
        return {
            "set_autocast_enabled": self.set_enabled,
            "set_autocast_dtype": self.set_dtype,
            "is_autocast_enabled": self.is_enabled,
            "get_autocast_dtype": self.get_dtype,
        }
