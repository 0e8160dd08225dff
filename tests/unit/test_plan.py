"""plan(): actions, drain and host commands for an update, with the rule behind each decision."""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file, load, mc, mc_object, reboot_argv, spellings

from mcd import policy
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.planner import steps as st
from mcd.planner.nodefacts import is_el
from mcd.planner.plan import Facts, Plan, plan, reboot_command
from mcd.planner.reconcile import FIPS_MESSAGE

REGISTRIES = "/etc/containers/registries.conf"
CLEANUP = ("rpm-ostree", "cleanup", "-p")
REBOOT = policy.Action("Reboot")
NONE = policy.Action("None")
CA_BUNDLE = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
KERNEL_PACKAGES = ("kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra")


def reload(service: str) -> policy.Action:
    return policy.Action("Reload", service)


def restart(service: str) -> policy.Action:
    return policy.Action("Restart", service)


def file_update(path: str, **kwargs: Any) -> Plan:
    """Plan for changing the contents of one file."""
    return plan(mc("old", files=[ign_file(path, "old")]), mc("new", files=[ign_file(path, "new")]), **kwargs)


# ---------------------------------------------------------------- nothing to do


def test_identical_configs() -> None:
    p = plan(mc("old", files=[ign_file("/etc/a")]), mc("new", files=[ign_file("/etc/a")]))
    assert p.reconcilable
    assert spellings(p.actions) == (NONE,)
    assert p.action_rule == "no file, unit or SSH key change: none"
    assert not p.drain
    assert p.changes == ()
    assert p.commands == ()
    assert p.reason == ""


# ---------------------------------------------------------------- OS changes


def test_os_image_change_rebases_and_reboots() -> None:
    p = plan(mc("old", osImageURL="quay.io/os@sha256:1"), mc("new", osImageURL="quay.io/os@sha256:2"))
    assert spellings(p.actions) == (REBOOT,)
    assert p.action_rule == "osImageURL changed: reboot"
    assert p.drain
    assert p.drain_rule == "a reboot or drain action drains the node"
    assert p.commands == (
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/os@sha256:2"),
        reboot_argv(),
    )
    [change] = p.changes
    assert (change.kind, change.name, change.change, spellings(change.actions)) == (
        "osImageURL",
        "quay.io/os@sha256:2",
        "modified",
        (REBOOT,),
    )


def test_kargs_change_deletes_every_old_and_appends_every_new() -> None:
    p = plan(mc("old", kernelArguments=["a=1", "b"]), mc("new", kernelArguments=["b", "c=3 d"]))
    assert spellings(p.actions) == (REBOOT,)
    assert p.action_rule == "kernelArguments changed: reboot"
    assert p.commands == (
        CLEANUP,
        (
            "rpm-ostree",
            "kargs",
            "--delete-if-present=a=1",
            "--delete-if-present=b",
            "--append=b",
            "--append=c=3",
            "--append=d",
        ),
        reboot_argv(),
    )


def test_duplicate_kargs_are_kept() -> None:
    p = plan(mc("old"), mc("new", kernelArguments=["y=0", "z=4", "y=1", "z=4"]))
    assert (
        "rpm-ostree",
        "kargs",
        "--append=y=0",
        "--append=z=4",
        "--append=y=1",
        "--append=z=4",
    ) in p.commands


def test_switch_to_realtime_kernel() -> None:
    p = plan(mc("old"), mc("new", kernelType="realtime"))
    assert p.action_rule == "kernelType changed: reboot"
    assert p.commands == (
        CLEANUP,
        (
            "rpm-ostree",
            "override",
            "remove",
            *KERNEL_PACKAGES,
            "--install",
            "kernel-rt-core",
            "--install",
            "kernel-rt-modules",
            "--install",
            "kernel-rt-modules-extra",
        ),
        reboot_argv(),
    )


def test_switch_back_from_realtime_resets_the_override() -> None:
    p = plan(mc("old", kernelType="realtime"), mc("new"))
    assert p.commands[0] == CLEANUP
    assert p.commands[1][:4] == ("rpm-ostree", "override", "reset", "kernel")
    assert "--uninstall" in p.commands[1]
    assert p.commands[-1] == reboot_argv()


USBGUARD_TO_KERBEROS = (
    "rpm-ostree",
    "update",
    *("--install", "krb5-workstation", "--install", "libkadm5"),
    *("--uninstall", "usbguard"),
)


def test_extensions_install_and_uninstall() -> None:
    p = plan(mc("old", extensions=["usbguard"]), mc("new", extensions=["kerberos"]))
    assert p.action_rule == "extensions changed: reboot"
    assert p.commands == (
        CLEANUP,
        USBGUARD_TO_KERBEROS,
        reboot_argv(),
    )


def test_booted_requested_packages_are_used_for_extensions() -> None:
    p = plan(mc("old"), mc("new", extensions=["usbguard"]), Facts(requested_packages=("usbguard",)))
    assert not any(c[:2] == ("rpm-ostree", "update") for c in p.commands)


def test_several_os_changes_in_upstream_order() -> None:
    old = mc("old", osImageURL="quay.io/a", kernelArguments=["x"])
    new = mc(
        "new", osImageURL="quay.io/b", kernelArguments=["y"], kernelType="realtime", extensions=["usbguard"]
    )
    p = plan(old, new)
    assert p.action_rule == "osImageURL, kernelArguments, kernelType, extensions changed: reboot"
    assert [c[:2] for c in p.commands] == [
        ("rpm-ostree", "cleanup"),
        ("rpm-ostree", "rebase"),
        ("rpm-ostree", "kargs"),
        ("rpm-ostree", "override"),
        ("rpm-ostree", "update"),
        ("systemd-run", "--unit"),
    ]


RT_PACKAGES = ("kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra")
RT_BOOTED = Facts(requested_packages=(*RT_PACKAGES, "usbguard"), requested_base_removals=KERNEL_PACKAGES)
RT_RESET = (
    "rpm-ostree",
    "override",
    "reset",
    *KERNEL_PACKAGES,
    *[x for p in RT_PACKAGES for x in ("--uninstall", p)],
)


def test_os_step_order_follows_upstream_with_the_booted_deployment() -> None:
    old = mc(
        "old", osImageURL="quay.io/a", kernelArguments=["x"], kernelType="realtime", extensions=["usbguard"]
    )
    new = mc(
        "new", osImageURL="quay.io/b", kernelArguments=["y"], kernelType="realtime", extensions=["sysstat"]
    )
    p = plan(old, new, RT_BOOTED)
    assert p.commands == (
        CLEANUP,
        RT_RESET,  # the swap is undone first, before the rebase
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b"),
        ("rpm-ostree", "kargs", "--delete-if-present=x", "--append=y"),
        (
            "rpm-ostree",
            "override",
            "remove",
            *KERNEL_PACKAGES,
            *[x for p in RT_PACKAGES for x in ("--install", p)],
        ),
        ("rpm-ostree", "update", "--install", "sysstat", "--uninstall", "usbguard"),
        reboot_argv(),
    )
    assert p.extension_packages == ("sysstat",)
    assert p.os_errors == ()


def test_revert_comes_from_the_booted_deployment_not_the_old_config() -> None:
    # realtime was only staged, never booted: the booted deployment has nothing to reset
    booted_default = Facts(requested_packages=(), requested_base_removals=())
    p = plan(mc("old", kernelType="realtime"), mc("new"), booted_default)
    assert p.commands == (CLEANUP, reboot_argv())
    # the old config says default, but the node boots a realtime kernel
    p = plan(mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/b"), RT_BOOTED)
    assert p.commands[:3] == (
        CLEANUP,
        RT_RESET,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b"),
    )


def test_revert_needs_an_os_update_or_a_kernel_type_change() -> None:
    p = plan(mc("old", kernelArguments=["x"]), mc("new", kernelArguments=["y"]), RT_BOOTED)
    assert not any(c[:3] == ("rpm-ostree", "override", "reset") for c in p.commands)


def test_rebase_skipped_when_the_node_boots_the_target_image() -> None:
    old = mc("old", osImageURL="quay.io/a", kernelType="realtime")
    new = mc("new", osImageURL="quay.io/b", kernelType="realtime")
    p = plan(old, new, Facts(booted_image="quay.io/b", requested_packages=RT_PACKAGES))
    assert p.diff.os_update  # still a change, and a reboot
    # nothing to rebase onto, so the booted realtime kernel is neither reset nor swapped again
    assert p.commands == (CLEANUP, reboot_argv())
    p = plan(old, new, Facts(booted_image="quay.io/a"))
    assert ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b") in p.commands


def test_forcefile_rebase_skipped_when_the_node_boots_the_image() -> None:
    same = mc("new", osImageURL="quay.io/a")
    p = plan(mc("old", osImageURL="quay.io/a"), same, Facts(forcefile=True, booted_image="quay.io/a"))
    assert p.commands == (CLEANUP, reboot_argv())


def test_extensions_counted_against_the_booted_requests() -> None:
    facts = Facts(requested_packages=("htop", "kernel-rt-core", "usbguard", "sysstat"))
    p = plan(mc("old", extensions=["usbguard"]), mc("new", extensions=["kerberos", "sysstat"]), facts)
    # installs missing ones, removes managed ones no longer wanted, leaves other layered packages alone
    assert p.commands == (
        CLEANUP,
        USBGUARD_TO_KERBEROS,
        reboot_argv(),
    )
    assert p.extension_packages == ("krb5-workstation", "libkadm5", "sysstat")


def test_extensions_already_requested_need_no_command_and_no_check() -> None:
    p = plan(mc("old"), mc("new", extensions=["usbguard"]), Facts(requested_packages=("usbguard",)))
    assert p.commands == (CLEANUP, reboot_argv())
    assert p.extension_packages == ("usbguard",)
    # upstream checks the staged deployment only after an `rpm-ostree update` ran
    assert not any(isinstance(s, st.VerifyExtensions) for s in p.steps)


def test_the_staged_check_follows_the_update_in_upstream_order() -> None:
    p = plan(mc("old"), mc("new", extensions=["usbguard", "kerberos"]), Facts(requested_packages=()))
    kinds = [s.kind for s in p.steps]
    assert kinds[kinds.index("verify-extensions") - 1] == "rpm-ostree"
    assert [s for s in p.steps if isinstance(s, st.VerifyExtensions)] == [
        st.VerifyExtensions(("usbguard", "krb5-workstation", "libkadm5"))
    ]


def test_extension_step_skipped_when_extensions_and_image_are_unchanged() -> None:
    old = mc("old", kernelArguments=["x"], extensions=["usbguard"])
    new = mc("new", kernelArguments=["y"], extensions=["usbguard"])
    p = plan(old, new, Facts(requested_packages=()))
    assert not any(c[:2] == ("rpm-ostree", "update") for c in p.commands)
    assert p.extension_packages == ()


def test_unknown_old_extensions_are_ignored_without_booted_requests() -> None:
    p = plan(mc("old", extensions=["bogus", "usbguard"]), mc("new", extensions=["sysstat"]))
    assert ("rpm-ostree", "update", "--install", "sysstat", "--uninstall", "usbguard") in p.commands
    assert p.os_errors == ()


def test_a_bad_os_field_ends_the_plan_where_the_update_fails() -> None:
    p = plan(
        mc("old", files=[ign_file("/etc/a", "1")]),
        mc("new", files=[ign_file("/etc/a", "2")], extensions=["bogus"]),
    )
    assert p.reconcilable
    assert p.os_errors == ("invalid extensions found: [bogus]",)
    assert p.warnings == ("the update would fail on the node: invalid extensions found: [bogus]",)
    # drained, files written, pending deployment discarded, then it fails: no reboot
    assert [s.kind for s in p.steps] == ["drain", "write-files", "rpm-ostree", "os-failure"]
    assert p.steps[-1] == st.OsFailure("invalid extensions found: [bogus]")
    assert p.commands == (CLEANUP,)
    assert p.to_json()["osErrors"] == ["invalid extensions found: [bogus]"]


def test_64k_pages_off_aarch64_keeps_the_commands_before_the_kernel_switch() -> None:
    old = mc("old", osImageURL="quay.io/a", kernelArguments=["x"])
    new = mc("new", osImageURL="quay.io/b", kernelArguments=["y"], kernelType="64k-pages", extensions=["zsh"])
    p = plan(old, new, Facts(arch="x86_64"))
    # upstream stops at the first failure: the extensions are never looked at
    assert p.os_errors == ("64k-pages is only supported for aarch64 architecture",)
    assert p.commands == (
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b"),
        ("rpm-ostree", "kargs", "--delete-if-present=x", "--append=y"),
    )
    assert p.steps[-1] == st.OsFailure("64k-pages is only supported for aarch64 architecture")
    p = plan(mc("old"), mc("new", kernelType="64k-pages"), Facts(arch="aarch64"))
    assert p.os_errors == ()
    assert any("kernel-64k-core" in c for c in p.commands)


def test_bad_os_fields_are_no_error_off_coreos_or_when_the_step_is_skipped() -> None:
    p = plan(mc("old"), mc("new", extensions=["bogus"]), Facts(coreos=False))
    assert p.os_errors == ()
    # extensions and image unchanged: upstream never looks at them again
    old = mc("old", kernelArguments=["x"], extensions=["bogus"])
    new = mc("new", kernelArguments=["y"], extensions=["bogus"])
    assert plan(old, new).os_errors == ()


def test_realtime_kernel_is_reapplied_on_every_update() -> None:
    p = plan(
        mc("old", kernelType="realtime", files=[ign_file("/var/lib/kubelet/config.json", "1")]),
        mc("new", kernelType="realtime", files=[ign_file("/var/lib/kubelet/config.json", "2")]),
    )
    assert spellings(p.actions) == (NONE,)
    assert p.commands == (CLEANUP,)


def test_not_coreos_runs_no_rpm_ostree_and_reboots_plainly() -> None:
    p = plan(mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/b"), Facts(coreos=False))
    assert p.commands == (reboot_command("Node will reboot into config new", coreos=False),)
    assert "-p" not in p.commands[0]


def test_ocl_rebases_onto_the_layered_image() -> None:
    def ocl(name: str, image: str) -> MachineConfig:
        obj = mc_object(name, osImageURL="quay.io/base", kernelType="realtime")
        obj["metadata"]["annotations"] = {"machineconfiguration.openshift.io/ocl-osimageurl": image}
        return load(obj)

    p = plan(ocl("old", "quay.io/ocl@sha256:1"), ocl("new", "quay.io/ocl@sha256:2"))
    assert p.commands == (
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/ocl@sha256:2"),
        reboot_argv(),
    )


def test_reboot_command() -> None:
    assert reboot_command("because") == (
        "systemd-run",
        "--unit",
        "machine-config-daemon-reboot",
        "--description",
        "machine-config-daemon: because",
        "-p",
        "Requires=ostree-finalize-staged.service",
        "-p",
        "After=ostree-finalize-staged.service",
        "/bin/sh",
        "-c",
        "systemctl reboot",
    )


# ---------------------------------------------------------------- node facts


def test_forcefile_reboots_and_reapplies_the_os() -> None:
    old = mc("old", osImageURL="quay.io/a", units=[{"name": "a.service", "enabled": True}])
    new = mc("new", osImageURL="quay.io/a", units=[{"name": "a.service", "enabled": True}])
    p = plan(old, new, Facts(forcefile=True))
    assert p.diff.os_update
    assert spellings(p.actions) == (REBOOT,)
    assert p.action_rule == "forcefile /run/machine-config-daemon-force present: reboot"
    assert p.drain
    # every unit is re-enabled, the OS is rebased again
    assert p.commands == (
        ("systemctl", "enable", "a.service"),
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/a"),
        reboot_argv(),
    )


def test_single_replica_topology_never_drains() -> None:
    p = plan(
        mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/b"), Facts(topology="SingleReplica")
    )
    assert spellings(p.actions) == (REBOOT,)
    assert not p.drain
    assert p.drain_rule == "single-node topology (SingleReplica): drain skipped"


def test_node_fips_matching_the_target_wins_over_the_old_config() -> None:
    p = plan(mc("old", fips=False), mc("new", fips=True), Facts(node_fips=True))
    assert p.reconcilable
    assert not p.diff.fips


def test_node_fips_differing_from_the_target_is_unreconcilable() -> None:
    p = plan(mc("old", fips=True), mc("new", fips=True), Facts(node_fips=False))
    assert not p.reconcilable
    assert p.errors == (FIPS_MESSAGE,)


# ---------------------------------------------------------------- unreconcilable


def test_unreconcilable_plan_applies_nothing() -> None:
    p = plan(mc("old"), mc("new", fips=True, osImageURL="quay.io/b"))
    assert not p.reconcilable
    assert spellings(p.actions) == ()
    assert not p.drain
    assert p.commands == ()
    assert p.diff.os_update
    assert p.reason == (
        "can't reconcile config old with new: configs old, new are not reconcilable: "
        f'new machineconfig "old" is not reconcilable against "new": {FIPS_MESSAGE}'
    )


# ---------------------------------------------------------------- files under node disruption policy


@pytest.mark.parametrize(
    ("path", "actions", "rule", "commands"),
    [
        (
            "/etc/containers/policy.json",
            (reload("crio.service"),),
            "default policy /etc/containers/policy.json",
            (("systemctl", "reload", "crio.service"),),
        ),
        (
            "/etc/containers/registries.d/x.yaml",
            (reload("crio.service"),),
            "default policy /etc/containers/registries.d",
            (("systemctl", "reload", "crio.service"),),
        ),
        ("/var/lib/kubelet/config.json", (NONE,), "default policy /var/lib/kubelet/config.json", ()),
        (
            CA_BUNDLE,
            (restart("coreos-update-ca-trust.service"), restart("crio.service")),
            f"default policy {CA_BUNDLE}",
            (
                ("systemctl", "restart", "coreos-update-ca-trust.service"),
                ("systemctl", "restart", "crio.service"),
            ),
        ),
        (
            "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf",
            (policy.Action("DaemonReload"), restart("kubelet.service")),
            "default policy /etc/systemd/system/kubelet.service.d/"
            "40-kubelet-crio-image-credential-provider.conf",
            (("systemctl", "daemon-reload"), ("systemctl", "restart", "kubelet.service")),
        ),
    ],
)
def test_rebootless_files(
    path: str, actions: tuple[policy.Action, ...], rule: str, commands: tuple[tuple[str, ...], ...]
) -> None:
    p = file_update(path)
    assert spellings(p.actions) == actions
    assert not p.drain
    assert p.drain_rule == "no action needs a drain"
    assert p.commands == commands
    [change] = p.changes
    assert (change.kind, change.name, change.change, spellings(change.actions), change.rule) == (
        "file",
        path,
        "modified",
        actions,
        rule,
    )
    assert change.details == ("contents",)


def test_file_without_policy_reboots() -> None:
    p = file_update("/etc/kubernetes/kubelet-ca.crt")
    assert spellings(p.actions) == (REBOOT,)
    assert p.action_rule == "reboot required by /etc/kubernetes/kubelet-ca.crt"
    assert p.drain
    assert p.changes[0].rule == "no policy for /etc/kubernetes/kubelet-ca.crt: reboot"
    assert p.commands == (reboot_argv(),)


def test_reboot_rule_names_at_most_three_paths() -> None:
    paths = ["/etc/a", "/etc/b", "/etc/c", "/etc/d"]
    p = plan(mc("old"), mc("new", files=[ign_file(x) for x in paths]))
    assert p.action_rule == "reboot required by /etc/a, /etc/b, /etc/c and 1 more"


def test_actions_are_combined_in_order_without_deduplication() -> None:
    paths = [
        "/etc/containers/policy.json",
        "/var/lib/kubelet/config.json",
        "/etc/containers/registries.d/a.conf",
    ]
    p = plan(mc("old"), mc("new", files=[ign_file(x) for x in paths]))
    assert spellings(p.actions) == (reload("crio.service"), reload("crio.service"))
    assert p.action_rule == "combined node disruption policy actions of every change"
    assert p.commands == (("systemctl", "reload", "crio.service"), ("systemctl", "reload", "crio.service"))


def test_user_policy_makes_a_path_rebootless() -> None:
    policies = policy.merge_policies(
        policy.DEFAULT_POLICIES,
        {
            "files": [
                {
                    "path": "/etc/foo",
                    "actions": [{"type": "Restart", "restart": {"serviceName": "foo.service"}}],
                }
            ]
        },
        ("spec", "nodeDisruptionPolicy"),
    )
    p = file_update("/etc/foo/bar.conf", policies=policies)
    assert spellings(p.actions) == (restart("foo.service"),)
    assert not p.drain
    assert p.changes[0].rule == "user policy /etc/foo"
    assert p.commands == (("systemctl", "restart", "foo.service"),)


def test_removed_file_follows_its_policy() -> None:
    p = plan(mc("old", files=[ign_file("/etc/containers/policy.json")]), mc("new"))
    [change] = p.changes
    assert (change.change, spellings(change.actions)) == ("removed", (reload("crio.service"),))


# ---------------------------------------------------------------- units and SSH keys


def test_unit_without_policy_reboots_and_is_enabled() -> None:
    unit = {"name": "a.service", "enabled": True, "contents": "[Unit]\n[Install]\nWantedBy=a.target\n"}
    p = plan(mc("old"), mc("new", units=[unit]))
    assert spellings(p.actions) == (REBOOT,)
    assert p.changes[0].rule == "no policy for unit a.service: reboot"
    assert p.commands == (("systemctl", "enable", "a.service"), reboot_argv())


def test_unit_with_default_policy() -> None:
    unit = {"name": "iri-registry.service", "contents": "[Service]\n"}
    p = plan(mc("old", units=[unit]), mc("new", units=[{**unit, "contents": "[Service]\nX=1\n"}]))
    assert spellings(p.actions) == (policy.Action("DaemonReload"), restart("iri-registry.service"))
    assert not p.drain
    assert p.commands == (
        ("systemctl", "preset", "iri-registry.service"),
        ("systemctl", "daemon-reload"),
        ("systemctl", "restart", "iri-registry.service"),
    )


def test_unit_enablement_commands() -> None:
    old = mc("old", units=[{"name": "gone.service"}, {"name": "keep.service", "contents": "a"}])
    new = mc(
        "new",
        units=[
            {"name": "on.service", "enabled": True},
            {"name": "off.service", "enabled": False},
            {"name": "preset.service"},
            {"name": "masked.service", "mask": True, "enabled": True},
            {"name": "keep.service", "contents": "a"},
        ],
    )
    p = plan(old, new)
    # without a node, units with no contents are assumed to have a unit file there (upstream
    # enables a masked unit too: the mask link is its unit file)
    assert p.commands == (
        ("systemctl", "preset", "preset.service"),
        ("systemctl", "enable", "on.service", "masked.service"),
        ("systemctl", "disable", "off.service"),
        ("systemctl", "preset", "gone.service"),
        reboot_argv(),
    )
    assert st.Mask("masked.service") in p.steps
    assert st.RemoveFile("/etc/systemd/system/gone.service") in p.steps
    assert any("on.service has no contents" in n for n in p.notes)


def test_units_without_contents_are_enabled_only_when_the_node_has_their_file() -> None:
    new = mc(
        "new", units=[{"name": "on.service", "enabled": True}, {"name": "off.service", "enabled": False}]
    )
    p = plan(mc("old"), new, Facts(unit_files=frozenset({"off.service"})))
    assert [s for s in p.steps if isinstance(s, st.Enable | st.Disable)] == [st.Disable(("off.service",))]
    assert p.notes == ('Could not enable unit "on.service", because it has no contents, skipping',)


def test_ssh_key_change_needs_no_action() -> None:
    p = plan(mc("old", ssh_keys=["k1"]), mc("new", ssh_keys=["k2"]))
    assert spellings(p.actions) == (NONE,)
    assert not p.drain
    [change] = p.changes
    assert (change.kind, change.name, change.rule) == ("sshkey", "core", "sshkey policy (default)")
    assert p.commands == ()


def test_password_hash_change_runs_usermod_without_showing_the_hash() -> None:
    def core(h: str) -> MachineConfig:
        return mc(
            "x",
            ignition={
                "ignition": {"version": "3.5.0"},
                "passwd": {"users": [{"name": "core", "passwordHash": h}]},
            },
        )

    p = plan(core("$6$old"), core("$6$new"))
    assert p.commands == (("usermod", "-p", "<passwordHash>", "core"),)
    assert "$6$new" not in repr(p.to_json())


# ---------------------------------------------------------------- registries.conf

OLD_REGISTRIES = """\
unqualified-search-registries = ["registry.access.redhat.com"]

[[registry]]
prefix = ""
location = "quay.io/openshift"
"""

DIGEST_MIRROR = (
    OLD_REGISTRIES
    + """
[[registry.mirror]]
location = "mirror.example.com/openshift"
pull-from-mirror = "digest-only"
"""
)

TAG_MIRROR = (
    OLD_REGISTRIES
    + """
[[registry.mirror]]
location = "mirror.example.com/openshift"
"""
)


def registries_update(new_text: str, **kwargs: Any) -> Plan:
    return plan(
        mc("old", files=[ign_file(REGISTRIES, OLD_REGISTRIES)]),
        mc("new", files=[ign_file(REGISTRIES, new_text)]),
        **kwargs,
    )


def test_digest_only_mirror_added_is_special_without_drain() -> None:
    p = registries_update(DIGEST_MIRROR)
    assert spellings(p.actions) == (policy.Action("Special"),)
    assert not p.drain
    assert p.drain_rule == f"{REGISTRIES} change is safe (only digest-only mirrors added): no drain"
    assert p.commands == (("systemctl", "reload", "crio.service"),)


def test_tag_mirror_added_drains() -> None:
    p = registries_update(TAG_MIRROR)
    assert spellings(p.actions) == (policy.Action("Special"),)
    assert p.drain
    assert p.drain_rule.startswith(f"{REGISTRIES} change is not safe")
    assert p.commands == (("systemctl", "reload", "crio.service"),)


def test_unparsable_registries_conf_drains() -> None:
    assert registries_update("[[registry]\nbroken").drain


@pytest.mark.parametrize(("text", "drain"), [(DIGEST_MIRROR, False), (TAG_MIRROR, True)])
def test_legacy_registries_conf(text: str, drain: bool) -> None:
    p = registries_update(text, legacy=True)
    assert spellings(p.actions) == ("reload crio",)
    assert p.drain is drain
    assert p.commands == (("systemctl", "reload", "crio.service"),)


# ---------------------------------------------------------------- legacy table


def test_legacy_actions_and_commands() -> None:
    p = file_update("/etc/containers/policy.json", legacy=True)
    assert p.legacy
    assert spellings(p.actions) == ("reload crio",)
    assert p.action_rule == "legacy post-config action table: reload crio"
    assert spellings(p.changes[0].actions) == ("reload crio",)
    assert p.commands == (("systemctl", "reload", "crio.service"),)


def test_legacy_restart_crio_updates_the_trust_store_first() -> None:
    p = file_update(CA_BUNDLE, legacy=True)
    assert spellings(p.actions) == ("restart crio",)
    assert p.commands == (("update-ca-trust",), ("systemctl", "restart", "crio.service"))


def test_legacy_unit_change_reboots() -> None:
    unit = {"name": "iri-registry.service", "contents": "a"}
    p = plan(mc("old", units=[unit]), mc("new", units=[{**unit, "contents": "b"}]), legacy=True)
    assert spellings(p.actions) == ("reboot",)
    assert p.action_rule == "units changed (legacy mode): reboot"
    assert p.drain
    assert p.commands[-1] == reboot_argv()


def test_legacy_ssh_keys_need_nothing() -> None:
    p = plan(mc("old", ssh_keys=["a"]), mc("new", ssh_keys=["b"]), legacy=True)
    assert spellings(p.actions) == ("none",)
    assert not p.drain
    assert spellings(p.changes[0].actions) == ()


def test_legacy_nmstate_is_direct_children_only() -> None:
    assert spellings(file_update("/etc/nmstate/openshift/a.yaml", legacy=True).actions) == ("none",)
    assert spellings(file_update("/etc/nmstate/openshift/sub/a.yaml", legacy=True).actions) == ("reboot",)
    assert spellings(file_update("/etc/nmstate/openshift/sub/a.yaml").actions) == (NONE,)


# ---------------------------------------------------------------- JSON form


def test_to_json_contract() -> None:
    p = plan(empty_machineconfig(), mc("new", files=[ign_file("/etc/containers/policy.json")]))
    out = p.to_json()
    assert set(out) >= {"reconcilable", "errors", "diff", "actions", "drain", "changes", "commands"}
    assert out["old"] == "mco-empty-mc"
    assert out["mode"] == "nodeDisruptionPolicy"
    assert out["actions"] == [{"type": "Reload", "reload": {"serviceName": "crio.service"}}]
    assert out["changes"] == [
        {
            "kind": "file",
            "name": "/etc/containers/policy.json",
            "change": "added",
            "actions": [{"type": "Reload", "reload": {"serviceName": "crio.service"}}],
            "rule": "default policy /etc/containers/policy.json",
            "details": [],
        }
    ]
    assert out["commands"] == [["systemctl", "reload", "crio.service"]]
    assert out["diff"] == {
        "osUpdate": False,
        "kargs": False,
        "fips": False,
        "passwd": False,
        "files": True,
        "units": False,
        "kernelType": False,
        "extensions": False,
    }


def test_the_legacy_tuning_file_adds_kargs_on_every_coreos_update() -> None:
    text = "ADD nosmt\nDELETE quiet\nADD mitigations=off\n"
    old, new = mc("old", files=[ign_file("/etc/a", "1")]), mc("new", files=[ign_file("/etc/a", "2")])

    def tuning(facts: Facts) -> list[tuple[str, ...]]:
        return [s.argv for s in plan(old, new, facts).steps if isinstance(s, st.OsCommand)]

    # on RHEL-based CoreOS only nosmt is allowlisted; elsewhere additions come before deletions
    assert tuning(Facts(tuning_file=text, cmdline="root=x quiet", el=True)) == [
        ("rpm-ostree", "kargs", "--append=nosmt")
    ]
    assert tuning(Facts(tuning_file=text, cmdline="root=x quiet")) == [
        ("rpm-ostree", "kargs", "--append=nosmt"),
        ("rpm-ostree", "kargs", "--append=mitigations=off"),
        ("rpm-ostree", "kargs", "--delete=quiet"),
    ]
    assert tuning(Facts(tuning_file=text, coreos=False)) == []


@pytest.mark.parametrize(
    ("os_release", "el"),
    [
        ('ID="rhcos"\nVARIANT_ID=coreos\n', True),
        ("ID=scos\n", True),
        ("ID=rhel\nVARIANT_ID=coreos\n", True),
        ("ID=centos\nVARIANT_ID=coreos\n", True),
        ("ID=rhel\n", False),
        ("ID=fedora\nVARIANT_ID=coreos\n", False),
        ("", False),
    ],
)
def test_is_el_follows_upstream_osrelease(os_release: str, el: bool) -> None:
    assert is_el(os_release) is el


@pytest.mark.parametrize(("el", "switched"), [(None, True), (True, True), (False, False)])
def test_kernel_type_and_extensions_only_on_el(el: bool | None, switched: bool) -> None:
    p = plan(
        mc("old"),
        mc("new", kernelType="realtime", extensions=["usbguard"], kernelArguments=["a=1"]),
        Facts(el=el),
    )
    roles = [s.role for s in p.steps if isinstance(s, st.OsCommand)]
    # the kernel arguments change everywhere; the kernel and extensions on RHCOS/SCOS only
    want = [st.OS_CLEANUP, st.OS_KARGS] + ([st.OS_KERNEL_SWITCH, st.OS_EXTENSIONS] if switched else [])
    assert roles == want
    assert any(isinstance(s, st.VerifyExtensions) for s in p.steps) is switched
