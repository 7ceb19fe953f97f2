"""Who calls what, and with which device arguments: per module, from CPython's tree.

``def prepare_z_y(G_batch_size, dim_z, nclasses, device='cuda')`` is no hazard when every call in
the project passes ``device=`` (BigGAN-PyTorch utils.py:1086); nor is an attrs field
``device: torch.device = attr.ib(default=torch.device("cuda"))`` when every construction of its
class passes the device (glide-text2im clip/encoders.py). Each module contributes the names it
defines with such a default, a summary of every call by the callee's last name (how many
positional arguments, which ``device`` keywords, ``**`` unpacking), and the names it uses as a
value rather than calls (a callback, a base class), whose calls the project cannot see.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Set, Tuple

from ..syntax.ast_nodes import child_blocks, last_name, nodes_below

#: A call's arguments as ``default_calls`` hands them to the rules: ``[positional count or -1
#: where ``*args`` makes it unknown, the keywords (sorted), whether ``**kwargs`` is unpacked]``.
Signature = list

#: Arguments whose name holds this word are the device ones the rules look at.
DEVICE_WORD = "device"


#: Where a called name comes from, written after ``@``: the last part of the module it is
#: imported from (``from .utils import LayerNorm`` -> ``LayerNorm@utils``, and ``utils.f()`` after
#: ``import utils``), ``.`` for the module's own top-level definitions; no ``@``: not known.
OWN = "."


class CallFacts(NamedTuple):
    """One call of the module, read once in its walk; a module keeps each distinct one."""

    #: Positional arguments written, -1 where ``*args`` makes the count unknown.
    positional: int
    #: The keywords passed, sorted.
    keywords: Tuple[str, ...]
    #: Whether ``**kwargs`` is unpacked.
    unpacked: bool
    #: The attributes passed where one is named like a device flag (``MultiBoxLoss(..., args.cuda)``):
    #: ``(positional, keywords)``, each argument that is an attribute by its last name (``cuda``),
    #: any other None (positional ones only up to a ``*args``); None where no such flag is passed.
    passed: Optional[tuple]
    #: The classes the receiver was constructed from (``t = Trainer()`` then ``t.initialize()``:
    #: ``("Trainer",)``); empty where unknown.
    receivers: Tuple[str, ...]
    #: The definition the call is in: ``f``, ``Class.method``, ``Class`` (an autograd Function),
    #: empty at module level.
    caller: str
    #: Whether it runs only where CUDA is (under ``if torch.cuda.is_available():``, ``if cuda:``
    #: after ``cuda = device.type != "cpu"``).
    guarded: bool
    #: Whether the callee is an attribute of a value, not of a module (``session.run()`` after
    #: ``session = InferenceSession(...)``, ``self.model.run()``, ``Task(...).run()``): it reaches
    #: a method, never a top-level function (``run``, the GPU worker of p0p4k/vits2_pytorch@1f4f379
    #: train.py:58, is not what infer_onnx.py:45's ``model.run(...)`` calls).
    on_value: bool

    def signature(self) -> Signature:
        return [self.positional, list(self.keywords), self.unpacked]


@dataclass
class ModuleCalls:
    #: Callee last name with its origin (``utils.prepare_z_y(...)`` -> ``prepare_z_y@utils``) ->
    #: its distinct calls.
    sites: Dict[str, List[CallFacts]] = field(default_factory=dict)
    #: Functions (an ``__init__``: its class) and classes defined here with a CUDA device default.
    device_defaults: List[str] = field(default_factory=list)
    #: Names (with their origin) used as a value (``partial(f, ...)``, ``fn = f``, ``class B(A)``):
    #: called unseen.
    escaped: List[str] = field(default_factory=list)
    #: Top-level functions and classes, and methods (``Class.method``) ->
    #: ``[first line, last line, decorated (a decorator may call it unseen: @register; COMMAND), first
    #: line of the body, FUNCTION, PLAIN_CLASS, MODULE_CLASS or BASED_CLASS (a framework may call
    #: the methods of a class with other bases unseen)]``.
    definitions: Dict[str, list] = field(default_factory=dict)
    #: Functions started once per GPU: ``mp.spawn(worker, nprocs=torch.cuda.device_count())``.
    workers: List[str] = field(default_factory=list)
    #: Lines of ``--backend`` options (``parser.add_argument("--dist-backend", default="nccl")``).
    backend_options: List[int] = field(default_factory=list)
    #: Every name it uses other than by calling it (``[f, g]``, ``self.on_end``, ``getattr(m,
    #: "train")``, a short string's words), sorted: a definition named here may run unseen
    #: (``project/reached.py``).
    mentions: List[str] = field(default_factory=list)
    #: The names it imports (``from m import f``) and never uses itself, sorted: re-exports (an
    #: ``__init__``'s), which its importers may call unseen.
    reexports: List[str] = field(default_factory=list)


def origins(tree: ast.Module) -> Dict[str, str]:
    """Top-level name -> the module it comes from (its last part), or ``OWN`` for a definition."""
    found: Dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                found[alias.asname or alias.name] = (statement.module or alias.name).rsplit(".", 1)[-1]
        elif isinstance(statement, ast.Import):
            for alias in statement.names:
                found[alias.asname or alias.name.split(".")[0]] = alias.name.rsplit(".", 1)[-1] if alias.asname else alias.name.split(".")[0]
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[statement.name] = OWN
    return found


def keyed(name: str, origin: Optional[str]) -> str:
    return f"{name}@{origin}" if origin else name


#: Calls that import modules by a computed name or list a namespace (``importlib.import_module``,
#: ``globals()``, ``Base.__subclasses__()``): a module that makes one may find any class by what
#: it is, not by its name (junyanz/BicycleGAN@40b9d52 models/__init__.py:25 iterates the
#: ``__dict__`` of a module ``import_module`` gave it).
ENUMERATING = frozenset({"import_module", "__import__", "globals", "__subclasses__"})
#: The kinds of definition the last item of a ``ModuleCalls.definitions`` entry holds.
#: ``MODULE_CLASS``: bases that are all ``nn.Module``, which calls only its own hooks by name.
FUNCTION, PLAIN_CLASS, BASED_CLASS, MODULE_CLASS = 0, 1, 2, 3
#: The "decorated" item of a ``ModuleCalls.definitions`` entry whose decorators only register a
#: command line's command (Sacred's ``@ex.command``): true, as for any decorator (its parameters
#: take a config's values unseen), but it runs only where called or named (kkoutini/PaSST@2a5c818
#: ex_audioset.py:364 ``model_speed_test``, which no README command runs).
COMMAND = "command"


#: What ``_passed`` names ``torch.cuda.is_available()`` by: a flag false wherever CUDA is missing
#: (ermongroup/ncsnv2@1bcea03 evaluation/nearest_neighbor.py:149 passes it as ``cuda``).
AVAILABILITY_PASSED = "cuda.is_available()"


def passed_flags(call: ast.Call, availability: FrozenSet[str] = frozenset()) -> Optional[tuple]:
    """``CallFacts.passed`` of a call; ``availability``: the names that hold
    ``torch.cuda.is_available()`` where the call is."""
    if not any(_may_pass_a_flag(argument, availability) for argument in call.args) and not any(
        _may_pass_a_flag(keyword.value, availability) for keyword in call.keywords
    ):
        return None  # no attribute passed (most calls): no flag
    starred = next((i for i, argument in enumerate(call.args) if isinstance(argument, ast.Starred)), len(call.args))
    positional = tuple(_passed(argument, availability) for argument in call.args[:starred])  # after ``*args``: unknown places
    keywords = [(keyword.arg, _passed(keyword.value, availability)) for keyword in call.keywords if keyword.arg is not None]
    if not (any(map(_may_be_a_device_flag, positional)) or any(_may_be_a_device_flag(v) for _, v in keywords)):
        return None
    return positional, tuple((k, v) for k, v in dict(keywords).items() if v is not None)


def _may_be_a_device_flag(name: Optional[str]) -> bool:
    """``cuda``, ``use_gpu``, ``cpu_only``: what a guard may test (others are not kept)."""
    return name is not None and any(word in name.lower() for word in ("cuda", "gpu", "cpu", "mps"))


def _may_pass_a_flag(argument: ast.expr, availability: FrozenSet[str]) -> bool:
    kind = type(argument)
    return kind is ast.Attribute or (kind is ast.Call and _is_availability(argument)) or (kind is ast.Name and argument.id in availability)


def _is_availability(call: ast.Call) -> bool:
    func = call.func
    return type(func) is ast.Attribute and func.attr == "is_available" and type(func.value) is ast.Attribute and func.value.attr == "cuda"


def _passed(argument: ast.expr, availability: FrozenSet[str]) -> Optional[str]:
    """``cuda`` for an argument ``args.cuda`` (what may carry an option), ``AVAILABILITY_PASSED``
    for ``torch.cuda.is_available()`` or a name bound to it, else None."""
    if type(argument) is ast.Call:
        return AVAILABILITY_PASSED if _is_availability(argument) and not argument.args else None
    if type(argument) is ast.Name:
        return AVAILABILITY_PASSED if argument.id in availability else None
    return argument.attr if isinstance(argument, ast.Attribute) and isinstance(argument.value, (ast.Name, ast.Attribute)) else None


def read_call(
    call: ast.Call, facts: ModuleCalls, known: Dict[str, str], caller: str, guarded: bool, receivers: Dict[str, tuple],
    availability: FrozenSet[str] = frozenset(), modules: Optional[FrozenSet[str]] = None, values: FrozenSet[str] = frozenset(),
) -> None:
    """The one reading of a call: its record under its callee, and the names it passes as values
    (``availability``: the module-level names bound only to ``torch.cuda.is_available()``, for a
    call at module level; ``modules``: the names an import anywhere in the module binds, None
    where the module imports by computed names, so that any name may hold a module)."""
    function = call.func
    name = _callee(function, known)
    if name is not None:
        args = call.args
        starred = False
        for argument in args:
            if type(argument) is ast.Starred:
                starred = True
                break
        keywords = call.keywords
        unpacked = False
        named = []
        for keyword in keywords:
            if keyword.arg is None:
                unpacked = True
            else:
                named.append(keyword.arg)
        base = function.value if type(function) is ast.Attribute else None
        record = CallFacts(
            -1 if starred else len(args), tuple(sorted(set(named))), unpacked, passed_flags(call, availability if not caller else frozenset()),
            _receivers(base, receivers), caller, guarded, _of_value(base, receivers, modules, values),
        )
        seen = facts.sites.get(name)
        if seen is None:
            facts.sites[name] = [record]
        elif record not in seen:
            seen.append(record)
    if type(function) is ast.Name and function.id == "super":
        return  # ``super(Net, self)`` names its class, which it does not call
    for argument in call.args:
        _escape(argument, facts, known)
    for keyword in call.keywords:
        _escape(keyword.value, facts, known)


def _receivers(base: Optional[ast.expr], receivers: Dict[str, tuple]) -> tuple:
    """The classes a method call's receiver comes from: those ``t = Trainer()`` built ``t`` from,
    or the class named itself (``BaseDataLoader.initialize(self)``)."""
    if type(base) is not ast.Name:
        return ()
    return receivers.get(base.id, (base.id,) if base.id[:1].isupper() else ())


def _of_value(base: Optional[ast.expr], receivers: Dict[str, tuple], modules: Optional[FrozenSet[str]], values: FrozenSet[str] = frozenset()) -> bool:
    """Whether a method call's receiver is an instance: its dotted root is ``self`` or ``cls``, a
    name bound only to constructions of classes (no import binds it), a parameter no import or
    alias binds (``values``: ``scores.argmax(dim=1)`` calls no project function ``argmax``,
    Shen-Lab/GraphCL@b4d7501 semisupervised_MNIST_CIFAR10/finetuning/train/metrics.py:16), a construction itself
    (``Task(...).run()``) or what a method returns (``ffmpeg.input(f).output("-").run()``). A
    subscript, a function's result or any other name may hold a module (``model_dict[name]
    .Model(args)``: MAZiqing/FEDformer@c0f6b97 exp/exp_main.py:29)."""
    if base is None or modules is None:
        return False
    while type(base) is ast.Attribute:
        base = base.value
    if type(base) is ast.Name:
        return base.id in ("self", "cls") or base.id in values or (base.id in receivers and base.id not in modules)
    return type(base) is ast.Call and (type(base.func) is ast.Attribute or (last_name(base.func) or "")[:1].isupper())


def read_node(node: ast.AST, facts: ModuleCalls, known: Dict[str, str]) -> None:
    """What a binding, return or definition of the module's walk adds (calls: ``read_call``);
    ``known`` holds the module's ``origins``."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)) and node.value is not None:
        _escape(node.value, facts, known)
    elif isinstance(node, ast.ClassDef):
        for base in node.bases:
            _escape(base, facts, known)
        if any(_defaults_to_cuda(target, value) for target, value in _fields(node)):
            facts.device_defaults.append(node.name)
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and method.name == "__init__" and _has_cuda_default(method):
                facts.device_defaults.append(node.name)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "__init__" and _has_cuda_default(node):
        facts.device_defaults.append(node.name)


def _callee(function: ast.expr, known: Dict[str, str]) -> Optional[str]:
    if isinstance(function, ast.Name):
        return keyed(function.id, known.get(function.id))
    if isinstance(function, ast.Attribute):
        base = function.value.id if isinstance(function.value, ast.Name) else None
        return keyed(function.attr, known.get(base) if base and known.get(base) != OWN else None)
    return None


def _escape(value: ast.expr, facts: ModuleCalls, known: Dict[str, str]) -> None:
    name = _callee(value, known)  # a bare name or attribute, not called here
    if name is not None and name not in facts.escaped:
        facts.escaped.append(name)


def _fields(cls: ast.ClassDef):
    for statement in cls.body:
        if isinstance(statement, ast.AnnAssign) and statement.value is not None:
            yield statement.target, statement.value
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            yield statement.targets[0], statement.value


def _has_cuda_default(function: ast.AST) -> bool:
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    pairs += [(a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return any(DEVICE_WORD in argument.arg.lower() and _names_cuda(default) for argument, default in pairs)


def _defaults_to_cuda(target: ast.expr, value: ast.expr) -> bool:
    return isinstance(target, ast.Name) and DEVICE_WORD in target.id.lower() and _names_cuda(value)


def _names_cuda(value: ast.expr) -> bool:
    return any(
        isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("cuda")
        for node in nodes_below(value)
    )


def default_calls(modules: Dict[str, ModuleCalls]) -> Tuple[Dict[str, Tuple[Signature, ...]], FrozenSet[str]]:
    """For each name some module defines with a CUDA device default: the signatures of its calls
    (name -> signatures), and the names used as a value, over the modules (path -> facts). A call
    counts where it may reach that definition: its origin unknown, the defining module's name
    (``from .utils import LayerNorm``) or a package of the project (``package_names``), or the
    defining module's own call; ``LayerNorm(width)``
    in ``xf.py``, which defines a ``LayerNorm`` of its own, and ``nn.LayerNorm`` do not."""
    stems = {path: os.path.splitext(os.path.basename(path))[0] for path in modules}
    packages = package_names(stems)
    defined: Dict[str, Set[str]] = {}
    for path, facts in modules.items():
        for name in facts.device_defaults:
            defined.setdefault(name, set()).add(stems[path])
    calls: Dict[str, List[Signature]] = {}
    escaped: Set[str] = set()
    if not defined:
        return {}, frozenset()
    # the keys of the calls that may reach each name's definitions, wherever the call is
    reaching = {name: [name, *(f"{name}@{origin}" for origin in sorted(where | packages))] for name, where in defined.items()}
    for path, facts in modules.items():
        used_as_value = set(facts.escaped)
        for name, where in defined.items():
            keys = reaching[name] + [f"{name}@{OWN}"] if stems[path] in where else reaching[name]
            for key in keys:
                calls.setdefault(name, []).extend(record.signature() for record in facts.sites.get(key, ()))
                if key in used_as_value:
                    escaped.add(name)
    return {name: tuple(found) for name, found in sorted(calls.items()) if found}, frozenset(escaped)


def package_names(stems: Dict[str, str]) -> Set[str]:
    """The names of the project's packages, the folders of its modules (``stems``: path ->
    module name), with an ``__init__`` or without (a namespace package: ``from face_alignment
    import mtcnn`` then ``mtcnn.MTCNN(device='cuda:0')``, mk-minchul/AdaFace@c60eaa7
    face_alignment/align.py:4,10). A package may re-export a definition of any of its modules,
    and a call through one of its modules is keyed by the package, so a call through it
    (``utils.load_model(...)`` after ``import trajectory.utils as utils``) may reach any
    definition of that name."""
    return {os.path.basename(os.path.dirname(path)) for path in stems}


def shaped(value) -> Optional[ModuleCalls]:
    """The facts a stored entry's tuple holds, or None where it is no tuple of eight. The entry's
    checksum held, so this build wrote it (``stored.facts_from_entry``): its parts have the shapes
    this module gives them."""
    if not (isinstance(value, tuple) and len(value) == 8):
        return None
    sites, *rest = value
    records = {name: [CallFacts(*record) for record in found] for name, found in sites.items()}
    return ModuleCalls(records, *rest)


def reexports(imported: Set[str], mentions: Set[str], calls: ModuleCalls) -> List[str]:
    """The names the module imports (``from m import f``) and never uses itself: re-exports (a
    package's ``__init__``), which its importers may call unseen."""
    called = {key.partition("@")[0] for key in calls.sites}
    return sorted(imported - mentions - called)


def availability_names(tree: ast.Module) -> FrozenSet[str]:
    """The module-level names every binding of which is ``torch.cuda.is_available()``
    (tomgoldstein/loss-landscape@64ef4d5 cifar10/main.py:175 ``use_cuda``, then passed to
    ``train(..., use_cuda)``): false wherever CUDA is missing."""
    bound: Dict[str, bool] = {}
    statements = list(tree.body)
    while statements:
        statement = statements.pop()
        kind = type(statement)
        if kind is ast.Assign:
            value = statement.value
            holds = type(value) is ast.Call and _is_availability(value) and not value.args
            for target in statement.targets:
                for node in nodes_below(target):
                    if type(node) is ast.Name:
                        bound[node.id] = bound.get(node.id, True) and holds and target is node
        elif kind in (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith, ast.Import, ast.ImportFrom):
            for node in nodes_below(statement.target) if kind in (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor) else ():
                if type(node) is ast.Name:
                    bound[node.id] = False
            if kind in (ast.Import, ast.ImportFrom):
                for alias in statement.names:
                    bound[(alias.asname or alias.name).split(".")[0]] = False
        if kind not in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            statements.extend(inner for block in child_blocks(statement) for inner in block)
    return frozenset(name for name, holds in bound.items() if holds)
