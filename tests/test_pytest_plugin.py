"""The pytest plugin, exercised with pytester: legs, skips, the marker, overriding, lazy torch."""

import pytest

# Imported here so that pytester's in-process runs find torch already loaded: they drop modules
# first imported during a run, and torch cannot be imported a second time in one process.
import torch  # noqa: F401

pytest_plugins = ["pytester"]

DEVICE_TEST = """
def test_device(torch_device, torch_device_name):
    import torch
    x = torch.ones(2, device=torch_device)
    assert x.device.type == torch.device(torch_device).type
    print("LEG", torch_device_name, x.device)
"""


def test_default_legs_are_cpu_and_cuda(pytester, monkeypatch):
    monkeypatch.delenv("TORCHDEVICE_DEVICES", raising=False)
    pytester.makepyfile(DEVICE_TEST)
    result = pytester.runpytest("-v", "-rs")
    result.stdout.fnmatch_lines(["*test_device?cpu? PASSED*", "*test_device?cuda? SKIPPED*"])
    result.stdout.fnmatch_lines(["*needs CUDA: CUDA is not available*"])
    result.assert_outcomes(passed=1, skipped=1)


@pytest.mark.parametrize("how", ["option", "environment", "ini"])
def test_extra_legs_from_option_environment_or_ini(pytester, monkeypatch, how):
    monkeypatch.delenv("TORCHDEVICE_DEVICES", raising=False)
    pytester.makepyfile(DEVICE_TEST)
    arguments = ["-v", "-s"]
    if how == "option":
        arguments.append("--torchdevice-devices=simcuda")
    elif how == "environment":
        monkeypatch.setenv("TORCHDEVICE_DEVICES", "simcuda")
    else:
        pytester.makeini("[pytest]\ntorchdevice_devices = simcuda\n")
    result = pytester.runpytest(*arguments)
    result.stdout.fnmatch_lines(["*LEG simcuda cuda:0*"])
    result.assert_outcomes(passed=2, skipped=1)


def test_simcuda_leg_catches_a_tensor_left_on_the_cpu(pytester):
    pytester.makepyfile(
        """
        import pytest, torch

        def test_mixed(torch_device):
            weights = torch.ones(3, device=torch_device)
            with pytest.raises(RuntimeError, match="same device"):
                weights + torch.ones(3)
        """
    )
    result = pytester.runpytest("--torchdevice-devices=simcuda", "-v")
    result.stdout.fnmatch_lines(["*test_mixed?cpu? FAILED*", "*test_mixed?simcuda? PASSED*"])


def test_a_users_own_fixture_wins(pytester):
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def torch_device():
            return "user-choice"
        """
    )
    pytester.makepyfile("def test_mine(torch_device):\n    assert torch_device == 'user-choice'\n")
    result = pytester.runpytest("-v", "--torchdevice-devices=simcuda")
    result.stdout.fnmatch_lines(["*test_mine PASSED*"])
    result.assert_outcomes(passed=1)


def test_cuda_marker_skips_and_deselects(pytester):
    pytester.makepyfile(
        DEVICE_TEST
        + """
import pytest

@pytest.mark.cuda
def test_needs_gpu():
    pass
"""
    )
    skipped = pytester.runpytest("-rs")
    skipped.assert_outcomes(passed=1, skipped=2)
    skipped.stdout.fnmatch_lines(["*needs CUDA: CUDA is not available*"])
    deselected = pytester.runpytest("-m", "not cuda")
    deselected.assert_outcomes(passed=1, deselected=2)
    assert "cuda" in pytester.runpytest("--markers").stdout.str()


def test_unknown_device_is_skipped_with_the_reason(pytester):
    pytester.makepyfile(DEVICE_TEST)
    result = pytester.runpytest("-rs", "--torchdevice-devices=nodevice")
    result.stdout.fnmatch_lines(["*nodevice leg skipped: 'nodevice' is not a device torch*"])


def test_torch_is_not_imported_until_a_device_is_asked_for(pytester):
    pytester.makepyfile(
        """
        import sys

        def test_plain():
            assert "torch" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "torchdevice", "--torchdevice-devices=simcuda")
    result.assert_outcomes(passed=1)
