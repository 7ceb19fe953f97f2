"""The engine: pre-filter -> one LibCST parse -> every enabled rule in one batched pass ->
suppressions -> findings with positions.

The pass is a single ``CSTVisitor`` that keeps the shared context (imports, scopes, guards, the
ancestor stack) up to date and dispatches each node to the rules' ``visit_<Node>`` and
``leave_<Node>`` handlers, looked up once per rule class rather than per node.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple, Type

import libcst as cst

from . import guards, noqa
from .context import Analysis, FileContext, RawFinding
from .findings import FileError, FileResult, Finding, FixInfo, Location, position_key
from .fixer import fix_info
from .positions import node_positions
from .pyparse import Unparsable, parse_python
from .registry import all_rules
from .rule import Rule
from .settings import Settings
from .syntax import dotted_name
from .walk import TRIVIA_TYPES, walk


_SCOPE_TYPES = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def _handlers(rule_class: Type[Rule], prefix: str) -> Dict[type, str]:
    found = {}
    for attribute in dir(rule_class):
        if attribute.startswith(prefix):
            node_type = getattr(cst, attribute[len(prefix):], None)
            if isinstance(node_type, type) and issubclass(node_type, cst.CSTNode):
                found[node_type] = attribute
    return found


class _BatchedPass(cst.CSTVisitor):
    def __init__(self, ctx: FileContext, rules: Sequence[Rule]) -> None:
        super().__init__()
        self.ctx = ctx
        self.visitors: Dict[type, list] = defaultdict(list)
        self.leavers: Dict[type, list] = defaultdict(list)
        for rule in rules:
            for node_type, attribute in _handlers(type(rule), "visit_").items():
                self.visitors[node_type].append(getattr(rule, attribute))
            for node_type, attribute in _handlers(type(rule), "leave_").items():
                self.leavers[node_type].append(getattr(rule, attribute))
        #: id(node) -> how many guards cover the subtree rooted at that node: availability
        #: checks, and (apart) conditions that only hold in a distributed run.
        self.guard_roots: Dict[int, int] = {}
        self.distributed_roots: Dict[int, int] = {}
        #: Calls after which a block runs distributed (``init_process_group``, this file's ``setup``).
        self.setups = (
            guards.distributed_setups(ctx.module) if "init_process_group" in ctx.source else guards.DISTRIBUTED_SETUPS
        )
        #: Whitespace and punctuation subtrees that no handler looks at are not walked.
        self.skipped_types = TRIVIA_TYPES - set(self.visitors) - set(self.leavers) - set(_CONTEXT_HOOKS)

    def _guard(self, node: Optional[cst.CSTNode], distributed: bool = False) -> None:
        if node is not None:
            roots = self.distributed_roots if distributed else self.guard_roots
            roots[id(node)] = roots.get(id(node), 0) + 1

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        ctx.stack.append(node)
        covered = self.guard_roots.get(id(node))
        if covered:
            ctx.guard_depth += covered
        covered = self.distributed_roots.get(id(node))
        if covered:
            ctx.distributed_depth += covered
        node_type = type(node)
        hook = _CONTEXT_HOOKS.get(node_type)
        if hook is not None:
            hook(self, node)
        for handler in self.visitors.get(node_type, ()):
            handler(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        ctx = self.ctx
        node_type = type(original_node)
        for handler in self.leavers.get(node_type, ()):
            handler(original_node)
        if node_type in _SCOPE_TYPES:
            ctx.scopes.pop()
        covered = self.guard_roots.get(id(original_node))
        if covered:
            ctx.guard_depth -= covered
        covered = self.distributed_roots.get(id(original_node))
        if covered:
            ctx.distributed_depth -= covered
        ctx.stack.pop()

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    # -- context hooks --------------------------------------------------------------------
    def _import(self, node: cst.CSTNode) -> None:
        self.ctx.add_import(node)

    def _scope(self, node: cst.CSTNode) -> None:
        """A ``def cuda(self)`` override (it delegates to ``Module.cuda``) and functions behind a
        CUDA skip decorator are guarded. Other CUDA-named code is not: a ``CUDACallback``
        enabled by default runs on every machine."""
        self.ctx.scopes.append(node)
        name = getattr(node, "name", None)
        if name is not None and isinstance(node, cst.FunctionDef) and guards.delegates_to_cuda(name.value):
            self._guard(node.body)
            return
        decorators = getattr(node, "decorators", ())
        if any(self._decorator_guards(d.decorator) for d in decorators):
            self._guard(node.body)
        body = getattr(node.body, "body", ())
        if isinstance(node, cst.FunctionDef) and any(
            guards.sets_up_distributed(s, self.setups, self.ctx.qualname) for s in body
        ):
            self._guard(node.body, distributed=True)  # ``ddp_setup()``: one unit with its process group

    def _decorator_guards(self, decorator: cst.BaseExpression) -> bool:
        target = decorator.func if isinstance(decorator, cst.Call) else decorator
        name = (dotted_name(target) or "").lower()
        last = name.rsplit(".", 1)[-1]
        if guards.names_cuda(last):
            return True
        if isinstance(decorator, cst.Call) and decorator.args and last in {"skipif", "skipunless"}:
            sign = self.ctx.classify(decorator.args[0].value)
            return sign == (guards.NEGATIVE if last == "skipif" else guards.POSITIVE)
        return False

    def _if(self, node: cst.If) -> None:
        sign = self.ctx.classify(node.test)
        if sign == guards.POSITIVE:
            self._guard(node.body)
        elif sign == guards.NEGATIVE:
            self._guard(node.orelse)
        else:
            sign = guards.distributed(node.test)
            if sign != guards.NEUTRAL:
                self._guard(node.body if sign == guards.POSITIVE else node.orelse, distributed=True)

    def _if_exp(self, node: cst.IfExp) -> None:
        sign = self.ctx.classify(node.test)
        if sign == guards.POSITIVE:
            self._guard(node.body)
        elif sign == guards.NEGATIVE:
            self._guard(node.orelse)
        else:
            sign = guards.distributed(node.test)
            if sign != guards.NEUTRAL:
                self._guard(node.body if sign == guards.POSITIVE else node.orelse, distributed=True)

    def _boolean(self, node: cst.BooleanOperation) -> None:
        sign = self.ctx.classify(node.left)
        if sign == (guards.POSITIVE if isinstance(node.operator, cst.And) else guards.NEGATIVE):
            self._guard(node.right)

    def _block(self, node: cst.CSTNode) -> None:
        """Statements after ``if not cuda: return`` or ``assert cuda_available`` are guarded."""
        body = node.body
        if not isinstance(body, (list, tuple)):
            return
        qualname = self.ctx.qualname
        if type(node) is cst.Module and "__main__" in self.ctx.source and guards.gpu_gated_program(node, qualname):
            for statement in body:
                if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                    self._guard(statement.body)
        for index, statement in enumerate(body):
            exits = distributed = False
            if type(statement) is cst.If and statement.orelse is None:
                if guards.terminates(statement.body):
                    exits = self.ctx.classify(statement.test) == guards.NEGATIVE
                    distributed = not exits and guards.distributed(statement.test) == guards.NEGATIVE
            elif type(statement) is cst.If:
                distributed = guards.other_branches_exit(statement)
            elif type(statement) is cst.SimpleStatementLine:
                exits = any(
                    type(small) is cst.Assert and self.ctx.classify(small.test) == guards.POSITIVE
                    for small in statement.body
                )
                distributed = not exits and guards.sets_up_distributed(statement, self.setups, self.ctx.qualname)
            if exits or distributed:
                for later in body[index + 1:]:
                    self._guard(later, distributed=distributed)
                return


_CONTEXT_HOOKS = {
    cst.Import: _BatchedPass._import,
    cst.ImportFrom: _BatchedPass._import,
    cst.FunctionDef: _BatchedPass._scope,
    cst.ClassDef: _BatchedPass._scope,
    cst.Lambda: _BatchedPass._scope,
    cst.If: _BatchedPass._if,
    cst.IfExp: _BatchedPass._if_exp,
    cst.BooleanOperation: _BatchedPass._boolean,
    cst.IndentedBlock: _BatchedPass._block,
    cst.Module: _BatchedPass._block,
}


class Engine:
    def __init__(self, settings: Optional[Settings] = None, rules: Optional[Sequence[Type[Rule]]] = None) -> None:
        self.settings = settings or Settings()
        candidates = all_rules() if rules is None else rules
        self.rules = [r for r in candidates if self.settings.is_enabled(r.code, r.default_enabled)]

    def rules_for(self, path: str, source: str) -> List[Type[Rule]]:
        """Rules enabled for this path whose trigger words occur in the text (the pre-filter);
        none for a file with ``# torchdevice-lint: noqa``."""
        extra_ignores = list(self.settings.ignores_for(path)) if self.settings.per_file_ignores else []
        exempt = noqa.file_exemption(source)
        if exempt == ():
            return []
        extra_ignores.extend(exempt or ())
        selected = []
        for rule in self.rules:
            if extra_ignores and not self.settings.is_enabled(rule.code, rule.default_enabled, extra_ignores):
                continue
            if any(trigger in source for trigger in rule.triggers):
                selected.append(rule)
        return selected

    def analyze(self, path: str, source: str, module: Optional[cst.Module] = None) -> Optional[Analysis]:
        """Run the pass; None when the pre-filter rules the file out. Raises Unparsable or
        ParserSyntaxError."""
        if module is None:
            # every file checked is judged by CPython first: syntax errors are reported even in
            # files no rule can fire on, and what would crash or stall LibCST is refused
            parse_python(source)
        rule_classes = self.rules_for(path, source)
        if not rule_classes:
            return None
        if module is None:
            module = cst.parse_module(source)
        ctx = FileContext(path, source, module, self.settings)
        rules = [rule_class(ctx) for rule_class in rule_classes]
        batched_pass = _BatchedPass(ctx, rules)
        walk(module, batched_pass, skip=batched_pass.skipped_types)
        positions: dict = {}
        findings = ctx.findings
        suppressions = noqa.LineSuppressions(source)
        if findings:
            positions = node_positions(module, [(raw.node, raw.top_statement) for raw in findings])
            findings = [raw for raw in findings if not suppressions.covers(_rows(positions[raw.node]), raw.rule.code)]
        unused_rule = next((rule for rule in rule_classes if rule.code == noqa.UNUSED_NOQA), None)
        unused = suppressions.unused(source) if unused_rule else []
        return Analysis(module, ctx, findings, positions, unused_noqa=[(unused_rule, d) for d in unused])

    def check_source(self, path: str, source: str, with_edits: bool = False) -> FileResult:
        result = FileResult(filename=path)
        try:
            analysis = self.analyze(path, source)
        except Unparsable as error:
            result.error = FileError(path, str(error))
            return result
        except cst.ParserSyntaxError as error:
            result.error = FileError(path, syntax_error_message(source, error))
            return result
        except RecursionError:
            result.error = FileError(path, "file is nested too deeply to analyse")
            return result
        if analysis is None:
            return result
        result.parsed = True
        findings = [to_finding(path, raw, analysis, with_edits) for raw in analysis.findings]
        findings.extend(_unused_noqa_finding(path, rule, directive) for rule, directive in analysis.unused_noqa)
        result.findings = sorted(findings, key=position_key)
        return result


def syntax_error_message(source: str, error: cst.ParserSyntaxError) -> str:
    """One line naming where the file stops being Python. Python's own parser words and
    places syntax errors better than LibCST's, so it is asked on this (rare) path."""
    try:
        compile(source, "<checked>", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as python_error:
        return f"syntax error at {python_error.lineno}:{python_error.offset or 1}: {python_error.msg}"
    except (ValueError, RecursionError, MemoryError):
        pass
    detail = error.message.strip().splitlines()[0] if error.message.strip() else "invalid syntax"
    return f"syntax error at {error.editor_line}:{error.editor_column}: {detail}"


def node_span(positions: dict, node: cst.CSTNode) -> Tuple[Location, Location]:
    code_range = positions[node]
    return (
        Location(code_range.start.line, code_range.start.column + 1),
        Location(code_range.end.line, code_range.end.column + 1),
    )


def to_finding(path: str, raw: RawFinding, analysis: Analysis, with_edits: bool) -> Finding:
    start, end = node_span(analysis.positions, raw.node)
    return Finding(
        code=raw.rule.code,
        name=raw.rule.name,
        message=raw.message,
        filename=path,
        location=start,
        end_location=end,
        fix=fix_info(raw, analysis, with_edits) if raw.fix else None,
    )


def _rows(code_range) -> set:
    return {code_range.start.line, code_range.end.line}


def _unused_noqa_finding(path: str, rule: Type[Rule], directive: noqa.UnusedDirective) -> Finding:
    codes = ", ".join(directive.codes)
    return Finding(
        code=rule.code,
        name=rule.name,
        message=rule.message.format(codes=codes),
        filename=path,
        location=Location(directive.row, directive.column),
        end_location=Location(directive.row, directive.end_column),
        fix=FixInfo(rule.fix_safety.value, rule.fix_title or "", []),
    )
