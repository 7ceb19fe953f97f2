"""Run real training scripts before and after ``torchdevice-fix --unsafe-fixes``.

For each program pinned in ``bench/fixed_programs.toml`` it runs, each in a forked process with
synthetic data (``bench/program_shims.py``) and long loops cut to a few iterations:

* the original on the CPU and on the simulated CUDA device (``simcuda``), which stands for the GPU
  machine it was written on;
* the output of ``torchdevice-fix --unsafe-fixes`` (applied to the program's folder) on the CPU,
  ``simcuda`` and ``simmps``.

It prints one row per program and three counts: programs broken by a fix (ran before, fail after,
on the CPU or on simcuda: must be 0), programs whose output a fix changed (ran before and after
on the same leg and printed something else: must be 0; every program that ran before is such a
control, the ones the fixer leaves alone included), and programs fixed (crashed on the CPU, run
after). A cell
reads ``ok``, ``ok, on cpu`` (a simulated leg where the program put no tensor on the device, as
a program that picks its own device with ``torch.cuda.is_available()`` does on ``simmps``),
``timeout``, or the error.
``--details`` prints the fix's diff and the error of every broken program, and how the output of
every changed control differs.

    python bench/fixed_programs.py [--root DIR] [--only NAME] [--shard K/N] [--details]
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import random
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    import tomli as tomllib

import numpy
import torch  # noqa: F401  (imported once, before the forks)
import torch.optim  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))
import program_shims  # noqa: E402

from torchdevice_lint.runtime import simdevice  # noqa: E402

PINS = Path(__file__).resolve().with_name("fixed_programs.toml")
DEFAULT_ROOT = Path(os.environ.get("TORCHDEVICE_PROGRAMS_ROOT", "/work/eval/programs/src"))
TIMEOUT_S = 120
COLUMNS = (("original", "cpu"), ("original", "simcuda"), ("fixed", "cpu"), ("fixed", "simcuda"), ("fixed", "simmps"))


@dataclass
class Program:
    repo: str
    commit: str
    path: str
    gpu_only: bool
    args: List[str]
    #: The folder under the root that holds the extracted files, ``<owner>+<name>`` unless the
    #: pins name another (a second commit of a repository already extracted at one).
    checkout: str = ""

    @property
    def name(self) -> str:
        return f"{self.repo.split('/')[1]}:{self.path}"

    def source(self, root: Path) -> Path:
        return root / (self.checkout or self.repo.replace("/", "+")) / self.path


@dataclass
class Outcome:
    ok: bool
    error: str = ""
    placements: Optional[int] = None
    timed_out: bool = False
    #: What the program printed, with the folder it ran in written as ``<dir>``.
    output: str = ""

    def cell(self) -> str:
        if self.timed_out:
            return "timeout"
        if not self.ok:
            return self.error.splitlines()[0][:70] if self.error else "failed"
        return "ok, on cpu" if self.placements == 0 else "ok"


def load_pins(path: Path = PINS) -> List[Program]:
    with open(path, "rb") as handle:
        pins = tomllib.load(handle)["program"]
    return [
        Program(p["repo"], p["commit"], p["path"], p["gpu_only"], p.get("args", []), p.get("checkout", ""))
        for p in pins
    ]


def _child(program: Path, args: List[str], leg: str, result_path: Path) -> None:
    """Runs in the forked process: the program as ``__main__`` in its own directory."""
    os.chdir(program.parent)
    sys.argv = [str(program), *args]
    sys.path[0] = str(program.parent)
    program_shims.install()
    torch.set_num_threads(1)
    # every generator the programs draw from, so that original and fixed print the same
    torch.manual_seed(0)
    numpy.random.seed(0)
    random.seed(0)
    result = {"ok": True, "error": "", "placements": None}
    globals_ = {"range": program_shims.short_range}
    try:
        if leg in simdevice.BACKENDS:
            with simdevice.simulation(leg) as active:
                try:
                    runpy.run_path(str(program), init_globals=globals_, run_name="__main__")
                finally:
                    result["placements"] = active.placements
        else:
            runpy.run_path(str(program), init_globals=globals_, run_name="__main__")
    except SystemExit as request:
        if request.code not in (None, 0):
            result.update(ok=False, error=f"SystemExit: {request.code}")
    except BaseException as error:  # noqa: B036 - the program's own failure is the result
        traceback.print_exc()
        result.update(ok=False, error=f"{type(error).__name__}: {error}".replace("\n", " "))
    result_path.write_text(json.dumps(result))


def run(program: Path, args: List[str], leg: str, timeout: int = TIMEOUT_S) -> Outcome:
    """Run ``program`` on ``leg`` in a forked child; its output goes to files beside it."""
    result_path = program.with_suffix(f".{leg}.result.json")
    sys.stdout.flush()
    child = os.fork()
    if child == 0:
        for descriptor, suffix in ((1, "out"), (2, "err")):
            target = os.open(program.with_suffix(f".{leg}.{suffix}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(target, descriptor)
        try:
            _child(program, args, leg, result_path)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        finished, _status = os.waitpid(child, os.WNOHANG)
        if finished:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        return Outcome(ok=False, timed_out=True)
    if not result_path.exists():
        return Outcome(ok=False, error="the process died without a result")
    printed = program.with_suffix(f".{leg}.out").read_text(errors="replace").replace(str(program.parent), "<dir>")
    return Outcome(**json.loads(result_path.read_text()), output=printed)


def fix(folder: Path) -> str:
    """Apply ``torchdevice-fix --unsafe-fixes`` to the program's folder (its modules hold
    placements too: a model file's ``.cuda()``); returns the unified diff of each changed file."""
    before = {path: path.read_text(errors="replace") for path in sorted(folder.rglob("*.py"))}
    fixer = shutil.which("torchdevice-fix", path=str(Path(sys.executable).parent)) or "torchdevice-fix"
    subprocess.run([fixer, "--unsafe-fixes", str(folder)], capture_output=True, text=True, check=False)
    diffs = []
    for path, text in before.items():
        name = str(path.relative_to(folder))
        after = path.read_text(errors="replace")
        diffs.extend(difflib.unified_diff(text.splitlines(True), after.splitlines(True), name, f"{name} (fixed)"))
    return "".join(diffs)


def evaluate(program: Program, root: Path, scratch: Path) -> Dict[str, object]:
    """All legs of one program; each run gets its own copy of the program's directory."""
    source = program.source(root)
    outcomes: Dict[tuple, Outcome] = {}
    diff = ""
    for variant, leg in COLUMNS:
        directory = scratch / f"{variant}-{leg}"
        shutil.copytree(source.parent, directory)
        copy = directory / source.name
        if variant == "fixed":
            diff = fix(directory)
        outcomes[(variant, leg)] = run(copy, program.args, leg)
    return {"outcomes": outcomes, "diff": diff}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="where the pinned programs are extracted")
    parser.add_argument("--only", help="run only programs whose name contains this")
    parser.add_argument("--details", action="store_true", help="print diff and error of each broken program")
    parser.add_argument("--shard", help="K/N: run only every N-th program from the K-th (1-based), one of N runs side by side")
    options = parser.parse_args(argv)
    programs = [p for p in load_pins() if options.only is None or options.only in p.name]
    if options.shard:
        number, count = (int(part) for part in options.shard.split("/"))
        programs = programs[number - 1 :: count]
    missing = [p.name for p in programs if not p.source(options.root).exists()]
    if missing:
        print(f"missing under {options.root} (see {PINS.name}): {', '.join(missing)}", file=sys.stderr)
        return 2
    header = ["program", "gpu-only"] + [f"{variant}-{leg}" for variant, leg in COLUMNS]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    broken, fixed, still_failing, changed = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="fixed-programs-") as scratch:
        for number, program in enumerate(programs):
            result = evaluate(program, options.root, Path(scratch) / str(number))
            outcomes = result["outcomes"]
            cells = [outcomes[column].cell() for column in COLUMNS]
            print(f"| {program.name} | {'yes' if program.gpu_only else 'no'} | " + " | ".join(cells) + " |", flush=True)
            for leg in ("cpu", "simcuda"):
                before, after = outcomes[("original", leg)], outcomes[("fixed", leg)]
                if before.ok and not after.ok:
                    broken.append((program, leg, result["diff"], after))
                elif before.ok and before.output != after.output:
                    changed.append((program, leg, before.output, after.output))
            if not outcomes[("original", "cpu")].ok:
                (fixed if outcomes[("fixed", "cpu")].ok else still_failing).append(program)
    print()
    print(f"programs: {len(programs)}; broken by a fix (ran before, fail after): {len({p.name for p, *_ in broken})}")
    print(f"output changed by a fix (ran before and after on a leg, printed something else): {len({p.name for p, *_ in changed})}")
    print(f"fixed (crashed on the CPU, run after): {len(fixed)} of {len(fixed) + len(still_failing)}")
    if still_failing:
        print("still failing on the CPU after the fix: " + ", ".join(p.name for p in still_failing))
    times = os.times()
    print(f"CPU seconds of the program runs: {times.children_user + times.children_system:.1f}")
    if options.details:
        for program, leg, diff, outcome in broken:
            print(f"\n### {program.name} ({program.repo}@{program.commit[:12]}) on {leg}\n{outcome.error}\n{diff}")
        for program, leg, before, after in changed:
            lines = difflib.unified_diff(before.splitlines(True), after.splitlines(True), "original", "fixed", n=1)
            print(f"\n### output of {program.name} on {leg}\n{''.join(lines)}")
    return 1 if broken or changed else 0


if __name__ == "__main__":
    sys.exit(main())
