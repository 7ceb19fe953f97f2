"""``torchdevice-lint check --fix/--diff/--watch`` as ruff users type them, and the ruff
configuration keys ``fixable``/``unfixable``, ``extend``, ``output-format`` and ``cache-dir``.
``check --fix`` is torchdevice-fix's run: the files it writes are the ones torchdevice-fix writes."""

import io
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from torchdevice_lint import cli

HAZARDS = (
    "import torch\n"
    "model = torch.nn.Linear(2, 2).cuda()\n"  # unsafe fix
    "model.load_state_dict(torch.load('m.pt'))\n"  # safe fix
)


def run(capsys, main, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")
    (tmp_path / "train.py").write_text(HAZARDS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_check_fix_writes_what_torchdevice_fix_writes_and_reports_what_remains(project, capsys):
    (project / "copy").mkdir()
    (project / "copy" / "train.py").write_text(HAZARDS)
    assert run(capsys, cli.fix_main, "--no-cache", "copy/train.py")[0] == 1

    code, out, err = run(capsys, cli.lint_main, "check", "--no-cache", "--fix", "--output-format", "concise", "train.py")
    assert code == 1  # a finding remains, as in ruff
    assert (project / "train.py").read_text() == (project / "copy" / "train.py").read_text()
    assert "map_location" in (project / "train.py").read_text()
    assert out == "train.py:2:9: TDV101 [-] `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)\n"
    assert "Fixed 1 finding in 1 file (TDV501 x1)." in err and "Found 1 finding" in err


def test_check_fix_with_unsafe_fixes_fixes_everything(project, capsys):
    code, out, err = run(capsys, cli.lint_main, "check", "--no-cache", "--fix", "--unsafe-fixes", "train.py")
    assert code == 0 and out == ""
    assert ".to(device)" in (project / "train.py").read_text()
    assert "All checks passed" in err


def test_check_diff_prints_torchdevice_fix_diff_and_writes_nothing(project, capsys):
    expected = run(capsys, cli.fix_main, "--no-cache", "--diff", "train.py")
    code, out, _ = run(capsys, cli.lint_main, "check", "--no-cache", "--diff", "train.py")
    assert (code, out) == expected[:2] and code == 1
    assert out.startswith("--- a/train.py\n+++ b/train.py\n") and "map_location" in out
    assert (project / "train.py").read_text() == HAZARDS


def test_check_fix_on_stdin_prints_the_fixed_buffer(project, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(HAZARDS.encode())))
    code, out, _ = run(capsys, cli.lint_main, "check", "--fix", "--stdin-filename", "train.py", "-")
    assert code == 1 and out == HAZARDS.replace("'m.pt')", "'m.pt', map_location=\"cpu\")")


def test_fix_with_add_noqa_is_a_usage_error(project, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.lint_main(["check", "--fix", "--add-noqa", "train.py"])
    assert exit.value.code == 2
    assert "--fix and --diff cannot be combined with --add-noqa" in capsys.readouterr().err


def test_unfixable_keeps_a_rules_fix_as_a_suggestion(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nunfixable = ["TDV501"]\n')
    code, out, _ = run(capsys, cli.lint_main, "check", "--no-cache", "--fix", "--unsafe-fixes", "--output-format", "concise", "train.py")
    assert code == 1 and ": TDV501 `torch.load(...)`" in out and "[*]" not in out
    assert "map_location" not in (project / "train.py").read_text() and ".to(device)" in (project / "train.py").read_text()


def test_fixable_names_the_only_rules_whose_fixes_apply(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nfixable = ["TDV101"]\n')
    assert run(capsys, cli.fix_main, "--no-cache", "--unsafe-fixes", "train.py")[0] == 1
    fixed = (project / "train.py").read_text()
    assert ".to(device)" in fixed and "map_location" not in fixed


def test_fixable_with_an_unknown_code_is_a_configuration_error(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nunfixable = ["TDV777"]\n')
    code, _, err = run(capsys, cli.lint_main, "check", "train.py")
    assert code == 2 and err.count("\n") == 1 and "unfixable" in err and "TDV777" in err


def test_extend_reads_the_extended_table_under_its_own_keys(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nignore = ["TDV501"]\noutput-format = "concise"\n')
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend = "../pyproject.toml"\nselect = ["TDV1", "TDV5"]\n')
    (project / "sub" / "train.py").write_text(HAZARDS + "torch.cuda.synchronize()\n")
    code, out, _ = run(capsys, cli.lint_main, "check", "--no-cache", "sub/train.py")
    # TDV501 ignored and concise output from the extended file; TDV301 left out by this one's select
    assert code == 1 and out.splitlines() == [line for line in out.splitlines() if "TDV101" in line] and len(out.splitlines()) == 1


def test_extend_adds_to_the_extended_files_extend_select(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend-select = ["TDV904"]\n')
    (project / "sub").mkdir()
    (project / "sub" / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend = "../pyproject.toml"\nextend-select = ["TDV902"]\n')
    (project / "sub" / "train.py").write_text("import torch\nnet = torch.nn.DataParallel(net)\nx = x.pin_memory()\n")
    code, out, _ = run(capsys, cli.lint_main, "check", "--no-cache", "--output-format", "concise", "sub/train.py")
    assert code == 1 and [line.split()[1] for line in out.splitlines()] == ["TDV904", "TDV902"]


def test_extend_in_a_circle_is_a_configuration_error(project, capsys):
    (project / "other").mkdir()
    (project / "other" / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend = "../pyproject.toml"\n')
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend = "other/pyproject.toml"\n')
    code, _, err = run(capsys, cli.lint_main, "check", "train.py")
    assert code == 2 and err.count("\n") == 1 and "extend makes a circle" in err


def test_output_format_setting_is_the_default_and_the_flag_wins(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\noutput-format = "concise"\n')
    assert run(capsys, cli.lint_main, "check", "--no-cache", "train.py")[1].startswith("train.py:2:9: TDV101 [-] ")
    assert run(capsys, cli.lint_main, "check", "--no-cache", "--output-format", "json", "train.py")[1].startswith("[")
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\noutput-format = "fancy"\n')
    code, _, err = run(capsys, cli.lint_main, "check", "train.py")
    assert code == 2 and "output-format must be one of" in err


def test_cache_dir_setting_is_relative_to_its_pyproject(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\ncache-dir = "build/tdv-cache"\n')
    (project / "sub").mkdir()
    (project / "sub" / "a.py").write_text(HAZARDS)
    os.chdir(project / "sub")
    assert run(capsys, cli.lint_main, "check", "a.py")[0] == 1
    assert list((project / "build" / "tdv-cache").iterdir())


def _lines(stream, into):
    for line in iter(stream.readline, ""):
        into.put(line)


def _drain(lines):
    time.sleep(1)  # the reading thread passes on what the process printed last
    while not lines.empty():
        yield lines.get()


def _wait_for(lines, text, seconds=60):
    deadline = time.monotonic() + seconds
    seen = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if text in line:
            return seen
    raise AssertionError(f"{text!r} not printed; got {seen!r}")


def test_watch_checks_again_when_a_file_changes_and_ctrl_c_ends_it(project):
    process = subprocess.Popen(
        [sys.executable, "-m", "torchdevice_lint", "check", "--watch", "--no-cache", "--output-format", "concise", "."],
        cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1"},
        # a shell without job control starts background jobs with SIGINT ignored, and children
        # inherit that (a CI run started with `&`): Ctrl-C must reach the watch as at a terminal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines = queue.Queue()
    threading.Thread(target=_lines, args=(process.stdout, lines), daemon=True).start()
    try:
        _wait_for(lines, "Found 2 findings")
        (project / "train.py").write_text("import torch\n")
        _wait_for(lines, "File change detected")
        _wait_for(lines, "All checks passed")
        (project / "new.py").write_text(HAZARDS)  # a new file is watched too
        assert any("new.py:2:9: TDV101" in line for line in _wait_for(lines, "Found 2 findings"))
        process.send_signal(signal.SIGINT)
        try:
            assert process.wait(timeout=30) == 0
        except subprocess.TimeoutExpired:  # faulthandler prints where it hangs, then it ends
            process.send_signal(signal.SIGABRT)
            process.wait(timeout=30)
            raise AssertionError("still running 30 s after Ctrl-C:\n" + "".join(_drain(lines)))
    finally:
        process.kill()
        process.wait()
