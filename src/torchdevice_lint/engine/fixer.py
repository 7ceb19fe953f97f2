"""Applying fixes: node replacements in one transform, then the file-level needs (a module-level
device binding, imports through LibCST's ``AddImportsVisitor``/``RemoveImportsVisitor``),
repeated until nothing applicable is left. The result is re-parsed and compiled; a fix that
would not yield valid code is refused, and a file with no applied fix is returned unchanged.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence

import libcst as cst

from ..model.findings import Edit, FixInfo, Location
from ..model.fixes import Applicability, FixError, ImportSpec
from ..syntax.cst_nodes import import_aliases
from ..syntax.lines import physical_lines
from .context import Analysis, RawFinding, binds_unconditionally

MAX_PASSES = 6


class Analyzer(Protocol):
    """What fixing needs of the engine: a fresh analysis of each pass's output. Passed in, so
    the engine (which asks the fixer to describe fixes) and the fixer do not import each other."""

    def analyze(self, path: str, source: str) -> Optional[Analysis]: ...


class UnreproducibleSource(FixError):
    """LibCST's code generation does not give back the file it parsed (it drops a trailing
    comment block with mixed line endings, for one), so rewriting it would lose code."""


class _ReplaceNodes(cst.CSTTransformer):
    def __init__(self, replacements: Dict[int, list]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node, updated_node):
        for replace in self.replacements.get(id(original_node), ()):
            updated_node = replace(updated_node)
        return updated_node


def _is_import_line(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)
    if isinstance(statement, cst.Try):
        return all(_is_import_line(inner) for inner in statement.body.body)
    return False


def _binding_index(body: Sequence[cst.CSTNode], first_user: int) -> int:
    """Insert after the last top-level import that precedes the first statement needing the
    binding (after a module docstring and ``__future__`` imports at least)."""
    index = 0
    if body and _is_docstring(body[0]):
        index = 1
    for position, statement in enumerate(body[:first_user]):
        if _is_import_line(statement):
            index = position + 1
    return index


def _already_bound(spec: ImportSpec, aliases: Dict[str, str]) -> bool:
    """Whether the file's top-level imports already bind what ``spec`` would."""
    if spec.obj is not None:
        local, qualified = spec.asname or spec.obj, f"{spec.module}.{spec.obj}"
    elif spec.asname is not None:
        local, qualified = spec.asname, spec.module
    else:
        local = qualified = spec.module.split(".")[0]
        if "." in spec.module:
            return False
    return aliases.get(local) == qualified


def _is_docstring(statement: cst.CSTNode) -> bool:
    return (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString))
    )


def apply_fixes(analysis: Analysis, findings: Iterable[RawFinding]) -> str:
    """The module's code with the given findings' fixes applied (one transform)."""
    findings = [f for f in findings if f.fix is not None]
    replacements: Dict[int, list] = {}
    imports: List[ImportSpec] = []
    removable: List[ImportSpec] = []
    binding_users = []
    for raw in findings:
        fix = raw.fix
        for node, replace in fix.replacements.items():
            replacements.setdefault(id(node), []).append(replace)
        imports.extend(fix.imports)
        removable.extend(fix.removable_imports)
        if fix.needs_device_binding:
            binding_users.append(raw)
    module = analysis.module.visit(_ReplaceNodes(replacements)) if replacements else analysis.module
    settings = analysis.ctx.settings
    top_level = {id(statement): i for i, statement in enumerate(analysis.module.body)}
    first_user = min((top_level.get(id(raw.top_statement), len(top_level)) for raw in binding_users), default=0)
    if binding_users and not any(
        binds_unconditionally(statement, settings.device_name) for statement in analysis.module.body[:first_user]
    ):
        index = _binding_index(module.body, first_user)
        binding = cst.parse_statement(f"{settings.device_name} = {settings.binding_expression()}\n")
        if index > 0 and _is_import_line(module.body[index - 1]):
            binding = binding.with_changes(leading_lines=[cst.EmptyLine()])  # isort: a blank line after imports
        body = list(module.body)
        if index < len(body) and isinstance(body[index], (cst.FunctionDef, cst.ClassDef)) and not body[index].leading_lines:
            # keep PEP 8's two blank lines between the new binding and a definition
            body[index] = body[index].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        body.insert(index, binding)
        module = module.with_changes(body=body)
        imports.extend(settings.binding_imports())
    if imports or removable:
        # libcst.codemod costs 0.6 s to import: only fixes that touch imports pay for it.
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

        context = CodemodContext()
        top_level_imports = {
            local: qualified
            for statement in module.body
            if isinstance(statement, cst.SimpleStatementLine)
            for small in statement.body
            for local, qualified in import_aliases(small).items()
        }
        for spec in dict.fromkeys(imports):
            if _already_bound(spec, top_level_imports):
                continue  # AddImportsVisitor misses imports below a leading statement
            AddImportsVisitor.add_needed_import(context, spec.module, spec.obj, spec.asname)
        for spec in dict.fromkeys(removable):
            RemoveImportsVisitor.remove_unused_import(context, spec.module, spec.obj, spec.asname)
        if imports:
            module = AddImportsVisitor(context).transform_module(module)
        if removable:
            module = RemoveImportsVisitor(context).transform_module(module)
    return module.code


def _threshold(unsafe: bool) -> int:
    return (Applicability.UNSAFE if unsafe else Applicability.SAFE).rank


def applicable(findings: Iterable[RawFinding], unsafe: bool) -> List[RawFinding]:
    limit = _threshold(unsafe)
    return [
        f for f in findings
        if f.fix is not None and f.fix.replacements and f.fix.applicability.rank <= limit
    ]


def verify(code: str, path: str) -> None:
    try:
        cst.parse_module(code)
        compile(code, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as error:
        raise FixError(f"a fix would produce invalid code ({error.__class__.__name__}); file left unchanged") from None


@dataclass
class FixOutcome:
    source: str
    applied: Dict[str, int] = field(default_factory=dict)  # code -> count of applied fixes
    remaining: List[RawFinding] = field(default_factory=list)
    final: Optional[Analysis] = None

    @property
    def changed(self) -> bool:
        return bool(self.applied)


def lost_suffix(analysis: Analysis) -> str:
    """What LibCST's code generation drops from the end of the analysed source: the final
    newline of a file with CR-only line endings (``"a = 1\r"`` comes back as ``"a = 1"``).
    The fixer puts it back; any other difference means the file cannot be rewritten safely."""
    source, generated = analysis.ctx.source, analysis.module.code
    if source.startswith(generated) and not source[len(generated):].strip("\r\n"):
        return source[len(generated):]
    raise UnreproducibleSource("LibCST does not reproduce this file exactly, so it is not rewritten; file left unchanged")


def fix_source(
    engine: Analyzer,
    path: str,
    source: str,
    unsafe: bool,
    on_pass: Optional[Callable[[Analysis, List[RawFinding], str], None]] = None,
) -> FixOutcome:
    """Fix until no applicable fix is left; ``outcome.source`` is ``source`` itself when nothing
    was applied. ``on_pass(analysis, chosen, updated)`` sees each pass (the reliability check
    uses it). Raises Unparsable for an unparsable input and FixError for a bad fix."""
    outcome = FixOutcome(source=source)
    current = source
    analysis = engine.analyze(path, current)
    for _ in range(MAX_PASSES):
        if analysis is None:
            break
        chosen = applicable(analysis.findings, unsafe)
        if not chosen:
            break
        updated = apply_fixes(analysis, chosen) + lost_suffix(analysis)
        if updated == current:
            break
        verify(updated, path)
        if on_pass is not None:
            on_pass(analysis, chosen, updated)
        for raw in chosen:
            outcome.applied[raw.rule.code] = outcome.applied.get(raw.rule.code, 0) + 1
        current = updated
        analysis = engine.analyze(path, current)
    outcome.source = current if outcome.applied else source
    outcome.final = analysis
    outcome.remaining = list(analysis.findings) if analysis else []
    return outcome


def fix_info(raw: RawFinding, analysis: Analysis, with_edits: bool) -> FixInfo:
    fix = raw.fix
    info = FixInfo(applicability=fix.applicability.value, message=fix.message)
    if with_edits and (fix.replacements or fix.needs_device_binding):
        try:
            suffix = lost_suffix(analysis)
        except UnreproducibleSource:
            return info  # no edits: the file cannot be rewritten exactly
        info.edits = line_edits(analysis.ctx.source, apply_fixes(analysis, [raw]) + suffix)
    return info


def line_edits(old: str, new: str) -> List[Edit]:
    """Text edits, in whole lines, that turn ``old`` into ``new``."""
    old_lines = physical_lines(old, keepends=True)
    new_lines = physical_lines(new, keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        edits.append(Edit("".join(new_lines[j1:j2]), Location(i1 + 1, 1), Location(i2 + 1, 1)))
    return edits
