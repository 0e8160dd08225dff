"""Label and field selectors as the list and watch endpoints accept them. No I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from mcd_sim.apiserver.errors import ApiError, bad_request

Predicate = Callable[[Mapping[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return [t.strip() for t in terms if t.strip()]


LabelCheck = Callable[[Mapping[str, str]], bool]


def _label_is(key: str, value: str, *, negate: bool) -> LabelCheck:
    return lambda labels: (labels.get(key) == value) != negate


def _label_in(key: str, allowed: set[str], *, negate: bool) -> LabelCheck:
    return lambda labels: (labels.get(key) in allowed) != negate


def _label_exists(key: str, *, negate: bool) -> LabelCheck:
    return lambda labels: (key in labels) != negate


def _field_is(key: str, value: str, *, negate: bool) -> Predicate:
    return lambda obj: (field_value(obj, key) == value) != negate


def label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` -> predicate over a labels map."""
    checks: list[LabelCheck] = []
    for term in _split_terms(text):
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = (s.strip() for s in term.partition(op))
                if not key:
                    raise bad_request(f"unable to parse requirement: {term!r}")
                if op == "!=":
                    checks.append(_label_is(key, value, negate=True))
                else:
                    checks.append(_label_is(key, value, negate=False))
                break
        else:
            match = _SET_RE.match(term)
            if not match:
                raise bad_request(f"unable to parse requirement: {term!r}")
            negate, key, setop, values = match.groups()
            if setop:
                if negate:
                    raise bad_request(f"unable to parse requirement: {term!r}")
                allowed = {v.strip() for v in values.split(",") if v.strip()}
                if setop == "in":
                    checks.append(_label_in(key, allowed, negate=False))
                else:
                    checks.append(_label_in(key, allowed, negate=True))
            elif negate:
                checks.append(_label_exists(key, negate=True))
            else:
                checks.append(_label_exists(key, negate=False))
    return lambda labels: all(check(labels) for check in checks)


def field_value(obj: Mapping[str, Any], field: str) -> str:
    """The string form of a dotted field, as kube-apiserver's field sets render it."""
    cur: Any = obj
    for part in field.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    if field == "source" and isinstance(cur, Mapping):
        return str(cur.get("component", ""))
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if field == "spec.unschedulable" and cur is None:
        return "false"
    return "" if cur is None else str(cur)


def field_selector(text: str, supported: tuple[str, ...]) -> Callable[[Mapping[str, Any]], bool]:
    """`spec.nodeName=n1,metadata.name!=x` over the fields a resource supports."""
    allowed = ("metadata.name", "metadata.namespace", *supported)
    checks: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in _split_terms(text):
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = (s.strip() for s in term.partition(op))
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        if key not in allowed:
            raise bad_request(f"field label not supported: {key}")
        if op == "!=":
            checks.append(_field_is(key, value, negate=True))
        else:
            checks.append(_field_is(key, value, negate=False))
    return lambda obj: all(check(obj) for check in checks)


def object_filter(label: str | None, field: str | None, supported: tuple[str, ...]) -> Predicate:
    """One predicate for both selectors (either may be absent); raises ApiError 400 when malformed."""
    try:
        by_label = label_selector(label) if label else None
        by_field = field_selector(field, supported) if field else None
    except ApiError:
        raise

    def matches(obj: Mapping[str, Any]) -> bool:
        if by_label is not None:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if not by_label(labels):
                return False
        return by_field is None or by_field(obj)

    return matches
