"""What a whole project says, as one file's rules read it (the project model builds it)."""

from __future__ import annotations

import hashlib
import json
import operator as operators
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, FrozenSet, Mapping, Optional, Tuple

_COMPARE = {
    ">": operators.gt, ">=": operators.ge, "<": operators.lt, "<=": operators.le, "==": operators.eq, "!=": operators.ne,
}


def compare(operator: str, left: int, right: int) -> bool:
    """``left <operator> right`` for the operators an option test holds."""
    return _COMPARE[operator](left, right)


@dataclass(frozen=True)
class ProjectFacts:
    """What the whole project (``project/``) tells one file's rules: each command-line option's
    default, the names that copy one (``self.use_gpu = opt.cuda``), the one-line predicates that
    test one (``def use_gpu(self): return len(self.opt.gpu_ids) > 0``: ``[option, len taken,
    operator, integer]``), the names of the files the project saves from ``.cpu()`` values, the
    code that can only run on CUDA because it drives a CUDA-only extension kernel (``(first,
    last)`` line spans by module path) and, by the path of the module that builds such a kernel,
    its name -> ``[lines that depend on it, files they are in]``. For one file of the project:
    the torch names its imports of the project's modules bring (``from utils import *`` where
    ``utils`` does ``import torch.nn as nn``: ``nn`` -> ``torch.nn``), and the module-level
    devices they bring (``from utils import device`` -> ``project.facts.DEVICE_KINDS``'s word for
    that binding). Empty where there is no project (a buffer on stdin)."""

    options: Mapping[str, Any] = field(default_factory=dict)
    copies: Mapping[str, str] = field(default_factory=dict)
    predicates: Mapping[str, list] = field(default_factory=dict)
    cpu_saved_files: FrozenSet[str] = frozenset()
    cuda_only_spans: Mapping[str, Tuple[Tuple[int, int], ...]] = field(default_factory=dict)
    cuda_kernels: Mapping[str, Mapping[str, list]] = field(default_factory=dict)
    #: Each function or class defined with a CUDA device default -> its calls' signatures
    #: (``project/calls.py``: ``[positional count or -1, device keywords, ** unpacked]``); those
    #: of them the project also uses as a value (a callback, a base class) are ``escaped``.
    default_calls: Mapping[str, Tuple[list, ...]] = field(default_factory=dict)
    escaped: FrozenSet[str] = frozenset()
    #: Checkpoint files in the project that its modules name -> whether they hold CPU storages only.
    shipped_files: Mapping[str, bool] = field(default_factory=dict)
    imported: Mapping[str, str] = field(default_factory=dict)
    imported_devices: Mapping[str, str] = field(default_factory=dict)
    #: Functions and classes every call of which in the project passes an attribute
    #: (``MultiBoxLoss(..., args.cuda)``), by name -> those calls' ``[positional, keywords]``
    #: (``project.facts.ModuleFacts.passed``; an option the calling module parses itself is
    #: ``["=", its default there]``).
    arguments: Mapping[str, list] = field(default_factory=dict)
    #: Code that only runs where CUDA is because every call of it does (``project/context.py``:
    #: a function only called under ``if torch.cuda.is_available():`` or from a worker started
    #: once per GPU): ``(first, last)`` line spans by module path, judged like CUDA-only code.
    context_spans: Mapping[str, Tuple[Tuple[int, int], ...]] = field(default_factory=dict)
    #: The bodies of the definitions nothing that runs calls or names (``project/reached.py``):
    #: ``(first, last)`` line spans by module path; no line there raises on any machine.
    unreached_spans: Mapping[str, Tuple[Tuple[int, int], ...]] = field(default_factory=dict)
    #: The calls of each function, method and class the project defines, by ``name@module
    #: stem`` (``project.model.parameter_calls``): ``[positional count or -1, keywords, **
    #: unpacked, flag attributes passed]``; a name nobody calls, or called unseen, is absent.
    parameter_calls: Mapping[str, Tuple[list, ...]] = field(default_factory=dict)
    #: The project's ``nn.Module`` classes that hold no parameter, buffer or submodule under
    #: every definition of their name (``project/stateless.py``) -> the modules and packages
    #: defining them: ``.cuda()`` of one has nothing to move.
    parameterless_classes: Mapping[str, Tuple[str, ...]] = field(default_factory=dict)
    #: Whether the project has modules and none of them names MPS: where CUDA is missing, it runs
    #: on the CPU (unknown, so False, without a project).
    never_mps: bool = False
    #: Whether the project was read and none of its modules, READMEs and scripts names a
    #: distributed launcher (``project/configs.py``): an option only a launcher sets
    #: (``--local_rank``) keeps its default (unknown, so False, without a project).
    unlaunched: bool = False
    #: Device options some module assigns (``args.visible_gpus = ...``): their defaults may not hold.
    rebound_options: FrozenSet[str] = frozenset()
    #: Device attributes every module that assigns them binds to an availability check
    #: (thuml/Autoformer@51c7d41 run.py:82 ``args.use_gpu = True if torch.cuda.is_available() and
    #: args.use_gpu else False``): true only where CUDA is, wherever they are read.
    availability_options: FrozenSet[str] = frozenset()
    #: Classes whose methods save files, and functions that do, by name -> the file names they
    #: write: a function that builds such a class (``early_stopping = EarlyStopping(...)``) may
    #: have saved them by a later line, and one that calls such a function has.
    saving_classes: Mapping[str, FrozenSet[str]] = field(default_factory=dict)
    #: Whether a module saves a network's weights moved to the CPU parameter by parameter
    #: (BasicSR's ``save_network``): the weights the project releases hold CPU tensors.
    weights_saved_on_cpu: bool = False
    #: Whether the project saves and every save writes CPU tensors (tbepler/protein-sequence-
    #: embedding-iclr2019@be32cff: ``model.cpu()`` before each ``torch.save(model, path)``): the
    #: models it releases hold none either.
    every_save_on_cpu: bool = False
    #: Options off by default that nothing documented turns on (``project/configs.py``'s
    #: ``PassedOptions``: ``--eval 0`` wherever a script passes it): a test of one reads as its default.
    quiet_options: FrozenSet[str] = frozenset()
    #: Keys read from a mapping off by default that nothing sets (``project/configs.py``'s ``quiet_keys``):
    #: ``config.get("load")`` reads as None.
    quiet_keys: FrozenSet[str] = frozenset()


    @cached_property
    def fingerprint(self) -> str:
        """A short digest of everything here, for cache keys; empty for an empty model."""
        parts = [
            self.options, self.copies, self.predicates, sorted(self.cpu_saved_files), self.cuda_only_spans,
            self.cuda_kernels, self.default_calls, sorted(self.escaped), self.shipped_files, self.imported,
            self.imported_devices, self.arguments, self.context_spans, self.unreached_spans, calls_digest(self.parameter_calls), self.parameterless_classes, self.never_mps, self.unlaunched,
            sorted(self.rebound_options), sorted(self.availability_options),
            {name: sorted(saved) for name, saved in self.saving_classes.items()}, self.weights_saved_on_cpu, self.every_save_on_cpu, sorted(self.quiet_options), sorted(self.quiet_keys),
        ]
        if not any(parts):
            return ""
        text = json.dumps(parts, sort_keys=True, default=repr)
        return ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def cuda_only_lines(self, path: str) -> Tuple[Tuple[int, int], ...]:
        """The ``(first, last)`` spans of the file at ``path`` that can only run on CUDA."""
        if not (self.cuda_only_spans or self.context_spans):
            return ()
        path = os.path.abspath(path)
        return self.cuda_only_spans.get(path, ()) + self.context_spans.get(path, ())

    def unreached_lines(self, path: str) -> Tuple[Tuple[int, int], ...]:
        """The ``(first, last)`` spans of the file at ``path`` that nothing runs."""
        return self.unreached_spans.get(os.path.abspath(path), ()) if self.unreached_spans else ()

    def cuda_kernel(self, path: str, name: str) -> Optional[list]:
        """``[dependent lines, files]`` of the CUDA-only kernel ``name`` the file at ``path``
        builds; None where it builds no such kernel."""
        return self.cuda_kernels.get(os.path.abspath(path), {}).get(name.rsplit(".", 1)[-1]) if self.cuda_kernels else None

    def value(self, name: str) -> Tuple[bool, Any]:
        """(known, default) of the option ``name``, or of the option it copies."""
        for candidate in (name, self.copies.get(name)):
            if candidate is not None and candidate in self.options:
                return True, self.options[candidate]
        return False, None

    def always_passed(self, callee: str, keyword: str, position: Optional[int], required: Tuple[Tuple[int, str], ...] = ()) -> bool:
        """Whether the project calls ``callee`` and every call provably passes the argument
        ``keyword`` (at ``position`` among the positional ones, None: keyword-only). A callee
        never called here, or also used as a value (its calls unseen), is someone else's to
        call: its default is the one they get. ``required``: the callee's parameters without
        a default, ``(position or -1, name)``; a call of the name that leaves one out calls a
        namesake (lukasruff/Deep-SAD-PyTorch@2e7aca3 ``net.train()`` is not ``DeepSAD.train(
        dataset, ...)``, which would raise TypeError)."""
        calls = self.default_calls.get(callee)
        if not calls or callee in self.escaped:
            return False
        calls = [call for call in calls if _may_call(call, required)]
        return bool(calls) and all(
            keyword in keywords or (position is not None and count > position)
            for count, keywords, _unpacked in calls
        )

    def lists_gpus(self, name: str) -> bool:
        """Whether the option ``name`` (or the one it copies) defaults to GPU indices: a string
        like ``"0"`` or ``"0,1"`` (pix2pix's ``--gpu_ids``, ``-1`` meaning the CPU), or a
        non-empty list of them: ``opt.gpu_ids[0]`` is then GPU 0 unless the user says otherwise."""
        known, value = self.value(name)
        if not known:
            return False
        if isinstance(value, str):
            value = value.split(",") if value.strip() else []
        if not isinstance(value, (list, tuple)) or not value:
            return False
        return all(
            (isinstance(index, int) and not isinstance(index, bool) and index >= 0)
            or (isinstance(index, str) and index.strip().isdigit())
            for index in value
        )

    def passed_default(
        self, callee: str, index: Optional[int], keyword: str, klass: Optional[str] = None,
        accepts: Optional[Callable[..., bool]] = None,
    ) -> Optional[bool]:
        """The default of the option every call of ``callee`` in the project passes as its
        argument ``index`` (positional, None if keyword-only) or ``keyword``: ``test_net(..., args.cuda)``
        everywhere and ``--cuda`` defaulting to True give True. None unless every call passes
        one, and their defaults agree. A method of ``klass`` leaves out the calls on receivers
        built from other classes (``loader.initialize()`` is not ``Trainer.initialize``), and
        ``accepts`` (positional count, keywords, ** unpacked) the calls the callee cannot take."""
        found = set()
        for positional, keywords, receivers, written in self.arguments.get(callee, ()):
            if klass is not None and receivers and klass not in receivers or accepts is not None and not accepts(*written):
                continue
            value = self.passed_value(positional, keywords, index, keyword)
            if value is None:
                return None
            found.add(bool(value))
        return found.pop() if len(found) == 1 else None

    def passed_value(self, positional: Optional[list], keywords: Optional[dict], index: Optional[int], keyword: str):
        """The default of the option a call passes as argument ``index`` or ``keyword``
        (``_passed_in_caller``'s lists), None where unknown. An attribute the project binds only
        to an availability check holds False where CUDA is missing, whichever module binds it
        (Tiiiger/SGC@2c7a272 citation.py:28 passes ``args.cuda``, which args.py:39 binds to
        ``not args.no_cuda and torch.cuda.is_available()``)."""
        if positional is None:
            return None
        option = positional[index] if index is not None and index < len(positional) else keywords.get(keyword)
        if isinstance(option, list):  # the calling module's own option: ``["=", default]``
            return option[1]
        if option in self.availability_options:
            return False
        return self.holds([option, False, None, None]) if option is not None else None

    def holds(self, test: list) -> Optional[bool]:
        """Whether ``[option, len taken, operator, integer]`` is true with the defaults."""
        option, measured, operator, operand = test
        known, value = self.value(option)
        if not known:
            return None
        if measured:
            if not isinstance(value, (str, list, tuple)):
                return None
            value = len(value)
        if operator is None:
            return bool(value)
        if not isinstance(value, int):
            return None
        return compare(operator, int(value), operand)  # a store_true flag compares as 0 or 1


def calls_digest(calls: Mapping[str, Tuple[list, ...]]) -> str:
    """A digest of ``ProjectFacts.parameter_calls``: each call's record is one list shared by
    every namesake the call may reach (hundreds of ``forward`` methods), so it is written once
    (12.6 MB of JSON for 536 research modules, 0.32 s, when written in place for each)."""
    written: dict = {}
    digest = hashlib.sha256()
    for key in sorted(calls):
        texts = []
        for record in calls[key]:
            text = written.get(id(record))
            if text is None:
                text = written[id(record)] = json.dumps(record, sort_keys=True, default=repr)
            texts.append(text)
        digest.update(f"{key}\n{len(texts)}\n".encode("utf-8", "surrogatepass") + "\n".join(texts).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _may_call(call: Tuple[int, Tuple[str, ...], bool], required: Tuple[Tuple[int, str], ...]) -> bool:
    """Whether a call (``(positional count or -1, keywords, ** unpacked)``) passes every required
    parameter, or may (``*args``, ``**kwargs``)."""
    count, keywords, unpacked = call
    if count < 0 or unpacked:
        return True
    return all(name in keywords or 0 <= position < count for position, name in required)

