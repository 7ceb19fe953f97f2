"""One benchmark run over the pinned corpus, printed as a table of times and the ratios that
issues 6 and 16 set targets for. Nothing here asserts: the figures go into bench/README.md.

    python bench/run.py                      # defaults sized for about 15 minutes on 2 cores
    python bench/run.py --share 1 --flake8-share 1 --torchfix-share 0.1   # the whole corpus

Every measurement is a fresh child process, timed by wall clock and by the CPU seconds
(user + system, its own children included) and peak resident memory that ``os.wait4`` reports
for it. Single-process ratios use CPU seconds, which other load on the machine disturbs far less
than wall time; the all-cores and cache ratios use wall time, which is what they change.
TorchFix and plain flake8 run from their own virtual environments under bench/.cache, made on
first use, so neither is installed next to torchdevice-lint. The start-up comparison runs the
``--baseline`` commit's ``src/`` (extracted under bench/.cache) with the same interpreter; both
trees are byte-compiled first, as an installed package is.
"""

from __future__ import annotations

import argparse
import compileall
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.corpus import BENCH_DIR, PROJECTS, corpus_files, fraction, joined_files, line_count  # noqa: E402

TORCHFIX_VERSION = "0.7.0"
TOOLS_DIR = BENCH_DIR / ".cache"

#: Parses every listed file; one that does not parse (Python 2, broken) is attempted and passed
#: over, as ``check`` does, rather than ending the baseline at the first such file.
PARSE_ONLY = """
import sys, {module}
for path in open(sys.argv[1]).read().splitlines():
    with open(path, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    try:
        {module}.{function}(text)
    except Exception:
        pass
"""


@dataclass
class Measurement:
    label: str
    files: int
    lines: int
    wall: float
    cpu: float
    peak_mib: float

    @property
    def files_per_s(self) -> float:
        return self.files / self.wall

    @property
    def lines_per_s(self) -> float:
        return self.lines / self.wall


def measure(
    label: str, command: Sequence[str], files: Sequence[Path], cwd: Optional[Path] = None, env: Optional[dict] = None
) -> Measurement:
    """Run ``command`` to completion; its output is discarded. Exit codes 0 and 1 (findings) are
    fine; 2 only says some files could not be checked, which is printed and timed all the same."""
    with tempfile.TemporaryFile(dir=TOOLS_DIR) as errors:
        start = time.perf_counter()
        child = subprocess.Popen(list(command), cwd=cwd, stdout=subprocess.DEVNULL, stderr=errors, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        exit_code = os.waitstatus_to_exitcode(status)
        if exit_code not in (0, 1):
            errors.seek(0)
            message = f"{label}: exit {exit_code}: {errors.read().decode(errors='replace')[-1500:]}"
            if exit_code != 2:
                raise RuntimeError(message)
            print(f"  note: {message}", file=sys.stderr)
    lines = sum(line_count(path) for path in files)
    result = Measurement(label, len(files), lines, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
    print(f"  {label:44} {wall:8.2f} s wall {result.cpu:8.2f} s cpu", file=sys.stderr, flush=True)
    return result


def measure_median(label: str, command: Sequence[str], files: Sequence[Path], runs: int, env: Optional[dict] = None) -> Measurement:
    """The run with the median CPU time of ``runs``: a short command's time is noisy."""
    return measure_medians([(label, env)], command, files, runs)[0]


def measure_medians(variants, command: Sequence[str], files: Sequence[Path], runs: int) -> List[Measurement]:
    """For each (label, environment): the run with the median CPU time of ``runs``, the
    variants taking turns so that a change in the machine's load hits them alike."""
    rounds = alternate([(label, command, env) for label, env in variants], files, runs)
    return [median(rounds[label], label) for label, _ in variants]


def alternate(variants, files: Sequence[Path], runs: int) -> Dict[str, List[Measurement]]:
    """Every (label, command, environment) ``runs`` times, taking turns: round ``i`` of each
    ran beside round ``i`` of the others, under the same load."""
    measured: Dict[str, List[Measurement]] = {label: [] for label, _, _ in variants}
    for run in range(runs):
        for label, command, env in variants:
            measured[label].append(measure(f"{label} (run {run + 1})", command, files, env=env))
    return measured


def median(runs: Sequence[Measurement], label: str) -> Measurement:
    middle = sorted(runs, key=lambda m: m.cpu)[len(runs) // 2]
    middle.label = label
    return middle


def paired_ratio(ours: Sequence[Measurement], reference: Sequence[Measurement]) -> str:
    """The median of the rounds' CPU ratios, and their range: the machine is shared, and one
    slow run of either side moves a single ratio a long way."""
    ratios = sorted(a.cpu / b.cpu for a, b in zip(ours, reference))
    middle = ratios[len(ratios) // 2]
    return f"{middle:.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f} over {len(ratios)} rounds)" if len(ratios) > 1 else f"{middle:.3f}"


def tool_venv(name: str, requirement: str) -> Path:
    """A virtual environment under bench/.cache holding only ``requirement``."""
    venv = TOOLS_DIR / f"venv-{name}"
    marker = venv / "installed.txt"
    if marker.exists() and marker.read_text() == requirement:
        return venv / "bin"
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", requirement], check=True)
    marker.write_text(requirement)
    return venv / "bin"


def file_list(files: Sequence[Path]) -> str:
    handle = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False, dir=TOOLS_DIR)
    handle.write("\n".join(str(path) for path in files))
    handle.close()
    return handle.name


def check_command(files: Sequence[Path], *options: str) -> List[str]:
    return [sys.executable, "-m", "torchdevice_lint.cli", "check", *options, *map(str, files)]


def baseline_env(ref: str) -> dict:
    """An environment whose ``torchdevice_lint`` is the ``src/`` of commit ``ref``."""
    target = TOOLS_DIR / f"baseline-{ref}"
    if not (target / "src").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    compileall.compile_dir(str(target / "src"), quiet=1)
    return {**os.environ, "PYTHONPATH": str(target / "src")}


def about_300_lines(corpus: Sequence[Path]) -> Dict[bool, Path]:
    """The corpus files nearest to 300 lines that the first stage rules out (False) and that it
    passes to LibCST (True)."""
    from torchdevice_lint import api

    engine = api.engine()
    chosen: Dict[bool, Tuple[int, Path]] = {}
    for path in corpus:
        source = path.read_text(encoding="utf-8")
        distance = abs(line_count(path) - 300)
        try:
            candidate = bool(engine.rules_for(str(path), source))
        except Exception:  # noqa: BLE001 - an unparsable file is no example
            continue
        if candidate not in chosen or distance < chosen[candidate][0]:
            chosen[candidate] = (distance, path)
    return {candidate: path for candidate, (_, path) in chosen.items()}


def first_stage_shares(files: Sequence[Path], shown: int = 4) -> str:
    """The share of the lines the first stage passes to LibCST (in this process, default
    rules), then each rule's own share for the ``shown`` rules that pass the most."""
    from torchdevice_lint import api

    engine = api.engine()
    total = passed = 0
    by_rule: Dict[str, int] = {}
    for path in files:
        source = path.read_text(encoding="utf-8")
        lines = line_count(path)
        total += lines
        try:
            rules = engine.rules_for(str(path), source)
        except Exception:  # noqa: BLE001 - an unparsable file goes nowhere
            continue
        passed += lines if rules else 0
        for rule in rules:
            by_rule[rule.code] = by_rule.get(rule.code, 0) + lines
    top = sorted(by_rule.items(), key=lambda item: -item[1])[:shown]
    return f"{passed / total:.1%} (" + ", ".join(f"{code} {count / total:.1%}" for code, count in top) + ")"


def concatenated(corpus: Sequence[Path], lines: int) -> Path:
    """One valid file of about ``lines`` lines: corpus files one after another (files with
    ``from __future__`` imports, which must come first, are left out)."""
    target = TOOLS_DIR / f"concatenated-{lines}.py"
    if target.exists():
        return target
    return joined_files(corpus, lines, target)


def run(args: argparse.Namespace) -> List[str]:
    TOOLS_DIR.mkdir(parents=True, exist_ok=True)
    corpus = corpus_files(args.projects)
    files = fraction(corpus, args.share)
    list_path = file_list(files)
    cores = len(os.sched_getaffinity(0))
    rows: List[Measurement] = []

    def add(measurement: Measurement) -> Measurement:
        rows.append(measurement)
        return measurement

    print(f"corpus: {len(files)} of {len(corpus)} files; {cores} cores", file=sys.stderr)
    compileall.compile_dir(str(ROOT / "src"), quiet=1)  # as installed: the environment may forbid writing .pyc
    ratios: list = []
    if args.baseline:
        old_env = baseline_env(args.baseline)
        for candidate, path in sorted(about_300_lines(corpus).items()):
            kind = "passed to LibCST" if candidate else "ruled out by the first stage"
            label = f"start-up + a {line_count(path)}-line file {kind}"
            command = check_command([path], "--no-cache")
            new, old = measure_medians([(label, None), (f"the same at {args.baseline}", old_env)], command, [path], args.startup_runs)
            add(new)
            add(old)
            ratios.append((f"{label} / {args.baseline} (cpu)", new.cpu / old.cpu, "-" if candidate else "<= 0.5"))
    add(measure("ast.parse (reference)", [sys.executable, "-c", PARSE_ONLY.format(module="ast", function="parse"), list_path], files))
    parse_command = [sys.executable, "-c", PARSE_ONLY.format(module="libcst", function="parse_module"), list_path]
    rounds = alternate(
        [("libcst.parse_module", parse_command, None), ("check -j1 --no-cache, 100%", check_command(files, "-j1", "--no-cache"), None)],
        files, args.pair_runs,
    )
    add(median(rounds["libcst.parse_module"], "libcst.parse_module"))
    by_share = {}
    for share in (0.25, 0.5):
        subset = fraction(files, share)
        by_share[share] = add(measure(f"check -j1 --no-cache, {share:.0%}", check_command(subset, "-j1", "--no-cache"), subset))
    single = by_share[1.0] = add(median(rounds["check -j1 --no-cache, 100%"], "check -j1 --no-cache, 100%"))
    pooled = add(measure(f"check -j{cores} --no-cache", check_command(files, "--no-cache"), files))
    with tempfile.TemporaryDirectory(dir=TOOLS_DIR) as cache_dir:
        cold = add(measure("check, empty cache (cold)", check_command(files, "--cache-dir", cache_dir), files))
        warm = add(measure("check, unchanged tree (warm)", check_command(files, "--cache-dir", cache_dir), files))

    ratios += [
        ("check / libcst parse (cpu, 1 process)", paired_ratio(rounds["check -j1 --no-cache, 100%"], rounds["libcst.parse_module"]), "<= 0.5"),
        (f"check -j1 / -j{cores} (wall)", single.wall / pooled.wall, f"~{cores} (both cores)"),
        (f"check -j{cores} cpu / wall (cores busy)", pooled.cpu / pooled.wall, f"~{cores}"),
        ("warm re-run / cold run (wall)", warm.wall / cold.wall, "<= 0.05"),
    ]
    per_line = {share: m.cpu / m.lines * 1e6 for share, m in by_share.items()}
    linearity = " / ".join(f"{per_line[s]:.0f}" for s in (0.25, 0.5, 1.0))
    ratios.append(("check cpu us/line at 25/50/100%", linearity, "flat"))
    ratios.append(("lines the first stage passes to LibCST (the rules passing most)", first_stage_shares(files), "-"))

    if args.flake8_share > 0:
        subset = fraction(corpus, args.flake8_share)
        flake8_bin = tool_venv("flake8", f"flake8=={_installed_version('flake8')}")
        plain_label, ours_label = f"flake8 -j1 ({len(subset)} files)", "flake8 -j1 + TDV plugin"
        flake8_rounds = alternate(
            [
                (plain_label, [str(flake8_bin / "flake8"), "-j1", "--isolated", *map(str, subset)], None),
                (ours_label, [sys.executable, "-m", "flake8", "-j1", "--isolated", *map(str, subset)], None),
            ],
            subset, args.pair_runs,
        )
        add(median(flake8_rounds[plain_label], plain_label))
        add(median(flake8_rounds[ours_label], ours_label))
        ratios.append(("flake8+plugin / flake8 (cpu, 1 process)", paired_ratio(flake8_rounds[ours_label], flake8_rounds[plain_label]), "<= 1.3"))

    if args.linear_lines:
        tiny = TOOLS_DIR / "two-lines.py"
        tiny.write_text("import torch\nx = torch.ones(2).cuda()\n")
        floor = add(measure_median("start-up + LibCST (a 2-line file)", check_command([tiny], "--no-cache"), [tiny], args.startup_runs))
        check_us, parse_us = [], []
        for lines in args.linear_lines:
            big = concatenated(corpus, lines)
            big_list = file_list([big])
            parsed = add(measure(f"libcst.parse_module, one {line_count(big)}-line file", [sys.executable, "-c", PARSE_ONLY.format(module="libcst", function="parse_module"), big_list], [big]))
            checked = add(measure(f"check, one {line_count(big)}-line file", check_command([big], "--no-cache"), [big]))
            os.unlink(big_list)
            check_us.append(f"{(checked.cpu - floor.cpu) / checked.lines * 1e6:.0f}")
            parse_us.append(f"{parsed.cpu / parsed.lines * 1e6:.0f}")
        sizes = "/".join(f"{lines // 1000}k" for lines in args.linear_lines)
        ratios.append((f"check cpu us/line, one file of {sizes} lines (start-up off)", " / ".join(check_us), "flat"))
        ratios.append(("libcst.parse_module cpu us/line, same files", " / ".join(parse_us), "(LibCST's own)"))

    if args.torchfix_share > 0:
        subset = fraction(corpus, args.torchfix_share)
        torchfix_bin = tool_venv("torchfix", f"torchfix=={TORCHFIX_VERSION}")
        torchfix = add(measure(f"torchfix -j1 ({len(subset)} files)", [str(torchfix_bin / "torchfix"), "-j", "1", *map(str, subset)], subset))
        ours = add(measure("check -j1 --no-cache, same files", check_command(subset, "-j1", "--no-cache"), subset))
        ratios.append(("torchfix / check (wall, 1 process)", torchfix.wall / ours.wall, ">= 10"))
        ratios.append(("torchfix / check (cpu, 1 process)", torchfix.cpu / ours.cpu, ">= 10"))
    research = research_files(args.research)
    if research:
        ratios += research_formats(research, args.pair_runs, add)
        if args.model_baseline:
            ratios += research_model_cost(research, args.model_baseline, args.pair_runs, add)
    else:
        print(f"no research checkouts under {', '.join(map(str, args.research))}: the output-format ratios are skipped "
              "(bench/realcode.py says how to extract them)", file=sys.stderr)
    os.unlink(list_path)
    return _table(rows, ratios, files, corpus)


#: The output formats CI integrations read, each measured against ``concise``.
MACHINE_FORMATS = ("json", "sarif", "gitlab", "rdjson")


def research_files(roots: Sequence[Path]) -> List[Path]:
    """The ``.py`` files of the research checkouts (bench/realcode/ pins them; never committed)."""
    return sorted(path for root in roots if root.is_dir() for path in root.rglob("*.py"))


def research_formats(files: Sequence[Path], runs: int, add) -> list:
    """Each machine format's CPU against ``concise`` on research code, where most files have
    findings and fixes (the pinned corpus has few): rounds taking turns, as the pairs above."""
    variants = [(f"check --output-format {name} (research)", check_command(files, "-j1", "--no-cache", "--output-format", name), None)
                for name in ("concise", *MACHINE_FORMATS)]
    rounds = alternate(variants, files, runs)
    concise = rounds[variants[0][0]]
    add(median(concise, variants[0][0]))
    ratios = []
    for (label, _, _), name in zip(variants[1:], MACHINE_FORMATS):
        add(median(rounds[label], label))
        ratios.append((f"{name} / concise on research code (cpu)", paired_ratio(rounds[label], concise), "<= 1.3"))
    return ratios


def research_model_cost(files: Sequence[Path], ref: str, runs: int, add) -> list:
    """What the project model costs: ``check`` on research code (where it reads every module of
    each project) against the ``ref`` commit's ``src/`` from before the model, rounds taking turns."""
    variants = [
        ("check -j1 --no-cache (research)", check_command(files, "-j1", "--no-cache"), None),
        (f"check -j1 --no-cache at {ref} (research)", check_command(files, "-j1", "--no-cache"), baseline_env(ref)),
    ]
    rounds = alternate(variants, files, runs)
    ours, before = (rounds[label] for label, _, _ in variants)
    add(median(ours, variants[0][0]))
    add(median(before, variants[1][0]))
    return [(f"check / check at {ref}, before the project model (research, cpu)", paired_ratio(ours, before), "<= 1.1")]


def _installed_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _table(rows: Sequence[Measurement], ratios, files, corpus) -> List[str]:
    pins = ", ".join(f"{p.name}=={p.version}" for p in PROJECTS.values())
    lines = [
        f"Corpus: {pins}; measured on {len(files)} of {len(corpus)} files.",
        "",
        "| measurement | files | lines | wall s | cpu s | files/s | lines/s | peak MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for m in rows:
        lines.append(
            f"| {m.label} | {m.files} | {m.lines} | {m.wall:.2f} | {m.cpu:.2f} | {m.files_per_s:.1f} "
            f"| {m.lines_per_s:.0f} | {m.peak_mib:.0f} |"
        )
    lines += ["", "| ratio | measured | target |", "|---|---:|---|"]
    for name, value, target in ratios:
        shown = value if isinstance(value, str) else f"{value:.3f}"
        lines.append(f"| {name} | {shown} | {target} |")
    return lines


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", nargs="*", default=None, help=f"corpus projects (default all: {', '.join(PROJECTS)})")
    parser.add_argument("--share", type=float, default=0.3, help="share of the corpus for parse/check runs (default 0.3)")
    parser.add_argument("--flake8-share", type=float, default=0.15, help="share for the flake8 runs (0 skips them)")
    parser.add_argument("--torchfix-share", type=float, default=0.03, help="share for the TorchFix comparison (0 skips it)")
    parser.add_argument("--model-baseline", default="760a656",
                        help="commit before the project model, whose check the model's cost is measured against ('' skips it)")
    parser.add_argument("--baseline", default="ca949ae", help="commit whose start-up is compared (default: before issue 16; '' skips it)")
    parser.add_argument("--startup-runs", type=int, default=5, help="runs of each start-up measurement (the median is kept)")
    parser.add_argument("--research", type=Path, nargs="*", default=[Path("/work/eval/repos"), Path("/work/eval/heldout2/repos")],
                        help="research checkouts for the output-format ratios (default: the realcode sets under /work/eval)")
    parser.add_argument("--pair-runs", type=int, default=3, help="rounds of the check/parse and flake8 pairs (medians and the ratios' range)")
    parser.add_argument("--linear-lines", type=int, nargs="*", default=[1000, 10000, 100000], help="sizes of the one-file runs")
    args = parser.parse_args(argv)
    print("\n".join(run(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
