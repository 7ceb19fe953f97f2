"""Read the TDV4xx findings on real PyTorch code: every finding with a code frame, so each can be
classified by hand as a true or a false positive.

    python bench/dataflow_precision.py                 # timm and fairseq sdists
    python bench/dataflow_precision.py PATH...         # files or folders already on disk
    python bench/dataflow_precision.py --projects timm diffusers

The corpus comes from ``bench/corpus.py`` when it is there (pinned sdists); otherwise this script
fetches the named sdists itself with ``pip download --no-deps --no-binary :all:`` into
``bench/corpus/`` (git-ignored) and extracts their ``.py`` files.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from typing import Iterable, List, Sequence

BENCH_DIR = Path(__file__).resolve().parent
CORPUS_DIR = BENCH_DIR / "corpus"
FALLBACK_PINS = {"timm": "1.0.15", "fairseq": "0.12.2", "pytorch-lightning": "2.5.1", "diffusers": "0.33.1"}
DATAFLOW_CODES = ("TDV401", "TDV402", "TDV403")


def _pip_corpus(names: Sequence[str]) -> List[Path]:
    files: List[Path] = []
    for name in names:
        folder = CORPUS_DIR / name
        if not folder.exists():
            downloads = CORPUS_DIR / ".sdists"
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                 "-d", str(downloads), f"{name}=={FALLBACK_PINS[name]}"],
                check=True,
            )
            archive = next(p for p in downloads.iterdir() if p.name.lower().replace("_", "-").startswith(name))
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py") and ".." not in m.name]
                tar.extractall(folder, members=members)
        files.extend(sorted(folder.rglob("*.py")))
    return files


def corpus(names: Sequence[str]) -> List[Path]:
    sys.path.insert(0, str(BENCH_DIR.parent))
    try:
        from bench.corpus import corpus_files  # the pinned corpus, where it exists
    except ImportError:
        return _pip_corpus(names)
    return corpus_files(list(names))


def python_files(paths: Iterable[str]) -> List[Path]:
    found: List[Path] = []
    for path in map(Path, paths):
        found.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return found


def frame(lines: List[str], row: int, context: int = 3) -> str:
    start, end = max(1, row - context), min(len(lines), row + 1)
    return "\n".join(f"{'>' if n == row else ' '} {n:5} | {lines[n - 1]}" for n in range(start, end + 1))


def main(argv: Sequence[str] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="files or folders (default: the corpus projects)")
    parser.add_argument("--projects", nargs="+", default=["timm", "fairseq"], choices=sorted(FALLBACK_PINS))
    args = parser.parse_args(argv)

    from torchdevice_lint import api
    from torchdevice_lint.model.settings import Settings
    from torchdevice_lint.rules import rule_by_code

    engine = api.engine(Settings(select=DATAFLOW_CODES), rules=[rule_by_code(code) for code in DATAFLOW_CODES])
    files = python_files(args.paths) if args.paths else corpus(args.projects)
    counts: Counter = Counter()
    errors = 0
    for path in files:
        source = path.read_text(encoding="utf-8", errors="replace")
        result = engine.check_source(str(path), source)
        if result.error is not None:
            errors += 1
            continue
        lines = source.splitlines()
        for finding in result.findings:
            counts[finding.code] += 1
            fix = f" [fix: {finding.fix.applicability}: {finding.fix.message}]" if finding.fix else ""
            print(f"#{sum(counts.values())} {path}:{finding.location.row}:{finding.location.column}: "
                  f"{finding.code} {finding.message}{fix}")
            print(frame(lines, finding.location.row))
            print()
    summary = ", ".join(f"{code} {counts[code]}" for code in DATAFLOW_CODES)
    print(f"{len(files)} files, {errors} not parsed; findings: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
