"""Without torch (CI's other supported interpreters) only the static half is tested: the
runtime half's test modules need torch to be collected at all."""

import importlib.util

import pytest

TORCH_TEST_MODULES = ["test_simdevice.py", "test_simmps.py", "test_fixtures_runtime.py", "test_pytest_plugin.py"]

collect_ignore = [] if importlib.util.find_spec("torch") else TORCH_TEST_MODULES


@pytest.fixture(autouse=True)
def user_cache_dir(tmp_path_factory, monkeypatch):
    """Runs outside a project keep their result cache in the user's cache directory: the
    tests' runs keep it in a temporary one instead of the real home."""
    directory = tmp_path_factory.getbasetemp() / "user-cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory))
    return directory
