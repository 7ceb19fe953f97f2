"""Operators without an MPS kernel: on a Mac they raise ``NotImplementedError`` (or, with
``PYTORCH_ENABLE_MPS_FALLBACK=1``, warn and run on the CPU), so under ``simmps`` they do too.

The list is the declared torch's (2.13): each operator below has no MPS entry in that torch's
``native_functions.yaml`` (tests/test_mps_kernels.py checks it against the installed one), and is
reached from a public API a training script may call. Operators that MPS silently runs on the CPU
(``linalg_svd``, ``col2im``...) are not listed: they work on a Mac. The check sees ATen
operators, below autograd and the Python API, so it catches them however they are reached.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Dict

import torch

from . import torch_internals
from .simulated import Simulation, tensors_in

# ATen operator -> the public APIs that reach it.
MISSING_MPS_KERNELS: Dict[str, str] = {
    "_ctc_loss": "nn.CTCLoss, F.ctc_loss",
    "_linalg_eigh": "torch.linalg.eigh, torch.linalg.eigvalsh",
    "linalg_eig": "torch.linalg.eig",
    "_linalg_eigvals": "torch.linalg.eigvals",
    "linalg_matrix_exp": "torch.linalg.matrix_exp",
    "_pdist_forward": "torch.pdist, F.pdist",
    "poisson": "torch.poisson",
    "binomial": "torch.binomial",
    "_adaptive_avg_pool3d": "nn.AdaptiveAvgPool3d (an output size other than 1)",
    "adaptive_max_pool3d": "nn.AdaptiveMaxPool3d",
    "fractional_max_pool2d": "nn.FractionalMaxPool2d",
    "fractional_max_pool3d": "nn.FractionalMaxPool3d",
    "multi_margin_loss": "nn.MultiMarginLoss",
    "multilabel_margin_loss_forward": "nn.MultiLabelMarginLoss",
    "mode": "torch.mode",
}
FALLBACK_VARIABLE = "PYTORCH_ENABLE_MPS_FALLBACK"


def missing_kernel_error(operator: str) -> NotImplementedError:
    """The error MPS raises for an operator it has no kernel for (the text of torch 2.13)."""
    return NotImplementedError(
        f"The operator '{operator}' is not currently implemented for the MPS device. If you want "
        "this op to be considered for addition please comment on "
        "https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that resulted in "
        f"missing op as well as commit hash {torch.version.git_version}. As a temporary fix, you "
        f"can set the environment variable `{FALLBACK_VARIABLE}=1` to use the CPU as a fallback "
        "for this op. WARNING: this will be slower than running natively on MPS."
    )


def fallback_enabled() -> bool:
    """What MPS reads when torch loads: a non-zero integer turns the error into a CPU fallback."""
    value = os.environ.get(FALLBACK_VARIABLE, "0").strip()
    return value.lstrip("-").isdigit() and int(value) != 0


def missing_kernel_check(simulation: Simulation) -> Any:
    """A dispatch mode that refuses the operators of :data:`MISSING_MPS_KERNELS` when one of
    their tensors is on the simulated MPS device."""
    fallback = fallback_enabled()

    class MissingKernelCheck(torch_internals.dispatch_mode_base()):
        def __init__(self) -> None:
            super().__init__()
            self.missing: Dict[Any, bool] = {}  # operator overload -> lacks an MPS kernel
            self.warned = False

        def lacks_kernel(self, func) -> bool:
            if func not in self.missing:
                self.missing[func] = func.name().split("::")[-1].split(".")[0] in MISSING_MPS_KERNELS
            return self.missing[func]

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if self.lacks_kernel(func) and any(map(simulation.is_tagged, tensors_in((args, kwargs)))):
                self.refuse(func.name())
            return func(*args, **kwargs)

        def refuse(self, operator: str) -> None:
            if not fallback:
                raise missing_kernel_error(operator)
            if not self.warned:
                self.warned = True
                warnings.warn(
                    f"The operator '{operator}' is not currently supported on the MPS backend and will "
                    "fall back to run on the CPU. This may have performance implications.",
                    stacklevel=3,
                )

    return MissingKernelCheck()
