"""``torchdevice-fix`` over a tree uses the process pool and the result cache of ``check``, and
the cache stays small and inside projects."""

import os
import shutil
import time

import pytest

from torchdevice_lint import api, cli
from torchdevice_lint.app import cache as cache_module
from torchdevice_lint.app import parallel, runner
from torchdevice_lint.app.cache import ResultCache, default_cache_dir, prune
from torchdevice_lint.model.settings import Settings

SOURCES = [
    "import torch\nstate = torch.load('w.pt')\n",  # safe fix
    "import torch\nx = torch.ones(2).cuda()\n",  # unsafe fix only
    "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",  # clean
    "import torch\ndef broken(:\n    x.cuda()\n",  # syntax error
]


def make_tree(root, count=24):
    root.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (root / f"m{index:02}.py").write_text(SOURCES[index % len(SOURCES)] + "\n" * index)
    return sorted(str(p) for p in root.glob("*.py"))


def snapshot(root):
    return {p.name: p.read_bytes() for p in sorted(root.glob("*.py"))}


def _summary(results):
    """Each file's outcome, without the directory it was in."""
    return [(os.path.basename(r.path), r.changed, str(r.error).split(": ", 1)[1] if r.error else None, dict(r.applied),
             [{**f.as_dict(), "filename": None} for f in r.remaining.findings] if r.remaining else None) for r in results]


@pytest.mark.parametrize("unsafe", [False, True])
def test_two_jobs_fix_like_one(tmp_path, unsafe):
    one, two = make_tree(tmp_path / "one"), make_tree(tmp_path / "two")
    engine = api.engine(Settings())
    sequential = parallel.fix_paths(engine, one, unsafe, write=True, jobs=1)
    pooled = parallel.fix_paths(engine, two, unsafe, write=True, jobs=2)
    assert snapshot(tmp_path / "one") == snapshot(tmp_path / "two")
    assert _summary(sequential) == _summary(pooled)
    assert sum(r.changed for r in pooled) == (12 if unsafe else 6)


def test_a_second_fix_run_parses_only_files_with_something_to_fix(tmp_path, monkeypatch):
    paths = make_tree(tmp_path / "tree", 8)
    cache_dir = tmp_path / "cache"

    def run(unsafe):
        cache = ResultCache(cache_dir, Settings(), with_edits=False)
        return parallel.fix_paths(api.engine(Settings()), paths, unsafe, write=True, jobs=1, cache=cache)

    run(unsafe=False)  # fixes the two torch.load files; caches the six it left unchanged
    fixed = []
    original = runner.fix_file

    def counting(engine, path, *args, **kwargs):
        fixed.append(os.path.basename(path))
        return original(engine, path, *args, **kwargs)

    monkeypatch.setattr(parallel, "fix_file", counting)
    again = run(unsafe=False)
    # The two fixed files changed since, and the fixer caches no error: nothing else is parsed.
    assert sorted(fixed) == ["m00.py", "m03.py", "m04.py", "m07.py"]
    assert [r.remaining.findings[0].code for r in again if r.remaining and r.remaining.findings][:1] == ["TDV101"]
    fixed.clear()
    run(unsafe=True)  # the cached .cuda() files have an unsafe fix: they must be parsed now
    assert sorted(fixed) == ["m01.py", "m03.py", "m05.py", "m07.py"]


def test_fix_command_shares_the_cache_with_check(tmp_path, capsys, monkeypatch):
    make_tree(tmp_path / "pkg", 8)
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")
    monkeypatch.chdir(tmp_path)
    assert cli.lint_main(["check", "pkg"]) == 2  # the broken files
    checked = []
    monkeypatch.setattr(parallel, "fix_file", lambda engine, path, *a, **k: checked.append(path) or runner.fix_file(engine, path, *a, **k))
    cli.fix_main(["pkg"])
    capsys.readouterr()
    # check's cached results told the fixer which files have a safe fix (and which do not
    # parse): only those with one are parsed.
    assert sorted(os.path.basename(p) for p in checked) == ["m00.py", "m04.py"]
    assert list((tmp_path / ".torchdevice_cache").glob("results-*.json"))


def test_cache_outside_any_project_goes_to_the_user_cache_directory(tmp_path, capsys, monkeypatch, user_cache_dir):
    loose = tmp_path / "loose"
    make_tree(loose, 2)
    monkeypatch.chdir(loose)
    cli.lint_main(["check", "."])
    capsys.readouterr()
    assert not (loose / ".torchdevice_cache").exists()
    assert list(user_cache_dir.glob("torchdevice-lint/*/results-*.json"))
    assert default_cache_dir(Settings(root=str(loose)), project_root=loose) == loose / ".torchdevice_cache"


def cache_file_name(index):
    """A name as the cache gives its files (``results-`` and 20 hex digits)."""
    return f"results-{index:020x}.json"


def test_old_and_surplus_cache_files_are_pruned(tmp_path):
    directory = tmp_path / "cache"
    directory.mkdir()
    (directory / "CACHEDIR.TAG").write_text(cache_module.CACHE_TAG)
    now = time.time()
    for index in range(12):
        path = directory / cache_file_name(index)
        path.write_text("{}")
        os.utime(path, (now - index * 60, now - index * 60))
    stale = directory / cache_file_name(99)
    stale.write_text("{}")
    os.utime(stale, (now - 40 * 24 * 3600,) * 2)
    keep = directory / cache_file_name(100)
    prune(directory, keep=keep, now=now)
    left = sorted(p.name for p in directory.glob("results-*.json"))
    assert left == [cache_file_name(index) for index in range(cache_module.MAX_CACHE_FILES - 1)]


def test_entries_of_deleted_files_are_dropped(tmp_path):
    paths = make_tree(tmp_path / "tree", 3)
    cache = ResultCache(tmp_path / "cache", Settings(), False)
    parallel.check_paths(api.engine(Settings()), paths, cache=cache, jobs=1)
    os.unlink(paths[0])
    cache = ResultCache(tmp_path / "cache", Settings(), False)
    parallel.check_paths(api.engine(Settings()), paths[1:], cache=cache, jobs=1)
    assert os.path.abspath(paths[0]) not in ResultCache(tmp_path / "cache", Settings(), False)._entries


def test_saving_a_cache_prunes_the_others(tmp_path):
    directory = tmp_path / "cache"
    paths = make_tree(tmp_path / "tree", 2)
    other_settings = Settings(select=("TDV5",))
    parallel.check_paths(api.engine(other_settings), paths, cache=ResultCache(directory, other_settings, False), jobs=1)
    [old] = directory.glob("results-*.json")
    os.utime(old, (time.time() - 31 * 24 * 3600,) * 2)
    parallel.check_paths(api.engine(Settings()), paths, cache=ResultCache(directory, Settings(), False), jobs=1)
    assert not old.exists()
    assert len(list(directory.glob("results-*.json"))) == 1
    shutil.rmtree(directory)
