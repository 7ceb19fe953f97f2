"""Public notebooks (bench/notebooks/pins.toml): what ``torchdevice-lint check`` reports in
them, judged (bench/notebooks/judged.csv), and what ``torchdevice-fix --unsafe-fixes`` does to
them: every notebook must come back as valid JSON whose only changes are code cells' sources.

    python bench/notebooks.py                 # the table, the fix verdicts, exit 1 on a broken notebook
    python bench/notebooks.py --root DIR      # checkouts elsewhere (or $TORCHDEVICE_EVAL_ROOT)

The notebooks are copied to a temporary folder first: nothing under the checkouts is written.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Dict, List, Tuple

try:
    import tomllib
except ImportError:  # Python < 3.11
    import tomli as tomllib

HERE = Path(__file__).resolve().parent / "notebooks"
DEFAULT_ROOT = os.environ.get("TORCHDEVICE_EVAL_ROOT", "/work/eval")


def notebooks(root: Path) -> List[Tuple[str, str, Path]]:
    """``(repo, path in the repo, file)`` of every pinned notebook that is checked out."""
    found = []
    for pin in tomllib.loads((HERE / "pins.toml").read_text(encoding="utf-8"))["project"]:
        folder = root / pin["folder"] / pin["repo"].replace("/", "+")
        for path in sorted(folder.rglob("*.ipynb")):
            if ".ipynb_checkpoints" not in path.parts:
                found.append((pin["repo"], path.relative_to(folder).as_posix(), path))
    return found


def tool(command: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    entry = "fix_main" if command == "fix" else "lint_main"
    argv = [sys.executable, "-c", f"import sys; from torchdevice_lint.cli import {entry}; sys.exit({entry}())"]
    return subprocess.run([*argv, *([] if command == "fix" else [command]), "--no-cache", *args], cwd=cwd,
                          capture_output=True, text=True)


def without_code_sources(document: dict) -> dict:
    cells = [{**cell, "source": None} if cell.get("cell_type") == "code" else cell for cell in document["cells"]]
    return {**document, "cells": cells}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=DEFAULT_ROOT, help="where the pinned repositories are extracted")
    args = parser.parse_args(argv)
    found = notebooks(Path(args.root))
    if not found:
        print(f"no pinned notebook is checked out under {args.root}; see bench/notebooks/pins.toml", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        copies: Dict[str, Tuple[str, str, Path]] = {}
        for index, (repo, path, source) in enumerate(found):
            name = f"{index:03d}.ipynb"
            shutil.copy(source, Path(work) / name)
            copies[name] = (repo, path, source)
        checked = tool("check", "--output-format", "json", ".", cwd=Path(work))
        findings = json.loads(checked.stdout)
        errors = [line for line in checked.stderr.splitlines() if ": error: " in line]
        fixed = tool("fix", "--unsafe-fixes", ".", cwd=Path(work))
        fix_errors = [line for line in fixed.stderr.splitlines() if ": error: " in line]
        broken = []
        for name, (repo, path, source) in copies.items():
            before = json.loads(source.read_text(encoding="utf-8"))
            try:
                after = json.loads((Path(work) / name).read_text(encoding="utf-8"))
            except ValueError:
                broken.append(f"{repo}/{path}: not JSON after the fix")
                continue
            if without_code_sources(before) != without_code_sources(after):
                broken.append(f"{repo}/{path}: more than code cells' sources changed")
        remaining = json.loads(tool("check", "--output-format", "json", ".", cwd=Path(work)).stdout)

    with open(HERE / "judged.csv", encoding="utf-8", newline="") as handle:
        verdicts = {(r["repo"], r["path"], int(r["cell"]), int(r["row"]), r["code"]): r["verdict"] for r in csv.DictReader(handle)}
    counts: Dict[str, Counter] = {}
    for finding in findings:
        repo, path, _ = copies[os.path.basename(finding["filename"])]
        key = (repo, path, finding["cell"], finding["location"]["row"], finding["code"])
        counts.setdefault(finding["code"], Counter())[verdicts.get(key, "unjudged")] += 1
    code_cells = sum(
        sum(1 for cell in json.loads(source.read_text(encoding="utf-8"))["cells"] if cell.get("cell_type") == "code")
        for _, _, source in found
    )
    print(f"{len(found)} notebooks ({code_cells} code cells) from {len({repo for repo, _, _ in found})} repositories")
    print(f"{'rule':8} {'findings':>8} {'true':>5} {'false':>5} {'unjudged':>8}")
    for code, counter in sorted(counts.items()):
        print(f"{code:8} {sum(counter.values()):8} {counter['true']:5} {counter['false']:5} {counter['unjudged']:8}")
    total = Counter()
    for counter in counts.values():
        total.update(counter)
    judged = total["true"] + total["false"]
    precision = f"{total['true'] / judged:.2f}" if judged else "n/a"
    print(f"{'all':8} {sum(total.values()):8} {total['true']:5} {total['false']:5} {total['unjudged']:8}   precision {precision}")
    print(f"check errors: {len(errors)}; fix errors: {len(fix_errors)}; findings left after the fix: {len(remaining)}")
    print(f"notebooks the fix broke (not JSON, or more changed than code cells' sources): {len(broken)}")
    for line in errors + fix_errors + broken:
        print(f"  {line}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
