"""Device settings a project keeps outside its modules: YAML configs, and how it is launched.

daa233/generative-inpainting-pytorch@c6cdaea configs/config.yaml:21 sets ``cuda: True``, and
train.py:29, trainer.py:18 and test_single.py:31 read it (``config['cuda']``): like an option
whose default is on, it picks the GPU on a machine without one. Each config file's device-named
keys (``cuda``, ``use_gpu``, ``gpu_ids``, ``device``), at any depth, with plain values, are its
facts; a key the project's config files give different values, a command-line option of the
same name, and a name some module assigns stay unknown.

thunlp/ERNIE@514cbe4 code/run_tacred.py:369,400 takes ``--local_rank`` (default -1) and sets up
NCCL only where it is not -1, but its README runs every script as plain ``python3``: only a
distributed launcher (``torch.distributed.launch``, ``deepspeed``...) passes ``--local_rank``, and
where no README, shell script or module of the project names one, the option keeps its default.

WongKinYiu/yolov7@a207844 README.md runs ``train.py`` both ways, ``python train.py --device 0``
for one GPU and ``python -m torch.distributed.launch ... train.py`` for several: a script a
document also runs plainly keeps the default on the plain run, the one a machine without a GPU
makes, so its ``if opt.local_rank != -1:`` branch (train.py:596) is off there too.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Set

from ..knowledge.option_values import LAUNCHER_OPTIONS, about_devices
from ..syntax.ast_nodes import last_name, literal_string

#: What a config file is named.
CONFIG_SUFFIXES = (".yaml", ".yml")
#: What a file that documents how the project runs is named, besides a ``README`` of any suffix:
#: docs, shell and batch scripts.
DOC_SUFFIXES = (".md", ".rst", ".sh", ".bash", ".slurm", ".sbatch")
#: Texts besides modules, configs and docs that may name a definition (a notebook's cell, a JSON
#: config's class name, a command in a text file: ``reached.TextWords``).
TEXT_SUFFIXES = (".ipynb", ".json", ".cfg", ".ini", ".toml", ".txt")
#: Commands that start workers under a distributed launcher, which passes each its ``--local_rank``.
_LAUNCHERS = (b"torch.distributed.launch", b"torch.distributed.run", b"torchrun", b"deepspeed", b"horovodrun", b"mpirun")
#: The same where a word alone is not enough (read only where the first word is there: a regular
#: expression over every module costs 14 times these searches).
_LAUNCHER_COMMANDS = re.compile(rb"accelerate\s+launch|--local[_-]rank[= ]\d")
#: A plain run of a script, ``python3 -u tools/train.py``: the script's path, as written.
_PLAIN_RUN = re.compile(rb"\bpython[\d.]*(?:[ \t]+-[\w-]+)*[ \t]+([\w./-]+\.py)\b")
#: Larger files are data, not settings: not read.
MAX_CONFIG_BYTES = 256 * 1024
#: A project with more config files than this reads none (a dataset of YAML annotations).
MAX_CONFIGS = 500
#: How deep into nested mappings keys are read (``model: {use_cuda: true}``).
_DEPTH = 4
#: Values a setting may have: YAML's scalars, and lists of them (``gpu_ids: [0, 1]``).
_SCALARS = (bool, int, float, str, type(None))
#: Set for a key one file gives two different values.
_CONFLICTING = object()


def config_key(data: bytes) -> str:
    """The facts cache's key of a config file: not a module's key, even for the same bytes."""
    return "yaml:" + hashlib.sha256(data).hexdigest()


def config_options(data: bytes) -> Dict[str, object]:
    """The device-named settings of one YAML file (empty where it does not parse as YAML)."""
    if len(data) > MAX_CONFIG_BYTES:
        return {}
    import yaml

    try:
        document = yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, ValueError, RecursionError):
        return {}
    found: Dict[str, object] = {}
    _read(document, found, _DEPTH)
    return {key: value for key, value in found.items() if value is not _CONFLICTING}


def _read(node: object, found: Dict[str, object], depth: int) -> None:
    if not isinstance(node, dict) or depth == 0:
        return
    for key, value in node.items():
        if isinstance(key, str) and about_devices(key) and _plain(value):
            _agree(found, key, value)
        _read(value, found, depth - 1)


def _agree(found: Dict[str, object], key: str, value: object) -> None:
    """``key`` keeps ``value`` while every value given it is equal, else it conflicts."""
    found[key] = value if found.get(key, value) == value else _CONFLICTING


def _plain(value: object) -> bool:
    return isinstance(value, _SCALARS) or isinstance(value, list) and all(isinstance(item, _SCALARS) for item in value)


def config_defaults(configs: Iterable[Mapping[str, object]], defined: Iterable[str]) -> Dict[str, object]:
    """The settings every config file that has them agrees on, less the names in ``defined``
    (options a module parses, attributes a module assigns)."""
    agreed: Dict[str, object] = {}
    for options in configs:
        for key, value in options.items():
            _agree(agreed, key, value)
    taken = set(defined)
    return {key: value for key, value in agreed.items() if value is not _CONFLICTING and key not in taken}


def names_launcher(data: bytes) -> bool:
    """Whether a file's bytes name a distributed launcher (a README's command, a shell script,
    a module that builds the command or explains it in a docstring)."""
    lowered = data.lower()
    if any(word in lowered for word in _LAUNCHERS):
        return True
    return (b"accelerate" in lowered or b"--local" in lowered) and _LAUNCHER_COMMANDS.search(lowered) is not None


def plain_runs(data: bytes) -> Set[str]:
    """The scripts a file runs as plain ``python``, without a launcher on the same command."""
    found: Set[str] = set()
    if b"python" not in data:  # most modules: a search for the word costs a tenth of the expression
        return found
    for match in _PLAIN_RUN.finditer(data):
        start = data.rfind(b"\n", 0, match.start()) + 1
        while start > 1 and data[start - 2:start] == b"\\\n":  # a continued command: its first line
            start = data.rfind(b"\n", 0, start - 2) + 1
        end = data.find(b"\n", match.end())
        while end != -1 and data[end - 1:end] == b"\\":
            end = data.find(b"\n", end + 1)
        if not names_launcher(data[start:end if end != -1 else len(data)]):
            found.add(match.group(1).decode("utf-8", "replace").lstrip("./"))
    return found


class Launches:
    """Where the project's documents start its modules: the folders a launcher starts, and the
    scripts they run plainly, each in the part of the project its document speaks for (the
    nearest folder above it with a README of its own: salesforce/CodeT5@2d7a3f3 runs
    ``deepspeed`` in CodeT5+/ only), else the whole project."""

    def __init__(self, top: Path, readme_folders: Iterable[Path], everywhere: bool = False) -> None:
        self.top = top
        self._readme_folders = set(readme_folders)
        #: The folders whose modules a launcher may start (the whole project where it is too large to read).
        self.scopes: Set[Path] = {top} if everywhere else set()
        #: The scripts run plainly, by the folder their document speaks for.
        self.plain: Dict[Path, Set[str]] = {}
        #: Whether a document runs one of the scripts or names a launcher: how the project runs
        #: is written down (``PassedOptions``).
        self.documented = False

    def read(self, file: Path, data: Optional[bytes], document: bool = False) -> None:
        """What one file (a module; ``document``: a README or a shell script) says about launches."""
        if data is None:
            return
        named = (document or self.top not in self.scopes) and names_launcher(data)
        launches = named and self.top not in self.scopes
        runs = plain_runs(data)
        self.documented = self.documented or (document and bool(named or runs))
        if not (launches or runs):
            return
        folder = Path(os.path.abspath(file.parent))
        scope = next((above for above in (folder, *folder.parents) if above in self._readme_folders or above == self.top), self.top)
        if launches:
            self.scopes.add(scope)
        if runs:
            self.plain.setdefault(scope, set()).update(runs)

    def unlaunched(self, path: str) -> bool:
        """Whether the module at ``path`` runs without a launcher: none starts its part of the
        project, or a document runs it plainly."""
        module = Path(path)
        if not any(self._covers(scope, module) for scope in self.scopes):
            return True
        return any(
            self._covers(scope, module) and module.as_posix().endswith("/" + script)
            for scope, scripts in self.plain.items() for script in scripts
        )

    def _covers(self, scope: Path, module: Path) -> bool:
        return scope == self.top or scope in module.parents


#: A flag and what follows it on the line: ``--eval 0``, ``--resume=ckpt.pth``, ``-pretrained``.
_FLAG = re.compile(rb"(?<![\w/.-])--?([A-Za-z_][\w-]*)(?:(?:=|[ \t]+)(?!--?[A-Za-z_])([^\s'\"`\\;|&)]+))?")
#: A key a config file sets: ``resume: path`` (YAML), ``"resume": ...`` (JSON), ``resume = ...``.
_KEY = re.compile(rb"(?<![\w-])[\"']?([A-Za-z_][\w-]*)[\"']?[ \t]*[:=]")
#: Files whose keys may set options (YAML, JSON, INI, TOML).
KEYED_SUFFIXES = (".yaml", ".yml", ".json", ".cfg", ".ini", ".toml")


def flags_passed(data: bytes) -> Dict[str, Set[Optional[str]]]:
    """Each option a text passes (by its dest: ``--load-dir`` -> ``load_dir``) -> the values
    it passes: the word after the flag, None where none follows (a switch turned on)."""
    found: Dict[str, Set[Optional[str]]] = {}
    if b"-" not in data:
        return found
    for match in _FLAG.finditer(data):
        value = match.group(2)
        text = value.decode("utf-8", "replace") if value else None
        found.setdefault(match.group(1).decode("ascii").replace("-", "_"), set()).add(text)
    return found


def keys_set(data: bytes) -> Set[str]:
    """The keys a config file sets (by dest, like flags)."""
    return {key.decode("ascii").replace("-", "_") for key in _KEY.findall(data)}


class PassedOptions:
    """What the project's texts pass to its options, each text read once: where the project
    documents how it runs (a README or a shell script runs one of its scripts), code
    behind an option off by default that nothing passes another value is off the program's run.

    thuml/Transolver@75e0f67 PDE-Solving-StandardBenchmark/exp_plas.py:24 defines ``--eval``
    (default 0) and every script of the project passes ``--eval 0``: the ``if eval:`` branches
    that load a checkpoint and move it with ``.cuda()`` never run as the project is run.
    edenton/svg@3f19f0b train_svg_lp.py:19,47 loads ``opt.model_dir`` only when the option,
    ``''`` by default, is given, and its README never gives it.

    Conservative: only options off by default (``None``, ``False``, ``0``, ``""``), not those
    about devices or launchers (a device option off by default is a guard of its own), nor one
    that any text passes another value or a value it cannot read (``--resume $CKPT``), that a
    config file or a module's string names (``"--resume"`` handed to ``subprocess``), or that a
    module assigns (``args.resume = ...``); none where a module sets attributes by a computed
    name (``vars(args).update(config)``).
    """

    def __init__(self) -> None:
        self.values: Dict[str, Set[Optional[str]]] = {}
        self.named: Set[str] = set()  # options set by a config key: values unknown

    def read(self, name: str, data: Optional[bytes]) -> None:
        """One document, shell script, notebook or config file (``name``: its file name)."""
        if data is None:
            return
        for option, values in flags_passed(data).items():
            self.values.setdefault(option, set()).update(values)
        if name.endswith(KEYED_SUFFIXES):
            self.named.update(keys_set(data))

    def quiet(self, options: Mapping[str, object], set_in_modules: Set[str]) -> frozenset:
        """The options (of ``options``: name -> default) no text turns on, nor the modules:
        ``set_in_modules``, the attributes they set and the flags their strings pass."""
        touched = self.named | set_in_modules
        return frozenset(
            name for name, default in options.items()
            if _off(default) and name not in touched and not about_devices(name) and name not in LAUNCHER_OPTIONS
            and all(_same(value, default) for value in self.values.get(name, ()))
        )


    def quiet_keys(self, keys: Set[str], options: Mapping[str, object]) -> frozenset:
        """The keys (of ``keys``: read off by default, set by no module) that no text sets or
        passes as a flag, nor names as an option of a parser (``quiet`` decides those)."""
        return frozenset(
            key for key in keys
            if key not in self.named and key not in self.values and key not in options
            and not about_devices(key) and key not in LAUNCHER_OPTIONS
        )


def _off(default: object) -> bool:
    """An option off by default: ``None``, ``False``, ``0``, ``""`` (a choice among values,
    ``--loss Proxy_Anchor``, is a selection the user makes, not a feature turned on)."""
    return default is None or (isinstance(default, (bool, int, float, str)) and not default)


def _same(value: Optional[str], default: object) -> bool:
    """Whether a value a text passes is the option's default (``--eval 0`` of ``default=0``);
    a switch given (None) turns a ``store_true`` option on."""
    if value is None:
        return False
    try:
        given = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return isinstance(default, str) and value == default
    return type(given) is type(default) and given == default


# Keys the code reads from a config mapping, and the keys it writes (``ModuleFacts.read_keys``,
# ``written_keys``; ``PassedOptions.quiet_keys``).
#
# ``config.get('load')`` is None unless something sets ``load``: where no config file, document
# or module of the project does, the branch it opens is off the program's run, as is one behind an
# option off by default that nothing turns on (``PassedOptions``).
# yinboc/few-shot-meta-baseline@779fae3 train_classifier.py:98 loads ``config['load']`` under
# ``if config.get('load'):`` and no shipped config sets ``load``; G-U-N/PyCIL@87cc411 models/acil.py:152
# loads a base model under ``if "base_weight" in self.args:``, a key no experiment's JSON holds.
#
# Conservative: a key counts as written wherever a module names it as a keyword argument
# (``dict(load=path)``, ``Config(load=...)``), a dict literal's key, a subscript it stores into, a
# ``setdefault`` or a module-level name (a Python config file); reads with a default other than
# ``None``, ``False``, ``0`` or ``""``, and reads of the environment (a launcher sets it), are none.


def read_key_call(call: ast.Call, called: str, reads: Set[str], writes: Set[str]) -> None:
    """What a call reads (``x.get("k")``) or writes (``x.setdefault("k", v)``, any ``k=v``)."""
    for keyword in call.keywords:
        if keyword.arg is not None:
            writes.add(keyword.arg)
    if called not in ("get", "setdefault") or type(call.func) is not ast.Attribute or not call.args or call.keywords:
        return
    key = literal_string(call.args[0])
    if key is None:
        return
    if called == "setdefault":
        writes.add(key)
    elif len(call.args) == 1 or (len(call.args) == 2 and type(call.args[1]) is ast.Constant and _off(call.args[1].value)):
        if last_name(call.func.value) not in ("environ", "getenv"):
            reads.add(key)


def read_key_test(compare: ast.Compare, reads: Set[str]) -> None:
    """``"k" in config``: true only where something sets ``k``."""
    if len(compare.ops) == 1 and type(compare.ops[0]) in (ast.In, ast.NotIn) and type(compare.comparators[0]) in (ast.Name, ast.Attribute):
        key = literal_string(compare.left)
        if key is not None and last_name(compare.comparators[0]) != "environ":
            reads.add(key)


def read_key_writes(node: ast.AST, writes: Set[str]) -> None:
    """The string keys a dict literal holds or an assignment stores into (``config["load"] = p``)."""
    if type(node) is ast.Dict:
        writes.update(key.value for key in node.keys if type(key) is ast.Constant and type(key.value) is str)
    elif type(node) is ast.Assign:
        for target in node.targets:
            if type(target) is ast.Subscript:
                key = literal_string(target.slice)
                if key is not None:
                    writes.add(key)


def module_level_names(tree: ast.Module) -> Set[str]:
    """The names a module binds at its top level: a Python config file's keys."""
    return {
        target.id for statement in tree.body if type(statement) in (ast.Assign, ast.AnnAssign)
        for target in (statement.targets if type(statement) is ast.Assign else [statement.target]) if type(target) is ast.Name
    }
