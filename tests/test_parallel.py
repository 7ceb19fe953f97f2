"""The process pool: the same results, in the same order, with one process or two."""

import concurrent.futures

import pytest

from torchdevice_lint import api
from torchdevice_lint.app import parallel

SOURCES = [
    "import torch\nx = torch.ones(2).cuda()\n",
    "import torch\ny = torch.cuda.FloatTensor(3)\n",
    "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
    "import torch\ntorch.load('w.pt')\n",
    "import torch\ndef broken(:\n    x.cuda()\n",
    "import torch\n",
]


@pytest.fixture
def files(tmp_path):
    paths = []
    for index in range(24):
        path = tmp_path / f"file{index:02}.py"
        # Sizes differ so the pool's largest-first order differs from the input order.
        path.write_text(SOURCES[index % len(SOURCES)] + "\n" * index)
        paths.append(str(path))
    undecodable = tmp_path / "latin.py"
    undecodable.write_bytes(b"x = '\xff'\n")
    paths.append(str(undecodable))
    paths.append(str(tmp_path / "missing.py"))
    return paths


def _summary(results):
    return [
        (r.filename, str(r.error) if r.error else None, [f.as_dict() for f in r.findings])
        for r in results
    ]


def test_two_jobs_give_the_results_of_one(files):
    engine = api.engine()
    serial = parallel.check_paths(engine, files, with_edits=True, jobs=1)
    pooled = parallel.check_paths(engine, files, with_edits=True, jobs=2)
    assert _summary(pooled) == _summary(serial)
    assert [r.filename for r in pooled] == files
    assert sum(len(r.findings) for r in serial) >= 12
    assert sum(1 for r in serial if r.error) == 6  # 4 syntax errors, one undecodable, one missing


def test_few_files_stay_in_this_process(files, monkeypatch):
    def no_pool(*args, **kwargs):
        raise AssertionError("a pool was started")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    results = parallel.check_paths(api.engine(), files[:2 * parallel.MIN_FILES_PER_WORKER - 1], jobs=2)
    assert [f.code for f in results[0].findings] == ["TDV101"]


def test_a_process_with_other_threads_starts_its_pool_without_fork(files):
    """A fork copies only the calling thread, so a child of a process with other threads can
    deadlock (Python 3.12+ warns): such a process, here one with a waiting thread, gets the
    same results from a pool that is not forked, and no warning."""
    import subprocess
    import sys

    script = (
        "import sys, threading\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "from torchdevice_lint import api\n"
        "from torchdevice_lint.app import parallel\n"
        "print(parallel._pool_context().get_start_method())\n"
        "results = parallel.check_paths(api.engine(), sys.argv[1:], jobs=2)\n"
        "print(sum(len(r.findings) for r in results), sum(1 for r in results if r.error))\n"
    )
    run = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", script, *files],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    method, counts = run.stdout.splitlines()
    expected = parallel.check_paths(api.engine(), files, jobs=1)
    assert method != "fork"
    assert counts == f"{sum(len(r.findings) for r in expected)} {sum(1 for r in expected if r.error)}"
