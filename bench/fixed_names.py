"""Names a fix writes, proven on real code: ``torchdevice-fix --unsafe-fixes`` over every file
under the given roots, with pyflakes run on each file before and after.

A fix must never write a name that is not bound where it runs, nor bind one the file already
uses (DESIGN.md, "Fixes"). pyflakes sees both: an undefined name (``device`` used in a decorator
of a module-level function when only another function binds it) and a redefinition (an inserted
``device = ...`` over an imported ``device``). The count compares, per file, the multiset of
(message kind, name) before and after, so a line shifted by an inserted binding is not a new
finding, and names the file already left undefined (star imports, builtins of another Python)
are not counted.

    python bench/fixed_names.py                     # the default roots (below), 2 processes
    python bench/fixed_names.py --root DIR ... --details

It prints the files fixed, the fixes applied, files the fixer refused, and the new undefined
names and redefinitions (goal: 0), each listed with ``--details``; exit 1 if any.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from pyflakes import checker, messages

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
#: What a fix may never add: a use of a name nothing binds, or a second binding of one.
COUNTED = {
    messages.UndefinedName: "undefined name",
    messages.UndefinedLocal: "name used before its local binding",
    messages.RedefinedWhileUnused: "redefinition",
    messages.ImportShadowedByLoopVar: "redefinition",
}
TIMEOUT_S = 120


def flagged(source: str, path: str) -> Counter:
    """(kind, name) of each counted pyflakes message of ``source``; empty if it does not parse."""
    try:
        tree = compile(source, path, "exec", 0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    except (SyntaxError, ValueError):
        return Counter()
    found = checker.Checker(tree, filename=path)
    return Counter(
        (COUNTED[type(message)], str(message.message_args[0]))
        for message in found.messages
        if type(message) in COUNTED
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
    new = flagged(outcome.source, path) - flagged(source, path)
    problems = [f"{kind} `{name}`" for (kind, name), count in sorted(new.items()) for _ in range(count)]
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
    kinds = Counter(text.split(" `")[0] for _, text in problems)
    print(f"new undefined names: {kinds['undefined name'] + kinds['name used before its local binding']}")
    print(f"new redefinitions: {kinds['redefinition']}")
    print(f"files with a new problem: {len({p for p, _ in problems})}")
    if options.details:
        for path, text in problems:
            print(f"  {path}: {text}")
        for path in refused:
            print(f"  refused {path}: {results[path][0]}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
