"""Applying fixes: node replacements in one transform, then the file-level needs (a module-level
device binding, imports through LibCST's ``AddImportsVisitor``/``RemoveImportsVisitor``),
repeated until nothing applicable is left. The result is re-parsed and compiled; a fix that
would not yield valid code, or would name something the target torch lacks, is refused, and a
file with no applied fix is returned unchanged.
"""

from __future__ import annotations

import ast
import bisect
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Set, Tuple, Union

import libcst as cst

from ..knowledge.torch_releases import lacking, torch_names
from ..model.fixes import Applicability, FixError, ImportSpec
from ..syntax.ast_parse import compile_python
from ..syntax.cells import separator_number
from ..syntax.cst_nodes import import_aliases
from ..syntax.cst_walk import walk
from .context import Analysis, RawFinding, binds_unconditionally

MAX_PASSES = 6


class Analyzer(Protocol):
    """What fixing needs of the engine: a fresh analysis of each pass's output. Passed in, so
    the engine (which asks the fixer to describe fixes) and the fixer do not import each other."""

    def analyze(self, path: str, source: str, module: Optional[cst.Module] = None) -> Optional[Analysis]: ...


class UnreproducibleSource(FixError):
    """LibCST's code generation does not give back the file it parsed (it drops a trailing
    comment block with mixed line endings, for one), so rewriting it would lose code."""


class ReplaceNodes(cst.CSTTransformer):
    """Applies each original node's replacements (by ``id``) to the node as rewritten below it.
    With ``above`` (the ids of every node above a replaced one) only those nodes' children are
    visited: a transform rebuilds every node it visits, and the rest of the module is kept as it
    is (the same code; a whole-module transform per pass made fixing a long file cost 3.5x its
    check)."""

    def __init__(self, replacements: Dict[int, list], above: Optional[Set[int]] = None) -> None:
        super().__init__()
        self.replacements = replacements
        self.above = above

    def on_visit(self, node) -> bool:
        return self.above is None or id(node) in self.above

    def on_leave(self, original_node, updated_node):
        for replace in self.replacements.get(id(original_node), ()):
            updated_node = replace(updated_node)
        return updated_node


def is_import_line(statement: cst.CSTNode) -> bool:
    if isinstance(statement, cst.SimpleStatementLine):
        return all(isinstance(small, (cst.Import, cst.ImportFrom)) for small in statement.body)
    if isinstance(statement, cst.Try):
        return all(is_import_line(inner) for inner in statement.body.body)
    return False


def _top_level_layout(analysis: Analysis) -> Tuple[int, List[int], int, int]:
    """One scan of the module's body, kept with the analysis (every fix that needs the binding
    asks, and a scan per fix made a file of many top-level findings quadratic): the first
    statement binding the device name, the positions of the import lines, where the binding may
    go at the earliest (after a module docstring) and at the latest (in a notebook, the end of the
    first cell importing torch, so every later cell may use it)."""
    if "top-level layout" not in analysis.derived:
        body = analysis.module.body
        name = analysis.ctx.settings.device_name
        first_binder = next((i for i, statement in enumerate(body) if binds_unconditionally(statement, name)), len(body))
        imports = [i for i, statement in enumerate(body) if is_import_line(statement)]
        earliest = 1 if body and _is_docstring(body[0]) else 0
        analysis.derived["top-level layout"] = (first_binder, imports, earliest, end_of_first_torch_cell(body))
    return analysis.derived["top-level layout"]


def _starts_cell(statement: cst.CSTNode) -> bool:
    """A notebook cell's separator (``syntax.cells``) in a notebook's joined cells."""
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    comment = statement.trailing_whitespace.comment
    expression = statement.body[0]
    return (
        isinstance(expression, cst.Expr) and isinstance(expression.value, cst.Ellipsis)
        and comment is not None and separator_number(f"...  {comment.value}") is not None
    )


def _imports_torch(statement: cst.CSTNode) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and any(
        qualified == "torch" or qualified.startswith("torch.")
        for small in statement.body
        for qualified in import_aliases(small).values()
    )


def end_of_first_torch_cell(body: Sequence[cst.CSTNode]) -> int:
    """In a notebook's joined cells, the index of the statement that starts the cell after the
    first one importing torch: the cells run in order, and the first may be ``!pip install``.
    ``len(body)`` in a plain module."""
    starts = [index for index, statement in enumerate(body) if _starts_cell(statement)]
    importing = next((index for index, statement in enumerate(body) if _imports_torch(statement)), None) if starts else None
    if importing is None:
        return len(body)
    return next((index for index in starts if index > importing), len(body))


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
    module = analysis.module.visit(ReplaceNodes(replacements, _above(analysis.module, findings))) if replacements else analysis.module
    top_level = {id(statement): i for i, statement in enumerate(analysis.module.body)}
    first_user = (
        min(top_level.get(id(raw.top_statement), len(top_level)) for raw in binding_users) if binding_users else None
    )
    return with_file_needs(analysis, module, first_user, imports, removable).code


def _above(module: cst.Module, findings: Sequence[RawFinding]) -> Optional[Set[int]]:
    """The ids of the nodes above each node the findings' fixes replace, found by one walk of
    the top-level statements the findings are in; None (visit everything) when a replaced node
    lies outside them."""
    tops = {id(statement) for statement in module.body}
    roots = {id(raw.top_statement): raw.top_statement for raw in findings}
    if not roots.keys() <= tops:
        return None
    parents = _ParentsOf()
    for root in roots.values():
        walk(root, parents)
    above = {id(module)}
    for raw in findings:
        for node in raw.fix.replacements:
            if id(node) in roots:
                continue
            if id(node) not in parents.parent:
                return None
            while id(node) in parents.parent:
                node = parents.parent[id(node)]
                above.add(id(node))
    return above


class _ParentsOf:
    """Each visited node's parent, by id (the root has none)."""

    def __init__(self) -> None:
        self.parent: Dict[int, cst.CSTNode] = {}
        self.stack: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if self.stack:
            self.parent[id(node)] = self.stack[-1]
        self.stack.append(node)
        return True

    def on_leave(self, node: cst.CSTNode) -> None:
        self.stack.pop()


def binding_place(analysis: Analysis, first_user: Optional[int]) -> Optional[int]:
    """Where the device binding goes for a fix used at top-level statement ``first_user``: the
    index in the module's body, after the last top-level import above that statement (after a
    module docstring at least); None without a user, or when a statement above binds it already."""
    if first_user is None:
        return None
    first_binder, imports, earliest, latest = _top_level_layout(analysis)
    if first_binder < first_user:
        return None
    above = bisect.bisect_left(imports, min(first_user, latest))
    return imports[above - 1] + 1 if above else earliest


def with_file_needs(
    analysis: Analysis, module: cst.Module, first_user: Optional[int], imports: List[ImportSpec], removable: List[ImportSpec]
) -> cst.Module:
    """``module`` (the analysed module, its fixes' replacements made) with what those fixes need
    of the file: the device binding above the top-level statement ``first_user`` (None: no
    binding), then ``imports`` added and ``removable`` removed where nothing uses them any more."""
    devices = analysis.ctx.devices
    imports = list(imports)
    index = binding_place(analysis, first_user)
    if index is not None:
        binding, spaced = binding_statement(analysis, module.body, index)
        body = list(module.body)
        if spaced:
            body[index] = body[index].with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        body.insert(index, binding)
        module = module.with_changes(body=body)
        imports.extend(devices.binding_imports())
    missing = missing_imports(module.body, imports)
    if missing or removable:
        # libcst.codemod costs 0.6 s to import: only fixes that touch imports pay for it.
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

        context = CodemodContext()
        for spec in missing:
            AddImportsVisitor.add_needed_import(context, spec.module, spec.obj, spec.asname)
        for spec in dict.fromkeys(removable):
            RemoveImportsVisitor.remove_unused_import(context, spec.module, spec.obj, spec.asname)
        if missing:
            module = _with_imports_added(module, AddImportsVisitor(context))
        if removable:
            module = RemoveImportsVisitor(context).transform_module(module)
    return module


def _with_imports_added(module: cst.Module, visitor: cst.CSTTransformer) -> cst.Module:
    """The module with ``AddImportsVisitor``'s imports, added to its head alone (``head_with``)."""
    size, head = head_with(module, visitor)
    return module.with_changes(header=head.header, body=[*head.body, *module.body[size:]])


def head_with(module: cst.Module, visitor: cst.CSTTransformer) -> Tuple[int, cst.Module]:
    """How many top-level statements the module's head holds, and the head after ``visitor``.
    ``AddImportsVisitor`` reads and changes only the block of imports at the top of the module
    (after a docstring or ``__strict__`` flag) and the statement that ends it: it runs on the
    first statement, the imports after it and the next statement, not on the whole module twice
    (a gathering pass and the transform; 1 s on a 2,000-line file)."""
    body = list(module.body)
    end = 1 if body else 0
    while end < len(body) and _is_plain_import(body[end]):
        end += 1
    size = min(end + 1, len(body))
    return size, module.with_changes(body=body[:size], footer=(), has_trailing_newline=True).visit(visitor)


def _is_plain_import(statement: cst.CSTNode) -> bool:
    """A line holding one ``import`` or ``from ... import`` (what AddImportsVisitor takes for the top block)."""
    return isinstance(statement, cst.SimpleStatementLine) and isinstance(statement.body[0], (cst.Import, cst.ImportFrom))


def binding_statement(analysis: Analysis, body: Sequence[cst.CSTNode], index: int) -> Tuple[cst.CSTNode, bool]:
    """The device binding to insert at ``body[index]``, a blank line above it after an import
    (as isort leaves one); and whether the definition it lands above needs PEP 8's two blank
    lines above it (it has none)."""
    ctx = analysis.ctx
    binding = cst.parse_statement(f"{ctx.settings.device_name} = {ctx.devices.binding_expression()}\n")
    if index > 0 and is_import_line(body[index - 1]):
        binding = binding.with_changes(leading_lines=[cst.EmptyLine()])
    spaced = index < len(body) and isinstance(body[index], (cst.FunctionDef, cst.ClassDef)) and not body[index].leading_lines
    return binding, spaced


def missing_imports(body: Sequence[cst.CSTNode], imports: Iterable[ImportSpec]) -> List[ImportSpec]:
    """Those of ``imports`` the file's top-level imports (and those of a top-level ``try``) do not
    bind already. (AddImportsVisitor
    misses imports below a leading statement, and each of its passes is a transform of the
    whole module.)"""
    lines = [statement for statement in body if isinstance(statement, cst.SimpleStatementLine)]
    # ``try: import torch ... except ImportError: ...`` at the top binds torch for what follows
    lines += [inner for statement in body if isinstance(statement, cst.Try) for inner in statement.body.body if isinstance(inner, cst.SimpleStatementLine)]
    bound = {local: qualified for statement in lines for small in statement.body for local, qualified in import_aliases(small).items()}
    return [spec for spec in dict.fromkeys(imports) if not _already_bound(spec, bound)]


def _threshold(unsafe: bool) -> int:
    return (Applicability.UNSAFE if unsafe else Applicability.SAFE).rank


def applicable(findings: Iterable[RawFinding], unsafe: bool) -> List[RawFinding]:
    limit = _threshold(unsafe)
    return [
        f for f in findings
        if f.fix is not None and f.fix.replacements and f.fix.applicability.rank <= limit
    ]


def verify(code: str, path: str) -> cst.Module:
    """``code``'s LibCST tree (the next pass analyses it: the engine parses as this does);
    FixError when LibCST or CPython refuses it."""
    try:
        module = cst.parse_module(code)
        compile(code, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as error:
        raise FixError(f"a fix would produce invalid code ({error.__class__.__name__}); file left unchanged") from None
    return module


def verify_target(original: Union[str, ast.AST], fixed: Union[str, ast.AST], settings) -> None:
    """Refuse a result that names something the target torch lacks (each rule asks the release
    table before it writes; this keeps a slip from reaching a file). Takes sources or their
    ``ast`` trees (the analyses hold them already)."""
    missing = lacking(settings.target_version(), torch_names(fixed) - torch_names(original))
    if missing:
        raise FixError(
            f"a fix would write `{missing[0]}`, which the target torch {settings.target_torch_version} lacks; file left unchanged"
        )


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
    analysis = original = engine.analyze(path, current)
    for _ in range(MAX_PASSES):
        if analysis is None:
            break
        chosen = applicable(analysis.findings, unsafe)
        if not chosen:
            break
        updated = apply_fixes(analysis, chosen) + lost_suffix(analysis)
        if updated == current:
            break
        parsed = verify(updated, path)
        if on_pass is not None:
            on_pass(analysis, chosen, updated)
        for raw in chosen:
            outcome.applied[raw.rule.code] = outcome.applied.get(raw.rule.code, 0) + 1
        current = updated
        analysis = engine.analyze(path, current, module=parsed)
    if outcome.applied:
        fixed_tree = analysis.ctx.python_tree() if analysis else compile_python(current)
        verify_target(original.ctx.python_tree(), fixed_tree, original.ctx.settings)
    outcome.source = current if outcome.applied else source
    outcome.final = analysis
    outcome.remaining = list(analysis.findings) if analysis else []
    return outcome
