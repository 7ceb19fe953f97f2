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
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

#: A call's arguments as the model keeps them: ``[positional count or -1 where ``*args`` makes it
#: unknown, the keywords naming a device (sorted), whether ``**kwargs`` is unpacked]``.
Signature = list

#: Arguments whose name holds this word are the device ones the rules look at.
DEVICE_WORD = "device"


#: Where a called name comes from, written after ``@``: the last part of the module it is
#: imported from (``from .utils import LayerNorm`` -> ``LayerNorm@utils``, and ``utils.f()`` after
#: ``import utils``), ``.`` for the module's own top-level definitions; no ``@``: not known.
OWN = "."


@dataclass
class CallFacts:
    #: Callee last name with its origin (``utils.prepare_z_y(...)`` -> ``prepare_z_y@utils``) ->
    #: its distinct signatures.
    calls: Dict[str, List[Signature]] = field(default_factory=dict)
    #: Functions (an ``__init__``: its class) and classes defined here with a CUDA device default.
    device_defaults: List[str] = field(default_factory=list)
    #: Names (with their origin) used as a value (``partial(f, ...)``, ``fn = f``, ``class B(A)``):
    #: called unseen.
    escaped: List[str] = field(default_factory=list)


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


def signature(call: ast.Call) -> Signature:
    starred = any(isinstance(argument, ast.Starred) for argument in call.args)
    keywords = sorted({k.arg for k in call.keywords if k.arg is not None and DEVICE_WORD in k.arg.lower()})
    return [-1 if starred else len(call.args), keywords, any(k.arg is None for k in call.keywords)]


def read_node(node: ast.AST, facts: CallFacts, known: Dict[str, str]) -> None:
    """What one node of the module's walk adds (``facts.module_facts`` walks every node once);
    ``known`` holds the module's ``origins``."""
    if isinstance(node, ast.Call):
        name = _callee(node.func, known)
        if name is not None:
            seen = facts.calls.setdefault(name, [])
            summary = signature(node)
            if summary not in seen:
                seen.append(summary)
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            _escape(argument, facts, known)
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.Return)) and node.value is not None:
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


def _escape(value: ast.expr, facts: CallFacts, known: Dict[str, str]) -> None:
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
        for node in ast.walk(value)
    )


def default_calls(modules: Dict[str, CallFacts]) -> Tuple[Dict[str, Tuple[Signature, ...]], FrozenSet[str]]:
    """For each name some module defines with a CUDA device default: the signatures of its calls
    (name -> signatures), and the names used as a value, over the modules (path -> facts). A call
    counts where it may reach that definition: its origin unknown, the defining module's name
    (``from .utils import LayerNorm``), or the defining module's own call; ``LayerNorm(width)``
    in ``xf.py``, which defines a ``LayerNorm`` of its own, and ``nn.LayerNorm`` do not."""
    stems = {path: os.path.splitext(os.path.basename(path))[0] for path in modules}
    defined: Dict[str, Set[str]] = {}
    for path, facts in modules.items():
        for name in facts.device_defaults:
            defined.setdefault(name, set()).add(stems[path])
    calls: Dict[str, List[Signature]] = {}
    escaped: Set[str] = set()
    if not defined:
        return {}, frozenset()
    for path, facts in modules.items():
        used_as_value = set(facts.escaped)
        for name, where in defined.items():
            keys = [name, *(f"{name}@{stem}" for stem in where)]
            if stems[path] in where:
                keys.append(f"{name}@{OWN}")
            for key in keys:
                calls.setdefault(name, []).extend(facts.calls.get(key, ()))
                if key in used_as_value:
                    escaped.add(name)
    return {name: tuple(found) for name, found in sorted(calls.items()) if found}, frozenset(escaped)


def shaped(value) -> Optional[CallFacts]:
    """The facts a cache entry's tuple holds, or None where it has another shape."""
    if not (isinstance(value, tuple) and len(value) == 3):
        return None
    calls, defaults, escaped = value
    if not (isinstance(calls, dict) and isinstance(defaults, list) and isinstance(escaped, list)):
        return None
    if not all(isinstance(name, str) for name in [*calls, *defaults, *escaped]):
        return None
    for summaries in calls.values():
        if not isinstance(summaries, list) or not all(_is_signature(summary) for summary in summaries):
            return None
    return CallFacts(calls, defaults, escaped)


def _is_signature(summary) -> bool:
    return (
        isinstance(summary, list) and len(summary) == 3 and type(summary[0]) is int
        and isinstance(summary[1], list) and all(isinstance(k, str) for k in summary[1]) and isinstance(summary[2], bool)
    )
