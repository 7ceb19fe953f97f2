"""A finding's fix as text edits: the one producer that every output format and the language
server read.

Applying one finding's fix to the whole module and diffing the result costs a transform and a
code generation of the whole file per finding (``--output-format json`` cost 5.7-10x
``concise`` on research code). Most fixes rewrite nodes inside one top-level statement, and may
add the device binding and imports near the top of the file. Their edits are that statement's
new code, plus the file-level additions, which every finding with the same needs shares and
which are computed once per file. A fix that reaches further (several statements, an import
statement, imports to remove) is applied to the whole module as before.
"""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

import libcst as cst

from ..knowledge.torch_releases import binding_imports
from ..model.findings import Edit, FixInfo, Location
from ..syntax.cst_nodes import import_aliases
from ..syntax.cst_walk import nodes_of
from ..syntax.diffs import AnchoredMatcher
from ..syntax.lines import physical_lines
from ..syntax.positions import innermost_statement, statement_code, statement_twins
from .context import Analysis, RawFinding
from .fixer import (
    ReplaceNodes,
    UnreproducibleSource,
    apply_fixes,
    binding_place,
    binding_statement,
    head_with,
    is_import_line,
    lost_suffix,
    missing_imports,
    with_file_needs,
)


def fix_info(raw: RawFinding, analysis: Analysis, with_edits: bool) -> FixInfo:
    """What the front ends show of a finding's fix; its edits when asked for."""
    fix = raw.fix
    info = FixInfo(fix.applicability, fix.message)
    if with_edits and (fix.replacements or fix.needs_device_binding):
        info.edits = file_edits(analysis).of(raw) or []
    return info


def file_edits(analysis: Analysis) -> "FileEdits":
    """The analysis's edits producer, made once."""
    if "edits" not in analysis.derived:
        analysis.derived["edits"] = FileEdits(analysis)
    return analysis.derived["edits"]


class FileEdits:
    """The edits of each finding's fix in one analysed file, computed on demand and kept."""

    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        self.module = analysis.module
        self.lines = physical_lines(analysis.ctx.source, keepends=True)
        self._index = {id(statement): index for index, statement in enumerate(self.module.body)}
        self._members: Dict[int, Set[int]] = {}
        self._needs: Dict[tuple, Optional[List[Edit]]] = {}
        self._by_finding: Dict[int, Optional[List[Edit]]] = {}
        self._whole: Dict[str, Optional[str]] = {}
        self._place: Dict[int, Optional[Tuple[int, str]]] = {}

    def of(self, raw: RawFinding) -> Optional[List[Edit]]:
        """The edits of ``raw``'s fix: ``[]`` when the file cannot be rewritten exactly (LibCST
        does not reproduce it), None when the fix would not yield valid code."""
        if id(raw) not in self._by_finding:
            if not self._ends_reproduced():  # the fixer refuses the file: no edits to offer either
                self._by_finding[id(raw)] = []
                return []
            local = self._local(raw)
            self._by_finding[id(raw)] = (local or None) if local is not None else self._applied(raw)
        return self._by_finding[id(raw)]

    def _applied(self, raw: RawFinding) -> Optional[List[Edit]]:
        """The edits from applying the fix to the whole module (``fixer.apply_fixes``)."""
        suffix = self._suffix()
        if suffix is None:
            return []
        fixed = apply_fixes(self.analysis, [raw]) + suffix
        return line_edits(self.analysis.ctx.source, fixed) if _compiles(fixed) else None

    def _local(self, raw: RawFinding) -> Optional[List[Edit]]:
        """The edits made from the innermost statement holding the fix's nodes and what the fix
        needs of the file; ``[]`` for a fix that does not compile; None where this does not apply."""
        fix = raw.fix
        index = self._index.get(id(raw.top_statement))
        if index is None or not fix.replacements or is_import_line(self.module.body[index]):
            return None
        target = self._target(raw, index, set(map(id, fix.replacements)))
        if target is None:
            return None
        statement, first_row, indents = target
        code = statement_code(self.module, statement, indents)
        last_row = first_row + len(physical_lines(code, keepends=True))
        if "".join(self.lines[first_row - 1:last_row - 1]) != code:
            return None
        replaced = statement.visit(ReplaceNodes({id(node): [replace] for node, replace in fix.replacements.items()}))
        if not isinstance(replaced, cst.CSTNode):
            return None
        new_code = statement_code(self.module, replaced, indents)
        # The new lines replace whole lines at the same indentation, and whether a statement
        # parses does not depend on the blocks around it (``ast`` only parses: ``return`` or
        # ``await`` out of place is the compiler's concern), so the statement is compiled alone:
        # compiling its whole top-level statement per finding made long functions quadratic.
        if not _compiles(statement_code(self.module, replaced) if indents else new_code):
            return []
        edits = _shifted(line_edits(code, new_code), first_row - 1)
        needs = self._file_needs(index if fix.needs_device_binding else None, tuple(fix.imports))
        if needs is None:
            return []
        if any(edit.location.row < last_row and edit.end_location.row > first_row for edit in needs):
            return None  # the additions rewrite the statement itself: apply both together
        removals = self._removals(fix, statement, replaced)
        if removals is None:
            return None
        return _merged(needs + removals + edits)

    def _removals(self, fix, statement: cst.CSTNode, replaced: cst.CSTNode) -> Optional[List[Edit]]:
        """The edits removing the imports the fix leaves unused, each by ``RemoveImportsVisitor``
        run on its own import statement: whether an import is still used is counted on CPython's
        tree (a name bound by that import alone in the whole file, read outside the rewritten
        statement or in its new code). None where that cannot be told here."""
        loads, binds = self._names()
        edits: List[Edit] = []
        for spec in fix.removable_imports:
            name = spec.asname or spec.obj or spec.module.split(".")[0]
            if binds.get(name, 0) != 1:
                return None
            left = loads.get(name, 0) - _reads(statement, name) + _reads(replaced, name)
            if left > 0:
                continue
            removal = self._removal(spec, name)
            if removal is None:
                return None
            edits.append(removal)
        return edits

    def _removal(self, spec, name: str) -> Optional[Edit]:
        """The edit ``RemoveImportsVisitor`` makes to the top-level import statement binding ``name``."""
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import RemoveImportsVisitor

        holder = next((
            statement for statement in self.module.body
            if isinstance(statement, cst.SimpleStatementLine)
            and any(name in import_aliases(small) for small in statement.body)
        ), None)
        placed = self._placed(holder) if holder is not None else None
        if placed is None:
            return None
        context = CodemodContext()
        RemoveImportsVisitor.remove_unused_import(context, spec.module, spec.obj, spec.asname)
        alone = self.module.with_changes(header=(), body=[holder], footer=(), has_trailing_newline=True)
        updated = RemoveImportsVisitor(context).transform_module(alone)
        first_row, code = placed
        new_code = updated.code if updated.body else ""
        return Edit(new_code, Location(first_row, 1), Location(first_row + len(physical_lines(code, keepends=True)), 1))

    def _names(self) -> Tuple[Dict[str, int], Dict[str, int]]:
        """How often each name is read, and bound, in the whole file (CPython's tree)."""
        if "names" not in self._whole:
            loads: Dict[str, int] = {}
            binds: Dict[str, int] = {}
            for node in ast.walk(self.analysis.ctx.python_tree()):
                if isinstance(node, ast.Name):
                    counts = loads if isinstance(node.ctx, ast.Load) else binds
                    counts[node.id] = counts.get(node.id, 0) + 1
                elif isinstance(node, ast.arg):
                    binds[node.arg] = binds.get(node.arg, 0) + 1
                elif isinstance(getattr(node, "name", None), str) and not isinstance(node, ast.alias):
                    binds[node.name] = binds.get(node.name, 0) + 1  # def, class, except ... as, match captures
                elif isinstance(node, ast.alias):
                    bound = node.asname or node.name.split(".")[0]
                    binds[bound] = binds.get(bound, 0) + 1
            self._whole["names"] = (loads, binds)
        return self._whole["names"]

    def _target(self, raw: RawFinding, index: int, keys: Set[int]) -> Optional[Tuple[cst.CSTNode, int, List[str]]]:
        """The innermost statement holding every node the fix replaces (a method, not its whole
        class), its first row and the indentation of the blocks around it."""
        first_lines = self.analysis.ctx.statement_first_lines
        if not first_lines:
            return None
        top = self.module.body[index]
        twins = self._twins()
        memo = self._whole.setdefault("statement offsets", {})
        inner = innermost_statement(self.module, raw.ancestors, twins[id(top)], memo) if twins else None
        if inner is not None and keys <= {id(node) for node in nodes_of(inner[0])}:
            return inner
        if not keys <= self._members_of(index):
            return None
        return top, first_lines[id(top)], []

    def _top_rows(self, index: int) -> Tuple[int, int]:
        """The first row of top-level statement ``index`` and the row after its last."""
        first_lines = self.analysis.ctx.statement_first_lines
        body = self.module.body
        end = first_lines[id(body[index + 1])] if index + 1 < len(body) else len(self.lines) + 1 - len(self.module.footer)
        return first_lines[id(body[index])], end

    def _placed(self, statement: cst.CSTNode) -> Optional[Tuple[int, str]]:
        """A top-level statement's first row and code, when its rows of the file hold exactly
        that code."""
        if id(statement) not in self._place:
            first_lines = self.analysis.ctx.statement_first_lines
            first_row = first_lines.get(id(statement)) if first_lines else None
            code = statement_code(self.module, statement) if first_row is not None else ""
            rows = len(physical_lines(code, keepends=True))
            exact = first_row is not None and "".join(self.lines[first_row - 1:first_row - 1 + rows]) == code
            self._place[id(statement)] = (first_row, code) if exact else None
        return self._place[id(statement)]

    def _twins(self) -> Optional[dict]:
        if "twins" not in self._whole:
            self._whole["twins"] = statement_twins(self.module, self.analysis.ctx.python_tree())
        return self._whole["twins"]

    def _file_needs(self, first_user: Optional[int], imports: tuple) -> Optional[List[Edit]]:
        """The edits that add the device binding (for a user at top-level ``first_user``) and
        ``imports`` the file lacks; None when the result would not compile."""
        place = binding_place(self.analysis, first_user)
        key = (place, imports)
        if key not in self._needs:
            self._needs[key] = self._needs_of(place, imports)
            if self._needs[key] is False:
                self._needs[key] = self._needs_applied(first_user, imports)
        return self._needs[key]

    def _needs_of(self, place: Optional[int], imports: tuple):
        """The binding's lines inserted above top-level statement ``place`` and the imports added
        to the head of the module; False where the two must be applied together."""
        body = self.module.body
        wanted = [*imports, *(binding_imports(self.analysis.ctx.settings) if place is not None else ())]
        missing = missing_imports(body, wanted)
        edits = []
        if missing:
            from libcst.codemod import CodemodContext
            from libcst.codemod.visitors import AddImportsVisitor

            context = CodemodContext()
            for spec in missing:
                AddImportsVisitor.add_needed_import(context, spec.module, spec.obj, spec.asname)
            size, head = head_with(self.module, AddImportsVisitor(context))
            end_row = self._top_rows(size - 1)[1] if size else 1
            old = "".join(self.lines[:end_row - 1])
            if place is not None and place < size - 1 or self.module.with_changes(
                body=body[:size], footer=(), has_trailing_newline=True
            ).code != old:
                return False
            edits = line_edits(old, head.code)
        if place is not None:
            placed = self._placed(body[place])
            if placed is None or missing and placed[0] <= end_row:
                return False  # in or right below the rewritten head: the two are written together
            binding, spaced = binding_statement(self.analysis, body, place)
            text = self.module.code_for_node(binding) + (self.module.default_newline * 2 if spaced else "")
            edits.append(Edit(text, Location(placed[0], 1), Location(placed[0], 1)))
        return edits if _compiles(head.code if missing else "") and _compiles(edits[-1].content if place is not None else "") else None

    def _needs_applied(self, first_user: Optional[int], imports: tuple) -> Optional[List[Edit]]:
        """The binding and imports added to the whole module, as edits."""
        original = self._code()
        if original is None:
            return None
        updated = with_file_needs(self.analysis, self.module, first_user, list(imports), []).code
        return line_edits(original, updated) if _compiles(updated) else None

    def _members_of(self, index: int) -> Set[int]:
        if index not in self._members:
            self._members[index] = {id(node) for node in nodes_of(self.module.body[index])}
        return self._members[index]

    def _code(self) -> Optional[str]:
        """The module's whole code (one generation of it, kept); None when it is not the file."""
        if "code" not in self._whole:
            self._whole["code"] = self.module.code if self._suffix() is not None else None
        return self._whole["code"]

    def _ends_reproduced(self) -> bool:
        """Whether LibCST gives back the start and the end of the file: where its code generation
        loses text (a trailing comment block with mixed line endings, the final newline of a file
        of ``\\r`` line endings). Each statement a fix rewrites is compared on its own, so the
        whole module is not generated for this."""
        if "ends" not in self._whole:
            module, lines = self.module, self.lines
            header = "".join(module.code_for_node(line) for line in module.header)
            ends = "".join(lines).startswith(header)
            first_lines = self.analysis.ctx.statement_first_lines
            if ends and module.body and first_lines:
                tail = module.with_changes(header=(), body=[module.body[-1]]).code
                text = "".join(lines[first_lines[id(module.body[-1])] - 1:])
                ends = text.startswith(tail) and not text[len(tail):].strip("\r\n")
            elif ends:
                ends = self._suffix() is not None
            self._whole["ends"] = ends
        return self._whole["ends"]

    def _suffix(self) -> Optional[str]:
        """``fixer.lost_suffix`` of the file, once; None when LibCST does not reproduce it."""
        if "suffix" not in self._whole:
            try:
                self._whole["suffix"] = lost_suffix(self.analysis)
            except UnreproducibleSource:
                self._whole["suffix"] = None
        return self._whole["suffix"]


def _reads(node: cst.CSTNode, name: str) -> int:
    """How many ``Name`` nodes called ``name`` the subtree holds as names of values (not the
    ``attr`` of an attribute, nor a keyword argument's or a definition's name)."""
    named = nodes_of(node, cst.Name, cst.Attribute, cst.Arg, cst.FunctionDef, cst.ClassDef)
    labels = {id(getattr(found, field, None)) for found in named for field in ("attr", "keyword", "name")}
    return sum(1 for found in named if type(found) is cst.Name and found.value == name and id(found) not in labels)


def _merged(edits: List[Edit]) -> List[Edit]:
    """Edits in file order, an insertion joined to the edit that starts where it is made."""
    merged: List[Edit] = []
    for edit in sorted(edits, key=lambda edit: (edit.location.row, edit.end_location.row)):
        last = merged[-1] if merged else None
        if last is not None and last.location == last.end_location == edit.location:
            merged[-1] = Edit(last.content + edit.content, edit.location, edit.end_location)
        else:
            merged.append(edit)
    return merged


def _shifted(edits: List[Edit], rows: int) -> List[Edit]:
    return [
        Edit(edit.content, Location(edit.location.row + rows, edit.location.column),
             Location(edit.end_location.row + rows, edit.end_location.column))
        for edit in edits
    ]


def _compiles(code: str) -> bool:
    try:
        compile(code, "<fixed>", "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def line_edits(old: str, new: str) -> List[Edit]:
    """Text edits, in whole lines, that turn ``old`` into ``new``."""
    old_lines = physical_lines(old, keepends=True)
    new_lines = physical_lines(new, keepends=True)
    edits = []
    matcher = AnchoredMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            edits.append(Edit("".join(new_lines[j1:j2]), Location(i1 + 1, 1), Location(i2 + 1, 1)))
    return edits


def apply_edits(text: str, edits: List[Edit]) -> str:
    """``text`` with whole-line ``edits`` applied (the tests check edits against the fixer)."""
    lines = physical_lines(text, keepends=True)
    for edit in sorted(edits, key=lambda edit: edit.location.row, reverse=True):
        lines[edit.location.row - 1:edit.end_location.row - 1] = [edit.content]
    return "".join(lines)
