"""Fidelity rows that hold on both devices: what runs on a real CUDA or MPS device runs on the
simulated one, and what fails there fails with the same error (docs/simulated-devices.md)."""

import contextlib
import io

import pytest

torch = pytest.importorskip("torch")

from fidelity_devices import cuda_device, device, mps_device  # noqa: E402,F401


def test_placement_moves_and_creates_on_the_device(device):
    model = torch.nn.Linear(3, 2).to(device)
    x = torch.randn(4, 3, device=device)
    assert model.weight.device == device and x.device == device
    assert model(x).device == device
    assert torch.ones(2).to(device).device == device
    assert model(x).cpu().device.type == "cpu"


def test_an_int_device_is_an_index_on_the_accelerator(device):
    model = torch.nn.Linear(2, 1).to(0)
    assert model.weight.device == device
    assert torch.ones(2).to(0).device == device
    assert torch.ones(2, device=0).device == device


def test_a_cpu_tensor_in_a_device_op_raises(device):
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, device=device) + torch.ones(3)


def test_a_0_dim_cpu_tensor_combines_with_a_device_tensor(device):
    assert (torch.ones(3, device=device) * torch.tensor(2.0)).device == device


def test_a_cpu_index_tensor_indexes_a_device_tensor(device):
    values = torch.arange(5.0, device=device)
    assert values[torch.tensor([0, 4])].tolist() == [0.0, 4.0]


def test_copy_crosses_devices(device):
    target = torch.zeros(3, device=device)
    target.copy_(torch.ones(3))
    assert target.device == device and target.sum().item() == 3


@pytest.mark.parametrize("method", ["expand_as", "view_as", "reshape_as"])
def test_size_only_methods_read_only_the_size_of_the_other_tensor(device, method):
    cpu_row = torch.arange(3.0) if method == "expand_as" else torch.arange(6.0)
    shaped = getattr(cpu_row, method)(torch.zeros(2, 3, device=device))
    assert shaped.shape == (2, 3) and shaped.device.type == "cpu"


def test_type_as_moves_to_the_device_and_dtype_of_the_other_tensor(device):
    moved = torch.arange(3).type_as(torch.zeros(1, device=device))
    assert moved.device == device and moved.dtype == torch.float32


def test_numpy_of_a_device_tensor_is_refused(device):
    with pytest.raises(TypeError, match=f"can't convert {device} device type tensor to numpy"):
        torch.ones(2, device=device).numpy()


def test_pinning_a_device_tensor_is_refused(device):
    with pytest.raises(RuntimeError, match=f"cannot pin '{device.type.upper()}FloatType' only dense CPU"):
        torch.ones(2, device=device).pin_memory()


@pytest.mark.parametrize("workers", [0, 1], ids=["pinned-in-the-main-thread", "pinned-in-its-own-thread"])
def test_a_pinned_data_loader_feeds_the_device(device, workers):
    dataset = torch.utils.data.TensorDataset(torch.randn(4, 2))
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, pin_memory=True, num_workers=workers)
    on_mps = device.type == "mps"
    warning = pytest.warns(UserWarning, match="not supported on MPS") if on_mps else contextlib.nullcontext()
    with warning:
        (batch,) = next(iter(loader))
    assert batch.to(device, non_blocking=True).device == device


def test_a_second_device_index_is_refused(device):
    with pytest.raises(RuntimeError):
        torch.zeros(1, device=torch.device(device.type, 1))


def test_a_checkpoint_records_and_restores_the_device(device):
    checkpoint = io.BytesIO()
    torch.save({"w": torch.ones(2, device=device)}, checkpoint)
    checkpoint.seek(0)
    assert torch.load(checkpoint)["w"].device == device
    checkpoint.seek(0)
    assert torch.load(checkpoint, map_location="cpu")["w"].device.type == "cpu"


def test_a_generator_on_the_device_drives_device_random_functions(device):
    generator = torch.Generator(device=device).manual_seed(0)
    assert generator.device.type == device.type
    first = torch.randn(3, device=device, generator=generator)
    generator.manual_seed(0)
    assert torch.equal(first, torch.randn(3, device=device, generator=generator))


def test_a_device_generator_for_cpu_random_numbers_is_refused(device):
    generator = torch.Generator(device=device)
    expected = f"Expected a 'cpu' device type for generator but found '{device.type}'"
    with pytest.raises(RuntimeError, match=expected):
        torch.randperm(4, generator=generator)
    with pytest.raises(RuntimeError, match=expected):
        list(torch.utils.data.DataLoader(range(4), shuffle=True, generator=generator))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_autocast_computes_matmuls_in_the_lower_precision(device, dtype):
    weights = torch.randn(4, 4, device=device)
    with torch.autocast(device.type, dtype=dtype):
        product = weights @ weights
        assert torch.is_autocast_enabled(device.type)
    assert product.dtype == dtype and product.device == device
    assert (weights @ weights).dtype == torch.float32


def test_a_grad_scaler_step_updates_the_model(device):
    model = torch.nn.Linear(2, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device.type, init_scale=256.0)  # no float16 overflow: the step is taken
    before = model.weight.detach().clone()
    with torch.autocast(device.type, dtype=torch.float16):
        loss = model(torch.ones(3, 2, device=device)).float().sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert not torch.equal(before, model.weight.detach())


def test_a_default_device_puts_factories_on_the_device(device):
    torch.set_default_device(device)
    try:
        assert torch.zeros(2).device == device
    finally:
        torch.set_default_device(None)


def test_a_gradient_from_another_device_is_refused(device):
    weight = torch.ones(2, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="different device"):
        weight.grad = torch.ones(2)


def test_wrappers_on_the_same_storage_stay_on_the_device(device):
    tensor = torch.ones(3, device=device)
    assert torch.nn.Parameter(tensor).device == device
    assert tensor.data.device == device


def test_the_accelerator_is_the_device(device):
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator().type == device.type
    assert torch.accelerator.device_count() >= 1
