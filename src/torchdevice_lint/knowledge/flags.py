"""User flags that choose the GPU by default are not availability checks.

``def totensor(data, cuda=True): ... if cuda: data.cuda()`` and
``parser.add_argument("--cuda", default=True)`` run the CUDA branch on a CPU-only machine unless
the user says otherwise, so such a branch is reported like unguarded code. A flag derived from an
availability check (``args.cuda = not args.no_cuda and torch.cuda.is_available()``) stays a guard.
An opt-out flag parsed in another file (``opt.no_cuda``) is taken as off, argparse's default.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, string_value

AVAILABILITY_WORDS = ("is_available", "device_count")


def mentions_availability(node: cst.CSTNode) -> bool:
    from ..syntax.cst_walk import nodes_of

    return any(
        isinstance(call.func, cst.Attribute) and call.func.attr.value in AVAILABILITY_WORDS
        for call in nodes_of(node, cst.Call)
    )


def _opts_out(name: str) -> bool:
    """``no_cuda``, ``disable_cuda``, ``cpu_only``: flags the user sets to leave the GPU, off
    unless given (argparse's ``store_true``)."""
    lowered = name.lower()
    return lowered.startswith(("no_", "disable_")) and ("cuda" in lowered or "gpu" in lowered) or lowered in {
        "cpu", "use_cpu", "cpu_only", "force_cpu"
    }


def _constant(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


class FlagDefaults:
    """Default values of the file's user flags, read lazily: parameters with a boolean
    default, ``add_argument`` options, attributes assigned ``not other_flag``."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._attributes: Optional[Dict[str, Optional[bool]]] = None
        #: (id of the function, parameter) -> default: each condition on it asks again.
        self._parameters: Dict[Tuple[int, str], Optional[bool]] = {}

    def default(self, flag: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[bool]:
        """The flag's default, or None when unknown or derived from an availability check."""
        if isinstance(flag, cst.Name):
            return self._parameter_default(flag.value, function)
        if isinstance(flag, cst.Attribute):
            defaults = self._attribute_defaults()
            name = flag.attr.value
            if name not in defaults and _opts_out(name):
                return False  # ``opt.no_cuda`` parsed in another file: a store_true opt-out
            return defaults.get(name)
        return None

    def _parameter_default(self, name: str, function: Optional[cst.FunctionDef]) -> Optional[bool]:
        if function is None:
            return None
        key = (id(function), name)
        if key not in self._parameters:
            self._parameters[key] = self._read_parameter_default(name, function)
        return self._parameters[key]

    def _read_parameter_default(self, name: str, function: cst.FunctionDef) -> Optional[bool]:
        params = function.params
        for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            if param.name.value == name:
                value = _constant(param.default)
                if value is None:
                    return None
                reassigned = [a for a in _assignments(function.body, cst.Name) if a.targets[0].target.value == name]
                return None if any(mentions_availability(a.value) for a in reassigned) else value
        return None

    def _attribute_defaults(self) -> Dict[str, Optional[bool]]:
        if self._attributes is None:
            found: Dict[str, Optional[bool]] = {}
            from ..syntax.cst_walk import nodes_of

            nodes = nodes_of(self.module, cst.Call, cst.Assign)  # one walk of the module for both
            for call in (n for n in nodes if type(n) is cst.Call and isinstance(n.func, cst.Attribute) and n.func.attr.value == "add_argument"):
                dest, default = _argparse_flag(call)
                if dest is not None and default is not None:
                    found.setdefault(dest, default)
            derived = set()
            for assign in (n for n in nodes if type(n) is cst.Assign and _single_target(n, cst.Attribute)):
                name = assign.targets[0].target.attr.value
                if mentions_availability(assign.value):
                    derived.add(name)
                elif isinstance(assign.value, cst.UnaryOperation) and isinstance(assign.value.operator, cst.Not):
                    negated = found.get(last_name(assign.value.expression) or "")
                    if negated is not None:
                        found[name] = not negated
            for name in derived:
                found[name] = None
            self._attributes = found
        return self._attributes


def _assignments(root: cst.CSTNode, target_type: type) -> list:
    """``x = ...`` statements with one target of ``target_type`` in ``root``'s tree, in order
    (``matchers.findall`` would rebuild the whole tree: about a LibCST parse for a module)."""
    from ..syntax.cst_walk import nodes_of

    return [a for a in nodes_of(root, cst.Assign) if _single_target(a, target_type)]


def _single_target(assign: cst.Assign, target_type: type) -> bool:
    return len(assign.targets) == 1 and type(assign.targets[0].target) is target_type


def _argparse_flag(call: cst.Call):
    """(dest, default) of ``add_argument("--use-cuda", default=True)`` or of a
    ``store_true``/``store_false`` option; (None, None) when not a boolean option."""
    options = [string_value(a.value) for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    # argparse's dest: the first long option, else the first short one (`-no_cuda`)
    flags = [o for o in options if o and o.startswith("--")] or [o for o in options if o and o.startswith("-")]
    dest = string_value(keywords["dest"]) if "dest" in keywords else (
        flags[0].lstrip("-").replace("-", "_") if flags else None
    )
    default = _constant(keywords.get("default"))
    action = string_value(keywords["action"]) if "action" in keywords else None
    if default is None and action in ("store_true", "store_false"):
        default = action == "store_false"
    return dest, default
