"""Semantic checks of Ignition and the MCO that build the typed config from a spec 3 document. Pure: no I/O.

Clean absolute paths, modes within 0777, no duplicates, decodable inline contents, verified
hashes, sources the daemon can actually read on a running node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from mcd.config.canon import canon
from mcd.config.contents import CHUNK, HASH_HEX_LENGTHS, ContentsError, iter_contents
from mcd.config.dataurl import SMALL_URL, decode_data_url, decode_data_url_with
from mcd.config.digest import sha256
from mcd.config.findings import Finding, JsonPath, format_path
from mcd.config.ignition_model import (
    ERR_HASH_WITHOUT_SOURCE,
    MAX_FILE_MODE,
    MAX_ID,
    REMOTE_SCHEMES,
    UNIT_SUFFIXES,
    Dropin,
    File,
    IgnitionConfig,
    NodeRef,
    ParseOptions,
    Resource,
    Unit,
    User,
    format_mode,
    unit_paths_of,
)
from mcd.config.ignition_rules import value_findings
from mcd.config.paths import ancestors, name_problem, path_problem, state_problem
from mcd.config.reuse import Reused
from mcd.config.text import clip, shown
from mcd.config.unitfile import UnitSyntaxError
from mcd.config.unitfile import sections as unit_sections

TYPE_CHECKING = False  # not typing's: its import is a few ms of every short command
if TYPE_CHECKING:
    from typing import Any

_INSTANCE = re.compile(r"^(.+?)@(.+?)\.service$")
_NO_REF = NodeRef()  # shared: NodeRef is frozen, and most files name no owner or group


class Checker:
    """Builds the typed config from a schema-valid spec 3 dict, collecting semantic findings."""

    def __init__(self, options: ParseOptions, reused: Reused | None = None) -> None:
        self.options = options
        self.findings: list[Finding] = []
        # items declared alike in a config parsed before without findings: taken as they are
        self.reused = reused or Reused((), ())
        # this parse's verdicts on data URL headers and unit texts (files share a few headers;
        # unit texts repeat, templates are read again): held by the parse, gone with it
        self.headers: dict[str, bool] = {}
        self.sections: dict[str, tuple[str, ...]] = {}

    def error(self, path: JsonPath, message: str) -> None:
        self.findings.append(Finding(path, message))

    def warn(self, path: JsonPath, message: str) -> None:
        self.findings.append(Finding(path, message, "warning"))

    def build(self, doc: Mapping[str, Any], version: str) -> IgnitionConfig:
        storage: Mapping[str, Any] = doc.get("storage") or {}
        systemd: Mapping[str, Any] = doc.get("systemd") or {}
        passwd: Mapping[str, Any] = doc.get("passwd") or {}
        old, raw_files, raw_units = self.reused, storage.get("files") or (), systemd.get("units") or ()
        files = tuple(old.file(i) or self.file(f, ("storage", "files", i)) for i, f in enumerate(raw_files))
        units = tuple(old.unit(i) or self.unit(u, ("systemd", "units", i)) for i, u in enumerate(raw_units))
        users = tuple(self.user(u, ("passwd", "users", i)) for i, u in enumerate(passwd.get("users") or ()))
        for i, g in enumerate(passwd.get("groups") or ()):
            if g.get("gid") is not None:
                self.check_id(("passwd", "groups", i, "gid"), g["gid"], "group")
        self.check_paths(storage, units)
        self.check_templates(units)
        self.check_ignition_resources(doc.get("ignition") or {})
        self.findings += value_findings(doc)
        self.check_unique([u.name for u in units], ("systemd", "units"), "name", "unit")
        # no error: check_paths found no path twice (the planner's positional diff relies on it)
        unique_paths = not any(f.severity == "error" for f in self.findings)
        return IgnitionConfig(
            version=version,
            files=files,
            units=units,
            users=users,
            groups=canon(passwd.get("groups")),
            directories=canon(storage.get("directories")),
            links=canon(storage.get("links")),
            disks=canon(storage.get("disks")),
            filesystems=canon(storage.get("filesystems")),
            raid=canon(storage.get("raid")),
            luks=canon(storage.get("luks")),
            kernel_arguments=canon(doc.get("kernelArguments")),
            unique_paths=unique_paths,
        )

    def file(self, raw: Mapping[str, Any], path: JsonPath) -> File:
        mode = raw.get("mode")
        fpath: str = raw["path"]
        if mode is not None and mode < 0:
            label = shown(fpath)  # the path as messages show it
            self.error((*path, "mode"), f"invalid mode {format_mode(mode)} for {label}, must not be negative")
        elif mode is not None and mode > MAX_FILE_MODE:
            # upstream's message (MCO validateIgn3FileModes), so setuid/setgid/sticky bits are refused
            label = shown(fpath)
            self.error((*path, "mode"), f"invalid mode {format_mode(mode)} for {label}, cannot exceed 0777")
        raw_contents = raw.get("contents")
        contents = None if raw_contents is None else self.resource(raw_contents, (*path, "contents"))
        overwrite = raw.get("overwrite")
        if overwrite is True and (contents is None or contents.source is None):
            self.error((*path, "overwrite"), "overwrite must be false if source is unspecified")  # Ignition's
        data: bytes | None = b""
        size, sha256 = 0, ""
        if contents is not None:
            data, size, sha256 = self.decode(contents, (*path, "contents"), fpath)
        append: tuple[Resource, ...] = ()
        raw_append = raw.get("append")
        if raw_append:  # rare: most files have no append fragments
            append = tuple(
                r
                for i, a in enumerate(raw_append)
                if (r := self.resource(a, (*path, "append", i))) is not None
            )
            for i, res in enumerate(append):
                self.decode(res, (*path, "append", i), fpath)
        user, group = raw.get("user"), raw.get("group")
        return File(
            path=fpath,
            mode=mode,
            overwrite=overwrite,
            user=self.node_ref(user, (*path, "user"), "user") if user else _NO_REF,
            group=self.node_ref(group, (*path, "group"), "group") if group else _NO_REF,
            contents=contents,
            append=append,
            data=data,
            size=size,
            sha256=sha256,
        )

    def node_ref(self, raw: Mapping[str, Any] | None, path: JsonPath, what: str) -> NodeRef:
        if not raw:
            return _NO_REF
        ref = NodeRef(id=raw.get("id"), name=raw.get("name") or None)
        if ref.id is not None and ref.name is not None:
            self.error(path, "cannot set both id and name")  # Ignition's rule and words
        if ref.id is not None:
            self.check_id((*path, "id"), ref.id, what)
        return ref

    def check_id(self, path: JsonPath, value: int, what: str) -> None:
        # uid_t is 32 bits and (uid_t)-1 tells chown "leave it": a config cannot mean either
        if not 0 <= value <= MAX_ID:
            self.error(path, f"invalid {what} id {value}: must be between 0 and {MAX_ID}")

    def resource(self, raw: Mapping[str, Any] | None, path: JsonPath) -> Resource | None:
        if raw is None:
            return None
        if raw.get("httpHeaders"):
            self.check_headers(raw, path)
        verification = raw.get("verification")
        return Resource(
            raw.get("source"), raw.get("compression"), verification.get("hash") if verification else None
        )

    def decode(self, res: Resource, path: JsonPath, owner: str) -> tuple[bytes | None, int, str]:
        """Decoded contents of file `owner` (its path or place as the config gives it), streamed:
        (data or None when too large to keep, size, SHA-256 when not kept). Records a finding and
        returns empty contents when undecodable."""
        source = res.source
        keep = self.options.keep_data_up_to
        if (
            source is not None
            and source.startswith("data:")
            and not res.compression
            and res.hash is None
            and len(source) <= SMALL_URL
            and (keep is None or len(source) <= keep)
        ):
            # the common case (a small inline file, kept; a data URL never decodes to more bytes
            # than it has characters): one decode, no stream machinery, no message prepared.
            # Anything else, a failure included, takes the checks below (which report it).
            try:
                data = decode_data_url_with(source, self.headers)
            except ValueError:
                pass
            else:
                cap = self.options.max_file_size
                if cap is None or len(data) <= cap:
                    return data, len(data), ""
        return self._decode(res, path, shown(owner))

    def _decode(self, res: Resource, path: JsonPath, owner: str) -> tuple[bytes | None, int, str]:
        """`decode` all the way: every check, the stream; `owner` as messages show it."""
        empty: tuple[bytes | None, int, str] = (b"", 0, "")
        if res.source is None:
            if res.hash is not None:
                self.error((*path, "verification", "hash"), ERR_HASH_WITHOUT_SOURCE)
            return empty
        if not self.check_source(res.source, (*path, "source"), owner):
            return empty
        if res.compression not in (None, "", "gzip"):
            self.error(
                (*path, "compression"),
                f'could not decode file "{owner}": unsupported compression type "{shown(res.compression)}"',
            )
            return empty
        if res.hash is not None and not self.check_hash_spec(
            res.hash, (*path, "verification", "hash"), owner
        ):
            return empty
        keep = self.options.keep_data_up_to
        small = len(res.source) <= CHUNK and (keep is None or len(res.source) <= keep)
        if small and res.compression != "gzip" and res.hash is None:
            # one decode, no stream machinery (`decode` sent it here: it fails, or is over the cap)
            try:
                data = decode_data_url(res.source)
            except ValueError as exc:
                self.error((*path, "source"), f"could not decode contents of {owner}: {exc}")
                return empty
            cap = self.options.max_file_size
            if cap is None or len(data) <= cap:
                return data, len(data), ""
        kept: list[bytes] | None = []
        digest = None  # made once the contents are not kept: a kept file needs none
        size = 0
        try:
            for piece in iter_contents(res, max_size=self.options.max_file_size, owner=owner):
                size += len(piece)
                if kept is not None and (keep is None or size <= keep):
                    kept.append(piece)
                else:
                    if digest is None:  # decoded, a data URL is no longer than it, unless gzipped
                        digest = sha256(len(res.source) if res.compression != "gzip" else None)
                    if kept:
                        for earlier in kept:  # the hash of what was kept so far, then no more keeping
                            digest.update(earlier)
                    kept = None
                    digest.update(piece)
        except ContentsError as exc:
            self.error((*path, *exc.field), str(exc))
            return empty
        if kept is not None:
            return b"".join(kept), size, ""
        assert digest is not None  # made when keeping stopped
        return None, size, digest.hexdigest()

    def check_source(self, source: str, path: JsonPath, owner: str) -> bool:
        """Whether `source` is something the daemon can read: an inline data URL."""
        scheme = source.split(":", 1)[0].lower() if ":" in source else ""
        if scheme in REMOTE_SCHEMES:
            self.error(
                path,
                f'unsupported source scheme "{scheme}" for {owner}: the daemon cannot fetch remote '
                "contents on a running node; inline them as a data: URL",
            )
            return False
        if scheme != "data":
            self.error(path, f'invalid source "{clip(source)}" for {owner}: expected a data: URL')
            return False
        return True

    def check_hash_spec(self, spec: str, path: JsonPath, owner: str) -> bool:
        """Ignition's checks of a hash specifier (``sha512-<hex>``): form, function and length."""
        kind, sep, want = spec.partition("-")
        if not sep:
            problem = "malformed hash specifier"
        elif kind not in HASH_HEX_LENGTHS:
            problem = "unrecognized hash function"
        elif len(want) != HASH_HEX_LENGTHS[kind]:
            problem = "incorrect size for hash sum"
        else:
            return True
        self.error(
            path, f'invalid hash "{shown(spec)}" for {owner}: {problem} (want sha512-<hex> or sha256-<hex>)'
        )
        return False

    def unit(self, raw: Mapping[str, Any], path: JsonPath) -> Unit:
        name: str = raw["name"]
        if not name.endswith(UNIT_SUFFIXES) or "/" in name:
            self.error((*path, "name"), f'invalid systemd unit name "{shown(name)}"')
        elif (
            problem := name_problem(name + (".d" if raw.get("dropins") else ""), "systemd unit")
        ) is not None:
            self.error((*path, "name"), problem)
        dropins = []
        for i, d in enumerate(raw.get("dropins") or ()):
            dname: str = d["name"]
            if not dname.endswith(".conf"):
                self.error(
                    (*path, "dropins", i, "name"),
                    f'invalid systemd unit dropin name "{shown(dname)}": must end in .conf',
                )
            elif "/" in dname:
                self.error(
                    (*path, "dropins", i, "name"),
                    f'invalid systemd unit dropin name "{shown(dname)}": must be a file name, without "/"',
                )
            elif (problem := name_problem(dname, "systemd unit dropin")) is not None:
                self.error((*path, "dropins", i, "name"), problem)
            self.unit_sections(d.get("contents"), (*path, "dropins", i, "contents"))
            dropins.append(Dropin(name=dname, contents=d.get("contents")))
        self.check_unique([d.name for d in dropins], (*path, "dropins"), "name", "dropin")
        found = self.unit_sections(raw.get("contents"), (*path, "contents"))
        if (
            raw.get("enabled") is True
            and raw.get("contents")
            and found is not None
            and "Install" not in found
        ):
            self.warn(
                (*path, "contents"),
                f'unit "{shown(name)}" is enabled, but has no install section so enable does nothing',
            )
        return Unit(
            name=name,
            enabled=raw.get("enabled"),
            mask=raw.get("mask"),
            contents=raw.get("contents"),
            dropins=tuple(dropins),
        )

    def unit_sections(self, contents: str | None, path: JsonPath) -> tuple[str, ...] | None:
        """The sections of unit or dropin `contents` (None when unparsable: an error is recorded)."""
        if contents is None:
            return ()
        try:
            return self.unit_text_sections(contents)
        except UnitSyntaxError as exc:
            self.error(path, f"invalid unit content: {exc}")  # Ignition's words
            return None

    def unit_text_sections(self, contents: str) -> tuple[str, ...]:
        """`unitfile.sections`, once per text in this parse (raises UnitSyntaxError)."""
        found = self.sections.get(contents)
        if found is None:
            found = self.sections[contents] = unit_sections(contents)
        return found

    def check_ignition_resources(self, ignition: Mapping[str, Any]) -> None:
        """Configs to merge or replace and CA bundles: sources like `storage.files` (item 7): an
        inline data URL is decoded and checked, a remote one is refused (nothing is fetched)."""
        config: Mapping[str, Any] = ignition.get("config") or {}
        where: JsonPath = ("ignition", "config", "merge")
        for i, raw in enumerate(config.get("merge") or ()):
            self.ignition_resource(raw, (*where, i), f"ignition.config.merge[{i}]", required=True)
        if config.get("replace"):
            self.ignition_resource(
                config["replace"], ("ignition", "config", "replace"), "ignition.config.replace"
            )
        tls: Mapping[str, Any] = (ignition.get("security") or {}).get("tls") or {}
        where = ("ignition", "security", "tls", "certificateAuthorities")
        for i, raw in enumerate(tls.get("certificateAuthorities") or ()):
            owner = f"ignition.security.tls.certificateAuthorities[{i}]"
            self.ignition_resource(raw, (*where, i), owner, required=True)

    def ignition_resource(
        self, raw: Mapping[str, Any], path: JsonPath, owner: str, *, required: bool = False
    ) -> None:
        res = self.resource(raw, path)
        if res is None or not res.source:
            if required:
                self.error(path, "source is required")  # Ignition's words
            elif res is not None and res.hash is not None:
                self.error((*path, "verification", "hash"), ERR_HASH_WITHOUT_SOURCE)
            return
        if res.compression not in (None, "", "gzip"):
            self.error((*path, "compression"), "invalid compression method")
            return
        self.decode(res, path, owner)

    def check_headers(self, raw: Mapping[str, Any] | None, path: JsonPath) -> None:
        """Ignition's rules for HTTP headers of a resource (only http(s) sources can have them)."""
        headers = (raw or {}).get("httpHeaders") or ()
        for i, header in enumerate(headers):
            if not header.get("name"):
                self.error((*path, "httpHeaders", i, "name"), "HTTP header name can't be empty")
            if header.get("value") == "":
                self.error((*path, "httpHeaders", i, "value"), "unable to parse HTTP header")
        if headers:
            source = (raw or {}).get("source") or ""
            scheme = source.split(":", 1)[0].lower() if ":" in source else ""
            if not source:
                self.error((*path, "httpHeaders"), "unable to parse url")
            elif scheme not in ("http", "https"):
                self.error((*path, "httpHeaders"), "cannot use HTTP headers with this source scheme")

    def check_templates(self, units: Sequence[Unit]) -> None:
        """Ignition's warning: an enabled instance (a@b.service) whose template in the config
        (a@.service, with contents) has no [Install] section."""
        by_name = {u.name: u for u in units}
        for i, u in enumerate(units):
            match = _INSTANCE.match(u.name)
            if match is None or u.enabled is not True:
                continue
            template = by_name.get(f"{match.group(1)}@.service")
            if template is None or not template.contents:
                continue
            try:
                found = self.unit_text_sections(template.contents)
            except UnitSyntaxError:
                continue  # reported on the template itself
            if "Install" not in found:
                message = f'template unit "{shown(template.name)}" for "{shown(u.name)}"'
                self.warn(("systemd", "units", i, "contents"), f"{message} doesn't have Install section")

    def user(self, raw: Mapping[str, Any], path: JsonPath) -> User:
        if raw.get("uid") is not None:
            self.check_id((*path, "uid"), raw["uid"], "user")
        others = {k: v for k, v in raw.items() if k not in ("name", "passwordHash", "sshAuthorizedKeys")}
        return User(
            name=raw["name"],
            password_hash=raw.get("passwordHash"),
            ssh_authorized_keys=tuple(raw.get("sshAuthorizedKeys") or ()),
            extra=canon(others),
        )

    def check_paths(self, storage: Mapping[str, Any], units: Sequence[Unit]) -> None:
        """Paths a node can hold and the daemon may write; no path declared twice (files,
        directories and links share one namespace); nothing below a declared file or link; no
        file where a unit or dropin goes."""
        if self.reused.same_paths:
            return  # every path as in a config parsed before without a finding: nothing to find
        seen: dict[str, JsonPath] = {}
        valid: list[tuple[str, str, JsonPath]] = []  # (kind, path, where)
        for section, kind in (("files", "file"), ("directories", "directory"), ("links", "link")):
            for i, entry in enumerate(storage.get(section) or ()):
                where: JsonPath = ("storage", section, i, "path")
                p: str = entry["path"]
                # a file taken over from a parse before had its path checked there
                reused = kind == "file" and self.reused.file(i) is not None
                problem = None if reused else path_problem(p) or state_problem(p, kind)
                if problem is not None:
                    self.error(where, problem)
                elif p in seen:
                    self.error(
                        where, f'duplicate path "{shown(p)}", already declared at {format_path(seen[p])}'
                    )
                else:
                    seen[p] = where
                    valid.append((kind, p, where))
        files = {p: where for kind, p, where in valid if kind == "file"}
        links = {p: where for kind, p, where in valid if kind == "link"}
        systemd_paths = unit_paths_of(units)
        # nearest link or file at or above each directory, memoised: thousands of paths share
        # a few dozen directories, so each directory's ancestors are looked up once
        blocker: dict[str, tuple[str, str] | None] = {}

        def blocked(directory: str) -> tuple[str, str] | None:
            """("link" or "file", path) of the nearest declared link or file at or above
            `directory`, a link before a file at the same place (None: neither). Iterative: a
            valid path can have a couple of thousand components."""
            walked: list[str] = []
            found: tuple[str, str] | None = None
            while directory and directory not in blocker:
                if directory in links:
                    found = ("link", directory)
                    break
                if directory in files:
                    found = ("file", directory)
                    break
                walked.append(directory)
                directory = directory[: directory.rfind("/")]
            else:
                found = blocker.get(directory)
            for d in walked:
                blocker[d] = found
            if found is not None:
                blocker[found[1]] = found
            return found

        for kind, p, where in valid:
            hit = blocked(p[: p.rfind("/")])
            if hit is not None and hit[0] == "link":
                # Ignition's rule: it would write through the link it creates
                self.error(where[:-1], f"{kind} path includes link in config")
            elif hit is not None:
                message = f'path "{shown(p)}" is below file "{shown(hit[1])}"'
                self.error(where, f"{message} ({format_path(files[hit[1]])})")
            if p in systemd_paths:
                self.error(where, "path conflicts with systemd unit or dropin")
        for path, unit_index in systemd_paths.items():
            for parent in ancestors(path):
                if parent in files:
                    unit = units[unit_index].name
                    message = f'path "{shown(parent)}" is a directory of systemd unit "{shown(unit)}"'
                    self.error(files[parent], message)

    def check_unique(self, names: Sequence[str], path: JsonPath, key: str, what: str) -> None:
        seen: dict[str, int] = {}
        for i, n in enumerate(names):
            if n in seen:
                self.error((*path, i, key), f'duplicate {what} "{n}", already declared at index {seen[n]}')
            else:
                seen[n] = i
