"""reconcile(): upstream's unreconcilable reasons, their exact texts and their order."""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file, mc

from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.planner.reconcile import FIPS_MESSAGE, FORCEFILE, reconcile, unreconcilable_reason

PREFIX = 'new machineconfig "old" is not reconcilable against "new": '


RAID = {"name": "md0", "level": "raid1", "devices": ["/dev/vda", "/dev/vdb"]}


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def pair(old: dict[str, Any], new: dict[str, Any], **new_spec: Any) -> tuple[MachineConfig, MachineConfig]:
    return mc("old", ignition=old), mc("new", ignition=new, **new_spec)


def test_allowed_changes_are_reconcilable() -> None:
    old = mc(
        "old",
        files=[ign_file("/etc/a", "1")],
        units=[{"name": "a.service"}],
        ssh_keys=["k1"],
        osImageURL="quay.io/a",
        kernelArguments=["x"],
    )
    new = mc(
        "new",
        files=[ign_file("/etc/a", "2"), ign_file("/etc/b")],
        units=[{"name": "a.service", "enabled": True, "dropins": [{"name": "x.conf", "contents": "y"}]}],
        ssh_keys=["k2"],
        osImageURL="quay.io/b",
        kernelArguments=["y"],
        kernelType="realtime",
        extensions=["usbguard"],
        baseOSExtensionsContainerImage="quay.io/ext",
    )
    assert reconcile(old, new) == []


def test_from_the_empty_config() -> None:
    assert reconcile(empty_machineconfig(), mc("new", files=[ign_file("/etc/a")], ssh_keys=["k"])) == []


def test_unparsable_new_config() -> None:
    old, new = pair(ign(), {"ignition": {"version": "4.0.0"}})
    [error] = reconcile(old, new)
    assert error.startswith(
        'parsing new Ignition config from machineconfig "new" failed: failed to parse Ignition config: '
        'unsupported Ignition config version "4.0.0"'
    )


def test_unparsable_old_config() -> None:
    old, new = pair({"ignition": {"version": "9.9.9"}}, ign())
    [error] = reconcile(old, new)
    assert error.startswith(
        'parsing old Ignition config from machineconfig "old" failed: failed to parse Ignition config: '
    )


def test_structurally_invalid_new_config_is_a_parse_failure() -> None:
    old, new = pair(ign(), ign(storage={"files": [{"path": "/etc/a", "mode": "abc"}]}))
    [error] = reconcile(old, new)
    assert error.startswith('parsing new Ignition config from machineconfig "new" failed: ')


def test_invalid_new_config_is_a_validation_failure() -> None:
    old, new = pair(ign(), ign(storage={"files": [ign_file("etc/a")]}))
    assert reconcile(old, new) == [
        'validating new Ignition config from machineconfig "new" failed: path "etc/a" is not absolute'
    ]


def test_mode_with_special_bits() -> None:
    old, new = pair(ign(), ign(storage={"files": [ign_file("/etc/a", mode=0o1777)]}))
    assert reconcile(old, new) == [
        'validating new Ignition config from machineconfig "new" failed: '
        "invalid mode 01777 for /etc/a, cannot exceed 0777"
    ]


def test_several_validation_findings_are_joined() -> None:
    old, new = pair(ign(), ign(storage={"files": [ign_file("rel"), ign_file("/etc/b", mode=0o4755)]}))
    assert reconcile(old, new) == [
        'validating new Ignition config from machineconfig "new" failed: '
        'invalid mode 04755 for /etc/b, cannot exceed 0777; path "rel" is not absolute'
    ]


def test_both_configs_unparsable_lists_old_first() -> None:
    old, new = pair({"ignition": {"version": "9.9.9"}}, {"ignition": {"version": "4.0.0"}})
    errors = reconcile(old, new)
    assert [e.split(" Ignition")[0] for e in errors] == ["parsing old", "parsing new"]


def test_unparsable_config_and_fips_change() -> None:
    old = mc("old", ignition=ign())
    new = mc("new", ignition={"ignition": {"version": "4.0.0"}}, fips=True)
    errors = reconcile(old, new)
    assert errors[1] == PREFIX + FIPS_MESSAGE


# ---------------------------------------------------------------- one reason each


@pytest.mark.parametrize(
    ("old", "new", "reason"),
    [
        (
            ign(passwd={"groups": [{"name": "a"}]}),
            ign(passwd={"groups": [{"name": "b"}]}),
            "invalid passwd change(s): ignition Passwd Groups section contains changes",
        ),
        (
            ign(),
            ign(passwd={"users": [{"name": "bob", "sshAuthorizedKeys": ["k"]}]}),
            "invalid passwd change(s): ignition passwd user section contains unsupported changes: "
            "non-core user",
        ),
        (
            ign(),
            ign(passwd={"users": [{"name": "core"}]}),
            "invalid passwd change(s): ignition passwd user section contains unsupported changes: "
            "user must be core and have 1 or more sshKeys",
        ),
        (
            ign(),
            ign(passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k"], "uid": 1000}]}),
            "invalid passwd change(s): SSH keys and password hash are not reconcilable",
        ),
        (ign(), ign(kernelArguments={"shouldExist": ["a"]}), "ignition kargs section contains changes"),
        (ign(), ign(storage={"disks": [{"device": "/dev/sdb"}]}), "ignition disks section contains changes"),
        (
            ign(),
            ign(storage={"filesystems": [{"device": "/dev/sdb1", "format": "xfs"}]}),
            "ignition filesystems section contains changes",
        ),
        (
            ign(),
            ign(storage={"raid": [RAID]}),
            "ignition raid section contains changes",
        ),
        (
            ign(),
            ign(storage={"directories": [{"path": "/etc/d"}]}),
            "ignition directories section contains changes",
        ),
        (
            ign(storage={"links": [{"path": "/etc/l", "target": "/a"}]}),
            ign(storage={"links": [{"path": "/etc/l", "target": "/b"}]}),
            "ignition links section contains changes",
        ),
        (
            ign(),
            ign(storage={"files": [{"path": "/etc/a", "append": [{"source": "data:,x"}]}]}),
            "ignition file /etc/a includes append",
        ),
        (ign(), ign(storage={"files": [ign_file(FORCEFILE)]}), f"cannot create {FORCEFILE} via Ignition"),
    ],
)
def test_each_reason(old: dict[str, Any], new: dict[str, Any], reason: str) -> None:
    o, n = pair(old, new)
    assert reconcile(o, n) == [PREFIX + reason]


def test_password_hash_alone_is_enough_for_core() -> None:
    o, n = pair(ign(), ign(passwd={"users": [{"name": "core", "passwordHash": "$6$x"}]}))
    assert reconcile(o, n) == []


def test_removing_every_user_is_accepted() -> None:
    o, n = pair(ign(passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]}), ign())
    assert reconcile(o, n) == []


def test_a_user_declared_twice_is_refused_as_ignition_does() -> None:
    # upstream's reconcile looks at the last entry only, but Ignition's duplicate check refuses
    # such a list before (the quirk cannot be reached through a parsed config)
    users = [{"name": "core", "uid": 1000}, {"name": "core", "sshAuthorizedKeys": ["k"]}]
    o, n = pair(ign(), ign(passwd={"users": users}))
    assert reconcile(o, n) == [
        'validating new Ignition config from machineconfig "new" failed: duplicate entry defined'
    ]


def test_removing_every_link_is_accepted() -> None:
    o, n = pair(ign(storage={"links": [{"path": "/etc/l", "target": "/a"}]}), ign())
    assert reconcile(o, n) == []


def test_luks_is_not_compared() -> None:
    o, n = pair(ign(), ign(storage={"luks": [{"name": "root", "device": "/dev/sda4"}]}))
    assert reconcile(o, n) == []


def test_an_old_append_is_not_a_reason() -> None:
    o, n = pair(ign(storage={"files": [{"path": "/etc/a", "append": [{"source": "data:,x"}]}]}), ign())
    assert reconcile(o, n) == []


@pytest.mark.parametrize(
    ("override", "section"),
    [
        ("Disks", {"disks": [{"device": "/dev/sdb"}]}),
        ("FileSystems", {"filesystems": [{"device": "/dev/sdb1"}]}),
        ("Raid", {"raid": [RAID]}),
    ],
)
def test_storage_overrides(override: str, section: dict[str, Any]) -> None:
    o, n = pair(ign(), ign(storage=section))
    assert reconcile(o, n) != []
    assert reconcile(o, n, storage_overrides=[override]) == []


def test_fips_change() -> None:
    assert reconcile(mc("old"), mc("new", fips=True)) == [PREFIX + FIPS_MESSAGE]


@pytest.mark.parametrize(
    ("node_fips", "new_fips", "ok"), [(True, True, True), (False, True, False), (True, False, False)]
)
def test_node_fips(node_fips: bool, new_fips: bool, ok: bool) -> None:
    errors = reconcile(mc("old", fips=new_fips), mc("new", fips=new_fips), node_fips=node_fips)
    assert errors == ([] if ok else [FIPS_MESSAGE])


# ---------------------------------------------------------------- order


def test_every_reason_in_upstream_order() -> None:
    old = ign(passwd={"groups": [{"name": "a"}]}, storage={"links": [{"path": "/etc/l", "target": "/a"}]})
    new = ign(
        passwd={"groups": [{"name": "b"}]},
        kernelArguments={"shouldExist": ["a"]},
        storage={
            "disks": [{"device": "/dev/sdb"}],
            "filesystems": [{"device": "/dev/sdb1"}],
            "raid": [RAID],
            "directories": [{"path": "/etc/d"}],
            "links": [{"path": "/etc/l", "target": "/b"}],
            "files": [{"path": "/etc/a", "append": [{"source": "data:,x"}]}, ign_file(FORCEFILE)],
        },
    )
    errors = reconcile(mc("old", ignition=old), mc("new", ignition=new, fips=True), node_fips=False)
    assert errors == [
        PREFIX + e
        for e in (
            "invalid passwd change(s): ignition Passwd Groups section contains changes",
            "ignition kargs section contains changes",
            "ignition disks section contains changes",
            "ignition filesystems section contains changes",
            "ignition raid section contains changes",
            "ignition directories section contains changes",
            "ignition links section contains changes",
            "ignition file /etc/a includes append",
            f"cannot create {FORCEFILE} via Ignition",
            FIPS_MESSAGE,
        )
    ] + [FIPS_MESSAGE]


def test_unreconcilable_reason_annotation() -> None:
    assert unreconcilable_reason("rendered-a", "rendered-b", "boom") == (
        "can't reconcile config rendered-a with rendered-b: "
        "configs rendered-a, rendered-b are not reconcilable: boom"
    )


def test_old_config_with_a_sticky_bit_file_can_be_fixed() -> None:
    o, n = pair(
        ign(storage={"files": [ign_file("/etc/a", mode=0o1777)]}),
        ign(storage={"files": [ign_file("/etc/a", mode=0o755)]}),
    )
    assert reconcile(o, n) == []
