"""The opt-in strict policy (TDV9xx): off by default, on by prefix, allowlisted per file."""

import subprocess
import sys

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.model.settings import Settings

SOURCE = (
    "import torch\n"
    "n = torch.cuda.device_count()\n"
    "model = torch.nn.DataParallel(model)\n"
    "loader = torch.utils.data.DataLoader(ds, pin_memory=True)\n"
    "for batch in loader:\n"
    "    print(model(batch).item())\n"
)


def codes(settings, path="lib/train.py"):
    return [f.code for f in api.engine(settings).check_source(path, SOURCE).findings]


def test_hints_are_off_by_default_and_on_with_their_prefix():
    assert codes(Settings()) == []
    # the prefix selects the platform policy (TDV905: any backend API outside its layer) too
    assert codes(Settings(extend_select=("TDV9",))) == ["TDV905", "TDV901", "TDV904", "TDV902", "TDV903"]
    assert codes(Settings(select=("TDV904",))) == ["TDV904"]
    assert codes(Settings(select=("ALL",))) == []  # ALL: the default rules; opt-in ones need their own prefix


def test_per_file_ignores_allowlist_the_files_that_may_use_cuda():
    settings = settings_from_table(
        {"extend-select": ["TDV9"], "per-file-ignores": {"lib/cuda_backend/**": ["TDV901"], "tests/**": ["TDV9"]}},
        root=".",
    )
    assert "TDV901" not in codes(settings, "lib/cuda_backend/kernels.py")
    assert "TDV904" in codes(settings, "lib/cuda_backend/kernels.py")
    assert codes(settings, "tests/test_train.py") == []
    assert "TDV901" in codes(settings, "lib/train.py")


def test_unguarded_raising_call_is_reported_once_by_the_most_specific_rule():
    source = "import torch\ntorch.cuda.synchronize()\n"
    both = api.engine(Settings(extend_select=("TDV901",))).check_source("a.py", source).findings
    assert [f.code for f in both] == ["TDV301"]
    strict_only = api.engine(Settings(select=("TDV901",))).check_source("a.py", source).findings
    assert [f.code for f in strict_only] == ["TDV901"]


def test_cli_strict_policy_replaces_a_grep_hook(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdevice-lint]\nextend-select = ["TDV901"]\nper-file-ignores = { "backends/cuda.py" = ["TDV901"] }\n'
    )
    (tmp_path / "backends").mkdir()
    (tmp_path / "backends" / "cuda.py").write_text("import torch\ntorch.cuda.empty_cache()\n")
    (tmp_path / "model.py").write_text("import torch\ntorch.cuda.empty_cache()\n")
    result = subprocess.run(
        [sys.executable, "-m", "torchdevice_lint.cli", "check", "--output-format", "concise", "model.py", "backends"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "model.py:2:1: TDV901 `torch.cuda.empty_cache()` has a device-agnostic equivalent: `torch.accelerator.empty_cache()`"
    ]
