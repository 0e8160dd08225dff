"""mcd.host.ssh: core's authorized_keys.d/ignition and password hashes, inside a root."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from killing import assert_converges_after_any_kill
from recording import RecordingRunner
from trees import CORE_GROUP, CORE_PASSWD, put

from mcd.config.ignition import User
from mcd.host.accounts import Accounts
from mcd.host.errors import HostError
from mcd.host.root import HostRoot
from mcd.host.ssh import KEYS_PATH, SshKeyWriter

SHADOW = "root:*:19000::::::\ncore:*:19000::::::\n"
TEMP_NAME = re.compile(r"^\..*\.[0-9a-f]{16}\.tmp$")


def make_base(base: Path, passwd: str = CORE_PASSWD, shadow: str = SHADOW, home: bool = True) -> Path:
    put(base, "/etc/passwd", passwd)
    put(base, "/etc/group", CORE_GROUP)
    put(base, "/etc/shadow", shadow, 0o000)
    if home:
        (base / "home/core").mkdir(parents=True)
        os.chown(base / "home/core", 1000, 1000)
    return base


def keys_writer(base: Path, runner: RecordingRunner | None = None) -> SshKeyWriter:
    root = HostRoot(base)
    # a runner without expectations fails on any command: key writing runs none (no runuser)
    return SshKeyWriter(root, Accounts.load(root), runner or RecordingRunner())


def owner_mode(p: Path) -> tuple[int, int, int]:
    st = os.lstat(p)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


def users(*keys: tuple[str, ...]) -> list[User]:
    return [User(f"user{i}", ssh_authorized_keys=k) for i, k in enumerate(keys)]


# --- keys ---------------------------------------------------------------------------------------------


def test_keys_of_all_users_are_concatenated_for_core(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    w = keys_writer(base)
    assert w.apply(users(("ssh-ed25519 AAA one", "ssh-rsa BBB two"), (), ("ssh-ed25519 CCC three",))) is True
    keys = base / KEYS_PATH.lstrip("/")
    assert keys.read_text() == "ssh-ed25519 AAA one\nssh-rsa BBB two\nssh-ed25519 CCC three\n"
    assert owner_mode(keys) == (1000, 1000, 0o600)
    assert owner_mode(base / "home/core/.ssh") == (1000, 1000, 0o700)
    assert owner_mode(base / "home/core/.ssh/authorized_keys.d") == (1000, 1000, 0o700)
    assert w.apply(users(("ssh-ed25519 AAA one", "ssh-rsa BBB two"), (), ("ssh-ed25519 CCC three",))) is False


def test_no_users_writes_an_empty_file(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, KEYS_PATH, "ssh-rsa OLD\n")
    assert keys_writer(base).apply([]) is True
    assert (base / KEYS_PATH.lstrip("/")).read_bytes() == b""


def test_no_core_user_skips_without_error(tmp_path: Path) -> None:
    base = make_base(tmp_path, passwd="root:x:0:0:root:/root:/bin/bash\n", home=False)
    before = sorted(p.name for p in base.rglob("*"))
    assert keys_writer(base).apply(users(("ssh-rsa K",))) is False
    assert sorted(p.name for p in base.rglob("*")) == before


def test_ssh_dir_owned_by_another_user_is_replaced(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    stale = put(base, "/home/core/.ssh/authorized_keys", "ssh-rsa PLANTED\n")
    os.chown(base / "home/core/.ssh", 0, 0)
    assert keys_writer(base).apply(users(("ssh-rsa K",))) is True
    assert not stale.exists()
    assert owner_mode(base / "home/core/.ssh") == (1000, 1000, 0o700)
    assert (base / KEYS_PATH.lstrip("/")).read_text() == "ssh-rsa K\n"


def test_existing_core_owned_ssh_dir_is_kept(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    other = put(base, "/home/core/.ssh/known_hosts", "host key")
    os.chown(base / "home/core/.ssh", 1000, 1000)
    os.chmod(base / "home/core/.ssh", 0o750)
    keys_writer(base).apply(users(("ssh-rsa K",)))
    assert other.read_text() == "host key"
    assert owner_mode(base / "home/core/.ssh")[2] == 0o750  # existing directories keep their mode


def test_symlinked_ssh_dir_is_removed_not_followed(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    (base / "root/.ssh").mkdir(parents=True)
    os.symlink("/root/.ssh", base / "home/core/.ssh")
    os.lchown(base / "home/core/.ssh", 1000, 1000)  # core may plant such a link in its home
    keys_writer(base).apply(users(("ssh-rsa K",)))
    assert list((base / "root/.ssh").iterdir()) == []
    assert not (base / "home/core/.ssh").is_symlink()
    assert (base / KEYS_PATH.lstrip("/")).read_text() == "ssh-rsa K\n"


def test_symlinked_fragment_dir_is_removed_not_followed(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    (base / "root/.ssh").mkdir(parents=True)
    (base / "home/core/.ssh").mkdir()
    os.chown(base / "home/core/.ssh", 1000, 1000)
    os.symlink("/root/.ssh", base / "home/core/.ssh/authorized_keys.d")
    keys_writer(base).apply(users(("ssh-rsa K",)))
    assert list((base / "root/.ssh").iterdir()) == []
    assert owner_mode(base / "home/core/.ssh/authorized_keys.d") == (1000, 1000, 0o700)


def test_fragment_dir_left_root_owned_is_repaired(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    (base / "home/core/.ssh/authorized_keys.d").mkdir(parents=True, mode=0o700)
    os.chown(base / "home/core/.ssh", 1000, 1000)
    keys_writer(base).apply(users(("ssh-rsa K",)))
    assert owner_mode(base / "home/core/.ssh/authorized_keys.d")[:2] == (1000, 1000)


def test_home_behind_the_coreos_var_home_symlink(tmp_path: Path) -> None:
    base = make_base(tmp_path, home=False)
    (base / "var/home/core").mkdir(parents=True)
    os.chown(base / "var/home/core", 1000, 1000)
    os.symlink("var/home", base / "home")
    keys_writer(base).apply(users(("ssh-rsa K",)))
    assert (base / "var/home/core/.ssh/authorized_keys.d/ignition").read_text() == "ssh-rsa K\n"


def test_core_group_missing_is_an_error(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    put(base, "/etc/group", "root:x:0:\n")
    with pytest.raises(HostError, match="failed to retrieve GroupID for group: core"):
        keys_writer(base).apply(users(("ssh-rsa K",)))


# --- crash safety ---------------------------------------------------------------------------------------


def snapshot(base: Path) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for p in sorted(base.rglob("*")):
        if TEMP_NAME.match(p.name):
            continue
        st = os.lstat(p)
        body = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
        out[str(p.relative_to(base))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, body)
    return out


def test_apply_converges_after_a_kill_anywhere(tmp_path: Path) -> None:
    def setup(base: Path) -> None:
        make_base(base)
        (base / "home/core/.ssh").mkdir()  # root-owned: removed and recreated

    def op(base: Path) -> None:
        keys_writer(base).apply(users(("ssh-rsa K",)))

    assert assert_converges_after_any_kill(tmp_path, snapshot, setup, op) >= 5


# --- passwords ------------------------------------------------------------------------------------------


def usermod(base: Path, *args: str) -> tuple[str, ...]:
    return ("usermod", "--root", str(HostRoot(base).prefix), *args)


def test_password_hash_set_when_shadow_differs(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    runner = RecordingRunner().expect(["usermod"])
    w = keys_writer(base, runner)
    assert w.set_password_hashes([], [User("core", password_hash="$6$salt$hash")]) is True
    assert runner.commands == [usermod(base, "-p", "$6$salt$hash", "core")]


def test_matching_hash_runs_nothing(tmp_path: Path) -> None:
    base = make_base(tmp_path, shadow="core:$6$salt$hash:19000::::::\n")
    runner = RecordingRunner()
    assert (
        keys_writer(base, runner).set_password_hashes([], [User("core", password_hash="$6$salt$hash")])
        is False
    )
    assert runner.commands == []


def test_absent_hash_means_star(tmp_path: Path) -> None:
    base = make_base(tmp_path, shadow="core:$6$old:19000::::::\n")
    runner = RecordingRunner().expect(["usermod"])
    assert keys_writer(base, runner).set_password_hashes([], [User("core")]) is True
    assert runner.commands == [usermod(base, "-p", "*", "core")]
    # and with the shadow already at "*", nothing to do
    runner2 = RecordingRunner()
    assert keys_writer(make_base(tmp_path / "b"), runner2).set_password_hashes([], [User("core")]) is False


def test_removed_user_is_cleared_and_failures_ignored(tmp_path: Path) -> None:
    base = make_base(tmp_path)
    runner = RecordingRunner().expect(["usermod"], 6, stderr="usermod: user 'gone' does not exist\n")
    w = keys_writer(base, runner)
    assert w.set_password_hashes([User("core"), User("gone")], [User("core")]) is False
    assert runner.commands == [usermod(base, "-p", "", "gone")]


def test_removed_user_cleared_even_without_core(tmp_path: Path) -> None:
    base = make_base(tmp_path, passwd="root:x:0:0::/root:/bin/sh\nother:x:5:5::/:/bin/sh\n", home=False)
    runner = RecordingRunner().expect(["usermod"])
    w = keys_writer(base, runner)
    assert w.set_password_hashes([User("other")], [User("core", password_hash="$6$x")]) is True
    assert runner.commands == [usermod(base, "-p", "", "other")]


@pytest.mark.parametrize("through", ["set_password_hashes", "set_password"])
def test_failed_usermod_for_a_new_user_is_an_error_in_upstreams_words(tmp_path: Path, through: str) -> None:
    base = make_base(tmp_path)
    runner = RecordingRunner().expect(["usermod"], 1, stderr="usermod: cannot lock /etc/shadow\n")
    w = keys_writer(base, runner)
    with pytest.raises(HostError) as info:
        if through == "set_password":
            w.set_password("core", "$6$x")
        else:
            w.set_password_hashes([], [User("core", password_hash="$6$x")])
    # upstream: "failed to reset password for %s: %s:%w" with usermod's combined output
    expected = "failed to reset password for core: usermod: cannot lock /etc/shadow\n:exit status 1"
    assert str(info.value) == expected


def test_live_root_runs_usermod_without_root_option() -> None:
    runner = RecordingRunner().expect(["usermod"], 6)
    w = SshKeyWriter(HostRoot("/"), Accounts({}, {}, {}), runner)
    w.set_password_hashes([User("mcd-test-no-such-user-zz")], [])
    assert runner.commands == [("usermod", "-p", "", "mcd-test-no-such-user-zz")]
