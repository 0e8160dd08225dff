"""Translate an Ignition spec 2.2 config to spec 3 the way the MCO does. Pure: no I/O.

The MCO lifts 2.2 to 2.3 (a field-for-field copy), converts 2.3 to 3.0 with ign-converter's
``v23tov30`` and the filesystem map ``{"root": "/"}``, then walks the 3.x translators up to the
current spec, which only copy. This module restates that chain in one step:

* only the ``root`` filesystem exists in spec 3: a node on another filesystem, and any declared
  filesystem other than ``root``, is an error; node paths are cleaned (Go ``path.Join("/", p)``);
* files overwrite by default in spec 2 (``overwrite`` absent becomes ``true``); a file with
  ``append: true`` becomes a spec 3 file with ``overwrite: false`` whose contents go to ``append``;
* a unit is enabled if ``enabled`` is true or the deprecated ``enable`` is true, and disabled if
  ``enabled`` is false (which wins over ``enable``);
* empty strings, ``false`` and ``0`` of spec 2's plain fields mean "unset" in spec 3 and are
  dropped; a file's ``contents.source`` is always kept (an empty source is an empty file);
* ``networkd`` units cannot be translated; the deprecated ``passwd.users[].create`` object is
  ignored with a warning, and is an error next to the user-level field it duplicates;
* duplicate paths, units and drop-ins, and nodes below a link of the same config, are errors.

Findings carry paths in the 2.2 document. The checks of the 3.x result itself (absolute paths,
modes, URLs ...) are the spec 3 validation's business, not repeated here.
"""

from __future__ import annotations

from collections.abc import Mapping

from mcd.config.findings import Finding, JsonPath

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

TARGET_VERSION = "3.5.0"

_USES_NETWORKD = "config includes deprecated networkd section - use Files instead"
_CREATE_DEPRECATED = "the create object has been deprecated in favor of user-level options"
# user-level fields that may not be set next to the deprecated create object
_CREATE_CONFLICTS = (
    "gecos",
    "groups",
    "homeDir",
    "noCreateHome",
    "noLogInit",
    "noUserGroup",
    "primaryGroup",
    "shell",
    "system",
    "uid",
)
_NODE_KINDS = (("files", "File"), ("directories", "Directory"), ("links", "Link"))


def translate_2_2(doc: Mapping[str, object]) -> tuple[dict[str, object], list[Finding]]:
    """The spec 3 (``3.5.0``) form of a schema-valid spec 2.2 config, and what stops or mars it.

    The config is usable only when no finding is an error.
    """
    t = _Translation(doc)
    return t.run(), t.findings


def _get(obj: object, key: str) -> Any:
    """A field of a JSON object, None when absent, null, or when `obj` is not an object."""
    return obj.get(key) if isinstance(obj, Mapping) else None


def _list(obj: object, key: str) -> list[Any]:
    value = _get(obj, key)
    return value if isinstance(value, list) else []


def _put(out: dict[str, object], key: str, value: object) -> None:
    """Set `key` unless `value` is unset in spec 3's sense (None, or an empty string/list/object/false/0)."""
    if value is None or value is False or (type(value) is int and value == 0):
        return
    if isinstance(value, str | list | dict) and not value:
        return
    out[key] = value


def _clean_path(path: str) -> str:
    """Go's ``path.Clean`` of an absolute path: no empty, ``.`` or ``..`` segments."""
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if parts:
                parts.pop()
        else:
            parts.append(segment)
    return "/" + "/".join(parts)


def _go_quote(text: str) -> str:
    # Go's %q for the plain strings these messages hold
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class _Translation:
    def __init__(self, doc: Mapping[str, object]) -> None:
        self.doc = doc
        self.findings: list[Finding] = []

    def error(self, path: JsonPath, message: str) -> None:
        self.findings.append(Finding(path, message))

    def warning(self, path: JsonPath, message: str) -> None:
        self.findings.append(Finding(path, message, "warning"))

    def run(self) -> dict[str, object]:
        doc = self.doc
        out: dict[str, object] = {"ignition": self.ignition(_get(doc, "ignition"))}
        networkd = _list(_get(doc, "networkd"), "units")
        if networkd:
            self.error(("networkd", "units"), _USES_NETWORKD)
        storage = self.storage(_get(doc, "storage"))
        _put(out, "storage", storage)
        units = self.units(_list(_get(doc, "systemd"), "units"))
        _put(out, "systemd", {"units": units} if units else None)
        passwd: dict[str, object] = {}
        _put(passwd, "users", self.users(_list(_get(doc, "passwd"), "users")))
        _put(passwd, "groups", [self.group(g) for g in _list(_get(doc, "passwd"), "groups")])
        _put(out, "passwd", passwd)
        return out

    # --- ignition section -------------------------------------------------------------------------

    def ignition(self, ign: object) -> dict[str, object]:
        out: dict[str, object] = {"version": TARGET_VERSION}
        config: dict[str, object] = {}
        _put(config, "merge", [_reference(r) for r in _list(_get(ign, "config"), "append")])
        replace = _get(_get(ign, "config"), "replace")
        if isinstance(replace, Mapping):
            config["replace"] = _reference(replace)
        _put(out, "config", config)
        timeouts: dict[str, object] = {}
        for key in ("httpResponseHeaders", "httpTotal"):
            value = _get(_get(ign, "timeouts"), key)
            if value is not None:
                timeouts[key] = value
        _put(out, "timeouts", timeouts)
        authorities = [
            _reference(r) for r in _list(_get(_get(ign, "security"), "tls"), "certificateAuthorities")
        ]
        if authorities:
            out["security"] = {"tls": {"certificateAuthorities": authorities}}
        return out

    # --- storage ------------------------------------------------------------------------------------

    def storage(self, storage: object) -> dict[str, object]:
        out: dict[str, object] = {}
        for index, fs in enumerate(_list(storage, "filesystems")):
            self.filesystem(fs, ("storage", "filesystems", index))
        _put(
            out,
            "disks",
            [self.disk(d, ("storage", "disks", i)) for i, d in enumerate(_list(storage, "disks"))],
        )
        _put(out, "raid", [_raid(r) for r in _list(storage, "raid")])
        _put(
            out,
            "files",
            [self.file(f, ("storage", "files", i)) for i, f in enumerate(_list(storage, "files"))],
        )
        directories = _list(storage, "directories")
        _put(
            out,
            "directories",
            [self.directory(d, ("storage", "directories", i)) for i, d in enumerate(directories)],
        )
        _put(
            out,
            "links",
            [self.link(lk, ("storage", "links", i)) for i, lk in enumerate(_list(storage, "links"))],
        )
        self.check_nodes(storage)
        return out

    def filesystem(self, fs: object, at: JsonPath) -> None:
        name = _get(fs, "name") or ""
        if name != "root":
            # the only mapping the MCO gives is root -> "/": no other filesystem has a mount point
            self.error(
                at,
                f"Config defined filesystem {_go_quote(name)} but no mapping was defined."
                "Please specify a path to be used as the filesystem mountpoint.",
            )
            return
        create = _get(_get(fs, "mount"), "create")
        if isinstance(create, Mapping) and not create.get("force"):
            self.error(
                (*at, "mount", "create"),
                "Config must force filesystem creation in case `mount.create` object is defined.",
            )

    def disk(self, disk: object, at: JsonPath) -> dict[str, object]:
        out: dict[str, object] = {"device": _get(disk, "device") or ""}
        _put(out, "wipeTable", _get(disk, "wipeTable"))
        partitions: list[dict[str, object]] = []
        for index, part in enumerate(_list(disk, "partitions")):
            where = (*at, "partitions", index)
            # spec 2.3 deprecated sector sizes for MiB ones; the converter refuses deprecated fields
            if _get(part, "size"):
                self.error((*where, "size"), "size is deprecated; use sizeMB instead")
            if _get(part, "start"):
                self.error((*where, "start"), "start is deprecated; use startMB instead")
            # 2.2 -> 2.3 turns the plain label into a pointer that is always set
            p: dict[str, object] = {"label": _get(part, "label") or ""}
            _put(p, "number", _get(part, "number"))
            _put(p, "typeGuid", _get(part, "typeGuid"))
            _put(p, "guid", _get(part, "guid"))
            partitions.append(p)
        _put(out, "partitions", partitions)
        return out

    def node(self, node: object, at: JsonPath) -> dict[str, object]:
        filesystem = _get(node, "filesystem") or ""
        path = _get(node, "path") or ""
        if not filesystem:
            self.error((*at, "filesystem"), "no filesystem specified")
        elif filesystem != "root":
            self.error(
                (*at, "filesystem"),
                f"filesystem {_go_quote(filesystem)} cannot be translated to Ignition spec 3: "
                'only the "root" filesystem is supported',
            )
        out: dict[str, object] = {}
        if path.startswith("/"):
            out["path"] = _clean_path(path)
        else:
            # spec 2 validation refuses a relative path; joining it to "/" would hide the mistake
            self.error((*at, "path"), "path not absolute")
            out["path"] = path
        if _get(node, "overwrite") is not None:
            out["overwrite"] = _get(node, "overwrite")
        for key in ("user", "group"):
            owner: dict[str, object] = {}
            if _get(_get(node, key), "id") is not None:
                owner["id"] = _get(_get(node, key), "id")
            _put(owner, "name", _get(_get(node, key), "name"))
            _put(out, key, owner)
        return out

    def file(self, file: object, at: JsonPath) -> dict[str, object]:
        out = self.node(file, at)
        overwrite = _get(file, "overwrite")
        appending = _get(file, "append") is True
        if appending and overwrite is True:
            self.error(at, "cannot set both append and overwrite to true")
        # spec 2 files overwrite unless told otherwise; spec 3 files that append may not overwrite
        out["overwrite"] = False if appending else (overwrite if overwrite is not None else True)
        if _get(file, "mode") is not None:
            out["mode"] = _get(file, "mode")
        contents = _get(file, "contents")
        resource: dict[str, object] = {}
        _put(resource, "compression", _get(contents, "compression"))
        resource["source"] = _get(contents, "source") or ""
        digest = _get(_get(contents, "verification"), "hash")
        if digest is not None:
            resource["verification"] = {"hash": digest}
        if appending:
            out["append"] = [resource]
        else:
            out["contents"] = resource
        return out

    def directory(self, directory: object, at: JsonPath) -> dict[str, object]:
        out = self.node(directory, at)
        if _get(directory, "mode") is not None:
            out["mode"] = _get(directory, "mode")
        return out

    def link(self, link: object, at: JsonPath) -> dict[str, object]:
        out = self.node(link, at)
        out["target"] = _get(link, "target") or ""
        _put(out, "hard", _get(link, "hard"))
        return out

    def check_nodes(self, storage: object) -> None:
        """The converter's own checks: one node per path, and no node below a link of the config."""
        links = [_node_path(lk) for lk in _list(storage, "links")]
        seen: dict[str, str] = {}
        for key, label in _NODE_KINDS:
            for index, node in enumerate(_list(storage, key)):
                path = _node_path(node)
                name = f"{label}: {path}"
                at = ("storage", key, index, "path")
                if path in seen:
                    self.error(
                        at,
                        f"Config has conflicting inodes: {_go_quote(seen[path])} and {_go_quote(name)}.  "
                        "All files, directories and links must specify a unique `path`.",
                    )
                seen[path] = name
                # upstream compares plain string prefixes: a link /etc/a also catches /etc/ab
                below = next((lk for lk in links if path.startswith(lk) and path != lk), None)
                if below is not None:
                    self.error(
                        at,
                        f"{name} uses link defined in config {_go_quote(below)}. "
                        "Please use a link not defined in Storage:Links",
                    )

    # --- systemd ------------------------------------------------------------------------------------

    def units(self, units: list[Any]) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        names: set[str] = set()
        for index, unit in enumerate(units):
            name = _get(unit, "name") or ""
            if name in names:
                self.error(
                    ("systemd", "units", index, "name"),
                    f"Config has duplicate unit name {_go_quote(name)}.  "
                    "All units must specify a unique `name`.",
                )
            names.add(name)
            u: dict[str, object] = {"name": name}
            enabled = _get(unit, "enabled")
            if enabled is False:
                u["enabled"] = False  # an explicit disable wins over the deprecated enable
            elif enabled is True or _get(unit, "enable") is True:
                u["enabled"] = True
            _put(u, "mask", _get(unit, "mask"))
            _put(u, "contents", _get(unit, "contents"))
            dropins: list[dict[str, object]] = []
            dropin_names: set[str] = set()
            for d_index, dropin in enumerate(_list(unit, "dropins")):
                d_name = _get(dropin, "name") or ""
                if d_name in dropin_names:
                    self.error(
                        ("systemd", "units", index, "dropins", d_index, "name"),
                        f"Config has duplicate dropin name {_go_quote(d_name)} in unit {_go_quote(name)}.  "
                        "All dropins must specify a unique `name`.",
                    )
                dropin_names.add(d_name)
                d: dict[str, object] = {"name": d_name}
                _put(d, "contents", _get(dropin, "contents"))
                dropins.append(d)
            _put(u, "dropins", dropins)
            out.append(u)
        return out

    # --- passwd -------------------------------------------------------------------------------------

    def users(self, users: list[Any]) -> list[dict[str, object]]:
        out: list[dict[str, object]] = []
        for index, user in enumerate(users):
            at = ("passwd", "users", index)
            if isinstance(_get(user, "create"), Mapping):
                # spec 2 warns and the converter then drops the object
                self.warning((*at, "create"), _CREATE_DEPRECATED)
                for key in _CREATE_CONFLICTS:
                    value = _get(user, key)
                    # uid is a pointer in spec 2 (0 is set); the others count when non-empty or true
                    if (value is not None) if key == "uid" else bool(value):
                        self.error(
                            (*at, key), f"cannot use both the create object and the user-level {key} field"
                        )
            u: dict[str, object] = {"name": _get(user, "name") or ""}
            if _get(user, "passwordHash") is not None:
                u["passwordHash"] = _get(user, "passwordHash")
            _put(u, "sshAuthorizedKeys", list(_list(user, "sshAuthorizedKeys")))
            if _get(user, "uid") is not None:
                u["uid"] = _get(user, "uid")
            for key in ("gecos", "homeDir", "noCreateHome", "primaryGroup"):
                _put(u, key, _get(user, key))
            _put(u, "groups", list(_list(user, "groups")))
            for key in ("noUserGroup", "noLogInit", "shell", "system"):
                _put(u, key, _get(user, key))
            out.append(u)
        return out

    def group(self, group: object) -> dict[str, object]:
        g: dict[str, object] = {"name": _get(group, "name") or ""}
        if _get(group, "gid") is not None:
            g["gid"] = _get(group, "gid")
        _put(g, "passwordHash", _get(group, "passwordHash"))
        _put(g, "system", _get(group, "system"))
        return g


def _reference(ref: object) -> dict[str, object]:
    """A spec 2 config or CA reference as a spec 3 resource: the source is always kept."""
    out: dict[str, object] = {"source": _get(ref, "source") or ""}
    digest = _get(_get(ref, "verification"), "hash")
    if digest is not None:
        out["verification"] = {"hash": digest}
    return out


def _raid(raid: object) -> dict[str, object]:
    out: dict[str, object] = {"name": _get(raid, "name") or "", "level": _get(raid, "level") or ""}
    _put(out, "devices", list(_list(raid, "devices")))
    _put(out, "spares", _get(raid, "spares"))
    _put(out, "options", list(_list(raid, "options")))
    return out


def _node_path(node: object) -> str:
    """The path the converter compares nodes by: joined to "/" (all filesystems map to "/" or "")."""
    path = _get(node, "path") or ""
    return _clean_path(path)
