"""reconcile(): upstream's texts written out (never imported), and configs that are only partly valid."""

from __future__ import annotations

import dataclasses
from typing import Any

from builders import ign_file, mc

from mcd.config.findings import Finding
from mcd.planner.reconcile import reconcile

PREFIX = 'new machineconfig "old" is not reconcilable against "new": '
FIPS = "detected change to FIPS flag; refusing to modify FIPS on a running cluster"


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def test_fips_and_forcefile_texts() -> None:
    assert reconcile(mc("old"), mc("new", fips=True)) == [
        'new machineconfig "old" is not reconcilable against "new": '
        "detected change to FIPS flag; refusing to modify FIPS on a running cluster"
    ]
    assert reconcile(mc("old", fips=True), mc("new", fips=True), node_fips=False) == [
        "detected change to FIPS flag; refusing to modify FIPS on a running cluster"
    ]
    new = mc("new", files=[ign_file("/run/machine-config-daemon-force")])
    assert reconcile(mc("old"), new) == [
        'new machineconfig "old" is not reconcilable against "new": '
        "cannot create /run/machine-config-daemon-force via Ignition"
    ]


def test_node_fips_equal_to_the_target_is_no_reason() -> None:
    assert reconcile(mc("old", fips=True), mc("new", fips=True), node_fips=True) == []
    assert reconcile(mc("old"), mc("new"), node_fips=False) == []


def test_an_unparsable_old_config_still_reports_a_fips_change() -> None:
    old = mc("old", ignition={"ignition": {"version": "9.9.9"}})
    errors = reconcile(old, mc("new", fips=True))
    assert errors[0].startswith(
        'parsing old Ignition config from machineconfig "old" failed: failed to parse Ignition config: '
        'unsupported Ignition config version "9.9.9"'
    )
    assert errors[1:] == [PREFIX + FIPS]
    assert reconcile(old, mc("new")) == errors[:1]


def test_an_old_config_failing_only_validation_is_still_compared() -> None:
    # upstream holds the config a node runs to parsing only
    old = mc("old", ignition=ign(storage={"files": [ign_file("rel")]}))
    assert reconcile(old, mc("new", ignition=ign())) == []
    new = mc("new", ignition=ign(kernelArguments={"shouldExist": ["a"]}))
    assert reconcile(old, new) == [PREFIX + "ignition kargs section contains changes"]


def test_a_new_config_failing_validation_is_compared_too() -> None:
    new = mc("new", ignition=ign(storage={"files": [ign_file("rel")], "directories": [{"path": "/d"}]}))
    assert reconcile(mc("old", ignition=ign()), new) == [
        'validating new Ignition config from machineconfig "new" failed: path "rel" is not absolute',
        PREFIX + "ignition directories section contains changes",
    ]


def test_warnings_are_not_reasons() -> None:
    new = mc("new", ignition=ign(storage={"files": [ign_file("rel")]}))
    warning = Finding(("x",), "just a warning", "warning")
    result = dataclasses.replace(new.ignition, findings=(warning, *new.ignition.findings))
    new = dataclasses.replace(new, ignition=result)
    assert reconcile(mc("old", ignition=ign()), new) == [
        'validating new Ignition config from machineconfig "new" failed: path "rel" is not absolute'
    ]


def test_only_the_groups_are_reported_when_groups_and_users_change() -> None:
    old = mc("old", ignition=ign(passwd={"groups": [{"name": "a"}]}))
    new = mc("new", ignition=ign(passwd={"groups": [{"name": "b"}], "users": [{"name": "bob"}]}))
    assert reconcile(old, new) == [
        PREFIX + "invalid passwd change(s): ignition Passwd Groups section contains changes"
    ]


def test_a_users_change_with_the_groups_unchanged() -> None:
    groups = [{"name": "g"}]
    old = mc(
        "old",
        ignition=ign(passwd={"groups": groups, "users": [{"name": "core", "sshAuthorizedKeys": ["a"]}]}),
    )
    new = mc(
        "new",
        ignition=ign(passwd={"groups": groups, "users": [{"name": "core", "sshAuthorizedKeys": ["b"]}]}),
    )
    assert reconcile(old, new) == []
    other = mc(
        "new",
        ignition=ign(
            passwd={
                "groups": groups,
                "users": [{"name": "core", "sshAuthorizedKeys": ["b"], "homeDir": "/x"}],
            }
        ),
    )
    assert reconcile(old, other) == [
        PREFIX + "invalid passwd change(s): SSH keys and password hash are not reconcilable"
    ]


def test_an_unchanged_non_core_user_is_no_reason() -> None:
    # upstream compares the users first: an unchanged list is never inspected
    users = {"users": [{"name": "bob", "sshAuthorizedKeys": ["k"]}]}
    assert reconcile(mc("old", ignition=ign(passwd=users)), mc("new", ignition=ign(passwd=users))) == []


def test_an_added_link_list_is_a_change_but_an_emptied_one_is_not() -> None:
    link = {"path": "/etc/l", "target": "/a"}
    assert reconcile(mc("old", ignition=ign()), mc("new", ignition=ign(storage={"links": [link]}))) == [
        PREFIX + "ignition links section contains changes"
    ]
    assert reconcile(mc("old", ignition=ign(storage={"links": [link]})), mc("new", ignition=ign())) == []
