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
"""

from __future__ import annotations

import hashlib
import re
from typing import Dict, Iterable, Mapping

from ..knowledge.option_values import about_devices

#: What a config file is named.
CONFIG_SUFFIXES = (".yaml", ".yml")
#: What a file that documents how the project runs is named, besides a ``README`` of any suffix:
#: docs, shell and batch scripts.
DOC_SUFFIXES = (".md", ".rst", ".sh", ".bash", ".slurm", ".sbatch")
#: Commands that start workers under a distributed launcher, which passes each its ``--local_rank``.
_LAUNCHERS = (b"torch.distributed.launch", b"torch.distributed.run", b"torchrun", b"deepspeed", b"horovodrun", b"mpirun")
#: The same where a word alone is not enough (read only where the first word is there: a regular
#: expression over every module costs 14 times these searches).
_LAUNCHER_COMMANDS = re.compile(rb"accelerate\s+launch|--local[_-]rank[= ]\d")
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


def names_launcher(data: bytes) -> bool:
    """Whether a file's bytes name a distributed launcher (a README's command, a shell script,
    a module that builds the command or explains it in a docstring)."""
    lowered = data.lower()
    if any(word in lowered for word in _LAUNCHERS):
        return True
    return (b"accelerate" in lowered or b"--local" in lowered) and _LAUNCHER_COMMANDS.search(lowered) is not None


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
