"""The project model: each file is judged with what its whole project says (options parsed in
another module, attributes and predicates that read them, files saved from the CPU)."""

import subprocess
import sys
from pathlib import Path

from torchdevice_lint import api
from torchdevice_lint.project.model import Projects, project_root

OPTIONS = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_mode', type=bool, default={})\n"
MODEL = "import torch\n\n\nclass GAN:\n    def __init__(self, args):\n        self.gpu_mode = args.gpu_mode\n        if self.gpu_mode:\n            self.G = self.G.cuda()\n"


def project(tmp_path: Path, default: str) -> Path:
    (tmp_path / "main.py").write_text(OPTIONS.format(default))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "gan.py").write_text(MODEL)
    return tmp_path / "models" / "gan.py"


def codes(path: Path, projects=None):
    result = api.engine(projects=projects).check_source(str(path), path.read_text())
    return [finding.code for finding in result.findings]


def test_an_option_on_by_default_in_another_module_is_no_guard(tmp_path):
    assert codes(project(tmp_path, "True"), Projects()) == ["TDV101"]


def test_an_option_off_by_default_in_another_module_still_guards(tmp_path):
    assert codes(project(tmp_path, "False"), Projects()) == []


def test_a_file_judged_alone_keeps_the_flag_as_a_guard(tmp_path):
    assert codes(project(tmp_path, "True")) == []


def test_the_root_of_a_tree_of_scripts_is_above_its_outermost_package(tmp_path):
    model = project(tmp_path, "True")
    assert project_root(str(model)) == tmp_path
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "models" / "pyproject.toml").write_text("")
    assert project_root(str(model)) == tmp_path / "models"


def test_a_buffer_on_stdin_has_no_project():
    assert project_root("-") is None and project_root("<stdin>") is None


def test_an_open_buffer_replaces_its_file_in_the_model(tmp_path):
    model = project(tmp_path, "False")
    projects = Projects()
    assert codes(model, projects) == []
    projects.of(str(model)).update(str(tmp_path / "main.py"), OPTIONS.format("True"))
    assert codes(model, projects) == ["TDV101"]


def test_the_cached_result_of_a_file_changes_when_another_module_of_its_project_does(tmp_path):
    model = project(tmp_path, "False")
    command = [sys.executable, "-m", "torchdevice_lint", "check", "--output-format", "concise", str(model)]
    assert subprocess.run(command, capture_output=True, text=True, cwd=tmp_path).returncode == 0
    (tmp_path / "main.py").write_text(OPTIONS.format("True"))
    again = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 1 and "TDV101" in again.stdout
