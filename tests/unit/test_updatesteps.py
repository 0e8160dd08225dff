"""mcd.planner.updatesteps: the disk steps of an update, in order, from the diff and the node's facts."""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file, mc

from mcd.config.machineconfig import MachineConfig
from mcd.planner.diff import diff
from mcd.planner.nodefacts import NO_FACTS, Facts
from mcd.planner.steps import (
    Chmod,
    ClearPassword,
    Disable,
    Enable,
    Mask,
    Preset,
    RemoveFile,
    RestoreOriginal,
    SetPassword,
    Step,
    Unmask,
    WriteFiles,
    WriteSshKeys,
    WriteUnitFiles,
)
from mcd.planner.updatesteps import disk_steps

UNITS = "/etc/systemd/system"
ENABLED_WITH_INSTALL = "[Unit]\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"


def ign(**sections: Any) -> dict[str, Any]:
    return {"ignition": {"version": "3.5.0"}, **sections}


def units(*entries: dict[str, Any]) -> dict[str, Any]:
    return ign(systemd={"units": list(entries)})


def users(*entries: dict[str, Any]) -> dict[str, Any]:
    return ign(passwd={"users": list(entries)})


def steps_of(old: MachineConfig, new: MachineConfig, facts: Facts = NO_FACTS) -> tuple[list[Step], list[str]]:
    assert old.config is not None and new.config is not None
    notes: list[str] = []
    steps = disk_steps(old.config, new.config, diff(old, new, facts.forcefile), facts, notes)
    return steps, notes


def case(old: dict[str, Any], new: dict[str, Any], facts: Facts = NO_FACTS) -> tuple[list[Step], list[str]]:
    return steps_of(mc("old", ignition=old), mc("new", ignition=new), facts)


# ---------------------------------------------------------------- files

A, B = ign_file("/etc/a", "a"), ign_file("/etc/b", "b")


@pytest.mark.parametrize(
    ("old", "new", "facts", "steps"),
    [
        ([A], [A], Facts(), []),
        # declared as before, but not right on disk (or not known to be): written again
        ([A], [A], Facts(matching_paths=frozenset()), [WriteFiles(("/etc/a",))]),
        ([A], [A], Facts(matching_paths=frozenset({"/etc/a"})), []),
        ([A], [A, B], Facts(), [WriteFiles(("/etc/b",))]),
        ([], [B, A], Facts(), [WriteFiles(("/etc/b", "/etc/a"))]),
        ([A], [ign_file("/etc/a", "x")], Facts(), [WriteFiles(("/etc/a",))]),
        # the kubelet CA is left to the certificate writer when asked
        (
            [],
            [ign_file("/etc/kubernetes/kubelet-ca.crt"), A],
            Facts(skip_certificate_write=True),
            [WriteFiles(("/etc/a",))],
        ),
        (
            [],
            [ign_file("/etc/kubernetes/kubelet-ca.crt")],
            Facts(),
            [WriteFiles(("/etc/kubernetes/kubelet-ca.crt",))],
        ),
        # dropped files: deleted, or their original restored when there is a backup
        ([A, B], [], Facts(), [RemoveFile("/etc/a"), RemoveFile("/etc/b")]),
        (
            [A, B],
            [],
            Facts(backed_up=frozenset({"/etc/b"})),
            [RemoveFile("/etc/a"), RestoreOriginal("/etc/b")],
        ),
        # certificates are never deleted; the files after them still are
        ([ign_file("/etc/kubernetes/kubelet-ca.crt"), A], [], Facts(), [RemoveFile("/etc/a")]),
        (
            [ign_file("/etc/kubernetes/kubelet-ca.crt"), ign_file("/etc/docker/certs.d/r.io/ca.crt")],
            [],
            Facts(),
            [],
        ),
        # leaked links go on every update, in order
        (
            [A],
            [A],
            Facts(leaked_links=frozenset({f"{UNITS}/b.wants/x.service", f"{UNITS}/a.wants/y.service"})),
            [RemoveFile(f"{UNITS}/a.wants/y.service"), RemoveFile(f"{UNITS}/b.wants/x.service")],
        ),
        # the kubeconfig is made private when it is not
        ([A], [A], Facts(kubeconfig_mode=0o644), [Chmod("/etc/kubernetes/kubeconfig", 0o600)]),
        ([A], [A], Facts(kubeconfig_mode=0o600), []),
    ],
)
def test_file_steps(old: list[Any], new: list[Any], facts: Facts, steps: list[Step]) -> None:
    assert case(ign(storage={"files": old}), ign(storage={"files": new}), facts) == (steps, [])


def test_a_file_replaced_by_a_dropin_stays_unless_it_has_an_original() -> None:
    dropin_file = ign_file(f"{UNITS}/a.service.d/x.conf", "[Unit]\n")
    old = ign(storage={"files": [dropin_file]})
    new = units({"name": "a.service", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]})
    written = [WriteUnitFiles((f"{UNITS}/a.service.d/x.conf",)), Preset("a.service")]
    assert case(old, new) == (written, [])
    # and the files after it are still pruned
    old_two = ign(storage={"files": [dropin_file, A]})
    assert case(old_two, new) == ([*written, RemoveFile("/etc/a")], [])
    backed = Facts(backed_up=frozenset({f"{UNITS}/a.service.d/x.conf"}))
    assert case(old, new, backed) == ([*written, RestoreOriginal(f"{UNITS}/a.service.d/x.conf")], [])


# ---------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("unit", "facts", "steps", "notes"),
    [
        (
            {"name": "a.service", "contents": ENABLED_WITH_INSTALL, "enabled": True},
            Facts(),
            [WriteUnitFiles((f"{UNITS}/a.service",)), Enable(("a.service",))],
            [],
        ),
        (
            {"name": "a.service", "contents": "[Unit]\n", "enabled": False},
            Facts(),
            [WriteUnitFiles((f"{UNITS}/a.service",)), Disable(("a.service",))],
            [],
        ),
        (
            {"name": "a.service", "contents": "[Unit]\n"},
            Facts(),
            [WriteUnitFiles((f"{UNITS}/a.service",)), Preset("a.service")],
            [],
        ),
        ({"name": "a.service", "mask": True}, Facts(), [Mask("a.service"), Preset("a.service")], []),
        (
            {"name": "a.service", "mask": True, "contents": "[Unit]\n", "enabled": False},
            Facts(),
            [Mask("a.service"), Disable(("a.service",))],
            [],
        ),
        ({"name": "a.service", "mask": False}, Facts(), [Unmask("a.service"), Preset("a.service")], []),
        (
            {
                "name": "a.service",
                "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}, {"name": "y.conf", "contents": ""}],
            },
            Facts(),
            [
                RemoveFile(f"{UNITS}/a.service.d/y.conf"),
                WriteUnitFiles((f"{UNITS}/a.service.d/x.conf",)),
                Preset("a.service"),
            ],
            [],
        ),
        (
            {"name": "a.service", "dropins": [{"name": "y.conf"}]},
            # deleted even with a backup, as upstream (the original comes back when it is dropped)
            Facts(backed_up=frozenset({f"{UNITS}/a.service.d/y.conf"})),
            [RemoveFile(f"{UNITS}/a.service.d/y.conf"), Preset("a.service")],
            [],
        ),
        # no contents: enabled only where the node has the unit's file
        (
            {"name": "a.service", "enabled": True},
            Facts(),
            [Enable(("a.service",))],
            [
                "a.service has no contents: it is enabled only if the node has its unit file "
                "(plan with --root-mount to know)"
            ],
        ),
        (
            {"name": "a.service", "enabled": False},
            Facts(),
            [Disable(("a.service",))],
            [
                "a.service has no contents: it is disabled only if the node has its unit file "
                "(plan with --root-mount to know)"
            ],
        ),
        (
            {"name": "a.service", "enabled": True},
            Facts(unit_files=frozenset({"a.service"})),
            [Enable(("a.service",))],
            [],
        ),
        (
            {"name": "a.service", "enabled": True},
            Facts(unit_files=frozenset()),
            [],
            ['Could not enable unit "a.service", because it has no contents, skipping'],
        ),
        (
            {"name": "a.service", "enabled": False},
            Facts(unit_files=frozenset({"b.service"})),
            [],
            ['Could not disable unit "a.service", because it has no contents, skipping'],
        ),
    ],
)
def test_unit_steps(unit: dict[str, Any], facts: Facts, steps: list[Step], notes: list[str]) -> None:
    assert case(ign(), units(unit), facts) == (steps, notes)


def test_enable_and_disable_each_run_once_for_every_unit() -> None:
    new = units(
        {"name": "a.service", "contents": ENABLED_WITH_INSTALL, "enabled": True},
        {"name": "b.service", "contents": "[Unit]\n", "enabled": False},
        {"name": "c.service", "contents": ENABLED_WITH_INSTALL, "enabled": True},
        {"name": "d.service", "contents": "[Unit]\n", "enabled": False},
    )
    assert case(ign(), new)[0] == [
        WriteUnitFiles(tuple(f"{UNITS}/{n}.service" for n in "abcd")),
        Enable(("a.service", "c.service")),
        Disable(("b.service", "d.service")),
    ]


def test_only_changed_units_are_written_unless_the_forcefile_is_there() -> None:
    old = units({"name": "a.service", "contents": "[Unit]\n"}, {"name": "b.service", "contents": "[Unit]\n"})
    new = units(
        {"name": "a.service", "contents": "[Unit]\n"}, {"name": "b.service", "contents": "[Unit]\nX=1\n"}
    )
    assert case(old, new)[0] == [WriteUnitFiles((f"{UNITS}/b.service",)), Preset("b.service")]
    assert case(old, new, Facts(forcefile=True))[0] == [
        WriteUnitFiles((f"{UNITS}/a.service", f"{UNITS}/b.service")),
        Preset("a.service"),
        Preset("b.service"),
    ]


@pytest.mark.parametrize(
    ("old_unit", "new_unit", "rewrite"),
    [
        # an enabled unit whose [Install] section changes is disabled before its file is rewritten
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True},
            {"contents": ENABLED_WITH_INSTALL.replace("multi-user", "graphical"), "enabled": True},
            True,
        ),
        # the same [Install] section makes the same links
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True},
            {"contents": ENABLED_WITH_INSTALL.replace("true", "false"), "enabled": True},
            False,
        ),
        # a dropin with an [Install] section may change the links
        (
            {
                "contents": ENABLED_WITH_INSTALL,
                "enabled": True,
                "dropins": [{"name": "x.conf", "contents": "[Install]\n"}],
            },
            {"contents": ENABLED_WITH_INSTALL.replace("true", "false"), "enabled": True},
            True,
        ),
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True},
            {
                "contents": ENABLED_WITH_INSTALL.replace("true", "false"),
                "enabled": True,
                "dropins": [{"name": "x.conf", "contents": "[Install]\nAlias=b.service\n"}],
            },
            True,
        ),
        (
            {
                "contents": ENABLED_WITH_INSTALL,
                "enabled": True,
                "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}],
            },
            {"contents": ENABLED_WITH_INSTALL.replace("true", "false"), "enabled": True},
            False,
        ),
        # only units that were enabled, not masked, and had contents
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": False},
            {"contents": ENABLED_WITH_INSTALL.replace("multi-user", "graphical"), "enabled": True},
            False,
        ),
        (
            {"contents": ENABLED_WITH_INSTALL},
            {"contents": ENABLED_WITH_INSTALL.replace("multi-user", "graphical"), "enabled": True},
            False,
        ),
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True, "mask": True},
            {"contents": ENABLED_WITH_INSTALL.replace("multi-user", "graphical"), "enabled": True},
            False,
        ),
        ({"enabled": True}, {"contents": ENABLED_WITH_INSTALL, "enabled": True}, False),
        # the file itself unchanged (only the enablement): nothing to unlink first
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True},
            {"contents": ENABLED_WITH_INSTALL, "enabled": False},
            False,
        ),
        # a new file without an [Install] section
        (
            {"contents": ENABLED_WITH_INSTALL, "enabled": True},
            {"contents": "[Unit]\n", "enabled": True},
            True,
        ),
    ],
)
def test_rewrite_disable_without_node_facts(
    old_unit: dict[str, Any], new_unit: dict[str, Any], rewrite: bool
) -> None:
    steps, _ = case(units({"name": "a.service", **old_unit}), units({"name": "a.service", **new_unit}))
    assert (steps[0] == Disable(("a.service",), "rewrite")) is rewrite
    assert steps.count(Disable(("a.service",), "rewrite")) == (1 if rewrite else 0)


def test_rewrite_disable_from_the_node() -> None:
    old = units({"name": "a.service", "contents": "[Unit]\n"}, {"name": "m.service", "contents": "[Unit]\n"})
    new = units(
        {"name": "a.service", "contents": "[Unit]\nX=1\n", "enabled": True},
        {"name": "m.service", "contents": "[Unit]\nX=1\n", "mask": True},
    )
    facts = Facts(enabled_rewrites=frozenset({"a.service", "m.service"}))
    assert case(old, new, facts)[0][0] == Disable(("a.service",), "rewrite")
    assert Disable(("a.service",), "rewrite") not in case(old, new, Facts(enabled_rewrites=frozenset()))[0]


@pytest.mark.parametrize(
    ("old_units", "facts", "steps"),
    [
        (
            [{"name": "a.service", "contents": "[Unit]\n"}],
            Facts(),
            [Preset("a.service"), Disable(("a.service",), "removed"), RemoveFile(f"{UNITS}/a.service")],
        ),
        # a masked or contents-less unit had no file of ours to unlink
        (
            [{"name": "a.service", "mask": True}],
            Facts(),
            [Preset("a.service"), RemoveFile(f"{UNITS}/a.service")],
        ),
        (
            [{"name": "a.service", "contents": "[Unit]\n", "mask": True}],
            Facts(),
            [Preset("a.service"), RemoveFile(f"{UNITS}/a.service")],
        ),
        (
            [{"name": "a.service", "enabled": True}],
            Facts(),
            [Preset("a.service"), RemoveFile(f"{UNITS}/a.service")],
        ),
        # the node says which dropped units have a regular file
        (
            [{"name": "a.service"}, {"name": "b.service", "contents": "[Unit]\n"}],
            Facts(regular_unit_files=frozenset({"a.service"})),
            [
                Preset("a.service"),
                Preset("b.service"),
                Disable(("a.service",), "removed"),
                RemoveFile(f"{UNITS}/a.service"),
                RemoveFile(f"{UNITS}/b.service"),
            ],
        ),
        # an original comes back, not preset a second time (upstream presets once, before)
        (
            [{"name": "a.service", "contents": "[Unit]\n"}],
            Facts(backed_up=frozenset({f"{UNITS}/a.service"})),
            [
                Preset("a.service"),
                Disable(("a.service",), "removed"),
                RestoreOriginal(f"{UNITS}/a.service"),
            ],
        ),
        # dropped dropins first
        (
            [{"name": "a.service", "dropins": [{"name": "x.conf", "contents": "[Unit]\n"}]}],
            Facts(),
            [
                RemoveFile(f"{UNITS}/a.service.d/x.conf"),
                Preset("a.service"),
                RemoveFile(f"{UNITS}/a.service"),
            ],
        ),
    ],
)
def test_stale_units(old_units: list[dict[str, Any]], facts: Facts, steps: list[Step]) -> None:
    assert case(units(*old_units), ign(), facts) == (steps, [])


def test_a_dropin_kept_by_the_new_config_is_not_removed() -> None:
    old = units(
        {
            "name": "a.service",
            "dropins": [{"name": "x.conf", "contents": "1"}, {"name": "y.conf", "contents": "1"}],
        }
    )
    new = units({"name": "a.service", "dropins": [{"name": "x.conf", "contents": "2"}]})
    assert case(old, new)[0] == [
        WriteUnitFiles((f"{UNITS}/a.service.d/x.conf",)),
        Preset("a.service"),
        RemoveFile(f"{UNITS}/a.service.d/y.conf"),
    ]


# ---------------------------------------------------------------- SSH keys and passwords


@pytest.mark.parametrize(
    ("old", "new", "facts", "steps", "notes"),
    [
        (
            users({"name": "core", "sshAuthorizedKeys": ["k1"]}),
            users({"name": "core", "sshAuthorizedKeys": ["k1", "k2"]}),
            Facts(),
            [WriteSshKeys("core", 2)],
            [],
        ),
        (
            users({"name": "core", "sshAuthorizedKeys": ["k1"]}),
            users({"name": "core", "passwordHash": "$6$x"}),
            Facts(),
            [WriteSshKeys("core", 0), SetPassword("core")],
            [],
        ),
        # the node already has the wanted hash
        (
            users({"name": "core", "sshAuthorizedKeys": ["k1"]}),
            users({"name": "core", "passwordHash": "$6$x"}),
            Facts(password_matches=frozenset({"core"})),
            [WriteSshKeys("core", 0)],
            [],
        ),
        (
            users({"name": "core", "passwordHash": "$6$x"}),
            users({"name": "core", "passwordHash": "$6$x", "sshAuthorizedKeys": ["k"]}),
            Facts(password_matches=frozenset()),
            [WriteSshKeys("core", 1), SetPassword("core")],
            [],
        ),
        (
            users({"name": "core", "passwordHash": "$6$x"}),
            ign(),
            Facts(),
            [WriteSshKeys("core", 0), ClearPassword("core")],
            [],
        ),
        (
            users({"name": "core", "passwordHash": "$6$x"}),
            ign(),
            Facts(password_matches=frozenset({"core"})),
            [WriteSshKeys("core", 0)],
            [],
        ),
        (
            users({"name": "core", "passwordHash": "$6$x"}),
            users({"name": "core", "sshAuthorizedKeys": ["k"]}),
            Facts(has_core=False),
            [],
            ["user core does not exist: SSH keys and passwords are left alone"],
        ),
        (
            users({"name": "core", "passwordHash": "$6$x"}),
            ign(),
            Facts(has_core=False),
            [ClearPassword("core")],
            ["user core does not exist: SSH keys and passwords are left alone"],
        ),
        (
            users({"name": "core", "sshAuthorizedKeys": ["k1"]}),
            users({"name": "core", "passwordHash": "$6$x"}),
            Facts(has_shadow=False),
            [WriteSshKeys("core", 0)],
            ["/etc/shadow does not exist: passwords are left alone"],
        ),
        (
            users({"name": "core", "sshAuthorizedKeys": ["k1"]}),
            users({"name": "core", "sshAuthorizedKeys": ["k2"]}),
            Facts(has_core=True, has_shadow=True),
            [WriteSshKeys("core", 1)],
            [],
        ),
    ],
)
def test_passwd_steps(
    old: dict[str, Any], new: dict[str, Any], facts: Facts, steps: list[Step], notes: list[str]
) -> None:
    assert case(old, new, facts) == (steps, notes)


def test_no_passwd_change_no_passwd_step() -> None:
    same = users({"name": "core", "sshAuthorizedKeys": ["k1"]})
    assert case(same, same, Facts(has_core=False, has_shadow=False)) == ([], [])


def test_order_files_units_stale_units_stale_files_kubeconfig_keys() -> None:
    old = ign(
        storage={"files": [A]},
        systemd={"units": [{"name": "old.service", "contents": "[Unit]\n"}]},
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k1"]}]},
    )
    new = ign(
        storage={"files": [B]},
        systemd={"units": [{"name": "new.service", "contents": ENABLED_WITH_INSTALL, "enabled": True}]},
        passwd={"users": [{"name": "core", "sshAuthorizedKeys": ["k2"]}]},
    )
    assert case(old, new, Facts(kubeconfig_mode=0o640))[0] == [
        WriteFiles(("/etc/b",)),
        WriteUnitFiles((f"{UNITS}/new.service",)),
        Enable(("new.service",)),
        Preset("old.service"),
        Disable(("old.service",), "removed"),
        RemoveFile(f"{UNITS}/old.service"),
        RemoveFile("/etc/a"),
        Chmod("/etc/kubernetes/kubeconfig", 0o600),
        WriteSshKeys("core", 1),
    ]


# ---------------------------------------------------------------- repairs of the applied config

HELLO = {
    "name": "hello.service",
    "enabled": True,
    "contents": ENABLED_WITH_INSTALL,
    "dropins": [{"name": "10-a.conf", "contents": "[Service]\nNice=1\n"}],
}
MASKED = {"name": "m.service", "mask": True}
APPLIED = units(HELLO, MASKED) | users({"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]})
ALL_PATHS = frozenset({f"{UNITS}/hello.service", f"{UNITS}/hello.service.d/10-a.conf", f"{UNITS}/m.service"})


def repairs(facts: Facts) -> tuple[list[Step], list[str]]:
    cfg = mc("same", ignition=APPLIED)
    assert cfg.config is not None
    repaired: list[str] = []
    steps = disk_steps(cfg.config, cfg.config, diff(cfg, cfg), facts, [], repaired=repaired)
    return steps, repaired


def test_an_intact_node_needs_no_repair() -> None:
    intact = Facts(
        matching_paths=ALL_PATHS, enablement_matches=frozenset({"hello.service"}), ssh_keys_match=True
    )
    assert repairs(intact) == ([], [])
    # without a node nothing is known to have drifted
    assert repairs(NO_FACTS) == ([], [])


def test_only_what_drifted_is_written_again_and_named() -> None:
    dropin = f"{UNITS}/hello.service.d/10-a.conf"
    facts = Facts(
        matching_paths=ALL_PATHS - {dropin, f"{UNITS}/m.service"},
        enablement_matches=frozenset(),
        ssh_keys_match=False,
        has_core=True,
    )
    # the drifted unit is written as a changed one would be: its enablement steps run again
    assert repairs(facts) == (
        [
            Mask("m.service"),
            WriteUnitFiles((dropin,)),
            Preset("m.service"),
            Enable(("hello.service",)),
            WriteSshKeys("core", 1),
        ],
        [dropin, f"{UNITS}/m.service", "hello.service", "/home/core/.ssh/authorized_keys.d/ignition"],
    )


def test_no_key_repair_without_core() -> None:
    facts = Facts(
        matching_paths=ALL_PATHS,
        enablement_matches=frozenset({"hello.service"}),
        ssh_keys_match=False,
        has_core=False,
    )
    assert repairs(facts) == ([], [])
