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


@pytest.fixture
def forked_pool(monkeypatch):
    """Pools started by fork even in this threaded process (torch's threads, once imported), for
    tests whose patches of the analysis must reach the workers. The pool forks only a process
    with one thread (``parallel._pool_context``); here the fork is the test's own choice."""
    import multiprocessing
    import warnings

    from torchdevice_lint.app import parallel

    if "fork" in multiprocessing.get_all_start_methods():
        monkeypatch.setattr(parallel, "_pool_context", lambda: multiprocessing.get_context("fork"))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*multi-threaded, use of fork", category=DeprecationWarning)
        yield
