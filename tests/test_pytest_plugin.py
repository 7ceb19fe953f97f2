"""The pytest plugin, exercised with pytester: legs, skips, markers, usage errors, overriding,\nlazy torch."""

import pytest

# Imported here so that pytester's in-process runs find torch already loaded: they drop modules
# first imported during a run, and torch cannot be imported a second time in one process.
import torch  # noqa: F401
import torch._dynamo  # noqa: F401  (the simmps leg's dispatch mode imports it on first use)

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
    result.assert_outcomes(passed=1)  # the legs named replace cpu and cuda


def test_the_option_sets_the_legs_over_the_ini(pytester, monkeypatch):
    monkeypatch.delenv("TORCHDEVICE_DEVICES", raising=False)
    pytester.makeini("[pytest]\ntorchdevice_devices = cpu,cuda\n")
    pytester.makepyfile(DEVICE_TEST)
    result = pytester.runpytest("-v", "-s", "--torchdevice-devices=simcuda,simmps")
    result.stdout.fnmatch_lines(["*LEG simcuda cuda:0*", "*LEG simmps mps:0*"])
    result.assert_outcomes(passed=2)


def test_simmps_leg_refuses_float64(pytester):
    pytester.makepyfile(
        """
        import torch

        def test_double(torch_device):
            torch.zeros(2, dtype=torch.float64, device=torch_device)
        """
    )
    result = pytester.runpytest("--torchdevice-devices=cpu,simmps", "-v")
    result.stdout.fnmatch_lines(["*test_double?cpu? PASSED*", "*test_double?simmps? FAILED*"])
    result.stdout.fnmatch_lines(["*TypeError: Cannot convert a MPS Tensor to float64 dtype*"])


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
    result = pytester.runpytest("--torchdevice-devices=cpu,simcuda", "-v")
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


def test_namespaced_marker_skips_and_deselects_the_cuda_legs(pytester):
    pytester.makepyfile(
        DEVICE_TEST
        + """
import pytest

@pytest.mark.torchdevice_cuda
def test_needs_gpu():
    pass
"""
    )
    skipped = pytester.runpytest("-rs")
    skipped.assert_outcomes(passed=1, skipped=2)
    skipped.stdout.fnmatch_lines(["*needs CUDA: CUDA is not available*"])
    deselected = pytester.runpytest("-m", "not torchdevice_cuda")
    deselected.assert_outcomes(passed=1, deselected=2)
    markers = pytester.runpytest("--markers").stdout.str()
    assert "@pytest.mark.torchdevice_cuda:" in markers
    assert "@pytest.mark.cuda:" not in markers


def test_a_projects_unregistered_cuda_marker_still_fails_strict_markers(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.cuda
        def test_theirs():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "--torchdevice-devices=cpu,simcuda")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'cuda' not found in `markers` configuration option*"])


def test_a_projects_own_cuda_marker_keeps_its_meaning(pytester):
    """The project's ``cuda`` marker selects its own tests only; the plugin neither skips them
    nor puts the mark on its legs."""
    pytester.makeini("[pytest]\nmarkers =\n    cuda: this project's own meaning\n")
    pytester.makepyfile(
        DEVICE_TEST
        + """
import pytest

@pytest.mark.cuda
def test_theirs():
    pass
"""
    )
    result = pytester.runpytest("-v", "--strict-markers", "-m", "cuda")
    result.stdout.fnmatch_lines(["*test_theirs PASSED*"])
    result.assert_outcomes(passed=1, deselected=2)


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_misspelled_device_is_a_usage_error(pytester, monkeypatch, how):
    pytester.makepyfile(DEVICE_TEST)
    if how == "option":
        result = pytester.runpytest("--torchdevice-devices=cpu,simcdua")
    else:
        monkeypatch.setenv("TORCHDEVICE_DEVICES", "cpu,simcdua")
        result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown device 'simcdua'*valid names: simcuda, simmps, cpu, cuda, mps*"])


def test_an_absent_device_is_skipped_with_the_reason(pytester):
    pytester.makepyfile(DEVICE_TEST)
    result = pytester.runpytest("-rs", "--torchdevice-devices=cpu,xpu:1")
    result.stdout.fnmatch_lines(["*xpu:1 leg skipped: xpu is not available*"])
    result.assert_outcomes(passed=1, skipped=1)


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
