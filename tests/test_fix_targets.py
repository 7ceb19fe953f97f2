"""Fix targets: the same hazard is rewritten for the torch release and the device helper a
project targets (`target-torch-version`, `device-expression`, `device-import`)."""

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.model.settings import ConfigError

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"


def fixed(table, source=HAZARD, unsafe=True):
    return fix_source(api.engine(settings_from_table(table)), "train.py", source, unsafe=unsafe).source


@pytest.mark.parametrize(
    "version, binding",
    [
        ("2.4", 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'),
        ("2.5", 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'),
        ("2.6", 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
        ("2.7", 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
        ("2.13", 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
    ],
)
def test_device_binding_follows_the_target_torch_version(version, binding):
    assert fixed({"target-torch-version": version}) == f"import torch\n\ndevice = {binding}\nx = torch.ones(2).to(device)\n"


def test_a_project_helper_and_its_import():
    table = {
        "device-expression": "get_accelerator().device_name()",
        "device-import": "from deepspeed.accelerator import get_accelerator",
        "target-torch-version": "2.7",  # an explicit expression wins over the target's default
    }
    assert fixed(table) == (
        "import torch\nfrom deepspeed.accelerator import get_accelerator\n\n"
        "device = get_accelerator().device_name()\nx = torch.ones(2).to(device)\n"
    )


def test_a_helper_that_does_not_use_torch_adds_no_torch_import():
    table = {"device-expression": "best_device()", "device-import": "from myproject.devices import best_device"}
    assert fixed(table, "def load(model):\n    return model.cuda()\n") == (
        "from myproject.devices import best_device\n\n"
        "device = best_device()\n\n\ndef load(model):\n    return model.to(device)\n"
    )


def test_the_accelerator_bindings_run_on_a_cpu_only_machine():
    torch = pytest.importorskip("torch")
    for version in ("2.6", "2.7"):
        namespace = {}
        exec(fixed({"target-torch-version": version}), namespace)
        expected = torch.accelerator.current_accelerator() or torch.device("cpu")
        assert namespace["x"].device.type == expected.type


@pytest.mark.parametrize(
    "table, message",
    [
        ({"device-import": "device = 1"}, "device-import must be one absolute import statement"),
        ({"device-import": "from . import helper"}, "device-import must be one absolute import statement"),
        ({"device-expression": "get accelerator"}, "device-expression is not a Python expression"),
        ({"target-torch-version": "two"}, "target-torch-version must look like"),
    ],
)
def test_bad_fix_targets_are_configuration_errors(table, message):
    with pytest.raises(ConfigError, match=message):
        settings_from_table(table)


def test_strict_rule_rewrites_to_torch_accelerator_only_from_2_6():
    source = "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"
    strict = {"extend-select": ["TDV9"]}
    assert fixed({**strict, "target-torch-version": "2.5"}, source) == source
    assert fixed({**strict, "target-torch-version": "2.6"}, source) == (
        "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"
    )


def test_accelerator_calls_keep_a_guard_because_they_raise_without_an_accelerator():
    """torch.accelerator.synchronize() raises on CPU-only machines (DESIGN.md): together with
    TDV301's guard the strict rewrite stays runnable there."""
    source = "import torch\n\ndef step():\n    torch.cuda.synchronize()\n"
    result = fixed({"extend-select": ["TDV9"], "target-torch-version": "2.9"}, source)
    assert result == (
        "import torch\n\ndef step():\n    if torch.accelerator.is_available():\n        torch.accelerator.synchronize()\n"
    )
    torch = pytest.importorskip("torch")
    if not torch.accelerator.is_available():
        namespace = {}
        exec(result, namespace)
        namespace["step"]()  # does not raise
