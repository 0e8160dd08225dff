"""What upstream does to a spec 2.2 config before translating it to spec 3. Pure: no I/O.

The MCO reads a 2.2 config through a clean-up of its own before the translation: of files of
one path and units of one name only the last is kept, and both lists come out in reverse order
(it walks them from the end); the drop-ins of an earlier unit of a kept name are added to the
kept unit when it has none of that name; and every user must be `core`: they become one user,
the last one, with the SSH keys of all of them (the last one's first, then the earlier ones'
from the end), each key once. The order matters for the rendered name, and duplicates that
spec 3 refuses are accepted here, as upstream accepts them.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.findings import JsonPath

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

CORE_USER = "core"


class Spec2Error(ValueError):
    """A 2.2 config upstream refuses to clean up (a user other than `core`), located."""

    def __init__(self, path: JsonPath, message: str) -> None:
        self.path = path
        super().__init__(message)


def _entries(doc: Mapping[str, Any], section: str, key: str) -> list[dict[str, Any]] | None:
    """The section's entries when they are objects with a string `key`, else None (left as is)."""
    outer = doc.get("storage" if section == "files" else "systemd" if section == "units" else "passwd")
    entries = outer.get(section) if isinstance(outer, Mapping) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, Mapping) and isinstance(e.get(key), str) for e in entries
    ):
        return None
    return [dict(e) for e in entries]


def _last_of_each(entries: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    kept: dict[str, dict[str, Any]] = {}
    for entry in reversed(entries):
        if entry[key] not in kept:
            kept[entry[key]] = entry
        elif isinstance(entry.get("dropins"), list):
            unit = kept[entry[key]]
            dropins = list(unit.get("dropins") or [])
            names = {d.get("name") for d in dropins if isinstance(d, Mapping)}
            dropins += [d for d in entry["dropins"] if isinstance(d, Mapping) and d.get("name") not in names]
            unit["dropins"] = dropins
    return list(kept.values())


def _one_core_user(users: list[dict[str, Any]]) -> dict[str, Any]:
    for i in [len(users) - 1, *range(len(users) - 2, -1, -1)]:
        if users[i]["name"] != CORE_USER:
            raise Spec2Error(
                ("passwd", "users", i, "name"),
                f"unexpected user with name: {users[i]['name']}. Only core user is supported",
            )
    user = dict(users[-1])
    keys = [k for u in [users[-1], *reversed(users[:-1])] for k in u.get("sshAuthorizedKeys") or ()]
    user["sshAuthorizedKeys"] = list(dict.fromkeys(keys))
    return user


def upstream_cleanup(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`doc` (spec 2.2) as upstream hands it to the translation; Spec2Error for a non-core user."""
    out = dict(doc)
    files = _entries(doc, "files", "path")
    if files is not None:
        out["storage"] = {**doc["storage"], "files": _last_of_each(files, "path")}
    units = _entries(doc, "units", "name")
    if units is not None:
        out["systemd"] = {**doc["systemd"], "units": _last_of_each(units, "name")}
    users = _entries(doc, "users", "name")
    if users:
        out["passwd"] = {**doc["passwd"], "users": [_one_core_user(users)]}
    return out
