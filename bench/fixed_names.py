"""Names a fix writes, proven on real code: ``torchdevice-fix --unsafe-fixes`` over every file
under the given roots, each fixed file checked against its original by ``fix_checks.py``
(code that knows nothing of how the fixes chose what to write):

* pyflakes: an undefined name or a redefinition the original did not have (a decorator naming
  another function's ``device``; a ``device = ...`` inserted over an imported ``device``);
* a name read where it is not certainly bound when the line runs (a function reading a
  ``device`` that only the ``__main__`` block assigns, a local read above its assignment).

    python bench/fixed_names.py                     # the default roots (below), 2 processes
    python bench/fixed_names.py --root DIR ... --details

It prints the files, the files fixed and fixes applied, the files the fixer refused, and the
new undefined names and redefinitions (goal: 0), each listed with ``--details``; exit 1 if any.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fix_checks import new_pyflakes_problems, new_unbound_names  # noqa: E402

#: Real code held outside the repository: the tuning set, the first held-out set, the training
#: scripts of bench/fixed_programs.py, the pinned library corpus (bench/corpus.py) and projects
#: fetched for issue 27 (bench/fixed_names_pins.toml).
DEFAULT_ROOTS = (
    "/work/eval/repos",
    "/work/eval/heldout/repos",
    "/work/eval/programs/src",
    "/work/eval/extra/repos",
    str(Path(__file__).resolve().parent / "corpus"),
)


def _fix_one(path: str) -> Tuple[str, Optional[str], int, List[str]]:
    """(path, error or None, fixes applied, new problems as text) for one file."""
    from torchdevice_lint import api
    from torchdevice_lint.app.sources import read_source
    from torchdevice_lint.model.errors import FileProblem
    from torchdevice_lint.model.settings import Settings

    try:
        source = read_source(path).text
        outcome = api.fix_source(source, path, Settings(unsafe_fixes=True), unsafe=True)
    except FileProblem as error:
        return path, str(error), 0, []
    if not outcome.changed:
        return path, None, 0, []
    problems = new_pyflakes_problems(source, outcome.source) + new_unbound_names(source, outcome.source)
    return path, None, sum(outcome.applied.values()), problems


def python_files(roots) -> List[str]:
    files = []
    for root in roots:
        base = Path(root)
        if base.is_dir():
            files.extend(str(p) for p in sorted(base.rglob("*.py")) if ".git" not in p.parts)
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", nargs="+", default=list(DEFAULT_ROOTS), help="directories of real code")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--details", action="store_true", help="list each new undefined name or redefinition")
    options = parser.parse_args(argv)
    files = python_files(options.root)
    present = [root for root in options.root if Path(root).is_dir()]
    results: Dict[str, tuple] = {}
    with multiprocessing.get_context("fork").Pool(options.jobs, maxtasksperchild=200) as pool:
        for path, error, applied, problems in pool.imap_unordered(_fix_one, files, chunksize=8):
            results[path] = (error, applied, problems)
    fixed = [p for p, (error, applied, _) in results.items() if applied]
    refused = [p for p, (error, _, _) in results.items() if error]
    problems = [(p, text) for p, (_, _, found) in sorted(results.items()) for text in found]
    print(f"roots: {', '.join(present)}")
    print(f"files: {len(files)}; fixed: {len(fixed)}; fixes applied: {sum(r[1] for r in results.values())}")
    print(f"files the fixer left unchanged with an error: {len(refused)}")
    kinds = Counter("redefinition" if text.startswith("redefinition") else "pyflakes" if text.startswith("undefined") else "unbound" for _, text in problems)
    print(f"new undefined names (pyflakes): {kinds['pyflakes']}")
    print(f"new names read where they are not certainly bound: {kinds['unbound']}")
    print(f"new redefinitions (pyflakes): {kinds['redefinition']}")
    print(f"files with a new problem: {len({p for p, _ in problems})}")
    if options.details:
        for path, text in problems:
            print(f"  {path}: {text}")
        for path in refused:
            print(f"  refused {path}: {results[path][0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
