"""A MachineConfigPool's `machineConfigSelector`, matched as Kubernetes matches a label selector.
Pure: no I/O.

`matchLabels` and every `matchExpressions` entry must hold (`In`: the label is one of the
values; `NotIn`: it is absent or none of them; `Exists`; `DoesNotExist`). The render controller
renders nothing for a pool whose selector is empty (it would select every MachineConfig) and
says so; a missing selector selects nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.findings import JsonPath

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

SELECTING_ALL = "This machineconfigpool is selecting all machineconfigs. A non-empty selector is required."
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class SelectorError(ValueError):
    """A selector Kubernetes would refuse, located within the selector."""

    def __init__(self, path: JsonPath, message: str) -> None:
        self.path = path
        super().__init__(message)


def check_selector(selector: object) -> Mapping[str, Any]:
    """`selector` as a mapping, after the checks the API server makes; SelectorError otherwise,
    and for an empty selector (upstream's SelectingAll)."""
    if not isinstance(selector, Mapping):
        raise SelectorError((), "expected a label selector (matchLabels, matchExpressions)")
    labels = selector.get("matchLabels") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise SelectorError(("matchLabels",), "expected an object of strings")
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError(("matchExpressions",), "expected a list")
    for i, expr in enumerate(expressions):
        where: JsonPath = ("matchExpressions", i)
        if not isinstance(expr, Mapping) or not isinstance(expr.get("key"), str):
            raise SelectorError(where, "expected an object with a key")
        operator, values = expr.get("operator"), expr.get("values") or []
        if operator not in _OPERATORS:
            raise SelectorError((*where, "operator"), f"{operator!r} is not a valid label selector operator")
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError((*where, "values"), "expected a list of strings")
        if operator in ("In", "NotIn") and not values:
            raise SelectorError((*where, "values"), f"values must be non-empty for operator {operator}")
        if operator in ("Exists", "DoesNotExist") and values:
            raise SelectorError((*where, "values"), f"values must be empty for operator {operator}")
    if not labels and not expressions:
        raise SelectorError((), SELECTING_ALL)
    return selector


def selects(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """Whether a selector selects an object with these labels; an empty selector selects every
    label set (check_selector refuses it where that is wrong), an unknown operator none (the
    pool controller also matches node selectors it has not checked)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, operator, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
        present = key in labels
        if operator not in _OPERATORS:
            return False
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def selector_text(selector: Mapping[str, Any]) -> str:
    """`key=value,key in (a,b),!key …`, sorted by key as labels.Selector's String() prints it."""
    parts: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, op = str(expr.get("key", "")), expr.get("operator", "")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        parts.append((key, _expression_text(key, op, values)))
    return ",".join(t for _, t in sorted(parts))


def _expression_text(key: str, op: object, values: str) -> str:
    if op == "In":
        return f"{key} in ({values})"
    if op == "NotIn":
        return f"{key} notin ({values})"
    if op == "Exists":
        return key
    if op == "DoesNotExist":
        return f"!{key}"
    return f"{key} {op}"
