"""Editors pipe the buffer in: `torchdevice-lint check -`, `torchdevice-fix -` and flake8's
stdin route, with the buffer's real path for messages and configuration."""

import subprocess
import sys

import pytest

BUFFER = 'import torch\nx = torch.ones(1).cuda()\nstate = torch.load("m.pt")\n'
# The state is used as loaded: the safe fix keeps each tensor's saved device where it exists.
KEEPS_SAVED_DEVICE = 'lambda storage, location: storage if location.startswith("cuda") and not torch.cuda.is_available() else None'


def run(module_args, stdin, cwd):
    return subprocess.run([sys.executable, *module_args], input=stdin, cwd=cwd, capture_output=True, text=True)


def lint(*args, stdin=BUFFER, cwd=None):
    return run(["-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())", *args], stdin, cwd)


def fix(*args, stdin=BUFFER, cwd=None):
    return run(["-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())", *args], stdin, cwd)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.torchdevice-lint]\nper-file-ignores = { "scripts/**" = ["TDV501"] }\ntarget-torch-version = "2.7"\n'
    )
    (tmp_path / "scripts").mkdir()
    return tmp_path


def test_check_stdin_uses_the_display_name_and_its_configuration(project, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")  # the editor's working directory
    path = str(project / "scripts" / "run.py")
    result = lint("check", "--output-format", "concise", "--stdin-filename", path, "-", cwd=elsewhere)
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f"{path}:2:5: TDV101 [-] `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    ]  # TDV501 is ignored for scripts/** by the project's pyproject.toml


def test_check_stdin_full_format_shows_the_buffer(project):
    result = lint("check", "--stdin-filename", "model.py", "-", cwd=project)
    assert "2 | x = torch.ones(1).cuda()" in result.stdout
    assert "\x1b[" not in result.stdout  # a pipe gets no colour


def test_check_stdin_clean_buffer_exits_0(project):
    result = lint("check", "--stdin-filename", "model.py", "-", stdin="import torch\n", cwd=project)
    assert (result.returncode, result.stdout) == (0, "")


def test_check_stdin_undecodable_buffer_is_a_one_line_error(project):
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())",
         "check", "--stdin-filename", "bad.py", "-"],
        input="# -*- coding: ascii -*-\nx = 'é'.cuda()\n".encode("utf-8"), cwd=project, capture_output=True,
    )
    assert result.returncode == 2
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bad.py: error: cannot decode file: 'ascii' codec can't decode")


def test_fix_stdin_prints_the_fixed_buffer_with_the_projects_targets(project):
    path = str(project / "model.py")
    result = fix("--unsafe-fixes", "--stdin-filename", path, "-", cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "import torch\n\n"
        'device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")\n'
        "x = torch.ones(1).to(device)\n"
        f'state = torch.load("m.pt", map_location={KEEPS_SAVED_DEVICE})\n'
    )


def test_fix_stdin_with_remaining_findings_exits_1_and_prints_the_buffer(project):
    result = fix("--stdin-filename", "model.py", "-", cwd=project)
    assert result.returncode == 1
    assert result.stdout == BUFFER.replace('torch.load("m.pt")', f'torch.load("m.pt", map_location={KEEPS_SAVED_DEVICE})')


def test_fix_stdin_syntax_error_echoes_the_buffer(project):
    broken = "import torch\ndef f(:\n    x.cuda()\n"
    result = fix("--stdin-filename", "model.py", "-", stdin=broken, cwd=project)
    assert result.returncode == 2
    assert result.stdout == broken  # an editor replacing the buffer with stdout loses nothing
    assert result.stderr.startswith("model.py: error: syntax error at 2:7")


def test_flake8_reads_stdin_with_a_display_name(project):
    pytest.importorskip("flake8")
    result = run(
        ["-m", "flake8", "--select", "TDV", "--stdin-display-name", "scripts/run.py", "-"], BUFFER, project
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        "scripts/run.py:2:5: TDV101 `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)",
        "scripts/run.py:3:9: TDV501 `torch.load(...)` without `map_location` restores tensors to the device they were saved on, which raises when a CUDA checkpoint is loaded without CUDA",
    ]


def test_flake8_stdin_opt_in_rules_need_an_explicit_selection(project):
    pytest.importorskip("flake8")
    source = "import torch\nmodel = torch.nn.DataParallel(model)\n"
    default = run(["-m", "flake8", "--select", "TDV", "--stdin-display-name", "m.py", "-"], source, project)
    assert default.stdout == ""
    strict = run(["-m", "flake8", "--select", "TDV,TDV9", "--stdin-display-name", "m.py", "-"], source, project)
    assert strict.stdout.startswith("m.py:2:9: TDV904 ")
