"""What a whole project says, as one file's rules read it (the project model builds it)."""

from __future__ import annotations

import hashlib
import json
import operator as operators
import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, FrozenSet, Mapping, Optional, Tuple

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
    its name -> ``[lines that depend on it, files they are in]``. Empty where there is no
    project (a buffer on stdin)."""

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

    @cached_property
    def fingerprint(self) -> str:
        """A short digest of everything here, for cache keys; empty for an empty model."""
        parts = [
            self.options, self.copies, self.predicates, sorted(self.cpu_saved_files), self.cuda_only_spans,
            self.cuda_kernels, self.default_calls, sorted(self.escaped), self.shipped_files,
        ]
        if not any(parts):
            return ""
        text = json.dumps(parts, sort_keys=True, default=repr)
        return ":" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    def cuda_only_lines(self, path: str) -> Tuple[Tuple[int, int], ...]:
        """The ``(first, last)`` spans of the file at ``path`` that can only run on CUDA."""
        return self.cuda_only_spans.get(os.path.abspath(path), ()) if self.cuda_only_spans else ()

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

    def always_passed(self, callee: str, keyword: str, position: Optional[int]) -> bool:
        """Whether the project calls ``callee`` and every call provably passes the argument
        ``keyword`` (at ``position`` among the positional ones, None: keyword-only). A callee
        never called here, or also used as a value (its calls unseen), is someone else's to
        call: its default is the one they get."""
        calls = self.default_calls.get(callee)
        if not calls or callee in self.escaped:
            return False
        return all(
            keyword in keywords or (position is not None and count > position)
            for count, keywords, _unpacked in calls
        )

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
