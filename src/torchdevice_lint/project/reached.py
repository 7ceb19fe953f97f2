"""Code nothing runs: definitions of the project no reachable code calls or names.

A line is a hazard when it raises on a machine without CUDA as the program runs; a function
nothing calls never runs (hszhao/PointWeb@f31fe05 util/pt_util.py:389 ``load_checkpoint``,
facebookresearch/SlowFast@287ec00 slowfast/utils/bn_helper.py:12), nor does a method only such
code calls (LTH14/mar@fe470ac diffusion/gaussian_diffusion.py:624 ``ddim_sample_loop``, then
``ddim_sample_loop_progressive``). Module-level code runs (a script, or a module's import), and
so does every definition a call from running code may reach, to a fixed point. Conservative:
a definition named anywhere other than by a call (a callback, a registry, a string, a re-export,
a word of the project's docs, configs or notebooks), a decorated one (but a command line's
command, which runs only where named: Sacred's ``@ex.command``), a dunder, and the methods
of a class with bases (a framework may call them: ``forward``, ``training_step``) all run.
A project that is a package others install keeps its definitions: its users call them.
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..knowledge.script_options import AFTER_FAILURE
from .calls import COMMAND, ENUMERATING, FUNCTION, MODULE_CLASS, PLAIN_CLASS, ModuleCalls, package_names
from .facts import ModuleFacts
from .stored import WORD, regular_file_bytes

Span = Tuple[int, int]
#: A definition of the project: (module path, ``f`` / ``Class`` / ``Class.method``).
Definition = Tuple[str, str]


def unreached_spans(
    facts: Mapping[str, ModuleFacts], words_in_texts: Callable[[Set[str]], Set[str]], commented: Iterable[str],
    failing: Mapping[str, int], find: Optional[Callable[[str, str], Optional[str]]] = None,
) -> Dict[str, Tuple[Span, ...]]:
    """By module path: the bodies of the functions and methods nothing reachable runs (a
    definition's header runs at import: its defaults, its decorators), in the modules that are
    part of a running program: imported by another (``imported``: the module names the
    project's imports name), or scripts that call the project's definitions. A module of
    definitions nothing imports is someone else's to call (a file being written, an API).
    ``words_in_texts``: those of the given names the project's other texts hold; ``commented``:
    the names the modules' comments call (``commented_calls``), which stay called; ``failing``:
    ``failing_scripts``, whose module-level calls below their failing statement run nothing;
    ``find``: the module an import names (``ImportResolver.find``), where calls may be told apart
    from namesakes in other folders."""
    modules = {path: module.calls for path, module in facts.items()}
    imported = {
        part for module in facts.values() for origin in (*module.imports.values(), *module.star_imports)
        for part in origin.replace(":", ".").split(".")[-2:]
    }
    stems = {path: os.path.splitext(os.path.basename(path))[0] for path in modules}
    mentioned = _taken_reexports(facts, stems)
    for calls in modules.values():
        mentioned.update(calls.mentions)  # a name used as a value (``calls.escaped``) among them
    defined = {name.rpartition(".")[2] for calls in modules.values() for name in calls.definitions}
    scripts = {path for path, calls in modules.items() if _runs_definitions(calls, defined) or _has_commands(calls)}
    running = scripts | {path for path in modules if stems[path] in imported}
    candidates = {definition for definition in _candidates(modules, mentioned) if definition[0] in running}
    if not candidates:
        return {}
    # a definition that a README, a config or a notebook names is the users' to call; a module
    # of definitions it names is not (xi-jia/LKU-Net@30c5555 Readme.md:53 "class `LK_encoder` in
    # Models.py": a file to edit), and a script is run whether named or not
    in_texts = words_in_texts({name.rpartition(".")[2] for _, name in candidates})
    candidates = {
        (path, name) for path, name in candidates
        if name.rpartition(".")[2] not in in_texts and name.rpartition(".")[2] not in commented
    }
    reached = _reached(modules, stems, candidates, failing, _Origins(facts, find) if find is not None else None)
    spans: Dict[str, List[Span]] = {}
    for path, name in candidates - reached:
        definitions = modules[path].definitions
        if definitions[name][4] == FUNCTION:
            spans.setdefault(path, []).append((definitions[name][3], definitions[name][1]))
        else:  # a class's own statements run at import: its methods' bodies do not
            prefix = name + "."
            spans.setdefault(path, []).extend((body, last) for method, (_, last, _, body, _) in definitions.items() if method.startswith(prefix))
    return {path: tuple(sorted(set(found))) for path, found in spans.items()}


def _taken_reexports(facts: Mapping[str, ModuleFacts], stems: Mapping[str, str]) -> Set[str]:
    """The re-exports some module takes from the module that re-exports them (``from pkg import
    f``, ``pkg.f()``, a call of ``f`` from an unknown origin, as a star import's names are called),
    or from a module that star-imports it: those may run unseen. One nobody takes names nothing
    (ankanbhunia/Handwriting-Transformers@fbc66bf models/model.py:15 imports ``prepare_z_y``
    and never calls it, nor does anything import it from there)."""
    taken: Set[Tuple[str, str]] = set()  # (the module's last name, '' where unknown; the name)
    star_importers: Dict[str, Set[str]] = {}  # a star-imported module's last name -> its importers'
    for path, module in facts.items():
        for imported in module.imports.values():
            source, colon, name = imported.partition(":")
            if colon:
                taken.add((source.rpartition(".")[2], name))
        for key in (*module.calls.sites, *module.calls.escaped):
            name, _, origin = key.partition("@")
            taken.add((origin, name))
        for source in module.star_imports:
            star_importers.setdefault(source.rpartition(".")[2], set()).update(_names_of(path, stems))
    found: Set[str] = set()
    for path, module in facts.items():
        names = {"", *_names_of(path, stems)}
        names.update(*(star_importers.get(name, ()) for name in list(names)))
        found.update(name for name in module.calls.reexports if any((source, name) in taken for source in names))
    return found


def _names_of(path: str, stems: Mapping[str, str]) -> Set[str]:
    """The names an import may give the module at ``path``: its own, and its package's for an ``__init__``."""
    return {stems[path], os.path.basename(os.path.dirname(path))} if stems[path] == "__init__" else {stems[path]}


#: The methods ``nn.Module`` calls on a subclass by name (``__call__``, ``repr``, ``state_dict``,
#: ``load_state_dict``, ``.to()``, ``DataParallel``).
MODULE_HOOKS = frozenset({
    "forward", "extra_repr", "_load_from_state_dict", "_save_to_state_dict", "_apply", "_replicate_for_data_parallel",
    "_get_name", "_named_members", "reset_parameters",
})


def after_failure_spans(facts: Mapping[str, ModuleFacts], failing: Mapping[str, int]) -> Dict[str, Tuple[Span, ...]]:
    """By script: the lines that would run after its first statement that fails on every
    machine (``failing``: ``failing_scripts``), to the end of the module or of its ``__main__`` block."""
    spans = {}
    for path, index in failing.items():
        _, last, end, _ = facts[path].failing[index]
        spans[path] = ((last + 1, end),)
    return spans


def failing_scripts(facts: Mapping[str, ModuleFacts]) -> Dict[str, int]:
    """By script: the index of its first statement that reads an option no module of the
    project sets (``knowledge/script_options.py``), where no module sets attributes by a
    computed name."""
    if any(module.sets_by_name for module in facts.values()):
        return {}
    stored = set().union(*(module.stored_attributes for module in facts.values()))
    found = {}
    for path, module in facts.items():
        index = next((index for index, (*_, options) in enumerate(module.failing) if not stored.issuperset(options)), None)
        if index is not None:
            found[path] = index
    return found


def _candidates(modules: Mapping[str, ModuleCalls], mentioned: Set[str]) -> Set[Definition]:
    """The functions, classes and methods of classes without bases that may be unreached: not
    decorated, not named other than by a call, not a dunder, not in a module of tests (a test
    runner calls them). Classes with bases are not where a module lists a namespace's names (a
    registry may find them by what they are: ``ENUMERATING``; a class without bases it would not
    tell from any other: botaoye/OSTrack@33b5e12 lib/test/tracker/data_utils.py:20), and a class's methods are not where it
    has bases other than ``nn.Module`` (its framework may call them: ``training_step``), nor
    the hooks ``nn.Module`` calls (``forward``)."""
    enumerating = not ENUMERATING.isdisjoint(mentioned)
    found: Set[Definition] = set()
    for path, calls in modules.items():
        tests = collected_by_runner(path)
        definitions = calls.definitions
        for name, (_first, _last, decorated, _body, kind) in definitions.items():
            owner, dot, own = name.rpartition(".")
            if (decorated and decorated != COMMAND) or own in mentioned or (own.startswith("__") and own.endswith("__")):
                continue
            if tests and name.partition(".")[0].lower().startswith(_RUNNER_CALLED):
                continue  # a test runner calls it
            if kind not in (FUNCTION, PLAIN_CLASS) and enumerating:
                continue  # what a namespace's listing looks for is a subclass of some base
            if dot and (owner not in definitions or definitions[owner][2] or not (
                definitions[owner][4] == PLAIN_CLASS or (definitions[owner][4] == MODULE_CLASS and own not in MODULE_HOOKS)
            )):
                continue  # a method its class's framework may call, or of a decorated class
            found.add((path, name))
    return found


def _runs_definitions(calls: ModuleCalls, defined: Set[str]) -> bool:
    """Whether the module's own statements call a definition of the project (a script)."""
    return any(
        key.partition("@")[0] in defined and any(not record.caller for record in records) for key, records in calls.sites.items()
    )


def _has_commands(calls: ModuleCalls) -> bool:
    """Whether the module registers a command line's commands (a Sacred experiment's file: the
    command line runs it)."""
    return any(definition[2] == COMMAND for definition in calls.definitions.values())


#: What a test runner calls in a module of tests, by the start of its name: ``test_*`` functions,
#: ``Test*`` classes, set-up and tear-down, pytest's hooks (``pytest_configure``).
_RUNNER_CALLED = ("test", "setup", "teardown", "set_up", "tear_down", "pytest_")


def collected_by_runner(path: str) -> bool:
    """A module pytest collects (``test_*.py``, ``*_test.py``) or its ``conftest.py``: its tests
    are the runner's to call, its other definitions (``gpu_test()`` in Shen-Lab/GraphCL@b4d7501
    adversarialRobustness_Component/code/common/test.py:36) the tests'. A script named
    ``test.py`` is an evaluation pytest leaves alone (weijun88/F3Net@eecace3 src/test.py: its
    ``Test`` class is the script's, not a runner's); unittest runs only its ``TestCase``
    classes, whose methods are kept as those of any class with bases."""
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def _reached(
    modules: Mapping[str, ModuleCalls], stems: Mapping[str, str], candidates: Set[Definition], failing: Mapping[str, int],
    origins: Optional["_Origins"] = None,
) -> Set[Definition]:
    """The candidates a call from running code may reach, to a fixed point: a call reaches
    every candidate of its name in a module its origin allows (``name@stem``, as the project's
    calls are keyed), and running code is module-level code (but what follows a statement
    that fails everywhere: ``failing``) or a reached definition."""
    packages = package_names(dict(stems))
    by_key: Dict[str, List[Definition]] = {}
    for path, name in candidates:
        own = name.rpartition(".")[2]
        by_key.setdefault(own, []).append((path, name))
    # (calling module, caller) -> the candidates its calls may reach
    calls_of: Dict[Tuple[str, str], Set[Definition]] = {}
    for path, calls in modules.items():
        for key, records in calls.sites.items():
            name, _, origin = key.partition("@")
            targets = [
                target for target in by_key.get(name, ())
                if not origin or origin in packages or (origin == "." and target[0] == path)
                or (origin != "." and origin in (stems[target[0]], os.path.basename(os.path.dirname(target[0]))))
            ]
            functions = [target for target in targets if "." not in target[1]]  # a method may be any class's
            if origins is not None and functions:
                targets = origins.narrowed(path, origin, name, functions) + [target for target in targets if "." in target[1]]
            if targets:
                methods = [target for target in targets if "." in target[1]]
                for record in records:  # a method of a value reaches no top-level definition
                    calls_of.setdefault((path, record.caller), set()).update(methods if record.on_value else targets)
    # a definition -> the callers that run once it does: itself, and for a class its methods
    within: Dict[Definition, List[Tuple[str, str]]] = {}
    for caller in calls_of:
        path, name = caller
        for part in {name, name.partition(".")[0]}:
            within.setdefault((path, part), []).append(caller)
    reached: Set[Definition] = set()
    running = [caller for caller in calls_of if _runs(caller, candidates, reached, failing)]
    seen = set(running)
    while running:
        for target in calls_of.get(running.pop(), ()):
            if target in reached:
                continue
            reached.add(target)
            for caller in within.get(target, ()):
                if caller not in seen and _runs(caller, candidates, reached, failing):
                    seen.add(caller)
                    running.append(caller)
    return reached


class _Origins:
    """Where a call's name comes from, as Python finds the module an import names: a project of
    several experiments, each folder with its own ``Models.py`` (xi-jia/LKU-Net@30c5555
    LKU-Net_3D_IXI/train.py ``from Models import *`` then ``DiffeomorphicTransform(...)``), calls
    its own folder's definitions, not its namesakes elsewhere."""

    def __init__(self, facts: Mapping[str, ModuleFacts], find: Callable[[str, str], Optional[str]]) -> None:
        self.facts = facts
        self.find = find
        self._stars: Dict[str, Set[str]] = {}

    def narrowed(self, path: str, origin: str, name: str, targets: List[Definition]) -> List[Definition]:
        """Those of ``targets`` (definitions named ``name`` that a call keyed by ``origin`` from
        ``path`` may reach) in the modules its imports bring ``name`` from, where one of those
        defines it; all of them where the imports cannot tell."""
        if origin == ".":
            return targets
        found = self.find(path, origin) if origin else None
        sources = ({found} if found in self.facts else set()) if origin else self._star_sources(path, 4)
        defining = {source for source in sources if name in self.facts[source].calls.definitions}
        return [target for target in targets if target[0] in defining] if defining else targets

    def _star_sources(self, path: str, depth: int) -> Set[str]:
        """The modules a module's star imports bring names from, theirs too, and itself."""
        if path not in self._stars:
            self._stars[path] = {path}  # a cycle stops here
            found = {path}
            for module in self.facts[path].star_imports if depth else ():
                source = self.find(path, module)
                if source is not None and source in self.facts:
                    found |= self._star_sources(source, depth - 1)
            self._stars[path] = found
        return self._stars[path]


def _runs(caller: Tuple[str, str], candidates: Set[Definition], reached: Set[Definition], failing: Mapping[str, int]) -> bool:
    """Whether code of ``caller`` (module level, a definition, ``Class.method``) runs."""
    path, name = caller
    if not name:
        return True
    if name.startswith(AFTER_FAILURE):
        return path not in failing or int(name[len(AFTER_FAILURE):]) < failing[path]
    for part in (name, name.partition(".")[0]):
        if (path, part) in candidates and (path, part) not in reached:
            return False
    return True


#: A project with more texts than this keeps all its definitions (they are not all read).
MAX_TEXTS = 2000
#: Texts larger than this are data: not read.
MAX_TEXT_BYTES = 1 << 20
#: A comment, and a name called in one.
_COMMENT = re.compile(rb"#[^\n]*")
_CALLED_NAME = re.compile(rb"([A-Za-z_]\w*)\(")


def commented_calls(data: bytes) -> Set[str]:
    """The names called by a module's comments that are a call and nothing else (``# save_depth()``,
    ``# t.show()``): a step its author runs by taking the ``#`` away (xy-guo/MVSNet_pytorch@e0f2ae3
    eval.py:302 ``# save_depth()``, "step1" of the README's evaluation) is judged as called. A
    commented-out assignment is code taken out (xi-jia/LKU-Net@30c5555 LKU-Net_2D_OASIS/train.py:119
    ``# diff_transform = DiffeomorphicTransform(time_step=7).cuda()``), and prose is no call."""
    found: Set[str] = set()
    for comment in _COMMENT.findall(data):
        if b"(" in comment:
            try:
                expression = ast.parse(comment[1:].strip().decode("utf-8", "replace"), mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            if type(expression) is ast.Call:
                found.update(name.decode("ascii") for name in _CALLED_NAME.findall(comment))
    return found


class TextWords:
    """Which names the project's texts hold as a word, each text read once, each name asked
    once (an editor asks again at every change of a module)."""

    def __init__(self, texts: Iterable[Path]) -> None:
        self.texts = list(texts)
        self._known: Dict[str, bool] = {}

    def __call__(self, names: Set[str]) -> Set[str]:
        unknown = names - self._known.keys()
        if unknown:
            wanted = {name.encode() for name in unknown}
            found: Set[bytes] = set()
            for text in self.texts:
                data = regular_file_bytes(text, MAX_TEXT_BYTES)
                if data is not None:
                    found.update(wanted.intersection(WORD.findall(data)))
                    if found == wanted:
                        break
            self._known.update((name, name.encode() in found) for name in unknown)
        return {name for name in names if self._known[name]}


def package_like(root: Path) -> bool:
    """Whether the project at ``root`` is a package others install and call: ``pyproject.toml``
    declaring a project, ``setup.cfg`` its metadata, or a ``setup.py`` that packages modules."""
    for name, marks in _PACKAGE_MARKS:
        data = regular_file_bytes(root / name, MAX_TEXT_BYTES)
        if data is not None and any(mark in data for mark in marks):
            return True
    return False


#: What a root file declaring an installable package holds.
_PACKAGE_MARKS = (
    ("pyproject.toml", (b"[project]", b"[tool.poetry]", b"[tool.flit")),
    ("setup.cfg", (b"[metadata]",)),
    ("setup.py", (b"packages=", b"packages =", b"py_modules")),
)
