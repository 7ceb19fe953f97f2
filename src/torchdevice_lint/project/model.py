"""The project model: every module of a project read once (``facts.module_facts``), cached by
content hash, and combined into what the rules ask of the whole project.

A file's project is the nearest directory above it that marks one (``pyproject.toml``,
``setup.py``, ``setup.cfg``, ``requirements*.txt``, ``environment.yml``, ``.git``); in a bare
tree of scripts, the parent of its outermost package (``__init__.py`` folders). Where no file on
disk is known (a buffer on stdin), the model is empty and each file is judged alone.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from ..knowledge.project_facts import ProjectFacts
from .calls import AVAILABILITY_PASSED, OWN, CallFacts, default_calls, package_names
from .configs import CONFIG_SUFFIXES, MAX_CONFIG_BYTES, MAX_CONFIGS, TEXT_SUFFIXES, Launches, PassedOptions, config_defaults, config_key
from .context import cuda_context_spans
from .reached import MAX_TEXT_BYTES, MAX_TEXTS, TextWords, after_failure_spans, commented_calls, failing_scripts, package_like, unreached_spans
from .facts import ModuleFacts, module_facts
from .imports import ImportResolver
from .kernel_code import CudaOnlyCode
from .roots import builds_only_a_kernel, marks_a_project, project_files
from .prints import Looked, StoredPrints, looked_at, project_digest
from .shipped import candidate_paths, shipped_files
from .stored import MAX_FILE_BYTES, FactsCache, KeptTrees, parse_facts_of, parsed_as_checked, regular_file_bytes
from .stateless import parameterless_classes

#: A project with more Python files than this is not read: its files are judged alone.
MAX_FILES = 20_000


def project_root(path: str, named: Sequence[Path] = (), marks: Optional[Callable[[Path], bool]] = None) -> Optional[Path]:
    """The root of the project holding ``path`` (a file, or a buffer named as one), or None where
    its folder is not on disk (``-``, ``<stdin>``). Without a marker above it, the top of its
    package, or the folder named for the run that holds it (``check repo/`` on a checkout
    without ``.git``), whichever is higher. ``marks``: ``marks_a_project``, or a memo of it."""
    marks = marks or marks_a_project
    if path in ("-", "stdin") or path.startswith("<"):
        return None
    file = Path(os.path.abspath(path))
    if not file.parent.is_dir() or file.is_dir():
        return None
    kernel_build = None  # a kernel's build folder belongs to the project around it, if any
    for folder in file.parents:
        if folder == Path.home() or folder.parent == folder:
            break  # a home directory (dotfiles under git) or / is nobody's project
        if marks(folder):
            if kernel_build is None and builds_only_a_kernel(folder):
                kernel_build = folder
                continue
            return folder
    top = file.parent
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    holding = [folder for folder in named if folder in file.parents and folder in top.parents]
    found = min(holding, key=lambda folder: len(folder.parts)) if holding else top
    return found if kernel_build is None or found in kernel_build.parents else kernel_build


class Project:
    """One project's modules, their facts, and the option defaults they make together."""

    def __init__(
        self, root: Path, cache: Optional["FactsCache"] = None, trees: Optional["KeptTrees"] = None,
        prints: Optional[StoredPrints] = None,
    ) -> None:
        self.root = root
        self.cache = cache if cache is not None else FactsCache()
        self.trees = trees
        self.prints = prints
        self._modules: Optional[Dict[str, ModuleFacts]] = None
        self._configs: Optional[Dict[str, Mapping[str, object]]] = None
        self._resolver: Optional[ImportResolver] = None
        self._facts: Optional[ProjectFacts] = None
        #: Each module's facts with what its imports of the project's modules bring, by path.
        self._file_facts: Dict[str, ProjectFacts] = {}
        #: Options defined with different defaults: module -> the name and default of each it defines;
        #: and by module, those its importers define: name -> the defaults by their ``repr``.
        self._disagreeing: Optional[Dict[str, Dict[str, object]]] = None
        self._importers_defaults: Dict[str, Dict[str, Dict[str, object]]] = {}
        files, configs, docs = [], [], []
        self.texts: List[Path] = []  # besides its modules, configs and docs: ``reached.TextWords``
        self._text_words: Optional[TextWords] = None
        for file in project_files(root):
            if file.suffix in TEXT_SUFFIXES and not file.name.lower().startswith("readme"):  # README.txt: a doc
                self.texts.append(file)
                continue
            (files if file.suffix == ".py" else configs if file.suffix in CONFIG_SUFFIXES else docs).append(file)
            if len(files) > MAX_FILES:
                break
        #: Each module's content hash (None: not a regular file), and the bytes of those the
        #: facts cache does not know, read once: their facts are parsed from these very bytes.
        self.hashes: Dict[str, Optional[str]] = {}
        #: The same for the YAML configs (``configs.py``), none where there are too many.
        self.config_hashes: Dict[str, Optional[str]] = {}
        self._unread: Dict[str, bytes] = {}
        # a project too large to read whole has its files judged alone; too many configs or docs are data
        modules_read = len(files) <= MAX_FILES
        configs_read = modules_read and len(configs) <= MAX_CONFIGS
        docs_read = modules_read and len(docs) <= MAX_CONFIGS
        #: Where a distributed launcher may start the project's modules (``configs.Launches``).
        self.launches = Launches(
            Path(os.path.abspath(root)), {Path(os.path.abspath(file.parent)) for file in docs if file.name.lower().startswith("readme")},
            everywhere=not docs_read,
        )
        #: What the project's documents, scripts and configs pass its options (``configs.PassedOptions``).
        self.passed = PassedOptions()
        self._texts_passed = False
        #: By module, the names its comments call (``reached.commented_calls``).
        self._commented: Dict[str, Set[str]] = {}
        for file in files if modules_read else ():
            data = self._hash(file, self.hashes, lambda data: hashlib.sha256(data).hexdigest())
            self._commented[str(file)] = commented_calls(data) if data is not None else set()
        #: Whether code nothing runs can be told: every text read, no package (``_unreached``, once).
        self._reach_known = self._texts_complete = configs_read and docs_read
        for file in configs if configs_read else ():
            self.passed.read(file.name, self._hash(file, self.config_hashes, config_key, MAX_CONFIG_BYTES))  # larger ones are data
        #: The content hash of each file documenting how the project runs: they decide ``launches``.
        self.doc_hashes: Dict[str, Optional[str]] = {}
        for file in docs if docs_read else ():
            data = regular_file_bytes(file, MAX_CONFIG_BYTES)
            self.doc_hashes[str(file)] = hashlib.sha256(data).hexdigest() if data is not None else None
            self.launches.read(file, data, document=True)
            self.passed.read(file.name, data)
        self.digest = project_digest(str(root), {**self.hashes, **self.config_hashes, **self.doc_hashes})
        self._stored_prints = prints.prints_of(self.digest) if prints is not None else {}
        #: The checkpoint files the combined facts looked for (``shipped.candidate_paths``).
        self._looked: List[Looked] = []

    def _hash(self, file: Path, hashes: Dict[str, Optional[str]], key_of: Callable[[bytes], str], limit: int = MAX_FILE_BYTES) -> Optional[bytes]:
        """Hashes the file's bytes (None: not a regular file), which it returns."""
        data = regular_file_bytes(file, limit)
        key = hashes[str(file)] = key_of(data) if data is not None else None
        self.launches.read(file, data)
        if key is not None:
            self.cache.used.add(key)  # kept by a save even where stored fingerprints spare reading it
            if not self.cache.knows(key):
                self._unread[str(file)] = data
        return data

    @property
    def modules(self) -> Dict[str, ModuleFacts]:
        """Each module's facts by path, read (or parsed) when first asked for."""
        if self._modules is None:
            self._modules = {
                path: self.cache.facts_of(Path(path), key, self._unread.pop(path, None), self.trees) if key is not None else ModuleFacts()
                for path, key in self.hashes.items()
            }
        return self._modules

    @property
    def configs(self) -> Dict[str, Mapping[str, object]]:
        """Each YAML config's device settings by path, read (or parsed) when first asked for."""
        if self._configs is None:
            self._configs = {
                path: self.cache.facts_of(Path(path), key, self._unread.pop(path, None)).options
                for path, key in self.config_hashes.items() if key is not None
            }
        return self._configs

    @property
    def resolver(self) -> ImportResolver:
        if self._resolver is None:
            self._resolver = ImportResolver(self.root, self.modules)
        return self._resolver

    def fingerprint(self, path: str) -> str:
        """A digest of ``facts_for(path)``, from an earlier run where the project is as it was."""
        path = os.path.abspath(path)
        stored = self._stored_prints.get(path)
        if stored is not None:
            return stored
        found = self._fingerprint_of(path)
        if self.prints is not None:
            self.prints.keep(self.digest, path, found, self._looked)
        return found

    def update(self, path: str, text: str) -> Optional[ast.Module]:
        """An editor's buffer replaces the file's facts on disk. Returns the buffer's ``ast``
        when it was parsed as the first stage parses it (which may then reuse it), else None.
        Its facts are not kept in the cache by content: each keystroke is a new text, and the
        server's memory must stay flat."""
        tree = parsed_as_checked(text)
        data = text.encode("utf-8", "surrogatepass")
        facts = module_facts(tree) if tree is not None else parse_facts_of(data)
        self.modules[os.path.abspath(path)] = facts
        self.launches.read(Path(path), data)
        self._commented[os.path.abspath(path)] = commented_calls(data)
        self._facts = None
        self._file_facts = {}
        self._disagreeing = None
        self._resolver = ImportResolver(self.root, self.modules)
        self.prints, self._stored_prints = None, {}  # a buffer is no file's content: nothing to keep
        return tree

    @property
    def facts(self) -> ProjectFacts:
        if self._facts is None:
            named = [(path, facts.checkpoint_files) for path, facts in self.modules.items() if facts.checkpoint_files]
            candidates = candidate_paths(str(self.root), named)
            self._looked = looked_at(candidates)  # before the facts below read them
            modules = {path: facts.calls for path, facts in self.modules.items()}
            calls, escaped = default_calls(modules)
            combined = combined_facts(self.modules, self.resolver.find)
            configured = config_defaults(
                self.configs.values(), (name for facts in self.modules.values() for name in (*facts.options, *facts.unknown_options, *facts.rebound)),
            )
            self._facts = dataclasses.replace(
                combined, options={**configured, **combined.options},
                default_calls=calls, escaped=escaped, parameter_calls=parameter_calls(self.modules), context_spans=cuda_context_spans(modules), shipped_files=shipped_files(candidates),
                unreached_spans=self._unreached(), **self._quiet(combined.options),
                never_mps=bool(self.modules) and not any(facts.mentions_mps for facts in self.modules.values()),
                unlaunched=bool(self.modules) and not self.launches.scopes,
                parameterless_classes=parameterless_classes(
                    {path: facts.classes for path, facts in self.modules.items()},
                    {path: [name for name in facts.calls.definitions if name not in facts.classes] for path, facts in self.modules.items()},
                    {path: facts.factories for path, facts in self.modules.items() if facts.factories},
                ),
            )
        return self._facts

    def _unreached(self) -> Dict[str, tuple]:
        """``reached.unreached_spans``, where the project is no package and its texts are all
        read; and what follows a statement that fails on every machine, wherever the project is read."""
        if self._text_words is None:
            self._text_words = TextWords([*self.texts, *map(Path, self.doc_hashes), *map(Path, self.config_hashes)])
            self._reach_known = self._reach_known and len(self._text_words.texts) <= MAX_TEXTS and not package_like(self.root)
        failing = failing_scripts(self.modules)
        spans = unreached_spans(self.modules, self._text_words, set().union(*self._commented.values()), failing, self.resolver.find) if self._reach_known else {}
        for path, after in after_failure_spans(self.modules, failing).items():
            spans[path] = tuple(sorted({*spans.get(path, ()), *after}))
        return spans

    def _quiet(self, options: Mapping[str, object]) -> Dict[str, frozenset]:
        """``quiet_options`` (``PassedOptions.quiet``), where the project documents its runs and
        its texts are all read, and ``quiet_keys`` (``PassedOptions.quiet_keys``), where its
        configs and docs are too."""
        if not (self.launches.documented and len(self.texts) <= MAX_TEXTS):
            return {}
        if not self._texts_passed:
            self._texts_passed = True
            for text in self.texts:
                self.passed.read(text.name, regular_file_bytes(text, MAX_TEXT_BYTES))
        modules = self.modules.values()
        if any(module.sets_by_name for module in modules):  # ``vars(args).update(config)``: any option may be set
            return {}
        set_in_modules = set().union(*(module.stored_attributes for module in modules), *(module.passed_flags for module in modules))
        quiet = {"quiet_options": self.passed.quiet(options, set_in_modules)}
        if self._texts_complete:
            read = set().union(*(module.read_keys for module in modules))
            quiet["quiet_keys"] = self.passed.quiet_keys(read - set_in_modules.union(*(module.written_keys for module in modules)), options)
        return quiet

    def _fingerprint_of(self, path: str) -> str:
        """A digest of the facts as ``path`` reads them: the project's, with what its imports bring
        and the options it reads otherwise added (the whole facts, dumped for every file that
        imports from the project, made one changed file cost 0.7 s in 181 modules)."""
        facts, base = self.facts_for(path), self.facts
        own_options = {name: facts.options[name] for name in facts.options.keys() - base.options.keys()}
        if not (facts.imported or facts.imported_devices or own_options or facts.unlaunched != base.unlaunched):
            return base.fingerprint
        text = json.dumps([base.fingerprint, facts.imported, facts.imported_devices, own_options, facts.unlaunched], sort_keys=True, default=repr)
        return ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def facts_for(self, path: str) -> ProjectFacts:
        """The project's facts as the module at ``path`` reads them: with the torch names and
        devices its imports of the project's other modules bring (``imports.py``)."""
        path = os.path.abspath(path)
        if path not in self._file_facts:
            names, devices = self.resolver.brought(path)
            facts = self.facts
            if names or devices:
                facts = dataclasses.replace(facts, imported=names, imported_devices=devices)
            options = self._options_as_read(path, facts)
            if options:
                facts = dataclasses.replace(facts, options={**facts.options, **options})
            if bool(self.modules) and self.launches.unlaunched(path) != facts.unlaunched:  # another part is launched, or the file runs plainly
                facts = dataclasses.replace(facts, unlaunched=not facts.unlaunched)
            self._file_facts[path] = facts
        return self._file_facts[path]

    def _options_as_read(self, path: str, facts: ProjectFacts) -> Dict[str, object]:
        """Options whose scripts give them different defaults, as the module at ``path`` reads
        them: the default of the scripts that import it, where they agree (kaituoxu/Conv-TasNet@0d9d9dc
        src/solver.py:21,174 reads ``--use_cuda``, 1 in train.py, its only importer, and 0 in
        two other scripts). A module that defines the option reads its own."""
        if self._disagreeing is None:
            defined: Dict[str, Dict[str, object]] = {}
            for module, their_facts in self.modules.items():
                for name, default in their_facts.options.items():
                    defined.setdefault(name, {})[module] = default
            self._disagreeing = {}
            for name, by_module in defined.items():
                if (
                    name not in facts.options and len(set(map(repr, by_module.values()))) > 1
                    and not any(name in their_facts.unknown_options for their_facts in self.modules.values())
                ):
                    for module, default in by_module.items():
                        self._disagreeing.setdefault(module, {})[name] = default
            # only the few modules that define such options are resolved: not all the project's imports
            self._importers_defaults = {}
            for module, defaults in self._disagreeing.items():
                for target in self.resolver.imported(module):
                    for name, default in defaults.items():
                        self._importers_defaults.setdefault(target, {}).setdefault(name, {})[repr(default)] = default
        found = dict(self._disagreeing.get(path, {}))
        for name, defaults in self._importers_defaults.get(path, {}).items():
            if name not in found and len(defaults) == 1:
                found[name] = next(iter(defaults.values()))
        return found



def combined_facts(modules: Mapping[str, ModuleFacts], find: Optional[Callable[[str, str], Optional[str]]] = None) -> ProjectFacts:
    """Every option with one default (options defined with defaults that disagree have none),
    every copy and predicate of an option, every file saved from ``.cpu()`` values, the code
    that only drives a CUDA-only kernel, and the arguments of the functions every call of which
    passes a device-flag attribute, from all the modules (by path)."""
    options: Dict[str, object] = {}
    unknown = set()
    copies: Dict[str, str] = {}
    predicates: Dict[str, list] = {}
    saved = set()
    saving: Dict[str, set] = {}
    arguments: Dict[str, list] = {}
    rebound, available = set(), set()
    plain: set = set()  # device attributes some module binds other than to an availability check or off
    # only callees some call of which passes an attribute can take an option's default
    flagged = {key.partition("@")[0] for facts in modules.values() for key, records in facts.calls.sites.items()
               if any(record.passed is not None for record in records)}
    for facts in modules.values():
        rebound.update(facts.rebound)
        available.update(facts.availability_rebound)
        plain.update(name for name in facts.rebound if name not in facts.availability_rebound and name not in facts.off_rebound)
        for key, records in facts.calls.sites.items():
            name = key.partition("@")[0]
            if name in flagged:
                arguments.setdefault(name, []).extend(_passed_in_caller(record, facts) for record in records)
        saved.update(facts.cpu_saved_files)
        for name, files in facts.saving_classes.items():
            saving.setdefault(name, set()).update(files)
        unknown.update(facts.unknown_options)
        for name, default in facts.options.items():
            if name in options and options[name] != default:
                unknown.add(name)
            options.setdefault(name, default)
        for name, copied in facts.copies.items():
            copies.setdefault(name, copied)
        for name, test in facts.predicates.items():
            predicates.setdefault(name, test)
    known = {name: value for name, value in options.items() if name not in unknown}
    cuda_only = CudaOnlyCode({path: facts.kernels for path, facts in modules.items()}, find)
    return ProjectFacts(
        known, copies, predicates, frozenset(saved), cuda_only.spans, cuda_only.builds, arguments=arguments,
        rebound_options=frozenset(rebound & known.keys()), availability_options=frozenset(available - plain),
        saving_classes={name: frozenset(files) for name, files in saving.items()},
        weights_saved_on_cpu=any(facts.saves_weights_on_cpu for facts in modules.values()),
        every_save_on_cpu=0 < sum(facts.saves for facts in modules.values()) == sum(facts.cpu_saves for facts in modules.values()),
    )


def _passed_in_caller(record: CallFacts, caller: ModuleFacts) -> list:
    """``[positional, keywords, receivers, written]`` of the flag attributes a call passes, each
    option as the calling module defines it (``_in_caller``; positional and keywords None where
    the call passes no flag attribute), with the arguments it writes: ``[positional count or -1,
    keywords, ** unpacked]`` (a call a function cannot accept is not its call)."""
    written = [record.positional, list(record.keywords), record.unpacked]
    if record.passed is None:
        return [None, None, list(record.receivers), written]
    positional, keywords = record.passed
    return [
        [_in_caller(argument, caller) for argument in positional], {k: _in_caller(v, caller) for k, v in keywords},
        list(record.receivers), written,
    ]


def parameter_calls(modules: Mapping[str, ModuleFacts]) -> Dict[str, tuple]:
    """For each function, method and class the project defines (``name@module stem``, a method
    by its own name, a class for its ``__init__``): its calls as ``[positional count or -1,
    keywords, ** unpacked, flag attributes passed (``_passed_in_caller``)]``, where a call may
    reach it (origin unknown, its module's name, or its own module's call). Left out: names
    nobody calls, and those used as a value or decorated (called unseen)."""
    stems = {path: os.path.splitext(os.path.basename(path))[0] for path in modules}
    defined = {}  # last name -> stems of the modules defining it
    unseen = set()
    for path, facts in modules.items():
        for qualified, (_first, _last, decorated, *_) in facts.calls.definitions.items():
            name = qualified.rsplit(".", 1)[-1]
            defined.setdefault(name, set()).add(stems[path])
            if decorated:
                unseen.add(f"{name}@{stems[path]}")
    # a package's ``__init__`` may re-export a definition: a call through it may reach any
    packages = package_names(stems)
    found: Dict[str, list] = {}
    for path, facts in modules.items():
        for key in facts.calls.escaped:
            unseen.update(_reached(key, stems[path], defined, packages))
        for key, records in facts.calls.sites.items():
            targets = _reached(key, stems[path], defined, packages)  # each call read once, however many namesakes
            calls = [[r.positional, list(r.keywords), r.unpacked, _passed_in_caller(r, facts)] for r in records] if targets else []
            for target in targets:
                found.setdefault(target, []).extend(calls)
    return {key: tuple(calls) for key, calls in sorted(found.items()) if key not in unseen}


def _reached(key: str, here: str, defined: Mapping[str, set], packages: set) -> list:
    """The definitions (``name@stem``) a call or use keyed ``key`` in the module ``here`` may
    reach: all of that name where its origin is unknown or a package of the project."""
    name, _, origin = key.partition("@")
    if name not in defined:
        return []  # most calls: of names the project does not define
    stems = sorted(defined[name])
    if origin == OWN:
        stems = [here] if here in stems else []
    elif origin and origin not in packages:
        stems = [origin] if origin in stems else []
    return [f"{name}@{stem}" for stem in stems]


def _in_caller(argument, caller: ModuleFacts):
    """A passed option as the calling module defines it: ``["=", default]`` where that module
    parses it itself (``train.py``'s ``--cuda``, whatever a demo script's says), else its name."""
    if argument == AVAILABILITY_PASSED or argument in caller.availability_rebound:
        return ["=", False]  # what the flag holds where CUDA is missing
    if argument is not None and argument in caller.options:
        return ["=", caller.options[argument]]
    return argument


class Projects:
    """The projects of a run, each read once, by root."""

    def __init__(
        self, cache: Optional[FactsCache] = None, checked: Iterable[str] = (), named: Iterable[str] = (),
        prints: Optional[StoredPrints] = None,
    ) -> None:
        """``checked``: the files the run checks, whose trees are kept for the first stage;
        ``named``: the paths the user named for the run, whose folders bound projects (``project_root``);
        ``prints``: fingerprints of earlier runs (none: each project's facts are combined when asked)."""
        self.named = tuple(Path(os.path.abspath(folder)) for folder in named if os.path.isdir(folder))
        self.cache = cache if cache is not None else FactsCache()
        self.prints = prints
        self.trees = KeptTrees(checked)
        self._by_root: Dict[Path, Project] = {}
        self._roots: Dict[str, Optional[Path]] = {}
        self._marked: Dict[Path, bool] = {}

    def of(self, path: str) -> Optional[Project]:
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self._roots:
            self._roots[folder] = project_root(path, self.named, self._marks_a_project)
        root = self._roots[folder]
        if root is None:
            return None
        if root not in self._by_root:
            self._by_root[root] = Project(root, self.cache, self.trees, self.prints)
        return self._by_root[root]

    def _marks_a_project(self, folder: Path) -> bool:
        """``marks_a_project``, asked once per folder in a run: the folders of a tree share ancestors."""
        if folder not in self._marked:
            self._marked[folder] = marks_a_project(folder)
        return self._marked[folder]

    def facts_for(self, path: str) -> ProjectFacts:
        project = self.of(path)
        return project.facts_for(path) if project is not None else ProjectFacts()

    def fingerprint(self, path: str) -> str:
        """A digest of ``facts_for(path)`` for cache keys, read back where the project is as an earlier run saw it."""
        project = self.of(path)
        return project.fingerprint(path) if project is not None else ""

    def read(self, path: str) -> None:
        """Reads the module and config facts of the project of ``path`` now (before worker processes fork)."""
        project = self.of(path)
        if project is not None:
            project.modules, project.configs

    def take_tree(self, path: str, text: str) -> Optional[ast.Module]:
        """The CPython tree the model parsed of ``path`` from ``text``, if it kept one."""
        return self.trees.take(path, text)
