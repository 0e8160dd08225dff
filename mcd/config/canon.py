"""Canonical, hashable form of JSON values for comparisons. Pure: no I/O.

Upstream compares Ignition sections with Go's ``reflect.DeepEqual`` on structs decoded from
JSON and re-encoded with ``omitempty``. Rendered configs therefore never distinguish an
absent key from ``null``, ``[]`` or ``{}``; the canonical form drops those so that two
configs that upstream would find equal compare equal here too.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

    Canon = Any  # a nested tuple structure made of str/int/float/bool and tuples
else:
    Canon = object  # the alias is the type checker's: nothing checks a value against it


def canon(value: object) -> Canon:
    """Hashable canonical form: dicts become sorted key/value tuples, empty values vanish."""
    if isinstance(value, dict):
        items = []
        for key in sorted(value):
            item = canon(value[key])
            if item is not None:
                items.append((key, item))
        return tuple(items) if items else None
    if isinstance(value, list):
        seq = tuple(canon(v) for v in value)
        return ("__list__", *seq) if seq else None
    return value
