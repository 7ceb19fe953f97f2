"""Reliability over the pinned real-world corpus (``bench/corpus.py``).

For every file: ``check`` (with JSON edits) and ``fix --unsafe-fixes`` must not raise; every fixed
file must ``compile()``; a second fix must change nothing; no fixable finding may remain; and the
fix may change nothing outside the lines it meant to edit.

"The lines a fix meant to edit" are defined pass by pass, as the fixer works: the source lines
spanned by each node a chosen fix replaces (LibCST positions, comments and blank lines before a
statement excluded), plus the file-level edits a fix may need (an added or removed import line,
the inserted module-level ``device = ...`` binding, blank lines around it). Each changed hunk of a
line diff of the pass must overlap (or, for a pure insertion, touch) one of those node ranges, or
consist of file-level lines only; anything else is a byte-identity violation.

    python bench/reliability.py                   # whole corpus, all CPUs
    python bench/reliability.py timm --jobs 2     # one project
    python bench/reliability.py --cli             # also run torchdevice-fix on a copy and compare

Exit status 1 when anything but per-file input errors (syntax errors...) is found.
"""

from __future__ import annotations

import argparse
import difflib
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from torchdevice_lint import api
from torchdevice_lint.app.sources import SourceError, read_source
from torchdevice_lint.engine.devices import CUDA_OR_CPU_EXPRESSION
from torchdevice_lint.engine.engine import Engine
from torchdevice_lint.engine.fixer import FixError, FixOutcome, fix_source
from torchdevice_lint.knowledge.torch_releases import binding_expression
from torchdevice_lint.model.settings import Settings

if __package__ in (None, ""):  # run as a script: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import CORPUS_DIR, PROJECTS, corpus_files  # noqa: E402

FIXABLE = ("safe", "unsafe")


@dataclass
class FixPass:
    """One round of the fixer: the text before and after, and the line ranges (1-based,
    inclusive) of the nodes its chosen fixes replace."""

    before: str
    after: str
    intended: List[Tuple[int, int]]


def replay_fix(engine: Engine, path: str, source: str, unsafe: bool = True) -> Tuple[FixOutcome, List[FixPass]]:
    """Run the fixer, keeping for each pass what its chosen fixes meant to edit."""
    passes: List[FixPass] = []

    def record(analysis, chosen, updated: str) -> None:
        intended = []
        for raw in chosen:
            for node in raw.fix.replacements:
                span = analysis.positions[node]
                intended.append((span.start.line, span.end.line))
        passes.append(FixPass(analysis.ctx.source, updated, intended))

    outcome = fix_source(engine, path, source, unsafe, on_pass=record)
    return outcome, passes


def device_bindings(engine: Engine) -> Tuple[str, ...]:
    """The module-level device bindings a fix may insert: the target's, or CUDA-or-CPU in a file
    whose own placement is CUDA-or-CPU."""
    name = engine.settings.device_name
    return (f"{name} = {binding_expression(engine.settings)}", f"{name} = {CUDA_OR_CPU_EXPRESSION}")


def _is_file_level_line(line: str, bindings: Sequence[str]) -> bool:
    text = line.strip()
    if not text or text in bindings:
        return True
    return (text.startswith("import ") or text.startswith("from ")) and " import " in f" {text}"


def stray_hunks(fix_pass: FixPass, bindings: Sequence[str]) -> List[str]:
    """Hunks of the pass's line diff that touch no intended node range and are not
    file-level edits, as short descriptions."""
    old = fix_pass.before.splitlines(keepends=True)
    new = fix_pass.after.splitlines(keepends=True)
    stray = []
    # blank lines never anchor the alignment: the fixer adds one after the imports, and
    # matching it against a blank line further down would misplace the replaced line
    matcher = difflib.SequenceMatcher(lambda line: not line.strip(), old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if i1 == i2:
            touches = any(start - 1 <= at <= end for at in _same_insertion(old, new[j1:j2], i1) for start, end in fix_pass.intended)
        else:
            touches = any(i1 < end and start - 1 < i2 for start, end in fix_pass.intended)
        if touches or all(_is_file_level_line(line, bindings) for line in old[i1:i2] + new[j1:j2]):
            continue
        stray.append(f"lines {i1 + 1}-{i2}: {old[i1:i2]!r} -> {new[j1:j2]!r}")
    return stray


def _same_insertion(old: List[str], block: List[str], at: int) -> List[int]:
    """Where else inserting ``block`` at ``at`` gives the same text: before a line equal to its
    last line, the diff may show an inserted ``if`` block one line below the fix's own."""
    places = [at]
    for step in (-1, 1):
        here, shifted = at, list(block)
        while shifted and (0 < here if step < 0 else here < len(old)):
            edge = old[here - 1] if step < 0 else old[here]
            if edge != (shifted[-1] if step < 0 else shifted[0]):
                break
            shifted = [edge] + shifted[:-1] if step < 0 else shifted[1:] + [edge]
            here += step
            places.append(here)
    return places


@dataclass
class FileReport:
    path: str
    error: Optional[str] = None  # the file's own problem: syntax error, undecodable...
    crash: Optional[str] = None
    refused: Optional[str] = None  # FixError: the fixer refused a fix that would not compile
    fixed: bool = False
    applied: int = 0
    passes: int = 0
    compile_failure: Optional[str] = None
    violations: List[str] = field(default_factory=list)
    not_idempotent: bool = False
    remaining_fixable: List[str] = field(default_factory=list)
    findings: int = 0
    fixed_text: Optional[str] = None


def examine(path: str, engine: Optional[Engine] = None) -> FileReport:
    engine = engine or api.engine(Settings())
    report = FileReport(path)
    try:
        source = read_source(path)
    except SourceError as error:
        report.error = str(error)
        return report
    try:
        result = engine.check_source(path, source.text, with_edits=True)
        if result.error is not None:
            report.error = str(result.error)
            return report
        report.findings = len(result.findings)
        outcome, passes = replay_fix(engine, path, source.text)
        report.applied = sum(outcome.applied.values())
        if not outcome.applied:
            return report
        report.fixed = True
        report.fixed_text = outcome.source
        report.passes = len(passes)
        for fix_pass in passes:
            report.violations += stray_hunks(fix_pass, device_bindings(engine))
        try:
            compile(outcome.source, path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            report.compile_failure = f"{error.__class__.__name__}: {error}"
        report.not_idempotent = fix_source(engine, path, outcome.source, unsafe=True).source != outcome.source
        after = engine.check_source(path, outcome.source)
        report.remaining_fixable = [
            f"{f.code} {f.location.row}:{f.location.column}" for f in after.findings if f.fix and f.fix.applicability in FIXABLE
        ]
    except FixError as error:
        report.refused = str(error)
    except Exception:  # noqa: BLE001 - a crash is what this script counts
        report.crash = traceback.format_exc(limit=6)
    return report


def _examine_in_worker(path: str) -> FileReport:
    return examine(path, _worker_engine())


_ENGINE: Optional[Engine] = None


def _worker_engine() -> Engine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = api.engine(Settings())
    return _ENGINE


def examine_all(paths: Sequence[str], jobs: int) -> List[FileReport]:
    if jobs <= 1:
        return [_examine_in_worker(path) for path in paths]
    with multiprocessing.Pool(jobs) as pool:
        return pool.map(_examine_in_worker, paths, chunksize=4)


def compare_with_cli(reports: Sequence[FileReport], root: Path) -> List[str]:
    """Run ``torchdevice-fix --unsafe-fixes`` on a copy of ``root``: every file must end up
    exactly as the in-memory fix (encoded as read), and files without a fix keep their mtime."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="torchdevice-reliability-") as scratch:
        copy = Path(scratch) / "tree"
        shutil.copytree(root, copy, symlinks=True)
        before = {p: os.stat(p).st_mtime_ns for p in copy.rglob("*.py")}
        command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
        completed = subprocess.run(
            command + ["--unsafe-fixes", "--exclude", "", str(copy)], capture_output=True, text=True
        )
        if "Traceback" in completed.stderr:
            problems.append(f"torchdevice-fix crashed:\n{completed.stderr[-2000:]}")
        for report in reports:
            relative = Path(report.path).resolve().relative_to(root.resolve())
            written = copy / relative
            if report.error or report.crash or report.refused:
                continue
            if report.fixed:
                expected = read_source(report.path)
                if written.read_bytes() != report.fixed_text.encode(expected.encoding):
                    problems.append(f"{relative}: written file differs from the in-memory fix")
            elif os.stat(written).st_mtime_ns != before[written]:
                problems.append(f"{relative}: rewritten although no fix applied")
    return problems


def summarise(reports: Sequence[FileReport]) -> Dict[str, int]:
    return {
        "files": len(reports),
        "errors": sum(1 for r in reports if r.error),
        "crashes": sum(1 for r in reports if r.crash),
        "findings": sum(r.findings for r in reports),
        "fixed files": sum(1 for r in reports if r.fixed),
        "fixes": sum(r.applied for r in reports),
        "refused": sum(1 for r in reports if r.refused),
        "compile failures": sum(1 for r in reports if r.compile_failure),
        "byte-identity violations": sum(1 for r in reports if r.violations),
        "not idempotent": sum(1 for r in reports if r.not_idempotent),
        "fixable left": sum(1 for r in reports if r.remaining_fixable),
    }


FAILURE_KEYS = (
    "crashes", "refused", "compile failures", "byte-identity violations", "not idempotent",
    "fixable left", "replay mismatches",
)


def _details(report: FileReport) -> Iterable[str]:
    if report.crash:
        yield f"CRASH {report.path}\n{report.crash}"
    if report.refused:
        yield f"REFUSED {report.path}: {report.refused}"
    if report.compile_failure:
        yield f"COMPILE {report.path}: {report.compile_failure}"
    for violation in report.violations:
        yield f"BYTES {report.path}: {violation}"
    if report.not_idempotent:
        yield f"IDEMPOTENCE {report.path}"
    if report.remaining_fixable:
        yield f"LEFT {report.path}: {', '.join(report.remaining_fixable)}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"projects (default all: {', '.join(PROJECTS)})")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--cli", action="store_true", help="also run torchdevice-fix on a copy of each project and compare")
    args = parser.parse_args(argv)
    names = args.names or list(PROJECTS)
    started = time.perf_counter()
    totals: Counter = Counter()
    failures = []
    print(f"{'project':28} " + " ".join(f"{key:>8.8}" for key in summarise([])))
    for name in names:
        paths = [str(p) for p in corpus_files([name])]
        reports = examine_all(paths, args.jobs)
        counts = summarise(reports)
        totals.update(counts)
        project = PROJECTS[name]
        print(f"{project.name + '==' + project.version:28} " + " ".join(f"{value:8}" for value in counts.values()), flush=True)
        for report in reports:
            failures.extend(_details(report))
        if args.cli:
            failures.extend(f"CLI {line}" for line in compare_with_cli(reports, CORPUS_DIR / name))
    print(f"{'total':28} " + " ".join(f"{totals[key]:8}" for key in summarise([])))
    print(", ".join(f"{key}: {totals[key]}" for key in summarise([])) + f" ({time.perf_counter() - started:.0f} s)")
    for line in failures:
        print(line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
