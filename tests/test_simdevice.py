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


def test_wrappers_on_the_same_storage_stay_on_the_device():
    from torch.autograd import Variable

    with simulated_cuda():
        x = torch.ones(3).cuda()
        wrapped = Variable(x)
        parameter = torch.nn.Parameter(x)
        assert wrapped.is_cuda and parameter.device == torch.device("cuda", 0)
        assert (wrapped + torch.ones(3).cuda()).is_cuda
        assert not torch.ones(3).is_cuda  # a fresh CPU tensor is not mistaken for a view


def test_cpu_type_cast_of_a_scalar():
    with simulated_cuda():
        loss = torch.tensor(0.5).cuda()
        cast = loss.type(torch.FloatTensor)
        assert cast.device.type == "cpu" and cast.item() == 0.5
        assert torch.tensor(3).cuda().type(torch.DoubleTensor).dtype == torch.float64


def test_cuda_seeding_is_accepted():
    with simulated_cuda():
        torch.cuda.manual_seed(0)
        torch.cuda.manual_seed_all(0)
        torch.manual_seed(1)
        first = torch.randn(2, device="cuda")
        torch.manual_seed(1)
        assert torch.equal(first, torch.randn(2, device="cuda"))


def test_the_command_line_runs_a_program_with_its_arguments(tmp_path, capsys):
    from torchdevice_lint.runtime.simdevice import main

    program = tmp_path / "program.py"
    program.write_text(
        "import sys, torch\n"
        "device = 'mps' if torch.backends.mps.is_available() else 'cpu'\n"
        "print(torch.ones(1, device=device).device, sys.argv[1:])\n"
    )
    assert main(["--device", "simmps", str(program), "--epochs", "1"]) == 0
    assert capsys.readouterr().out == "mps:0 ['--epochs', '1']\n"


@pytest.mark.parametrize("leg", ["simcuda", "simmps"])
def test_torch_dynamo_can_map_the_patched_functions(leg):
    """Dynamo maps each torch function object to one rule (optimizers consult the map); a
    stand-in shared by two names made it fail with "Duplicate torch object"."""
    from torch._dynamo.trace_rules import get_torch_obj_rule_map

    from torchdevice_lint.runtime.simdevice import simulated_device

    try:
        with simulated_device(leg):
            get_torch_obj_rule_map.cache_clear()
            assert get_torch_obj_rule_map()
    finally:
        get_torch_obj_rule_map.cache_clear()


def test_a_wrapper_outlives_the_tensor_it_wraps():
    import numpy as np
    from torch.autograd import Variable

    with simulated_cuda():
        z = Variable(torch.cuda.FloatTensor(np.zeros((2, 3))))  # the wrapped tensor dies here
        assert z.is_cuda
        assert (torch.nn.Linear(3, 1).cuda()(z)).is_cuda
