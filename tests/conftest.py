"""Without torch (CI's other supported interpreters) only the static half is tested: the
runtime half's test modules need torch to be collected at all."""

import importlib.util

TORCH_TEST_MODULES = ["test_simdevice.py", "test_fixtures_runtime.py", "test_pytest_plugin.py"]

collect_ignore = [] if importlib.util.find_spec("torch") else TORCH_TEST_MODULES
