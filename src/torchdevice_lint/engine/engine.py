"""The engine: first stage (CPython's ``ast``: syntax, candidates) -> one LibCST parse -> every
enabled rule in one batched pass -> suppressions -> findings with positions.

This module imports no LibCST: a file the first stage rules out (``first_stage/``) is checked
without it, and ``batched.py`` (the LibCST half) is imported for the first file that needs it.
"""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Callable, List, Optional, Sequence, Tuple, Type

from ..first_stage.facts import Facts, parse_facts
from ..knowledge.project_facts import ProjectFacts
from ..model.errors import FileProblem, file_error
from ..model.findings import FileResult, Finding, FixInfo, Location, position_key
from ..model.settings import Settings
from . import noqa
from .rule import Rule

if TYPE_CHECKING:
    import ast

    import libcst as cst

    from ..project.model import Projects
    from .context import Analysis, RawFinding


class Engine:
    """Checks files with the rules it is handed (``rules.all_rules()`` in the front
    ends), as far as ``settings`` enables them."""

    def __init__(self, settings: Settings, rules: Sequence[Type[Rule]], projects: Optional["Projects"] = None) -> None:
        self.settings = settings
        self.rules = [r for r in rules if self.settings.is_enabled(r.code, r.default_enabled)]
        #: The project model each file is judged with; None judges every file alone.
        self.projects = projects

    def project_key(self, path: str) -> str:
        """What a cached result of ``path`` depends on beyond its own bytes: its project's facts."""
        return self.projects.fingerprint(path) if self.projects is not None else ""

    def rules_for(self, path: str, source: str, tree: Optional["ast.AST"] = None) -> List[Type[Rule]]:
        """Rules enabled for this path whose triggers the file contains (the first stage); none
        for a file with ``# torchdevice-lint: noqa``. Every file checked is judged by CPython
        here, even one no rule can fire on: raises ``Unparsable`` for a syntax error or for what
        would crash or stall LibCST. ``tree`` is the file's ``ast`` if the caller has one."""
        return self.first_stage(path, source, tree)[0]

    def first_stage(self, path: str, source: str, tree: Optional["ast.AST"] = None) -> Tuple[List[Type[Rule]], Facts]:
        """``rules_for``'s rules, and the facts they were chosen by (with the device inference
        when a trigger ran it)."""
        if self.projects is None:
            facts = parse_facts(source, tree)
        else:
            project = self.projects.facts_for(path)  # reads the project: its trees of the run's files are kept
            facts = parse_facts(source, tree if tree is not None else self.projects.take_tree(path, source))
            _bring_project(facts, project, path)
        extra_ignores = list(self.settings.ignores_for(path)) if self.settings.per_file_ignores else []
        exempt = noqa.file_exemption(source)
        if exempt == ():
            return [], facts
        extra_ignores.extend(exempt or ())
        selected = []
        for rule in self.rules:
            if extra_ignores and not self.settings.is_enabled(rule.code, rule.default_enabled, extra_ignores):
                continue
            if rule.triggers.matches(facts):
                selected.append(rule)
        return selected, facts

    def analyze(
        self, path: str, source: str, module: Optional["cst.Module"] = None, tree: Optional["ast.AST"] = None,
        parse: Optional[Callable[[str], "cst.Module"]] = None,
    ) -> Optional["Analysis"]:
        """Run the rules; None when no enabled rule can fire on the file. ``parse`` replaces
        ``cst.parse_module`` (``batched.analyze_module``). Raises ``Unparsable``."""
        rule_classes, facts = self.first_stage(path, source, tree)
        if not rule_classes:
            return None
        project = self.projects.facts_for(path) if self.projects is not None else ProjectFacts()
        extra = {"parse": parse} if parse is not None else {}
        return _libcst_half()(path, source, rule_classes, self.settings, module, facts.inference, facts.tree, project, **extra)

    def check_source(self, path: str, source: str, with_edits: bool = False, tree: Optional["ast.AST"] = None) -> FileResult:
        """The file's findings or error. The cyclic garbage collector waits until the file is
        done: the trees built for it live until then, and collections during the analysis
        would traverse them again and again (15-20% of ``check``, bench/README.md)."""
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._check_source(path, source, with_edits, tree)
        finally:
            if collecting:
                gc.enable()

    def _check_source(self, path: str, source: str, with_edits: bool, tree: Optional["ast.AST"]) -> FileResult:
        result = FileResult(filename=path)
        try:
            analysis = self.analyze(path, source, tree=tree)
        except (FileProblem, RecursionError) as error:
            result.error = file_error(path, error)
            return result
        if analysis is None:
            return result
        result.parsed = True
        findings = [to_finding(path, raw, analysis, with_edits) for raw in analysis.findings]
        findings.extend(_unused_noqa_finding(path, rule, directive) for rule, directive in analysis.unused_noqa)
        result.findings = sorted(findings, key=position_key)
        # The context's findings hold the rules, which hold the context: left so, that cycle
        # keeps the trees alive until the cyclic collector runs (``syntax.cst_walk.walk`` has the same note)
        analysis.ctx.findings.clear()
        return result


def _bring_project(facts: Facts, project: ProjectFacts, path: str) -> None:
    """What the project adds to the file's facts for the triggers: the torch names its imports
    of the project's modules bring (``from utils import *`` binding ``torch``), as the LibCST
    pass resolves them (``FileContext``), and whether it builds a CUDA-only kernel."""
    for local, name in project.imported.items():
        if local in facts.identifiers:
            facts.imports.setdefault(local, set()).add(name)
    facts.builds_cuda_kernel = bool(project.cuda_kernels) and bool(project.cuda_kernels.get(os.path.abspath(path)))


def _libcst_half():
    """``batched.analyze_module``, imported for the first file that needs LibCST. Everything
    alive then (LibCST's modules, the rules, the host's own objects: flake8's, the language
    server's) lives as long as the process, so it is moved out of the collector's generations
    (``gc.freeze``): full collections stop traversing it again and again (in flake8's process
    they cost 1.1 s more than flake8's own without this, on bench/run.py's share of the corpus).
    Freezing frees nothing later than refcounting would; only a cycle already garbage at that
    moment is kept."""
    global _analyze_module
    if _analyze_module is None:
        from .batched import analyze_module

        gc.freeze()
        _analyze_module = analyze_module
    return _analyze_module


_analyze_module = None


def node_span(positions: dict, node: "cst.CSTNode") -> Tuple[Location, Location]:
    code_range = positions[node]
    return (
        Location(code_range.start.line, code_range.start.column + 1),
        Location(code_range.end.line, code_range.end.column + 1),
    )


def to_finding(path: str, raw: "RawFinding", analysis: "Analysis", with_edits: bool) -> Finding:
    from ..syntax.cst_statement import scope_of, statement_of  # LibCST: a finding exists only once the file was parsed
    from .edits import fix_info

    start, end = node_span(analysis.positions, raw.node)
    place = _paths(analysis)[id(raw.node)]
    return Finding(
        code=raw.rule.code,
        name=raw.rule.name,
        message=raw.message,
        filename=path,
        location=start,
        end_location=end,
        fix=fix_info(raw, analysis, with_edits) if raw.fix else None,
        scope=scope_of(place),
        statement=statement_of(place, analysis.derived.setdefault("statements", {})),
    )


def _paths(analysis: "Analysis") -> dict:
    """id(node) -> the nodes from the module down to it, for every finding of the analysis:
    found once per analysis (one walk for the nodes reported below where the pass stood)."""
    paths = analysis.derived.get("paths")
    if paths is None:
        from ..syntax.cst_statement import paths_to

        paths = analysis.derived["paths"] = paths_to([(raw.node, raw.ancestors) for raw in analysis.findings])
    return paths


def _unused_noqa_finding(path: str, rule: Type[Rule], directive: noqa.UnusedDirective) -> Finding:
    codes = ", ".join(directive.codes)
    return Finding(
        code=rule.code,
        name=rule.name,
        message=rule.message.format(codes=codes),
        filename=path,
        location=Location(directive.row, directive.column),
        end_location=Location(directive.row, directive.end_column),
        fix=FixInfo(rule.fix_safety, rule.fix_title or "", []),
        scope="",
        statement=f"# noqa: {codes}",
    )
