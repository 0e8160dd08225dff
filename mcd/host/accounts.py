"""Users and groups of the node (the root's passwd/group/shadow), never of the running process.

In the pod the process's own /etc/passwd belongs to the container image, so looking a name up
with the pwd/grp modules would give the wrong ids (or none). Files are parsed the way glibc's
`files` backend does: first entry wins, comments, NIS `+`/`-` lines and malformed lines are
skipped. On CoreOS the OS-shipped accounts live in /usr/lib/passwd and /usr/lib/group (read by
nss-altfiles after /etc), so those are consulted as a fallback.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from mcd.host.atomicfs import read_bytes_nofollow
from mcd.host.root import HostRoot

PASSWD_FILES = ("/etc/passwd", "/usr/lib/passwd")
GROUP_FILES = ("/etc/group", "/usr/lib/group")
SHADOW_FILE = "/etc/shadow"


class UnknownUser(LookupError):
    """No such user in the root's account files; the message is upstream's."""


class UnknownGroup(LookupError):
    """No such group in the root's account files; the message is upstream's."""


@dataclass(frozen=True)
class User:
    """One passwd entry."""

    name: str
    uid: int
    gid: int
    home: str
    shell: str


@dataclass(frozen=True)
class Accounts:
    """The users, groups and password hashes found under one root."""

    users: Mapping[str, User]
    groups: Mapping[str, int]
    shadow: Mapping[str, str]

    @classmethod
    def load(cls, root: HostRoot) -> Accounts:
        """Read the account files under `root`; missing files count as empty."""
        users: dict[str, User] = {}
        for text in _read_all(root, PASSWD_FILES):
            for fields in _records(text, 7):
                uid, gid = _int(fields[2]), _int(fields[3])
                if uid is not None and gid is not None:
                    users.setdefault(fields[0], User(fields[0], uid, gid, fields[5], fields[6]))
        groups: dict[str, int] = {}
        for text in _read_all(root, GROUP_FILES):
            for fields in _records(text, 3):
                gid = _int(fields[2])
                if gid is not None:
                    groups.setdefault(fields[0], gid)
        shadow: dict[str, str] = {}
        for text in _read_all(root, (SHADOW_FILE,)):
            for fields in _records(text, 2):
                shadow.setdefault(fields[0], fields[1])
        return cls(users, groups, shadow)

    def has_user(self, name: str) -> bool:
        """True when `name` is a user of the root (e.g. to skip SSH keys when `core` is absent)."""
        return name in self.users

    def uid(self, name: str) -> int:
        """The uid of user `name`; UnknownUser otherwise."""
        try:
            return self.users[name].uid
        except KeyError:
            raise UnknownUser(f"failed to retrieve UserID for username: {name}") from None

    def gid(self, name: str) -> int:
        """The gid of group `name` (a group, not a user's primary group); UnknownGroup otherwise."""
        try:
            return self.groups[name]
        except KeyError:
            raise UnknownGroup(f"failed to retrieve GroupID for group: {name}") from None

    def home(self, name: str) -> str | None:
        """The home directory of user `name`, None when the user is unknown or has none."""
        user = self.users.get(name)
        if user is None or not user.home:
            return None
        return user.home

    def shadow_hash(self, name: str) -> str | None:
        """Field 2 of the user's /etc/shadow entry (what `getent shadow` shows), None if absent."""
        return self.shadow.get(name)


def _read_all(root: HostRoot, paths: tuple[str, ...]) -> Iterator[str]:
    for path in paths:
        data = read_bytes_nofollow(root.join(path, follow_final=True))
        if data is not None:
            # surrogateescape: a stray non-UTF-8 byte must not hide every other account.
            yield data.decode("utf-8", errors="surrogateescape")


def _records(text: str, min_fields: int) -> Iterator[list[str]]:
    """Split lines into fields, skipping blanks, comments, NIS compat lines and short records."""
    for line in text.splitlines():
        if not line or line.startswith(("#", "+", "-")):
            continue
        fields = line.split(":")
        if len(fields) >= min_fields and fields[0]:
            yield fields


def _int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None
