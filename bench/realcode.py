"""Precision and recall of the rules on real code they were never tuned on.

The evaluation set is a list of public PyTorch projects pinned by commit
(``bench/realcode/pins.toml``); their ``.py`` files are checked out outside this repository
(never committed) under ``<root>/<owner>+<name>/``. Two hand-judged lists are committed:

- ``judged_findings.csv``: a seeded random sample of each rule's findings, each judged in
  context: ``true`` (the line raises or misbehaves on a CPU-only machine when it runs) or
  ``false`` (a false alarm), with a reason;
- ``judged_lines.csv``: a seeded random sample of hazard-looking lines (``.cuda(``, ``"cuda"``,
  ``torch.load(``, ``.to(0)``...), judged ``hazard`` or ``not-hazard`` (``unsure`` rows are left
  out) whether or not the tool reports them, with the hazard kind and the rule expected to report it.

Rows are keyed by repo, path, line and code, and carry the stripped text of the line: a row
whose text no longer matches the checkout is stale and not counted. Findings that no judged
row covers are counted as unjudged, so the table stays honest when the rules change.

    python bench/realcode.py                      # run check, print the per-rule table and recall
    python bench/realcode.py --root DIR           # checkouts elsewhere (or $TORCHDEVICE_REALCODE_ROOT)
    python bench/realcode.py --details            # also list false alarms still reported, lines missed
    python bench/realcode.py --set heldout        # the 13 projects judged after the tuning (realcode/heldout/)
    python bench/realcode.py sample-findings      # CSV rows to judge: unjudged findings, seeded
    python bench/realcode.py sample-findings --unjudged 15   # new findings after a rule change
    python bench/realcode.py sample-lines -n 150  # CSV rows to judge: hazard-looking lines, seeded
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # like the package's own config reader
    import tomli as tomllib

HERE = Path(__file__).resolve().parent / "realcode"
PINS = HERE / "pins.toml"
JUDGED_FINDINGS = HERE / "judged_findings.csv"
JUDGED_LINES = HERE / "judged_lines.csv"
DEFAULT_ROOT = Path(os.environ.get("TORCHDEVICE_REALCODE_ROOT", "/work/eval/repos"))
#: Held-out sets live in folders beside the main set (``realcode/<name>/``), checked out under
#: ``/work/eval/<name>/repos``: projects judged at first look, before any rule was tuned on them.
EVAL_ROOT = Path("/work/eval")
FINDING_FIELDS = ["repo", "path", "line", "code", "text", "verdict", "reason"]
LINE_FIELDS = ["repo", "path", "line", "text", "verdict", "kind", "expected", "reason"]
#: Opt-in rules measured here too: their precision decides whether they may become default.
OPT_IN_MEASURED = ("TDV601",)
#: Up to this many findings of each rule are judged (all of them when a rule has fewer).
SAMPLE_PER_RULE = 30
#: What makes a line "hazard-looking" for the recall sample (grep, not the tool's own logic).
HAZARD_LOOKING = re.compile(
    r"""\.cuda\(|["']cuda|torch\.cuda\.|torch\.load\(|torch\.jit\.load\(|\.numpy\(\)"""
    r"""|\.to\(\s*(\d|rank|local_rank|gpu|args\.gpu|args\.local_rank)|local_rank|device\s*=\s*\d"""
    r"""|device_ids\s*=\s*\[|torch\.device\(\s*\d|["'](mps|xpu|npu)|FloatTensor|LongTensor|ByteTensor"""
    r"""|["']nccl"""
)

Key = Tuple[str, str, int]


@dataclass(frozen=True)
class Pin:
    repo: str
    commit: str
    kind: str

    def folder(self, root: Path) -> Path:
        return root / self.repo.replace("/", "+")


def held_out_sets() -> List[str]:
    """The names of the held-out sets: the folders beside the main set that hold pins."""
    return sorted(folder.name for folder in HERE.iterdir() if (folder / "pins.toml").is_file())


def use_set(name: str) -> None:
    """Point the pins and the judged lists at the held-out set ``name``."""
    global PINS, JUDGED_FINDINGS, JUDGED_LINES
    folder = HERE / name
    PINS, JUDGED_FINDINGS, JUDGED_LINES = (folder / file for file in ("pins.toml", "judged_findings.csv", "judged_lines.csv"))


def load_pins(path: Optional[Path] = None) -> List[Pin]:
    with (path or PINS).open("rb") as handle:
        projects = tomllib.load(handle)["project"]
    return [Pin(item["repo"], item["commit"], item["kind"]) for item in projects]


def checkouts(pins: Sequence[Pin], root: Path) -> List[Path]:
    """The checkout folders; a clear message and exit status 2 when any is missing."""
    missing = [pin for pin in pins if not pin.folder(root).is_dir()]
    if missing:
        for pin in missing:
            print(
                f"missing checkout {pin.folder(root)}: extract {pin.repo} at {pin.commit} there, e.g.\n"
                f"  git clone https://github.com/{pin.repo} /tmp/src && mkdir -p {pin.folder(root)} && "
                f"git -C /tmp/src archive {pin.commit} -- '*.py' | tar -x -C {pin.folder(root)}",
                file=sys.stderr,
            )
        print(f"{len(missing)} of {len(pins)} checkouts missing under {root} "
              "(--root or $TORCHDEVICE_REALCODE_ROOT)", file=sys.stderr)
        raise SystemExit(2)
    return [pin.folder(root) for pin in pins]


def run_check(folders: Sequence[Path]) -> List[dict]:
    """``torchdevice-lint check --output-format json`` over the folders' ``.py`` files, in a child
    process (the judged lists are of ``.py`` files; notebooks have bench/notebooks.py)."""
    command = [
        sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())",
        "check", "--no-cache", "--output-format", "json", "--extend-select", ",".join(OPT_IN_MEASURED),
        "--extend-exclude", "*.ipynb", *map(str, folders),
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1, 2) or not done.stdout.strip():
        raise SystemExit(f"check failed ({done.returncode}): {done.stderr.strip()}")
    for line in done.stderr.splitlines():
        print(f"note: {line}", file=sys.stderr)
    return json.loads(done.stdout)


def locate(finding: dict, root: Path) -> Tuple[str, str]:
    """(repo, path inside the repo) of a finding's file; a project folder of ``root`` may be a
    link to a checkout elsewhere (a set's halves share one set's checkouts)."""
    filename = Path(finding["filename"]).resolve()
    for project in sorted(root.iterdir()) if root.is_dir() else ():
        target = project.resolve()
        if filename == target or target in filename.parents:
            return project.name.replace("+", "/", 1), filename.relative_to(target).as_posix()
    relative = filename.relative_to(root.resolve())
    return relative.parts[0].replace("+", "/", 1), Path(*relative.parts[1:]).as_posix()


class Sources:
    """Stripped source lines of the checkouts, read once per file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lines: Dict[Tuple[str, str], List[str]] = {}

    def text(self, repo: str, path: str, line: int) -> Optional[str]:
        key = (repo, path)
        if key not in self._lines:
            file = self.root / repo.replace("/", "+") / path
            self._lines[key] = file.read_text(errors="replace").splitlines() if file.is_file() else []
        lines = self._lines[key]
        return lines[line - 1].strip() if 0 < line <= len(lines) else None


def read_csv(path: Path) -> List[dict]:
    if not path.exists():
        return []
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def findings_by_location(findings: Iterable[dict], root: Path, spanned: bool = False) -> Dict[Key, List[str]]:
    """Codes reported at each (repo, path, line): the line a finding starts on, or with
    ``spanned`` every line it covers (``Net(\n...\n).cuda()`` is reported where the call starts)."""
    located: Dict[Key, List[str]] = defaultdict(list)
    for finding in findings:
        repo, path = locate(finding, root)
        first = finding["location"]["row"]
        last = finding["end_location"]["row"] if spanned else first
        for line in range(first, last + 1):
            located[(repo, path, line)].append(finding["code"])
    return located


def fresh(row: dict, sources: Sources) -> bool:
    """A judged row counts only while its text still matches the checkout."""
    return sources.text(row["repo"], row["path"], int(row["line"])) == row["text"]


def precision_table(located: Dict[Key, List[str]], judged: List[dict], sources: Sources) -> List[list]:
    verdicts = {
        (row["repo"], row["path"], int(row["line"]), row["code"]): row["verdict"]
        for row in judged if fresh(row, sources)
    }
    stale = Counter(row["code"] for row in judged if not fresh(row, sources))
    counts: Dict[str, Counter] = defaultdict(Counter)
    for (repo, path, line), codes in located.items():
        for code in codes:
            verdict = verdicts.get((repo, path, line, code), "unjudged")
            counts[code]["findings"] += 1
            counts[code][verdict] += 1
    gone = Counter(
        key[3] for key, verdict in verdicts.items()
        if verdict == "true" and key[3] not in located.get(key[:3], [])
    )
    rows = []
    total = Counter()
    for code in sorted(set(counts) | set(gone) | set(stale)):
        tally = counts[code]
        total.update(tally)
        sample = tally["true"] + tally["false"]
        precision = f"{tally['true'] / sample:.2f}" if sample else "n/a"
        rows.append([code, tally["findings"], sample, tally["true"], tally["false"], precision,
                     tally["unjudged"], gone[code], stale[code]])
    sample = total["true"] + total["false"]
    rows.append(["all", total["findings"], sample, total["true"], total["false"],
                 f"{total['true'] / sample:.2f}" if sample else "n/a", total["unjudged"],
                 sum(gone.values()), sum(stale.values())])
    return rows


def recall_table(located: Dict[Key, List[str]], judged: List[dict], sources: Sources) -> List[list]:
    """Per hazard kind: judged hazard lines, reported (any code), reported by the expected code."""
    tallies: Dict[str, Counter] = defaultdict(Counter)
    for row in judged:
        if not fresh(row, sources):
            tallies["(stale rows)"]["lines"] += 1
            continue
        codes = located.get((row["repo"], row["path"], int(row["line"])), [])
        if row["verdict"] == "hazard":
            for kind in (row["kind"], "all"):
                tallies[kind]["lines"] += 1
                tallies[kind]["reported"] += bool(codes)
                tallies[kind]["expected"] += row["expected"] in codes
        elif row["verdict"] == "not-hazard" and codes:
            tallies["not-hazard lines reported"]["lines"] += 1
        elif row["verdict"] != "not-hazard":
            tallies["(left undecided)"]["lines"] += 1
    rows = []
    for kind in sorted(tallies, key=lambda name: (name == "all", name.startswith("("), name)):
        tally = tallies[kind]
        recall = f"{tally['reported'] / tally['lines']:.2f}" if tally["lines"] and "reported" in tally else ""
        rows.append([kind, tally["lines"], tally.get("reported", ""), tally.get("expected", ""), recall])
    return rows


def print_table(header: Sequence[str], rows: Sequence[Sequence]) -> None:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    for line in (header, ["-" * width for width in widths], *rows):
        print("  ".join(str(cell).rjust(width) for cell, width in zip(line, widths)))


def print_details(located: Dict[Key, List[str]], spanned: Dict[Key, List[str]], sources: Sources) -> None:
    """Each false alarm still reported and each judged hazard line no finding covers, with its reason."""
    print("\nfalse alarms still reported:")
    for row in read_csv(JUDGED_FINDINGS):
        key = (row["repo"], row["path"], int(row["line"]))
        if row["verdict"] == "false" and fresh(row, sources) and row["code"] in located.get(key, []):
            print(f"  {row['code']} {row['repo']}:{row['path']}:{row['line']}  {row['reason']}")
    print("\njudged hazard lines not reported:")
    for row in read_csv(JUDGED_LINES):
        key = (row["repo"], row["path"], int(row["line"]))
        if row["verdict"] == "hazard" and fresh(row, sources) and not spanned.get(key):
            print(f"  {row['expected']} {row['repo']}:{row['path']}:{row['line']}  {row['reason']}")


def report(root: Path, details: bool = False) -> int:
    pins = load_pins()
    findings = run_check(checkouts(pins, root))
    sources = Sources(root)
    located = findings_by_location(findings, root)
    spanned = findings_by_location(findings, root, spanned=True)
    print(f"{len(pins)} projects under {root}: {len(findings)} findings\n")
    print_table(
        ["rule", "findings", "judged", "true", "false", "precision", "unjudged", "true gone", "stale"],
        precision_table(located, read_csv(JUDGED_FINDINGS), sources),
    )
    print("\nrecall on judged hazard lines (reported: a finding covers the line; expected: by the rule named)")
    print_table(["kind", "hazard lines", "reported", "expected", "recall"],
                recall_table(spanned, read_csv(JUDGED_LINES), sources))
    if details:
        print_details(located, spanned, sources)
    return 0


def sample_findings(root: Path, seed: int, per_rule: int, unjudged: Optional[int] = None) -> int:
    """Unjudged findings to judge, so that each rule reaches ``per_rule`` judged, or with
    ``unjudged`` that many of each rule's unjudged findings (new after a rule change); seeded."""
    findings = run_check(checkouts(load_pins(), root))
    sources = Sources(root)
    judged = {(r["repo"], r["path"], int(r["line"]), r["code"]) for r in read_csv(JUDGED_FINDINGS)
              if fresh(r, sources)}
    by_rule: Dict[str, List[Tuple[str, str, int, str]]] = defaultdict(list)
    for (repo, path, line), codes in findings_by_location(findings, root).items():
        for code in codes:
            by_rule[code].append((repo, path, line, code))
    writer = csv.writer(sys.stdout)
    writer.writerow(FINDING_FIELDS)
    for code in sorted(by_rule):
        keys = sorted(by_rule[code])
        random.Random(f"{seed}:{code}").shuffle(keys)
        wanted = unjudged if unjudged is not None else per_rule - sum(key in judged for key in keys)
        for key in [key for key in keys if key not in judged][:max(wanted, 0)]:
            writer.writerow([*key, sources.text(*key[:3]), "", ""])
    return 0


def sample_lines(root: Path, seed: int, count: int, repos: Sequence[str] = ()) -> int:
    """Hazard-looking code lines (grep, comments skipped) not judged yet, seeded; ``repos``
    limits the draw to projects added later, so each project keeps its share of the sample."""
    pins = [pin for pin in load_pins() if not repos or pin.repo in repos]
    checkouts(pins, root)
    judged = {(r["repo"], r["path"], int(r["line"])) for r in read_csv(JUDGED_LINES)}
    candidates = []
    for pin in pins:
        folder = pin.folder(root)
        for file in sorted(folder.rglob("*.py")):
            path = file.relative_to(folder).as_posix()
            for number, text in enumerate(file.read_text(errors="replace").splitlines(), 1):
                stripped = text.strip()
                if stripped.startswith("#") or not HAZARD_LOOKING.search(stripped):
                    continue
                if (pin.repo, path, number) not in judged:
                    candidates.append((pin.repo, path, number, stripped))
    random.Random(seed).shuffle(candidates)
    writer = csv.writer(sys.stdout)
    writer.writerow(LINE_FIELDS)
    for repo, path, number, text in candidates[:count]:
        writer.writerow([repo, path, number, text, "", "", "", ""])
    print(f"{len(candidates)} unjudged hazard-looking lines; printed {min(count, len(candidates))}",
          file=sys.stderr)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="report",
                        choices=["report", "sample-findings", "sample-lines"])
    parser.add_argument("--set", choices=["main", *held_out_sets()], default="main",
                        help="main: the 26 projects the rules were tuned on; any other: a held-out set "
                        "(bench/realcode/<set>/)")
    parser.add_argument("--root", type=Path, default=None,
                        help="where the checkouts are (default $TORCHDEVICE_REALCODE_ROOT or /work/eval/repos; "
                        f"{EVAL_ROOT}/<set>/repos for a held-out set)")
    parser.add_argument("--seed", type=int, default=11, help="seed of the random samples (default 11)")
    parser.add_argument("-n", type=int, default=150, help="sample-lines: how many lines (default 150)")
    parser.add_argument("--per-rule", type=int, default=SAMPLE_PER_RULE,
                        help=f"sample-findings: judged findings wanted per rule (default {SAMPLE_PER_RULE})")
    parser.add_argument("--details", action="store_true",
                        help="also list the false alarms still reported and the hazard lines missed")
    parser.add_argument("--repo", action="append", default=[],
                        help="sample-lines: only this project (owner/name; repeatable)")
    parser.add_argument("--unjudged", type=int, default=None,
                        help="sample-findings: draw this many unjudged findings per rule instead")
    args = parser.parse_args(argv)
    if args.set != "main":
        use_set(args.set)
    args.root = args.root or (DEFAULT_ROOT if args.set == "main" else EVAL_ROOT / args.set / "repos")
    if args.command == "sample-findings":
        return sample_findings(args.root, args.seed, args.per_rule, args.unjudged)
    if args.command == "sample-lines":
        return sample_lines(args.root, args.seed, args.n, args.repo)
    return report(args.root, args.details)


if __name__ == "__main__":
    sys.exit(main())
