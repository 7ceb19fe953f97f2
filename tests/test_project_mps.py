"""Whether a project's tensors can meet a Mac's MPS: the float64, mixed-device and CUDA-type
check rules speak only where they can (a project that never names MPS picks CUDA or the CPU)."""

import pytest

from project_files import project_findings
from torchdevice_lint.model.settings import Settings

OPT_IN = Settings(extend_select=("TDV601",))

FLOAT64 = "import torch\n\ndef f(x, device):\n    x = x.to(device)\n    return x.double().sum()\n"


def float64_codes(tmp_path, other: str):
    findings = project_findings(tmp_path, {"model.py": FLOAT64, "run.py": other}, "model.py", OPT_IN)
    return [f.code for f in findings if f.code == "TDV601"]


def test_a_project_that_never_names_mps_keeps_float64_on_cuda_or_the_cpu(tmp_path):
    assert float64_codes(tmp_path, "import torch\nconfig.accelerator = 'cuda'\n") == []


@pytest.mark.parametrize(
    "other",
    [
        "device = 'mps'\n",
        "import torch\nok = torch.backends.mps.is_available()\n",
        "import torch\ndevice = torch.accelerator.current_accelerator()\n",
        "from accelerate import Accelerator\n",
        "import lightning as L\n",
    ],
    ids=["mps-string", "backends-mps", "torch-accelerator", "accelerate", "lightning"],
)
def test_naming_mps_or_a_chooser_that_picks_it_brings_float64_back(tmp_path, other):
    assert float64_codes(tmp_path, other) == ["TDV601"]


def test_a_cuda_hard_code_in_the_file_brings_mps_with_its_fix(tmp_path):
    hard_coded = FLOAT64.replace("x.to(device)", "x.cuda()")
    findings = project_findings(tmp_path, {"model.py": hard_coded, "run.py": "import torch\n"}, "model.py", OPT_IN)
    assert "TDV601" in [f.code for f in findings]
