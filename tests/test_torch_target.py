"""The target torch comes from the torch requirement of each file's own project, like ruff's
target from ``requires-python``: read with ``packaging`` from pyproject.toml, requirements files
(pip-compile output too), setup.cfg, setup.py and conda environment files; ``target-torch-version``
overrides it and the source is recorded."""

import subprocess
import sys

import pytest

from torchdevice_lint import cli
from torchdevice_lint.app.config import load_settings
from torchdevice_lint.app.torch_target import conda_lower_bound, infer_target, lower_bound, target_for
from torchdevice_lint.project.roots import declared_root, is_project_file

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"
ACCELERATOR = 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'
CUDA_MPS_CPU = 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'
CUDA_CPU = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'


@pytest.mark.parametrize(
    "requirement, bound",
    [
        ("torch>=2.1", (2, 1)),
        ("torch >=1.13,<3", (1, 13)),
        ("torch==2.3.1", (2, 3)),
        ("torch~=2.5.0", (2, 5)),
        ("torch==2.*", (2, 0)),
        ("torch>2.0", (2, 0)),
        ("torch (>=2.7)", (2, 7)),
        ("torch==2.7.1+cu118", (2, 7)),
        ("Torch[opt]>=2.4; python_version >= '3.9'", (2, 4)),
        ("torch[cuda] >= 2.2 ; sys_platform == 'linux'", (2, 2)),
        ("torch", None),
        ("torch<3", None),
        ("torchvision>=0.20", None),
        ("torch-npu>=2.1", None),
        ("torch @ https://example.org/torch.whl", None),
    ],
)
def test_lower_bound_of_a_requirement(requirement, bound):
    assert lower_bound(requirement) == bound


@pytest.mark.parametrize(
    "spec, bound",
    [
        ("pytorch=1.8.1", (1, 8)),
        ("pytorch::pytorch==1.8", (1, 8)),
        ("pytorch=1.8.1=py3.8_cuda11.1_cudnn8.0.5_0", (1, 8)),
        ("pytorch>=1.9,<2", (1, 9)),
        ("pytorch 1.10.*", (1, 10)),
        ("conda-forge::pytorch 2.1.0 cuda118*", (2, 1)),
        ("pytorch[version='>=1.12']", (1, 12)),
        ("pytorch=1.13|2.0", (1, 13)),
        ("torch>=2.0", (2, 0)),
        ("pytorch", None),
        ("pytorch-cuda=11.8", None),
        ("torchvision=0.9", None),
    ],
)
def test_lower_bound_of_a_conda_spec(spec, bound):
    assert conda_lower_bound(spec) == bound


def test_pyproject_dependencies_and_extras_the_oldest_bound_wins(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["numpy", "torch>=2.4"]\n'
        '[project.optional-dependencies]\nold = ["torch>=2.1,<2.4"]\n'
    )
    assert infer_target(tmp_path) == ("2.1", "pyproject.toml [project.optional-dependencies] old: torch>=2.1,<2.4")


def test_requirements_files(tmp_path):
    (tmp_path / "requirements.txt").write_text("# pinned\n-r base.txt\nnumpy\ntorch==2.9.0  # cuda 12\n")
    assert infer_target(tmp_path) == ("2.9", "requirements.txt:4: torch==2.9.0")


def test_pip_compile_output_with_hashes(tmp_path):
    (tmp_path / "requirements.txt").write_text(
        "numpy==2.1.0 \\\n    --hash=sha256:aaaa\n    # via -r requirements.in\n"
        "torch==2.7.1 \\\n    --hash=sha256:bbbb \\\n    --hash=sha256:cccc\n    # via -r requirements.in\n"
    )
    assert infer_target(tmp_path) == ("2.7", "requirements.txt:4: torch==2.7.1")


def test_options_on_a_requirement_line_are_not_part_of_it(tmp_path):
    (tmp_path / "requirements-gpu.txt").write_text(
        "--extra-index-url https://download.pytorch.org/whl/cu118\ntorch==1.13.1+cu117 -f https://download.pytorch.org/whl/torch_stable.html\n"
    )
    assert infer_target(tmp_path) == ("1.13", "requirements-gpu.txt:2: torch==1.13.1+cu117")


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


def test_conda_environment_and_its_pip_list(tmp_path):
    (tmp_path / "environment.yml").write_text(
        "name: research\nchannels:\n  - pytorch\n  - conda-forge\ndependencies:\n"
        "  - python=3.8\n  - pytorch::pytorch=1.8.1\n  - cudatoolkit=11.1\n  - pip\n  - pip:\n    - timm==0.4.12\n"
    )
    assert infer_target(tmp_path) == ("1.8", "environment.yml: pytorch::pytorch=1.8.1")
    (tmp_path / "environment.yml").write_text("dependencies:\n  - python=3.10\n  - pip:\n    - torch>=2.1\n")
    assert infer_target(tmp_path) == ("2.1", "environment.yml pip: torch>=2.1")


def test_a_broken_environment_file_declares_nothing(tmp_path):
    (tmp_path / "environment.yaml").write_text("dependencies: [pytorch=1.8\n")
    assert infer_target(tmp_path) is None


def test_no_bound_means_the_default_and_says_why(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch\ntorchvision>=0.20\n")
    assert infer_target(tmp_path) is None
    settings = load_settings(str(tmp_path))
    assert settings.target_torch_version == "2.4"
    assert settings.target_torch_source == "default (requirements.txt:1: torch has no lower bound)"


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


def test_the_project_root_is_the_nearest_directory_declaring_a_project(tmp_path):
    (tmp_path / "outer" / "inner" / "src").mkdir(parents=True)
    (tmp_path / "outer" / "pyproject.toml").write_text('[project]\nname = "outer"\n')
    (tmp_path / "outer" / "inner" / "requirements-dev.txt").write_text("pytest\n")
    assert declared_root(str(tmp_path / "outer" / "inner" / "src" / "a.py")) == tmp_path / "outer" / "inner"
    assert declared_root(str(tmp_path / "outer" / "b.py")) == tmp_path / "outer"


def test_nested_projects_each_get_their_own_torch(tmp_path):
    (tmp_path / "lab" / "legacy").mkdir(parents=True)
    (tmp_path / "lab" / "pyproject.toml").write_text('[project]\nname = "lab"\ndependencies = ["torch>=2.7"]\n')
    (tmp_path / "lab" / "legacy" / "environment.yml").write_text("dependencies:\n  - pytorch=1.8.1\n")
    legacy, lab = target_for(str(tmp_path / "lab" / "legacy" / "train.py")), target_for(str(tmp_path / "lab" / "train.py"))
    assert (legacy.version, legacy.source, legacy.root) == ("1.8", "environment.yml: pytorch=1.8.1", tmp_path / "lab" / "legacy")
    assert (lab.version, lab.root) == ("2.7", tmp_path / "lab")


def test_a_project_that_does_not_mention_torch_leaves_it_to_the_one_around_it(tmp_path):
    """``docs/requirements.txt`` (sphinx) or ``tests/requirements.txt`` (pytest) says nothing
    about torch: the repository's pin applies to the code beside them."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "requirements.txt").write_text("torch==1.13.1\n")
    (tmp_path / "docs" / "requirements.txt").write_text("sphinx\n")
    target = target_for(str(tmp_path / "docs" / "conf.py"))
    assert (target.version, target.root) == ("1.13", tmp_path)


def test_a_file_outside_any_project_gets_the_default(tmp_path):
    target = target_for(str(tmp_path / "scratch.py"))
    assert (target.version, target.source, target.root) == ("2.4", "default", None)


def fix(project, *args):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
    result = subprocess.run(command + ["--unsafe-fixes", *args, "train.py"], cwd=project, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return (project / "train.py").read_text()


@pytest.mark.parametrize(
    "declared, binding",
    [("torch>=2.9", ACCELERATOR), ("torch>=2.1", CUDA_MPS_CPU), ("torch>=1.8,<2", CUDA_CPU)],
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
    "path, watched",
    [
        ("/repo/projA/requirements-gpu.txt", True),
        ("/repo/requirements/dev.txt", True),
        ("/repo/projC/environment.yaml", True),
        ("/repo/setup.cfg", True),
        ("/repo/pyproject.toml", True),
        ("/repo/notes.txt", False),
        ("/repo/train.py", False),
    ],
)
def test_the_files_an_editor_watches_for_settings_and_targets(path, watched):
    assert is_project_file(path) is watched


PIP_COMPILED = "torch==2.7.1 \\\n    --hash=sha256:0a1b \\\n    --hash=sha256:2c3d\nnumpy==2.0.2\n"


@pytest.mark.parametrize(
    "pins, args, shown",
    [
        ({"requirements.txt": PIP_COMPILED}, [], "Target torch: 2.7 from requirements.txt:1: torch==2.7.1"),
        ({"pyproject.toml": '[project]\nname = "p"\ndependencies = ["torch (>=2.5)"]\n'}, [],
         "Target torch: 2.5 from pyproject.toml [project] dependencies: torch (>=2.5)"),
        ({"requirements.txt": "torch[opt-einsum]>=2.2; python_version >= '3.9'\n"}, [],
         "Target torch: 2.2 from requirements.txt:1: torch[opt-einsum]>=2.2; python_version >= '3.9'"),
        ({"requirements.txt": "torch\n"}, [], "Target torch: 2.4 from default (requirements.txt:1: torch has no lower bound)"),
        ({}, [], "Target torch: 2.4 from default"),
        ({"requirements.txt": "torch>=2.1\n"}, ["--target-torch-version", "2.6"], "Target torch: 2.6 from --target-torch-version"),
    ],
)
def test_show_settings_says_where_the_target_came_from(tmp_path, monkeypatch, capsys, pins, args, shown):
    """Run from inside the project, as a user types it: the pin's file and line, or why the
    default applies."""
    for name, text in pins.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "train.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    assert cli.lint_main(["check", "--show-settings", *args, "train.py"]) == 0
    assert shown in capsys.readouterr().out.splitlines()


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
