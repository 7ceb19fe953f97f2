"""The rule registry: every rule class of every family module, ordered by code."""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Dict, List, Type

from .rule import Rule

FAMILIES = (
    "placement", "device_index", "backends", "legacy_types", "backend_api", "distributed", "serialization",
    "dataflow", "dtypes", "hints", "noqa",
)


@lru_cache(maxsize=None)
def _load() -> Dict[str, Type[Rule]]:
    rules: Dict[str, Type[Rule]] = {}
    for family in FAMILIES:
        module = importlib.import_module(f"torchdevice_lint.rules.{family}")
        for rule in module.RULES:
            if rule.code in rules:
                raise RuntimeError(f"duplicate rule code {rule.code}")
            rules[rule.code] = rule
    return dict(sorted(rules.items()))


def all_rules() -> List[Type[Rule]]:
    return list(_load().values())


def rule_by_code(code: str) -> Type[Rule]:
    try:
        return _load()[code.upper()]
    except KeyError:
        raise KeyError(code) from None
