"""What a parse of an Ignition config may take over from an earlier parse. Pure: no I/O.

A node moves between rendered configs that differ in a few of their thousands of files. A file
or unit declared exactly as in a config parsed before without a single finding was validated
then: it is taken over as the very same object, neither validated nor decoded again, and
compares equal by identity further on (the planner's diff, the drift monitor's expectations).
Everything that looks across items (duplicate paths, paths below files, unit templates ...)
is still checked on the whole new config.

Items match only when their JSON is the same value with the same types all the way down: `1`,
`1.0` and `true` are equal in Python but not in a config (the schema refuses `420.0` as a mode).
Lists of one length are compared a run of items at a time, by position; the runs that differ,
item by item, by path or name. The new document's items that match are replaced by the earlier
document's (equal) values, so two configs alive at once share their decoded JSON too.
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
    # every file at the path of the earlier config's file at its index, and every unit,
    # directory and link declared as there, in its order: the checks across paths
    # (mcd.config.ignition_checks.check_paths) found nothing there, and would find nothing here
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
        file_paths_alike = True
    else:
        file_hits, file_paths_alike = _aligned(old_files, config.files, new_files, "path")
    if units_alike:
        new_units[:] = old_units
        unit_hits: list[Unit | None] = list(config.units)
    else:
        unit_hits, _ = _aligned(old_units, config.units, new_units, "name")
    # the checks across paths look at the files' paths, not at their contents: a file changed in
    # place leaves them as they were (units' paths depend on more than their names: all alike)
    same_paths = (
        file_paths_alike
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


# items compared a run at a time (equality, then one marshal call a side): an update changes a few
# of thousands of items, and one call per item costs more than the bytes it compares
_RUN = 64


def _aligned(
    earlier: list[Any], objects: Sequence[Any], items: list[Any], name: str
) -> tuple[list[Any], bool]:
    """The earlier object of each item declared alike (or None), and whether every item is named
    as the earlier item at its index (`name`: "path" or "name").

    Lists of one length are compared a run of `_RUN` items at a time: a run the same down to the
    types is taken over by position (names are unique in an earlier parse without findings, so
    the earlier item at the same index is the one of that name); the items of the other runs, and
    of lists of different lengths, are matched by name (`_matches`)."""
    if len(earlier) != len(items):
        return _matches(_known(earlier, objects, name), items, name), False
    hits: list[Any] = [None] * len(items)
    left: list[int] = []
    for start in range(0, len(items), _RUN):
        end = start + _RUN
        run, before = items[start:end], earlier[start:end]
        if run == before and marshal.dumps(run, 2) == marshal.dumps(before, 2):
            items[start:end] = before  # shared, as in `_matches`
            hits[start:end] = objects[start:end]
        else:
            left.extend(range(start, min(end, len(items))))
    named_alike = all(_key(earlier[i], name) == _key(items[i], name) for i in left)
    if left:
        rest = [items[i] for i in left]
        for i, hit, raw in zip(left, _matches(_known(earlier, objects, name), rest, name), rest, strict=True):
            hits[i], items[i] = hit, raw
    return hits, named_alike


def _known(earlier: list[Any], objects: Sequence[Any], name: str) -> dict[object, tuple[Any, Any]]:
    return {_key(raw, name): (raw, obj) for raw, obj in zip(earlier, objects, strict=True)}


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
