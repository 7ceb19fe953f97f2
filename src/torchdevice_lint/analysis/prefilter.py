"""The first stage: CPython's own parser decides, before LibCST is even imported, whether a
file is Python and which rules could fire on it.

LibCST's parse costs about ten times ``ast.parse`` and most files have no finding. Every file is
parsed once with ``compile(..., PyCF_ONLY_AST)`` (``pyparse.py``), which also words syntax errors
the way Python does and refuses nesting LibCST cannot survive. One walk of that tree collects the
file's ``Facts`` and refuses a tree deeper than ``pyparse.MAX_DEPTH``. Each rule declares
``triggers``: what a file must contain for the rule to fire, stated over those facts. A rule
whose triggers are absent does not run, and a file no enabled rule can fire on is never parsed
with LibCST. The rules that read the device inference (TDV4xx, TDV601) add ``Inferred``: the
inference itself runs on this tree, and only a file where it finds something goes on.

Triggers must over-approximate what a rule's visitors can report: tests/test_prefilter.py
checks every rule example and the real files with findings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, FrozenSet, Iterable, Optional, Set, Tuple

from .pyparse import MAX_DEPTH, TOO_DEEP, Unparsable, compile_python

if TYPE_CHECKING:
    from .inference import FileInference


@dataclass
class Facts:
    """What one walk of a file's ``ast`` found."""

    #: Every identifier: names, attributes, parts of imported dotted names, definitions.
    identifiers: Set[str] = field(default_factory=set)
    #: The last name of every called expression: ``cuda`` for ``x.cuda()``, ``load`` for ``load(p)``.
    calls: Set[str] = field(default_factory=set)
    #: Keyword argument names of every call.
    keywords: Set[str] = field(default_factory=set)
    #: Every ``str`` constant, including the literal parts of f-strings.
    strings: Set[str] = field(default_factory=set)
    #: The last name of every class base.
    bases: Set[str] = field(default_factory=set)
    #: The text itself, for what the tree does not hold (comments).
    source: str = ""
    #: The tree, for the device inference (``Inferred``).
    tree: Optional[ast.Module] = None
    #: The device inference of the file, once a trigger asked for it.
    inference: Optional["FileInference"] = None

    def inferred(self) -> "FileInference":
        if self.inference is None:
            from .inference.file import infer_tree

            self.inference = infer_tree(self.tree, self.source)
        return self.inference


def parse_facts(source: str, tree: ast.AST = None) -> Facts:
    """The file's facts; raises ``Unparsable`` when CPython cannot parse it or its tree is
    deeper than ``MAX_DEPTH``. ``tree`` is a tree already parsed from ``source`` (flake8 hands
    one over)."""
    return _collect(compile_python(source) if tree is None else tree, source)


def _collect(tree: ast.AST, source: str) -> Facts:
    """One walk, a level at a time: the facts, and the depth check (no recursion)."""
    facts = Facts(source=source, tree=tree)
    identifiers, calls, keywords, strings, bases = (
        facts.identifiers, facts.calls, facts.keywords, facts.strings, facts.bases
    )
    Name, Attribute, Call, Constant = ast.Name, ast.Attribute, ast.Call, ast.Constant
    children = ast.iter_child_nodes
    level = [tree]
    for _ in range(MAX_DEPTH):
        below: list = []
        extend = below.extend
        for node in level:
            extend(children(node))
            kind = type(node)
            if kind is Name:
                identifiers.add(node.id)
            elif kind is Attribute:
                identifiers.add(node.attr)
            elif kind is Constant:
                if type(node.value) is str:
                    strings.add(node.value)
            elif kind is Call:
                func = node.func
                if type(func) is Attribute:
                    calls.add(func.attr)
                elif type(func) is Name:
                    calls.add(func.id)
                for keyword in node.keywords:
                    if keyword.arg is not None:
                        keywords.add(keyword.arg)
            elif kind is ast.alias:
                identifiers.update(node.name.split("."))
                if node.asname:
                    identifiers.add(node.asname)
            elif kind is ast.ImportFrom:
                if node.module:
                    identifiers.update(node.module.split("."))
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                identifiers.add(node.name)
            elif kind is ast.ClassDef:
                identifiers.add(node.name)
                for base in node.bases:
                    if type(base) is Name:
                        bases.add(base.id)
                    elif type(base) is Attribute:
                        bases.add(base.attr)
        if not below:
            return facts
        level = below
    raise Unparsable(TOO_DEEP)


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


#: Matches every file: the default for a rule that declares nothing.
EVERY_FILE: Trigger = _AllOf(())
