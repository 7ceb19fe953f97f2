"""The rules, one module per family, and the list of them all (ordered by code) that the front
ends hand the engine."""

from __future__ import annotations

from typing import Dict, List, Type

from ..engine.rule import Rule
from . import (
    amp,
    backend_api,
    backends,
    dataflow,
    device_index,
    device_queries,
    device_tensors,
    distributed,
    hints,
    kernels,
    legacy_types,
    noqa,
    placement,
    serialization,
)

FAMILIES = (
    placement, device_index, backends, legacy_types, backend_api, amp, device_queries, distributed, serialization,
    kernels, device_tensors, dataflow, hints, noqa,
)


def _by_code() -> Dict[str, Type[Rule]]:
    rules: Dict[str, Type[Rule]] = {}
    for family in FAMILIES:
        for rule in family.RULES:
            if rule.code in rules:
                raise RuntimeError(f"duplicate rule code {rule.code}")
            rules[rule.code] = rule
    return dict(sorted(rules.items()))


RULES_BY_CODE = _by_code()


def all_rules() -> List[Type[Rule]]:
    return list(RULES_BY_CODE.values())


def rule_by_code(code: str) -> Type[Rule]:
    try:
        return RULES_BY_CODE[code.upper()]
    except KeyError:
        raise KeyError(code) from None
