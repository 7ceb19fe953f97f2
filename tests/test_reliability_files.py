"""Files on disk: fixes keep every byte they did not mean to change, writes are atomic and
never clobber a concurrent change, and each kind of bad input is one line on stderr while the
run goes on (see ``app/sources.py`` for the behaviour chosen for each)."""

import os
import signal
import stat

import pytest

from torchdevice_lint import api, cli
from torchdevice_lint.app import parallel, runner, sources
from torchdevice_lint.app.sources import SourceChanged, read_source, write_source

BINDING = b'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'


def run_fix(capsys, *args):
    code = cli.fix_main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_check(capsys, *args):
    code = cli.lint_main(["check", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def error_lines(err):
    return [line for line in err.splitlines() if ": error: " in line]


@pytest.mark.parametrize(
    "original, expected",
    [
        pytest.param(
            b"import torch\r\nx = torch.ones(2).cuda()\r\n",
            b"import torch\r\n\r\n" + BINDING + b"\r\nx = torch.ones(2).to(device)\r\n",
            id="crlf",
        ),
        pytest.param(
            b"import torch\rx = torch.ones(2).cuda()\r",
            b"import torch\r\r" + BINDING + b"\rx = torch.ones(2).to(device)\r",
            id="cr",
        ),
        pytest.param(
            b"import torch\ndef f():\n\ttorch.cuda.synchronize()",
            b"import torch\ndef f():\n\tif torch.cuda.is_available():\n\t\ttorch.cuda.synchronize()",
            id="tabs-and-no-final-newline",
        ),
        pytest.param(
            b"\xef\xbb\xbfimport torch\nm.load_state_dict(torch.load('\xc3\xa9.pt'))\n",
            b"\xef\xbb\xbfimport torch\nm.load_state_dict(torch.load('\xc3\xa9.pt', map_location=\"cpu\"))\n",
            id="utf8-bom",
        ),
        pytest.param(
            b"# -*- coding: latin-1 -*-\nimport torch\nm.load_state_dict(torch.load('\xe9.pt'))  # caf\xe9\n",
            b"# -*- coding: latin-1 -*-\nimport torch\nm.load_state_dict(torch.load('\xe9.pt', map_location=\"cpu\"))  # caf\xe9\n",
            id="pep263-latin-1",
        ),
        pytest.param(
            b"import torch\n\x0c\nm.load_state_dict(torch.load(p))   \t# keep   spacing\n\n\n",
            b"import torch\n\x0c\nm.load_state_dict(torch.load(p, map_location=\"cpu\"))   \t# keep   spacing\n\n\n",
            id="form-feed-and-trailing-blank-lines",
        ),
    ],
)
def test_fix_preserves_encoding_line_endings_and_layout(tmp_path, capsys, original, expected):
    target = tmp_path / "model.py"
    target.write_bytes(original)
    code, _, err = run_fix(capsys, "--unsafe-fixes", str(target))
    assert error_lines(err) == []
    assert code == 0
    assert target.read_bytes() == expected


def test_file_without_applied_fix_is_not_rewritten(tmp_path, capsys):
    clean = tmp_path / "clean.py"
    clean.write_bytes(b"import torch\r\nx = torch.ones(2)\r\n")
    unsafe_only = tmp_path / "unsafe_only.py"
    unsafe_only.write_bytes(b"import torch\nx = torch.ones(2).cuda()\n")
    before = {}
    for path in (clean, unsafe_only):
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
        before[path] = os.stat(path)
    code, _, _ = run_fix(capsys, str(tmp_path))  # .cuda() needs --unsafe-fixes: nothing applies
    assert code == 1
    for path, status in before.items():
        after = os.stat(path)
        assert (after.st_mtime_ns, after.st_ino) == (status.st_mtime_ns, status.st_ino)


def test_fix_keeps_mode_bits_and_leaves_no_temporary_file(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    script.chmod(0o751)
    code, _, _ = run_fix(capsys, str(script))
    assert code == 0
    assert stat.S_IMODE(os.stat(script).st_mode) == 0o751
    assert "map_location" in script.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


@pytest.mark.usefixtures("forked_pool")  # the size limit patched here must reach the workers
def test_every_bad_input_is_one_error_line_and_the_run_goes_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sources, "MAX_FILE_BYTES", 4096)
    bad = {
        "syntax.py": b"import torch\ndef broken(:\n    torch.load(p)\n",
        "undecodable.py": b"import torch\nname = '\xff\xfe'\ntorch.load(p)\n",
        "bad_cookie.py": b"# coding: no-such-codec\nimport torch\n",
        "nul.py": b"import torch\x00\ntorch.load(p)\n",
        "huge.py": b"import torch\n" + b"x = 1\n" * 1000 + b"torch.load(p)\n",
    }
    for name, content in bad.items():
        (tmp_path / name).write_bytes(content)
    os.mkfifo(tmp_path / "pipe.py")  # reading it would block the run forever
    (tmp_path / "empty.py").write_bytes(b"")
    good = tmp_path / "good.py"
    good.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    originals = {name: (tmp_path / name).read_bytes() for name in bad}

    code, _, err = run_fix(capsys, str(tmp_path))

    errors = error_lines(err)
    assert code == 2
    assert sorted(line.split(": error: ")[0] for line in errors) == sorted(
        str(tmp_path / name) for name in [*bad, "pipe.py"]
    )
    assert all("Traceback" not in line for line in err.splitlines())
    assert "map_location" in good.read_text()
    assert (tmp_path / "empty.py").read_bytes() == b""
    assert {name: (tmp_path / name).read_bytes() for name in bad} == originals

    code, _, err = run_check(capsys, str(tmp_path))
    assert code == 2
    assert len(error_lines(err)) == len(bad) + 1


def test_empty_file_is_clean(tmp_path, capsys):
    empty = tmp_path / "__init__.py"
    empty.write_bytes(b"")
    assert run_check(capsys, str(empty))[0] == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_an_error_line(tmp_path, capsys):
    locked = tmp_path / "locked.py"
    locked.write_text("import torch\ntorch.load(p)\n")
    locked.chmod(0)
    code, _, err = run_check(capsys, str(tmp_path))
    assert code == 2
    assert error_lines(err) == [f"{locked}: error: cannot read file: Permission denied"]


def test_symlinks_in_a_walk_are_skipped_with_a_note(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    target = real / "model.py"
    target.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "alias.py").symlink_to(target)
    (tree / "linked_dir").symlink_to(real, target_is_directory=True)
    (tree / "loop").symlink_to(tree, target_is_directory=True)

    code, _, err = run_fix(capsys, str(tree))

    assert code == 0
    notes = [line for line in err.splitlines() if ": note: " in line]
    assert sorted(line.split(": note: ")[0] for line in notes) == sorted(
        str(tree / name) for name in ("alias.py", "linked_dir", "loop")
    )
    assert "map_location" not in target.read_text()


def test_explicit_symlink_is_followed_and_stays_a_link(tmp_path, capsys):
    target = tmp_path / "model.py"
    target.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    link = tmp_path / "link.py"
    link.symlink_to(target)
    code, _, err = run_fix(capsys, str(link))
    assert code == 0, err
    assert os.path.islink(link)
    assert "map_location" in target.read_text()


def test_broken_symlink_named_explicitly_is_an_error_line(tmp_path, capsys):
    link = tmp_path / "dangling.py"
    link.symlink_to(tmp_path / "missing.py")
    code, _, err = run_check(capsys, str(link))
    assert code == 2
    assert error_lines(err) == [f"{link}: error: broken symbolic link"]


def test_write_failure_is_an_error_line_and_the_file_is_kept(tmp_path, capsys, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    other = tmp_path / "other.py"
    other.write_text("import torch\nmodel.load_state_dict(torch.load('b.pt'))\n")
    real_mkstemp = sources.tempfile.mkstemp

    def failing_mkstemp(*args, **kwargs):
        if os.path.basename(kwargs["dir"]) == tmp_path.name and not failing_mkstemp.failed:
            failing_mkstemp.failed = True
            raise OSError(28, "No space left on device")
        return real_mkstemp(*args, **kwargs)

    failing_mkstemp.failed = False
    monkeypatch.setattr(sources.tempfile, "mkstemp", failing_mkstemp)
    code, _, err = run_fix(capsys, str(tmp_path))
    assert code == 2
    assert error_lines(err) == [f"{other}: error: cannot write file: No space left on device"]
    assert "map_location" not in other.read_text()
    assert "map_location" in script.read_text()


def test_read_only_file_is_reported_not_replaced(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    script.chmod(0o444)  # even for root, who may write it: no write bit means read-only
    code, _, err = run_fix(capsys, str(script))
    assert code == 2
    assert error_lines(err) == [f"{script}: error: cannot write file: file is read-only"]
    assert "map_location" not in script.read_text()


def test_a_change_made_during_the_fix_is_refixed_not_overwritten(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    real_fix_source = runner.fix_source
    edits = iter(["import torch\nmodel.load_state_dict(torch.load('edited.pt'))\n"])

    def fix_while_someone_edits(*args, **kwargs):
        outcome = real_fix_source(*args, **kwargs)
        for text in edits:
            script.write_text(text)
        return outcome

    monkeypatch.setattr(runner, "fix_source", fix_while_someone_edits)
    result = runner.fix_file(api.engine(), str(script), unsafe=False, write=True)
    assert result.error is None
    assert script.read_text() == "import torch\nmodel.load_state_dict(torch.load('edited.pt', map_location=\"cpu\"))\n"


def test_a_file_that_keeps_changing_is_reported_and_left_to_the_other_writer(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
    real_fix_source = runner.fix_source
    versions = iter(range(100))

    def fix_while_someone_keeps_editing(*args, **kwargs):
        outcome = real_fix_source(*args, **kwargs)
        script.write_text(f"import torch\nstate = torch.load('v{next(versions)}.pt')\n")
        return outcome

    monkeypatch.setattr(runner, "fix_source", fix_while_someone_keeps_editing)
    result = runner.fix_file(api.engine(), str(script), unsafe=False, write=True)
    assert result.error is not None and "kept changing" in result.error.message
    assert script.read_text() == f"import torch\nstate = torch.load('v{runner.WRITE_ATTEMPTS - 1}.pt')\n"


def test_write_source_refuses_a_stale_read(tmp_path):
    script = tmp_path / "a.py"
    script.write_text("x = 1\n")
    stale = read_source(str(script))
    script.write_text("x = 2\n")
    with pytest.raises(SourceChanged):
        write_source(stale, "x = 3\n")
    assert script.read_text() == "x = 2\n"


@pytest.fixture
def default_sigint():
    """SIGINT raising KeyboardInterrupt, as in a terminal: a shell's background job starts with
    it ignored, and the tool rightly leaves an ignored signal ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_sigint_during_a_write_is_held_until_the_file_is_complete(tmp_path, monkeypatch, default_sigint):
    script = tmp_path / "a.py"
    script.write_text("x = 1\n")
    source = read_source(str(script))
    real_fsync = os.fsync

    def interrupted_fsync(descriptor):
        # raise_signal delivers to this thread before it returns; os.kill may reach another
        # thread of the test process, and the handler then runs after the write is done
        signal.raise_signal(signal.SIGINT)
        real_fsync(descriptor)

    monkeypatch.setattr(sources.os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        write_source(source, "x = 2\n")
    assert script.read_text() == "x = 2\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]


def test_sigint_stops_the_run_after_the_file_at_hand(tmp_path, capsys, monkeypatch, default_sigint):
    paths = []
    for index in range(3):
        path = tmp_path / f"m{index}.py"
        path.write_text("import torch\nmodel.load_state_dict(torch.load('a.pt'))\n")
        paths.append(str(path))
    real_fix_file = parallel.fix_file

    def fix_file_then_interrupt(*args, **kwargs):
        result = real_fix_file(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return result

    monkeypatch.setattr(parallel, "fix_file", fix_file_then_interrupt)
    code, _, err = run_fix(capsys, *paths)
    assert code == 130
    assert "interrupted" in err
    assert ["map_location" in open(path).read() for path in paths] == [True, False, False]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
