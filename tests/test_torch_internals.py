"""The private torch APIs behind one module: an installed torch that lacks one is refused before
a simulation starts, with a message that names it and the versions the simulation is proven on."""

import pytest

torch = pytest.importorskip("torch")

from torchdevice_lint.runtime import torch_internals  # noqa: E402
from torchdevice_lint.runtime.simdevice import simulated_cuda, simulated_mps  # noqa: E402


def test_the_installed_torch_has_every_required_api():
    assert torch_internals.missing_apis() == []


@pytest.mark.parametrize("simulate", [simulated_cuda, simulated_mps])
def test_a_torch_without_a_private_api_is_refused_with_a_clear_error(monkeypatch, simulate):
    monkeypatch.delattr(torch._C._nn, "_parse_to")
    with pytest.raises(torch_internals.UnsupportedTorch) as refused:
        with simulate():
            pass
    message = str(refused.value)
    assert "torch._C._nn._parse_to" in message
    assert f"torch {torch.__version__} lacks" in message
    assert "proven on torch 2.13.0" in message


def test_a_torch_before_the_accelerator_api_is_refused(monkeypatch):
    monkeypatch.delattr(torch.accelerator, "current_accelerator")
    assert torch_internals.missing_apis() == ["torch.accelerator.current_accelerator"]


def test_the_runtime_extra_states_the_proven_floor():
    import re
    from pathlib import Path

    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    floor = re.search(r'^runtime = \["torch>=([\d.]+)"\]', pyproject, re.MULTILINE).group(1)
    proven = [tuple(map(int, version.split("."))) for version in torch_internals.PROVEN_TORCH_VERSIONS]
    assert tuple(map(int, floor.split("."))) == min(proven)[: len(floor.split("."))]
