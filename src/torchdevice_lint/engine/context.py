"""Per-file state shared by all rules during the engine's single pass.

It answers the questions rules keep asking, cheaply and without LibCST's full metadata
resolution (about 12x the parse, DESIGN.md): what an expression's qualified name is through the
file's import aliases, whether the current node is behind a CUDA-availability guard, which
function and class enclose it, and which device expression a fix should write.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, ClassVar, Dict, List, Optional, Protocol, Sequence, Set, Tuple

import libcst as cst

from ..knowledge import cst_guards as guards
from ..knowledge import value_checks
from ..knowledge.flags import FlagDefaults, string_key
from ..knowledge.option_values import OptionValues
from ..knowledge.parameter_guards import ParameterGuards
from ..knowledge.project_facts import ProjectFacts
from ..knowledge.torch_releases import binding_expression, no_fix_note
from ..model.fixes import Applicability, Fix, ImportSpec
from ..syntax.ast_parse import compile_python
from ..syntax.bindings import normalized
from ..syntax.cst_nodes import dotted_name, import_aliases, parameters, qualified
from ..syntax.cst_walk import TRIVIA_AND_LEAF_TYPES, walk
from ..syntax.positions import statement_first_lines
from .devices import DeviceChoice, DeviceChooser

if TYPE_CHECKING:
    from ..inference import FileInference
    from ..model.settings import Settings


class Reporter(Protocol):
    """What a finding keeps of the rule that reported it (``rule.Rule``, which reports through
    this context: naming it here would make the two modules import each other)."""

    code: ClassVar[str]
    name: ClassVar[str]


@dataclass
class RawFinding:
    rule: Reporter
    node: cst.CSTNode
    message: str
    fix: Optional[Fix]
    #: The nodes from the module down to where it was reported (what places it).
    ancestors: Tuple[cst.CSTNode, ...]

    @property
    def top_statement(self) -> cst.CSTNode:
        """The module-level statement containing the node (where a device binding must precede)."""
        return self.ancestors[1] if len(self.ancestors) > 1 else self.node


class BindingCollector(cst.CSTVisitor):
    """Names bound directly in one scope (nested functions and classes are not entered)."""

    def __init__(self, root: cst.CSTNode) -> None:
        super().__init__()
        self.root = root
        self.names: Set[str] = set()

    def _add_target(self, target: cst.CSTNode) -> None:
        if isinstance(target, cst.Name):
            self.names.add(normalized(target.value))
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._add_target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._add_target(target.value)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        if node is self.root:
            for param in parameters(node):
                self.names.add(normalized(param.name.value))
            return True
        self.names.add(normalized(node.name.value))
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.names.add(normalized(node.name.value))
        return False

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._add_target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._add_target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._add_target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._add_target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._add_target(node.target)

    def visit_Import(self, node: cst.Import) -> None:
        self.names.update(normalized(name) for name in import_aliases(node))

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self.names.update(normalized(name) for name in import_aliases(node))


class AssignmentCollector(BindingCollector):
    """Names a scope binds by assignment, loop, ``with``/``except`` or definition: imports left out."""

    def visit_Import(self, node: cst.Import) -> bool:
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        return False


def binds_unconditionally(statement: cst.CSTNode, name: str) -> bool:
    """A statement that binds ``name`` whenever it runs without raising: an assignment to the
    bare name, an import of it, or a ``def``/``class`` of that name (names compared as Python
    binds them, NFKC-normalized)."""
    name = normalized(name)
    if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
        return normalized(statement.name.value) == name
    if not isinstance(statement, cst.SimpleStatementLine):
        return False
    for small in statement.body:
        if isinstance(small, cst.Assign) and any(
            isinstance(target.target, cst.Name) and normalized(target.target.value) == name for target in small.targets
        ):
            return True
        if isinstance(small, cst.AnnAssign) and small.value is not None:
            if isinstance(small.target, cst.Name) and normalized(small.target.value) == name:
                return True
        if isinstance(small, (cst.Import, cst.ImportFrom)) and any(normalized(local) == name for local in import_aliases(small)):
            return True
    return False


class FileContext:
    def __init__(
        self, path: str, source: str, module: cst.Module, settings: "Settings", project: ProjectFacts = ProjectFacts()
    ) -> None:
        self.path = path
        self.source = source
        self.module = module
        self.settings = settings
        self.aliases: Dict[str, str] = {}
        self.findings: List[RawFinding] = []
        #: Nodes from the module down to the node being visited.
        self.stack: List[cst.CSTNode] = []
        #: Enclosing FunctionDef/ClassDef/Lambda nodes, innermost last.
        self.scopes: List[cst.CSTNode] = []
        self.guard_depth = 0
        #: Depth of conditions that hold only in a multi-process distributed run.
        self.distributed_depth = 0
        self._bindings: Dict[int, Set[str]] = {}
        #: id(scope) -> ``value_checks.assigned_values`` of it: rules ask per node, one walk each.
        self._assigned: Dict[Tuple[int, bool], Dict[str, List[Optional[cst.BaseExpression]]]] = {}
        self._module_assignments: Optional[Set[str]] = None
        #: (id(block), name) -> index of the first statement of the block binding the name.
        self._first_binding: Dict[Tuple[int, str], int] = {}
        #: id(block) -> {id(statement): its index in the block}.
        self._statement_index: Dict[int, Dict[int, int]] = {}
        #: What the file's project says (options, files saved from the CPU); empty alone.
        self.project = project
        self.flags = FlagDefaults(module, project)
        self.parameter_guards = ParameterGuards(module, project, os.path.splitext(os.path.basename(path))[0])
        # the shared cache, not a bound method: the context holding it through a method of its
        # own would be a cycle keeping every tree alive until the cyclic collector
        if settings.check_unreached and (project.quiet_options or project.quiet_keys):  # code off the documented run is checked too
            project = replace(project, quiet_options=frozenset(), quiet_keys=frozenset())
        self.option_values = OptionValues(module, project, partial(_assigned_in, self._assigned))
        #: The device inference (CPython's tree), shared by the rules that read it.
        self.inference: Optional["FileInference"] = None
        #: CPython's tree of the source, when the first stage handed it over.
        self.tree: Optional[ast.Module] = None
        self._collect_top_level_imports(module.body)
        # what the project's modules bring: ``from utils import *`` binding torch, ``from utils import nn``
        self.aliases.update(project.imported)

    def python_tree(self) -> ast.Module:
        """CPython's tree of the source: the first stage's, or parsed here once."""
        if self.tree is None:
            self.tree = compile_python(self.source)
        return self.tree

    @cached_property
    def statement_first_lines(self) -> Optional[Dict[int, int]]:
        """Where each top-level statement starts (``positions.statement_first_lines``): what
        places findings and the inference's nodes without generating the code before them."""
        return statement_first_lines(self.module, self.python_tree())

    # -- imports -------------------------------------------------------------------------
    def _collect_top_level_imports(self, body: Sequence[cst.CSTNode]) -> None:
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self.aliases.update(import_aliases(small))
            elif isinstance(statement, (cst.If, cst.Try, cst.TryStar)):
                self._collect_top_level_imports(statement.body.body)
                for handler in getattr(statement, "handlers", ()):
                    self._collect_top_level_imports(handler.body.body)
                orelse = statement.orelse
                if isinstance(orelse, cst.If):
                    self._collect_top_level_imports([orelse])
                elif orelse is not None:
                    self._collect_top_level_imports(orelse.body.body)

    def add_import(self, node: cst.CSTNode) -> None:
        self.aliases.update(import_aliases(node))

    def qualname(self, node: cst.BaseExpression) -> Optional[str]:
        """The imported name an expression refers to, e.g. ``th.cuda.synchronize`` ->
        ``torch.cuda.synchronize`` after ``import torch as th``; None if not from an import."""
        return qualified(dotted_name(node), self.aliases)

    def imports_torch(self) -> bool:
        return any(q == "torch" or q.startswith("torch.") for q in self.aliases.values())

    def torch_alias(self) -> Optional[str]:
        """The local name bound to the ``torch`` module, if the file has one."""
        for local, name in self.aliases.items():
            if name == "torch":
                return local
        return None

    # -- position in the tree -------------------------------------------------------------
    @property
    def guarded(self) -> bool:
        """Behind an availability check, or in code that only runs distributed."""
        return self.guard_depth > 0 or self.distributed_depth > 0

    @property
    def availability_guarded(self) -> bool:
        """Behind an availability check only: what the distributed backend rule asks."""
        return self.guard_depth > 0

    def classify(self, test: cst.BaseExpression) -> int:
        """``cst_guards.classify`` with this file's imports and user-flag defaults."""
        sign = guards.classify(test, self.qualname, self.flag_default, self.holds_availability)
        if sign == guards.NEUTRAL and self.parameter_guards.never_taken(test, self.enclosing_function(), self.enclosing_class()):
            return guards.POSITIVE  # a branch only a call the project does not make takes
        if sign == guards.NEUTRAL and self.parameter_guards.always_taken(test, self.enclosing_function(), self.enclosing_class()):
            return guards.NEGATIVE  # its ``else:`` likewise
        if sign == guards.NEUTRAL:
            sign = self.option_values.sign(test, self.enclosing_function())  # ``args.visible_gpus == "-1"``
        if sign == guards.NEUTRAL and value_checks.clamped_to_device_count(test, self.enclosing_function(), self.qualname):
            return guards.POSITIVE  # ``n_gpu_use > 0`` once ``n_gpu_use`` is at most ``device_count()``
        return sign

    def flag_default(self, flag: cst.BaseExpression) -> Optional[bool]:
        if isinstance(flag, cst.Subscript) and self.flags.key_assigned(string_key(flag) or "", self.python_tree):
            return None  # ``params["no_cuda"]`` set here: what it holds is read where it is set
        default = self.flags.default(flag, self.enclosing_function(), self.enclosing_class())
        if default is None and isinstance(flag, cst.Name):  # ``use_cuda = True`` in the module
            return self.flags.constant_name(flag.value, self.python_tree)
        return default

    def holds_availability(self, flag: cst.BaseExpression) -> bool:
        return self.flags.holds_availability(flag, self.enclosing_function(), self.python_tree)

    def parent(self, depth: int = 1) -> Optional[cst.CSTNode]:
        """Parent of the node being visited (depth 1), grandparent (2)..."""
        index = len(self.stack) - 1 - depth
        return self.stack[index] if index >= 0 else None

    def enclosing_function(self) -> Optional[cst.FunctionDef]:
        for scope in reversed(self.scopes):
            if isinstance(scope, cst.FunctionDef):
                return scope
        return None

    def enclosing_class(self) -> Optional[cst.ClassDef]:
        """The class whose method is being visited (the function must be directly in it)."""
        for index in range(len(self.scopes) - 1, 0, -1):
            if isinstance(self.scopes[index], cst.FunctionDef):
                outer = self.scopes[index - 1]
                return outer if isinstance(outer, cst.ClassDef) else None
        return None

    def bound_names(self, scope: cst.CSTNode) -> Set[str]:
        key = id(scope)
        if key not in self._bindings:
            collector = BindingCollector(scope)
            if isinstance(scope, cst.Module):
                for statement in scope.body:
                    walk(statement, collector, skip=TRIVIA_AND_LEAF_TYPES)
            else:
                walk(scope, collector, skip=TRIVIA_AND_LEAF_TYPES)
            self._bindings[key] = collector.names
        return self._bindings[key]

    def assigned_values(self, scope: cst.CSTNode, nested: bool = False) -> Dict[str, List[Optional[cst.BaseExpression]]]:
        """``value_checks.assigned_values`` of ``scope`` (not to be changed: it is shared)."""
        return _assigned_in(self._assigned, scope, nested)

    def bound_above(self, block: cst.CSTNode, name: str) -> bool:
        """Whether a statement of ``block`` (a Module or IndentedBlock) that comes before the one
        on the stack binds ``name`` unconditionally. Indexed once per block and name: asked per
        finding, a scan of the block made files with thousands of findings quadratic."""
        body = block.body
        key = (id(block), name)
        first = self._first_binding.get(key)
        if first is None:
            first = next((i for i, s in enumerate(body) if binds_unconditionally(s, name)), len(body))
            self._first_binding[key] = first
        if first == len(body):
            return False
        positions = self._statement_index.get(id(block))
        if positions is None:
            positions = self._statement_index[id(block)] = {id(s): i for i, s in enumerate(body)}
        here = next((positions[id(node)] for node in reversed(self.stack) if id(node) in positions), len(body))
        return first < here

    def rebinds_import(self, name: str) -> bool:
        """Whether the imported ``name`` may hold another value here: a local of the innermost
        function, or assigned at module level (``import model`` then ``model = model.Net()``)."""
        functions = [scope for scope in self.scopes if isinstance(scope, cst.FunctionDef)]
        if functions and name in self.bound_names(functions[-1]):
            return True
        if self._module_assignments is None:
            collector = AssignmentCollector(self.module)
            for statement in self.module.body:
                walk(statement, collector, skip=TRIVIA_AND_LEAF_TYPES)
            self._module_assignments = collector.names
        return name in self._module_assignments

    # -- fixes ----------------------------------------------------------------------------
    def torch_reference(self) -> str:
        """How fixes spell the torch module here; see ``torch_imports``."""
        return self.torch_alias() or "torch"

    def torch_imports(self) -> List["ImportSpec"]:
        """The import a fix spelling ``torch_reference()`` needs: none if torch is bound."""
        return [] if self.torch_alias() else [ImportSpec("torch")]

    @cached_property
    def devices(self) -> DeviceChooser:
        """Which device expression fixes write here, and when (``devices.py``)."""
        return DeviceChooser(self)

    def device_expression(self, avoid: Optional[str] = None, evaluated_before: Optional[cst.CSTNode] = None) -> DeviceChoice:
        """The device a fix writes at the visited node (``devices.py``): a ``device``
        bound to a device here, else the input of a ``forward`` known to be a tensor (unless
        that is ``avoid``, the value being moved; ``evaluated_before`` runs before the device is
        read), else the module-level binding, else the expression itself."""
        return self.devices.choose(avoid, evaluated_before)

    def report(self, rule: Reporter, node: cst.CSTNode, message: str, fix: Optional[Fix]) -> None:
        if fix is not None and fix.needs_device_binding and binding_expression(self.settings) is None:
            # a torch older than ``torch.device``: no device can be written, so there is no fix
            message, fix = message + no_fix_note(self.settings.target_torch_version, "torch.device"), None
        if fix is not None and fix.replacements and not self.settings.is_fixable(rule.code):
            fix = Fix(fix.message, Applicability.DISPLAY_ONLY)  # `unfixable`: shown, never applied
        self.findings.append(RawFinding(rule, node, message, fix, tuple(self.stack)))


@dataclass
class Analysis:
    """One file after the pass: the tree, its context and the unsuppressed findings."""

    module: cst.Module
    ctx: FileContext
    findings: List[RawFinding]
    positions: dict
    #: (the TDV900 rule, a directive that suppressed nothing), when TDV900 is enabled.
    unused_noqa: list = field(default_factory=list)
    #: What is derived from the analysis once asked for, kept with it (the fixes' edits).
    derived: dict = field(default_factory=dict)


def _assigned_in(
    cache: Dict[Tuple[int, bool], Dict[str, List[Optional[cst.BaseExpression]]]], scope: cst.CSTNode, nested: bool = False,
) -> Dict[str, List[Optional[cst.BaseExpression]]]:
    """``value_checks.assigned_values`` of ``scope`` (``nested``: in its functions too), once
    per scope in ``cache``."""
    key = (id(scope), nested)
    found = cache.get(key)
    if found is None:
        found = cache[key] = value_checks.assigned_values(scope, nested)
    return found
