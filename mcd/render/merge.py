"""Ignition's config merge (spec 3.5), on decoded JSON. Pure: no I/O.

Upstream merges a pool's Ignition configs with Ignition's own merge, which walks the Go types of
spec 3.5: a plain field (a path, a name, the version) is the child's; an optional field is the
child's when the child sets it, else the parent's; an object is merged field by field; a list of
keyed entries (files, directories and links by path, sharing one key space; units and dropins,
users, groups, disks, filesystems, LUKS and RAID devices by name or device; resources by source;
kernel arguments by value, `shouldExist` and `shouldNotExist` sharing one key space) keeps the
parent's order, merges an entry the child has in the same list, drops one the child has in a
sibling list, and appends the child's new entries; a few lists (a file's `append`, filesystem
and LUKS options) are concatenated. `TYPES` states those Go types here in our own table; the
field order is Go's, so a merged config reads as upstream writes it.

`normalize` first reads a document (spec 3.x, or 2.2 already translated) as the Go decoder would
fill those types: unknown keys and nulls dropped, empty objects and lists absent, the
non-optional strings present. The result of `merge` is in the same form.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.record import record

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

SPEC_VERSION = "3.5.0"


@record
class Field:
    """One field of a spec 3.5 type.

    kind: "value" (a non-optional scalar: the child's always wins), "optional" (a pointer: the
    child's when set), "object" (a nested type, `of`), "keyed" (a list merged by key: `of` is
    the entry type, or None for a list of strings; `shares` names the key space several lists
    share), "concat" (a list the merge concatenates).
    """

    kind: str
    of: str | None = None
    shares: str | None = None
    # a value field Go writes even when empty (no `omitempty`): names, paths, devices, version
    always: bool = False


_VALUE = Field("value", always=True)
_OPT = Field("optional")


def _keyed(of: str | None = None, shares: str | None = None) -> Field:
    return Field("keyed", of, shares)


def _obj(of: str) -> Field:
    return Field("object", of)


_NODE = {"group": _obj("NodeOwner"), "overwrite": _OPT, "path": _VALUE, "user": _obj("NodeOwner")}

TYPES: Mapping[str, Mapping[str, Field]] = {
    "Config": {
        "ignition": _obj("Ignition"),
        "kernelArguments": _obj("KernelArguments"),
        "passwd": _obj("Passwd"),
        "storage": _obj("Storage"),
        "systemd": _obj("Systemd"),
    },
    "Ignition": {
        "config": _obj("IgnitionConfig"),
        "proxy": _obj("Proxy"),
        "security": _obj("Security"),
        "timeouts": _obj("Timeouts"),
        "version": _VALUE,
    },
    "IgnitionConfig": {"merge": _keyed("Resource"), "replace": _obj("Resource")},
    "Proxy": {"httpProxy": _OPT, "httpsProxy": _OPT, "noProxy": _keyed()},
    "Security": {"tls": _obj("TLS")},
    "TLS": {"certificateAuthorities": _keyed("Resource")},
    "Timeouts": {"httpResponseHeaders": _OPT, "httpTotal": _OPT},
    "KernelArguments": {"shouldExist": _keyed(None, "karg"), "shouldNotExist": _keyed(None, "karg")},
    "Passwd": {"groups": _keyed("PasswdGroup"), "users": _keyed("PasswdUser")},
    "PasswdGroup": {"gid": _OPT, "name": _VALUE, "passwordHash": _OPT, "shouldExist": _OPT, "system": _OPT},
    "PasswdUser": {
        "gecos": _OPT,
        "groups": _keyed(),
        "homeDir": _OPT,
        "name": _VALUE,
        "noCreateHome": _OPT,
        "noLogInit": _OPT,
        "noUserGroup": _OPT,
        "passwordHash": _OPT,
        "primaryGroup": _OPT,
        "sshAuthorizedKeys": _keyed(),
        "shell": _OPT,
        "shouldExist": _OPT,
        "system": _OPT,
        "uid": _OPT,
    },
    "Storage": {
        "directories": _keyed("Directory", "node"),
        "disks": _keyed("Disk"),
        "files": _keyed("File", "node"),
        "filesystems": _keyed("Filesystem"),
        "links": _keyed("Link", "node"),
        "luks": _keyed("Luks"),
        "raid": _keyed("Raid"),
    },
    # files, directories and links embed the node's fields (Go's embedded structs)
    "Directory": {**_NODE, "mode": _OPT},
    "File": {**_NODE, "append": Field("concat", "Resource"), "contents": _obj("Resource"), "mode": _OPT},
    "Link": {**_NODE, "hard": _OPT, "target": _OPT},
    "NodeOwner": {"id": _OPT, "name": _OPT},
    "Disk": {"device": _VALUE, "partitions": _keyed("Partition"), "wipeTable": _OPT},
    "Partition": {
        "guid": _OPT,
        "label": _OPT,
        "number": Field("value"),
        "resize": _OPT,
        "shouldExist": _OPT,
        "sizeMiB": _OPT,
        "startMiB": _OPT,
        "typeGuid": _OPT,
        "wipePartitionEntry": _OPT,
    },
    "Filesystem": {
        "device": _VALUE,
        "format": _OPT,
        "label": _OPT,
        "mountOptions": Field("concat"),
        "options": Field("concat"),
        "path": _OPT,
        "uuid": _OPT,
        "wipeFilesystem": _OPT,
    },
    "Luks": {
        "cex": _obj("Cex"),
        "clevis": _obj("Clevis"),
        "device": _OPT,
        "discard": _OPT,
        "keyFile": _obj("Resource"),
        "label": _OPT,
        "name": _VALUE,
        "openOptions": _keyed(),
        "options": Field("concat"),
        "uuid": _OPT,
        "wipeVolume": _OPT,
    },
    "Cex": {"enabled": _OPT},
    "Clevis": {"custom": _obj("ClevisCustom"), "tang": _keyed("Tang"), "threshold": _OPT, "tpm2": _OPT},
    "ClevisCustom": {"config": _OPT, "needsNetwork": _OPT, "pin": _OPT},
    "Tang": {"advertisement": _OPT, "thumbprint": _OPT, "url": Field("value")},
    "Raid": {"devices": _keyed(), "level": _OPT, "name": _VALUE, "options": Field("concat"), "spares": _OPT},
    "Resource": {
        "compression": _OPT,
        "httpHeaders": _keyed("HTTPHeader"),
        "source": _OPT,
        "verification": _obj("Verification"),
    },
    "HTTPHeader": {"name": _VALUE, "value": _OPT},
    "Verification": {"hash": _OPT},
    "Systemd": {"units": _keyed("Unit")},
    "Unit": {"contents": _OPT, "dropins": _keyed("Dropin"), "enabled": _OPT, "mask": _OPT, "name": _VALUE},
    "Dropin": {"contents": _OPT, "name": _VALUE},
}

# the key each entry type is merged by (Go's Key() methods)
_KEY_FIELD = {
    "Directory": "path",
    "File": "path",
    "Link": "path",
    "Disk": "device",
    "Filesystem": "device",
    "Luks": "name",
    "Raid": "name",
    "PasswdGroup": "name",
    "PasswdUser": "name",
    "Unit": "name",
    "Dropin": "name",
    "HTTPHeader": "name",
    "Tang": "url",
    "Resource": "source",
}


def entry_key(of: str | None, entry: Any) -> str:
    """The merge key of a list entry: the string itself, or its type's key field."""
    if of is None:
        return str(entry)
    if of == "Partition":
        # a partition is known by its number, else by its label
        if entry.get("number"):
            return f"number:{entry['number']}"
        if "label" in entry:
            return f"label:{entry['label']}"
        return ""
    return str(entry.get(_KEY_FIELD[of], ""))


def normalize(doc: Mapping[str, Any], type_name: str = "Config") -> dict[str, Any]:
    """`doc` as Go decodes it into the spec 3.5 type `type_name` (see the module docstring)."""
    out: dict[str, Any] = {}
    for name, field in TYPES[type_name].items():
        value = doc.get(name)
        if value is None:
            if field.always:
                out[name] = ""
            continue
        if field.kind == "object":
            inner = normalize(value, field.of or "") if isinstance(value, Mapping) else {}
            if inner:
                out[name] = inner
        elif field.kind in ("keyed", "concat"):
            items = (
                [normalize(v, field.of) if field.of else v for v in value] if isinstance(value, list) else []
            )
            if items:
                out[name] = items
        elif field.kind == "value" and not field.always and not value:
            continue
        else:
            out[name] = value
    return out


def in_field_order(doc: Mapping[str, Any], type_name: str) -> dict[str, Any]:
    """`doc`'s fields in the order Go writes them (its type's field order)."""
    return {name: doc[name] for name in TYPES[type_name] if name in doc}


def merge(parent: Mapping[str, Any], child: Mapping[str, Any], type_name: str = "Config") -> dict[str, Any]:
    """Ignition's merge of two normalized documents of `type_name`: `child` over `parent`."""
    fields = TYPES[type_name]
    # every keyed entry of the child, by key space and key: the last one of a key wins, and the
    # list it is in decides whether a parent entry of that key is merged or dropped
    in_child: dict[tuple[str, str], tuple[str, Any]] = {}
    for name, field in fields.items():
        if field.kind == "keyed":
            for entry in child.get(name, ()):
                in_child[(field.shares or name, entry_key(field.of, entry))] = (name, entry)
    out: dict[str, Any] = {}
    for name, field in fields.items():
        p, c = parent.get(name), child.get(name)
        if field.kind == "value":
            if c is not None:
                out[name] = c
        elif field.kind == "optional":
            if c is not None:
                out[name] = c
            elif p is not None:
                out[name] = p
        elif field.kind == "object":
            if c and p:
                out[name] = merge(p, c, field.of or "")
            elif c or p:
                out[name] = c or p
        elif field.kind == "concat":
            if p or c:
                out[name] = [*(p or ()), *(c or ())]
        else:
            merged = _merge_list(name, field, p or [], c or [], in_child)
            if merged:
                out[name] = merged
    return out


def _merge_list(
    name: str,
    field: Field,
    parent: list[Any],
    child: list[Any],
    in_child: Mapping[tuple[str, str], tuple[str, Any]],
) -> list[Any]:
    out: list[Any] = []
    space = field.shares or name
    for entry in parent:
        found = in_child.get((space, entry_key(field.of, entry)))
        if found is None:
            out.append(entry)
            continue
        where, theirs = found
        if where != name:
            continue  # the child holds this path as another kind of node: the parent's goes
        if field.of is None:
            out.append(theirs)
        elif field.of == "HTTPHeader" and "value" not in theirs:
            continue  # a header without value removes the parent's header of that name
        else:
            out.append(merge(entry, theirs, field.of))
    parent_keys = {entry_key(field.of, entry) for entry in parent}
    out.extend(entry for entry in child if entry_key(field.of, entry) not in parent_keys)
    return out
