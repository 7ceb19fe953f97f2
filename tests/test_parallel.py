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
