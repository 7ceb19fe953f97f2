"""Which device a fix writes, and when a name may be written at all.

A fix writes a device expression only where it is proven:

* a name (``device``) only where it is bound, to a device, when the line runs: a parameter that
  callers must pass (no ``None`` default), a local or module-level name assigned a device above
  the line on every path, every other binding of it in that scope a device too. Decorators,
  default values and annotations run where the ``def`` stands, not inside the function; a class
  body is a scope of its own that methods do not see;
* ``x.device`` only for a ``forward`` input the inference knows is a tensor
  (``inference/tensors.py``): a list of crops, a tuple or an int has no ``.device``;
* otherwise the module-level binding the fixer inserts above the first use, when the name is
  free at module level (nothing else binds it there, no builtin or star import is read through
  it, no ``global`` rebinds it); where it is not free, or a local of that name hides it, the
  expression itself.

One device convention per file: a file that places tensors on CUDA behind its own availability
check (``if torch.cuda.is_available(): x = x.cuda()``, ``"cuda" if use_cuda else "cpu"``) and
never picks MPS or ``torch.accelerator`` gets CUDA-or-CPU, not a device that may be MPS, so a
Mac does not end up with half its tensors on MPS and half on the CPU.

The module does not import ``context`` (which asks it): it reads the file context it is handed.
"""

from __future__ import annotations

import re
import symtable
import weakref
from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, List, Optional, Tuple

import libcst as cst

from ..inference.tensors import TENSOR_ONLY_ATTRIBUTES, TensorFacts, evidence
from ..knowledge.torch_releases import binding_expression, binding_imports, has
from ..model.fixes import ImportSpec
from ..syntax.ast_nodes import dotted_name as python_dotted_name
from ..syntax.bindings import BindingValues, all_params, normalized
from ..syntax.cst_nodes import qualified, string_value
from ..syntax.cst_walk import TRIVIA_AND_LEAF_TYPES, walk
from ..syntax.positions import twins_along

#: The CUDA-or-CPU binding, for files whose own placement is CUDA-or-CPU.
CUDA_OR_CPU_EXPRESSION = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'
#: What a Mac's fallback asks (torch 1.12 and later).
MPS_CHECK = "torch.backends.mps.is_available"
#: Device types a string may name (``"cuda:1"``, ``"cpu"``, ``"mps"``...).
DEVICE_STRING = re.compile(r"(cpu|cuda|mps|xpu|npu|hpu|xla|meta|ipu|mtia|privateuseone)(:\d+)?")
#: Text that shows a file picks MPS or whatever accelerator there is on its own.
PICKS_OTHER_ACCELERATORS = re.compile(r"""\bmps\b|["']mps|\baccelerator\b""")
#: Calls whose result is a device when the machine has an accelerator (None otherwise): one arm
#: of a conditional, or the left of ``or``, that the other side completes.
ACCELERATOR_CALLS = ("torch.accelerator.current_accelerator",)


def names_device_string(text: Optional[str], formatted: bool = False) -> bool:
    if text is None:
        return False
    if formatted:
        return DEVICE_STRING.match(text.split(":")[0]) is not None and ":" in text
    return DEVICE_STRING.fullmatch(text) is not None


@dataclass(frozen=True)
class DeviceChoice:
    """What a fix writes for the device: ``code`` (a name, ``x.device``), or, when ``code`` is
    None, the device expression itself (read when the fix is applied: the file's convention is
    known once the whole file was visited)."""

    code: Optional[str]
    needs_binding: bool = False
    chooser: Optional["DeviceChooser"] = field(default=None, compare=False, repr=False)

    @property
    def inline(self) -> bool:
        return self.code is None

    def text(self) -> str:
        return self.code if self.code is not None else self.chooser.inline_expression()

    def expression(self) -> cst.BaseExpression:
        return cst.parse_expression(self.text())

    def imports(self) -> List[ImportSpec]:
        return self.chooser.inline_imports() if self.inline else []


def cst_evidence(node: Optional[cst.CSTNode]) -> frozenset:
    """Names ``node`` reads a tensor-only attribute of wherever it is evaluated (LibCST's
    ``inference.tensors.evidence``): not in conditional arms, later operands of ``and``/``or``,
    lambdas or comprehensions."""
    found = set()
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Attribute) and isinstance(current.value, cst.Name) and current.attr.value in TENSOR_ONLY_ATTRIBUTES:
            found.add(current.value.value)
        if isinstance(current, cst.IfExp):
            stack.append(current.test)
        elif isinstance(current, cst.BooleanOperation):
            stack.append(current.left)
        elif not isinstance(current, (cst.Lambda, cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            stack.extend(current.children)
    return frozenset(found)


class DeviceChooser:
    """The device choices of one file (one per ``FileContext``)."""

    def __init__(self, ctx) -> None:
        # a proxy: the context keeps its chooser, and a cycle would keep every tree alive until
        # the next full collection (flake8's process paid as much as the analysis for it)
        self.ctx = weakref.proxy(ctx)
        self.name = normalized(ctx.settings.device_name)
        #: Set by the pass: a CUDA placement behind an availability check (``note_guarded_cuda``).
        self.guarded_cuda_placement = False
        self._values: Dict[Tuple[int, str], List[Optional[cst.BaseExpression]]] = {}
        self._free: Dict[str, bool] = {}
        self._symbols: Optional[symtable.SymbolTable] = None
        self._tensor_facts: Dict[int, TensorFacts] = {}

    @cached_property
    def target_binding(self) -> Optional[str]:
        """The binding the settings and the target torch give (None before ``torch.device``):
        asked per fix, read once per file."""
        return binding_expression(self.ctx.settings)

    # -- the choice ---------------------------------------------------------------------------
    def choose(self, avoid: Optional[str] = None, evaluated_before: Optional[cst.CSTNode] = None) -> DeviceChoice:
        name = self.name
        if self.target_binding is None:
            # a target torch without ``torch.device``: nothing can be written (``report`` drops the fix)
            return DeviceChoice(self.spelled(name), needs_binding=True)
        if self.device_bound_here(name):
            return DeviceChoice(self.spelled(name))
        tensor = self.forward_input_tensor(avoid, evaluated_before)
        if tensor is not None:
            return DeviceChoice(f"{tensor}.device")
        if not self.shadowed_here(name) and self.free_at_module_level(name):
            return DeviceChoice(self.spelled(name), needs_binding=True)
        return DeviceChoice(None, chooser=self)

    def spelled(self, name: str) -> str:
        """How the file writes the configured name (as configured: it binds the same name)."""
        return self.ctx.settings.device_name if normalized(self.ctx.settings.device_name) == name else name

    def binding_expression(self) -> str:
        """The module-level binding's value: the configured expression, else CUDA-or-CPU in a
        file whose own placement is CUDA-or-CPU, else the one for the target torch."""
        settings = self.ctx.settings
        if settings.device_expression:
            return settings.device_expression
        if self.cuda_or_cpu_convention():
            return CUDA_OR_CPU_EXPRESSION
        return self.target_binding

    def binding_imports(self) -> List[ImportSpec]:
        settings = self.ctx.settings
        if settings.device_expression:
            return binding_imports(settings)
        return [ImportSpec("torch")]

    def inline_expression(self) -> str:
        """The binding's expression, written where the device is needed, spelling torch as the
        file imports it."""
        expression = self.binding_expression()
        alias = self.ctx.torch_alias()
        if alias is not None and alias != "torch":
            expression = re.sub(r"\btorch\.", f"{alias}.", expression)
        return expression

    def inline_imports(self) -> List[ImportSpec]:
        if self.ctx.torch_alias() is not None or not re.search(r"\btorch\.", self.inline_expression()):
            return []
        return [ImportSpec("torch")] + [s for s in self.binding_imports() if s.module != "torch"]

    def fallback(self, quote: str) -> str:
        """Where a device a literal defines goes when CUDA is missing: MPS, then the CPU, or the
        CPU alone in a CUDA-or-CPU file."""
        if self.cuda_or_cpu_convention() or not has(self.ctx.settings.target_version(), MPS_CHECK):
            return f"{quote}cpu{quote}"  # a target torch before 1.12 has no MPS
        return f"{quote}mps{quote} if {self.ctx.torch_reference()}.{MPS_CHECK[len('torch.'):]}() else {quote}cpu{quote}"

    def cuda_or_cpu_convention(self) -> bool:
        return self.guarded_cuda_placement and PICKS_OTHER_ACCELERATORS.search(self.ctx.source) is None

    # -- scopes ---------------------------------------------------------------------------
    def executing_scopes(self) -> List[cst.CSTNode]:
        """The scopes the visited node runs in, outermost first: a function's (or lambda's)
        decorators, defaults and annotations run where it is defined, not in it."""
        stack = self.ctx.stack
        positions = {id(node): index for index, node in enumerate(stack)}
        running = []
        for scope in self.ctx.scopes:
            index = positions.get(id(scope))
            if index is not None and index + 1 < len(stack) and stack[index + 1] is scope.body:
                running.append(scope)
        return running

    def bindings(self, scope: cst.CSTNode, name: str) -> List[Optional[cst.BaseExpression]]:
        key = (id(scope), name)
        if key not in self._values:
            collector = BindingValues(scope, name)
            if isinstance(scope, cst.Module):
                for statement in scope.body:
                    walk(statement, collector, skip=TRIVIA_AND_LEAF_TYPES)
            else:
                walk(scope.body, collector, skip=TRIVIA_AND_LEAF_TYPES)
            self._values[key] = collector.values
        return self._values[key]

    def params_named(self, scope: cst.CSTNode, name: str) -> List[cst.Param]:
        return [param for param in all_params(scope.params) if normalized(param.name.value) == name]

    def binds(self, scope: cst.CSTNode, name: str) -> bool:
        if isinstance(scope, (cst.FunctionDef, cst.Lambda)) and self.params_named(scope, name):
            return True
        return bool(self.bindings(scope, name))

    def shadowed_here(self, name: str) -> bool:
        """Whether a scope the node runs in (other than the module) binds ``name``, hiding a
        module-level binding of it (a class body only for code directly in it: methods do not
        see it)."""
        running = self.executing_scopes()
        return any(
            self.binds(scope, name) for depth, scope in enumerate(reversed(running))
            if depth == 0 or not isinstance(scope, cst.ClassDef)
        )

    # -- a name bound to a device ---------------------------------------------------------
    def binding_scope(self, name: str) -> Optional[cst.CSTNode]:
        """The innermost scope the visited node runs in that binds ``name`` (the module when
        none does; None for a class body, whose names nothing here proves)."""
        for depth, scope in enumerate(reversed(self.executing_scopes())):
            if isinstance(scope, cst.ClassDef):
                if depth == 0 and self.bindings(scope, name):
                    return None
                continue  # methods do not see the class body
            if self.binds(scope, name):
                return scope
        return self.ctx.module

    def device_bound_here(self, name: str) -> bool:
        name = normalized(name)
        scope = self.binding_scope(name)
        if isinstance(scope, cst.FunctionDef):
            return self.local_device(scope, name)
        if not isinstance(scope, cst.Module):
            return False
        values = self.bindings(scope, name)
        return (
            bool(values)
            and (all(self.device_valued(value) for value in values) or self.imported_portable_device(name))
            and not self.rebound_by_global(name)
            and self.ctx.bound_above(scope, name)
        )

    def imported_portable_device(self, name: str) -> bool:
        """Whether the module binds ``name`` only by importing it from a module of the project
        that binds it to a portable device at module level (``from utils import device`` where
        ``utils.py`` has ``device = torch.device("cuda" if ... else "cpu")``)."""
        if self.ctx.project.imported_devices.get(name) != "portable":
            return False
        for statement in self.ctx.module.body:
            collector = BindingValues(statement, name)
            walk(statement, collector, skip=TRIVIA_AND_LEAF_TYPES)
            importing = isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar) for small in statement.body
            )
            if collector.values and not importing:
                return False
        return True

    def holds_torch_device(self, name: str) -> bool:
        """Whether every value ``name`` may hold here is a ``torch.device`` (not a string): what
        ``name.type`` needs."""
        name = normalized(name)
        scope = self.binding_scope(name)
        if not isinstance(scope, (cst.FunctionDef, cst.Module)):
            return False
        params = self.params_named(scope, name) if isinstance(scope, cst.FunctionDef) else []
        if any(param.default is None or not self.device_valued(param.default, torch_device=True) for param in params):
            return False
        return all(self.device_valued(value, torch_device=True) for value in self.bindings(scope, name))

    def local_device(self, function: cst.FunctionDef, name: str) -> bool:
        """A local of ``function`` (its parameter, or assigned in it) that holds a device
        wherever the visited node runs: passed by every caller or assigned a device above, and
        every assignment of it a device."""
        values = self.bindings(function, name)
        if not all(self.device_valued(value) for value in values):
            return False
        params = self.params_named(function, name)
        if params and all(self.device_parameter(param) for param in params):
            return True
        return self.ctx.bound_above(function.body, name)

    def device_parameter(self, param: cst.Param) -> bool:
        """A parameter callers must pass (no default, not annotated as maybe None), or one whose
        default is a device."""
        if param.star:
            return False
        annotation = param.annotation.annotation if param.annotation is not None else None
        if annotation is not None and re.search(r"\b(Optional|None)\b", cst.Module([]).code_for_node(annotation)):
            return False
        return param.default is None or self.device_valued(param.default)

    def device_valued(self, value: Optional[cst.BaseExpression], torch_device: bool = False) -> bool:
        """Whether an expression can only be a device: a device string (not with
        ``torch_device``), ``torch.device(...)``, ``x.device``, a conditional or ``or`` of such,
        or the configured device expression."""
        if value is None:
            return False
        if isinstance(value, cst.SimpleString):
            return not torch_device and names_device_string(string_value(value))
        if isinstance(value, cst.FormattedString):
            return not torch_device and names_device_string(string_value(value), formatted=True)
        if isinstance(value, cst.Attribute):
            return value.attr.value == "device"
        if isinstance(value, cst.Call):
            return self.ctx.qualname(value.func) == "torch.device" or self._configured(value)
        if isinstance(value, cst.IfExp):
            arms = (value.body, value.orelse)
            return self.device_valued(value.orelse, torch_device) and all(
                self.device_valued(arm, torch_device) or self._accelerator_call(arm) for arm in arms
            )
        if isinstance(value, cst.BooleanOperation) and isinstance(value.operator, cst.Or):
            left = value.left
            return self.device_valued(value.right, torch_device) and (
                self._accelerator_call(left) or self.device_valued(left, torch_device) or (isinstance(left, cst.Name) and not torch_device)
            )
        return self._configured(value)

    def _accelerator_call(self, value: cst.BaseExpression) -> bool:
        return isinstance(value, cst.Call) and self.ctx.qualname(value.func) in ACCELERATOR_CALLS

    def _configured(self, value: cst.BaseExpression) -> bool:
        configured = self.ctx.settings.device_expression
        if not configured:
            return False
        try:
            return cst.parse_expression(configured).deep_equals(value)
        except cst.ParserSyntaxError:
            return False

    # -- module level ---------------------------------------------------------------------
    def symbols(self) -> Optional[symtable.SymbolTable]:
        if self._symbols is None:
            try:
                self._symbols = symtable.symtable(self.ctx.source, self.ctx.path or "<file>", "exec")
            except (SyntaxError, ValueError):
                return None
        return self._symbols

    def rebound_by_global(self, name: str) -> bool:
        """Whether a function assigns ``name`` after declaring it ``global``."""
        table = self.symbols()
        if table is None:
            return True
        stack = list(table.get_children())
        while stack:
            child = stack.pop()
            try:
                symbol = child.lookup(name)
            except KeyError:
                symbol = None
            if symbol is not None and symbol.is_declared_global() and symbol.is_assigned():
                return True
            stack.extend(child.get_children())
        return False

    def free_at_module_level(self, name: str) -> bool:
        """Whether the fixer may bind ``name`` at module level: every module-level binding of it
        is a device, no function rebinds it with ``global``, and, where the module binds it
        nowhere, nothing reads it as a global (a builtin, a star import's name)."""
        if name in self._free:
            return self._free[name]
        table = self.symbols()
        free = table is not None and not self.rebound_by_global(name)
        if free:
            values = self.bindings(self.ctx.module, name)
            if values:
                free = all(self.device_valued(value) for value in values)
            else:
                free = not self._read_as_global(table, name)
        self._free[name] = free
        return free

    @staticmethod
    def _read_as_global(table: symtable.SymbolTable, name: str) -> bool:
        stack = [table]
        while stack:
            current = stack.pop()
            try:
                symbol = current.lookup(name)
            except KeyError:
                symbol = None
            if symbol is not None and symbol.is_referenced() and (current is table or symbol.is_global()):
                return True
            stack.extend(current.get_children())
        return False

    # -- x.device -------------------------------------------------------------------------
    def forward_input_tensor(self, avoid: Optional[str], evaluated_before: Optional[cst.CSTNode] = None) -> Optional[str]:
        """The input of the ``forward`` the node runs in that the inference knows is a tensor
        there (not ``avoid``, the value being moved), or that ``evaluated_before`` (what runs
        before the device is read: the receiver of ``.cuda()``) reads a tensor-only attribute of."""
        running = self.executing_scopes()
        if len(running) < 2 or not isinstance(running[-1], cst.FunctionDef) or not isinstance(running[-2], cst.ClassDef):
            return None
        function = running[-1]
        if function.name.value != "forward":
            return None
        inputs = [param.name.value for param in list(function.params.posonly_params) + list(function.params.params)][1:]
        candidates = [name for name in inputs if name != avoid]
        if not candidates:
            return None
        known = self.tensors_here(function) | cst_evidence(evaluated_before)
        return next((name for name in candidates if name in known), None)

    def tensors_here(self, function: cst.FunctionDef) -> frozenset:
        """The names known to be tensors when the statement holding the visited node starts."""
        ctx = self.ctx
        twins = twins_along(ctx.module, ctx.python_tree(), ctx.stack)
        python_function = twins.get(id(function))
        if python_function is None:
            return frozenset()
        facts = self.tensor_facts(python_function)
        statement = None
        for node in reversed(ctx.stack):
            if node is function:
                break
            if id(node) in twins and isinstance(node, (cst.BaseSmallStatement, cst.BaseCompoundStatement)):
                statement = twins[id(node)]
                break
        return facts.at(statement) if statement is not None else frozenset()

    def tensor_facts(self, python_function) -> TensorFacts:
        """The inference of which names hold tensors, for one function of CPython's tree."""
        facts = self._tensor_facts.get(id(python_function))
        if facts is None:
            facts = self._tensor_facts[id(python_function)] = TensorFacts(python_function, self._python_qualname)
        return facts

    def tensors_at_call(self, python_function, call) -> frozenset:
        """The names known to be tensors when the last argument of ``call`` (of CPython's tree,
        inside ``python_function``) is evaluated: known when its statement starts, or read with
        a tensor-only attribute in the call's own arguments, evaluated before it."""
        facts = self.tensor_facts(python_function)
        statement = facts.statement_holding(call)
        known = facts.at(statement) if statement is not None else frozenset()
        return known | set().union(*(evidence(argument) for argument in [*call.args, *call.keywords]))

    def _python_qualname(self, node) -> Optional[str]:
        return qualified(python_dotted_name(node), self.ctx.aliases)
