"""Regression tests for issue 15: hostile input and unlucky users. Each test failed before its
fix; docs/reliability.md lists the promise each one proves."""

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.cpu_time import least_cpu_seconds
from torchdevice_lint import api, cli
from torchdevice_lint.app import cache as cache_module
from torchdevice_lint.app import parallel, runner, sources
from torchdevice_lint.app.cache import ResultCache
from torchdevice_lint.engine import batched, noqa
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.first_stage.facts import parse_facts
from torchdevice_lint.inference import calls
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.syntax import cst_statement

CHECK = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())", "check", "--no-cache"]
HAZARD = "import torch\nx = torch.ones(2).cuda()\n"
FIXED_LOAD = "import torch\nmodel.load_state_dict(torch.load('a.pt', map_location=\"cpu\"))\n"
LOAD = "import torch\nmodel.load_state_dict(torch.load('a.pt'))\n"


def run(capsys, main, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- 1. one file never kills the run ----------------------------------------------------------
def test_deeply_nested_brackets_are_one_error_line_not_a_crash(tmp_path):
    nested = tmp_path / "nested.py"
    nested.write_text(HAZARD + "y = " + "[" * 1500 + "]" * 1500 + "\n")
    (tmp_path / "good.py").write_text(HAZARD)
    result = subprocess.run(CHECK + ["--output-format", "concise", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr  # LibCST's parser used to die with SIGSEGV (139)
    assert f"{nested}: error: file is nested too deeply to analyse" in result.stderr
    assert "good.py:2:5: TDV101" in result.stdout


def test_a_long_call_chain_is_refused_before_libcst(monkeypatch):
    def no_libcst(source):
        raise AssertionError("LibCST parsed a file CPython refuses")

    monkeypatch.setattr(batched.cst, "parse_module", no_libcst)
    result = api.engine().check_source("chain.py", "import torch\nx = torch.ones(2)" + ".cuda()" * 2000 + "\n")
    assert result.error.message.startswith("file is nested too deeply to analyse")


# -- 4. time and memory linear in the file ------------------------------------------------------
def _check_seconds(statements: int) -> float:
    source = "import torch\n" + "".join(f"x{i} = torch.ones(2).cuda()\n" for i in range(statements))
    engine = api.engine()

    def check():
        assert len(engine.check_source("many.py", source).findings) == statements

    return least_cpu_seconds(check)


def test_checking_time_grows_linearly_with_the_number_of_findings():
    _check_seconds(50)  # warm up
    small, large = _check_seconds(400), _check_seconds(1600)
    # Linear is 4x; the per-finding scans that were here made it 12-15x.
    assert large / small < 8, (small, large)


def test_a_long_line_with_many_findings_is_searched_for_noqa_once(monkeypatch):
    searched = []

    class CountingPattern:
        def search(self, text):
            searched.append(len(text))
            return real.search(text)

    real = noqa.NOQA
    monkeypatch.setattr(noqa, "NOQA", CountingPattern())
    line = "x = [" + ", ".join("torch.ones(2).cuda()" for _ in range(500)) + "]  # noqa: TDV9"
    result = api.engine().check_source("wide.py", "import torch\n" + line + "\n")
    assert len(result.findings) == 500
    assert len(searched) <= 2  # the line, once (and the comment token for unused directives); was once per finding


def test_a_statement_with_many_findings_is_written_once_for_all_of_them(monkeypatch):
    written = []
    real = cst_statement.normalised
    monkeypatch.setattr(cst_statement, "normalised", lambda code: written.append(code) or real(code))
    line = "x = [" + ", ".join("torch.ones(2).cuda()" for _ in range(300)) + "]"
    result = api.engine().check_source("wide.py", "import torch\n" + line + "\n")
    assert len(result.findings) == 300
    assert len(written) == 1  # was once per finding: 300 writes of a 7,000-character statement


def test_environments_kept_for_factory_fixes_are_bounded(monkeypatch):
    monkeypatch.setattr(calls, "MAX_RECORDED_ENTRIES", 1000)
    source = "import torch\n" + "".join(f"a{i} = torch.zeros(3)\n" for i in range(300))
    inference = parse_facts(source).inferred()
    assert sum(len(env) for env in inference.factory_sites.values()) <= 1000  # 300 copies: 45,150
    assert inference.recorded_entries <= 1000


# -- 3. settings written into users' files ---------------------------------------------------
@pytest.mark.parametrize(
    "line, message",
    [
        ("device-name = \"__import__('os').system('touch pwned')\"", "device-name must be a Python identifier"),
        ('device-name = "my device"', "device-name must be a Python identifier"),
        ('device-name = "class"', "device-name must be a Python identifier"),
        ('device-expression = "torch.device(\'cpu\')  # cpu"', "device-expression must not contain a comment"),
        ('device-expression = "torch.device(\'cpu\'); import os"', "device-expression is not a Python expression"),
        ("device-expression = '''(\ntorch.device('cpu'))'''", "device-expression must be written on one line"),
        ("per-file-timeout = -1", "per-file-timeout must be a number of seconds"),
    ],
)
def test_settings_written_into_files_must_be_what_they_claim(tmp_path, capsys, line, message):
    (tmp_path / "pyproject.toml").write_text(f"[tool.torchdevice-lint]\n{line}\n")
    script = tmp_path / "a.py"
    script.write_text(HAZARD)
    code, out, err = run(capsys, cli.fix_main, "--unsafe-fixes", str(script))
    assert code == 2 and out == ""
    [error] = err.splitlines()
    assert message in error and "pyproject.toml" in error
    assert script.read_text() == HAZARD


def test_a_valid_device_name_is_used():
    settings = Settings(device_name="dev", unsafe_fixes=True)
    assert "x = torch.ones(2).to(dev)" in fix_source(api.engine(settings), "a.py", HAZARD, unsafe=True).source


# -- 5. the cache is data, never code -----------------------------------------------------------
def _cached_check(paths, directory):
    settings = Settings()
    return parallel.check_paths(api.engine(settings), paths, jobs=1, cache=ResultCache(directory, settings, False))


def _summary(results):
    return [(r.filename, str(r.error) if r.error else None, [f.as_dict() for f in r.findings]) for r in results]


@pytest.mark.parametrize(
    "tamper",
    ["not-a-list", "short-list", "row-is-text", "unknown-code", "injected-finding", "hidden-finding", "json-array"],
)
def test_malformed_or_edited_cache_entries_are_misses(tmp_path, tamper):
    script = tmp_path / "a.py"
    script.write_text(HAZARD)
    directory = tmp_path / "cache"
    cold = _cached_check([str(script)], directory)
    [cache_file] = directory.glob("results-*.json")
    entries = json.loads(cache_file.read_text())
    key = os.path.abspath(script)
    digest, data, checksum = entries[key]
    finding = data["findings"][0]
    if tamper == "not-a-list":
        entries[key] = 5
    elif tamper == "short-list":
        entries[key] = [digest]
    elif tamper == "row-is-text":
        finding["location"]["row"] = "2"
    elif tamper == "unknown-code":
        finding["code"] = "TDV999"
    elif tamper == "injected-finding":
        data["findings"].append(dict(finding, message="\x1b]0;owned\x07 run curl | sh"))
    elif tamper == "hidden-finding":
        data["findings"] = []
    else:
        entries = [entries]
    cache_file.write_text(json.dumps(entries))

    warm = _cached_check([str(script)], directory)
    assert _summary(warm) == _summary(cold)


def test_cache_marker_files_are_not_written_through_a_planted_link(tmp_path):
    victim = tmp_path / "victim"
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / ".gitignore").symlink_to(victim)
    (directory / "CACHEDIR.TAG").symlink_to(victim)
    script = tmp_path / "a.py"
    script.write_text(HAZARD)
    _cached_check([str(script)], directory)
    assert not victim.exists()
    assert list(directory.glob("results-*.json"))


def test_a_full_disk_leaves_no_temporary_cache_file(tmp_path, monkeypatch):
    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.json, "dump", disk_full)
    script = tmp_path / "a.py"
    script.write_text(HAZARD)
    _cached_check([str(script)], tmp_path / "cache")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".gitignore", "CACHEDIR.TAG"]


def test_control_characters_are_printed_as_escapes(tmp_path, capsys):
    script = tmp_path / "evil\x1b[2J\x1b]0;title\x07.py"
    script.write_text(HAZARD)
    broken = tmp_path / "also\x1b[31m\nx.py"
    broken.write_text("import torch\nx = torch.ones(2).cuda(\n")
    for output_format in ("concise", "full", "github"):
        code, out, err = run(capsys, cli.lint_main, "check", "--no-cache", "--output-format", output_format, str(tmp_path))
        assert code == 2
        assert "\x1b" not in out and "\x07" not in out and "\x1b" not in err
        assert "evil\\x1b[2J\\x1b]0;title\\x07.py" in out
        assert "also\\x1b[31m\\nx.py: error: syntax error" in err


# -- 6. a crash of the tool exits 2 -------------------------------------------------------------
def test_an_internal_error_exits_2_not_1(tmp_path, capsys, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "check_paths", crash)
    (tmp_path / "a.py").write_text(HAZARD)
    code, _, err = run(capsys, cli.lint_main, "check", str(tmp_path))
    assert code == 2
    assert err.splitlines()[-1] == "torchdevice-lint: internal error (RuntimeError); please report this as a bug"


# -- 7. writes ----------------------------------------------------------------------------------
def test_hard_links_all_see_the_fix(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(LOAD)
    other_name = tmp_path / "train_link.py"
    os.link(script, other_name)
    code, _, err = run(capsys, cli.fix_main, str(script))
    assert code == 0, err
    assert script.read_text() == other_name.read_text() == FIXED_LOAD
    assert os.stat(script).st_ino == os.stat(other_name).st_ino


def test_fix_summary_does_not_count_fixes_that_were_not_written(tmp_path, capsys):
    (tmp_path / "a.py").write_text(LOAD)
    locked = tmp_path / "b.py"
    locked.write_text(LOAD)
    locked.chmod(0o444)
    code, out, err = run(capsys, cli.fix_main, str(tmp_path))
    assert code == 2
    assert "Fixed 1 finding in 1 file (TDV501 x1)." in err
    assert "b.py" not in out  # its findings are not listed as what remains after a fix


def test_an_editor_writing_during_the_slow_part_of_a_write_is_not_overwritten(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(LOAD)
    edited = "import torch\nmodel.load_state_dict(torch.load('edited.pt'))\n"
    real_fsync = os.fsync
    edits = iter([edited])

    def editor_saves_during_fsync(descriptor):
        for text in edits:
            with open(script, "r+") as stream:  # in place, without a lock, as some editors do
                stream.write(text)
                stream.truncate()
        real_fsync(descriptor)

    monkeypatch.setattr(sources.os, "fsync", editor_saves_during_fsync)
    result = runner.fix_file(api.engine(), str(script), unsafe=False, write=True)
    assert result.error is None
    assert script.read_text() == "import torch\nmodel.load_state_dict(torch.load('edited.pt', map_location=\"cpu\"))\n"


def test_sigterm_during_a_write_lets_it_finish_and_leaves_no_temporary_file(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(LOAD)
    program = (
        "import os, signal, sys\n"
        "real_fsync = os.fsync\n"
        "def fsync(descriptor):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    real_fsync(descriptor)\n"
        "os.fsync = fsync\n"
        "from torchdevice_lint.cli import fix_main\n"
        "sys.exit(fix_main(sys.argv[1:]))\n"
    )
    result = subprocess.run([sys.executable, "-c", program, str(script)], capture_output=True, text=True)
    assert result.returncode == -signal.SIGTERM, result.stderr
    assert script.read_text() == FIXED_LOAD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_temporary_files_of_a_killed_run_are_removed_by_the_next(tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = tmp_path / f".torchdevice-{dead.pid}-abc123.tmp"
    orphan.write_text("half a file")
    script = tmp_path / "train.py"
    script.write_text(LOAD)
    sources._swept.discard(str(tmp_path))
    code, _, _ = run(capsys, cli.fix_main, str(script))
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_a_link_to_a_device_is_not_called_broken(tmp_path, capsys):
    link = tmp_path / "zero.py"
    link.symlink_to("/dev/zero")
    code, _, err = run(capsys, cli.lint_main, "check", str(link))
    assert code == 2
    assert err.splitlines()[0] == f"{link}: error: not a regular file or directory"
