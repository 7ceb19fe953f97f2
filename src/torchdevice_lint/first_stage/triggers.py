"""The trigger DSL: what a file's first-stage facts must hold for a rule to fire.

Each rule declares ``triggers`` over ``Facts`` (``facts.py``); a rule whose triggers are absent
does not run, and a file no enabled rule can fire on is never parsed with LibCST. Triggers must
over-approximate what a rule's visitors can report: tests/test_first_stage.py checks every rule
example and the real files with findings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from itertools import product
from typing import TYPE_CHECKING, Callable, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple

from ..syntax.ast_nodes import last_name
from .facts import INDEXED, Facts

if TYPE_CHECKING:
    from ..inference import FileInference


class Trigger:
    """A condition on a file's facts; ``a & b`` and ``a | b`` combine them."""

    def matches(self, facts: Facts) -> bool:
        raise NotImplementedError

    def __and__(self, other: "Trigger") -> "Trigger":
        return _AllOf((self, other))

    def __or__(self, other: "Trigger") -> "Trigger":
        return _AnyOf((self, other))


def _frozen(items: Iterable[str]) -> FrozenSet[str]:
    return frozenset([items] if isinstance(items, str) else items)


class Triggers(Trigger):
    """Any one of these in a file is enough.

    ``names``: dotted names a rule resolves through the file's imports
    (``torch.cuda.synchronize``); every part must be an identifier of the file, which holds
    for any alias (``from torch.cuda import synchronize as sync``).
    ``calls``: a call whose function ends in this name (``.cuda(...)``).
    ``keywords``: a call with this keyword argument.
    ``strings``: a string literal (or an f-string's literal text) starting with this.
    ``bases``: a class with a base whose last name ends with this.
    ``text``: this anywhere in the file's text, comments included.

    ``names`` is the loosest of these: ``Resolved`` asks what a name resolves to.
    """

    def __init__(self, names=(), calls=(), keywords=(), strings=(), bases=(), text=()) -> None:
        self.names = _frozen(names)
        self.calls = _frozen(calls)
        self.keywords = _frozen(keywords)
        self.strings = tuple(sorted(_frozen(strings)))
        self.bases = tuple(sorted(_frozen(bases)))
        self.text = tuple(sorted(_frozen(text)))
        self._dotted = tuple(tuple(name.split(".")) for name in sorted(self.names))

    def __repr__(self) -> str:
        fields = ("names", "calls", "keywords", "strings", "bases", "text")
        shown = ", ".join(f"{name}={sorted(getattr(self, name))}" for name in fields if getattr(self, name))
        return f"Triggers({shown})"

    def matches(self, facts: Facts) -> bool:
        identifiers = facts.identifiers
        if any(all(part in identifiers for part in parts) for parts in self._dotted):
            return True
        if not self.calls.isdisjoint(facts.calls) or not self.keywords.isdisjoint(facts.keywords):
            return True
        if self.strings and any(text.startswith(self.strings) for text in facts.strings):
            return True
        if self.bases and any(base.endswith(self.bases) for base in facts.bases):
            return True
        return any(text in facts.source for text in self.text)


class Placed(Trigger):
    """A placed string (``Facts.placed_strings``: passed, assigned or defaulted, or the leading
    text of such an f-string) that ``accepts`` takes: the rule's own test of a literal's text,
    so ``"cuda_graph"`` does not pass where only ``"cuda"`` or ``"cuda:N"`` can be reported.
    ``as_device``: only among those standing where a device is (``Facts.devices``)."""

    def __init__(self, accepts: Callable[[str], bool], as_device: bool = False) -> None:
        self.accepts = accepts
        self.as_device = as_device

    def __repr__(self) -> str:
        return f"Placed({getattr(self.accepts, '__name__', self.accepts)}, as_device={self.as_device})"

    def matches(self, facts: Facts) -> bool:
        return any(self.accepts(text) for text in (facts.devices() if self.as_device else facts.placed_strings))

    def literals(self, facts: Facts) -> List[ast.expr]:
        """With ``as_device``: the literals of the strings ``accepts`` takes."""
        return [literal for text, literals in facts.devices().items() if self.accepts(text) for literal in literals]


class Unguarded(Trigger):
    """A candidate (``candidates(facts)``: the nodes a rule may report) outside what the
    availability checks the first stage reads for certain cover (``knowledge/ast_guards.py``): for rules that
    report nothing where ``ctx.guarded`` holds. No candidate at all is no match either."""

    def __init__(self, candidates: Callable[[Facts], Iterable[ast.AST]]) -> None:
        self.candidates = candidates

    def __repr__(self) -> str:
        return f"Unguarded({getattr(self.candidates, '__qualname__', self.candidates)})"

    def matches(self, facts: Facts) -> bool:
        sites = facts.candidates.get(self.candidates)
        if sites is None:  # rules sharing a candidate function (TDV201, TDV202) walk once
            sites = facts.candidates[self.candidates] = tuple(self.candidates(facts))
        return any(not facts.surely_guarded(node) for node in sites)


class Arguments(Trigger):
    """A call given one of ``values`` (``INTEGER``, or a last name, compared lowercased): as
    the first positional argument of a call whose function ends in one of ``calls`` (or is a
    name imported as one: ``from torch import device as dev``), or as a ``keywords`` value.
    ``Arguments(INDEX_NAMES, calls="to")`` matches ``x.to(args.local_rank)``. ``indexed``: any
    name or attribute indexed by an integer (``opt.gpu_ids[0]``) counts too, whatever its name
    (what it holds is the project's to say)."""

    def __init__(self, values, calls=(), keywords=(), indexed: bool = False) -> None:
        self.values = frozenset(value.lower() for value in _frozen(values))
        self.calls = _frozen(calls)
        self.keywords = _frozen(keywords)
        self.indexed = indexed
        self._first = frozenset(product(self.calls, self.values))
        self._keyword = frozenset(product(self.keywords, self.values))

    def __repr__(self) -> str:
        return (
            f"Arguments(values={sorted(self.values)}, calls={sorted(self.calls)}, keywords={sorted(self.keywords)}"
            f"{', indexed=True' if self.indexed else ''})"
        )

    def matches(self, facts: Facts) -> bool:
        if not self._first.isdisjoint(facts.first_arguments) or not self._keyword.isdisjoint(facts.keyword_values):
            return True
        if self.indexed and (
            any(called in self.calls and shape.endswith(INDEXED) for called, shape in facts.first_arguments)
            or any(keyword in self.keywords and shape.endswith(INDEXED) for keyword, shape in facts.keyword_values)
        ):
            return True
        renamed = [local for local, name in facts.renames.items() if name in self.calls]
        return any((local, value) in facts.first_arguments for local in renamed for value in self.values)


class Resolved(Trigger):
    """A dotted name that resolves through one of the file's imports (any of them: LibCST's
    pass knows the one it walked last) to one of ``names``, as ``FileContext.qualname`` does:
    ``th.cuda.synchronize`` after ``import torch as th``. ``calls``: only as the called
    expression of a call, and, given ``accepts``, of a call it accepts (``ast.Call``) —
    ``Resolved(LOADERS, calls=True, accepts=...)``. Otherwise any reference, and any name
    imported as one of ``names``."""

    def __init__(self, names, calls: bool = False, accepts: Optional[Callable[[ast.Call], bool]] = None) -> None:
        self.names = _frozen(names)
        self.calls = calls
        self.accepts = accepts
        #: The last parts of ``names``: a dotted name ending otherwise resolves to none of them.
        self._last_parts = frozenset(name.rpartition(".")[2] for name in self.names)

    def __repr__(self) -> str:
        return f"Resolved(names={sorted(self.names)}, calls={self.calls})"

    def matches(self, facts: Facts) -> bool:
        if self.calls:
            return next(self.matching_calls(facts), None) is not None
        if any(not self.names.isdisjoint(bound) for bound in facts.imports.values()):
            return True
        return any(self.resolves(dotted, facts) for dotted in facts.references)

    def matching_calls(self, facts: Facts) -> Iterator[ast.Call]:
        """The calls whose function resolves to one of ``names`` (and that ``accepts`` takes)."""
        for dotted, calls in facts.dotted_calls.items():
            if self.resolves(dotted, facts):
                yield from (call for call in calls if self.accepts is None or self.accepts(call))

    def resolves(self, dotted: str, facts: Facts) -> bool:
        head, dot, rest = dotted.partition(".")
        if dot and rest.rpartition(".")[2] not in self._last_parts:
            return False  # asked of every dotted name of the file: most end in no name sought
        bound = facts.imports.get(head)
        return bound is not None and any(base + dot + rest in self.names for base in bound)


class Refusal(Trigger):
    """A call ``calls`` matches (a ``Resolved(..., calls=True)``) standing in the test of an
    ``assert``, or of an ``if`` statement (``elif`` too) one of whose branches ends by raising or
    by exiting (``sys.exit``, ``abort``): for a rule that reports such a statement for what its
    test calls, not every file that calls it (``"cuda" if is_available() else "cpu"``)."""

    def __init__(self, calls: Resolved) -> None:
        self.calls = calls

    def __repr__(self) -> str:
        return f"Refusal({self.calls!r})"

    def matches(self, facts: Facts) -> bool:
        tests = [node.test for node in facts.conditions if type(node) is ast.If and (_stops(node.body) or _stops(node.orelse))]
        tests.extend(node.test for node in facts.asserts)
        return bool(tests) and any(_spans(test, call) for call in self.calls.matching_calls(facts) for test in tests)


def _stops(block: List[ast.stmt]) -> bool:
    """Whether a block ends in ``raise`` or in a call of ``exit``, ``_exit`` or ``abort``."""
    last = block[-1] if block else None
    if type(last) is ast.Raise:
        return True
    return type(last) is ast.Expr and type(last.value) is ast.Call and last_name(last.value.func) in ("exit", "_exit", "abort")


def _spans(outer: ast.AST, inner: ast.AST) -> bool:
    """Whether ``inner``'s source lies within ``outer``'s (a node of the same tree: then in it)."""
    return (outer.lineno, outer.col_offset) <= (inner.lineno, inner.col_offset) and (
        (inner.end_lineno, inner.end_col_offset) <= (outer.end_lineno, outer.end_col_offset)
    )


def within(name: str, namespaces: Sequence[str]) -> bool:
    """Whether ``name`` is one of ``namespaces`` or below one: ``torch.cuda.Stream`` in ``torch.cuda``."""
    return any(name == namespace or name.startswith(namespace + ".") for namespace in namespaces)


class Within(Trigger):
    """A name imported from one of ``namespaces``, or a dotted name resolving into one through
    the file's imports (``from torch import cuda``, ``th.cuda.Stream``): for rules that report
    every use of a module."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        self.namespaces = tuple(namespaces)

    def __repr__(self) -> str:
        return f"Within({list(self.namespaces)})"

    def matches(self, facts: Facts) -> bool:
        if any(within(name, self.namespaces) for bound in facts.imports.values() for name in bound):
            return True
        for dotted in facts.references:
            head, dot, rest = dotted.partition(".")
            if any(within(base + dot + rest, self.namespaces) for base in facts.imports.get(head, ())):
                return True
        return False


@dataclass(frozen=True)
class _AllOf(Trigger):
    parts: Tuple[Trigger, ...]

    def matches(self, facts: Facts) -> bool:
        return all(part.matches(facts) for part in self.parts)


@dataclass(frozen=True)
class _AnyOf(Trigger):
    parts: Tuple[Trigger, ...]

    def matches(self, facts: Facts) -> bool:
        return any(part.matches(facts) for part in self.parts)


class Inferred(Trigger):
    """The device inference, run on the first stage's tree once per file, found what
    ``accepts`` looks for: a rule reading the inference fires on no other file, and such a file
    is never parsed with LibCST for it."""

    def __init__(self, accepts: Callable[["FileInference"], bool]) -> None:
        self.accepts = accepts

    def matches(self, facts: Facts) -> bool:
        return self.accepts(facts.inferred())


class BuildsCudaKernel(Trigger):
    """The project model found a CUDA-only kernel the file builds (``Facts.builds_cuda_kernel``):
    for a rule that reports such builds and nothing else."""

    def __repr__(self) -> str:
        return "BuildsCudaKernel()"

    def matches(self, facts: Facts) -> bool:
        return facts.builds_cuda_kernel


#: Matches every file: the default for a rule that declares nothing.
EVERY_FILE: Trigger = _AllOf(())
