"""Ignition's own value rules for the sections the daemon never writes. Pure: no I/O.

Ignition validates every config it reads; the MCO refuses a config Ignition refuses. These are
its rules (restated from its `config/v3_*/types` validations, with its error words) for disks,
partitions, filesystems, RAID arrays, LUKS volumes, directories, links, proxies, and for entries
declared twice. They take a schema-valid spec 3 document (unknown keys dropped) and return
located findings; the rules about files, units, paths and sources are in `mcd.config.ignition`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence

from mcd.config.findings import Finding, JsonPath
from mcd.config.paths import clean

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

ERR_DUPLICATE = "duplicate entry defined"
SPECIAL_BITS_WARNING = (
    "setuid/setgid/sticky bits are not supported or functional in spec versions older than 3.6.0"
)
FILESYSTEM_FORMATS = ("ext4", "btrfs", "xfs", "swap", "vfat", "none")
# longest label each mkfs takes
LABEL_LIMITS = {
    "ext4": (16, "filesystem labels cannot be longer than 16 characters when using ext4"),
    "btrfs": (256, "filesystem labels cannot be longer than 256 characters when using btrfs"),
    "xfs": (12, "filesystem labels cannot be longer than 12 characters when using xfs"),
    "swap": (15, "filesystem labels cannot be longer than 15 characters when using swap"),
    "vfat": (11, "filesystem labels cannot be longer than 11 characters when using vfat"),
}
RAID_LEVELS_WITHOUT_SPARES = ("linear", "raid0", "0", "stripe")
RAID_LEVELS = frozenset(
    (
        *RAID_LEVELS_WITHOUT_SPARES,
        "raid1",
        "1",
        "mirror",
        "raid4",
        "4",
        "raid5",
        "5",
        "raid6",
        "6",
        "raid10",
        "10",
    )
)
_GUID = re.compile(r"(|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})")
CLEVIS_PINS = ("tpm2", "tang", "sss")


def value_findings(doc: Mapping[str, Any]) -> list[Finding]:
    """Every finding of the rules in this module, for one spec 3 document."""
    out: list[Finding] = []
    storage: Mapping[str, Any] = doc.get("storage") or {}
    ignition: Mapping[str, Any] = doc.get("ignition") or {}
    out += _proxy(ignition.get("proxy") or {}, ("ignition", "proxy"))
    out += _directories(storage.get("directories") or ())
    out += _links(storage)
    out += _disks(storage.get("disks") or ())
    out += _filesystems(storage)
    out += _raids(storage.get("raid") or ())
    out += _luks(storage.get("luks") or ())
    out += _duplicates(doc)
    return out


def path_error(value: str) -> str | None:
    """Ignition's check of a device or mount path."""
    if value == "":
        return "path not specified"
    if not value.startswith("/"):
        return "path not absolute"
    if clean(value) != value:
        return "path is not fully simplified"
    return None


# after `data:`, what urlsplit reads as the start of a host: `//`, once it has dropped the tabs
# and line breaks (WHATWG's rule) from the URL
_HOST_AFTER_DATA = re.compile("[\t\r\n]*/[\t\r\n]*/")


def url_scheme(value: str) -> str:
    """`urllib.parse.urlsplit(value).scheme`, ValueError as it raises it. A data URL without a
    host (every inline file's source) is answered here: its scheme is `data` and urlsplit has
    nothing there to refuse; urllib.parse (with ipaddress, a few ms of a short command's start)
    is imported for the other URLs only (tests/unit/test_url_scheme.py compares the two)."""
    if value.startswith("data:") and _HOST_AFTER_DATA.match(value, 5) is None:
        return "data"
    import urllib.parse  # noqa: PLC0415

    return urllib.parse.urlsplit(value).scheme


def url_error(
    value: str, schemes: Iterable[str] = ("http", "https", "tftp", "gs", "s3", "arn", "data")
) -> str | None:
    """Whether Ignition can read a URL of this form (scheme only; data URLs are decoded elsewhere)."""
    try:
        scheme = url_scheme(value)
    except ValueError:
        return "unable to parse url"
    return None if scheme in schemes else "invalid url scheme"


def _err(out: list[Finding], path: JsonPath, message: str | None) -> None:
    if message is not None:
        out.append(Finding(path, message))


def _warn(out: list[Finding], path: JsonPath, message: str) -> None:
    out.append(Finding(path, message, "warning"))


def _proxy(proxy: Mapping[str, Any], path: JsonPath) -> list[Finding]:
    out: list[Finding] = []
    for key, http_ok in (("httpProxy", True), ("httpsProxy", False)):
        value = proxy.get(key)
        if value is None:
            continue
        try:
            scheme = url_scheme(value)
        except ValueError:
            _err(out, (*path, key), "unable to parse url")
            continue
        if scheme not in ("http", "https"):
            _err(out, (*path, key), "proxies must be http(s)")
        elif scheme == "http" and not http_ok:
            _warn(out, (*path, key), "insecure plaintext HTTP proxy specified for HTTPS resources")
    return out


def _directories(directories: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for i, d in enumerate(directories):
        mode = d.get("mode")
        if mode is None:
            continue
        where: JsonPath = ("storage", "directories", i, "mode")
        if not 0 <= mode <= 0o7777:
            _err(out, where, "illegal file mode")
        elif mode & 0o7000:
            _warn(out, where, SPECIAL_BITS_WARNING)
    return out


def _links(storage: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    links: Sequence[Mapping[str, Any]] = storage.get("links") or ()
    directories = {d.get("path") for d in storage.get("directories") or ()}
    for i, link in enumerate(links):
        where: JsonPath = ("storage", "links", i)
        target = link.get("target")
        if not target:
            _err(out, (*where, "target"), "link target is required")
            continue
        if not link.get("hard"):
            continue
        resolved = clean(target) if target.startswith("/") else clean(f"{link.get('path', '')}/{target}")
        if resolved in directories:
            _err(out, where, "hard link target is a directory")
        for who in ("user", "group"):
            owner = link.get(who) or {}
            for key in ("id", "name"):
                if owner.get(key) is not None:
                    _warn(out, (*where, who, key), "user/group ignored for hard link")
    return out


def _disks(disks: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for i, disk in enumerate(disks):
        where: JsonPath = ("storage", "disks", i)
        device = disk.get("device") or ""
        if not device:
            _err(out, (*where, "device"), "disk device is required")
            continue
        _err(out, (*where, "device"), path_error(device))
        parts: Sequence[Mapping[str, Any]] = disk.get("partitions") or ()
        for j, part in enumerate(parts):
            out += _partition(part, (*where, "partitions", j))
        numbers: dict[int, int] = {}
        for j, part in enumerate(parts):
            number = part.get("number") or 0
            if number and number in numbers:
                _err(out, (*where, "partitions", j), "partition numbers collide")
                break
            numbers.setdefault(number, j)
        overlap = _overlapping(parts)
        if overlap is not None:
            _err(out, (*where, "partitions", overlap), "partitions overlap")
        labels: set[str] = set()
        for j, part in enumerate(parts):
            label = part.get("label")
            if label is not None:
                if label in labels:
                    _err(out, (*where, "partitions", j), "cannot use the same partition label twice")
                    break
                labels.add(label)
    return out


def _partition(part: Mapping[str, Any], where: JsonPath) -> list[Finding]:
    out: list[Finding] = []
    others = ("label", "typeGuid", "guid", "startMiB", "sizeMiB")
    if part.get("shouldExist") is False and any(
        part.get(k) not in (None, "") if k in ("typeGuid", "guid") else part.get(k) is not None
        for k in others
    ):
        _err(out, where, "shouldExist specified false with other options also specified")
    label = part.get("label")
    if not part.get("number") and label is None:
        _err(out, where, "a partition number >= 1 or a label must be specified")
    if label is not None:
        if len(label.encode()) > 36:
            _err(out, (*where, "label"), "partition labels may not exceed 36 characters")
        elif ":" in label:
            _err(out, (*where, "label"), "partition label will be truncated to text before the colon")
    for key in ("guid", "typeGuid"):
        value = part.get(key)
        if value is not None and _GUID.fullmatch(value) is None:
            _err(out, (*where, key), 'doesn\'t match the form "01234567-89AB-CDEF-EDCB-A98765432101"')
    return out


def _overlapping(parts: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the first partition another explicitly placed partition overlaps (Ignition's test)."""

    def placed(p: Mapping[str, Any]) -> bool:
        return p.get("startMiB") is not None and p.get("sizeMiB") is not None and p["startMiB"] != 0

    def end(p: Mapping[str, Any]) -> int:
        start: int = p["startMiB"]
        size: int = p["sizeMiB"]
        return start if size == 0 else start + size - 1

    for p in parts:
        if not placed(p):
            continue
        for i, o in enumerate(parts):
            if not placed(o) or o is p or o == p:
                continue
            if o["startMiB"] <= p["startMiB"] <= end(o) or o["startMiB"] <= end(p) <= end(o):
                return i
            if p["startMiB"] < o["startMiB"] and end(p) > end(o):
                return i
    return None


def _filesystems(storage: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    disks = {d.get("device"): d for d in storage.get("disks") or ()}
    for i, fs in enumerate(storage.get("filesystems") or ()):
        where: JsonPath = ("storage", "filesystems", i)
        if fs.get("path"):
            _err(out, (*where, "path"), path_error(fs["path"]))
        _err(out, (*where, "device"), path_error(fs.get("device") or ""))
        fmt = fs.get("format")
        if not fmt:
            extras = any(
                fs.get(k) for k in ("path", "label", "uuid", "wipeFilesystem", "mountOptions", "options")
            )
            if extras:
                _err(
                    out,
                    (*where, "format"),
                    "format cannot be empty when path, label, uuid, wipeFilesystem, options, or mountOptions "
                    "is specified",
                )
        elif fmt not in FILESYSTEM_FORMATS:
            _err(out, (*where, "format"), "invalid filesystem format")
        label = fs.get("label")
        if label:
            if not fmt:
                _err(out, (*where, "label"), "filesystem must specify format if label is specified")
            elif fmt in LABEL_LIMITS and len(label.encode()) > LABEL_LIMITS[fmt][0]:
                _err(out, (*where, "label"), LABEL_LIMITS[fmt][1])
        disk = disks.get(fs.get("device"))
        if disk is not None:
            if disk.get("partitions"):
                _warn(out, (*where, "device"), "filesystem overwrites partitioned device")
            elif not fs.get("wipeFilesystem") and disk.get("wipeTable"):
                _warn(
                    out,
                    (*where, "device"),
                    "device matches disk with wipeTable enabled; filesystem will be wiped",
                )
    return out


def _raids(raids: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for i, raid in enumerate(raids):
        where: JsonPath = ("storage", "raid", i)
        level = raid.get("level")
        if not level:
            _err(out, (*where, "level"), "raid level is required")
        elif level not in RAID_LEVELS:
            _err(out, (*where, "level"), "unrecognized raid level")
        elif level in RAID_LEVELS_WITHOUT_SPARES and raid.get("spares"):
            _err(out, (*where, "level"), "spares unsupported for linear and raid0 arrays")
        if not raid.get("devices"):
            _err(out, (*where, "devices"), "raid devices required")
        for j, device in enumerate(raid.get("devices") or ()):
            _err(out, (*where, "devices", j), path_error(device))
    return out


def _luks(volumes: Sequence[Mapping[str, Any]]) -> list[Finding]:
    out: list[Finding] = []
    for i, luks in enumerate(volumes):
        where: JsonPath = ("storage", "luks", i)
        if "/" in (luks.get("name") or ""):
            _err(out, (*where, "name"), "device names cannot contain slashes")
        if len((luks.get("label") or "").encode()) > 47:
            _err(out, (*where, "label"), "luks device labels cannot be longer than 47 characters")
        device = luks.get("device")
        if not device:
            _err(out, (*where, "device"), "disk device is required")
        else:
            _err(out, (*where, "device"), path_error(device))
        clevis: Mapping[str, Any] = luks.get("clevis") or {}
        custom: Mapping[str, Any] = clevis.get("custom") or {}
        standard = bool(clevis.get("tang")) or clevis.get("tpm2") is True or bool(clevis.get("threshold"))
        if custom.get("pin") and standard:
            _err(out, (*where, "clevis"), "cannot use custom clevis config with tpm2, tang, or threshold")
        out += _clevis_custom(custom, (*where, "clevis", "custom"))
        for j, tang in enumerate(clevis.get("tang") or ()):
            out += _tang(tang, (*where, "clevis", "tang", j))
        key_source = (luks.get("keyFile") or {}).get("source")
        if key_source and url_error(key_source) is not None:
            _err(out, (*where, "keys"), "invalid key-file source")
        cex = (luks.get("cex") or {}).get("enabled") is True
        if cex and (bool(custom.get("pin")) or standard):
            _err(out, (*where, "cex"), "cannot use cex with clevis")
        if cex and key_source:
            _err(out, (*where, "cex"), "cannot use key file with cex")
    return out


def _clevis_custom(custom: Mapping[str, Any], where: JsonPath) -> list[Finding]:
    out: list[Finding] = []
    pin, config = custom.get("pin"), custom.get("config")
    if not pin and not config and custom.get("needsNetwork") is not True:
        return out
    if not pin:
        _err(out, (*where, "pin"), "missing required custom clevis pin")
    elif pin not in CLEVIS_PINS:
        _err(out, (*where, "pin"), "unsupported clevis pin")
    if not config:
        _err(out, (*where, "config"), "missing required custom clevis config")
    return out


def _tang(tang: Mapping[str, Any], where: JsonPath) -> list[Finding]:
    out: list[Finding] = []
    _err(out, (*where, "url"), url_error(tang.get("url") or "", ("http", "https")))
    if not tang.get("thumbprint"):
        _err(out, (*where, "thumbprint"), "thumbprint is required")
    advertisement = tang.get("advertisement")
    if advertisement:
        try:
            json.loads(advertisement)
        except ValueError:
            _err(out, (*where, "advertisement"), "advertisement is not valid JSON")
    return out


# lists whose entries Ignition keys for duplicates (path of the list, key of an entry); lists of
# plain strings are keyed by the string itself
_KEYED_LISTS: tuple[tuple[JsonPath, str | None], ...] = (
    (("storage", "disks"), "device"),
    (("storage", "filesystems"), "device"),
    (("storage", "raid"), "name"),
    (("storage", "luks"), "name"),
    (("passwd", "users"), "name"),
    (("passwd", "groups"), "name"),
    (("ignition", "config", "merge"), "source"),
    (("ignition", "security", "tls", "certificateAuthorities"), "source"),
)


def _duplicates(doc: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for path, key in _KEYED_LISTS:
        out += _dups_in(_at(doc, path), path, key)
    for i, disk in enumerate(_at(doc, ("storage", "disks"))):
        keys = [_partition_key(p) for p in disk.get("partitions") or ()]
        out += _dups_of(keys, ("storage", "disks", i, "partitions"))
    for i, raid in enumerate(_at(doc, ("storage", "raid"))):
        out += _dups_of(list(raid.get("devices") or ()), ("storage", "raid", i, "devices"))
    for i, user in enumerate(_at(doc, ("passwd", "users"))):
        for field in ("sshAuthorizedKeys", "groups"):
            out += _dups_of(list(user.get(field) or ()), ("passwd", "users", i, field))
    kargs: Mapping[str, Any] = doc.get("kernelArguments") or {}
    # shouldExist and shouldNotExist share one namespace
    merged = [
        (k, ("kernelArguments", "shouldExist", i)) for i, k in enumerate(kargs.get("shouldExist") or ())
    ]
    merged += [
        (k, ("kernelArguments", "shouldNotExist", i)) for i, k in enumerate(kargs.get("shouldNotExist") or ())
    ]
    seen: set[str] = set()
    for value, where in merged:
        if value in seen:
            out.append(Finding(where, ERR_DUPLICATE))
        seen.add(value)
    return out


def _at(doc: Mapping[str, Any], path: JsonPath) -> Sequence[Mapping[str, Any]]:
    node: Any = doc
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return node if isinstance(node, list) else ()


def _dups_in(items: Sequence[Mapping[str, Any]], path: JsonPath, key: str | None) -> list[Finding]:
    return _dups_of([item.get(key) if key else item for item in items], path)


def _dups_of(keys: Sequence[object], path: JsonPath) -> list[Finding]:
    out: list[Finding] = []
    seen: set[str] = set()
    for i, k in enumerate(keys):
        text = "" if k is None else str(k)
        if text in seen:
            out.append(Finding((*path, i), ERR_DUPLICATE))
        seen.add(text)
    return out


def _partition_key(part: Mapping[str, Any]) -> str:
    if part.get("number"):
        return f"number:{part['number']}"
    if part.get("label") is not None:
        return f"label:{part['label']}"
    return ""
