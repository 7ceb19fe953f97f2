"""The target torch version comes from the project's own torch requirement, like ruff's target
from ``requires-python``; ``target-torch-version`` overrides it and the source is recorded."""

import subprocess
import sys

import pytest

from torchdevice_lint.app.config import load_settings
from torchdevice_lint.app.torch_target import infer_target, lower_bound

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"
ACCELERATOR = 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'
CUDA_MPS_CPU = 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'


@pytest.mark.parametrize(
    "requirement, bound",
    [
        ("torch>=2.1", (2, 1)),
        ("torch >=1.13,<3", (1, 13)),
        ("torch==2.3.1", (2, 3)),
        ("torch~=2.5.0", (2, 5)),
        ("torch==2.*", (2, 0)),
        ("Torch[opt]>=2.4; python_version >= '3.9'", (2, 4)),
        ("torch", None),
        ("torch<3", None),
        ("torchvision>=0.20", None),
        ("torch-npu>=2.1", None),
        ("torch @ https://example.org/torch.whl", None),
    ],
)
def test_lower_bound_of_a_requirement(requirement, bound):
    assert lower_bound(requirement) == bound


def test_pyproject_dependencies_and_extras_the_oldest_bound_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["numpy", "torch>=2.4"]\n'
        '[project.optional-dependencies]\nold = ["torch>=2.1,<2.4"]\n'
    )
    assert infer_target(tmp_path) == ("2.1", "pyproject.toml [project.optional-dependencies] old: torch>=2.1,<2.4")


def test_requirements_files(tmp_path):
    (tmp_path / "requirements.txt").write_text("# pinned\n-r base.txt\nnumpy\ntorch==2.9.0  # cuda 12\n")
    assert infer_target(tmp_path) == ("2.9", "requirements.txt:4: torch==2.9.0")


def test_setup_cfg(tmp_path):
    (tmp_path / "setup.cfg").write_text("[options]\ninstall_requires =\n    numpy\n    torch>=2.2\n")
    assert infer_target(tmp_path) == ("2.2", "setup.cfg install_requires: torch>=2.2")


def test_setup_py_is_read_not_executed(tmp_path):
    marker = tmp_path / "executed"
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\n"
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "REQUIRED = ['torch>=2.6', 'numpy']\n"
        "setup(name='p', install_requires=REQUIRED, extras_require={'dev': ['pytest']})\n"
    )
    assert infer_target(tmp_path) == ("2.6", "setup.py install_requires: torch>=2.6")
    assert not marker.exists()


def test_no_bound_means_no_inference(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch\ntorchvision>=0.20\n")
    assert infer_target(tmp_path) is None
    settings = load_settings(str(tmp_path))
    assert (settings.target_torch_version, settings.target_torch_source) == ("2.4", "default")


def test_settings_record_where_the_target_came_from(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\ndependencies = ["torch>=2.9"]\n')
    settings = load_settings(str(tmp_path))
    assert settings.target_torch_version == "2.9"
    assert settings.target_torch_source == "pyproject.toml [project] dependencies: torch>=2.9"


def test_an_explicit_setting_overrides_the_requirement(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["torch>=2.9"]\n'
        '[tool.torchdevice-lint]\ntarget-torch-version = "2.1"\n'
    )
    settings = load_settings(str(tmp_path))
    assert settings.target_torch_version == "2.1"
    assert settings.target_torch_source.endswith("[tool.torchdevice-lint] target-torch-version")


def fix(project, *args):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
    result = subprocess.run(command + ["--unsafe-fixes", *args, "train.py"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return (project / "train.py").read_text()


@pytest.mark.parametrize(
    "declared, binding",
    [("torch>=2.9", ACCELERATOR), ("torch>=2.1", CUDA_MPS_CPU)],
)
def test_a_project_gets_fixes_for_the_torch_it_declares_with_no_setting(tmp_path, declared, binding):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "p"\ndependencies = ["{declared}"]\n')
    (tmp_path / "train.py").write_text(HAZARD)
    assert fix(tmp_path) == f"import torch\n\ndevice = {binding}\nx = torch.ones(2).to(device)\n"


def test_the_command_line_overrides_the_requirement(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch>=2.1\n")
    (tmp_path / "train.py").write_text(HAZARD)
    assert ACCELERATOR in fix(tmp_path, "--target-torch-version", "2.6")


@pytest.mark.parametrize(
    "source, target, suggestion",
    [
        (
            "import torch\nwith torch.cuda.amp.autocast():\n    pass\n", "1.9",
            'Use `torch.autocast("cuda", ...)` (needs `target-torch-version` 1.10)',
        ),
        (
            "import torch\nwith torch.backends.cuda.sdp_kernel(enable_flash=False):\n    pass\n", "2.3",
            "Use `torch.nn.attention.sdpa_kernel([...])` (needs `target-torch-version` 2.4)",
        ),
        (
            "import torch\nstart = torch.Event(enable_timing=True)\nend = torch.Event(enable_timing=True)\n"
            "start.record()\nend.record()\nprint(start.elapsed_time(end))\n", "2.5",
            "Time on the host: `time.perf_counter()` after synchronizing the device (needs `target-torch-version` 2.6)",
        ),
    ],
)
def test_a_fix_the_target_torch_lacks_names_the_release_it_needs(source, target, suggestion):
    from torchdevice_lint import api
    from torchdevice_lint.app.config import settings_from_table
    from torchdevice_lint.model.fixes import target_needed

    settings = settings_from_table({"select": ["TDV302", "TDV306"], "target-torch-version": target})
    [finding] = api.engine(settings).check_source("train.py", source).findings
    assert finding.fix.message == suggestion
    assert target_needed(finding.fix.message) == suggestion.rsplit(" ", 1)[1].rstrip(")")
