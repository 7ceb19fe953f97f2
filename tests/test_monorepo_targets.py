"""A repository of several projects, each pinning its own torch (a research monorepo, a course
with a folder per assignment): every file is judged and fixed for its own project's torch, the
same in ``check``, ``torchdevice-fix``, the cache, ``--show-settings``, the flake8 plugin and the
editor, and no fixed file names anything its pinned torch lacks.

Old torch cannot be installed here, so "runs on its pinned torch" is proved against the release
table (``knowledge/torch_releases.py``, itself checked by import against torch 2.13)."""

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from torchdevice_lint import cli
from torchdevice_lint.app.editor import Projects, check_buffer
from torchdevice_lint.knowledge.torch_releases import FIRST_RELEASE, has, torch_names
from torchdevice_lint.model.fixes import Applicability
from torchdevice_lint.model.settings import parse_version

TRAIN = "import torch\n\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    x = torch.zeros(3).cuda()\n"
#: project -> (the file that pins torch, its text, the release it pins)
PROJECTS = {
    "projA": ("requirements.txt", "torch==1.8.0\n", "1.8"),
    "projB": ("pyproject.toml", '[project]\nname = "b"\ndependencies = ["torch>=2.7"]\n', "2.7"),
    "projC": ("environment.yml", "name: c\nchannels:\n  - pytorch\ndependencies:\n  - python=3.8\n  - pytorch=1.8.1\n", "1.8"),
    "projD": ("setup.py", 'from setuptools import setup\nsetup(name="d", install_requires=["torch>=1.9,<2"])\n', "1.9"),
}


@pytest.fixture
def monorepo(tmp_path, monkeypatch):
    for name, (pin_file, text, _) in PROJECTS.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / pin_file).write_text(text)
        (tmp_path / name / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def run(capsys):
    """``run("fix", ...)`` is ``torchdevice-fix ...``, ``run("check", ...)`` is
    ``torchdevice-lint check ...``, in the monorepo's root."""
    def run(command, *args):
        code = cli.fix_main(list(args)) if command == "fix" else cli.lint_main([command, *args])
        out, err = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out, stderr=err)

    return run


def test_fixed_from_the_root_each_file_names_only_what_its_pinned_torch_has(monorepo, run):
    result = run("fix", "--unsafe-fixes", ".")
    assert result.returncode == 1, result.stderr  # the AMP calls of the old projects remain
    for name, (_, _, pinned) in PROJECTS.items():
        fixed = (monorepo / name / "train.py").read_text()
        written = torch_names(fixed) - torch_names(TRAIN)
        assert written and all(n in FIRST_RELEASE for n in written), (name, written)
        assert [n for n in written if not has(parse_version(pinned), n)] == [], name
    assert (monorepo / "projB" / "train.py").read_text() == (
        "import torch\n\n"
        'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")\n\n'
        'scaler = torch.amp.GradScaler("cuda")\nwith torch.amp.autocast("cuda"):\n    x = torch.zeros(3).to(device)\n'
    )
    for old in ("projA", "projC", "projD"):
        assert (monorepo / old / "train.py").read_text() == (
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n'
            "scaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    x = torch.zeros(3).to(device)\n"
        )


def test_the_fixed_programs_run(monorepo, run):
    """On the installed torch (a CPU build), every fixed program runs: the old projects' AMP
    calls only warn there, and the device binding picks the CPU."""
    pytest.importorskip("torch")
    run("fix", "--unsafe-fixes", ".")
    for name in PROJECTS:
        program = subprocess.run([sys.executable, "-W", "ignore", "train.py"], cwd=monorepo / name, capture_output=True, text=True)
        assert program.returncode == 0, (name, program.stderr)


def test_what_remains_is_named_with_the_reason_and_the_targets_are_summed_up(monorepo, run):
    result = run("fix", "--unsafe-fixes", "--diff", ".")
    err = result.stderr
    assert "6 findings remain after the fixes (TDV302 x6)" in err
    assert (
        "projA/train.py:5:10: TDV302 has no fix for the target torch 1.8 (requirements.txt:1: torch==1.8.0): "
        "Use `torch.amp.GradScaler(device.type, ...)` (needs `target-torch-version` 2.3). If the code need not run on "
        'older torch, set target-torch-version = "2.3" in [tool.torchdevice-lint] or pass --target-torch-version 2.3.'
    ) in err.splitlines()
    assert "projD/train.py:6:6: TDV302 has no fix for the target torch 1.9 (setup.py install_requires: torch>=1.9,<2): " in err
    assert "(needs `target-torch-version` 1.10)" in err
    assert err.splitlines()[-4:] == [
        "Target torch per project (fixes write only names it has):",
        "  1.8: projA/requirements.txt:1: torch==1.8.0; projC/environment.yml: pytorch=1.8.1",
        "  1.9: projD/setup.py install_requires: torch>=1.9,<2",
        "  2.7: projB/pyproject.toml [project] dependencies: torch>=2.7",
    ]


def test_show_settings_names_the_project_root_and_the_pin(monorepo, run):
    result = run("check", "--show-settings", "projC/train.py")
    lines = result.stdout.splitlines()
    assert lines[2:4] == [f'Project root: "{monorepo / "projC"}"', "Target torch: 1.8 from projC/environment.yml: pytorch=1.8.1"]
    assert 'target-torch-version = "1.8"' in lines and 'target-torch-source = "environment.yml: pytorch=1.8.1"' in lines
    assert 'device-expression = "torch.device(\\"cuda\\" if torch.cuda.is_available() else \\"cpu\\")"' in lines


def findings_by_project(run, monorepo, *args):
    result = run("check", "--output-format", "json", "--cache-dir", str(monorepo / "cache"), *args, ".")
    found = {}
    for item in json.loads(result.stdout):
        found.setdefault(item["filename"].split("/")[0], []).append((item["code"], item["fix"] and item["fix"]["applicability"]))
    return found


def test_check_and_its_cache_answer_per_project(monorepo, run):
    fresh = findings_by_project(run, monorepo)
    assert fresh["projB"] == [("TDV302", "safe"), ("TDV302", "safe"), ("TDV101", "unsafe")]
    # the AMP fixes their torch lacks are suggestions that name the release they need
    assert fresh["projA"] == fresh["projC"] == fresh["projD"] == [("TDV302", "display-only"), ("TDV302", "display-only"), ("TDV101", "unsafe")]
    assert findings_by_project(run, monorepo) == fresh  # from the cache: one file per target torch
    assert len(list((monorepo / "cache").glob("results-*.json"))) == 3


def test_an_explicit_target_in_the_governing_configuration_wins(monorepo, run):
    (monorepo / "pyproject.toml").write_text('[tool.torchdevice-lint]\ntarget-torch-version = "2.3"\n')
    found = findings_by_project(run, monorepo)
    assert {name: found[name][0] for name in PROJECTS} == {name: ("TDV302", "safe") for name in PROJECTS}
    result = run("check", "--show-settings", "projA/train.py")
    assert f"Target torch: 2.3 from {monorepo / 'pyproject.toml'} [tool.torchdevice-lint] target-torch-version" in result.stdout


def test_the_flake8_plugin_judges_each_file_for_its_project(monorepo):
    """flake8 shows messages only: a TDV303 finding's message says when the project's torch has
    no availability check for the backend (``torch.xpu`` came in 2.4)."""
    for name in PROJECTS:
        (monorepo / name / "dist.py").write_text('import torch.distributed as dist\n\ndist.init_process_group("xccl")\n')
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TDV303", "--format", "%(path)s %(text)s", "."],
        cwd=monorepo, capture_output=True, text=True,
    )
    found = "`\"xccl\"` makes `init_process_group` use XCCL, which needs Intel GPUs: it fails on a CPU-only machine or a Mac"
    lacking = "; no fix for the target torch {}: `torch.xpu.is_available` needs torch 2.4 (set `target-torch-version`, or require a newer torch)"
    assert sorted(result.stdout.splitlines()) == [
        f"./projA/dist.py {found}{lacking.format('1.8')}",
        f"./projB/dist.py {found}",
        f"./projC/dist.py {found}{lacking.format('1.8')}",
        f"./projD/dist.py {found}{lacking.format('1.9')}",
    ]


def test_the_editor_offers_each_file_the_fixes_of_its_project(monorepo):
    projects = Projects(unsafe_fixes=True)
    fixes = {}
    for name in PROJECTS:
        path = str(monorepo / name / "train.py")
        engine, error = projects.engine_for(path)
        assert error is None
        checked = check_buffer(engine, f"file://{path}", path, TRAIN)
        fixes[name] = [finding.fix is not None and finding.fix.applicability is not Applicability.DISPLAY_ONLY for _, finding in checked.findings]
    assert fixes == {"projA": [False, False, True], "projB": [True, True, True], "projC": [False, False, True], "projD": [False, False, True]}
    assert projects.engine_for(str(monorepo / "projA" / "train.py"))[0] is projects.engine_for(str(monorepo / "projC" / "x.py"))[0]


DEVICE_OLD = 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")'
DEVICE_MPS = 'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'
DEVICE_ACCELERATOR = 'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'
HAZARD = "import torch\nx = torch.zeros(3).cuda()\n"


def test_a_project_inside_another_and_a_file_outside_any_project(monorepo, run):
    """projB/legacy pins its own old torch inside projB; a script at the repository's root
    belongs to no project and gets the default target (2.4: CUDA, MPS or the CPU)."""
    (monorepo / "projB" / "legacy").mkdir()
    (monorepo / "projB" / "legacy" / "environment.yaml").write_text("dependencies:\n  - pytorch::pytorch==1.8\n")
    for path in ("projB/legacy/old.py", "projB/new.py", "scratch.py"):
        (monorepo / path).write_text(HAZARD)
    run("fix", "--unsafe-fixes", ".")
    assert DEVICE_OLD in (monorepo / "projB" / "legacy" / "old.py").read_text().splitlines()
    assert DEVICE_ACCELERATOR in (monorepo / "projB" / "new.py").read_text().splitlines()
    assert DEVICE_MPS in (monorepo / "scratch.py").read_text().splitlines()
    shown = run("check", "--show-settings", "projB/legacy/old.py").stdout.splitlines()
    assert "Target torch: 1.8 from projB/legacy/environment.yaml: pytorch::pytorch==1.8" in shown
    assert "Target torch: 2.4 from default" in run("check", "--show-settings", "scratch.py").stdout.splitlines()


def test_a_notebook_is_fixed_for_its_project_torch(monorepo, run):
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": HAZARD.splitlines(True)}
    notebook = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (monorepo / "projA" / "explore.ipynb").write_text(json.dumps(notebook))
    run("fix", "--unsafe-fixes", "projA/explore.ipynb")
    [fixed] = json.loads((monorepo / "projA" / "explore.ipynb").read_text())["cells"]
    assert "".join(fixed["source"]) == f"import torch\n\n{DEVICE_OLD}\nx = torch.zeros(3).to(device)\n"
