"""The list of operators simmps refuses is the declared torch's: every one lacks an MPS kernel in
the installed torch's ``native_functions.yaml`` (shipped in the wheel, under torchgen), and the
list names a public API for each."""

import functools
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
yaml = pytest.importorskip("yaml")
torchgen = pytest.importorskip("torchgen")

from torchdevice_lint.runtime.mps_kernels import MISSING_MPS_KERNELS, fallback_enabled  # noqa: E402

NATIVE_FUNCTIONS = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"


@functools.lru_cache(maxsize=None)
def _dispatch_keys_by_operator() -> dict:
    """ATen operator name (overloads merged) -> the dispatch keys of all its overloads."""
    keys: dict = {}
    for entry in yaml.safe_load(NATIVE_FUNCTIONS.read_text()):
        operator = entry["func"].split("(")[0].split(".")[0]
        for key_group in (entry.get("dispatch") or {}):
            keys.setdefault(operator, set()).update(key.strip() for key in key_group.split(","))
        keys.setdefault(operator, set())
    return keys


@pytest.mark.skipif(not NATIVE_FUNCTIONS.exists(), reason="this torch wheel ships no native_functions.yaml")
def test_every_listed_operator_has_a_cpu_kernel_and_no_mps_kernel():
    keys = _dispatch_keys_by_operator()
    for operator in MISSING_MPS_KERNELS:
        assert operator in keys, f"{operator} is not an ATen operator of torch {torch.__version__}"
        assert "MPS" not in keys[operator], f"torch {torch.__version__} has an MPS kernel for {operator}"


def test_the_yaml_knows_mps_kernels_so_the_check_above_can_fail():
    keys = _dispatch_keys_by_operator()
    assert "MPS" in keys["mm"] and "MPS" in keys["_cdist_forward"]


@pytest.mark.parametrize("value, enabled", [(None, False), ("0", False), ("1", True), ("2", True)])
def test_the_fallback_variable_is_read_as_an_integer(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("PYTORCH_ENABLE_MPS_FALLBACK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", value)
    assert fallback_enabled() is enabled
