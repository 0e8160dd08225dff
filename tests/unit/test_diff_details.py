"""diff(): what each changed row says about the change (the details `mcd plan` shows)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file, mc

from mcd.planner.diff import Change, diff


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def rows(old: dict[str, Any], new: dict[str, Any]) -> tuple[Change, ...]:
    d = diff(mc("old", ignition=old), mc("new", ignition=new))
    return d.file_changes + d.unit_changes + d.passwd_changes


def unit(**fields: Any) -> dict[str, Any]:
    return ign(systemd={"units": [{"name": "a.service", **fields}]})


def users(*entries: dict[str, Any]) -> dict[str, Any]:
    return ign(passwd={"users": list(entries)})


@pytest.mark.parametrize(
    ("old", "new", "details"),
    [
        ({"contents": "1"}, {"contents": "2"}, ("contents",)),
        ({"enabled": True}, {"enabled": False}, ("enabled True->False",)),
        ({}, {"mask": True}, ("mask None->True",)),
        (
            {"dropins": [{"name": "x.conf", "contents": "1"}, {"name": "y.conf", "contents": "1"}]},
            {"dropins": [{"name": "x.conf", "contents": "2"}, {"name": "z.conf", "contents": "1"}]},
            ("dropin x.conf modified", "dropin z.conf added", "dropin y.conf removed"),
        ),
        # the same dropins in another order: the declaration changed, nothing in it
        (
            {"dropins": [{"name": "x.conf", "contents": "1"}, {"name": "y.conf", "contents": "1"}]},
            {"dropins": [{"name": "y.conf", "contents": "1"}, {"name": "x.conf", "contents": "1"}]},
            ("declaration",),
        ),
        (
            {"contents": "1", "enabled": False, "mask": False},
            {"contents": "2", "enabled": True, "mask": True},
            ("contents", "enabled False->True", "mask False->True"),
        ),
    ],
)
def test_unit_details(old: dict[str, Any], new: dict[str, Any], details: tuple[str, ...]) -> None:
    assert rows(unit(**old), unit(**new)) == (Change("unit", "a.service", "modified", details),)


def test_units_added_and_removed() -> None:
    old = ign(systemd={"units": [{"name": "a.service"}, {"name": "b.service"}]})
    new = ign(
        systemd={
            "units": [
                {"name": "c.service", "dropins": [{"name": "x.conf", "contents": "1"}]},
                {"name": "a.service"},
            ]
        }
    )
    assert rows(old, new) == (
        Change("unit", "c.service", "added", ("dropin x.conf added",)),
        Change("unit", "b.service", "removed"),
    )


@pytest.mark.parametrize(
    ("old", "new", "details"),
    [
        (ign_file("/a", "x"), ign_file("/a", "y"), ("contents",)),
        (ign_file("/a", "x", mode=0o644), ign_file("/a", "x", mode=0o600), ("mode 0644->0600",)),
        # no mode is 0644
        (ign_file("/a", "x", mode=None), ign_file("/a", "x", mode=0o755), ("mode 0644->0755",)),
        (ign_file("/a", "x"), ign_file("/a", "x", user={"name": "core"}), ("owner",)),
        (ign_file("/a", "x"), ign_file("/a", "x", group={"id": 5}), ("owner",)),
        (ign_file("/a", "x"), ign_file("/a", "x", overwrite=True), ("declaration",)),
        (
            ign_file("/a", "x"),
            {"path": "/a", "mode": 420, "contents": {"source": "data:;base64,eA=="}},
            ("encoding",),
        ),
        (
            ign_file("/a", "x", mode=0o600),
            ign_file("/a", "y", mode=0o644, user={"name": "core"}),
            ("contents", "mode 0600->0644", "owner"),
        ),
    ],
)
def test_file_details(old: dict[str, Any], new: dict[str, Any], details: tuple[str, ...]) -> None:
    assert rows(ign(storage={"files": [old]}), ign(storage={"files": [new]})) == (
        Change("file", "/a", "modified", details),
    )


def test_files_in_new_order_then_removed_in_old_order() -> None:
    old = ign(storage={"files": [ign_file("/r2"), ign_file("/m", "1"), ign_file("/r1")]})
    new = ign(storage={"files": [ign_file("/n"), ign_file("/m", "2")]})
    assert rows(old, new) == (
        Change("file", "/n", "added"),
        Change("file", "/m", "modified", ("contents",)),
        Change("file", "/r2", "removed"),
        Change("file", "/r1", "removed"),
    )


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        (
            users({"name": "core", "sshAuthorizedKeys": ["a", "b"]}),
            users({"name": "core", "sshAuthorizedKeys": ["b", "c", "d"]}),
            (Change("sshkey", "core", "modified", ("sshAuthorizedKeys +2 -1",)),),
        ),
        # reordered keys: the list changed, no key did
        (
            users({"name": "core", "sshAuthorizedKeys": ["a", "b"]}),
            users({"name": "core", "sshAuthorizedKeys": ["b", "a"]}),
            (Change("sshkey", "core", "modified", ("sshAuthorizedKeys +0 -0",)),),
        ),
        (
            ign(),
            users({"name": "core", "sshAuthorizedKeys": ["a"], "passwordHash": "h"}),
            (
                Change("password", "core", "added", ("passwordHash",)),
                Change("sshkey", "core", "added", ("sshAuthorizedKeys +1 -0",)),
            ),
        ),
        (
            users({"name": "core", "passwordHash": "h"}),
            users({"name": "core", "passwordHash": "i"}),
            (Change("password", "core", "modified", ("passwordHash",)),),
        ),
        (
            users({"name": "core", "sshAuthorizedKeys": ["a"]}),
            users({"name": "core", "sshAuthorizedKeys": ["a"], "uid": 1000}),
            (Change("sshkey", "core", "modified", ("other fields",)),),
        ),
        (
            ign(),
            users({"name": "bob", "uid": 1}),
            (Change("sshkey", "bob", "added", ("other fields",)),),
        ),
        (
            users({"name": "core", "sshAuthorizedKeys": ["a"]}, {"name": "bob"}),
            users({"name": "core", "sshAuthorizedKeys": ["a"]}),
            (Change("sshkey", "bob", "removed"),),
        ),
        # every user is compared, past an unchanged one and past a password-only change
        (
            users(
                {"name": "bob"},
                {"name": "core", "passwordHash": "h"},
                {"name": "x", "sshAuthorizedKeys": ["k"]},
            ),
            users(
                {"name": "bob"},
                {"name": "core", "passwordHash": "i"},
                {"name": "x", "sshAuthorizedKeys": ["l"]},
            ),
            (
                Change("password", "core", "modified", ("passwordHash",)),
                Change("sshkey", "x", "modified", ("sshAuthorizedKeys +1 -1",)),
            ),
        ),
        (
            ign(passwd={"groups": [{"name": "a"}]}),
            ign(passwd={"groups": [{"name": "b"}]}),
            (Change("sshkey", "groups", "modified", ("passwd groups",)),),
        ),
    ],
)
def test_passwd_rows(old: dict[str, Any], new: dict[str, Any], changes: tuple[Change, ...]) -> None:
    assert rows(old, new) == changes


def test_spec_rows() -> None:
    full = mc("old", osImageURL="q/a", kernelArguments=["a"], extensions=["usbguard"], kernelType="realtime")
    assert diff(full, mc("new")).spec_changes == (
        Change("osImageURL", "q/a", "removed"),
        # a removed list is named by what goes (issue 8: it was "")
        Change("kernelArguments", "a", "removed"),
        Change("kernelType", "default", "modified"),
        Change("extensions", "usbguard", "removed"),
    )
    assert diff(
        mc("old"), mc("new", osImageURL="q/a", fips=True, kernelArguments=["a", "b"])
    ).spec_changes == (
        Change("osImageURL", "q/a", "added"),
        Change("kernelArguments", "a b", "added"),
        Change("fips", "true", "modified"),
    )
    assert diff(mc("old", fips=True, extensions=["a"]), mc("new", extensions=["a", "b"])).spec_changes == (
        Change("extensions", "a,b", "modified"),
        Change("fips", "false", "modified"),
    )
    # an empty list and no list are the same
    assert diff(mc("old", kernelArguments=[], extensions=[]), mc("new")).spec_changes == ()
    assert diff(mc("old"), mc("new"), forcefile=True).spec_changes == (
        Change("osImageURL", "", "added", ("forcefile present: OS re-applied",)),
    )
