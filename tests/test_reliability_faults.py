"""Fault injection: workers that die, processes killed at random points of a fix, another
writer racing the fixer, a corrupt cache, a full disk. After each, no file is lost, truncated
or left with a temporary file next to it, and every other file's result is kept."""

import multiprocessing
import os
import signal

import pytest

from torchdevice_lint.analysis.engine import Engine
from torchdevice_lint.app import parallel

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
