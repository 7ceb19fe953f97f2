"""The simulated CUDA device: what it tags, what it lets through like CUDA, what it rejects."""

import io

import pytest

torch = pytest.importorskip("torch")

from torchdevice_lint.runtime.simdevice import simulated_cuda  # noqa: E402


def test_module_to_moves_parameters_and_buffers():
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.BatchNorm1d(2))
    with simulated_cuda() as device:
        model.to(device)
        assert {p.device for p in model.parameters()} == {torch.device("cuda", 0)}
        assert {b.device for b in model.buffers()} == {torch.device("cuda", 0)}
        with pytest.raises(RuntimeError, match="same device"):
            model(torch.randn(4, 3))
        model(torch.randn(4, 3, device=device)).sum().backward()
        assert model[0].weight.grad.is_cuda


def test_unassigned_to_leaves_the_tensor_on_the_cpu():
    x = torch.ones(2)
    with simulated_cuda():
        x.to("cuda")
        assert x.device.type == "cpu"
        with pytest.raises(RuntimeError, match="same device"):
            torch.ones(2).cuda() * x


def test_what_cuda_accepts_from_the_cpu():
    with simulated_cuda():
        x = torch.arange(6.0).cuda()
        assert (x * torch.tensor(2.0)).is_cuda  # 0-dim CPU scalar
        assert x[torch.tensor([0, 2])].tolist() == [0.0, 2.0]  # CPU index tensor
        x.copy_(torch.zeros(6))
        assert x.cpu().device.type == "cpu" and x.cpu().numpy().sum() == 0


def test_numpy_on_a_device_tensor_raises_as_on_cuda():
    with simulated_cuda():
        with pytest.raises(TypeError, match="cuda:0 device type tensor to numpy"):
            torch.ones(2).cuda().numpy()


def test_checkpoints_keep_the_cuda_location():
    buffer = io.BytesIO()
    with simulated_cuda():
        torch.save({"w": torch.ones(2).cuda()}, buffer)
        buffer.seek(0)
        assert torch.load(buffer)["w"].is_cuda
        buffer.seek(0)
        assert not torch.load(buffer, map_location="cpu")["w"].is_cuda
    buffer.seek(0)
    with pytest.raises(RuntimeError, match="CUDA device"):
        torch.load(buffer)  # outside the simulation it is a real GPU checkpoint


def test_cuda_apis_are_simulated_and_restored():
    with simulated_cuda():
        assert torch.cuda.is_available() and torch.accelerator.is_available()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        end.record()
        torch.cuda.synchronize()
        assert start.elapsed_time(end) >= 0
        assert isinstance(torch.cuda.FloatTensor(2, 3), torch.cuda.FloatTensor)
        with pytest.raises(RuntimeError, match="invalid device ordinal"):
            torch.zeros(1, device="cuda:1")
    assert not torch.cuda.is_available()
    assert torch.zeros(1).device.type == "cpu"
