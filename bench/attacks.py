"""The attempt table of issue 15: hostile input and faults tried on the command-line tools, each
reported as held or broke.

Every attempt builds its own scratch tree, runs ``torchdevice-lint``/``torchdevice-fix`` in a
subprocess (so a crash is seen as the user sees it) and checks one promise of
``docs/reliability.md``. Attempts that need root (a tmpfs) are skipped without it.

    python bench/attacks.py            # every attempt
    python bench/attacks.py cache      # the attempts whose category or name contains "cache"

Exit status 1 when an attempt broke.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional, Tuple

LINT = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())"]
FIX = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
HAZARD = "import torch\nx = torch.ones(2).cuda()\n"
LOAD = "import torch\nstate = torch.load('a.pt')\n"
FIXED_LOAD = 'import torch\nstate = torch.load(\'a.pt\', map_location="cpu")\n'

ATTEMPTS: List[Tuple[str, str, Callable[[Path], Optional[bool]]]] = []


def attempt(category: str, name: str):
    def register(function):
        ATTEMPTS.append((category, name, function))
        return function

    return register


def run(command, cwd: Path, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, capture_output=True, timeout=timeout, **kwargs)


def check(cwd: Path, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    return run(LINT + ["check", "--no-cache", "--output-format", "concise", *args], cwd, timeout)


def fix(cwd: Path, *args, timeout: float = 300) -> subprocess.CompletedProcess:
    return run(FIX + ["--unsafe-fixes", *args], cwd, timeout)


def error_lines(result: subprocess.CompletedProcess) -> List[str]:
    return [line for line in result.stderr.decode(errors="replace").splitlines() if ": error: " in line]


def clean(result: subprocess.CompletedProcess) -> bool:
    return b"Traceback" not in result.stderr and result.returncode in (0, 1, 2)


def files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def tree(root: Path, count: int, text: str = LOAD) -> Path:
    for index in range(count):
        package = root / f"pkg{index % 8}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"m{index}.py").write_text(f"# {index}\n{text}")
    return root


def one_error(result, path: Path, words: str) -> bool:
    lines = error_lines(result)
    return clean(result) and result.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{path}: error: {words}")


# -- encodings and odd files ----------------------------------------------------------------------
def _round_trip(tmp: Path, original: bytes, expected: bytes) -> bool:
    path = tmp / "a.py"
    path.write_bytes(original)
    return fix(tmp, str(path)).returncode == 0 and path.read_bytes() == expected


@attempt("input", "UTF-8 BOM kept byte for byte")
def _(tmp):
    return _round_trip(tmp, b"\xef\xbb\xbf" + LOAD.encode(), b"\xef\xbb\xbf" + FIXED_LOAD.encode())


@attempt("input", "latin-1 coding cookie kept")
def _(tmp):
    head = b"# -*- coding: latin-1 -*-\n# caf\xe9\n"
    return _round_trip(tmp, head + LOAD.encode(), head + FIXED_LOAD.encode())


@attempt("input", "CRLF line endings kept")
def _(tmp):
    return _round_trip(tmp, LOAD.replace("\n", "\r\n").encode(), FIXED_LOAD.replace("\n", "\r\n").encode())


@attempt("input", "CR-only line endings kept")
def _(tmp):
    return _round_trip(tmp, LOAD.replace("\n", "\r").encode(), FIXED_LOAD.replace("\n", "\r").encode())


@attempt("input", "NUL bytes: one error line")
def _(tmp):
    path = tmp / "a.py"
    path.write_bytes(LOAD.encode() + b"\0")
    return one_error(check(tmp, str(path)), path, "file contains NUL bytes")


@attempt("input", "bytes invalid in UTF-8: one error line")
def _(tmp):
    path = tmp / "a.py"
    path.write_bytes(LOAD.encode() + b"s = '\xff'\n")
    return one_error(check(tmp, str(path)), path, "cannot decode file")


@attempt("input", "unknown coding cookie: one error line")
def _(tmp):
    path = tmp / "a.py"
    path.write_bytes(b"# coding: no-such-codec\n" + LOAD.encode())
    return one_error(check(tmp, str(path)), path, "cannot decode file")


@attempt("input", "empty file is clean")
def _(tmp):
    (tmp / "a.py").write_bytes(b"")
    return check(tmp, "a.py").returncode == 0


@attempt("input", "FIFO named x.py does not block")
def _(tmp):
    os.mkfifo(tmp / "x.py")
    return one_error(check(tmp, ".", timeout=60), Path("x.py"), "not a regular file")


@attempt("input", "symbolic link loop does not hang")
def _(tmp):
    (tmp / "loop").symlink_to(tmp, target_is_directory=True)
    (tmp / "a.py").write_text(HAZARD)
    return check(tmp, ".", timeout=60).returncode == 1


@attempt("input", "dangling link named explicitly: 'broken symbolic link'")
def _(tmp):
    (tmp / "a.py").symlink_to(tmp / "missing.py")
    return one_error(check(tmp, "a.py"), Path("a.py"), "broken symbolic link")


@attempt("input", "link to /dev/zero: not called broken, no hang")
def _(tmp):
    (tmp / "a.py").symlink_to("/dev/zero")
    return one_error(check(tmp, "a.py", timeout=60), Path("a.py"), "not a regular file or directory")


@attempt("input", "file over 4 MiB skipped with one error line")
def _(tmp):
    (tmp / "a.py").write_text(HAZARD + "x = 1\n" * 800_000)
    return one_error(check(tmp, "a.py"), Path("a.py"), "file is too large")


@attempt("input", "unreadable file: one error line")
def _(tmp):
    if os.geteuid() == 0:
        return None  # root reads anything
    path = tmp / "a.py"
    path.write_text(HAZARD)
    path.chmod(0)
    return one_error(check(tmp, "a.py"), Path("a.py"), "cannot read file")


@attempt("input", "100 levels of indentation: one error line")
def _(tmp):
    body = "".join("    " * level + "if x:\n" for level in range(101)) + "    " * 101 + "x.cuda()\n"
    (tmp / "a.py").write_text("import torch\n" + body)
    return one_error(check(tmp, "a.py"), Path("a.py"), "")


@attempt("input", "control characters in a file name are escaped")
def _(tmp):
    (tmp / "a\x1b[2J\x07.py").write_text(HAZARD)
    result = check(tmp, ".")
    return result.returncode == 1 and b"\x1b" not in result.stdout and b"a\\x1b[2J\\x07.py" in result.stdout


@attempt("input", "a newline in a file name stays one line")
def _(tmp):
    (tmp / "a\nb.py").write_text("import torch\nx = torch.ones(2).cuda(\n")
    result = check(tmp, ".")
    return one_error(result, Path("a\\nb.py"), "syntax error")


# -- size and shape -------------------------------------------------------------------------------
@attempt("cost", "1,500 nested brackets: one error line, not a crash")
def _(tmp):
    (tmp / "a.py").write_text(HAZARD + "y = " + "[" * 1500 + "]" * 1500 + "\n")
    return one_error(check(tmp, "a.py"), Path("a.py"), "file is nested too deeply")


@attempt("cost", "1,500 nested brackets among 200 files with -j2: the others' results kept")
def _(tmp):
    tree(tmp, 200, HAZARD)
    (tmp / "pkg0" / "nested.py").write_text(HAZARD + "y = " + "(" * 1500 + ")" * 1500 + "\n")
    result = run(LINT + ["check", "--no-cache", "-j2", "--output-format", "concise", "."], tmp)
    return result.returncode == 2 and result.stdout.count(b"TDV101") == 200 and len(error_lines(result)) == 1


@attempt("cost", "2,000 chained .cuda() (14 KB) in under 10 s")
def _(tmp):
    (tmp / "a.py").write_text("import torch\nx = torch.ones(2)" + ".cuda()" * 2000 + "\n")
    started = time.monotonic()
    result = check(tmp, "a.py")
    return time.monotonic() - started < 10 and one_error(result, Path("a.py"), "file is nested too deeply")


def _cpu_seconds(tmp: Path, lines: int) -> float:
    (tmp / "pyproject.toml").write_text("[tool.torchdevice-lint]\nper-file-timeout = 0\n")
    (tmp / f"g{lines}.py").write_text("import torch\n" + "".join(f"x{i} = torch.ones(2).cuda()\n" for i in range(lines)))
    before = os.times()
    result = check(tmp, f"g{lines}.py")
    after = os.times()
    assert result.returncode == 1
    return after.children_user + after.children_system - before.children_user - before.children_system


@attempt("cost", "4x the findings cost under 6x the CPU time (was 14x)")
def _(tmp):
    small, large = _cpu_seconds(tmp, 1500), _cpu_seconds(tmp, 6000)
    print(f"    1,500 findings {small:.1f} s, 6,000 findings {large:.1f} s CPU")
    return large / small < 6


@attempt("cost", "per-file-timeout stops a 1.5 MB file, the run goes on")
def _(tmp):
    (tmp / "pyproject.toml").write_text("[tool.torchdevice-lint]\nper-file-timeout = 5\n")
    (tmp / "big.py").write_text("import torch\n" + "".join(f"x{i} = foo(bar, {i}) + baz[{i}]\n" for i in range(40_000)) + "torch.load(p)\n")
    (tmp / "small.py").write_text(HAZARD)
    started = time.monotonic()
    result = run(LINT + ["check", "--no-cache", "-j2", "--output-format", "concise", "."], tmp)
    took = time.monotonic() - started
    print(f"    {took:.0f} s wall")
    return result.returncode == 2 and b"small.py:2:5: TDV101" in result.stdout and any(
        "per-file-timeout" in line for line in error_lines(result)
    )


@attempt("cost", "2,000 files in one run")
def _(tmp):
    tree(tmp, 2000, HAZARD)
    result = run(LINT + ["check", "--no-cache", "--output-format", "concise", "."], tmp, timeout=900)
    return result.returncode == 1 and result.stdout.count(b"TDV101") == 2000


# -- configuration -------------------------------------------------------------------------------
def _config_refused(tmp: Path, line: str) -> bool:
    (tmp / "pyproject.toml").write_text(f"[tool.torchdevice-lint]\n{line}\n")
    (tmp / "a.py").write_text(HAZARD)
    result = fix(tmp, "a.py")
    lines = result.stderr.decode().splitlines()
    return result.returncode == 2 and len(lines) == 1 and (tmp / "a.py").read_text() == HAZARD


@attempt("config", "device-name that runs code is refused")
def _(tmp):
    return _config_refused(tmp, "device-name = \"__import__('os').system('touch pwned')\"")


@attempt("config", "device-name with a space is refused")
def _(tmp):
    return _config_refused(tmp, 'device-name = "my device"')


@attempt("config", "device-expression with a comment is refused")
def _(tmp):
    return _config_refused(tmp, "device-expression = \"torch.device('cpu')  # x\"")


@attempt("config", "device-expression with two statements is refused")
def _(tmp):
    return _config_refused(tmp, "device-expression = \"torch.device('cpu'); import os\"")


@attempt("config", "unknown key is refused")
def _(tmp):
    return _config_refused(tmp, "selct = ['TDV1']")


@attempt("config", "malformed TOML is one line")
def _(tmp):
    return _config_refused(tmp, "select = [")


@attempt("config", "negative per-file-timeout is refused")
def _(tmp):
    return _config_refused(tmp, "per-file-timeout = -1")


# -- the cache ------------------------------------------------------------------------------------
def _cached(tmp: Path) -> subprocess.CompletedProcess:
    return run(LINT + ["check", "--cache-dir", "cache", "--output-format", "concise", "a.py"], tmp)


def _tampered(tmp: Path, tamper: Callable[[dict, str], object]) -> bool:
    (tmp / "a.py").write_text(HAZARD)
    cold = _cached(tmp)
    [cache_file] = (tmp / "cache").glob("results-*.json")
    entries = json.loads(cache_file.read_text())
    key = str((tmp / "a.py").resolve())
    cache_file.write_text(json.dumps(tamper(entries, key)))
    warm = _cached(tmp)
    return clean(warm) and (warm.returncode, warm.stdout) == (cold.returncode, cold.stdout)


@attempt("cache", "truncated cache file is a miss")
def _(tmp):
    (tmp / "a.py").write_text(HAZARD)
    cold = _cached(tmp)
    [cache_file] = (tmp / "cache").glob("results-*.json")
    cache_file.write_bytes(cache_file.read_bytes()[:40])
    warm = _cached(tmp)
    return clean(warm) and warm.stdout == cold.stdout


@attempt("cache", "entry of the wrong type is a miss, not a traceback")
def _(tmp):
    return _tampered(tmp, lambda entries, key: {**entries, key: 5})


@attempt("cache", "row that is text is a miss")
def _(tmp):
    def tamper(entries, key):
        entries[key][1]["findings"][0]["location"]["row"] = "2"
        return entries

    return _tampered(tmp, tamper)


@attempt("cache", "injected finding with terminal escapes is not shown")
def _(tmp):
    def tamper(entries, key):
        finding = entries[key][1]["findings"][0]
        entries[key][1]["findings"].append(dict(finding, message="\x1b]0;owned\x07"))
        return entries

    return _tampered(tmp, tamper)


@attempt("cache", "removed finding is still reported")
def _(tmp):
    def tamper(entries, key):
        entries[key][1]["findings"] = []
        return entries

    return _tampered(tmp, tamper)


@attempt("cache", "cache directory that is a file: the check still runs")
def _(tmp):
    (tmp / "cache").write_text("not a directory")
    (tmp / "a.py").write_text(HAZARD)
    result = _cached(tmp)
    return result.returncode == 1 and b"TDV101" in result.stdout


@attempt("cache", "no write through a dangling link planted in the cache")
def _(tmp):
    (tmp / "cache").mkdir()
    (tmp / "cache" / ".gitignore").symlink_to(tmp / "victim")
    (tmp / "a.py").write_text(HAZARD)
    return _cached(tmp).returncode == 1 and not (tmp / "victim").exists()


# -- writes ---------------------------------------------------------------------------------------
@attempt("write", "read-only file is not rewritten (even by root)")
def _(tmp):
    path = tmp / "a.py"
    path.write_text(LOAD)
    path.chmod(0o444)
    return one_error(fix(tmp, "a.py"), Path("a.py"), "cannot write file: file is read-only") and path.read_text() == LOAD


@attempt("write", "hard links are not split")
def _(tmp):
    (tmp / "a.py").write_text(LOAD)
    os.link(tmp / "a.py", tmp / "b.py")
    return fix(tmp, "a.py").returncode == 0 and (tmp / "b.py").read_text() == FIXED_LOAD


@attempt("write", "explicit symbolic link stays a link")
def _(tmp):
    (tmp / "real.py").write_text(LOAD)
    (tmp / "a.py").symlink_to(tmp / "real.py")
    return fix(tmp, "a.py").returncode == 0 and (tmp / "a.py").is_symlink() and (tmp / "real.py").read_text() == FIXED_LOAD


@attempt("write", "mode bits kept")
def _(tmp):
    (tmp / "a.py").write_text(LOAD)
    (tmp / "a.py").chmod(0o751)
    return fix(tmp, "a.py").returncode == 0 and (tmp / "a.py").stat().st_mode & 0o777 == 0o751


@attempt("write", "file without an applied fix keeps its mtime")
def _(tmp):
    (tmp / "a.py").write_text(HAZARD)
    os.utime(tmp / "a.py", ns=(10**9, 10**9))
    run(FIX + ["a.py"], tmp)  # .cuda() needs --unsafe-fixes
    return (tmp / "a.py").stat().st_mtime_ns == 10**9


@attempt("write", "fix summary does not count a failed write")
def _(tmp):
    (tmp / "a.py").write_text(LOAD)
    (tmp / "b.py").write_text(LOAD)
    (tmp / "b.py").chmod(0o444)
    return b"Fixed 1 finding in 1 file" in fix(tmp, ".").stderr


def _stopped(tmp: Path, number: int) -> bool:
    root = tree(tmp / "tree", 300)
    originals = files(root)
    process = subprocess.Popen(FIX + ["--unsafe-fixes", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while files(root) == originals and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(number)
    process.wait(timeout=120)
    now = files(root)
    whole = all(now[name] in (originals[name], originals[name].replace(b"'a.pt')", b"'a.pt', map_location=\"cpu\")")) for name in originals)
    temporary = [name for name in now if name not in originals]
    if number == signal.SIGKILL:  # the next run removes what a killed write left
        fix(root, ".")
        temporary = [name for name in files(root) if name not in originals]
    return whole and temporary == []


@attempt("signals", "SIGINT mid-run: every file old or new, no temporary file")
def _(tmp):
    return _stopped(tmp, signal.SIGINT)


@attempt("signals", "SIGTERM mid-run: every file old or new, no temporary file")
def _(tmp):
    return _stopped(tmp, signal.SIGTERM)


@attempt("signals", "SIGKILL mid-run: every file old or new, the next run leaves no temporary file")
def _(tmp):
    return _stopped(tmp, signal.SIGKILL)


@attempt("write", "two fixers at once end as one")
def _(tmp):
    single, shared = tree(tmp / "single", 60), tree(tmp / "shared", 60)
    fix(single, ".")
    runs = [subprocess.Popen(FIX + ["--unsafe-fixes", "."], cwd=shared, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(3)]
    codes = [process.wait(timeout=600) for process in runs]
    return all(code in (0, 1) for code in codes) and files(shared) == files(single)


@attempt("write", "full disk: every file whole, no temporary file")
def _(tmp):
    disk = tmp / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(disk)], tmp).returncode:
        return None
    try:
        text = LOAD + "#" * (4080 - len(LOAD)) + "\n"  # one 4 KiB page; fixed, two
        for index in range(20):
            (disk / f"m{index}.py").write_text(text)
        with open(disk / "filler", "wb", buffering=0) as filler, contextlib.suppress(OSError):
            while True:
                filler.write(b"\0" * 4096)
        os.truncate(disk / "filler", os.path.getsize(disk / "filler") - 2 * 4096)
        result = fix(disk, ".")
        names = [p.name for p in disk.iterdir()]
        whole = all((disk / f"m{i}.py").read_text() in (text, text.replace("'a.pt')", "'a.pt', map_location=\"cpu\")")) for i in range(20))
        return result.returncode == 2 and whole and not any(name.endswith(".tmp") for name in names)
    finally:
        run(["umount", str(disk)], tmp)


# -- the tool itself ------------------------------------------------------------------------------
@attempt("process", "checked code is never imported")
def _(tmp):
    marker = tmp / "ran"
    for name in ("torch", "libcst", "conftest", "__init__"):
        (tmp / f"{name}.py").write_text(f"open({str(marker)!r}, 'w')\n" + HAZARD)
    scripts = Path(sys.executable).parent  # the console scripts, as users run them (`python -c` would import ./torch.py itself)
    if not (scripts / "torchdevice-lint").exists():
        return None
    run([str(scripts / "torchdevice-lint"), "check", "."], tmp)
    run([str(scripts / "torchdevice-fix"), "--unsafe-fixes", "."], tmp)
    return not marker.exists() and "to(device)" in (tmp / "torch.py").read_text()


@attempt("process", "a worker that dies costs only its file")
def _(tmp):
    tree(tmp, 40, HAZARD)
    program = (
        "import os, sys\n"
        "from torchdevice_lint.app import parallel\n"
        "real = parallel.check_file\n"
        "def dying(engine, path, *args, **kwargs):\n"
        "    if path.endswith('m17.py'):\n"
        "        os._exit(9)\n"
        "    return real(engine, path, *args, **kwargs)\n"
        "parallel.check_file = dying\n"
        "from torchdevice_lint.cli import lint_main\n"
        "sys.exit(lint_main(['check', '--no-cache', '-j2', '--output-format', 'concise', '.']))\n"
    )
    result = run([sys.executable, "-c", program], tmp)
    lines = error_lines(result)
    return result.returncode == 2 and result.stdout.count(b"TDV101") == 39 and len(lines) == 1 and "m17.py" in lines[0]


@attempt("process", "an internal error exits 2, not 1")
def _(tmp):
    (tmp / "a.py").write_text(HAZARD)
    program = (
        "import sys\n"
        "from torchdevice_lint import cli\n"
        "def boom(*args, **kwargs):\n"
        "    raise RuntimeError('boom')\n"
        "cli.check_paths = boom\n"
        "sys.exit(cli.lint_main(['check', 'a.py']))\n"
    )
    return run([sys.executable, "-c", program], tmp).returncode == 2


def main(argv: Optional[List[str]] = None) -> int:
    words = argv if argv is not None else sys.argv[1:]
    chosen = [a for a in ATTEMPTS if not words or any(w in a[0] or w in a[1] for w in words)]
    held = broke = skipped = 0
    broken = []
    for category, name, function in chosen:
        scratch = Path(tempfile.mkdtemp(prefix="torchdevice-attack-"))
        started = time.monotonic()
        try:
            outcome = function(scratch)
        except Exception as error:  # noqa: BLE001 - an attempt that raises broke something
            outcome = False
            name += f" ({error.__class__.__name__}: {error})"
        finally:
            subprocess.run(["chmod", "-R", "u+rwx", str(scratch)], capture_output=True)
            shutil.rmtree(scratch, ignore_errors=True)
        verdict = "skipped" if outcome is None else "held" if outcome else "BROKE"
        held += outcome is True
        broke += outcome is False
        skipped += outcome is None
        if outcome is False:
            broken.append(f"{category}: {name}")
        print(f"{verdict:8} {category:8} {name} ({time.monotonic() - started:.1f} s)", flush=True)
    print(f"\n{len(chosen)} attempts: {held} held, {broke} broke, {skipped} skipped")
    for line in broken:
        print(f"BROKE {line}")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
