"""The LibCST half of the engine: one parse, every rule in one batched pass, suppressions,
positions. Imported only for files the first stage (``first_stage/``) could not rule out.

The pass is a single ``CSTVisitor`` that keeps the shared context (imports, scopes, guards, the
ancestor stack) up to date and dispatches each node to the rules' ``visit_<Node>`` and
``leave_<Node>`` handlers, looked up once per rule class rather than per node.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from typing import Callable, Dict, Optional, Sequence, Tuple, Type, Union

import libcst as cst

from ..inference import FileInference
from ..knowledge import cst_distributed as distributed_code
from ..knowledge import cst_guards as guards
from ..knowledge.flags import mentions_availability
from ..knowledge.project_facts import ProjectFacts
from ..model.settings import Settings
from ..syntax.ast_parse import Unparsable
from ..syntax.cst_nodes import child_blocks, dotted_name, last_name, parameter_names, string_value
from ..syntax.cst_walk import LEAF_TYPES, TRIVIA_TYPES, nodes_of, walk
from ..syntax.positions import node_positions
from . import noqa
from .context import Analysis, FileContext
from .rule import Rule

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
        #: id(node) -> how many guards cover the subtree rooted at that node: (availability
        #: checks, conditions that only hold in a distributed run).
        self.roots: Dict[int, Tuple[int, int]] = {}
        #: Node type -> what runs on entering such a node (the context's hook, then the rules'
        #: handlers) and on leaving it (the rules' handlers, then the end of a scope): one
        #: lookup a node.
        self.entering: Dict[type, list] = {node_type: [hook.__get__(self)] for node_type, hook in _CONTEXT_HOOKS.items()}
        for node_type, handlers in self.visitors.items():
            self.entering.setdefault(node_type, []).extend(handlers)
        self.leaving: Dict[type, list] = {node_type: list(handlers) for node_type, handlers in self.leavers.items()}
        for node_type in _SCOPE_TYPES:
            self.leaving.setdefault(node_type, []).append(self._end_scope)
        #: Calls after which a block runs distributed (``init_process_group``, this file's ``setup``);
        #: none where the file's process groups are on gloo (a CPU runs them).
        self.setups = (
            distributed_code.distributed_setups(ctx.module) if "init_process_group" in ctx.source else distributed_code.DISTRIBUTED_SETUPS
        )
        #: Whitespace and punctuation subtrees, and leaves (names, numbers), that no handler
        #: looks at are not walked: no handler's node lies in them, so no handler sees a difference.
        self.skipped_types = (TRIVIA_TYPES | LEAF_TYPES) - set(self.visitors) - set(self.leavers) - set(_CONTEXT_HOOKS)

    def _guard(self, node: Optional[cst.CSTNode], distributed: bool = False) -> None:
        if node is not None:
            checks, runs = self.roots.get(id(node), (0, 0))
            self.roots[id(node)] = (checks, runs + 1) if distributed else (checks + 1, runs)

    def on_visit(self, node: cst.CSTNode) -> bool:
        ctx = self.ctx
        ctx.stack.append(node)
        covered = self.roots.get(id(node))
        if covered is not None:
            ctx.guard_depth += covered[0]
            ctx.distributed_depth += covered[1]
        for handler in self.entering.get(type(node), ()):
            handler(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        for handler in self.leaving.get(type(original_node), ()):
            handler(original_node)
        ctx = self.ctx
        covered = self.roots.get(id(original_node))
        if covered is not None:
            ctx.guard_depth -= covered[0]
            ctx.distributed_depth -= covered[1]
        ctx.stack.pop()

    def _end_scope(self, node: cst.CSTNode) -> None:
        self.ctx.scopes.pop()

    def close(self) -> None:
        """Drop the handler lists: they hold the pass's own bound methods, a cycle that would keep
        the pass, its context and the module alive until the cyclic collector runs."""
        self.entering.clear()
        self.leaving.clear()

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
        elif isinstance(node, cst.FunctionDef) and not decorators and _never_used(node, self.ctx.scopes, self.ctx.stack, self.ctx.module):
            self._guard(node.body)  # a nested helper its function never names never runs
        body = getattr(node.body, "body", ())
        if isinstance(node, cst.FunctionDef) and any(
            distributed_code.sets_up_distributed(s, self.setups, self.ctx.qualname) for s in body
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

    def _placement(self, node: Union[cst.Call, cst.SimpleString]) -> None:
        """``x.cuda()`` or a ``"cuda"`` literal behind an availability check: the file places
        tensors on CUDA-or-CPU itself, and fixes keep that convention (``devices.py``)."""
        if not self.ctx.guard_depth:
            return
        if isinstance(node, cst.Call):
            found = isinstance(node.func, cst.Attribute) and node.func.attr.value == "cuda"
        else:
            found = "cuda" in node.value and (string_value(node) or "").startswith("cuda")
        if found:
            self.ctx.devices.guarded_cuda_placement = True

    def _conditional(self, node: Union[cst.If, cst.IfExp]) -> None:
        """An ``if`` statement or a conditional expression guards the branch its test decides."""
        sign = self.ctx.classify(node.test)
        if sign == guards.POSITIVE or (sign == guards.NEUTRAL and isinstance(node, cst.If) and guards.imports_nvidia_only(node.body)):
            self._guard(node.body)
        elif sign == guards.NEGATIVE:
            self._guard(node.orelse)
        else:
            sign = distributed_code.distributed(node.test)
            if sign != guards.NEUTRAL:
                self._guard(node.body if sign == guards.POSITIVE else node.orelse, distributed=True)

    def _loop(self, node: cst.For) -> None:
        """``for i in range(torch.cuda.device_count()):`` runs its body once per GPU: never
        without one; so does ``range(n)`` after ``n = torch.cuda.device_count()``, the only
        binding of ``n`` in its function (ashawkey/stable-dreamfusion@5550b91 nerf/utils.py:1342-1345)."""
        counted = node.iter
        if (
            isinstance(counted, cst.Call) and isinstance(counted.func, cst.Name) and counted.func.value == "range"
            and len(counted.args) == 1 and self._counts_gpus(counted.args[0].value)
        ):
            self._guard(node.body)

    def _counts_gpus(self, count: cst.BaseExpression) -> bool:
        if isinstance(count, cst.Call):
            return last_name(count.func) == "device_count"
        function = self.ctx.enclosing_function()
        if not isinstance(count, cst.Name) or function is None or count.value in parameter_names(function):
            return False
        values = self.ctx.assigned_values(function).get(count.value)
        return bool(values) and all(isinstance(value, cst.Call) and last_name(value.func) == "device_count" for value in values)

    def _boolean(self, node: cst.BooleanOperation) -> None:
        sign = self.ctx.classify(node.left)
        if sign == (guards.POSITIVE if isinstance(node.operator, cst.And) else guards.NEGATIVE):
            self._guard(node.right)

    def _block(self, node: cst.CSTNode) -> None:
        """Statements after ``if not cuda: return`` or ``assert x.is_cuda`` are guarded; after a
        refusal to run without CUDA (``assert torch.cuda.is_available()``, ``if not ...: raise``)
        they are not: TDV309 reports the refusal, and the rest is judged as any other code."""
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
                    # a refusal (``raise``, ``sys.exit()``) is reported by TDV309 and exempts nothing
                    exits = self.ctx.classify(statement.test) == guards.NEGATIVE and not guards.refuses(statement.body)
                    distributed = not exits and distributed_code.distributed(statement.test) == guards.NEGATIVE
            elif type(statement) is cst.If:
                # ``if not torch.cuda.is_available(): return`` then ``elif``/``else``: past it, CUDA is there
                exits = (
                    guards.terminates(statement.body) and self.ctx.classify(statement.test) == guards.NEGATIVE
                    and not guards.refuses(statement.body)
                )
                distributed = not exits and distributed_code.other_branches_exit(statement)
            elif type(statement) is cst.SimpleStatementLine:
                exits = any(
                    type(small) is cst.Assert
                    and self.ctx.classify(small.test) == guards.POSITIVE
                    and not mentions_availability(small.test)  # ``assert x.is_cuda``, not a refusal
                    for small in statement.body
                )
                distributed = not exits and distributed_code.sets_up_distributed(statement, self.setups, self.ctx.qualname)
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
    cst.Call: _BatchedPass._placement,
    cst.SimpleString: _BatchedPass._placement,
    cst.If: _BatchedPass._conditional,
    cst.IfExp: _BatchedPass._conditional,
    cst.BooleanOperation: _BatchedPass._boolean,
    cst.For: _BatchedPass._loop,
    cst.IndentedBlock: _BatchedPass._block,
    cst.Module: _BatchedPass._block,
}


def analyze_module(
    path: str,
    source: str,
    rule_classes: Sequence[Type[Rule]],
    settings: Settings,
    module: Optional[cst.Module] = None,
    inference: Optional[FileInference] = None,
    tree: Optional[ast.Module] = None,
    project: ProjectFacts = ProjectFacts(),
    parse: Callable[[str], cst.Module] = cst.parse_module,
) -> Analysis:
    """Parse (unless ``module`` is given) and run ``rule_classes``; ``inference`` is the first
    stage's device inference of the file, if it ran, and ``tree`` its CPython tree (parsed again
    when needed if not given); ``project`` what the file's project says of its options; ``parse``
    what parses it (equal to ``cst.parse_module``: the editor's re-parses only what an edit
    changed). Raises ``Unparsable``."""
    if module is None:
        try:
            module = parse(source)
        except cst.ParserSyntaxError as error:
            raise Unparsable(syntax_error_message(error)) from None
    ctx = FileContext(path, source, module, settings, project)
    ctx.inference, ctx.tree = inference, tree
    rules = [rule_class(ctx) for rule_class in rule_classes]
    batched_pass = _BatchedPass(ctx, rules)
    if batched_pass.visitors or set(batched_pass.leavers) - {cst.Module}:
        walk(module, batched_pass, skip=batched_pass.skipped_types)
    else:
        # Only rules that read the whole module at its end (the dataflow, about 60% of the lines
        # parsed): what they need of the walk is every import, which statements alone hold.
        _add_imports(ctx, module.body)
        ctx.stack.append(module)
        for handler in batched_pass.leavers.get(cst.Module, ()):
            handler(module)
        ctx.stack.pop()
    batched_pass.close()
    positions: dict = {}
    findings = ctx.findings
    suppressions = noqa.LineSuppressions(source)
    if findings:
        positions = node_positions(module, [(raw.node, raw.ancestors) for raw in findings], ctx.python_tree())
        findings = [raw for raw in findings if not suppressions.covers(_rows(positions[raw.node]), raw.rule.code)]
        unreached = () if settings.check_unreached else project.unreached_lines(path)
        if unreached:  # code nothing runs raises nowhere
            findings = [raw for raw in findings if not _within(positions[raw.node], unreached)]
        cuda_only = project.cuda_only_lines(path)
        if cuda_only:  # code that only drives a CUDA-only kernel; its decorators run at import all the same
            findings = [
                raw for raw in findings
                if not (raw.rule.hazard_without_cuda and _within(positions[raw.node], cuda_only))
                or any(type(ancestor) is cst.Decorator for ancestor in raw.ancestors)
            ]
    unused_rule = next((rule for rule in rule_classes if rule.code == noqa.UNUSED_NOQA), None)
    unused = suppressions.unused(source) if unused_rule else []
    return Analysis(module, ctx, findings, positions, unused_noqa=[(unused_rule, d) for d in unused])


def _add_imports(ctx: FileContext, statements: Sequence[cst.CSTNode]) -> None:
    """Tell ``ctx`` every import, in the walk's order, without visiting expressions."""
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)):
                    ctx.add_import(small)
        else:
            for block in child_blocks(statement):
                _add_imports(ctx, block)


def syntax_error_message(error: cst.ParserSyntaxError) -> str:
    """One line naming where LibCST stopped, on a file CPython took (the first stage parsed it
    already): grammar newer than LibCST's."""
    detail = error.message.strip().splitlines()[0] if error.message.strip() else "invalid syntax"
    return f"syntax error at {error.editor_line}:{error.editor_column}: {detail}"


def _within(code_range, spans) -> bool:
    """Whether a finding starts in one of the ``(first, last)`` line spans."""
    return any(first <= code_range.start.line <= last for first, last in spans)


def _rows(code_range) -> set:
    return {code_range.start.line, code_range.end.line}


def _never_used(function: cst.FunctionDef, scopes: list, stack: list, module: cst.Module) -> bool:
    """Whether ``function`` is defined in another function, or in a script's ``if __name__ ==
    "__main__":`` block, that never names it again (facebookresearch/DeepSDF@48c19b8
    train_deep_sdf.py:307, reconstruct.py:145): dead code."""
    outer = scopes[-2] if len(scopes) > 1 else module
    if outer is module:
        if not any(isinstance(node, cst.If) and _tests_main(node.test) for node in stack):
            return False
    elif not isinstance(outer, cst.FunctionDef):
        return False
    name = function.name.value
    names = [node.value for node in nodes_of(outer if isinstance(outer, cst.Module) else outer.body, cst.Name)]
    return names.count(name) == 1 and "locals" not in names and "vars" not in names and "globals" not in names


def _tests_main(test: cst.BaseExpression) -> bool:
    return isinstance(test, cst.Comparison) and isinstance(test.left, cst.Name) and test.left.value == "__name__"
