"""Runtime proof: each fixture program crashes on a CPU-only machine as written, runs after
``torchdevice-fix --unsafe-fixes`` on every device leg of ``torch_device``, and prints the same
numbers on each leg. The ``simcuda`` leg also shows that a copy fixed without the dataflow rules
(TDV4xx), which passes on the CPU, still breaks on a GPU.

A fixture declares its expectations in header comments:
``cpu-error`` (what the original raises here), ``needs`` (the rules its fix takes), ``gpu-error``
(what the original's mixed-device hazards raise on a GPU), ``tolerance`` (relative, for the numbers
it prints; default ``DEFAULT_TOLERANCE``), ``fix-gap: LEGS: reason`` (a known fixer limitation,
a strict xfail on those legs) and ``host-only: reason`` (the fixed program rightly puts nothing on
a device; every other fixed program must put tensors on the simulated device of its leg).

Tolerance: legs must agree to a relative 1e-3 (absolute 1e-3 for values near zero): CUDA reduces in
a different order and cuDNN convolutions use TF32 by default; ``amp_training`` states 5e-2 because
autocast really computes in float16 on CUDA and is a no-op on the CPU.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from torchdevice_lint.rules import all_rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUNNER = Path(__file__).resolve().with_name("program_runner.py")
DEFAULT_TOLERANCE = 1e-3
RUN_TIMEOUT_S = 120
DATAFLOW_PREFIX = "TDV4"  # the rules whose hazards only show on a device, never on the CPU
OPT_IN_PREFIX = "TDV9"
_HEADER = re.compile(r"^# (cpu-error|needs|gpu-error|tolerance|fix-gap|host-only): (.*)$")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@dataclass
class Fixture:
    path: Path
    cpu_error: str
    needs: List[str]
    gpu_error: Optional[str] = None
    tolerance: float = DEFAULT_TOLERANCE
    fix_gaps: Dict[str, str] = field(default_factory=dict)
    host_only: Optional[str] = None

    @property
    def name(self) -> str:
        return self.path.stem


def _parse(path: Path) -> Fixture:
    headers: Dict[str, str] = {}
    fix_gaps: Dict[str, str] = {}
    for line in path.read_text().splitlines():
        match = _HEADER.match(line)
        if match and match.group(1) == "fix-gap":
            legs, reason = match.group(2).split(": ", 1)
            fix_gaps.update({leg.strip(): reason for leg in legs.split(",")})
        elif match:
            headers[match.group(1)] = match.group(2)
    return Fixture(
        path=path,
        cpu_error=headers["cpu-error"],
        needs=headers["needs"].split(),
        gpu_error=headers.get("gpu-error"),
        tolerance=float(headers.get("tolerance", DEFAULT_TOLERANCE)),
        fix_gaps=fix_gaps,
        host_only=headers.get("host-only"),
    )


ALL_FIXTURES = [_parse(path) for path in sorted(FIXTURES.glob("*.py"))]
MIXED_DEVICE_FIXTURES = [fixture for fixture in ALL_FIXTURES if fixture.gpu_error]
AVAILABLE_RULES = {rule.code for rule in all_rules()}
SIMULATED_LEGS = ("simcuda", "simmps")


def _program_environment(leg: str) -> Dict[str, str]:
    environment = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    if leg == "cpu":
        environment["CUDA_VISIBLE_DEVICES"] = ""  # hide any GPU from the CPU leg
    return environment


@dataclass
class ProgramRun:
    """How one run of a program on one leg ended; ``placements`` counts the tensors a simulated
    leg put on its device (None on real legs)."""

    returncode: int
    stdout: str
    stderr: str
    placements: Optional[int] = None


class ProgramRuns:
    """Runs fixture programs, each program and leg once per session, two at a time (the CI
    machine has two cores). Each run is a separate process forked by ``program_runner.py``."""

    def __init__(self, scratch: Path) -> None:
        self._scratch = scratch
        self._pool = ThreadPoolExecutor(max_workers=2)
        self._runs: Dict[Tuple[str, str], Future] = {}
        self._runners: List[subprocess.Popen] = []
        self._local = threading.local()
        self._lock = threading.Lock()

    def _runner(self) -> subprocess.Popen:
        if getattr(self._local, "runner", None) is None:
            self._local.runner = subprocess.Popen(
                [sys.executable, str(RUNNER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=_program_environment("cpu"),
            )
            with self._lock:
                self._runners.append(self._local.runner)
        return self._local.runner

    def _run(self, program: Path, leg: str, number: int) -> "ProgramRun":
        stdout, stderr = (self._scratch / f"{number}.{stream}" for stream in ("out", "err"))
        job = {
            "program": str(program),
            "leg": leg,
            "environment": _program_environment(leg),
            "stdout": str(stdout),
            "stderr": str(stderr),
        }
        runner = self._runner()
        runner.stdin.write(json.dumps(job) + "\n")
        runner.stdin.flush()
        reply = runner.stdout.readline()
        assert reply, f"the program runner died running {program.name} on {leg}"
        outcome = json.loads(reply)
        return ProgramRun(outcome["returncode"], stdout.read_text(), stderr.read_text(), outcome["placements"])

    def start(self, program: Path, leg: str) -> Future:
        key = (str(program), leg)
        if key not in self._runs:
            self._runs[key] = self._pool.submit(self._run, program, leg, len(self._runs))
        return self._runs[key]

    def result(self, program: Path, leg: str) -> "ProgramRun":
        return self.start(program, leg).result(timeout=RUN_TIMEOUT_S * len(self._runs))

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)
        for runner in self._runners:
            runner.stdin.close()
            runner.wait(timeout=RUN_TIMEOUT_S)


def _fix(directory: Path, *options: str) -> None:
    fixer = shutil.which("torchdevice-fix", path=str(Path(sys.executable).parent)) or "torchdevice-fix"
    completed = subprocess.run(
        [fixer, "--unsafe-fixes", *options, *sorted(str(path) for path in directory.glob("*.py"))],
        capture_output=True,
        text=True,
    )
    assert completed.returncode in (0, 1), completed.stdout + completed.stderr


@pytest.fixture(scope="session")
def copies(tmp_path_factory) -> Dict[str, Path]:
    """The fixtures as written, fixed, and fixed without the dataflow rules ("portable")."""
    root = tmp_path_factory.mktemp("fixtures")
    directories = {kind: root / kind for kind in ("original", "fixed", "portable")}
    for directory in directories.values():
        shutil.copytree(FIXTURES, directory)
    _fix(directories["fixed"])
    portable_rules = sorted(
        code for code in AVAILABLE_RULES if not code.startswith((DATAFLOW_PREFIX, OPT_IN_PREFIX))
    )
    _fix(directories["portable"], "--select", ",".join(portable_rules))
    return directories


@pytest.fixture(scope="session")
def runs(copies, tmp_path_factory) -> ProgramRuns:
    """Start every run the tests below need up front so they overlap."""
    program_runs = ProgramRuns(tmp_path_factory.mktemp("runs"))
    for fixture in ALL_FIXTURES:
        program_runs.start(copies["original"] / fixture.path.name, "cpu")
        program_runs.start(copies["fixed"] / fixture.path.name, "cpu")
        for leg in SIMULATED_LEGS:
            program_runs.start(copies["fixed"] / fixture.path.name, leg)
    for fixture in MIXED_DEVICE_FIXTURES:
        program_runs.start(copies["portable"] / fixture.path.name, "cpu")
        program_runs.start(copies["portable"] / fixture.path.name, "simcuda")
    yield program_runs
    program_runs.close()


def _report(completed: ProgramRun) -> str:
    return f"exit {completed.returncode}\n--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr[-3000:]}"


def outputs_agree(reference: str, other: str, tolerance: float) -> bool:
    """Same text around the numbers, and the numbers equal within ``tolerance``."""
    if _NUMBER.sub("#", reference) != _NUMBER.sub("#", other):
        return False
    return all(
        math.isclose(float(a), float(b), rel_tol=tolerance, abs_tol=tolerance)
        for a, b in zip(_NUMBER.findall(reference), _NUMBER.findall(other))
    )


def _expected_failure(fixture: Fixture, leg: str) -> Optional[str]:
    """Why the fixed copy is known not to run on ``leg`` yet, or None."""
    missing = [code for code in fixture.needs if code not in AVAILABLE_RULES]
    device_leg = leg != "cpu"
    blocking = [code for code in missing if device_leg or not code.startswith(DATAFLOW_PREFIX)]
    if blocking:
        return f"the fix needs {', '.join(blocking)}, not implemented yet"
    kind = "cuda" if leg.startswith("cuda") else leg
    return fixture.fix_gaps.get(kind)


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture.name)
def test_original_fails_on_cpu(fixture: Fixture, copies, runs) -> None:
    completed = runs.result(copies["original"] / fixture.path.name, "cpu")
    assert completed.returncode != 0, _report(completed)
    assert fixture.cpu_error in completed.stderr, _report(completed)


@pytest.mark.parametrize("fixture", ALL_FIXTURES, ids=lambda fixture: fixture.name)
def test_fixed_fixture_runs_on_device(
    fixture: Fixture, torch_device, torch_device_name: str, copies, runs, request
) -> None:
    reason = _expected_failure(fixture, torch_device_name)
    if reason is not None:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=True))
    program = copies["fixed"] / fixture.path.name
    uses_device = fixture.host_only is None
    completed = runs.result(program, torch_device_name)
    assert completed.returncode == 0, _report(completed)
    assert completed.stdout.strip(), "the program printed no result"
    if torch_device_name in SIMULATED_LEGS and uses_device:
        assert completed.placements, f"the fixed program ran but never put a tensor on {torch_device_name}"
    if torch_device_name != "cpu" and "cpu" not in fixture.fix_gaps:
        reference = runs.result(program, "cpu")
        assert reference.returncode == 0, "the CPU leg failed:\n" + _report(reference)
        assert outputs_agree(reference.stdout, completed.stdout, fixture.tolerance), (
            f"{torch_device_name} and cpu legs disagree beyond {fixture.tolerance}:\n"
            f"--- cpu\n{reference.stdout}\n--- {torch_device_name}\n{completed.stdout}"
        )


@pytest.mark.parametrize("fixture", MIXED_DEVICE_FIXTURES, ids=lambda fixture: fixture.name)
def test_simcuda_catches_what_the_cpu_leg_misses(fixture: Fixture, copies, runs) -> None:
    """Fixed without the dataflow rules, the program runs on the CPU but not on a GPU."""
    program = copies["portable"] / fixture.path.name
    on_cpu = runs.result(program, "cpu")
    assert on_cpu.returncode == 0, _report(on_cpu)
    on_simcuda = runs.result(program, "simcuda")
    assert on_simcuda.returncode != 0, _report(on_simcuda)
    assert fixture.gpu_error in on_simcuda.stderr, _report(on_simcuda)


def test_outputs_agree_within_tolerance_only() -> None:
    assert outputs_agree("loss 0.12345 step 3\n", "loss 0.12350 step 3\n", 1e-3)
    assert not outputs_agree("loss 0.12345\n", "loss 0.13345\n", 1e-3)
    assert not outputs_agree("class 1\n", "label 1\n", 1e-3)
