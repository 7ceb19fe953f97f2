"""What one module tells the rest of its project, read from CPython's tree in one walk.

A line is judged with what the whole project says: ``if self.use_gpu:`` is no availability check
when ``--gpu_ids`` defaults to ``"0"`` in ``options/base_options.py`` and ``use_gpu`` only reads
it. Each module contributes the command-line options it defines with their defaults, the
attributes and one-line predicates that copy or test an option, the files it saves from
``.cpu()`` values, what it builds or calls of extension kernels (``kernels.py``), and what other
modules may take from it: its module-level imports (``torch``, ``nn`` reach a module through
``from utils import *``), its star imports, its ``__all__`` and its module-level device bindings
(``device = torch.device("cuda" if ... else "cpu")``). The facts are plain data, cached by the
module's content hash.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

from ..knowledge import cst_guards as guards
from ..knowledge.ast_guards import option_test
from ..knowledge.file_names import bound_file_names, built_on_cpu, file_names, moves_to_cpu, parameters_moved_to_cpu, state_after_cpu
from ..knowledge.flags import AVAILABILITY_WORDS, copied_option
from ..knowledge.option_values import about_devices
from ..knowledge.script_options import SETTERS, after_failure, failing_statements, read_option, read_setter
from ..syntax.ast_nodes import dotted_name, last_name, literal_string, nodes_below, parameter_names
from .calls import ENUMERATING, ModuleCalls, availability_names, origins, read_call, read_node, reexports
from .context import ContextReader, definitions
from .configs import flags_passed, module_level_names, read_key_call, read_key_test, read_key_writes
from .kernels import KernelReader
from .shipped import checkpoint_literals
from .stateless import module_classes, module_factories

#: A constant an option defaults to (what ``ast.literal_eval`` gives: bool, int, str, None...).
Default = Any


@dataclass
class ModuleFacts:
    #: Option dest (``parser.add_argument("--gpu_ids", default="0")`` -> ``gpu_ids``) -> its default.
    options: Dict[str, Default] = field(default_factory=dict)
    #: Options whose default is no constant.
    unknown_options: List[str] = field(default_factory=list)
    #: A name or attribute that copies an option (``self.use_gpu = opt.cuda``) -> that option's last name.
    copies: Dict[str, str] = field(default_factory=dict)
    #: A function or method whose one statement returns a test of an option
    #: (``def use_gpu(self): return len(self.opt.gpu_ids) > 0``) -> that test: ``[option, len
    #: taken, comparison operator or None, the integer compared with or None]``.
    predicates: Dict[str, list] = field(default_factory=dict)
    #: The names of the files it saves ``.cpu()`` values to (``torch.save(x.cpu(), "feat.pth")``).
    cpu_saved_files: List[str] = field(default_factory=list)
    #: What it says of extension kernels (``kernels.KernelReader.facts``): builds, imports, the
    #: scopes that call into an imported module, whether it tests for the CPU.
    kernels: dict = field(default_factory=dict)
    #: Its calls (one record each, ``calls.CallFacts``: arguments, device flags passed, where it
    #: stands), what it defines with a CUDA device default, its definitions, its GPU workers.
    calls: ModuleCalls = field(default_factory=ModuleCalls)
    #: Checkpoint file names written as literals in a module that loads (``'../data/pnet.pt'``).
    checkpoint_files: List[str] = field(default_factory=list)
    #: Module-level imports: local name -> the module (``import torch.nn as nn`` -> ``torch.nn``)
    #: or ``module:name`` for a from-import (``from .utils import device`` -> ``.utils:device``).
    imports: Dict[str, str] = field(default_factory=dict)
    #: The modules it star-imports at module level, relative ones with their dots (``.types_``).
    star_imports: List[str] = field(default_factory=list)
    #: Its ``__all__`` when that is a literal list of names (what a star import of it takes).
    public: Optional[List[str]] = None
    #: Module-level names bound to a device -> ``DEVICE_KINDS``'s word for it.
    devices: Dict[str, str] = field(default_factory=dict)
    #: Its top-level classes -> their resolved bases, None where one may hold a parameter, a
    #: buffer or a submodule (``stateless.module_classes``).
    classes: Dict[str, Optional[List[str]]] = field(default_factory=dict)
    #: Whether it names MPS anywhere (a ``"mps"`` string, ``torch.backends.mps``) or asks for a
    #: device that may be MPS (``torch.accelerator``, Accelerate, Lightning): a project that never
    #: does runs on the CPU wherever CUDA is missing.
    mentions_mps: bool = False
    #: Device-named attributes it assigns (``args.visible_gpus = ...``, ``self.device = d``): an
    #: option of that name may not hold its default (``knowledge/option_values.py``).
    rebound: List[str] = field(default_factory=list)
    #: Those of them every assignment here binds to an availability check (``args.use_gpu = True
    #: if torch.cuda.is_available() and args.use_gpu else False``): true only where CUDA is.
    availability_rebound: List[str] = field(default_factory=list)
    #: Those it only ever sets off (``args.use_gpu = False``: cure-lab/LTSF-Linear@0c11366
    #: run_stat.py:49): they hold no CUDA here either, so they do not spoil an availability option.
    off_rebound: List[str] = field(default_factory=list)
    #: Its top-level classes whose methods save files, and top-level functions that do, -> the
    #: file names they write (``EarlyStopping.save_checkpoint``: ``torch.save(model.state_dict(),
    #: path + '/checkpoint.pth')``; quark0/darts@f276dd3 rnn/utils.py:45 ``save_checkpoint``).
    saving_classes: Dict[str, List[str]] = field(default_factory=dict)
    #: Its top-level functions that return a new module of a class they call -> those classes
    #: (``stateless.module_factories``).
    factories: Dict[str, List[str]] = field(default_factory=dict)
    #: Whether it saves a network's weights moved to the CPU parameter by parameter (BasicSR's
    #: ``save_network``): the weights a project releases are what its training saved.
    saves_weights_on_cpu: bool = False
    #: How many calls save an object to a path (``torch.save(obj, path)``, any ``.save(obj, path)``
    #: but numpy's), and how many of them provably write CPU tensors (``cpu_saved_files``' tests).
    saves: int = 0
    cpu_saves: int = 0
    #: The statements a script runs that read options its parser does not define
    #: (``knowledge/script_options.py``): ``[first, last, end, options]``.
    failing: List[list] = field(default_factory=list)
    #: The attributes it assigns on anything but ``self`` and ``cls`` (``args.exp_code = ...``),
    #: or names to ``setattr`` and ``set_defaults``: a namespace elsewhere may hold them.
    stored_attributes: List[str] = field(default_factory=list)
    #: Whether it sets attributes by a computed name (``setattr(args, k, v)``, ``__dict__``).
    sets_by_name: bool = False
    #: The options its strings pass as flags (``"--resume"`` in a command it runs), but those
    #: its parser defines (``project/configs.PassedOptions``).
    passed_flags: List[str] = field(default_factory=list)
    #: The keys it reads off by default from a mapping (``config.get("load")``), and those it
    #: writes (``configs.read_key_call`` and its neighbours).
    read_keys: List[str] = field(default_factory=list)
    written_keys: List[str] = field(default_factory=list)


#: What a module-level device binding holds: ``portable`` (an accelerator where available, else
#: the CPU: ``"cuda" if torch.cuda.is_available() else "cpu"``), ``cuda`` (CUDA whatever the
#: machine has: ``torch.device("cuda")``), ``mps``, ``cpu``.
DEVICE_KINDS = ("portable", "cuda", "mps", "cpu")


#: Packages whose device choice picks MPS on a Mac by themselves.
_MPS_CHOOSING_PACKAGES = ("accelerate", "lightning", "pytorch_lightning")

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_CONDITIONS = (ast.If, ast.IfExp)
#: The nodes ``calls.read_node`` reads besides definitions (calls: ``calls.read_call``).
_BINDINGS = (ast.AnnAssign, ast.Return, ast.ClassDef)
#: Every node type the walk reads.
_READ = frozenset({ast.Call, ast.Constant, ast.Attribute, ast.Name, ast.Import, ast.ImportFrom, ast.Assign, ast.BoolOp, ast.Compare, ast.Dict, *_FUNCTIONS, *_CONDITIONS, *_BINDINGS})
#: The words of a string constant up to this long are names it may stand for (``getattr(m, "train")``).
_NAMING_STRING = 64
_WORDS = re.compile(r"[A-Za-z_]\w*")



def imported_name(imported: str) -> str:
    """The dotted name an entry of ``ModuleFacts.imports`` binds: ``torch.nn`` stays,
    ``torch.nn:Module`` is ``torch.nn.Module``, ``.:models`` (``from . import models``) ``.models``."""
    module, colon, name = imported.partition(":")
    if not colon:
        return module
    return module + name if module.endswith(".") else f"{module}.{name}"


def module_facts(tree: ast.Module) -> ModuleFacts:
    """The facts of one module's tree, in one walk (each top-level piece with its scope, for
    the kernels' facts, and the definition it belongs to, for the calls'); each call is read once
    the walk has seen the conditions and bindings that place it."""
    facts = ModuleFacts()
    calls = facts.calls
    kernels = KernelReader(tree)
    context = ContextReader()
    known = origins(tree)
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef) and not any(last_name(base) == "Function" for base in statement.bases):
            read_node(statement, calls, known)  # kernels.roots() walks its pieces, not the class node
    found: List[tuple] = []
    plainly_rebound: Set[str] = set()  # device attributes some assignment here binds without an availability check
    named_saves: List[tuple] = []  # (path variable, the top-level piece it is bound in)
    Call, Constant, Attribute, Assign, Name = ast.Call, ast.Constant, ast.Attribute, ast.Assign, ast.Name
    mentions: Set[str] = set()
    stored: Set[str] = set()  # attributes assigned on anything but ``self`` and ``cls``
    imported: Set[str] = set()
    modules: Set[str] = set()  # names an import binds anywhere: a module (or what it exports)
    callees: Set[int] = set()  # the ``func`` of each call: a parent comes before its children
    defining: Set[int] = set()  # the flags of ``add_argument`` calls: no option passed
    passed: Set[str] = set()
    reads: Set[str] = set()
    writes: Set[str] = module_level_names(tree)
    for root, scope, caller in kernels.roots():
        for node in nodes_below(root):  # ``ast.walk``'s order, without contexts and operators
            kind = type(node)  # CPython's parser makes no subclasses: compared exactly, as fast as it gets
            if kind not in _READ:
                continue  # subscripts, operations...: most nodes, and nothing to read
            if kind is Name:
                if id(node) not in callees:
                    mentions.add(node.id)
                continue
            if kind is ast.ImportFrom:  # ``from .runner import run_net as pretrain``: called by another name
                for alias in node.names:
                    (mentions if alias.asname else imported).add(alias.name)
                    modules.add(alias.asname or alias.name)
                continue
            if kind is ast.Import:
                modules.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)
                continue
            if kind is Call:
                callees.add(id(node.func))
                found.append((node, caller))
                called = last_name(node.func)
                if called in SETTERS:
                    facts.sets_by_name = read_setter(node, called, stored) or facts.sets_by_name
                elif called in ("add_argument", "add_option"):
                    defining.update(map(id, node.args))
                read_key_call(node, called, reads, writes)
                if called in ENUMERATING:  # ``globals()``, ``cls.__subclasses__()``
                    mentions.add(called)
                elif type(node.func) is Name and node.func.id == "super" and node.args:
                    callees.add(id(node.args[0]))  # ``super(Net, self)`` names its own class
                path_name = _read_call(node, facts, context, root if type(root) in _FUNCTIONS else tree)
                if caller and len(node.args) > 1 and _torch_save(node.func):
                    _read_class_save(caller.partition(".")[0], node.args[1], root, facts, tree)
                if path_name is not None:  # bound in its function, or anywhere at module level
                    named_saves.append((path_name, root if type(root) in _FUNCTIONS else tree))
                kernels.read_call(node, scope)
            elif kind is Constant:
                checkpoint_literals(node, facts.checkpoint_files)
                if type(node.value) is str:
                    if "mps" in node.value.lower():
                        facts.mentions_mps = True
                    if len(node.value) <= _NAMING_STRING:
                        mentions.update(_WORDS.findall(node.value))
                    if "-" in node.value and id(node) not in defining:
                        passed.update(flags_passed(node.value.encode("utf-8", "surrogatepass")))
            elif kind is Attribute:
                if id(node) not in callees:
                    mentions.add(node.attr)
                if type(node.ctx) is ast.Store and not (type(node.value) is Name and node.value.id in ("self", "cls")):
                    stored.add(node.attr)  # ``args.exp_code = ...``: a namespace may hold it
                elif node.attr == "__dict__":
                    facts.sets_by_name = True
                if node.attr == "mps" or (node.attr == "accelerator" and type(node.value) is ast.Name and node.value.id == "torch"):
                    facts.mentions_mps = True
            elif kind is ast.Compare:
                read_key_test(node, reads)
            elif kind is ast.Dict:
                read_key_writes(node, writes)
            elif kind is Assign:
                read_key_writes(node, writes)
                _read_rebound(node, facts, plainly_rebound)
                if len(node.targets) == 1:
                    _read_copy(node.targets[0], node.value, facts)
                    context.read_assign(node.targets[0], node.value)
                read_node(node, calls, known)
            elif kind in _FUNCTIONS:
                _read_predicate(node, facts)
                context.read_function(node)
                read_node(node, calls, known)
            elif kind in _CONDITIONS:
                kernels.read_test(node)
                context.conditions.append(node)
            elif kind is ast.BoolOp:
                if type(node.op) is ast.And:
                    context.conjunctions.append(node)
            elif kind in _BINDINGS:
                read_node(node, calls, known)
    for path_name, root in named_saves:
        facts.cpu_saved_files.extend(bound_file_names(path_name, root))
    facts.availability_rebound = [name for name in facts.availability_rebound if name not in plainly_rebound]
    facts.off_rebound = [name for name in facts.off_rebound if name not in plainly_rebound and name not in facts.availability_rebound]
    coverage, receivers = context.coverage(), context.receivers()
    availability = availability_names(tree)
    by_value = None if {"import_module", "__import__"} & mentions else frozenset(modules)
    values = context.parameter_values(by_value) if by_value is not None else frozenset()
    if any(last_name(node.func) == "ArgumentParser" for node, _ in found):
        facts.failing = failing_statements(tree)
    for node, caller in found:
        if not caller and facts.failing:
            caller = after_failure(node.lineno, facts.failing)
        read_call(node, calls, known, caller, coverage.covers(node), receivers, availability, by_value, values)
    facts.stored_attributes = sorted(stored)
    facts.passed_flags = sorted(passed)
    facts.read_keys, facts.written_keys = sorted(reads - writes), sorted(writes)
    calls.definitions = definitions(tree)
    calls.mentions = sorted(mentions)
    calls.reexports = reexports(imported, mentions, calls)
    calls.workers = context.workers(tree)
    facts.kernels = kernels.facts()
    if not any(name.partition("@")[0] == "load" for name in calls.sites):
        facts.checkpoint_files.clear()
    _read_module_level(tree.body, facts)
    if any(imported_name(origin).partition(".")[0] in _MPS_CHOOSING_PACKAGES for origin in facts.imports.values()):
        facts.mentions_mps = True
    resolved = {local: imported_name(origin) for local, origin in facts.imports.items()}
    facts.classes = module_classes(tree, resolved)
    facts.factories = module_factories(tree, resolved)
    return facts


def _read_module_level(body: List[ast.stmt], facts: ModuleFacts) -> None:
    """Imports, star imports, ``__all__`` and device bindings of the module's own statements
    (and of the ``if``/``try`` blocks among them: ``try: from apex import amp``)."""
    kinds: Dict[str, set] = {}
    for statement in _module_statements(body):
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                local = alias.asname or alias.name.split(".")[0]
                facts.imports.setdefault(local, alias.name if alias.asname else local)
        elif isinstance(statement, ast.ImportFrom):
            module = "." * statement.level + (statement.module or "")
            for alias in statement.names:
                if alias.name == "*":
                    facts.star_imports.append(module)
                else:
                    facts.imports.setdefault(alias.asname or alias.name, f"{module}:{alias.name}")
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            if name == "__all__" and isinstance(statement.value, (ast.List, ast.Tuple)):
                listed = [literal_string(element) for element in statement.value.elts]
                facts.public = [entry for entry in listed if entry is not None]
            else:
                kinds.setdefault(name, set()).add(device_kind(statement.value))
    for statement in body:
        if isinstance(statement, ast.If) and statement.orelse and _tests_availability(statement.test):
            _read_device_branches(statement, kinds)
        elif isinstance(statement, (ast.If, ast.Try, ast.For, ast.While, ast.With)):
            for node in nodes_below(statement):  # bound there too: nothing proven about it
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    kinds.setdefault(node.id, set()).add(None)
    facts.devices = {name: found.pop() for name, found in kinds.items() if len(found) == 1 and None not in found}


def _module_statements(body: List[ast.stmt]):
    for statement in body:
        if isinstance(statement, (ast.If, ast.Try)):
            for block in (statement.body, *(handler.body for handler in getattr(statement, "handlers", ())), statement.orelse):
                yield from (inner for inner in block if isinstance(inner, (ast.Import, ast.ImportFrom)))
        else:
            yield statement


def _read_device_branches(statement: ast.If, kinds: Dict[str, set]) -> None:
    """``if torch.cuda.is_available(): device = "cuda"`` / ``else: device = "cpu"``: portable."""
    def assigned(block: List[ast.stmt]) -> Dict[str, Optional[str]]:
        return {
            inner.targets[0].id: device_kind(inner.value) for inner in block
            if isinstance(inner, ast.Assign) and len(inner.targets) == 1 and isinstance(inner.targets[0], ast.Name)
        }

    chosen, otherwise = assigned(statement.body), assigned(statement.orelse)
    for name in chosen.keys() | otherwise.keys():
        both = {chosen.get(name), otherwise.get(name)}
        kinds.setdefault(name, set()).add("portable" if both in ({"cuda", "cpu"}, {"cuda", "portable"}) else None)


def device_kind(value: ast.expr) -> Optional[str]:
    """``DEVICE_KINDS``'s word for a device expression (a string, ``torch.device(...)``, or a
    conditional on availability choosing between them), or None for anything else."""
    if isinstance(value, ast.Call) and last_name(value.func) == "device" and len(value.args) == 1 and not value.keywords:
        return device_kind(value.args[0])
    text = literal_string(value)
    if text is not None:
        kind = text.split(":", 1)[0]
        return kind if kind in ("cuda", "cpu", "mps") else None
    if isinstance(value, ast.IfExp) and _tests_availability(value.test):
        arms = {device_kind(value.body), device_kind(value.orelse)}
        return "portable" if arms & {"cpu", "portable"} and None not in arms else None
    return None


def _tests_availability(test: ast.expr) -> bool:
    """A condition that calls ``is_available()`` or ``device_count()`` (of any backend)."""
    return any(
        isinstance(node, ast.Call) and last_name(node.func) in AVAILABILITY_WORDS for node in nodes_below(test)
    )


def _read_call(call: ast.Call, facts: ModuleFacts, context: ContextReader, scope: ast.AST) -> Optional[str]:
    """What a call says besides its record: a save of ``.cpu()`` values, an option, a spawn.
    Returns the variable a save of ``.cpu()`` values writes to (``torch.save(pred.cpu(), fname)``),
    read once the walk has seen its binding. ``scope``: the function (or module) of the call."""
    name = last_name(call.func)
    if name == "save" and len(call.args) > 1:
        if (dotted_name(call.func) or "").partition(".")[0] in ("np", "numpy"):
            return None
        weights = parameters_moved_to_cpu(call, scope)
        facts.saves_weights_on_cpu = facts.saves_weights_on_cpu or weights
        facts.saves += 1
        if not (weights or moves_to_cpu(call.args[0]) or state_after_cpu(call, scope) or built_on_cpu(call, scope)):
            return None
        facts.cpu_saves += 1
        if type(call.args[1]) is ast.Name:
            return call.args[1].id
        facts.cpu_saved_files.extend(file_names(call.args[1]))
    elif name == "add_argument":
        read_option(call, facts.options, facts.unknown_options, facts.calls.backend_options)
    elif name == "spawn":
        context.read_spawn(call)
    return None


#: What ``saving_classes`` holds for a class that saves to a path it is given (``self.ckpt``).
GIVEN_PATH = "*"


def _torch_save(func: ast.expr) -> bool:
    """``torch.save`` or an imported ``save``; not ``np.save(path, array)``, whose path comes first."""
    return type(func) is ast.Name and func.id == "save" or (
        type(func) is ast.Attribute and func.attr == "save" and type(func.value) is ast.Name and func.value.id == "torch"
    )


def _read_class_save(class_name: str, path: ast.expr, method: ast.AST, facts: ModuleFacts, tree: ast.Module) -> None:
    """The file names a method's (or a top-level function's: darts ``utils.save_checkpoint``)
    ``torch.save`` writes, directly or through a name it binds, or through a module-level name
    it reads (ethanfetaya/NRI@e63fcb0 train.py:95,278 ``encoder_file``);
    ``GIVEN_PATH`` where the path is an attribute or an argument (thunlp/OpenNRE@d6a2c6c
    opennre/framework/sentence_re.py:94,138 saves to ``self.ckpt``)."""
    names = bound_file_names(path.id, method) if type(path) is ast.Name else file_names(path)
    if not names and type(path) is ast.Name and path.id not in parameter_names(method):
        outside = ast.Module(body=[s for s in tree.body if not isinstance(s, _DEFINITIONS)], type_ignores=[])
        names = bound_file_names(path.id, outside)
    if not names and (type(path) is ast.Name or (type(path) is ast.Attribute and type(path.value) is ast.Name)):
        names = [GIVEN_PATH]
    if names:
        saved = facts.saving_classes.setdefault(class_name, [])
        saved.extend(name for name in names if name not in saved)


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _holds_availability(value: ast.expr) -> bool:
    """A truth value that holds only where a backend is (``torch.cuda.is_available() and
    args.use_gpu``), not a device chosen by one (``torch.device("cuda" if ... else "cpu")``)."""
    return _tests_availability(value) and not any(
        (type(node) is ast.Constant and type(node.value) is str) or (type(node) is ast.Call and last_name(node.func) == "device")
        for node in nodes_below(value)
    )


def _read_rebound(assign: ast.Assign, facts: ModuleFacts, plainly: Set[str]) -> None:
    """The device attributes (and string keys: oxwhirl/pymarl@c971afd src/run.py:220-221
    ``config["use_cuda"] = False``) an assignment binds, and whether it binds them to an
    availability check."""
    available = None
    for target in assign.targets:
        if type(target) is ast.Name:
            continue  # most targets: a name holds no attribute
        for node in _stored(target):
            name = node.attr if type(node) is ast.Attribute else copied_option(node) if type(node) is ast.Subscript else None
            if name is not None and about_devices(name):
                if name not in facts.rebound:
                    facts.rebound.append(name)
                if available is None:
                    available = _holds_availability(assign.value)
                if available:
                    if name not in facts.availability_rebound:
                        facts.availability_rebound.append(name)
                elif _sets_off(assign.value, name):
                    if name not in facts.off_rebound:
                        facts.off_rebound.append(name)
                else:
                    plainly.add(name)


def _sets_off(value: ast.expr, name: str) -> bool:
    """``False``, ``0`` or ``None`` given to a flag that turns a device on (``use_gpu``, not ``no_cuda``)."""
    return type(value) is ast.Constant and value.value in (False, None) and guards.flag_name_sign(name) == guards.POSITIVE


def _stored(target: ast.expr) -> List[ast.expr]:
    """What an assignment target stores into: itself, or the elements of a tuple or list
    (``*rest`` too), as deep as they go (what ``ast.walk`` finds in the ``Store`` context)."""
    if type(target) in (ast.Tuple, ast.List):
        return [stored for element in target.elts for stored in _stored(element)]
    if type(target) is ast.Starred:
        return _stored(target.value)
    return [target]


def _read_copy(target: ast.expr, value: ast.expr, facts: ModuleFacts) -> None:
    """``self.use_gpu = opt.use_gpu``, ``cuda = args.cuda`` and ``self.use_cuda = self.config['cuda']``:
    the target copies the option."""
    copied = copied_option(value)
    name = last_name(target)
    if copied and name and copied != name:
        facts.copies.setdefault(name, copied)


def _read_predicate(function: ast.AST, facts: ModuleFacts) -> None:
    body = [statement for statement in function.body if not _is_docstring(statement)]
    if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
        test = option_test(body[0].value)
        if test is not None:
            facts.predicates.setdefault(function.name, test)


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and isinstance(statement.value.value, str)
