"""The first stage: CPython's own parser decides, before LibCST is even imported, whether a
file is Python and which rules could fire on it.

LibCST's parse costs about ten times ``ast.parse`` and most files have no finding. Every file is
parsed once with ``compile(..., PyCF_ONLY_AST)`` (``syntax/ast_parse.py``), which also words syntax errors
the way Python does and refuses nesting LibCST cannot survive. One walk of that tree collects the
file's ``Facts`` and refuses a tree deeper than ``ast_parse.MAX_DEPTH``. Each rule declares
``triggers``: what a file must contain for the rule to fire, stated over those facts. A rule
whose triggers are absent does not run, and a file no enabled rule can fire on is never parsed
with LibCST. The rules that read the device inference (TDV4xx, TDV601) add ``Inferred``: the
inference itself runs on this tree, and only a file where it finds something goes on.

Triggers must over-approximate what a rule's visitors can report: tests/test_first_stage.py
checks every rule example and the real files with findings.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Dict, Iterable, List, Optional, Set, Tuple

from ..inference.seeds import SEED_METHODS, Seeds
from ..inference.vocabulary import FLOAT64_NAMES
from ..syntax.ast_nodes import CHILD_FIELDS, dotted_name, fstring_head, import_aliases, literal_string, node_fields
from ..syntax.ast_parse import MAX_DEPTH, TOO_DEEP, Unparsable, compile_python

if TYPE_CHECKING:
    from ..inference import FileInference
    from ..knowledge.ast_guards import Coverage


#: The shape of an integer literal in ``Facts.first_arguments`` and ``Facts.keyword_values``
#: (``True`` is a ``bool``, not one); any other shape is a lowercased name.
INTEGER = "<int>"
#: The shape of a name or attribute indexed by an integer (``opt.gpu_ids[0]``): its last name
#: lowercased, then this.
INDEXED = "[<int>]"


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
    #: The strings (an f-string: its leading text) passed as an argument, assigned, or given as
    #: a parameter default, directly or as an arm of a conditional expression: where a device
    #: literal does something (not a comparison's ``device.type == "mps"``).
    placed_strings: Set[str] = field(default_factory=set)
    #: The placed strings (-> their literals) that stand where TDV102 and TDV105 report a device literal: a
    #: ``device=``, ``map_location=``, ``type=`` or ``default=`` argument; a positional argument
    #: of ``.to``, ``.device``, ``.set_default_device`` or ``.load`` (of a bare name: ``devices()``); a value
    #: assigned to a name or attribute whose last name holds "device"; a ``device...``
    #: parameter's default. Not ``str(device).startswith("mps")`` nor ``environ.get(k, "cuda")``.
    device_strings: Dict[str, List[ast.expr]] = field(default_factory=dict)
    #: Bare name called -> the placed strings among its positional arguments: device strings
    #: where the name is imported as one of ``DEVICE_TAKING_METHODS`` (``devices()``).
    name_call_strings: Dict[str, List[Tuple[str, ast.expr]]] = field(default_factory=dict)
    #: The last name of every class base.
    bases: Set[str] = field(default_factory=set)
    #: (last name of the called expression, shape of its first positional argument) for every
    #: call whose first positional argument is an integer literal (``INTEGER``), a name or an
    #: attribute (its last name, lowercased): ``("to", "local_rank")`` for ``x.to(args.local_rank)``.
    first_arguments: Set[Tuple[str, str]] = field(default_factory=set)
    #: (keyword, shape of its value) for every keyword argument, shaped the same way.
    keyword_values: Set[Tuple[str, str]] = field(default_factory=set)
    #: Local name -> last part of the imported name, for every ``import ... as`` alias.
    renames: Dict[str, str] = field(default_factory=dict)
    #: Local name -> every name an import anywhere in the file binds it to (``th`` ->
    #: ``{"torch"}``): what LibCST's pass may resolve it to, whichever import it walked last.
    imports: Dict[str, Set[str]] = field(default_factory=dict)
    #: The dotted name of every attribute chain on a name (``torch.cuda.FloatTensor`` and its
    #: ``torch.cuda``).
    references: Set[str] = field(default_factory=set)
    #: Dotted name of the called expression (``torch.load``, ``load``) -> those calls.
    dotted_calls: Dict[str, List[ast.Call]] = field(default_factory=dict)
    #: Where the device inference can start, by line (the calls by name are in ``dotted_calls``).
    seeds: Seeds = field(default_factory=Seeds)
    #: The calls whose function's last name is one of ``KEPT_CALLS``, by that name.
    calls_named: Dict[str, List[ast.Call]] = field(default_factory=dict)
    #: ``if`` statements, conditional expressions and boolean operations, and every function
    #: and class: where ``knowledge/ast_guards.py`` looks for availability checks.
    conditions: List[ast.AST] = field(default_factory=list)
    definitions: List[ast.AST] = field(default_factory=list)
    #: Every ``assert`` statement (``triggers.Tested``).
    asserts: List[ast.Assert] = field(default_factory=list)
    #: What those checks cover, once a trigger asked (``surely_guarded``).
    coverage: Optional["Coverage"] = None
    #: ``triggers.Unguarded``'s candidates by the function that found them.
    candidates: Dict[Callable[["Facts"], Iterable[ast.AST]], Tuple[ast.AST, ...]] = field(default_factory=dict)
    #: The text itself, for what the tree does not hold (comments).
    source: str = ""
    #: The tree, for the device inference (``Inferred``).
    tree: Optional[ast.Module] = None
    #: The device inference of the file, once a trigger asked for it.
    inference: Optional["FileInference"] = None
    #: Whether the project model found a CUDA-only kernel the file builds (``ProjectFacts.cuda_kernels``;
    #: never for a file judged without its project).
    builds_cuda_kernel: bool = False

    def devices(self) -> Dict[str, List[ast.expr]]:
        """``device_strings``, with the strings a bare name's call is given where an import
        binds the name to one of ``DEVICE_TAKING_METHODS`` (``dev("cuda")`` after ``from torch
        import device as dev``). Asked by the triggers, once the project's imports are in."""
        if self.name_call_strings:
            for called, literals in self.name_call_strings.items():
                if any(name.rpartition(".")[2] in DEVICE_TAKING_METHODS for name in self.imports.get(called, ())):
                    for text, literal in literals:
                        self.device_strings.setdefault(text, []).append(literal)
            self.name_call_strings = {}
        return self.device_strings

    def surely_guarded(self, node: ast.AST) -> bool:
        """Whether ``node`` stands where a check that ``knowledge/ast_guards.py`` reads for certain covers it."""
        if self.coverage is None:
            from ..knowledge.ast_guards import Coverage, covered_spans, module_name_signs

            names = module_name_signs(self.tree) if self.tree is not None else None
            self.coverage = Coverage(covered_spans(self.conditions, self.definitions, names))
        return self.coverage.covers(node)

    def inferred(self) -> "FileInference":
        if self.inference is None:
            from ..inference.file import infer_tree

            self.inference = infer_tree(self.tree, self.source, self.seeds, self.dotted_calls)
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
    first_arguments, keyword_values = facts.first_arguments, facts.keyword_values
    placed_strings, device_strings = facts.placed_strings, facts.device_strings
    conditions, definitions = facts.conditions, facts.definitions

    def place(literals: Tuple[Tuple[str, ast.expr], ...]) -> None:
        placed_strings.update(text for text, _ in literals)

    def place_device(literals: Tuple[Tuple[str, ast.expr], ...]) -> None:
        for text, literal in literals:
            device_strings.setdefault(text, []).append(literal)

    imports, references, dotted_calls, seeds = facts.imports, facts.references, facts.dotted_calls, facts.seeds
    Name, Attribute, Call, Constant, Starred = ast.Name, ast.Attribute, ast.Call, ast.Constant, ast.Starred
    AST, child_fields = ast.AST, CHILD_FIELDS.get
    level = [tree]
    for _ in range(MAX_DEPTH):
        below: list = []
        append, extend = below.append, below.extend
        for node in level:
            kind = type(node)
            fields = child_fields(kind)
            if fields is None:
                fields = node_fields(kind)
            for name in fields:
                child = getattr(node, name, None)
                if type(child) is list:
                    extend(child)
                elif isinstance(child, AST):
                    append(child)
            if kind is Name:
                identifiers.add(node.id)
                if node.id in FLOAT64_NAMES:
                    seeds.events.append(node.lineno)
            elif kind is Attribute:
                identifiers.add(node.attr)
                if node.attr in FLOAT64_NAMES:
                    seeds.events.append(node.lineno)
                dotted = dotted_name(node)
                if dotted is not None:
                    references.add(dotted)
            elif kind is Constant:
                if type(node.value) is str:
                    strings.add(node.value)
                    seeds.see_string(node.value, node.lineno)
            elif kind is Call:
                func = node.func
                called = func.attr if type(func) is Attribute else func.id if type(func) is Name else None
                dotted = dotted_name(func)
                if dotted is not None:
                    dotted_calls.setdefault(dotted, []).append(node)
                if called in SEED_METHODS and type(func) is Attribute:
                    seeds.see_call(called, node.lineno)
                if called in KEPT_CALLS:
                    facts.calls_named.setdefault(called, []).append(node)
                if called is not None:
                    calls.add(called)
                    for argument in node.args:
                        if type(argument) is not Starred:
                            shape = _shape(argument)
                            if shape is not None:
                                first_arguments.add((called, shape))
                            break
                takes_device = type(func) is Attribute and called in DEVICE_TAKING_METHODS
                for argument in node.args:
                    literals = _strings_of(argument.value if type(argument) is Starred else argument)
                    if literals:
                        place(literals)
                        if takes_device:
                            place_device(literals)
                        elif type(func) is Name:
                            facts.name_call_strings.setdefault(func.id, []).extend(literals)
                for keyword in node.keywords:
                    literals = _strings_of(keyword.value)
                    if literals:
                        place(literals)
                        if keyword.arg in DEVICE_KEYWORDS:
                            place_device(literals)
                    elif keyword.arg == "map_location" and type(keyword.value) is ast.Dict:  # ``{"cuda:0": "cuda:%d" % rank}``
                        for value in keyword.value.values:
                            place_device(_strings_of(value))
                    if keyword.arg is not None:
                        keywords.add(keyword.arg)
                        shape = _shape(keyword.value)
                        if shape is not None:
                            keyword_values.add((keyword.arg, shape))
            elif kind is ast.alias:
                identifiers.update(node.name.split("."))
                if node.asname:
                    identifiers.add(node.asname)
                    facts.renames[node.asname] = node.name.rpartition(".")[2]
            elif kind is ast.ImportFrom or kind is ast.Import:
                if kind is ast.ImportFrom and node.module:
                    identifiers.update(node.module.split("."))
                for local, name in import_aliases(node).items():
                    imports.setdefault(local, set()).add(name)
            elif kind is ast.Assign or (kind is ast.AnnAssign and node.value is not None):
                literals = _strings_of(node.value)
                if literals:
                    place(literals)
                    if any(_names_a_device(target) for target in (node.targets if kind is ast.Assign else (node.target,))):
                        place_device(literals)
                    else:  # a string built with an index (``loc = "cuda:{}".format(rank)``) stands for a device
                        place_device(tuple((text, built) for text, built in literals if type(built) not in (Constant, ast.JoinedStr)))
            elif kind is ast.If or kind is ast.IfExp or kind is ast.BoolOp:
                conditions.append(node)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef or kind is ast.Lambda:
                if kind is not ast.Lambda:
                    definitions.append(node)
                arguments = node.args
                positional = (*arguments.posonlyargs, *arguments.args)
                defaulted = zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults)
                for parameter, default in (*defaulted, *zip(arguments.kwonlyargs, arguments.kw_defaults)):
                    if default is not None:
                        literals = _strings_of(default)
                        if literals:
                            place(literals)
                            if "device" in parameter.arg.lower():
                                place_device(literals)
                if kind is not ast.Lambda:
                    identifiers.add(node.name)
            elif kind is ast.ClassDef:
                definitions.append(node)
                identifiers.add(node.name)
                for base in node.bases:
                    if type(base) is Name:
                        bases.add(base.id)
                    elif type(base) is Attribute:
                        bases.add(base.attr)
            elif kind is ast.Assert:
                facts.asserts.append(node)
        level = [child for child in below if isinstance(child, AST)]  # lists hold None (``{**d}``) and str (``global``)
        if not level:
            return facts
    raise Unparsable(TOO_DEEP)


#: Methods (and, by their last name, functions) whose positional arguments can be a device:
#: ``x.to("cuda")``, ``torch.device("cuda")``, ``torch.set_default_device("mps")``,
#: ``torch.load(f, "cuda")``; a bare name's call too where an import binds it to one of them
#: (``dev("cuda")`` after ``from torch import device as dev``).
DEVICE_TAKING_METHODS = frozenset({"to", "device", "set_default_device", "load"})
#: The calls ``Facts.calls_named`` keeps, by the last name of their function (TDV101's).
KEPT_CALLS = frozenset({"cuda"})
#: Keyword arguments that can be a device: ``device=``, ``map_location=``,
#: ``torch.device(type=...)``, ``add_argument("--device", default=...)``.
DEVICE_KEYWORDS = frozenset({"device", "map_location", "type", "default"})


def _names_a_device(target: ast.expr) -> bool:
    """A name or attribute whose last name holds "device" (``device``, ``args.eval_device``)."""
    kind = type(target)
    name = target.id if kind is ast.Name else target.attr if kind is ast.Attribute else None
    return name is not None and "device" in name.lower()


def _strings_of(node: ast.expr) -> Tuple[Tuple[str, ast.expr], ...]:
    """The string a value is, or the strings its conditional expression's arms are, each with
    its literal."""
    kind = type(node)
    if kind is ast.IfExp:
        return _strings_of(node.body) + _strings_of(node.orelse)
    template = _template_head(node)
    if template is not None:
        return ((template, node),)
    text = literal_string(node) if kind is ast.Constant else fstring_head(node) if kind is ast.JoinedStr else None
    return () if text is None else ((text, node),)


def _template_head(node: ast.expr) -> Optional[str]:
    """The text a string built at run time starts with: ``"cuda:{}".format(rank)``, ``"cuda:%d" %
    rank`` and ``"cuda:" + str(rank)`` (read like the leading text of an f-string)."""
    kind = type(node)
    if kind is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "format":
        template = node.func.value
        if type(template) is ast.Constant and type(template.value) is str:
            return template.value.split("{", 1)[0]
    elif kind is ast.BinOp and type(node.op) is ast.Mod and type(node.left) is ast.Constant and type(node.left.value) is str:
        return node.left.value.split("%", 1)[0]  # ``"cuda:%d" % rank``
    elif kind is ast.BinOp and type(node.op) is ast.Add:
        head = node.left
        while type(head) is ast.BinOp and type(head.op) is ast.Add:
            head = head.left
        if type(head) is ast.Constant and type(head.value) is str:
            return head.value
    return None


def _shape(node: ast.expr) -> Optional[str]:
    """``INTEGER``, a name's or attribute's last name lowercased (then ``INDEXED`` where an integer
    indexes it), or None for anything else."""
    kind = type(node)
    if kind is ast.Subscript:
        index, indexed = node.slice, _shape(node.value)
        if type(index) is ast.Constant and type(index.value) is int and indexed not in (None, INTEGER) and not indexed.endswith(INDEXED):
            return indexed + INDEXED
        return None
    if kind is ast.Name:
        return node.id.lower()
    if kind is ast.Attribute:
        return node.attr.lower()
    if kind is ast.Constant and type(node.value) is int:
        return INTEGER
    return None
