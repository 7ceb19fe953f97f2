"""The value lattice of the device inference: where a value lives (device, the module's device,
CPU, plain Python), joins of values and environments, and the events the rules read."""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass, field, replace
from typing import Dict, Iterable, List, Optional, Tuple

MAX_LOOP_PASSES = 3
#: Environment entries kept for factory sites in one file (each site keeps a copy of its
#: environment): past it, sites go unrecorded and their fixes become suggestions, so a
#: generated module with thousands of factories costs linear time and memory, not quadratic.
MAX_RECORDED_ENTRIES = 200_000


class Place(enum.Enum):
    DEVICE = "device"  # moved to or created on an accelerator (on a GPU machine)
    MODULE = "module"  # on the module's device: forward's tensors, parameters, buffers
    CPU = "cpu"
    PYTHON = "python"  # a number, string, bool, None, shape: not a tensor
    LIST = "list"  # a Python list or tuple of plain values (data for ``torch.tensor``)
    SEQUENCE = "sequence"  # a tuple or list literal whose elements are tracked one by one


class Rank(enum.Enum):
    SCALAR = "0-dim"  # a legal partner of a device tensor
    ARRAY = "n-dim"
    UNKNOWN = "unknown"


ON_DEVICE = (Place.DEVICE, Place.MODULE)
TENSOR_PLACES = (Place.DEVICE, Place.MODULE, Place.CPU)


@dataclass(frozen=True)
class Value:
    place: Place
    rank: Rank = Rank.UNKNOWN
    #: Known not to require grad (factories, ``.detach()``, computed under ``no_grad``).
    grad_free: bool = False
    #: Known to be a tensor, not a module or a container that has ``.to()``.
    tensor: bool = False
    #: Known to be an ``nn.Module`` (a call with tensors of the other side raises).
    module: bool = False
    #: Moved in place by a bare ``obj.to(device)``: a module or the like, only ever called.
    moved_in_place: bool = False
    #: An ``nn.Parameter``: it moves with its module.
    parameter: bool = False
    #: For modules: the class name (``LSTM``), which tells which call arguments must match.
    constructor: Optional[str] = None
    #: For CPU values: the factory calls without ``device=`` that made it (a fix gives them
    #: ``device=``); None when some part did not come from such a factory.
    origins: Optional[frozenset] = None
    #: Plain (unregistered) tensor attributes set in ``__init__`` this value comes from.
    stuck_attributes: frozenset = frozenset()
    #: For Python values that name a device: where it points.
    device_spec: Optional[Place] = None
    elements: Tuple[Optional["Value"], ...] = ()


PYTHON = Value(Place.PYTHON)
PYTHON_SCALAR = Value(Place.PYTHON, rank=Rank.SCALAR)
LIST = Value(Place.LIST)


@dataclass
class Scope:
    """What the analysis knows about the function being walked."""

    node: ast.AST  # FunctionDef or Module
    #: Tensor parameters, in order: their values are on the module's device.
    tensor_params: Tuple[str, ...] = ()
    class_facts: Optional["ClassFacts"] = None
    #: Inside forward or a function receiving tensors, where TDV403 applies.
    tensor_function: bool = False


@dataclass(frozen=True)
class NumpyCall:
    call: ast.Call
    receiver: Value


@dataclass(frozen=True)
class Operand:
    value: Value
    #: Dotted name of the operand when it is a plain name (``x``, ``self.w``), for fixes.
    key: Optional[str]


@dataclass(frozen=True)
class Mix:
    """An operation combining a device-side operand with a non-0-dim CPU operand."""

    node: ast.AST
    device_side: Operand
    cpu_sides: Tuple[Operand, ...]
    #: Other device-side tensors of the operation whose names could spell the device.
    device_partners: Tuple[Operand, ...]
    scope: Scope
    #: A module called with tensors of the other side (no fix can be written at the call).
    module_call: bool = False


@dataclass
class FileInference:
    numpy_calls: List[NumpyCall] = field(default_factory=list)
    mixes: List[Mix] = field(default_factory=list)
    #: id(factory call) -> the environment where it was evaluated.
    factory_sites: Dict[int, Dict[str, Optional[Value]]] = field(default_factory=dict)
    #: Entries held by ``factory_sites`` (bounded by ``MAX_RECORDED_ENTRIES``).
    recorded_entries: int = 0
    #: Calls that make a float64 tensor on a device (``.double()`` of a device tensor, a
    #: factory with ``dtype=torch.float64`` on one, ``.to(device, torch.float64)``): TDV601.
    float64_calls: List[ast.Call] = field(default_factory=list)
    #: id(ast node) -> the LibCST node at its place, once a rule asked (``engine/bridge.py``).
    located: Optional[Dict[int, object]] = None

    def reported_nodes(self) -> List[ast.AST]:
        """Every node a rule may report or fix: events, and the factories of their CPU sides."""
        nodes: List[ast.AST] = [event.call for event in self.numpy_calls] + list(self.float64_calls)
        for mix in self.mixes:
            nodes.append(mix.node)
            for side in mix.cpu_sides:
                nodes.extend(side.value.origins or ())
        return nodes


@dataclass
class ClassFacts:
    module_like: bool
    attributes: Dict[str, Optional[Value]] = field(default_factory=dict)


def join_values(a: Optional[Value], b: Optional[Value]) -> Optional[Value]:
    if a is b or a == b:
        return a
    if a is None or b is None or a.place != b.place:
        return None
    if a.place == Place.SEQUENCE:
        if len(a.elements) != len(b.elements):
            return None
        return replace(a, elements=tuple(join_values(x, y) for x, y in zip(a.elements, b.elements)))
    origins = a.origins | b.origins if a.origins is not None and b.origins is not None else None
    return Value(
        place=a.place,
        rank=a.rank if a.rank == b.rank else Rank.UNKNOWN,
        grad_free=a.grad_free and b.grad_free,
        tensor=a.tensor and b.tensor,
        module=a.module and b.module,
        moved_in_place=a.moved_in_place and b.moved_in_place,
        constructor=a.constructor if a.constructor == b.constructor else None,
        parameter=a.parameter and b.parameter,
        origins=origins,
        stuck_attributes=a.stuck_attributes | b.stuck_attributes,
        device_spec=a.device_spec if a.device_spec == b.device_spec else None,
    )


Env = Dict[str, Optional[Value]]


def join_envs(envs: Iterable[Optional[Env]]) -> Optional[Env]:
    live = [env for env in envs if env is not None]
    if not live:
        return None
    if len(live) == 1:
        return dict(live[0])
    keys = set().union(*live)
    joined: Env = {}
    for key in keys:
        value = live[0].get(key)
        present = key in live[0]
        for other in live[1:]:
            present = present and key in other
            value = join_values(value, other.get(key))
        # A key absent on one side falls back to class facts there: unknown after the join.
        joined[key] = value if present else None
    return joined


def element_of(value: Optional[Value]) -> Optional[Value]:
    """What unpacking or iterating a value yields."""
    if value is None:
        return None
    if value.place in ON_DEVICE:
        return Value(value.place)
    if value.place == Place.CPU and value.tensor:
        return Value(Place.CPU, tensor=True, grad_free=value.grad_free, origins=value.origins)
    if value.place == Place.LIST:
        return PYTHON
    return None
