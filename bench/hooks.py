"""The torch.cuda hooks of DeepSpeed, vLLM, llm-compressor, LMCache and vllm-omni against the
configuration that replaces them (docs/migrating-from-hooks.md), line by line on their own code.

Each hook is replayed from its description in ``bench/hooks/pins.toml`` (its patterns, file
filters and escapes); each project's ``[tool.torchdevice-lint]`` table is the ``toml`` block of
its section in the docs page, so the page's configuration is what is measured. A line the hook
flags and the rule does not is counted by where the match stands (a comment, a string, code);
a line the rule reports and the hook does not by whether the hook's text is on it at all (an
alias: ``from torch import cuda``, ``import torch as th``).

    python bench/hooks.py                   # the table of docs/migrating-from-hooks.md
    python bench/hooks.py --details         # and the lines each side alone flags
    python bench/hooks.py --root DIR        # checkouts elsewhere (or $TORCHDEVICE_HOOKS_ROOT)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

if sys.version_info >= (3, 11):
    import tomllib
else:  # like the package's own config reader
    import tomli as tomllib

from torchdevice_lint.syntax.ast_nodes import dotted_name

HERE = Path(__file__).resolve().parent
PINS = HERE / "hooks" / "pins.toml"
DOCS = HERE.parent / "docs" / "migrating-from-hooks.md"
DEFAULT_ROOT = Path(os.environ.get("TORCHDEVICE_HOOKS_ROOT", "/work/eval/hooks"))
#: Written at the top of each checkout for the run (the checkouts are scratch, never committed).
CONFIG_NAME = "torchdevice-policy.toml"

Line = Tuple[str, int]


@dataclass(frozen=True)
class Check:
    code: str
    pattern: Optional[str] = None
    ast: Optional[str] = None
    escape: Optional[str] = None
    skip_commented: bool = False


@dataclass
class Project:
    name: str
    repo: str
    commit: str
    source: str
    folder: str
    hook: str
    files: str
    exclude: str
    checks: List[Check] = field(default_factory=list)

    def root(self, root: Path) -> Path:
        return root / self.folder


def load_projects(path: Path = PINS) -> List[Project]:
    with path.open("rb") as handle:
        entries = tomllib.load(handle)["project"]
    return [Project(**{**entry, "checks": [Check(**check) for check in entry["checks"]]}) for entry in entries]


def configuration(name: str, docs: Path = DOCS) -> str:
    """The ``toml`` block of the docs page's section ``## <name>``."""
    section = docs.read_text(encoding="utf-8").split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```toml\n", 1)[1].split("```", 1)[0]


def python_files(root: Path) -> List[str]:
    return sorted(
        path.relative_to(root).as_posix() for path in root.rglob("*.py*") if path.suffix in (".py", ".pyi") and path.is_file()
    )


# -- the hooks, replayed ------------------------------------------------------------------------------
def hook_lines(project: Project, root: Path, files: Sequence[str]) -> Dict[Line, Set[str]]:
    """(path, line) -> the codes of the checks that flag it, as the project's hook would."""
    flagged: Dict[Line, Set[str]] = {}
    for relative in files:
        if not re.search(project.files, relative) or re.search(project.exclude, relative):
            continue
        text = (root / relative).read_text(encoding="utf-8", errors="replace")
        for check in project.checks:
            rows = _ast_rows(text, check.ast) if check.ast else _pattern_rows(text, check)
            for row in rows:
                flagged.setdefault((relative, row), set()).add(check.code)
    return flagged


def _pattern_rows(text: str, check: Check) -> Set[int]:
    rows = set()
    for number, line in enumerate(text.splitlines(), 1):
        if check.escape and check.escape in line:
            continue
        for match in re.finditer(check.pattern, line):
            if not (check.skip_commented and "#" in line[: match.start()]):
                rows.add(number)
                break
    return rows


def _ast_rows(text: str, module: str) -> Set[int]:
    """Attribute chains spelled ``<module>...`` and ``from <module>... import``: llm-compressor's
    AST hook (no alias is resolved)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    rows = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (dotted_name(node) or "").startswith(module):
            rows.add(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(module):
            rows.add(node.lineno)
    return rows


def _rows_parse(path: Path) -> bool:
    """Whether an AST hook reading ``path`` as UTF-8 parses it (a byte-order mark does not)."""
    try:
        ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return False
    return True


# -- the rules ----------------------------------------------------------------------------------------
def tool_lines(project: Project, root: Path, config_text: str, paths: Sequence[Path]) -> Dict[Line, Dict[str, Set[str]]]:
    """(path, line) -> code -> the names ``torchdevice-lint check`` reports there with
    ``config_text`` as the configuration (only the rules compared run)."""
    config = root / CONFIG_NAME
    config.write_text(config_text, encoding="utf-8")
    codes = ",".join(sorted({check.code for check in project.checks if check.code}))
    command = [
        sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())",
        "check", "--config", str(config), "--select", codes, "--output-format", "json", "--no-cache", "--exit-zero",
        "--quiet", *map(str, paths),
    ]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0 and not completed.stdout.startswith("["):
        raise SystemExit(f"check failed on {root}: {completed.stderr.strip()[-500:]}")
    reported: Dict[Line, Dict[str, Set[str]]] = {}
    for finding in json.loads(completed.stdout):
        if "cell" in finding:  # a notebook: the hooks read .py files only
            continue
        relative = Path(finding["filename"]).resolve().relative_to(root.resolve()).as_posix()
        name = finding["message"].split("`")[1] if finding["message"].count("`") >= 2 else ""
        reported.setdefault((relative, finding["location"]["row"]), {}).setdefault(finding["code"], set()).add(name)
    return reported


def corpus_configuration(name: str) -> str:
    """The docs page's ``banned-backend-apis`` of ``name`` alone: on other code its paths mean nothing."""
    table = tomllib.loads(configuration(name))["tool"]["torchdevice-lint"]
    banned = table.get("banned-backend-apis")
    return "[tool.torchdevice-lint]\n" + (f"banned-backend-apis = {json.dumps(banned)}\n" if banned else "")


# -- the comparison -----------------------------------------------------------------------------------
@dataclass
class Comparison:
    project: Project
    code: str
    hook: Set[Line]
    tool: Set[Line]
    #: where the hook's match stands on the lines only the hook flags: comment, string, code
    hook_only: Counter = field(default_factory=Counter)
    #: lines only the rule reports: in a file the hook skips (grandfathered: the baseline's),
    #: escaped (the hook's escape comment is on the line), an alias (the name is not spelled out on
    #: the line: ``from torch import cuda``) or another use of the name than the hook's pattern
    tool_only: Counter = field(default_factory=Counter)
    details: List[str] = field(default_factory=list)

    def row(self) -> str:
        both = len(self.hook & self.tool)
        if not self.code:
            return f"| {self.project.name} | {self._patterns()} | {len(self.hook)} | (no rule) | | | |"
        where = ", ".join(f"{count} in {kind}" for kind, count in sorted(self.hook_only.items())) or "0"
        alone = ", ".join(f"{count} {kind}" for kind, count in sorted(self.tool_only.items())) or "0"
        return f"| {self.project.name} | {self.code} | {len(self.hook)} | {len(self.tool)} | {both} | {where} | {alone} |"

    def _patterns(self) -> str:
        patterns = [check.pattern or check.ast for check in self.project.checks if check.code == self.code]
        return " ".join(f"`{pattern}`" for pattern in patterns)


def compare(project: Project, root: Path, corpus: Optional[Path] = None) -> List[Comparison]:
    """The project's hook and rules on its checkout; or, with ``corpus``, on every file of
    that folder, the hook's file filters and the configuration's paths left out."""
    folder = corpus or project.root(root)
    files = python_files(folder)
    if corpus is None:
        flagged = hook_lines(project, folder, files)
        reported = tool_lines(project, folder, configuration(project.name), [folder])
    else:
        flagged = hook_lines(replace(project, files="", exclude="^$"), folder, files)
        reported = tool_lines(project, folder, corpus_configuration(project.name), [folder])
    comparisons = []
    for code in dict.fromkeys(check.code for check in project.checks):
        hook = {line for line, codes in flagged.items() if code in codes}
        tool = {line: found[code] for line, found in reported.items() if code in found} if code else {}
        comparison = Comparison(project if corpus is None else replace(project, files="", exclude="^$"), code, hook, set(tool))
        if code:
            _classify(comparison, folder, tool)
        comparisons.append(comparison)
    return comparisons


def _classify(comparison: Comparison, folder: Path, names: Dict[Line, Set[str]]) -> None:
    project, checks = comparison.project, [check for check in comparison.project.checks if check.code == comparison.code]
    texts: Dict[str, List[str]] = {}
    for relative, row in sorted(comparison.hook ^ comparison.tool):
        if relative not in texts:
            texts[relative] = (folder / relative).read_text(encoding="utf-8", errors="replace").splitlines()
        line = texts[relative][row - 1]
        if (relative, row) in comparison.hook:
            kind = _where(folder / relative, row, line, checks)
            comparison.hook_only[kind] += 1
            comparison.details.append(f"hook only ({kind}): {relative}:{row}: {line.strip()}")
            continue
        if not re.search(project.files, relative) or re.search(project.exclude, relative):
            kind = "in files the hook skips"
        elif any(check.escape and check.escape in line for check in checks):
            kind = "escaped"
        elif any(check.ast for check in checks) and not _rows_parse(folder / relative):
            kind = "in files the hook cannot parse"
        elif any(name and name in line for name in names[(relative, row)]):
            kind = "other use of the name"
        else:
            kind = "alias" if comparison.code == "TDV905" else "other spelling"
        comparison.tool_only[kind] += 1
        comparison.details.append(f"{comparison.code} only ({kind}): {relative}:{row}: {line.strip()}")


def _where(path: Path, row: int, line: str, checks: Sequence[Check]) -> str:
    """What the first match on the line stands in: a comment, a string, or code."""
    column = min((m.start() for c in checks for m in [re.search(c.pattern or re.escape(c.ast), line)] if m), default=0)
    try:
        with path.open("rb") as handle:
            tokens = list(tokenize.tokenize(handle.readline))
    except (tokenize.TokenError, SyntaxError):
        return "code"
    for token in tokens:
        (start_row, start_col), (end_row, end_col) = token.start, token.end
        if (start_row, start_col) <= (row, column) < (end_row, end_col):
            if token.type == tokenize.COMMENT:
                return "comments"
            if token.type == tokenize.STRING or tokenize.tok_name[token.type].startswith("FSTRING"):
                return "strings"
    return "imports (the rule reports their uses)" if line.lstrip().startswith(("import ", "from ")) else "code"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="where the checkouts are")
    parser.add_argument("--corpus", type=Path, help="compare on every .py file of this folder instead")
    parser.add_argument("--details", action="store_true", help="list the lines each side alone flags")
    args = parser.parse_args(argv)
    print("| project | rule | hook flags | rule reports | both | hook only: where the match is | rule only |")
    print("|---|---|---|---|---|---|---|")
    details = []
    for project in load_projects():
        if args.corpus is None and not project.root(args.root).is_dir():
            print(f"missing checkout {project.root(args.root)} ({project.source})", file=sys.stderr)
            continue
        for comparison in compare(project, args.root, args.corpus):
            print(comparison.row(), flush=True)
            details.extend(f"{project.name}: {line}" for line in comparison.details)
    if args.details:
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
