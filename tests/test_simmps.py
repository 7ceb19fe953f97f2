"""The simulated MPS device: an Apple-silicon Mac without CUDA, refusing what MPS refuses."""

import io

import pytest

torch = pytest.importorskip("torch")

from torchdevice_lint.runtime.simdevice import MPS_FLOAT64_ERROR, simulated_cuda, simulated_mps  # noqa: E402


def test_looks_like_a_mac():
    with simulated_mps() as device:
        assert device == torch.device("mps", 0)
        assert torch.backends.mps.is_available() and torch.backends.mps.is_built()
        assert not torch.cuda.is_available()
        assert torch.accelerator.current_accelerator() == device
        torch.mps.synchronize()
        torch.mps.empty_cache()
        torch.mps.manual_seed(0)
    assert not torch.backends.mps.is_available()


def test_mps_placement_works():
    model = torch.nn.Linear(3, 2)
    with simulated_mps():
        model.to("mps")
        x = torch.randn(4, 3, device="mps")
        out = model(x)
        assert out.device.type == "mps" and out.is_mps
        assert x.to(torch.device("mps:0")) is x
        assert out.cpu().device.type == "cpu"


def test_float64_is_refused_with_the_mps_error():
    with simulated_mps():
        for make in (
            lambda: torch.zeros(2, dtype=torch.float64, device="mps"),
            lambda: torch.zeros(2, dtype=torch.float64).to("mps"),
            lambda: torch.zeros(2, device="mps").double(),
            lambda: torch.zeros(2, device="mps").to(torch.float64),
        ):
            with pytest.raises(TypeError) as raised:
                make()
            assert str(raised.value) == MPS_FLOAT64_ERROR
        assert torch.zeros(2, dtype=torch.float64).sum().item() == 0  # float64 on the CPU is fine


def test_cross_device_operations_raise():
    with simulated_mps():
        weights = torch.ones(3, device="mps")
        with pytest.raises(RuntimeError, match="same device.*mps:0 and cpu"):
            weights + torch.ones(3)
        with pytest.raises(TypeError, match="can't convert mps:0 device type tensor to numpy"):
            weights.numpy()
        assert (weights * torch.tensor(2.0)).is_mps  # a 0-dim CPU scalar is allowed


def test_cuda_is_absent():
    with simulated_mps():
        with pytest.raises(AssertionError, match="not compiled with CUDA"):
            torch.ones(2).cuda()
        with pytest.raises((AssertionError, RuntimeError)):
            torch.ones(2).to("cuda")


def test_checkpoints_keep_the_mps_location_and_cuda_ones_fail():
    mps_checkpoint, cuda_checkpoint = io.BytesIO(), io.BytesIO()
    with simulated_mps():
        torch.save({"w": torch.ones(2, device="mps")}, mps_checkpoint)
        mps_checkpoint.seek(0)
        assert torch.load(mps_checkpoint)["w"].is_mps
    with simulated_cuda():
        torch.save({"w": torch.ones(2).cuda()}, cuda_checkpoint)
    with simulated_mps():
        cuda_checkpoint.seek(0)
        with pytest.raises(RuntimeError, match="CUDA device"):
            torch.load(cuda_checkpoint)
        cuda_checkpoint.seek(0)
        assert torch.load(cuda_checkpoint, map_location="mps")["w"].is_mps


def test_tags_do_not_leak_from_one_simulation_into_the_next():
    with simulated_cuda():
        kept = torch.ones(2).cuda()
    with simulated_mps():
        assert kept.device.type == "cpu"
