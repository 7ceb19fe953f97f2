"""``torchdevice-fix`` over a tree: one process against the pool, and a cold against a warm
cache (the cache ``check`` fills). Prints CPU seconds (user + system, children included) and
wall seconds of each run, and the ratios, all measured in this one run.

    python bench/fix_runs.py [--root DIR ...] [--jobs 2]

The tree is copied to a temporary directory first and fixed with ``--check`` (nothing is
written), so the source checkouts are never touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIX = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
CHECK = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())", "check"]


def measured(command, cwd):
    """CPU seconds (the child and its workers) and wall seconds of one run."""
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) not in (0, 1, 2):
        raise SystemExit(f"{command} failed")
    # Workers are the child's children: RUSAGE_CHILDREN of this process covers them once reaped.
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", nargs="+", default=["/work/eval/repos"], help="directories of code to fix")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        tree = Path(scratch) / "tree"
        for root in args.root:
            shutil.copytree(root, tree / Path(root).name, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pt", "*.pth", "*.ckpt"))
        (tree / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")  # one project: one cache
        files = sum(1 for _ in tree.rglob("*.py"))
        cache = ["--cache-dir", str(Path(scratch) / "cache")]
        runs = {
            "one process, no cache": measured(FIX + ["--check", "--no-cache", "-j", "1", "."], tree),
            f"pool of {args.jobs}, no cache": measured(FIX + ["--check", "--no-cache", "-j", str(args.jobs), "."], tree),
            "cold cache (fix fills it)": measured(FIX + ["--check", "-j", str(args.jobs), *cache, "."], tree),
            "warm cache (second fix)": measured(FIX + ["--check", "-j", str(args.jobs), *cache, "."], tree),
        }
        check_then_fix = Path(scratch) / "cache2"
        measured(CHECK + ["-j", str(args.jobs), "--cache-dir", str(check_then_fix), "."], tree)
        runs["after check (its cache)"] = measured(
            FIX + ["--check", "-j", str(args.jobs), "--cache-dir", str(check_then_fix), "."], tree
        )
    print(f"torchdevice-fix --check over {files} files under {', '.join(args.root)}")
    print(f"{'run':32} {'CPU s':>8} {'wall s':>8}")
    for name, (cpu, wall) in runs.items():
        print(f"{name:32} {cpu:8.1f} {wall:8.1f}")
    base_cpu, base_wall = runs["one process, no cache"]
    pool_cpu, pool_wall = runs[f"pool of {args.jobs}, no cache"]
    print(f"pool / one process, wall: {pool_wall / base_wall:.2f}")
    print(f"warm cache / no cache, CPU: {runs['warm cache (second fix)'][0] / base_cpu:.2f}")
    print(f"after check / no cache, CPU: {runs['after check (its cache)'][0] / base_cpu:.2f}")


if __name__ == "__main__":
    main()
