"""mcd.host.accounts: users and groups come from the root's files, with upstream's messages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcd.host.accounts import Accounts, UnknownGroup, UnknownUser, User
from mcd.host.root import HostRoot

PASSWD = """\
root:x:0:0:root:/root:/bin/bash
# a comment
core:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash
+nisuser::::::
broken-line-without-fields
baduid:x:abc:1:bad:/:/sbin/nologin
core:x:2000:2000:shadowed duplicate:/nowhere:/bin/sh
nohome:x:1001:1001:::/sbin/nologin
"""
GROUP = """\
root:x:0:
wheel:x:10:core
core:x:1000:
-nisgroup
short:x
core:x:3000:
"""
SHADOW = """\
root:*:19000:0:99999:7:::
core:$6$salt$hash:19000:0:99999:7:::
"""


def make_root(tmp_path: Path, files: dict[str, str]) -> HostRoot:
    for path, text in files.items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return HostRoot(tmp_path)


@pytest.fixture
def accounts(tmp_path: Path) -> Accounts:
    return Accounts.load(
        make_root(tmp_path, {"/etc/passwd": PASSWD, "/etc/group": GROUP, "/etc/shadow": SHADOW})
    )


def test_users_parsed(accounts: Accounts) -> None:
    assert accounts.uid("core") == 1000
    assert accounts.uid("root") == 0
    assert accounts.home("core") == "/var/home/core"
    assert accounts.users["core"] == User("core", 1000, 1000, "/var/home/core", "/bin/bash")


def test_groups_parsed(accounts: Accounts) -> None:
    assert accounts.gid("core") == 1000
    assert accounts.gid("wheel") == 10


def test_first_entry_wins(accounts: Accounts) -> None:
    assert accounts.uid("core") == 1000
    assert accounts.gid("core") == 1000


@pytest.mark.parametrize(
    "name", ["+nisuser", "nisuser", "broken-line-without-fields", "baduid", "# a comment"]
)
def test_comments_nis_and_malformed_lines_are_skipped(accounts: Accounts, name: str) -> None:
    assert not accounts.has_user(name)


def test_unknown_user_message_is_upstreams(accounts: Accounts) -> None:
    with pytest.raises(UnknownUser) as info:
        accounts.uid("nobody-here")
    assert str(info.value) == "failed to retrieve UserID for username: nobody-here"
    assert isinstance(info.value, LookupError)


def test_unknown_group_message_is_upstreams(accounts: Accounts) -> None:
    with pytest.raises(UnknownGroup) as info:
        accounts.gid("short")
    assert str(info.value) == "failed to retrieve GroupID for group: short"
    assert isinstance(info.value, LookupError)


def test_user_name_is_not_a_group_name(accounts: Accounts) -> None:
    # gid() looks up groups only; a user's primary group is users[name].gid.
    assert accounts.has_user("nohome")
    with pytest.raises(UnknownGroup):
        accounts.gid("nohome")


def test_home_none_for_unknown_user_or_empty_field(accounts: Accounts) -> None:
    assert accounts.home("nohome") is None
    assert accounts.home("ghost") is None


def test_shadow_hash(accounts: Accounts) -> None:
    assert accounts.shadow_hash("core") == "$6$salt$hash"
    assert accounts.shadow_hash("root") == "*"
    assert accounts.shadow_hash("ghost") is None


def test_missing_files_mean_no_accounts(tmp_path: Path) -> None:
    accounts = Accounts.load(HostRoot(tmp_path))
    assert not accounts.has_user("core")
    assert accounts.shadow_hash("core") is None
    with pytest.raises(UnknownUser, match="core"):
        accounts.uid("core")


def test_usr_lib_files_are_a_fallback_after_etc(tmp_path: Path) -> None:
    root = make_root(
        tmp_path,
        {
            "/etc/passwd": "core:x:1000:1000::/var/home/core:/bin/bash\n",
            "/usr/lib/passwd": "core:x:9999:9999::/x:/bin/sh\nsshd:x:74:74::/var/empty/sshd:/sbin/nologin\n",
            "/etc/group": "core:x:1000:\n",
            "/usr/lib/group": "core:x:9999:\nsshd:x:74:\n",
        },
    )
    accounts = Accounts.load(root)
    assert (accounts.uid("core"), accounts.gid("core")) == (1000, 1000)
    assert (accounts.uid("sshd"), accounts.gid("sshd")) == (74, 74)


def test_reads_the_root_not_the_running_system(tmp_path: Path) -> None:
    # The process's own /etc/passwd certainly has root; this root does not.
    accounts = Accounts.load(make_root(tmp_path, {"/etc/passwd": "core:x:1000:1000::/home/core:/bin/sh\n"}))
    with pytest.raises(UnknownUser):
        accounts.uid("root")


def test_symlinked_passwd_is_resolved_inside_the_root(tmp_path: Path) -> None:
    make_root(tmp_path, {"/usr/share/passwd": "core:x:1000:1000::/home/core:/bin/sh\n"})
    (tmp_path / "etc").mkdir()
    os.symlink("/usr/share/passwd", tmp_path / "etc/passwd")  # absolute: re-rooted, not the host's
    assert Accounts.load(HostRoot(tmp_path)).uid("core") == 1000


def test_non_utf8_bytes_do_not_hide_other_accounts(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/passwd").write_bytes(b"caf\xe9:x:5:5::/:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n")
    assert Accounts.load(HostRoot(tmp_path)).uid("core") == 1000
