"""The core user's SSH keys (`authorized_keys.d/ignition`) and the password hashes of config users.

Upstream creates the key directories with `runuser -u core -- mkdir -m 0700 -p`. That needs the
root to be the running system, which a `--root-mount` directory (or a test root) is not, so the
directories are made here with plain mkdir + chown inside the root: same result (0700, owned by
core), no dependency on the root being live.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

from mcd.config.ignition import User
from mcd.host import atomicfs, failpoints
from mcd.host.accounts import Accounts, UnknownGroup, UnknownUser
from mcd.host.dirsync import DirSync
from mcd.host.errors import HostError
from mcd.host.root import HostRoot, PathEscapeError
from mcd.host.runner import CommandError, Runner

log = logging.getLogger(__name__)

SHADOW = "/etc/shadow"

CORE_USER = "core"
CORE_GROUP = "core"
SSH_DIR = "/home/core/.ssh"
KEYS_DIR = "/home/core/.ssh/authorized_keys.d"
KEYS_PATH = "/home/core/.ssh/authorized_keys.d/ignition"
KEY_DIR_MODE = 0o700
KEY_FILE_MODE = 0o600
# what upstream sets for a user declared without a password hash: no password login
NO_PASSWORD = "*"


@contextlib.contextmanager
def _failing_as(what: str) -> Iterator[None]:
    try:
        yield
    except (OSError, PathEscapeError) as exc:
        raise HostError(f"{what}: {exc}") from exc


def reset_password_error(user: str, exc: Exception) -> str:
    """Upstream's text for a failed `usermod -p`: the command's output, then Go's exec error."""
    if isinstance(exc, CommandError):
        r = exc.result
        return f"failed to reset password for {user}: {r.stdout}{r.stderr}:exit status {r.returncode}"
    return f"failed to reset password for {user}: :{exc}"


class SshKeyWriter:
    """Writes SSH keys for core and sets password hashes, under one root."""

    def __init__(
        self, root: HostRoot, accounts: Accounts, runner: Runner, *, dirsync: DirSync | None = None
    ) -> None:
        self.root = root
        self.accounts = accounts
        self.runner = runner
        self.dirsync = dirsync  # the update's deferred directory syncs, when in one

    def _core_ids(self) -> tuple[int, int]:
        try:
            return self.accounts.uid(CORE_USER), self.accounts.gid(CORE_GROUP)
        except (UnknownUser, UnknownGroup) as exc:
            raise HostError(str(exc)) from None

    def _ensure_dir(self, host: Path, uid: int, gid: int) -> bool:
        """Make `host` a 0700 directory owned by uid:gid if missing; repair its owner. True if changed."""
        st = atomicfs.lstat_or_none(host)
        if st is not None and (st.st_uid, st.st_gid) == (uid, gid):
            return False
        if st is None:
            atomicfs.make_dirs(host, KEY_DIR_MODE, dirsync=self.dirsync)
        # also repairs a directory whose chown a crash interrupted
        failpoints.hit("before chown of ssh directory")
        os.chown(host, uid, gid, follow_symlinks=False)
        atomicfs.fsync_dir(host, dirsync=self.dirsync)  # makes the inode change (owner) durable
        failpoints.hit("after chown of ssh directory")
        return True

    def apply(self, users: Sequence[User]) -> bool:
        """Write the keys of all `users` for core (upstream updateSSHKeys); True when anything changed.

        Skipped (logged) when the root has no user core. A `.ssh` owned by another user, or one
        that is not a real directory, is removed first (OCPBUGS-11832); so is an
        `authorized_keys.d` that is not a real directory, so nothing is written through a link.
        """
        if not self.accounts.has_user(CORE_USER):
            log.info("user core does not exist: not writing SSH keys")
            return False
        uid, gid = self._core_ids()
        keys = "".join(key + "\n" for user in users for key in user.ssh_authorized_keys)
        changed = False
        with _failing_as(f"writing SSH keys to {KEYS_PATH}"):
            ssh_dir = self.root.join(SSH_DIR)
            st = atomicfs.lstat_or_none(ssh_dir)
            if st is not None and (not stat.S_ISDIR(st.st_mode) or st.st_uid != uid):
                log.info("removing %s: not a directory owned by core", SSH_DIR)
                changed |= atomicfs.remove_tree(ssh_dir, dirsync=self.dirsync)
            changed |= self._ensure_dir(ssh_dir, uid, gid)
            keys_dir = self.root.join(KEYS_DIR)
            st = atomicfs.lstat_or_none(keys_dir)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                log.info("removing %s: not a directory", KEYS_DIR)
                changed |= atomicfs.remove_tree(keys_dir, dirsync=self.dirsync)
            changed |= self._ensure_dir(keys_dir, uid, gid)
            target = self.root.join(KEYS_PATH)
            changed |= atomicfs.atomic_write(
                target,
                keys.encode(),
                KEY_FILE_MODE,
                uid=uid,
                gid=gid,
                dir_mode=KEY_DIR_MODE,
                dirsync=self.dirsync,
            )
        if changed:
            log.info("wrote SSH keys to %s", KEYS_PATH)
        return changed

    def keys_match(self, users: Sequence[User]) -> bool:
        """Whether `apply(users)` would change nothing: the directories and the key file are right.

        A re-run of the applied config repairs the keys only when this is False (a deleted or
        edited key file, a directory with the wrong owner). True when there is no core to write for.
        """
        if not self.accounts.has_user(CORE_USER):
            return True
        keys = "".join(key + "\n" for user in users for key in user.ssh_authorized_keys).encode()
        try:
            if not keys and atomicfs.lstat_or_none(self.root.join(KEYS_PATH)) is None:
                return True  # no key to give: no file is as good as an empty one
            uid, gid = self._core_ids()
            for path in (SSH_DIR, KEYS_DIR):
                st = atomicfs.lstat_or_none(self.root.join(path))
                if st is None or not stat.S_ISDIR(st.st_mode) or (st.st_uid, st.st_gid) != (uid, gid):
                    return False
            return atomicfs.is_exactly(self.root.join(KEYS_PATH), keys, KEY_FILE_MODE, uid, gid)
        except (HostError, OSError, PathEscapeError):
            return False  # the write reports what is wrong

    def _usermod(self, password_hash: str, user: str) -> None:
        # usermod -R chroots into the root itself, so an offline root's own shadow file is changed
        root_args = [] if self.root.is_live else ["--root", str(self.root.prefix)]
        self.runner.run(["usermod", *root_args, "-p", password_hash, user])

    def set_password(self, user: str, password_hash: str | None) -> None:
        """Set `user`'s hash (`*` when the config declares none); HostError when usermod fails."""
        try:
            self._usermod(password_hash or NO_PASSWORD, user)
        except (CommandError, OSError) as exc:
            raise HostError(reset_password_error(user, exc)) from exc
        log.info("password of %s has been configured", user)

    def clear_password(self, user: str) -> None:
        """Empty the hash of a user the config dropped; a failure is only logged (as upstream)."""
        log.info("absent user detected, clearing the password of %s", user)
        try:
            self._usermod("", user)
        except (CommandError, OSError) as exc:
            log.warning("failed to change password for %s: %s", user, exc)

    def set_password_hashes(self, old_users: Sequence[User], new_users: Sequence[User]) -> bool:
        """Set each new user's hash (`*` when none) where the root's shadow differs; clear removed users'.

        Mirrors upstream SetPasswordHash: removed users get an empty hash first (failures only
        logged), then nothing more happens when core does not exist. The root's shadow file is
        read afresh, so a re-run after a crash only redoes what is still missing. Returns whether
        anything changed.
        """
        if atomicfs.lstat_or_none(self.root.join(SHADOW)) is None:
            # without a shadow file usermod would put hashes into the world-readable passwd file
            log.info("%s does not exist in the root: leaving passwords alone", SHADOW)
            return False
        accounts = Accounts.load(self.root)
        changed = False
        new_names = {u.name for u in new_users}
        for old in old_users:
            if old.name in new_names or accounts.shadow_hash(old.name) == "":
                continue
            log.info("absent user detected, clearing the password of %s", old.name)
            try:
                self._usermod("", old.name)
                changed = True
            except (CommandError, OSError) as exc:
                log.warning("failed to change password for %s: %s", old.name, exc)
        if not accounts.has_user(CORE_USER):
            log.info("user core does not exist: ignoring password configuration")
            return changed
        for user in new_users:
            wanted = user.password_hash or NO_PASSWORD
            if accounts.shadow_hash(user.name) == wanted:
                continue
            try:
                self._usermod(wanted, user.name)
            except (CommandError, OSError) as exc:
                raise HostError(reset_password_error(user.name, exc)) from exc
            log.info("password of %s has been configured", user.name)
            changed = True
        return changed
