"""diff(): upstream's machineConfigDiff flags and the per-path changes behind them."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from builders import ign_file, load, mc, mc_object

from mcd.config.machineconfig import MachineConfig
from mcd.planner.diff import ADDED, MODIFIED, REMOVED, Change, diff

OCL = "machineconfiguration.openshift.io/ocl-osimageurl"


def flags_set(old: MachineConfig, new: MachineConfig, forcefile: bool = False) -> set[str]:
    return {k for k, v in diff(old, new, forcefile).flags().items() if v}


def with_annotation(name: str, image: str, **spec: Any) -> MachineConfig:
    obj = mc_object(name, **spec)
    obj["metadata"]["annotations"] = {OCL: image}
    return load(obj)


# ---------------------------------------------------------------- flags


def test_identical_configs_have_an_empty_diff() -> None:
    d = diff(mc("a", files=[ign_file("/etc/a", "x")]), mc("b", files=[ign_file("/etc/a", "x")]))
    assert d.is_empty
    assert d.file_changes == d.unit_changes == d.passwd_changes == d.spec_changes == ()
    assert set(d.flags()) == {
        "osUpdate",
        "kargs",
        "fips",
        "passwd",
        "files",
        "units",
        "kernelType",
        "extensions",
    }


def test_ignition_version_alone_is_no_diff() -> None:
    old = mc("a", ignition={"ignition": {"version": "3.2.0"}})
    new = mc("b", ignition={"ignition": {"version": "3.5.0"}})
    assert diff(old, new).is_empty


@pytest.mark.parametrize(
    ("old_spec", "new_spec", "flag"),
    [
        ({"osImageURL": "quay.io/a"}, {"osImageURL": "quay.io/b"}, "osUpdate"),
        ({}, {"osImageURL": "quay.io/b"}, "osUpdate"),
        ({"kernelArguments": ["a=1"]}, {"kernelArguments": ["a=2"]}, "kargs"),
        ({"fips": False}, {"fips": True}, "fips"),
        ({"kernelType": "default"}, {"kernelType": "realtime"}, "kernelType"),
        ({"kernelType": "realtime"}, {"kernelType": "64k-pages"}, "kernelType"),
        ({}, {"extensions": ["usbguard"]}, "extensions"),
        ({"extensions": ["usbguard", "kerberos"]}, {"extensions": ["kerberos", "usbguard"]}, "extensions"),
    ],
)
def test_each_spec_flag(old_spec: dict[str, Any], new_spec: dict[str, Any], flag: str) -> None:
    assert flags_set(mc("a", **old_spec), mc("b", **new_spec)) == {flag}


@pytest.mark.parametrize(
    ("old", "new", "changed"),
    [
        (["a=1", "b=2"], ["b=2", "a=1"], True),  # order matters
        (["a=1"], ["a=1", "a=1"], True),  # duplicates matter
        (["a=1", "a=1"], ["a=1", "a=1"], False),
        (None, [], False),  # nil and [] are the same
        ([], None, False),
        (None, ["a=1"], True),
        (["a=1"], None, True),
    ],
)
def test_kargs_flag(old: list[str] | None, new: list[str] | None, changed: bool) -> None:
    assert diff(mc("a", kernelArguments=old), mc("b", kernelArguments=new)).kargs is changed


@pytest.mark.parametrize(("old", "new"), [(None, []), ([], None), (["usbguard"], ["usbguard"])])
def test_extensions_nil_vs_empty(old: list[str] | None, new: list[str] | None) -> None:
    assert not diff(mc("a", extensions=old), mc("b", extensions=new)).extensions


@pytest.mark.parametrize(("old", "new"), [("", "default"), ("default", "bogus"), ("", "Realtime")])
def test_kernel_type_is_canonicalised(old: str, new: str) -> None:
    assert not diff(mc("a", kernelType=old), mc("b", kernelType=new)).kernel_type


def test_forcefile_means_os_update() -> None:
    d = diff(mc("a"), mc("b"), forcefile=True)
    assert d.os_update
    assert d.spec_changes == (Change("osImageURL", "", ADDED, ("forcefile present: OS re-applied",)),)


def test_files_units_passwd_flags() -> None:
    base = mc("a", files=[ign_file("/etc/a", "x")], units=[{"name": "a.service"}], ssh_keys=["k1"])
    assert flags_set(
        base, mc("b", files=[ign_file("/etc/a", "y")], units=[{"name": "a.service"}], ssh_keys=["k1"])
    ) == {"files"}
    assert flags_set(
        base,
        mc(
            "b",
            files=[ign_file("/etc/a", "x")],
            units=[{"name": "a.service", "enabled": True}],
            ssh_keys=["k1"],
        ),
    ) == {"units"}
    assert flags_set(
        base, mc("b", files=[ign_file("/etc/a", "x")], units=[{"name": "a.service"}], ssh_keys=["k2"])
    ) == {"passwd"}


def test_file_order_alone_is_a_files_diff() -> None:
    a, b = ign_file("/etc/a", "1"), ign_file("/etc/b", "2")
    d = diff(mc("a", files=[a, b]), mc("b", files=[b, a]))
    assert d.files
    # but no single path changed
    assert d.file_changes == ()


def test_unparsable_side_counts_as_empty() -> None:
    bad = mc("bad", ignition={"ignition": {"version": "4.0.0"}})
    d = diff(bad, mc("b", files=[ign_file("/etc/a", "x")]))
    assert d.file_changes == (Change("file", "/etc/a", ADDED),)


# ---------------------------------------------------------------- OCL


def test_ocl_image_decides_os_update() -> None:
    old = with_annotation("a", "quay.io/ocl@sha256:1", osImageURL="quay.io/base-a")
    same = with_annotation("b", "quay.io/ocl@sha256:1", osImageURL="quay.io/base-b")
    other = with_annotation("c", "quay.io/ocl@sha256:2", osImageURL="quay.io/base-a")
    assert diff(old, same).ocl_enabled
    assert not diff(old, same).os_update
    assert diff(old, other).os_update
    assert not diff(old, other).revert_from_ocl


def test_revert_from_ocl() -> None:
    d = diff(with_annotation("a", "quay.io/ocl"), mc("b", osImageURL="quay.io/base"))
    assert d.ocl_enabled
    assert d.revert_from_ocl
    assert d.os_update


# ---------------------------------------------------------------- per-path changes


def test_added_modified_removed_files_in_order() -> None:
    old = mc("a", files=[ign_file("/etc/gone"), ign_file("/etc/same", "s"), ign_file("/etc/mod", "1")])
    new = mc("b", files=[ign_file("/etc/mod", "2"), ign_file("/etc/new"), ign_file("/etc/same", "s")])
    assert diff(old, new).file_changes == (
        Change("file", "/etc/mod", MODIFIED, ("contents",)),
        Change("file", "/etc/new", ADDED),
        Change("file", "/etc/gone", REMOVED),
    )
    assert diff(old, new).changed_paths == ("/etc/mod", "/etc/new", "/etc/gone")


@pytest.mark.parametrize(
    ("old_extra", "new_extra", "details"),
    [
        ({"mode": 0o644}, {"mode": 0o600}, ("mode 0644->0600",)),
        ({"mode": None}, {"mode": 0o755}, ("mode 0644->0755",)),
        ({}, {"user": {"name": "core"}}, ("owner",)),
        ({}, {"group": {"id": 10}}, ("owner",)),
        ({}, {"overwrite": True}, ("declaration",)),
        ({}, {"append": [{"source": "data:,x"}]}, ("append",)),
    ],
)
def test_modified_file_details(
    old_extra: dict[str, Any], new_extra: dict[str, Any], details: tuple[str, ...]
) -> None:
    old = {"path": "/etc/a", "contents": {"source": "data:,x"}, **old_extra}
    new = {"path": "/etc/a", "contents": {"source": "data:,x"}, **new_extra}
    [change] = diff(mc("a", files=[old]), mc("b", files=[new])).file_changes
    assert change == Change("file", "/etc/a", MODIFIED, details)


def test_same_bytes_declared_differently_is_an_encoding_change() -> None:
    old = {"path": "/etc/a", "contents": {"source": "data:,hi"}}
    new = {"path": "/etc/a", "contents": {"source": "data:;base64," + base64.b64encode(b"hi").decode()}}
    [change] = diff(mc("a", files=[old]), mc("b", files=[new])).file_changes
    assert change.details == ("encoding",)


def test_several_file_details_at_once() -> None:
    old = ign_file("/etc/a", "1", mode=0o644)
    new = ign_file("/etc/a", "2", mode=0o600, user={"id": 1})
    [change] = diff(mc("a", files=[old]), mc("b", files=[new])).file_changes
    assert change.details == ("contents", "mode 0644->0600", "owner")


def test_unit_changes_with_dropin_details() -> None:
    old_units = [
        {
            "name": "keep.service",
            "contents": "a",
            "dropins": [{"name": "10-a.conf", "contents": "1"}, {"name": "20-gone.conf", "contents": "x"}],
        },
        {"name": "gone.service"},
        {"name": "toggle.service", "enabled": False},
    ]
    new_units = [
        {
            "name": "keep.service",
            "contents": "b",
            "dropins": [{"name": "10-a.conf", "contents": "2"}, {"name": "30-new.conf", "contents": "y"}],
        },
        {"name": "toggle.service", "enabled": True, "mask": True},
        {"name": "new.service", "dropins": [{"name": "x.conf"}]},
    ]
    assert diff(mc("a", units=old_units), mc("b", units=new_units)).unit_changes == (
        Change(
            "unit",
            "keep.service",
            MODIFIED,
            (
                "contents",
                "dropin 10-a.conf modified",
                "dropin 30-new.conf added",
                "dropin 20-gone.conf removed",
            ),
        ),
        Change("unit", "toggle.service", MODIFIED, ("enabled False->True", "mask None->True")),
        Change("unit", "new.service", ADDED, ("dropin x.conf added",)),
        Change("unit", "gone.service", REMOVED),
    )


def test_sshkey_changes() -> None:
    d = diff(mc("a", ssh_keys=["k1", "k2"]), mc("b", ssh_keys=["k2", "k3", "k4"]))
    assert d.passwd
    assert d.passwd_changes == (Change("sshkey", "core", MODIFIED, ("sshAuthorizedKeys +2 -1",)),)


def test_sshkey_reorder_is_still_a_change() -> None:
    d = diff(mc("a", ssh_keys=["k1", "k2"]), mc("b", ssh_keys=["k2", "k1"]))
    assert d.passwd_changes == (Change("sshkey", "core", MODIFIED, ("sshAuthorizedKeys +0 -0",)),)


def test_core_user_added_and_removed() -> None:
    added = diff(mc("a"), mc("b", ssh_keys=["k1"])).passwd_changes
    assert added == (Change("sshkey", "core", ADDED, ("sshAuthorizedKeys +1 -0",)),)
    removed = diff(mc("a", ssh_keys=["k1"]), mc("b")).passwd_changes
    assert removed == (Change("sshkey", "core", REMOVED),)


def test_password_hash_and_other_fields() -> None:
    def core(**fields: Any) -> MachineConfig:
        return mc(
            "x",
            ignition={"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core", **fields}]}},
        )

    password, other = diff(
        core(sshAuthorizedKeys=["k"]), core(sshAuthorizedKeys=["k"], passwordHash="$6$h", uid=5)
    ).passwd_changes
    # a password hash change is labelled as one, never as an SSH key change
    assert (password.kind, password.name, password.details) == ("password", "core", ("passwordHash",))
    assert (other.kind, other.details) == ("sshkey", ("other fields",))


def test_a_password_hash_change_alone_is_no_ssh_key_change() -> None:
    def core(**fields: Any) -> MachineConfig:
        return mc(
            "x",
            ignition={"ignition": {"version": "3.5.0"}, "passwd": {"users": [{"name": "core", **fields}]}},
        )

    changes = diff(core(passwordHash="$6$a"), core(passwordHash="$6$b")).passwd_changes
    assert [(c.kind, c.name, c.change, c.details) for c in changes] == [
        ("password", "core", "modified", ("passwordHash",))
    ]


def test_spec_changes() -> None:
    old = mc("a", osImageURL="quay.io/a", kernelArguments=["x=1"], extensions=["usbguard"])
    new = mc("b", osImageURL="quay.io/b", kernelArguments=["x=2", "y"], kernelType="realtime", fips=True)
    assert diff(old, new).spec_changes == (
        Change("osImageURL", "quay.io/b", MODIFIED),
        Change("kernelArguments", "x=2 y", MODIFIED),
        Change("kernelType", "realtime", MODIFIED),
        Change("extensions", "usbguard", REMOVED),  # a removal is named by what goes
        Change("fips", "true", MODIFIED),
    )


def test_removed_kernel_arguments_are_named() -> None:
    assert diff(mc("a", kernelArguments=["nosmt"]), mc("b")).spec_changes == (
        Change("kernelArguments", "nosmt", REMOVED),
    )


def test_a_repeated_diff_answers_for_the_configs_given_not_the_last_pair() -> None:
    """An update diffs the same pair twice and the comparison is remembered: by identity of
    both configs, so another pair (even one sharing a side) is compared afresh."""
    old = mc("a", files=[ign_file("/etc/a", "x")])
    first = mc("b", files=[ign_file("/etc/a", "y")])
    second = mc("c", files=[ign_file("/etc/a", "x"), ign_file("/etc/b", "z")])
    assert diff(old, first).file_changes == diff(old, first).file_changes
    assert [(c.name, c.change) for c in diff(old, first).file_changes] == [("/etc/a", MODIFIED)]
    assert [(c.name, c.change) for c in diff(old, second).file_changes] == [("/etc/b", ADDED)]
    assert [(c.name, c.change) for c in diff(second, old).file_changes] == [("/etc/b", REMOVED)]
    assert diff(old, mc("d", files=[ign_file("/etc/a", "x")])).is_empty
