"""What the language server needs, in plain LSP JSON and without pygls: findings as diagnostics,
each fix as text edits, a ``# noqa`` insertion, the whole-buffer fix that ``torchdevice-fix -``
writes, and settings per project. Kept apart from ``server.py`` so the conversions are tested
without a client and the base install never needs the LSP libraries."""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from ..engine.context import Analysis, RawFinding
from ..engine.edits import file_edits
from ..engine.engine import Engine, to_finding
from ..engine.noqa import NOQA
from ..model.errors import FileError, FileProblem, file_error
from ..model.findings import Edit, FileResult, Finding
from ..model.fixes import Applicability
from ..model.settings import ConfigError, Settings
from ..project.model import Projects as ProjectModels
from ..rules import all_rules, rule_by_code
from ..syntax.cells import CellsMoved, JoinedCells
from ..syntax.cst_reparse import Reparser
from ..syntax.layout import layout_move
from ..syntax.lines import LINE_BREAK, Lines, text_edits
from .config import SettingsResolver, find_pyproject, without_target_source
from .torch_target import forget_targets, target_for, with_target
from .notebooks import edits_in_cells, finding_in_cells, result_in_cells
from .runner import fix_file
from .sources import MAX_FILE_BYTES, SourceFile

SOURCE = "torchdevice-lint"
FIX_ALL_KIND = "source.fixAll.torchdevice"
QUICKFIX = "quickfix"
WARNING, INFORMATION, ERROR = 2, 3, 1
#: The rule pages ``torchdevice-lint rule --write-docs docs/rules`` writes, in a source checkout.
RULE_DOCS = Path(__file__).resolve().parents[3] / "docs" / "rules"
#: Lines past which a buffer is not checked: the first check of a buffer runs on the server's only
#: thread, at about 3,000 lines a CPU second, and every request waits for it.
MAX_BUFFER_LINES = 20_000

_SYNTAX_AT = re.compile(r"at (\d+):(\d+):")


def uri_to_path(uri: str) -> Optional[str]:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return url2pathname(unquote(parsed.path))


def lsp_edit(edit: Edit, lines: Lines) -> dict:
    """A fix's edit (the fixer's, shared with every output format) as an LSP text edit."""
    start, end = edit.location, edit.end_location
    return {"range": lines.range((start.row, start.column), (end.row, end.column)), "newText": edit.content}


@dataclass
class Checked:
    """One buffer after the engine: its findings (with the analysis their fixes need), or the
    one error that stopped the analysis."""

    uri: str
    path: str
    text: str
    engine: Engine
    analysis: Optional[Analysis] = None
    findings: List[Tuple[RawFinding, Finding]] = field(default_factory=list)
    error: Optional[str] = None
    reparser: Reparser = field(default_factory=Reparser)  # the module, kept for the next edit
    #: The last text analysed whole (this, or one whose findings these are, moved), its project facts.
    base: Optional["Checked"] = None
    project_key: str = ""
    #: Comments and rows no comment can follow (see ``_row_facts``), computed once.
    _rows: Optional[Tuple[Dict[int, Tuple[int, str]], Set[int]]] = None
    #: The fix-all result, computed once.
    _fixed_all: Optional[Tuple[str, Optional[str]]] = None

    @property
    def unsafe(self) -> bool:
        return self.engine.settings.unsafe_fixes

    def settled(self) -> "Checked":
        """This buffer with its analysis, which fixes need: a buffer whose findings were moved
        from an earlier text is analysed now (code actions ask for it; diagnostics do not)."""
        if self.base is not None and self.base is not self:
            full = check_buffer(self.engine, self.uri, self.path, self.text, self.base, reuse=False)
            self.analysis, self.findings, self.error, self.base, self.project_key = (
                full.analysis, full.findings, full.error, self, full.project_key
            )
        return self


def too_large(text: str) -> Optional[str]:
    """Why a buffer is too large to check (the CLI's size limit, ``MAX_BUFFER_LINES``), or None."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FILE_BYTES:
        return f"buffer is too large ({size / 2**20:.1f} MiB, limit {MAX_FILE_BYTES // 2**20} MiB); not checked"
    lines = text.count("\n") + 1
    if lines > MAX_BUFFER_LINES:
        return f"buffer is too large ({lines:,} lines, limit {MAX_BUFFER_LINES:,}); not checked"
    return None


def check_buffer(
    engine: Engine, uri: str, path: str, text: str, previous: Optional[Checked] = None, reuse: bool = True
) -> Checked:
    """The buffer's findings; ``previous``, the result of an earlier text of it, lends its module,
    and its findings when the edit since changed only comments and layout (``moved_findings``)."""
    checked = Checked(uri, path, text, engine, reparser=previous.reparser if previous is not None else Reparser())
    checked.error = too_large(text)
    if checked.error is not None:
        return checked
    moved = moved_findings(engine, path, text, previous.base) if reuse and previous is not None else None
    if moved is not None:
        checked.findings, checked.base = moved, previous.base
        return checked
    project = engine.projects.of(path) if engine.projects is not None else None
    tree = project.update(path, text) if project is not None else None
    try:
        checked.analysis = engine.analyze(path, text, tree=tree, parse=checked.reparser.parse)
    except (FileProblem, RecursionError) as error:
        checked.error = file_error(path, error).message
        return checked
    if checked.analysis is not None:
        checked.findings = [(raw, to_finding(path, raw, checked.analysis, False)) for raw in checked.analysis.findings]
        checked.base, checked.project_key = checked, engine.project_key(path)
    return checked


def moved_findings(engine: Engine, path: str, text: str, base: Optional[Checked]) -> Optional[List[Tuple[Optional[RawFinding], Finding]]]:
    """The findings of ``base`` (the last text analysed whole) moved onto ``text`` when only
    comments and layout changed since (``syntax/layout.py``), with the same settings and project
    facts; their raw findings are left out (``Checked.settled``). None when the engine must run."""
    if base is None or base.engine is not engine or base.reparser.text != base.text or engine.project_key(path) != base.project_key:
        return None
    facts = engine.projects.facts_for(path) if engine.projects is not None else None
    if facts is not None and (facts.cuda_kernels or facts.cuda_only_spans):
        return None  # what the project says of kernels counts lines: the model must read the new text
    region = base.reparser.region(text)
    move = layout_move(base.text, text, *region) if region is not None else None
    if move is None:
        return None
    found = move.findings([finding for _, finding in base.findings])
    return [(None, finding) for finding in found] if found is not None else None


def rule_href(code: str) -> Optional[str]:
    """The rule's page in a source checkout; None for an installed package, which ships no docs
    folder and has no published page to link to (the server writes no file, so it makes none)."""
    page = RULE_DOCS / f"{code}.md"
    return page.as_uri() if page.is_file() else None


def diagnostics(checked: Checked, lines: Lines) -> List[dict]:
    if checked.error is not None:
        match = _SYNTAX_AT.search(checked.error)
        row, column = (int(match.group(1)), int(match.group(2))) if match else (1, 1)
        return [{
            "range": lines.range((row, column), (row, column + 1)),
            "severity": ERROR,
            "source": SOURCE,
            "message": checked.error,
        }]
    return [diagnostic(finding, lines, checked.unsafe) for _, finding in checked.findings]


def diagnostic(finding: Finding, lines: Lines, unsafe: bool) -> dict:
    rule = rule_by_code(finding.code)
    message = f"{finding.name}: {finding.message}"
    fix = finding.fix
    if fix is not None and fix.applicability is Applicability.DISPLAY_ONLY:
        message += f"\nSuggestion: {fix.message}"
    elif fix is not None and fix.applicability is Applicability.UNSAFE and not unsafe:
        message += f"\nUnsafe fix (enable unsafeFixes to offer it): {fix.message}"
    result = {
        "range": _finding_range(finding, lines),
        "severity": WARNING if rule.default_enabled else INFORMATION,
        "code": finding.code,
        "source": SOURCE,
        "message": message,
        "data": {"name": finding.name},
    }
    href = rule_href(finding.code)
    if href is not None:
        result["codeDescription"] = {"href": href}
    return result


def _finding_range(finding: Finding, lines: Lines) -> dict:
    return lines.range(
        (finding.location.row, finding.location.column), (finding.end_location.row, finding.end_location.column)
    )


def _on_lines(a: dict, b: dict) -> bool:
    """Whether two ranges share a line: a cursor anywhere on a finding's line gets its actions."""
    return a["start"]["line"] <= b["end"]["line"] and b["start"]["line"] <= a["end"]["line"]


def wants(only: Optional[Sequence[str]], kind: str) -> bool:
    """Whether a code action of ``kind`` answers a request limited to the kinds in ``only``."""
    return not only or any(kind == prefix or kind.startswith(prefix + ".") for prefix in only)


def code_actions(
    checked: Checked, request_range: dict, only: Optional[Sequence[str]], lines: Lines, resolve: bool = False
) -> List[dict]:
    """A quick fix and a noqa action for each finding in the range; the fix-all action only when
    asked for by kind (it runs the fixer to a fixed point). With ``resolve`` (the client can
    resolve code actions) a quick fix's edit is left for ``resolve_action``: editors ask for
    actions on every cursor move, and a fix costs a transform and a parse of the whole buffer."""
    actions = []
    silenced = set()  # (code, row): two findings of one rule on a line get one noqa action
    if wants(only, QUICKFIX):
        for index, (raw, finding) in enumerate(checked.findings):
            if not _on_lines(_finding_range(finding, lines), request_range):
                continue
            shown = diagnostic(finding, lines, checked.unsafe)
            fix_action = _quick_fix(checked, index, shown, lines, resolve)
            if fix_action is not None:
                actions.append(fix_action)
            if (finding.code, finding.location.row) in silenced:
                continue
            silenced.add((finding.code, finding.location.row))
            noqa = noqa_edits(checked, finding.code, finding.location.row, finding.end_location.row, lines)
            if noqa is not None:
                actions.append(_action(f"Disable {finding.code} for this line", QUICKFIX, checked.uri, noqa, [shown]))
    if only and wants(only, FIX_ALL_KIND):
        edits = fix_all_edits(checked, lines)
        if edits:
            actions.append(_action("Fix all torchdevice-lint problems", FIX_ALL_KIND, checked.uri, edits))
    return actions


def _action(title: str, kind: str, uri: str, edits: List[dict], shown: Optional[List[dict]] = None) -> dict:
    action = {"title": title, "kind": kind, "edit": {"changes": {uri: edits}}}
    if shown:
        action["diagnostics"] = shown
    return action


def _quick_fix(checked: Checked, index: int, shown: dict, lines: Lines, resolve: bool) -> Optional[dict]:
    raw = checked.settled().findings[index][0]
    fix = raw.fix
    if fix is None or not fix.replacements or fix.applicability is Applicability.DISPLAY_ONLY:
        return None
    if fix.applicability is Applicability.UNSAFE and not checked.unsafe:
        return None
    title = f"Fix {raw.rule.code}: {fix.message}"
    if fix.applicability is Applicability.UNSAFE:
        title += " (unsafe)"
    action = {"title": title, "kind": QUICKFIX, "diagnostics": [shown], "isPreferred": fix.applicability is Applicability.SAFE}
    action["data"] = {"uri": checked.uri, "finding": index, "code": raw.rule.code}
    if not resolve:
        action = resolve_action(checked, action, lines)
        if "edit" not in action:
            return None
    return action


def resolve_action(checked: Checked, action: dict, lines: Lines) -> dict:
    """The quick fix with its edit, if the finding it names is still the buffer's."""
    data = action.get("data") or {}
    index = data.get("finding")
    if not isinstance(index, int) or not 0 <= index < len(checked.findings):
        return action
    if checked.findings[index][1].code != data.get("code"):
        return action
    edits = file_edits(checked.settled().analysis).of(checked.findings[index][0])
    if not edits:
        return action
    return {**action, "edit": {"changes": {checked.uri: [lsp_edit(edit, lines) for edit in edits]}}}


def fixed_buffer(checked: Checked) -> Tuple[str, Optional[str]]:
    """What ``torchdevice-fix -`` writes for this buffer (the same ``fix_file`` call, never
    writing), and the error that made it leave the buffer as it is."""
    if checked._fixed_all is None:
        source = SourceFile(checked.path, checked.text, "utf-8")
        result = fix_file(checked.engine, checked.path, checked.unsafe, write=False, source=source)
        checked._fixed_all = (checked.text, str(result.error)) if result.error is not None else (result.fixed, None)
    return checked._fixed_all


def fix_all_edits(checked: Checked, lines: Lines) -> List[dict]:
    if checked.error is not None or not checked.findings:
        return []
    fixed, _ = fixed_buffer(checked)
    return text_edits(checked.text, fixed, lines) if fixed != checked.text else []


# -- # noqa --------------------------------------------------------------------------------
def noqa_edits(checked: Checked, code: str, start_row: int, end_row: int, lines: Lines) -> Optional[List[dict]]:
    """Edits that add ``code`` to the ``# noqa`` comment of the finding's first line (its last
    line when the first ends inside a string or with a backslash), merging with a noqa comment
    already there; None when neither line can take a comment."""
    comments, blocked = _row_facts(checked)
    row = next((r for r in (start_row, end_row) if r not in blocked), None)
    if row is None or row > len(lines.lines):
        return None
    line = lines.lines[row - 1]
    comment = comments.get(row)
    match = NOQA.search(comment[1]) if comment else None
    if match is not None and not match.group("codes"):
        return None  # a bare noqa already covers every code
    if match is not None:
        column = comment[0] + match.end("codes")
        start, end, text = column, column, f", {code}"
    else:
        start, end, text = len(line.rstrip()), len(line), f"  # noqa: {code}"
    new_line = line[:start] + text + line[end:]
    new_text = "".join(
        (new_line if index == row - 1 else kept) + ending
        for index, (kept, ending) in enumerate(zip(lines.lines, LINE_BREAK.findall(checked.text) + [""]))
    )
    try:
        compile(new_text, checked.path, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError):
        return None
    return [{"range": lines.range((row, start + 1), (row, end + 1)), "newText": text}]


def _row_facts(checked: Checked) -> Tuple[Dict[int, Tuple[int, str]], Set[int]]:
    """The comment on each row (column, text), and the rows whose end a comment cannot follow
    (inside a multi-line string, or continued with a backslash)."""
    if checked._rows is None:
        comments: Dict[int, Tuple[int, str]] = {}
        blocked: Set[int] = set()
        try:
            for token in tokenize.generate_tokens(io.StringIO(checked.text, newline="").readline):
                if token.type == tokenize.COMMENT:
                    comments[token.start[0]] = (token.start[1], token.string)
                elif token.end[0] > token.start[0] and token.type not in (tokenize.NEWLINE, tokenize.NL):
                    blocked.update(range(token.start[0], token.end[0]))
        except (tokenize.TokenError, SyntaxError):
            pass
        for row, line in enumerate(LINE_BREAK.split(checked.text), start=1):
            if line.endswith("\\") and row not in comments:
                blocked.add(row)
        checked._rows = (comments, blocked)
    return checked._rows


# -- settings ------------------------------------------------------------------------------
class Projects:
    """An engine per project and target torch, each file's settings resolved as the command line
    resolves them (``app/config.py``: the nearest ``[tool.torchdevice-lint]`` table, the target
    torch of the file's own project); forgotten when a project file changes. ``unsafe_fixes``
    (the editor's setting) overrides the project's when given."""

    def __init__(self, unsafe_fixes: Optional[bool] = None) -> None:
        self.unsafe_fixes = unsafe_fixes
        self._resolver = SettingsResolver(overrides=lambda settings: settings.with_overrides(unsafe_fixes=unsafe_fixes))
        self._engines: Dict[Tuple[str, Optional[str]], Tuple[Engine, Optional[str]]] = {}
        #: Directories whose configuration does not load: the defaults and the error.
        self._broken: Dict[str, Tuple[Settings, str]] = {}
        #: The project model every engine judges with; open buffers replace their files in it.
        self.models = ProjectModels()

    def engine_for(self, path: str) -> Tuple[Engine, Optional[str]]:
        """The engine for a file, and the configuration error that made it fall back to the
        defaults (None when the configuration loaded)."""
        directory = os.path.dirname(os.path.abspath(path))
        if directory in self._broken:
            settings, error = self._broken[directory]
        else:
            try:
                settings, error = self._resolver(path), None
            except ConfigError as problem:
                pyproject = find_pyproject(path)
                root = os.path.dirname(str(pyproject)) if pyproject else directory
                settings = with_target(Settings(root=root), target_for(path)).with_overrides(unsafe_fixes=self.unsafe_fixes)
                error = str(problem)
                self._broken[directory] = (settings, error)
        shared = without_target_source(settings)
        key = (repr(shared), error)
        if key not in self._engines:
            self._engines[key] = (Engine(shared, all_rules(), self.models), error)
        return self._engines[key]

    def forget(self) -> None:
        self._resolver = SettingsResolver(overrides=self._resolver.overrides)
        self._engines.clear()
        self._broken.clear()
        forget_targets()
        self.models = ProjectModels()


# -- notebooks (LSP 3.17 notebook documents) -------------------------------------------------
@dataclass
class CheckedNotebook:
    """A notebook's code cells checked as one buffer (``checked``, the cells joined), and the
    URI of each cell's document by cell number (1-based among all the notebook's cells)."""

    checked: Checked
    cells: JoinedCells
    uris: Dict[int, str]

    def number_of(self, uri: str) -> Optional[int]:
        return next((number for number, cell_uri in self.uris.items() if cell_uri == uri), None)


def check_notebook(engine: Engine, uri: str, path: str, cells: Sequence[Tuple[int, str, str]],
                   previous: Optional[CheckedNotebook] = None) -> CheckedNotebook:
    """``cells``: ``(number, cell URI, text)`` of each code cell, in order; ``previous`` as ``check_buffer``'s."""
    joined, earlier = JoinedCells((number, text) for number, _, text in cells), previous.checked if previous else None
    return CheckedNotebook(check_buffer(engine, uri, path, joined.python, earlier), joined, {n: cell_uri for n, cell_uri, _ in cells})


def notebook_diagnostics(notebook: CheckedNotebook, lines_of: Callable[[str], Lines]) -> Dict[str, List[dict]]:
    """Each code cell's diagnostics (an empty list clears a cell's old ones)."""
    found: Dict[str, List[dict]] = {uri: [] for uri in notebook.uris.values()}
    checked = notebook.checked
    if checked.error is not None:
        match = _SYNTAX_AT.search(checked.error)
        number, row, column = notebook.cells.locate(*((int(match.group(1)), int(match.group(2))) if match else (1, 1)))
        message = result_in_cells(notebook.cells, FileResult(checked.path, error=FileError(checked.path, checked.error))).error.message
        if number in notebook.uris:
            lines = lines_of(notebook.cells.cell(number).source)
            found[notebook.uris[number]].append(
                {"range": lines.range((row, column), (row, column + 1)), "severity": ERROR, "source": SOURCE, "message": message}
            )
        return found
    for _, finding in checked.findings:
        in_cell = finding_in_cells(notebook.cells, finding)
        lines = lines_of(notebook.cells.cell(in_cell.cell).source)
        found[notebook.uris[in_cell.cell]].append(diagnostic(in_cell, lines, checked.unsafe))
    return found


def _cell_changes(notebook: CheckedNotebook, edits: List[Edit], lines_of: Callable[[str], Lines]) -> Dict[str, List[dict]]:
    changes: Dict[str, List[dict]] = {}
    for edit in edits_in_cells(notebook.cells, edits):
        lines = lines_of(notebook.cells.cell(edit.cell).source)
        changes.setdefault(notebook.uris[edit.cell], []).append(lsp_edit(edit, lines))
    return changes


def notebook_code_actions(
    notebook: CheckedNotebook, cell_uri: str, request_range: dict, only: Optional[Sequence[str]], lines_of: Callable[[str], Lines]
) -> List[dict]:
    """A cell's quick fixes and noqa actions (a fix may also add the device binding to the
    first cell that imports torch), and fix-all for the whole notebook, as ``code_actions``."""
    number, checked, actions = notebook.number_of(cell_uri), notebook.checked, []
    if number is None or checked.error is not None:
        return []
    lines = lines_of(notebook.cells.cell(number).source)
    joined_lines = Lines(checked.text, lines.encoding)
    for raw, finding in checked.settled().findings if wants(only, QUICKFIX) else ():
        in_cell = finding_in_cells(notebook.cells, finding)
        if in_cell.cell != number or not _on_lines(_finding_range(in_cell, lines), request_range):
            continue
        shown = diagnostic(in_cell, lines, checked.unsafe)
        fix = raw.fix
        if fix is not None and fix.replacements and (fix.applicability is Applicability.SAFE or
                                                     (fix.applicability is Applicability.UNSAFE and checked.unsafe)):
            changes = _cell_changes(notebook, file_edits(checked.analysis).of(raw) or [], lines_of)
            if changes:
                title = f"Fix {raw.rule.code}: {fix.message}" + (" (unsafe)" if fix.applicability is Applicability.UNSAFE else "")
                actions.append({"title": title, "kind": QUICKFIX, "diagnostics": [shown], "edit": {"changes": changes},
                                "isPreferred": fix.applicability is Applicability.SAFE})
        noqa = noqa_edits(checked, finding.code, finding.location.row, finding.end_location.row, joined_lines)
        if noqa is not None:
            row = noqa[0]["range"]["start"]["line"] + 1
            start = notebook.cells.locate(row, 1)[1] - 1
            noqa = [{**edit, "range": {key: {**edit["range"][key], "line": start} for key in ("start", "end")}} for edit in noqa]
            actions.append(_action(f"Disable {finding.code} for this line", QUICKFIX, cell_uri, noqa, [shown]))
    if only and wants(only, FIX_ALL_KIND):
        changes = notebook_fix_all(notebook, lines_of)
        if changes:
            actions.append({"title": "Fix all torchdevice-lint problems", "kind": FIX_ALL_KIND, "edit": {"changes": changes}})
    return actions


def notebook_fix_all(notebook: CheckedNotebook, lines_of: Callable[[str], Lines]) -> Dict[str, List[dict]]:
    """Edits per cell URI that apply every applicable fix, as ``torchdevice-fix`` would."""
    if notebook.checked.error is not None or not notebook.checked.findings:
        return {}
    fixed, error = fixed_buffer(notebook.checked)
    if error is not None:
        return {}
    try:
        sources = notebook.cells.split(fixed)
    except CellsMoved:
        return {}
    changes = {}
    for number, source in sources.items():
        old = notebook.cells.cell(number).source
        if source != old:
            changes[notebook.uris[number]] = text_edits(old, source, lines_of(old))
    return changes
