"""What a parse of an Ignition config may take over from an earlier parse. Pure: no I/O.

A node moves between rendered configs that differ in a few of their thousands of files. A file
or unit declared exactly as in a config parsed before without a single finding was validated
then: it is taken over as the very same object, neither validated nor decoded again, and
compares equal by identity further on (the planner's diff, the drift monitor's expectations).
Everything that looks across items (duplicate paths, paths below files, unit templates ...)
is still checked on the whole new config.

Items match only when their JSON is the same value with the same types all the way down: `1`,
`1.0` and `true` are equal in Python but not in a config (the schema refuses `420.0` as a mode).
The new document's items that match are replaced by the earlier document's (equal) values, so
two configs alive at once share their decoded JSON too.
"""

from __future__ import annotations

import marshal
from collections.abc import Iterable, Mapping, Sequence

from mcd.config.ignition_model import SPEC3_VERSIONS, File, IgnitionResult, ParseOptions, Unit
from mcd.config.record import record

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

FILES = ("storage", "files")
UNITS = ("systemd", "units")


@record
class Reused:
    """Per item of the new document's `storage.files` and `systemd.units`: the earlier object
    declared alike, or None (validate and build it)."""

    files: Sequence[File | None]
    units: Sequence[Unit | None]
    # every file, unit, directory and link declared as in the earlier config, in its order: the
    # checks across paths (mcd.config.ignition_checks.check_paths) found nothing there, and
    # would find nothing here
    same_paths: bool = False

    def file(self, index: int) -> File | None:
        return self.files[index] if index < len(self.files) else None

    def unit(self, index: int) -> Unit | None:
        return self.units[index] if index < len(self.units) else None

    def known(self) -> dict[tuple[str, str], frozenset[int]]:
        """The indices of the taken-over items, by list (the schema check skips them)."""
        return {
            FILES: frozenset(i for i, f in enumerate(self.files) if f is not None),
            UNITS: frozenset(i for i, u in enumerate(self.units) if u is not None),
        }


def reuse(
    earlier_doc: object, earlier: IgnitionResult, doc: Mapping[str, Any], version: str, options: ParseOptions
) -> Reused | None:
    """What `doc` (spec `version`, to be parsed with `options`) can take over from `earlier`, the
    parse of `earlier_doc`; None when nothing (the earlier parse had findings, another version or
    other options, or is spec 2, whose items are translated before they are built)."""
    config = earlier.config
    if (
        config is None
        or earlier.findings
        or earlier.options != options
        or config.version != version
        or version not in SPEC3_VERSIONS
        or not isinstance(earlier_doc, dict)
    ):
        return None
    old_files, old_units = _items(earlier_doc, FILES), _items(earlier_doc, UNITS)
    if len(old_files) != len(config.files) or len(old_units) != len(config.units):
        return None  # not the document that parse built its config from
    new_files, new_units = _items(doc, FILES), _items(doc, UNITS)
    files_alike = _all_alike(old_files, new_files)
    units_alike = _all_alike(old_units, new_units)
    if files_alike:
        new_files[:] = old_files  # shared, as below
        file_hits: list[File | None] = list(config.files)
    else:
        files = {_key(raw, "path"): (raw, f) for raw, f in zip(old_files, config.files, strict=True)}
        file_hits = _matches(files, new_files, "path")
    if units_alike:
        new_units[:] = old_units
        unit_hits: list[Unit | None] = list(config.units)
    else:
        units = {_key(raw, "name"): (raw, u) for raw, u in zip(old_units, config.units, strict=True)}
        unit_hits = _matches(units, new_units, "name")
    same_paths = (
        files_alike
        and units_alike
        and all(same_json(_part(earlier_doc, FILES[0], k), _part(doc, FILES[0], k)) for k in _OTHER_PATHS)
    )
    return Reused(file_hits, unit_hits, same_paths)


# the storage sections whose paths share one namespace with the files
_OTHER_PATHS = ("directories", "links")


def _part(doc: Mapping[str, Any], section: str, key: str) -> object:
    part = doc.get(section)
    return part.get(key) if type(part) is dict else None


def _all_alike(earlier: list[Any], items: list[Any]) -> bool:
    """Whether two lists of decoded JSON are the same, types included. Equality first, in C, which
    stops at the first item that differs (the usual case: an update changes a few files); only
    equal lists are then compared as marshal's format 2 bytes, which write every value with its
    exact type (`1`, `1.0` and `true` differ) and no references between objects, so equal bytes
    mean equal lists. Unequal bytes may still be the same lists (keys in another order): the
    caller then matches item by item."""
    if len(earlier) != len(items) or not items or earlier != items:
        return False
    return marshal.dumps(earlier, 2) == marshal.dumps(items, 2)


def _matches(known: Mapping[object, tuple[Any, Any]], items: list[Any], name: str) -> list[Any]:
    """The earlier object of each item declared alike, or None.

    An item declared alike is also replaced in `items` (the new document) by the earlier one's
    JSON value, equal to it down to the types: the two documents share it, so a config held
    beside the one it was parsed like (the update's, the MachineConfig watch's) costs only what
    differs, not a second copy of thousands of decoded files.
    """
    out = []
    for i, raw in enumerate(items):
        hit = known.get(_key(raw, name))
        if hit is not None and _same_item(hit[0], raw):
            items[i] = hit[0]
            out.append(hit[1])
        else:
            out.append(None)
    return out


def _items(doc: Mapping[str, Any], where: tuple[str, str]) -> list[Any]:
    part = doc.get(where[0])
    items = part.get(where[1]) if type(part) is dict else None
    return items if type(items) is list else []


def _key(raw: object, name: str) -> object:
    value = raw.get(name) if type(raw) is dict else None
    return value if type(value) is str else None


def _same_item(a: Any, b: Any) -> bool:
    """`same_json` for one file or unit: equality in C first, then the types as marshal's bytes
    (one call each side, in C: a fraction of walking the item); items equal in another key order
    are left to `same_json`."""
    if type(a) is not type(b) or a != b:
        return False
    return marshal.dumps(a, 2) == marshal.dumps(b, 2) or _same_types(a, b)


def same_json(a: object, b: object) -> bool:
    """Whether two decoded JSON values are the same, types included (`1` is not `1.0` or `true`)."""
    return type(a) is type(b) and a == b and _same_types(a, b)


def _same_types(a: object, b: object) -> bool:
    """For two equal values of one type: whether their members have the same types all the way
    down (equality said the rest). A level's member types are listed in C (`map` of `type`) and
    compared at once; only containers are called into (most members are strings)."""
    if type(a) is dict:
        assert isinstance(b, dict)
        if list(a) != list(b):
            return _same_types_by_key(a, b)  # equal, in another key order
        xs: Iterable[object] = a.values()
        ys: Iterable[object] = b.values()
    elif type(a) is list:
        assert isinstance(b, list)
        xs, ys = a, b
    else:
        return True
    types = list(map(type, xs))
    if types != list(map(type, ys)):
        return False
    if dict in types or list in types:
        for x, y, t in zip(xs, ys, types, strict=True):
            if t in _CONTAINERS and not _same_types(x, y):
                return False
    return True


def _same_types_by_key(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    for key, x in a.items():
        y = b[key]
        if type(x) is not type(y) or (type(x) in _CONTAINERS and not _same_types(x, y)):
            return False
    return True


_CONTAINERS = frozenset((dict, list))
