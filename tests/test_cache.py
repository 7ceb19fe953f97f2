"""The result cache: unchanged files are not checked again, anything that could change a result
(content, settings, output mode) is, and the cache directory is disposable."""

import json
import subprocess
import sys

import pytest

from torchdevice_lint import api
from torchdevice_lint.app import parallel
from torchdevice_lint.app.cache import ResultCache
from torchdevice_lint.engine.engine import Engine
from torchdevice_lint.model.settings import Settings

HAZARD = "import torch\nx = torch.ones(2).cuda()\nstate = torch.load('w.pt')\n"


@pytest.fixture
def files(tmp_path):
    paths = []
    for index in range(3):
        path = tmp_path / f"m{index}.py"
        path.write_text(HAZARD if index else "import torch\n")
        paths.append(str(path))
    return paths


def _check(paths, cache_dir, settings=Settings(), with_edits=True):
    cache = ResultCache(cache_dir, settings, with_edits)
    return parallel.check_paths(api.engine(settings), paths, with_edits, jobs=1, cache=cache)


def _as_dicts(results):
    return [[finding.as_dict() for finding in result.findings] for result in results]


def _count_checks(monkeypatch):
    checked = []
    original = Engine.check_source

    def counting(self, path, source, with_edits=False):
        checked.append(path)
        return original(self, path, source, with_edits=with_edits)

    monkeypatch.setattr(Engine, "check_source", counting)
    return checked


def test_warm_run_returns_the_same_results_without_checking(files, tmp_path, monkeypatch):
    cold = _check(files, tmp_path / "cache")
    checked = _count_checks(monkeypatch)
    warm = _check(files, tmp_path / "cache")
    assert checked == []
    assert _as_dicts(warm) == _as_dicts(cold)
    assert sum(len(r.findings) for r in warm) == 4
    assert all(f.fix is not None for r in warm for f in r.findings)


def test_changed_file_is_checked_again(files, tmp_path, monkeypatch):
    _check(files, tmp_path / "cache")
    with open(files[0], "a") as handle:
        handle.write("torch.cuda.synchronize()\n")
    checked = _count_checks(monkeypatch)
    results = _check(files, tmp_path / "cache")
    assert checked == [files[0]]
    assert [f.code for f in results[0].findings] == ["TDV301"]


def test_other_settings_or_output_mode_do_not_reuse_results(files, tmp_path, monkeypatch):
    _check(files, tmp_path / "cache")
    checked = _count_checks(monkeypatch)
    narrowed = _check(files, tmp_path / "cache", settings=Settings(select=("TDV501",)))
    assert len(checked) == 3
    assert [f.code for r in narrowed for f in r.findings] == ["TDV501", "TDV501"]
    _check(files, tmp_path / "cache", with_edits=False)
    assert len(checked) == 6


def test_results_carry_the_path_as_given(files, tmp_path, monkeypatch):
    _check(files, tmp_path / "cache")
    monkeypatch.chdir(tmp_path)
    relative = ["m1.py"]
    result = _check(relative, tmp_path / "cache")[0]
    assert result.filename == "m1.py"
    assert {f.filename for f in result.findings} == {"m1.py"}


def test_unreadable_cache_file_means_a_cold_run(files, tmp_path):
    cache = ResultCache(tmp_path / "cache", Settings(), True)
    _check(files, tmp_path / "cache")
    cache.path.write_text("{not json")
    assert sum(len(r.findings) for r in _check(files, tmp_path / "cache")) == 4
    cache.path.write_text(json.dumps({files[1]: ["digest", {"findings": "wrong"}]}))
    assert sum(len(r.findings) for r in _check(files, tmp_path / "cache")) == 4


def _lint(*args, cwd):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())"]
    return subprocess.run(command + list(args), cwd=cwd, capture_output=True, text=True)


def test_cli_keeps_a_disposable_cache_in_the_project_root_unless_told_not_to(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text(HAZARD)
    first = _lint("check", "--output-format", "json", "src", cwd=tmp_path)
    cache_dir = tmp_path / ".torchdevice_cache"
    assert (cache_dir / "CACHEDIR.TAG").exists() and (cache_dir / ".gitignore").read_text().endswith("*\n")
    second = _lint("check", "--output-format", "json", "src", cwd=tmp_path)
    assert second.returncode == first.returncode == 1 and second.stdout == first.stdout
    subprocess.run(["rm", "-r", str(cache_dir)], check=True)
    uncached = _lint("check", "--no-cache", "--output-format", "json", "src", cwd=tmp_path)
    assert uncached.stdout == first.stdout and not cache_dir.exists()


def test_files_that_cannot_be_analysed_are_answered_from_the_cache_too(tmp_path, monkeypatch):
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\ndef f(:\n    x.cuda()\n")
    cold = _check([str(broken)], tmp_path / "cache")
    checked = _count_checks(monkeypatch)
    warm = _check([str(broken)], tmp_path / "cache")
    assert checked == [] and cold[0].error is not None
    assert str(warm[0].error) == str(cold[0].error)
