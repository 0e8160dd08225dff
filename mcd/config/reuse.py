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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mcd.config.ignition_model import SPEC3_VERSIONS, File, IgnitionResult, ParseOptions, Unit

FILES = ("storage", "files")
UNITS = ("systemd", "units")


@dataclass(frozen=True)
class Reused:
    """Per item of the new document's `storage.files` and `systemd.units`: the earlier object
    declared alike, or None (validate and build it)."""

    files: Sequence[File | None]
    units: Sequence[Unit | None]

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
    files = {_key(raw, "path"): (raw, f) for raw, f in zip(old_files, config.files, strict=True)}
    units = {_key(raw, "name"): (raw, u) for raw, u in zip(old_units, config.units, strict=True)}
    return Reused(_matches(files, _items(doc, FILES), "path"), _matches(units, _items(doc, UNITS), "name"))


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
        if hit is not None and same_json(hit[0], raw):
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


def same_json(a: object, b: object) -> bool:
    """Whether two decoded JSON values are the same, types included (`1` is not `1.0` or `true`)."""
    return type(a) is type(b) and a == b and _same_types(a, b)


def _same_types(a: object, b: object) -> bool:
    """For two equal values of one type: whether their members have the same types all the way
    down (equality said the rest). Only containers are called into: most members are strings."""
    if type(a) is dict:
        assert isinstance(b, dict)
        for key, x in a.items():
            y = b[key]
            if type(x) is not type(y) or (type(x) in _CONTAINERS and not _same_types(x, y)):
                return False
    elif type(a) is list:
        assert isinstance(b, list)
        for x, y in zip(a, b, strict=True):
            if type(x) is not type(y) or (type(x) in _CONTAINERS and not _same_types(x, y)):
                return False
    return True


_CONTAINERS = frozenset((dict, list))
