"""Fault injection: workers that die, processes killed at random points of a fix, another
writer racing the fixer, a corrupt cache, a full disk. After each, no file is lost, truncated
or left with a temporary file next to it, and every other file's result is kept."""

import contextlib
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from torchdevice_lint import api, cli
from torchdevice_lint.app import parallel, runner, sources
from torchdevice_lint.app.cache import ResultCache, content_hash
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.model.settings import Settings

needs_fork = pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="the patched analysis reaches workers by fork"
)
# torch's threads, once another test imported it, would give these pools the forkserver
pytestmark = pytest.mark.usefixtures("forked_pool")


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
    results = parallel.check_paths(api.engine(), paths, jobs=2)

    assert [r.filename for r in results] == paths
    assert str(results[17].error) == f"{fatal}: error: {parallel.WORKER_DIED}"
    others = results[:17] + results[18:]
    assert all(r.error is None and [f.code for f in r.findings] == ["TDV101"] for r in others)



@needs_fork
def test_a_fixing_worker_that_dies_costs_only_its_own_file(tmp_path, monkeypatch):
    paths = _tree(tmp_path, 40)
    fatal = paths[17]
    real_fix_file = parallel.fix_file

    def fix_file_that_dies_on_one_file(engine, path, *args, **kwargs):
        if path == fatal:
            os._exit(3)
        return real_fix_file(engine, path, *args, **kwargs)

    monkeypatch.setattr(parallel, "fix_file", fix_file_that_dies_on_one_file)
    results = parallel.fix_paths(api.engine(), paths, unsafe=True, write=True, jobs=2)

    assert sorted(r.path for r in results) == sorted(paths)
    [dead] = [r for r in results if r.error is not None]
    assert str(dead.error) == f"{fatal}: error: {parallel.WORKER_DIED}"
    assert all(".to(device)" in open(path).read() for path in paths if path != fatal)
    assert ".cuda()" in open(fatal).read()

def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_file_over_the_budget_gets_an_error_and_the_run_goes_on(tmp_path, monkeypatch):
    paths = _tree(tmp_path, 3)
    engine = api.engine(Settings(per_file_timeout=0.5))
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
    assert str(results[1].error) == f"{paths[1]}: error: took longer than per-file-timeout (0.5 CPU seconds); skipped"
    assert [len(r.findings) for r in results] == [1, 0, 1]
    reloaded = ResultCache(tmp_path / "cache", engine.settings, with_edits=False)
    assert reloaded.get(paths[1], content_hash(open(paths[1], "rb").read())) is None  # a timeout is not cached


@needs_fork
def test_a_worker_stuck_where_python_cannot_interrupt_it_is_stopped(tmp_path, monkeypatch):
    paths = _tree(tmp_path, 12)
    real_check_file = parallel.check_file

    def stuck_on_one_file(engine, path, *args, **kwargs):
        if path == paths[5]:  # as inside native code: the interrupting timer's signal never arrives
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGVTALRM})
            _spin(60)
        return real_check_file(engine, path, *args, **kwargs)

    monkeypatch.setattr(parallel, "check_file", stuck_on_one_file)
    started = time.monotonic()
    results = parallel.check_paths(api.engine(Settings(per_file_timeout=0.5)), paths, jobs=2)

    assert time.monotonic() - started < 30
    assert "took longer than per-file-timeout (0.5 CPU seconds)" in str(results[5].error)
    assert all(r.error is None and len(r.findings) == 1 for r in results[:5] + results[6:])


def test_fix_over_the_budget_leaves_the_file_alone(tmp_path, monkeypatch):
    [path] = _tree(tmp_path, 1)
    before = open(path, "rb").read()
    real_fix_source = runner.fix_source

    def slow_fix(*args, **kwargs):
        _spin(30)
        return real_fix_source(*args, **kwargs)

    monkeypatch.setattr(runner, "fix_source", slow_fix)
    result = runner.fix_file(api.engine(Settings(per_file_timeout=0.5)), path, unsafe=True, write=True)
    assert "per-file-timeout" in result.error.message and not result.changed
    assert open(path, "rb").read() == before


# -- whole runs stopped at random points ---------------------------------------------------------
FIX = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())", "--unsafe-fixes"]
SNIPPETS = (
    "import torch\n\ndef step(model, batch):\n    model.cuda()\n    return model(batch.cuda(non_blocking=True))\n",
    "import torch\nstate = torch.load('ckpt.pt')\nx = torch.zeros(3, device='cuda')\n",
    "import torch as th\n\ndef sync():\n    th.cuda.synchronize()  # wait\n",
    "import torch\nx = torch.ones(2)\n",  # nothing to fix
)


def _big_tree(root, count):
    for index in range(count):
        package = root / f"pkg{index % 5}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"module_{index}.py").write_text(f"# file {index}\n" + SNIPPETS[index % len(SNIPPETS)] * (1 + index % 3))
    return root


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_fix_stopped_at_random_points_loses_nothing(tmp_path, signal_number):
    tree = _big_tree(tmp_path / "tree", 500)
    originals = _files(tree)
    engine = api.engine()
    expected = {name: fix_source(engine, name, text.decode(), unsafe=True).source.encode() for name, text in originals.items()}
    generator = random.Random(15)
    for attempt in range(3):
        run = subprocess.Popen(FIX + [str(tree)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(generator.uniform(1.0, 4.0))
        run.send_signal(signal_number)
        run.wait(timeout=120)
        if sys.platform.startswith("linux"):  # its workers end too, and write nothing after that
            assert _wait_for_group_to_end(run.pid) == [], f"attempt {attempt}: workers outlived the run"
        now = _files(tree)
        temporary = [name for name in now if name not in originals]
        if signal_number == signal.SIGTERM:
            assert temporary == [], f"attempt {attempt}: left {temporary}"
        else:  # killed mid-write: at most the one file it was writing, and never a real file's name
            assert len(temporary) <= 1 and all(sources.TEMPORARY.match(os.path.basename(n)) for n in temporary)
        for name in originals:
            assert now[name] in (originals[name], expected[name]), f"attempt {attempt}: {name} is neither old nor fixed"
    finished = subprocess.run(FIX + [str(tree)], capture_output=True, text=True, timeout=600)
    assert finished.returncode in (0, 1), finished.stderr
    assert _files(tree) == expected  # the next run removed any temporary file and fixed the rest


# -- workers whose parent is killed ---------------------------------------------------------------
needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process groups from /proc")
#: A run whose every file takes a tenth of a second longer, so its pool is busy when it is killed.
SLOW_RUN = (
    "import sys, time\n"
    "from torchdevice_lint import cli\n"
    "from torchdevice_lint.app import parallel\n"
    "for name in ('check_file', 'fix_file'):\n"
    "    def slow(*args, real=getattr(parallel, name), **kwargs):\n"
    "        time.sleep(0.1)\n"
    "        return real(*args, **kwargs)\n"
    "    setattr(parallel, name, slow)\n"
    "sys.exit(cli.fix_main(sys.argv[2:]) if sys.argv[1] == 'fix' else cli.lint_main(sys.argv[2:]))\n"
)


def _living_in_group(group):
    """The processes of a process group that are not zombies (their parent has not reaped them)."""
    living = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/stat") as stream:
                state, _, process_group = stream.read().rsplit(")", 1)[1].split()[:3]
            if int(process_group) == group and state != "Z":
                living.append(int(pid))
    return living


def _wait_for_group_to_end(group, seconds=10.0):
    """What is left of the group after ``seconds``, or [] as soon as it is gone; leftovers are
    killed, so a failing test leaves no process behind."""
    deadline = time.monotonic() + seconds
    while _living_in_group(group) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _living_in_group(group)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    return left


def _start_run(command, ready, timeout=60.0):
    """``command`` in a session of its own (its process group holds the run and its workers),
    once ``ready(run)`` is true."""
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready(run):
        assert run.poll() is None and time.monotonic() < deadline, "the run ended before its pool started"
        time.sleep(0.02)
    return run


@needs_fork
@needs_proc
@pytest.mark.parametrize("command", ["fix", "check"])
def test_the_workers_of_a_killed_run_end_within_seconds(tmp_path, command):
    paths = _tree(tmp_path, 40)
    arguments = ["--unsafe-fixes"] if command == "fix" else ["check"]
    run = _start_run([sys.executable, "-c", SLOW_RUN, command, *arguments, "-j", "2", "--no-cache", *paths],
                     ready=lambda run: len(_living_in_group(run.pid)) >= 3)  # the run and two workers
    time.sleep(0.3)
    run.kill()
    run.wait(timeout=60)
    killed = time.monotonic()
    assert _wait_for_group_to_end(run.pid, seconds=5.0) == []
    assert time.monotonic() - killed < 5.0


#: fsync of the first temporary file copies it to a marker file, then takes two seconds.
SLOW_FIRST_WRITE = (
    "import os, shutil, sys, time\n"
    "real_fsync = os.fsync\n"
    "def fsync(descriptor):\n"
    "    try:\n"
    "        os.close(os.open(sys.argv[1] + '.claimed', os.O_CREAT | os.O_EXCL))\n"
    "    except FileExistsError:\n"
    "        return real_fsync(descriptor)\n"
    "    real_fsync(descriptor)\n"
    "    shutil.copy(os.readlink(f'/proc/self/fd/{descriptor}'), sys.argv[1] + '.part')\n"
    "    os.rename(sys.argv[1] + '.part', sys.argv[1])\n"
    "    time.sleep(2)\n"
    "os.fsync = fsync\n"
    "from torchdevice_lint.cli import fix_main\n"
    "sys.exit(fix_main(sys.argv[2:]))\n"
)


@needs_fork
@needs_proc
def test_a_worker_whose_run_is_killed_mid_write_finishes_the_file_first(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    paths = _tree(tree, 40)
    originals = {path: open(path, "rb").read() for path in paths}
    engine = api.engine()
    expected = {path: fix_source(engine, path, text.decode(), unsafe=True).source.encode() for path, text in originals.items()}
    marker = tmp_path / "being-written"
    run = _start_run([sys.executable, "-c", SLOW_FIRST_WRITE, str(marker), "--unsafe-fixes", "-j", "2", "--no-cache", *paths],
                     ready=lambda run: marker.exists())
    run.kill()
    run.wait(timeout=60)
    assert _wait_for_group_to_end(run.pid, seconds=8.0) == []
    now = {path: open(path, "rb").read() for path in paths}
    assert marker.read_bytes() in now.values()  # the file in hand was written completely
    assert all(now[path] in (originals[path], expected[path]) for path in paths)
    assert sorted(p.name for p in tree.iterdir()) == sorted(os.path.basename(path) for path in paths)


@pytest.mark.slow
def test_an_editor_that_takes_the_lock_never_loses_an_edit(tmp_path):
    tree = _big_tree(tmp_path / "tree", 60)
    targets = sorted(str(p) for p in tree.rglob("*.py"))[:20]
    editor = subprocess.Popen([sys.executable, "-c", EDITOR, *targets])
    fixer = subprocess.run(FIX + [str(tree)], capture_output=True, text=True, timeout=600)
    editor.wait(timeout=600)
    assert fixer.returncode in (0, 1, 2), fixer.stderr
    assert "Traceback" not in fixer.stderr
    for path in targets:
        text = open(path).read()
        for count in range(EDITS):
            assert f"# edit {count}\n" in text, f"{path} lost edit {count}"


EDITS = 15
EDITOR = f"""
import fcntl, sys, time
for count in range({EDITS}):
    for path in sys.argv[1:]:
        with open(path, "r+") as stream:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX)
            text = stream.read()
            stream.seek(0)
            stream.write(text + "# edit %d\\n" % count)
            stream.truncate()
    time.sleep(0.05)
"""


def test_a_corrupt_cache_is_only_ever_a_miss(tmp_path):
    paths = _tree(tmp_path, 3)
    settings = Settings()
    directory = tmp_path / "cache"

    def check():
        results = parallel.check_paths(api.engine(settings), paths, jobs=1, cache=ResultCache(directory, settings, True))
        return [(str(r.error), [f.as_dict() for f in r.findings]) for r in results]

    cold = check()
    [cache_file] = directory.glob("results-*.json")
    pristine = cache_file.read_bytes()
    generator = random.Random(5)
    for _ in range(25):
        damaged = bytearray(pristine)
        how = generator.choice(["truncate", "flip", "splice"])
        position = generator.randrange(len(damaged))
        if how == "truncate":
            del damaged[position:]
        elif how == "flip":
            damaged[position] ^= 1 << generator.randrange(8)
        else:
            damaged[position:position] = generator.choice([b'"', b"]", b"{", b"\x1b[2J", b"1e999", b"null,"])
        cache_file.write_bytes(bytes(damaged))
        assert check() == cold, (how, position)


def _can_mount_tmpfs(path):
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True).returncode == 0


@pytest.mark.slow
def test_a_full_disk_leaves_every_file_whole_and_no_temporary_file(tmp_path, capsys, monkeypatch):
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("needs root and a mountable tmpfs")
    try:
        # Each file fills one 4 KiB page and its fixed text needs two: a few fixes fit (beside the
        # cache's project facts), then none.
        text = SNIPPETS[1] + "#" * (4060 - len(SNIPPETS[1])) + "\n"
        names = []
        for index in range(40):
            path = disk / f"m{index:02}.py"
            path.write_text(text)
            names.append(path)
        with open(disk / "filler", "wb", buffering=0) as filler:
            with contextlib.suppress(OSError):
                while True:
                    filler.write(b"\0" * 4096)
        os.truncate(disk / "filler", os.path.getsize(disk / "filler") - 8 * 4096)  # the cache keeps project facts too
        originals = {path: path.read_bytes() for path in names}
        monkeypatch.setenv("TORCHDEVICE_LINT_CACHE_DIR", str(disk / "cache"))
        code = cli.fix_main(["--unsafe-fixes", str(disk)])
        check = cli.lint_main(["check", str(disk)])
        err = capsys.readouterr().err
        assert code == 2 and check in (1, 2)
        assert "No space left on device" in err and "Traceback" not in err
        expected = fix_source(api.engine(), "m.py", text, unsafe=True).source.encode()
        fixed = [path for path in names if path.read_bytes() == expected]
        assert fixed and all(path.read_bytes() in (originals[path], expected) for path in names)
        leftovers = [p.name for p in disk.rglob("*") if p.name.endswith(".tmp")]
        assert leftovers == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)
