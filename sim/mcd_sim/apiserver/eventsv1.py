"""`events.k8s.io/v1` Events are the core Events under other field names; this maps between them."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# events.k8s.io/v1 field -> core/v1 field
FIELDS = {
    "regarding": "involvedObject",
    "related": "related",
    "note": "message",
    "reason": "reason",
    "type": "type",
    "action": "action",
    "eventTime": "eventTime",
    "series": "series",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
CORE_TO_V1 = {core: v1 for v1, core in FIELDS.items()}


def to_v1(core: Obj) -> Obj:
    out: Obj = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": core["metadata"]}
    for v1, field in FIELDS.items():
        if core.get(field) is not None:
            out[v1] = core[field]
    out.setdefault("eventTime", None)  # required in the schema, null for events created through core/v1
    return out


def to_core(v1: Obj) -> Obj:
    out: Obj = {"apiVersion": "v1", "kind": "Event", "metadata": v1.get("metadata") or {}}
    for name, field in FIELDS.items():
        if v1.get(name) is not None:
            out[field] = v1[name]
    return out


def selector_to_core(text: str) -> str:
    """Rewrite a field selector over events.k8s.io names into the core names the store filters on."""
    terms = []
    renames = (("regarding.", "involvedObject."), ("reportingController", "reportingComponent"))
    for raw in text.split(","):
        term = raw.strip()
        for prefix, core in renames:
            if term.startswith(prefix):
                term = core + term[len(prefix) :]
        terms.append(term)
    return ",".join(terms)
