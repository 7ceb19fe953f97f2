"""Run fixture programs in forked child processes of one process that has already imported torch.

A fresh interpreter spends seconds importing torch (and torch._dynamo, which every optimizer
pulls in); forking after the import makes each run cost only the program itself. The parent never
touches a device, so each child still meets CUDA (and ``CUDA_VISIBLE_DEVICES``) for the first time.

Protocol: one JSON job per stdin line ``{"program", "leg", "environment", "stdout", "stderr"}``;
one line per finished job on stdout ``{"returncode", "placements"}``, where ``placements`` counts
the tensors a simulated leg (``simcuda``, ``simmps``) put on its device (None on other legs).
"""

import json
import os
import runpy
import sys
import traceback

import numpy  # noqa: F401  (preloaded for the children)
import torch  # noqa: F401
import torch._dynamo  # noqa: F401
import torch.optim  # noqa: F401

from torchdevice_lint.runtime import simdevice


def _run_child(job) -> int:
    os.environ.clear()
    os.environ.update(job["environment"])
    program = job["program"]
    os.chdir(os.path.dirname(program))
    sys.argv = [program]
    sys.path[0] = os.path.dirname(program)
    try:
        if job["leg"] in simdevice.BACKENDS:
            with simdevice.simulation(job["leg"]) as active:
                try:
                    runpy.run_path(program, run_name="__main__")
                finally:
                    _write_placements(job, active.placements)
        else:
            runpy.run_path(program, run_name="__main__")
    except SystemExit as exit_request:
        return exit_request.code if isinstance(exit_request.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _placements_path(job) -> str:
    return job["stdout"] + ".placements"


def _write_placements(job, placements: int) -> None:
    with open(_placements_path(job), "w") as report:
        report.write(str(placements))


def _read_placements(job):
    try:
        with open(_placements_path(job)) as report:
            return int(report.read())
    except FileNotFoundError:
        return None


def _redirect(path: str, descriptor: int) -> None:
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(target, descriptor)
    os.close(target)


def main() -> None:
    for line in sys.stdin:
        job = json.loads(line)
        child = os.fork()
        if child == 0:
            _redirect(job["stdout"], 1)
            _redirect(job["stderr"], 2)
            code = _run_child(job)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(child, 0)
        reply = {"returncode": os.waitstatus_to_exitcode(status), "placements": _read_placements(job)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
