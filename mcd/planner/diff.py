"""What changed between two MachineConfigs. Pure: no I/O.

`diff` computes upstream's `machineConfigDiff` flags and, beyond upstream, the list of
changed things (files, units with their dropins, the core user's SSH keys, OS fields) that
the planner explains one by one.
"""

from __future__ import annotations

from itertools import compress
from operator import attrgetter, ne

from mcd.config.ignition import EMPTY_IGNITION, File, IgnitionConfig, Unit, User
from mcd.config.machineconfig import MachineConfig
from mcd.config.ostables import canonical_kernel_type
from mcd.config.record import field, record

ADDED, REMOVED, MODIFIED = "added", "removed", "modified"
# what an added user is compared with: no keys, no password hash, no other field
_NO_USER = User(name="")


@record(init=False)
class Change:
    """One changed thing. `details` say what changed inside it (fields, dropins)."""

    kind: (
        str  # file | unit | sshkey | password | osImageURL | kernelArguments | kernelType | extensions | fips
    )
    name: str
    change: str  # added | removed | modified
    details: tuple[str, ...] = ()

    def __init__(self, kind: str, name: str, change: str, details: tuple[str, ...] = ()) -> None:
        # one dict update instead of a frozen setattr per field: a diff builds one per change
        self.__dict__.update(kind=kind, name=name, change=change, details=details)


@record
class ConfigDiff:
    """Upstream's machineConfigDiff flags plus the changes behind them."""

    os_update: bool = False
    kargs: bool = False
    fips: bool = False
    passwd: bool = False
    files: bool = False
    units: bool = False
    kernel_type: bool = False
    extensions: bool = False
    ocl_enabled: bool = False
    revert_from_ocl: bool = False
    file_changes: tuple[Change, ...] = ()
    unit_changes: tuple[Change, ...] = ()
    passwd_changes: tuple[Change, ...] = ()
    spec_changes: tuple[Change, ...] = field(default=())

    def flags(self) -> dict[str, bool]:
        """The flags under upstream's JSON names."""
        return {
            "osUpdate": self.os_update,
            "kargs": self.kargs,
            "fips": self.fips,
            "passwd": self.passwd,
            "files": self.files,
            "units": self.units,
            "kernelType": self.kernel_type,
            "extensions": self.extensions,
        }

    @property
    def is_empty(self) -> bool:
        return not any(self.flags().values())

    @property
    def changed_paths(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.file_changes)


def _ignition_changes(
    old_ign: IgnitionConfig, new_ign: IgnitionConfig
) -> tuple[tuple[Change, ...], tuple[Change, ...], tuple[Change, ...], tuple[bool, bool, bool]]:
    """The file, unit and passwd changes, and whether those sections differ at all (order included).

    Computed afresh on every call: nothing is remembered between calls (two configs parsed apart
    compare their files by `File.decl`, in C; configs parsed alike share their unchanged items,
    which compare by identity).
    """
    file_changes, files = _file_changes(old_ign, new_ign)
    unit_changes = _unit_changes(old_ign, new_ign)
    return (
        file_changes,
        unit_changes,
        _passwd_changes(old_ign, new_ign),
        (files, old_ign.units != new_ign.units, old_ign.passwd != new_ign.passwd),
    )


def diff(old: MachineConfig, new: MachineConfig, forcefile: bool = False) -> ConfigDiff:
    """Compare two configs whose Ignition parsed (an unparsable side counts as empty)."""
    old_ign = old.config or old.ignition.partial or EMPTY_IGNITION
    new_ign = new.config or EMPTY_IGNITION
    ocl_enabled = bool(old.ocl_image or new.ocl_image)
    os_update = old.ocl_image != new.ocl_image if ocl_enabled else old.os_image_url != new.os_image_url
    # an empty list and no list are the same; order and duplicates matter otherwise
    kargs = (
        bool(old.kernel_arguments or new.kernel_arguments) and old.kernel_arguments != new.kernel_arguments
    )
    extensions = bool(old.extensions or new.extensions) and old.extensions != new.extensions
    kernel_type = canonical_kernel_type(old.kernel_type) != canonical_kernel_type(new.kernel_type)
    file_changes, unit_changes, passwd_changes, (files, units, passwd) = _ignition_changes(old_ign, new_ign)
    spec_changes: list[Change] = []
    if os_update or forcefile:
        detail = ("forcefile present: OS re-applied",) if forcefile and not os_update else ()
        old_url, new_url = (
            (old.ocl_image, new.ocl_image) if ocl_enabled else (old.os_image_url, new.os_image_url)
        )
        spec_changes.append(
            Change("osImageURL", new_url or old_url, _kind_of_change(old_url, new_url), detail)
        )
    if kargs:
        spec_changes.append(
            Change(
                "kernelArguments",
                # a removal is named by what goes
                " ".join(new.kernel_arguments or old.kernel_arguments),
                _kind_of_change(old.kernel_arguments, new.kernel_arguments),
            )
        )
    if kernel_type:
        spec_changes.append(Change("kernelType", canonical_kernel_type(new.kernel_type), MODIFIED))
    if extensions:
        spec_changes.append(
            Change(
                "extensions",
                ",".join(new.extensions or old.extensions),
                _kind_of_change(old.extensions, new.extensions),
            )
        )
    if old.fips != new.fips:
        spec_changes.append(Change("fips", str(new.fips).lower(), MODIFIED))
    return ConfigDiff(
        os_update=os_update or forcefile,
        kargs=kargs,
        fips=old.fips != new.fips,
        passwd=passwd,
        files=files,
        units=units,
        kernel_type=kernel_type,
        extensions=extensions,
        ocl_enabled=ocl_enabled,
        revert_from_ocl=ocl_enabled and not new.ocl_image,
        file_changes=file_changes,
        unit_changes=unit_changes,
        passwd_changes=passwd_changes,
        spec_changes=tuple(spec_changes),
    )


def _kind_of_change(old: object, new: object) -> str:
    if not old:
        return ADDED
    if not new:
        return REMOVED
    return MODIFIED


def _file_fields(old: File, new: File) -> tuple[str, ...]:
    out = []
    # decl: path, mode, overwrite, user, group, has contents, source, compression, hash, append
    a, b = old.decl, new.decl
    if a[6] != b[6] or a[7] != b[7] or a[8] != b[8] or a[5] != b[5]:
        # the same declared contents decode to the same bytes: only other ones are compared
        if not old.same_data(new):
            out.append("contents")
        else:
            out.append("encoding")  # same bytes, differently declared: upstream still sees a change
    if a[1] != b[1] and old.effective_mode != new.effective_mode:
        out.append(f"mode {old.effective_mode:04o}->{new.effective_mode:04o}")
    if a[3] != b[3] or a[4] != b[4]:
        out.append("owner")
    if a[9] != b[9]:
        out.append("append")
    if not out:
        out.append("declaration")
    return tuple(out)


def _file_changes(old: IgnitionConfig, new: IgnitionConfig) -> tuple[tuple[Change, ...], bool]:
    """Added and modified paths in the new config's order, then removed ones in the old order;
    and whether the file lists differ at all (order and duplicates included)."""
    old_files, new_files = old.files, new.files
    if old_files is new_files:
        return (), False
    aligned = _aligned_file_changes(old_files, new_files, new.unique_paths)
    if aligned is not None:
        return aligned
    # the last declaration of a path is the one compared (a dict keeps the last value)
    before = {f.path: f for f in old_files}
    # a file declared as in `before` under its own path is unchanged: the comparison of the flat
    # tuples runs in C, and only the changed few are looked at again below
    differing = [f for f in new_files if (prev := before.get(f.path)) is None or prev.decl != f.decl]
    same_lists = (
        not differing
        and len(old_files) == len(new_files)
        and [f.decl for f in old_files] == [f.decl for f in new_files]
    )
    if same_lists:
        return (), False
    out: list[Change] = []
    for f in differing:
        prev = before.get(f.path)
        if prev is None:
            out.append(Change("file", f.path, ADDED))
        else:
            out.append(Change("file", f.path, MODIFIED, _file_fields(prev, f)))
    after_paths = {f.path for f in new_files}
    if len(after_paths) != len(before) or not after_paths.issuperset(before):
        out.extend(Change("file", f.path, REMOVED) for f in old_files if f.path not in after_paths)
    return tuple(out), True


def _aligned_file_changes(
    old_files: tuple[File, ...], new_files: tuple[File, ...], unique_paths: bool
) -> tuple[tuple[Change, ...], bool] | None:
    """`_file_changes` when both lists declare the same paths in the same order, each once (two
    renderings of one pool: the common case), else None. The declarations are compared pairwise
    in C (`map` of `!=` over the flat `decl` tuples); no dict or set of thousands of paths."""
    n = len(new_files)
    if len(old_files) != n:
        return None
    get = attrgetter("decl")
    changed = list(compress(range(n), map(ne, map(get, old_files), map(get, new_files))))
    for i in changed:
        if old_files[i].path != new_files[i].path:
            return None
    # the paths are the same list: each once in it (a parsed config has no duplicate path, but
    # a hand-built one may, and then the general comparison applies)
    if not unique_paths and len(set(map(attrgetter("path"), new_files))) != n:
        return None
    out = tuple(
        Change("file", new_files[i].path, MODIFIED, _file_fields(old_files[i], new_files[i])) for i in changed
    )
    return out, bool(changed)


def _unit_fields(old: Unit, new: Unit) -> tuple[str, ...]:
    out = []
    if old.contents != new.contents:
        out.append("contents")
    if old.enabled != new.enabled:
        out.append(f"enabled {old.enabled}->{new.enabled}")
    if old.mask != new.mask:
        out.append(f"mask {old.mask}->{new.mask}")
    before = {d.name: d for d in old.dropins}
    after = {d.name: d for d in new.dropins}
    for name, d in after.items():
        if name not in before:
            out.append(f"dropin {name} added")
        elif before[name] != d:
            out.append(f"dropin {name} modified")
    out.extend(f"dropin {name} removed" for name in before if name not in after)
    if not out:
        out.append("declaration")
    return tuple(out)


def _unit_changes(old: IgnitionConfig, new: IgnitionConfig) -> tuple[Change, ...]:
    if old.units == new.units:
        return ()
    n = len(new.units)
    if len(old.units) == n:
        # the same names in the same order, each once (two renderings of one pool): compared
        # pairwise in C, as the files
        get = attrgetter("decl")
        changed = list(compress(range(n), map(ne, map(get, old.units), map(get, new.units))))
        pairs = [(old.units[i], new.units[i]) for i in changed]
        if all(a.name == b.name for a, b in pairs) and len(set(map(attrgetter("name"), new.units))) == n:
            return tuple(Change("unit", b.name, MODIFIED, _unit_fields(a, b)) for a, b in pairs)
    before = {u.name: u for u in old.units}
    after_names = set()
    out: list[Change] = []
    for u in new.units:
        after_names.add(u.name)
        prev = before.get(u.name)
        if prev is None:
            out.append(Change("unit", u.name, ADDED, tuple(f"dropin {d.name} added" for d in u.dropins)))
        elif prev != u:
            out.append(Change("unit", u.name, MODIFIED, _unit_fields(prev, u)))
    out.extend(Change("unit", u.name, REMOVED) for u in old.units if u.name not in after_names)
    return tuple(out)


def _passwd_changes(old: IgnitionConfig, new: IgnitionConfig) -> tuple[Change, ...]:
    """One change per user whose entry differs (in practice: core's keys and password hash)."""
    if old.passwd == new.passwd:
        return ()
    before = {u.name: u for u in old.users}
    after = {u.name: u for u in new.users}
    out: list[Change] = []
    for name, user in after.items():
        prev = before.get(name)
        if prev is not None and prev == user:
            continue
        fields = _user_fields(prev, user)
        # a password hash is no SSH key: it gets its own row (the hash itself is never shown)
        if "passwordHash" in fields:
            out.append(Change("password", name, ADDED if prev is None else MODIFIED, ("passwordHash",)))
            fields = tuple(f for f in fields if f != "passwordHash")
            if not fields:
                continue
        out.append(Change("sshkey", name, ADDED if prev is None else MODIFIED, fields))
    out.extend(Change("sshkey", name, REMOVED) for name in before if name not in after)
    if old.groups != new.groups:
        out.append(Change("sshkey", "groups", MODIFIED, ("passwd groups",)))
    return tuple(out)


def _user_fields(old: User | None, new: User) -> tuple[str, ...]:
    prev = old if old is not None else _NO_USER
    out = []
    if prev.ssh_authorized_keys != new.ssh_authorized_keys:
        added = len(set(new.ssh_authorized_keys) - set(prev.ssh_authorized_keys))
        removed = len(set(prev.ssh_authorized_keys) - set(new.ssh_authorized_keys))
        out.append(f"sshAuthorizedKeys +{added} -{removed}")
    if prev.password_hash != new.password_hash:
        out.append("passwordHash")
    if prev.extra != new.extra:
        out.append("other fields")
    return tuple(out)
