"""Timing with device events (``start.elapsed_time(end)`` on ``torch.cuda.Event``s): which
events make up one measurement, and which of their uses a rewrite to host timing can take.
TDV306 asks it; kept apart from the rule so that each stays readable."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name
from .value_checks import assigned_values, name_uses

#: Event classes and the device whose synchronisation the host timing needs. ``torch.Event``
#: follows the current accelerator, and the CPU backend refuses its ``record()``.
EVENT_CLASSES = {"torch.cuda.Event": "cuda", "torch.Event": "accelerator"}
#: ``torch.accelerator.synchronize`` came in 2.6.
ACCELERATOR_SINCE = (2, 6)


@dataclass
class TimingIdiom:
    """The events of one measurement and every statement of theirs the host timing rewrites."""

    backend: str
    names: Set[str]
    creations: List[cst.Call] = field(default_factory=list)
    records: List[cst.SimpleStatementLine] = field(default_factory=list)
    waits: List[cst.SimpleStatementLine] = field(default_factory=list)
    readings: List[cst.Call] = field(default_factory=list)
    #: Operator expressions around each reading (``x / start.elapsed_time(end)``): parenthesize.
    inside_operators: Set[int] = field(default_factory=set)
    rewritable: bool = True


def timing_idiom(ctx, scope: cst.CSTNode, start: str, end: str) -> Optional[TimingIdiom]:
    """The measurement ``start.elapsed_time(end)`` belongs to in ``scope`` (with the events other
    readings chain to it), if both are events every assignment creates (or sets to None)."""
    events: Dict[str, str] = {}
    for name, values in assigned_values(scope, nested=True).items():
        kinds = {event_class(ctx, value) for value in values if not is_none(value)}
        if len(kinds) == 1 and None not in kinds:
            events[name] = kinds.pop()
    if start not in events or end not in events or events[start] != events[end]:
        return None
    idiom = TimingIdiom(EVENT_CLASSES[events[start]], {start, end})
    uses = name_uses(scope, set(events))
    for use in uses:  # a measurement may chain several events: ``a.elapsed_time(b)``, ``b...(c)``
        parents = use.parents
        if len(parents) > 2 and isinstance(parents[0], cst.Attribute) and reads(parents[1]):
            pair = {use.name, dotted_name(parents[1].args[0].value)}
            if idiom.names.intersection(pair) and pair <= set(events) and len({events[n] for n in pair}) == 1:
                idiom.names.update(pair)
    clocks: Dict[str, Set[int]] = {}
    for use in uses:
        if use.name in idiom.names:
            _classify(ctx, idiom, use.node, use.parents)
            if "." not in use.name and not isinstance(use.parents[0], cst.AssignTarget):
                clocks.setdefault(use.name, set()).add(id(use.function))
    # a bare name assigned in a nested function is that function's local: every read must be there
    if any(len(functions) > 1 for functions in clocks.values()):
        idiom.rewritable = False
    return idiom


def _classify(ctx, idiom: TimingIdiom, node: cst.CSTNode, parents: tuple) -> None:
    """Files one use of an event (``parents``: its ancestors, innermost first) with the idiom;
    any use the host timing cannot take makes the idiom unrewritable."""
    parent, grandparent, above = (parents + (None, None, None))[:3]
    if isinstance(parent, cst.AssignTarget) and (event_class(ctx, grandparent.value) or is_none(grandparent.value)):
        if not is_none(grandparent.value):
            idiom.creations.append(grandparent.value)
        return
    if isinstance(parent, cst.Comparison) and all(is_none(target.comparator) for target in parent.comparisons):
        return
    if isinstance(parent, cst.Arg) and reads(grandparent):
        return  # the end event of a reading, rewritten with it
    method = parent.attr.value if isinstance(parent, cst.Attribute) and parent.value is node else None
    statement = _statement_of_call(parents)
    if method == "elapsed_time" and reads(grandparent):
        idiom.readings.append(grandparent)
        left_operand = isinstance(above, cst.BinaryOperation) and above.left is grandparent and not isinstance(above.operator, cst.Power)
        if isinstance(above, (cst.BinaryOperation, cst.UnaryOperation, cst.Attribute, cst.Subscript)) and not left_operand:
            idiom.inside_operators.add(id(grandparent))
    elif method == "record" and statement is not None:
        idiom.records.append(statement)
    elif method in ("synchronize", "wait") and statement is not None and not grandparent.args:
        idiom.waits.append(statement)
    else:
        idiom.rewritable = False


def event_class(ctx, value) -> Optional[str]:
    name = ctx.qualname(value.func) if isinstance(value, cst.Call) else None
    return name if name in EVENT_CLASSES else None


def reads(call) -> bool:
    """``a.elapsed_time(b)``."""
    method = call.func.attr.value if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) else None
    return method == "elapsed_time" and len(call.args) == 1 and call.args[0].keyword is None


def is_none(node) -> bool:
    return isinstance(node, cst.Name) and node.value == "None"


def _statement_of_call(parents: tuple) -> Optional[cst.SimpleStatementLine]:
    """The line ``event.method(...)`` stands alone on (``parents``: from the attribute up)."""
    if len(parents) < 4:
        return None
    _, call, expression, line = parents[:4]
    if isinstance(expression, cst.Expr) and expression.value is call and isinstance(line, cst.SimpleStatementLine):
        return line if len(line.body) == 1 else None
    return None


#: Methods that put their argument into a container (``self.start_events[key].append(s)``).
STORING_METHODS = frozenset({"append", "appendleft", "insert", "extend", "add", "put", "setdefault"})


def kept_in_container(stack: List[cst.CSTNode], function: cst.CSTNode) -> bool:
    """Whether the event created by ``stack[-1]`` (the visitor's stack) goes into a list, a dict
    or a set, directly or through the name it is assigned in ``function`` (fairseq's
    ``CudaTimer``: ``s = torch.cuda.Event(...)``, ``self.start_events[key].append(s)``): its
    readings then take events out of the container, which no name follows."""
    creation, parents = stack[-1], tuple(reversed(stack[:-1]))
    if _stores(creation, parents):
        return True
    assign = parents[0] if parents else None
    if not isinstance(assign, cst.Assign) or assign.value is not creation:
        return False
    names = {dotted_name(target.target) for target in assign.targets} - {None}
    return any(_stores(use.node, use.parents) for use in name_uses(function, names))


def _stores(value: cst.CSTNode, parents: tuple) -> bool:
    """``value`` (``parents``: its ancestors, innermost first) is put into a container."""
    parent, grandparent, above = (tuple(parents) + (None, None, None))[:3]
    if isinstance(parent, cst.Arg) and isinstance(grandparent, cst.Call) and isinstance(grandparent.func, cst.Attribute):
        return grandparent.func.attr.value in STORING_METHODS
    if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        return parent.elt is value
    if isinstance(parent, (cst.DictElement, cst.DictComp)):
        return parent.value is value
    if isinstance(parent, cst.Element):  # in a display, not ``start, end = Event(), Event()``
        unpacked = isinstance(grandparent, cst.Tuple) and isinstance(above, cst.Assign) and any(
            isinstance(target.target, (cst.Tuple, cst.List)) for target in above.targets
        )
        return not unpacked
    if isinstance(parent, cst.Assign) and parent.value is value:
        return any(isinstance(target.target, cst.Subscript) for target in parent.targets)
    return False
