"""Frozen Ignition config model (files, units, users, the parsed config) and its constants. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mcd.config.canon import Canon
from mcd.config.contents import DEFAULT_MAX_FILE_SIZE, iter_contents
from mcd.config.findings import Finding
from mcd.config.record import field, record

DEFAULT_FILE_MODE = 0o644
MAX_FILE_MODE = 0o777
SPEC3_VERSIONS = ("3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0")
SPEC2_VERSIONS = ("2.2.0",)
# the daemon applies configs on a running node: it has no network fetcher, unlike Ignition
REMOTE_SCHEMES = ("http", "https", "s3", "tftp", "gs", "arn")
UNIT_SUFFIXES = (
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
)
SYSTEMD_DIR = "/etc/systemd/system"
ERR_HASH_WITHOUT_SOURCE = "source must be specified if verification is specified"  # Ignition's words
MAX_ID = 2**32 - 2  # the largest uid or gid; 2**32 - 1 is (uid_t)-1


@record
class NodeRef:
    """A file owner or group: by numeric id, by name, or neither (root)."""

    id: int | None = None
    name: str | None = None


@record
class Resource:
    """An Ignition resource (file contents or an append fragment)."""

    source: str | None
    compression: str | None = None
    hash: str | None = None


@record(init=False)
class File:
    """A `storage.files` entry. Equality follows upstream: the declared fields, not the decoded data.

    The decoded contents are kept when small enough (`ParseOptions.keep_data_up_to`); otherwise
    only their size and SHA-256 are, and `data` decodes them again when asked. A writer that
    must not hold a large file in memory reads `iter_data()` instead.
    """

    path: str
    mode: int | None = None
    overwrite: bool | None = None
    user: NodeRef = NodeRef()
    group: NodeRef = NodeRef()
    contents: Resource | None = None
    append: tuple[Resource, ...] = ()
    _data: bytes | None = field(default=b"", compare=False, repr=False)
    size: int = field(default=0, compare=False, repr=False)
    sha256: str = field(default="", compare=False, repr=False)
    # the declared fields above as one flat tuple of plain values (built once, with the file):
    # two files are equal exactly when their `decl`s are, and a tuple of strings, numbers and
    # shared empty values compares in C without a Python call per field (a plan compares
    # thousands of files of two configs parsed apart)
    decl: tuple[object, ...] = field(default=(), compare=False, repr=False)

    def __init__(
        self,
        path: str,
        *,
        mode: int | None = None,
        overwrite: bool | None = None,
        user: NodeRef = NodeRef(),
        group: NodeRef = NodeRef(),
        contents: Resource | None = None,
        append: tuple[Resource, ...] = (),
        data: bytes | None = b"",
        size: int = 0,
        sha256: str = "",
    ) -> None:
        """`data` is the decoded contents (b"" without a source), or None when not kept: then
        `size` and `sha256` describe them and `contents` is decoded again on demand."""
        declared: tuple[object, ...]
        if contents is None:
            declared = (path, mode, overwrite, user, group, False, None, None, None, append)
        else:
            declared = (
                path,
                mode,
                overwrite,
                user,
                group,
                True,
                contents.source,
                contents.compression,
                contents.hash,
                append,
            )
        # one dict update instead of an object.__setattr__ per field (frozen): a rendered
        # config builds thousands of files
        self.__dict__.update(
            decl=declared,
            path=path,
            mode=mode,
            overwrite=overwrite,
            user=user,
            group=group,
            contents=contents,
            append=append,
            _data=data,
            size=len(data) if data is not None else size,
            sha256=sha256,
        )

    def __eq__(self, other: object) -> bool:
        # the dataclass's comparison (the declared fields), on the flat `decl`
        if self is other:
            return True
        if not isinstance(other, File) or other.__class__ is not self.__class__:
            return NotImplemented
        return self.decl == other.decl

    def __hash__(self) -> int:
        return hash(self.decl)

    @property
    def effective_mode(self) -> int:
        return DEFAULT_FILE_MODE if self.mode is None else self.mode

    @property
    def kept(self) -> bool:
        """Whether the decoded contents are held in memory."""
        return self._data is not None

    @property
    def data(self) -> bytes:
        """The decoded (and decompressed) contents; b"" when there is no source."""
        if self._data is not None:
            return self._data
        return b"".join(self.iter_data())

    def iter_data(self) -> Iterator[bytes]:
        """The decoded contents in pieces of at most `contents.CHUNK` bytes (see mcd.config.contents)."""
        if self._data is not None:
            yield self._data
        elif self.contents is not None:
            # checked when the config was parsed: no cap, the same bytes come out
            yield from iter_contents(self.contents, max_size=None, owner=self.path)

    def digest(self) -> str:
        """SHA-256 (hex) of the decoded contents."""
        if self.sha256:
            return self.sha256
        import hashlib  # noqa: PLC0415 (as mcd.config.contents: ~3 ms of start-up)

        return hashlib.sha256(self.data).hexdigest()

    def same_data(self, other: File) -> bool:
        """Whether two files decode to the same bytes (without decoding what is not kept)."""
        if self.kept and other.kept:
            return self.data == other.data
        return self.size == other.size and self.digest() == other.digest()


@record
class Dropin:
    name: str
    contents: str | None = None


@record(eq=False)
class Unit:
    name: str
    enabled: bool | None = None
    mask: bool | None = None
    contents: str | None = None
    dropins: tuple[Dropin, ...] = ()
    # the fields above as one flat tuple of plain values, as `File.decl`: compared in C
    decl: tuple[object, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        dropins = tuple((d.name, d.contents) for d in self.dropins)
        object.__setattr__(self, "decl", (self.name, self.enabled, self.mask, self.contents, dropins))

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Unit)
        return self.decl == other.decl

    def __hash__(self) -> int:
        return hash(self.decl)


def unit_paths_of(units: Sequence[Unit]) -> dict[str, int]:
    """Paths the units and dropins of a config occupy, with the index of their unit."""
    out: dict[str, int] = {}
    for i, u in enumerate(units):
        if u.contents or u.mask:
            out[f"{SYSTEMD_DIR}/{u.name}"] = i
        for d in u.dropins:
            if d.contents:
                out[f"{SYSTEMD_DIR}/{u.name}.d/{d.name}"] = i
    return out


@record
class User:
    """A `passwd.users` entry; `extra` holds every other field in canonical form."""

    name: str
    password_hash: str | None = None
    ssh_authorized_keys: tuple[str, ...] = ()
    extra: Canon = None


@record
class IgnitionConfig:
    """A parsed, valid Ignition config at spec 3.x semantics.

    Sections the daemon never writes are kept in canonical form, only to be compared.
    """

    version: str
    files: tuple[File, ...] = ()
    units: tuple[Unit, ...] = ()
    users: tuple[User, ...] = ()
    groups: Canon = None
    directories: Canon = None
    links: Canon = None
    disks: Canon = None
    filesystems: Canon = None
    raid: Canon = None
    luks: Canon = None
    kernel_arguments: Canon = None
    # whether no two `files` share a path: so in every config the parser accepts (a duplicate is
    # an error); a config built otherwise says False unless it knows (the planner then checks)
    unique_paths: bool = field(default=False, compare=False, repr=False)

    @property
    def passwd(self) -> tuple[tuple[User, ...], Canon]:
        return (self.users, self.groups)


EMPTY_IGNITION = IgnitionConfig(version="3.5.0", unique_paths=True)


@record
class IgnitionResult:
    """Outcome of parsing: a config when usable, and findings (paths relative to the Ignition root).

    `stage` says where parsing stopped: "parse" (version, structure, translation: upstream's
    "parsing … failed"), "validate" (semantic rules: upstream's "validating … failed") or
    "ok".
    """

    config: IgnitionConfig | None
    findings: tuple[Finding, ...] = ()
    stage: str = "ok"
    # built despite semantic errors (stage "validate"), so further checks can still report
    partial: IgnitionConfig | None = field(default=None, compare=False, repr=False)
    # the options of the parse (a later parse takes items over only with the same ones)
    options: ParseOptions | None = field(default=None, compare=False, repr=False)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")


# decoded contents kept in memory by default: every real file is smaller; a larger one is measured
# while parsing (memory stays flat) and decoded again when its bytes are needed
KEEP_DATA_UP_TO = 16 << 20


@record
class ParseOptions:
    """Bounds of a parse. `max_file_size`: decoded size a file may have (None: no cap).
    `keep_data_up_to`: files decoding to more are not kept in memory, only measured (None:
    keep all; 0: keep none, as `validate` needs no contents)."""

    max_file_size: int | None = DEFAULT_MAX_FILE_SIZE
    keep_data_up_to: int | None = KEEP_DATA_UP_TO


DEFAULT_PARSE = ParseOptions()


def format_mode(mode: int) -> str:
    """Go's ``%#o``: a leading 0 for non-zero values (0644, 01777, -01), plain 0 for zero."""
    if mode < 0:
        return f"-0{-mode:o}"
    return f"0{mode:o}" if mode else "0"
