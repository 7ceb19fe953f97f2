"""Fault injection: workers that die, processes killed at random points of a fix, another
writer racing the fixer, a corrupt cache, a full disk. After each, no file is lost, truncated
or left with a temporary file next to it, and every other file's result is kept."""

import multiprocessing
import os
import signal
import time

import pytest

from torchdevice_lint.analysis.engine import Engine
from torchdevice_lint.analysis.settings import Settings
from torchdevice_lint.app import parallel, runner
from torchdevice_lint.app.cache import ResultCache, content_hash

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="the patched analysis reaches workers by fork"
)


def _tree(tmp_path, count):
    paths = []
    for index in range(count):
        path = tmp_path / f"m{index:03}.py"
        path.write_text(f"import torch\nx{index} = torch.ones(2).cuda()\n")
        paths.append(str(path))
    return paths


@needs_fork
@pytest.mark.parametrize("death", ["exit", "sigkill", "sigsegv"])
def test_a_worker_that_dies_costs_only_its_own_file(tmp_path, monkeypatch, death):
    paths = _tree(tmp_path, 40)
    fatal = paths[17]
    real_check_file = parallel.check_file

    def check_file_that_dies_on_one_file(engine, path, *args, **kwargs):
        if path == fatal:
            if death == "exit":
                os._exit(3)
            os.kill(os.getpid(), signal.SIGKILL if death == "sigkill" else signal.SIGSEGV)
        return real_check_file(engine, path, *args, **kwargs)

    monkeypatch.setattr(parallel, "check_file", check_file_that_dies_on_one_file)
    results = parallel.check_paths(Engine(), paths, jobs=2)

    assert [r.filename for r in results] == paths
    assert str(results[17].error) == f"{fatal}: error: {parallel.WORKER_DIED}"
    others = results[:17] + results[18:]
    assert all(r.error is None and [f.code for f in r.findings] == ["TDV101"] for r in others)


def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_file_over_the_budget_gets_an_error_and_the_run_goes_on(tmp_path, monkeypatch):
    paths = _tree(tmp_path, 3)
    engine = Engine(Settings(per_file_timeout=0.5))
    real_check_source = engine.check_source

    def slow_on_one_file(path, *args, **kwargs):
        if path == paths[1]:
            _spin(30)
        return real_check_source(path, *args, **kwargs)

    monkeypatch.setattr(engine, "check_source", slow_on_one_file)
    cache = ResultCache(tmp_path / "cache", engine.settings, with_edits=False)
    started = time.monotonic()
    results = parallel.check_paths(engine, paths, jobs=1, cache=cache)

    assert time.monotonic() - started < 20
    assert str(results[1].error) == f"{paths[1]}: error: took longer than per-file-timeout (0.5 s); skipped"
    assert [len(r.findings) for r in results] == [1, 0, 1]
    reloaded = ResultCache(tmp_path / "cache", engine.settings, with_edits=False)
    assert reloaded.get(paths[1], content_hash(open(paths[1], "rb").read())) is None  # a timeout is not cached


@needs_fork
def test_a_worker_stuck_where_python_cannot_interrupt_it_is_stopped(tmp_path, monkeypatch):
    paths = _tree(tmp_path, 12)
    real_check_file = parallel.check_file

    def stuck_on_one_file(engine, path, *args, **kwargs):
        if path == paths[5]:  # as inside native code: the interrupting timer's signal never arrives
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
            _spin(60)
        return real_check_file(engine, path, *args, **kwargs)

    monkeypatch.setattr(parallel, "check_file", stuck_on_one_file)
    started = time.monotonic()
    results = parallel.check_paths(Engine(Settings(per_file_timeout=0.5)), paths, jobs=2)

    assert time.monotonic() - started < 30
    assert "took longer than per-file-timeout (0.5 s)" in str(results[5].error)
    assert all(r.error is None and len(r.findings) == 1 for r in results[:5] + results[6:])


def test_fix_over_the_budget_leaves_the_file_alone(tmp_path, monkeypatch):
    [path] = _tree(tmp_path, 1)
    before = open(path, "rb").read()
    real_fix_source = runner.fix_source

    def slow_fix(*args, **kwargs):
        _spin(30)
        return real_fix_source(*args, **kwargs)

    monkeypatch.setattr(runner, "fix_source", slow_fix)
    result = runner.fix_file(Engine(Settings(per_file_timeout=0.5)), path, unsafe=True, write=True)
    assert "per-file-timeout" in result.error.message and not result.changed
    assert open(path, "rb").read() == before
