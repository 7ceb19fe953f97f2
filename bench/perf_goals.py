"""The ratios issue 31 sets as goals for where users wait, each from one run of child processes
timed by their CPU seconds (``os.wait4``: user + system), on research code (the realcode
checkouts, never committed; bench/realcode.py extracts them):

- ``torchdevice-fix`` against ``check`` of the same file: files made of research modules one
  after another (1k and 10k lines), and one function of 1k and 10k lines with a finding on
  every other line (goal 3: each <= 3x, and the per-line cost flat);
- a second ``check`` with one file changed against the first, on a copy of the research tree
  with a results cache (goal 5: <= 0.1x);
- on the research files: ``check -j1`` against ``libcst.parse_module`` of the same files (goal 4:
  <= 0.9x), flake8 with the plugin against plain flake8 (its own environment, as ``run.py``
  makes it: <= 1.3x), and ``check`` of one small research file against importing LibCST and
  parsing it (<= 0.7x); rounds taking turns, the median ratio and its range.

    python bench/perf_goals.py [--research /work/eval/repos] [--lines 1000 10000]

The language server's latency is ``bench/lsp_latency.py``; the output-format ratios and the
pinned corpus's are ``bench/run.py``'s.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import joined_files  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
#: Where the generated files are checked: a project of its own (this checkout's project model
#: would read the whole pinned corpus for every run).
WORK = Path(tempfile.mkdtemp(prefix="perf-goals-"))


def cpu_of(command: Sequence[str], cwd: Path = ROOT) -> float:
    """CPU seconds of ``command`` run to completion (exit 0, 1 and 2 accepted: findings, fixes)."""
    child = subprocess.Popen(list(command), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1, 2):
        raise RuntimeError(f"{' '.join(command)}: exit {code}: {child.stderr.read().decode()[-800:]}")
    child.stderr.close()
    return usage.ru_utime + usage.ru_stime


def research_modules(roots: Sequence[Path]) -> List[Path]:
    return sorted(path for root in roots if root.is_dir() for path in root.rglob("*.py"))


def joined_research(roots: Sequence[Path], lines: int) -> Path:
    """One valid file of about ``lines`` lines: research modules one after another (those with
    ``from __future__`` imports, carriage returns or syntax errors left out)."""
    def parses(text: str) -> bool:
        try:
            ast.parse(text)
        except (SyntaxError, ValueError):
            return False
        return "\ufffd" not in text

    return joined_files(research_modules(roots), lines, WORK / f"research-joined-{lines}.py", parses)


def long_function(lines: int) -> Path:
    """One function of ``lines`` lines, a hard-coded device on every other one."""
    target = WORK / f"long-function-{lines}.py"
    body = "".join(f"    h{i} = x.cuda() + {i}\n    y = y + h{i}.sum()\n" for i in range(lines // 2))
    target.write_text(f"import torch\n\n\ndef run(x):\n    y = 0\n{body}    return y\n", encoding="utf-8")
    return target


def fix_against_check(path: Path) -> str:
    """``torchdevice-fix --diff --unsafe-fixes`` (every fix, nothing written) over ``check``."""
    check = cpu_of([sys.executable, "-m", "torchdevice_lint.cli", "check", "--no-cache", str(path)])
    fix = cpu_of([sys.executable, "-c", "from torchdevice_lint.cli import fix_main; raise SystemExit(fix_main())",
                  "--diff", "--unsafe-fixes", "--no-cache", str(path)])
    lines = path.read_text(encoding="utf-8").count("\n")
    return f"{fix / check:.2f} (fix {fix:.2f} s, check {check:.2f} s, {lines} lines)"


def second_run(roots: Sequence[Path]) -> str:
    """A copy of the research tree checked twice with one results cache, one module changed
    in between (a line added at its end)."""
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "tree"
        for root in roots:
            shutil.copytree(root, tree / root.name, ignore=shutil.ignore_patterns(".git"))
        command = [sys.executable, "-m", "torchdevice_lint.cli", "check", "-j1", "--cache-dir", str(Path(folder) / "cache"), str(tree)]
        first = cpu_of(command)
        changed = research_modules([tree])[len(research_modules([tree])) // 2]
        with changed.open("a", encoding="utf-8") as handle:
            handle.write("\nadded_by_the_benchmark = 1\n")
        second = cpu_of(command)
        files = len(research_modules([tree]))
    return f"{second / first:.3f} (second {second:.2f} s, first {first:.2f} s, {files} files)"


def research_ratios(roots: Sequence[Path], rounds: int) -> list:
    from bench.run import PARSE_ONLY, TOOLS_DIR, alternate, check_command, file_list, paired_ratio, tool_venv, _installed_version

    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    files = research_modules(roots)
    listed = file_list(files)
    parse = [sys.executable, "-c", PARSE_ONLY.format(module="libcst", function="parse_module"), listed]
    paired = alternate([("parse", parse, None), ("check", check_command(files, "-j1", "--no-cache"), None)], files, rounds)
    rows = [(f"check -j1 / libcst.parse_module, {len(files)} research files (cpu)", paired_ratio(paired["check"], paired["parse"]), "<= 0.9")]
    plain = tool_venv("flake8", f"flake8=={_installed_version('flake8')}")
    flake8 = alternate([
        ("plain", [str(plain / "flake8"), "-j1", "--isolated", *map(str, files)], None),
        ("ours", [sys.executable, "-m", "flake8", "-j1", "--isolated", *map(str, files)], None),
    ], files, rounds)
    rows.append(("flake8+plugin / flake8, same files (cpu)", paired_ratio(flake8["ours"], flake8["plain"]), "<= 1.3"))
    small = min((path for path in files if 40 <= path.read_text(errors="replace").count("\n") <= 80 and ".cuda()" in path.read_text(errors="replace")),
                key=lambda path: path.stat().st_size)
    single = file_list([small])
    startup = alternate([
        ("import+parse", [sys.executable, "-c", PARSE_ONLY.format(module="libcst", function="parse_module"), single], None),
        ("check", check_command([small], "--no-cache"), None),
    ], [small], max(rounds, 5))
    rows.append((f"check of one small file / import LibCST + parse it ({small.name})", paired_ratio(startup["check"], startup["import+parse"]), "<= 0.7"))
    os.unlink(listed)
    os.unlink(single)
    return rows


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--research", type=Path, nargs="*", default=[Path("/work/eval/repos")])
    parser.add_argument("--lines", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument("--skip", nargs="*", default=[], choices=["fix", "project", "research"])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each paired research measurement")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    (WORK / "pyproject.toml").write_text("")
    rows = []
    if "fix" not in args.skip:
        for lines in args.lines:
            rows.append((f"fix / check, research modules joined, {lines} lines", fix_against_check(joined_research(args.research, lines)), "<= 3"))
        for lines in args.lines:
            rows.append((f"fix / check, one function of {lines} lines", fix_against_check(long_function(lines)), "<= 3"))
    if "research" not in args.skip:
        rows += research_ratios(args.research, args.rounds)
    if "project" not in args.skip:
        rows.append(("second check, one file changed / first (cpu)", second_run(args.research), "<= 0.1"))
    print("| ratio | measured | target |\n|---|---|---|")
    for name, value, target in rows:
        print(f"| {name} | {value} | {target} |")
    shutil.rmtree(WORK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
