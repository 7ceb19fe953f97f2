"""Calling context: code every call of which runs only where CUDA is.

``smart_DDP`` (yolov3 utils/torch_utils.py) is only called under ``if cuda and RANK != -1:``
(train.py, ``cuda = device.type != "cpu"``), and ResNeSt's ``torch_dist_sum`` and
``MixUpWrapper`` are only reached from ``main_worker``, which ``mp.spawn`` starts once per GPU:
their bodies run only where CUDA is, like code under the check itself. Each module contributes,
with its calls (``calls.CallFacts``), where each call is and whether it stands under such a check;
the project then finds, to a fixed point, the functions and classes every call of which is
guarded or made from code already found. Conservative: a definition nobody calls, one used as a
value (a callback, a base class), a decorated one, or a name a call could reach unseen (a method
called on an unknown receiver) keeps its own judgement. Methods are judged through their class:
a class every construction of which is found has all its methods found (``forward`` and
``__iter__`` run without a call the model sees).
"""

from __future__ import annotations

import ast
import os
from typing import Dict, FrozenSet, List, Mapping, Optional, Set, Tuple

from ..inference.vocabulary import RETURNING_ITSELF
from ..knowledge import ast_guards
from ..knowledge import cst_guards as guards
from ..knowledge.cst_distributed import PROCESS_COUNTS
from ..syntax.ast_nodes import dotted_name, last_name, literal_string, nodes_below, parameter_names
from .calls import BASED_CLASS, COMMAND, FUNCTION, MODULE_CLASS, OWN, PLAIN_CLASS, ModuleCalls

Span = Tuple[int, int]
#: A definition of the project: (module path, ``f`` / ``Class`` / ``Class.method``).
Definition = Tuple[str, str]


class ContextReader:
    """What the module's walk hands over for the calls' context: its conditions, the
    names bound to a device test or to a new instance, the parameters, the ``spawn`` calls."""

    def __init__(self) -> None:
        #: The ``if`` statements and conditional expressions.
        self.conditions: List[ast.AST] = []
        #: The ``and`` operations: what follows an operand that proves CUDA runs only with it.
        self.conjunctions: List[ast.BoolOp] = []
        #: Name -> whether every ``=`` binding it is a device test (``cuda = device.type != "cpu"``).
        self._device_tests: Dict[str, bool] = {}
        #: Name -> the classes its ``=`` bindings construct (None: bound to something else too).
        self._instances: Dict[str, Optional[Set[str]]] = {}
        self._parameters: Set[str] = set()
        #: Names some ``=`` binds to another name or attribute: each may alias a module.
        self._aliases: Set[str] = set()
        self._spawns: List[ast.Call] = []
        #: What follows ``if not torch.cuda.is_available(): return`` in a function's body: its
        #: calls run only with CUDA.
        self._after_exits: List[Tuple[Tuple[int, int], Tuple[int, int]]] = []
        #: A name a function binds to itself and an availability test (``use_cuda = use_cuda and
        #: torch.cuda.is_available()``), with the rest of the body, where it proves CUDA.
        self._proven_after: List[Tuple[str, Tuple[Tuple[int, int], Tuple[int, int]]]] = []

    def read_assign(self, target: ast.expr, value: ast.expr) -> None:
        if type(target) is not ast.Name:
            return
        name = target.id
        if type(value) in (ast.Name, ast.Attribute):
            self._aliases.add(name)
        self._device_tests[name] = self._device_tests.get(name, True) and _tests_device(value)
        while type(value) is ast.Call and type(value.func) is ast.Attribute and value.func.attr in RETURNING_ITSELF:
            value = value.func.value  # ``FlowGenerator(...).cuda()`` is the instance built
        built = last_name(value.func) if type(value) is ast.Call else None
        known = self._instances.get(name, set())
        self._instances[name] = known | {built} if known is not None and built and built[:1].isupper() else None

    def read_function(self, function: ast.AST) -> None:
        self._parameters.update(parameter_names(function))
        body = function.body
        for index, statement in enumerate(body[:-1]):
            if type(statement) is ast.If and not statement.orelse and _leaves(statement.body) and (
                ast_guards.sign(statement.test) == guards.NEGATIVE
            ):  # lrjconan/GRAN@fc9c04a utils/data_parallel.py:77-91
                self._after_exits.append(_span(body[index + 1:]))
                break
        for index, statement in enumerate(body[:-1]):
            name = _rebound_to_availability(statement)
            if name is not None and not _binds(body[index + 1:], name):
                # hendrycks/outlier-exposure@e6ede98 NLP_language_modeling/torchqrnn/forget_mult.py:175-177
                self._proven_after.append((name, _span(body[index + 1:])))

    def read_spawn(self, call: ast.Call) -> None:
        self._spawns.append(call)

    def coverage(self) -> "Coverage":
        """Where the module's calls run only with CUDA: the bodies of ``if`` statements and
        conditional expressions whose test proves it (``ast_guards.sign``, a name bound only to
        a device test, or one the function rebound with an availability test above)."""
        devices = {name for name, test in self._device_tests.items() if test and name not in self._parameters}
        spans = [_body_span(node) for node in self.conditions if _proves_cuda(node.test, devices | self._proven_at(node))]
        for node in self.conjunctions:  # ``x.device.type == "cuda" and _init()`` (NVlabs/stylegan3@c233a91 torch_utils/ops/upfirdn2d.py:160)
            proven = devices | self._proven_at(node)
            first = next((index for index, value in enumerate(node.values[:-1]) if _proves_cuda(value, proven)), None)
            if first is not None:
                spans.append(_span(node.values[first + 1:]))
        return Coverage(spans + self._after_exits)

    def _proven_at(self, node: ast.AST) -> Set[str]:
        where = (node.lineno, node.col_offset)
        return {name for name, (first, last) in self._proven_after if first <= where <= last}

    def receivers(self) -> Dict[str, tuple]:
        """Name -> the classes it is constructed from, where that is all that binds it."""
        return {
            name: tuple(sorted(classes)) for name, classes in self._instances.items()
            if classes and name not in self._parameters
        }

    def parameter_values(self, modules: FrozenSet[str]) -> FrozenSet[str]:
        """The parameters' names that no import (``modules``) or alias binds: each holds a value
        its caller passed, hardly ever a module."""
        return frozenset(self._parameters - self._aliases - modules - {"self", "cls"})

    def workers(self, tree: ast.Module) -> List[str]:
        """The functions ``spawn(worker, nprocs=n)`` starts, where ``n`` counts the GPUs or the
        spawn runs only for more than one process (``if world_size > 1:``, rosinality/vq-vae-2-pytorch
        @ef5f67c distributed/launch.py:25 with ``--n_gpu`` 1 by default)."""
        if not self._spawns:
            return []
        counts = {
            dotted_name(target) for node in nodes_below(tree) if type(node) is ast.Assign and _counts_gpus(node.value)
            for target in node.targets
        } - {None}
        found = []
        for call in self._spawns:
            positional = [argument for argument in call.args if type(argument) is not ast.Starred]
            nprocs = next((k.value for k in call.keywords if k.arg == "nprocs"), positional[2] if len(positional) > 2 else None)
            if positional and type(positional[0]) is ast.Name and nprocs is not None and (
                _counts_gpus(nprocs) or dotted_name(nprocs) in counts or self._for_several_processes(call)
            ):
                found.append(positional[0].id)
        return found

    def _for_several_processes(self, call: ast.Call) -> bool:
        return any(
            _several_processes(node.test) and node.body[0].lineno <= call.lineno <= node.body[-1].end_lineno
            for node in self.conditions if type(node) is ast.If
        )


def _leaves(block: List[ast.stmt]) -> bool:
    """Whether a block ends by returning: the program goes on without CUDA (a ``raise`` or an
    ``exit`` there refuses to run, which exempts nothing)."""
    return type(block[-1]) is ast.Return


def _body_span(condition: ast.AST) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """What an ``if`` statement's or a conditional expression's test guards."""
    body = condition.body
    if type(body) is list:
        return _span(body)
    return (body.lineno, body.col_offset), (body.end_lineno, body.end_col_offset)


def _rebound_to_availability(statement: ast.stmt) -> Optional[str]:
    """``use_cuda = use_cuda and torch.cuda.is_available()``: the name, true only where CUDA is."""
    if type(statement) is not ast.Assign or len(statement.targets) != 1 or type(statement.targets[0]) is not ast.Name:
        return None
    value = statement.value
    if type(value) is ast.BoolOp and type(value.op) is ast.And and any(ast_guards.sign(part) == guards.POSITIVE for part in value.values):
        return statement.targets[0].id
    return None


def _binds(statements: List[ast.stmt], name: str) -> bool:
    """Whether the statements (nested ones too) bind ``name`` again."""
    return any(
        type(node) is ast.Name and node.id == name and type(node.ctx) is ast.Store
        for statement in statements for node in ast.walk(statement)
    )


def _span(nodes: List[ast.stmt]) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    first, last = nodes[0], nodes[-1]
    return (first.lineno, first.col_offset), (last.end_lineno, last.end_col_offset)


class Coverage(ast_guards.Coverage):
    def __init__(self, spans) -> None:
        super().__init__(spans)
        self.empty = not spans

    def covers(self, node: ast.AST) -> bool:
        return not self.empty and super().covers(node)


def _several_processes(test: ast.expr) -> bool:
    """``world_size > 1``, ``n_gpu >= 2``, ``args.world_size != 1``."""
    if type(test) is not ast.Compare or len(test.ops) != 1 or type(test.comparators[0]) is not ast.Constant:
        return False
    count, operator = test.comparators[0].value, type(test.ops[0])
    if (last_name(test.left) or "").lower() not in PROCESS_COUNTS or type(count) is not int:
        return False
    return (operator is ast.Gt and count >= 1) or (operator is ast.GtE and count >= 2) or (operator is ast.NotEq and count == 1)


def _counts_gpus(value: ast.expr) -> bool:
    return any(type(node) is ast.Call and last_name(node.func) == "device_count" for node in nodes_below(value))


def _tests_device(value: ast.expr) -> bool:
    """``device.type != "cpu"``, ``args.device == "cuda"``, ``torch.cuda.is_available()``."""
    if type(value) is ast.Compare and len(value.ops) == 1:
        text = literal_string(value.comparators[0]) or ""
        operator = type(value.ops[0])
        return (operator is ast.NotEq and text == "cpu") or (operator is ast.Eq and text.startswith("cuda"))
    return ast_guards.sign(value) == guards.POSITIVE


def _proves_cuda(test: ast.expr, devices: Set[str]) -> bool:
    if type(test) is ast.Name:
        return test.id in devices
    if type(test) is ast.BoolOp and type(test.op) is ast.And:
        return any(_proves_cuda(value, devices) for value in test.values)
    return ast_guards.sign(test) == guards.POSITIVE


def definitions(tree: ast.Module) -> Dict[str, list]:
    """``ModuleCalls.definitions``: top-level functions and classes, and the methods of those."""
    found: Dict[str, list] = {}
    experiments = _experiments(tree)
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[statement.name] = _definition(statement, experiments)
            if isinstance(statement, ast.ClassDef):
                for inner in statement.body:
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found[f"{statement.name}.{inner.name}"] = _definition(inner, frozenset())
    return found


def _definition(node: ast.AST, experiments: frozenset) -> list:
    """``ModuleCalls.definitions``'s entry of a function or class."""
    decorators = node.decorator_list
    first = min([node.lineno, *(decorator.lineno for decorator in decorators)])
    kind = FUNCTION
    if type(node) is ast.ClassDef:
        bases = [base for base in node.bases if not (type(base) is ast.Name and base.id == "object")]
        kind = PLAIN_CLASS if not bases else MODULE_CLASS if all(last_name(base) == "Module" for base in bases) else BASED_CLASS
    wrapping = [decorator for decorator in decorators if not _passes_calls_through(decorator)]
    decorated = COMMAND if wrapping and all(_registers_command(d, experiments) for d in wrapping) else bool(wrapping)
    return [first, node.end_lineno or node.lineno, decorated, node.body[0].lineno, kind]


#: Decorators that wrap a function and register it nowhere: it runs where it is called by name
#: (agrimgupta92/sgan@691231e sgan/utils.py:49 ``@contextmanager def timeit``, which nothing calls).
CALLS_PASS_THROUGH = frozenset({
    "contextmanager", "asynccontextmanager", "lru_cache", "cache", "no_grad", "inference_mode", "enable_grad",
    "staticmethod", "classmethod", "abstractmethod",
})


def _passes_calls_through(decorator: ast.expr) -> bool:
    return last_name(decorator.func if type(decorator) is ast.Call else decorator) in CALLS_PASS_THROUGH


def _experiments(tree: ast.Module) -> frozenset:
    """The module-level names bound to a Sacred ``Experiment(...)``."""
    return frozenset(
        target.id for statement in tree.body if type(statement) is ast.Assign and type(statement.value) is ast.Call
        and last_name(statement.value.func) == "Experiment" for target in statement.targets if type(target) is ast.Name
    )


def _registers_command(decorator: ast.expr, experiments: frozenset) -> bool:
    """``@ex.command`` (or ``@ex.command(unobserved=True)``) of a Sacred experiment: the function
    runs where code calls it or where the command line names it, as no other decorator tells."""
    if type(decorator) is ast.Call:
        decorator = decorator.func
    return (type(decorator) is ast.Attribute and decorator.attr == "command"
            and type(decorator.value) is ast.Name and decorator.value.id in experiments)


def cuda_context_spans(modules: Mapping[str, ModuleCalls]) -> Dict[str, Tuple[Span, ...]]:
    """By module path: the lines of the definitions that only run where CUDA is (see above), and
    the ``--backend`` options of a module whose process groups all start there."""
    stems = {path: os.path.splitext(os.path.basename(path))[0] for path in modules}
    found: Set[Definition] = set()
    candidates = _candidates(modules, stems)
    changed = True
    while changed:
        changed = False
        for definition, sites in candidates.items():
            if definition not in found and all(guarded or _within_found(found, caller) for caller, guarded in sites):
                found.add(definition)
                changed = True
    spans: Dict[str, List[Span]] = {}
    for path, name in found:
        first, last = modules[path].definitions.get(name, [0, 0])[:2]
        if last:
            spans.setdefault(path, []).append((first, last))
    for path, calls in modules.items():
        starts = [(path, record.caller, record.guarded) for key, records in calls.sites.items()
                  if key.partition("@")[0] == "init_process_group" for record in records]
        if calls.backend_options and starts and all(guarded or _within_found(found, (p, c)) for p, c, guarded in starts):
            spans.setdefault(path, []).extend((line, line) for line in calls.backend_options)
    return {path: tuple(sorted(found_spans)) for path, found_spans in spans.items()}


def _within_found(found: Set[Definition], caller: Tuple[str, str]) -> bool:
    path, name = caller
    return bool(name) and ((path, name) in found or (path, name.partition(".")[0]) in found)


def _candidates(modules: Mapping[str, ModuleCalls], stems: Mapping[str, str]) -> Dict[Definition, List[tuple]]:
    """Each top-level function and class that is called, never used as a value nor decorated ->
    its call sites ``((calling module, caller), guarded)``: every call that may reach it (its
    name from an unknown origin, from a module of its module's name, or its own module's). A
    worker started once per GPU is one too, its start (which passes it as a value) a guarded
    call; its other calls (``main_worker(args.gpu, ...)`` without ``spawn``) count as any call.
    A definition whose only calls are methods of values or its own is a candidate with none."""
    by_name: Dict[str, List[Tuple[str, list]]] = {}
    for path, calls in modules.items():
        for key, records in calls.sites.items():
            by_name.setdefault(key.partition("@")[0], []).append((path, [key.partition("@")[2], records]))
    escaped: Set[str] = {key for calls in modules.values() for key in calls.escaped}
    classes = {name.partition(".")[0] for calls in modules.values() for name in calls.definitions if "." in name}
    candidates: Dict[Definition, List[tuple]] = {}
    for path, calls in modules.items():
        stem = stems[path]
        for name, (_, _, decorated, *_) in calls.definitions.items():
            worker = name in calls.workers
            if not worker and ("." in name or decorated or {name, f"{name}@{stem}"} & escaped or f"{name}@{OWN}" in calls.escaped):
                continue
            sites = []
            for caller_path, (origin, records) in by_name.get(name, ()):
                if origin and origin != stem and not (origin == OWN and caller_path == path):
                    continue  # another module's namesake
                if origin == OWN and caller_path != path:
                    continue
                sites.extend(
                    ((caller_path, record.caller), record.guarded) for record in records
                    # a method of an instance of a project class (``generator.train()``) reaches no
                    # top-level definition, and a call from the definition itself does not reach it
                    if not (record.on_value or record.receivers and set(record.receivers) <= classes)
                    and not (caller_path == path and record.caller == name)
                )
            if sites or worker:
                candidates[(path, name)] = sites
    return candidates
