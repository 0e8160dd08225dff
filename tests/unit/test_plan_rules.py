"""plan(): every changed thing with its actions and rule, both modes, and the JSON form in full.

Rule texts are what `mcd plan` shows an admin; they are written out here word for word.
"""

from __future__ import annotations

from typing import Any

import pytest
from builders import ign_file, load, mc, mc_object, reboot_argv, spelled, spellings

from mcd.config.machineconfig import MachineConfig
from mcd.planner import steps as st
from mcd.planner.plan import Facts, PlannedChange, plan
from mcd.policy import DEFAULT_POLICIES, Action, ClusterPolicies, merge_policies

REBOOT, NONE = Action("Reboot"), Action("None")
RELOAD_CRIO = Action("Reload", "crio.service")
CLEANUP = ("rpm-ostree", "cleanup", "-p")
FIPS = "detected change to FIPS flag; refusing to modify FIPS on a running cluster"


def policy_with_file(path: str, *actions: dict[str, Any]) -> ClusterPolicies:
    return merge_policies(DEFAULT_POLICIES, {"files": [{"path": path, "actions": list(actions)}]}, ())


def everything_changes() -> tuple[MachineConfig, MachineConfig]:
    """OS image, three files (modified, added, removed), a unit and core's keys all change."""
    old = mc(
        "old",
        osImageURL="quay.io/a",
        files=[ign_file("/etc/containers/policy.json", "1"), ign_file("/etc/x", "1")],
        units=[{"name": "a.service", "contents": "[Unit]\n"}],
        ssh_keys=["k1"],
    )
    new = mc(
        "new",
        osImageURL="quay.io/b",
        files=[ign_file("/etc/containers/policy.json", "2"), ign_file("/etc/kubernetes/kubelet-ca.crt", "2")],
        units=[{"name": "a.service", "contents": "[Unit]\nX=1\n"}],
        ssh_keys=["k2", "k3"],
    )
    return old, new


def test_legacy_changes_carry_their_actions_and_rules() -> None:
    p = plan(*everything_changes(), legacy=True)
    assert spelled(p.changes) == (
        PlannedChange(
            "osImageURL", "quay.io/b", "modified", ("reboot",), "osImageURL change requires a reboot"
        ),
        PlannedChange(
            "file",
            "/etc/containers/policy.json",
            "modified",
            ("reload crio",),
            "legacy: /etc/containers/policy.json: reload crio",
            ("contents",),
        ),
        PlannedChange(
            "file",
            "/etc/kubernetes/kubelet-ca.crt",
            "added",
            (),
            "legacy: /etc/kubernetes/kubelet-ca.crt needs no action",
        ),
        PlannedChange("file", "/etc/x", "removed", ("reboot",), "legacy: no rule for /etc/x: reboot"),
        PlannedChange(
            "unit",
            "a.service",
            "modified",
            ("reboot",),
            "legacy mode: any unit change reboots",
            ("contents",),
        ),
        PlannedChange(
            "sshkey",
            "core",
            "modified",
            (),
            "legacy mode: SSH keys need no action",
            ("sshAuthorizedKeys +2 -1",),
        ),
    )
    assert (spellings(p.actions), p.action_rule) == (("reboot",), "osImageURL changed: reboot")
    assert (p.drain, p.drain_rule) == (True, "a reboot or drain action drains the node")


def test_policy_changes_carry_their_actions_and_rules() -> None:
    p = plan(*everything_changes())
    assert spelled(p.changes) == (
        PlannedChange(
            "osImageURL", "quay.io/b", "modified", (REBOOT,), "osImageURL change requires a reboot"
        ),
        PlannedChange(
            "file",
            "/etc/containers/policy.json",
            "modified",
            (RELOAD_CRIO,),
            "default policy /etc/containers/policy.json",
            ("contents",),
        ),
        PlannedChange(
            "file",
            "/etc/kubernetes/kubelet-ca.crt",
            "added",
            (REBOOT,),
            "no policy for /etc/kubernetes/kubelet-ca.crt: reboot",
        ),
        PlannedChange("file", "/etc/x", "removed", (REBOOT,), "no policy for /etc/x: reboot"),
        PlannedChange(
            "unit", "a.service", "modified", (REBOOT,), "no policy for unit a.service: reboot", ("contents",)
        ),
        PlannedChange(
            "sshkey", "core", "modified", (NONE,), "sshkey policy (default)", ("sshAuthorizedKeys +2 -1",)
        ),
    )
    assert (spellings(p.actions), p.action_rule) == ((REBOOT,), "osImageURL changed: reboot")


def test_the_json_form_in_full() -> None:
    old = mc("old", files=[ign_file("/etc/containers/policy.json", "1")], ssh_keys=["k1"])
    new = mc("new", files=[ign_file("/etc/containers/policy.json", "2")], ssh_keys=["k1", "k2"])
    p = plan(old, new, legacy=True)
    assert p.to_json() == {
        "old": "old",
        "new": "new",
        "reconcilable": True,
        "errors": [],
        "reason": "",
        "diff": {
            "osUpdate": False,
            "kargs": False,
            "fips": False,
            "passwd": True,
            "files": True,
            "units": False,
            "kernelType": False,
            "extensions": False,
        },
        "mode": "legacy",
        "actions": ["reload crio"],
        "actionRule": "legacy post-config action table: reload crio",
        "drain": False,
        "drainRule": "no action needs a drain",
        "changes": [
            {
                "kind": "file",
                "name": "/etc/containers/policy.json",
                "change": "modified",
                "actions": ["reload crio"],
                "rule": "legacy: /etc/containers/policy.json: reload crio",
                "details": ["contents"],
            },
            {
                "kind": "sshkey",
                "name": "core",
                "change": "modified",
                "actions": [],
                "rule": "legacy mode: SSH keys need no action",
                "details": ["sshAuthorizedKeys +1 -0"],
            },
        ],
        "commands": [["systemctl", "reload", "crio.service"]],
        "warnings": [],
        "osErrors": [],
        "steps": [
            {"kind": "write-files", "paths": ["/etc/containers/policy.json"]},
            {"kind": "ssh-keys", "user": "core", "keys": 2},
            {"kind": "reload", "unit": "crio.service"},
        ],
        "notes": [],
        "repairs": [],
    }


def test_json_of_an_unreconcilable_plan_gives_the_first_error_as_reason() -> None:
    old = mc("old", ignition={"ignition": {"version": "3.5.0"}, "passwd": {"groups": [{"name": "a"}]}})
    p = plan(old, mc("new", fips=True))
    groups = (
        'new machineconfig "old" is not reconcilable against "new": invalid passwd change(s): '
        "ignition Passwd Groups section contains changes"
    )
    fips = f'new machineconfig "old" is not reconcilable against "new": {FIPS}'
    assert p.errors == (groups, fips)
    out = p.to_json()
    assert out["errors"] == [groups, fips]
    assert out["reason"] == (
        f"can't reconcile config old with new: configs old, new are not reconcilable: {groups}"
    )
    assert (out["actionRule"], out["drainRule"]) == (
        "unreconcilable: nothing is applied",
        "unreconcilable: no drain",
    )
    assert (out["mode"], out["actions"], out["steps"]) == ("nodeDisruptionPolicy", [], [])


@pytest.mark.parametrize(
    ("legacy", "actions", "rule"),
    [
        (True, ("reboot",), "units changed (legacy mode): reboot"),
        (False, (REBOOT,), "reboot required by a.service"),
    ],
)
def test_a_unit_change_alone(legacy: bool, actions: tuple[Any, ...], rule: str) -> None:
    p = plan(
        mc("old", units=[{"name": "a.service"}]),
        mc("new", units=[{"name": "a.service", "enabled": True}]),
        legacy=legacy,
    )
    assert (spellings(p.actions), p.action_rule) == (actions, rule)
    assert p.changes[0].details == ("enabled None->True",)


def test_reboot_rule_names_three_and_counts_the_rest() -> None:
    paths = [f"/etc/f{i}" for i in range(5)]
    p = plan(mc("old"), mc("new", files=[ign_file(f) for f in paths]))
    assert p.action_rule == "reboot required by /etc/f0, /etc/f1, /etc/f2 and 2 more"
    p = plan(mc("old"), mc("new", files=[ign_file(f) for f in paths[:3]]))
    assert p.action_rule == "reboot required by /etc/f0, /etc/f1, /etc/f2"


def test_legacy_restart_crio_runs_the_trust_update_first() -> None:
    path = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
    p = plan(mc("old", files=[ign_file(path, "1")]), mc("new", files=[ign_file(path, "2")]), legacy=True)
    assert p.steps[-2:] == (st.UpdateCaTrust(), st.RestartService("crio.service"))
    assert p.action_rule == "legacy post-config action table: restart crio"


# ---------------------------------------------------------------- the OS step


def ocl(name: str, image: str, **spec: Any) -> MachineConfig:
    obj = mc_object(name, osImageURL="quay.io/base", **spec)
    obj["metadata"]["annotations"] = {"machineconfiguration.openshift.io/ocl-osimageurl": image}
    return load(obj)


def test_layered_image_brings_its_own_extensions_and_kernel() -> None:
    p = plan(
        ocl("old", "quay.io/ocl@sha256:1", kernelType="realtime"),
        ocl("new", "quay.io/ocl@sha256:2", extensions=["usbguard"], kernelArguments=["a"]),
    )
    assert p.commands == (
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/ocl@sha256:2"),
        ("rpm-ostree", "kargs", "--append=a"),
        reboot_argv(),
    )
    assert p.extension_packages == ()
    assert p.action_rule == "osImageURL, kernelArguments, kernelType, extensions changed: reboot"
    assert [c.kind for c in p.changes] == ["osImageURL", "kernelArguments", "kernelType", "extensions"]


def test_forcefile_with_a_real_os_update() -> None:
    p = plan(mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/b"), Facts(forcefile=True))
    assert p.action_rule == "forcefile /run/machine-config-daemon-force present: reboot"
    # the image does change: no "re-applied" note on the change
    assert spelled(p.changes) == (
        PlannedChange(
            "osImageURL", "quay.io/b", "modified", (REBOOT,), "osImageURL change requires a reboot"
        ),
    )
    assert p.steps[:2] == (st.ConsumeForcefile(), st.Drain())
    assert p.commands == (
        CLEANUP,
        ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b"),
        reboot_argv(),
    )


def test_forcefile_alone_says_the_os_is_reapplied() -> None:
    p = plan(mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/a"), Facts(forcefile=True))
    assert spelled(p.changes) == (
        PlannedChange(
            "osImageURL",
            "quay.io/a",
            "modified",
            (REBOOT,),
            "osImageURL change requires a reboot",
            ("forcefile present: OS re-applied",),
        ),
    )


def test_legacy_forcefile_reboots_and_says_the_os_is_reapplied() -> None:
    p = plan(
        mc("old", osImageURL="quay.io/a"),
        mc("new", osImageURL="quay.io/a"),
        Facts(forcefile=True),
        legacy=True,
    )
    assert (spellings(p.actions), p.action_rule) == (
        ("reboot",),
        "forcefile /run/machine-config-daemon-force present: reboot",
    )
    assert spelled(p.changes) == (
        PlannedChange(
            "osImageURL",
            "quay.io/a",
            "modified",
            ("reboot",),
            "osImageURL change requires a reboot",
            ("forcefile present: OS re-applied",),
        ),
    )


# ---------------------------------------------------------------- the steps themselves

KERNEL_PACKAGES = ("kernel", "kernel-core", "kernel-modules", "kernel-modules-core", "kernel-modules-extra")
RT_PACKAGES = ("kernel-rt-core", "kernel-rt-modules", "kernel-rt-modules-extra")


def test_each_os_run_is_a_step_with_its_role() -> None:
    old = mc(
        "old", osImageURL="quay.io/a", kernelArguments=["x"], kernelType="realtime", extensions=["usbguard"]
    )
    new = mc(
        "new", osImageURL="quay.io/b", kernelArguments=["y"], kernelType="realtime", extensions=["sysstat"]
    )
    booted = Facts(requested_packages=(*RT_PACKAGES, "usbguard"), requested_base_removals=KERNEL_PACKAGES)
    p = plan(old, new, booted)
    roles = [(type(s).__name__, getattr(s, "role", None)) for s in p.steps if not isinstance(s, st.Drain)]
    assert roles == [
        ("OsCommand", "cleanup"),
        ("OsCommand", "override-reset"),
        ("CheckRpmOstree", None),
        ("LinkPullSecret", None),
        ("Rebase", None),
        ("OsCommand", "kargs"),
        ("OsCommand", "kernel-switch"),
        ("OsCommand", "extensions"),
        ("VerifyExtensions", None),
        ("Reboot", None),
    ]
    rebase, verify, reboot = p.steps[5], p.steps[-2], p.steps[-1]
    assert rebase == st.Rebase(
        "quay.io/b", ("rpm-ostree", "rebase", "--experimental", "ostree-unverified-registry:quay.io/b")
    )
    assert verify == st.VerifyExtensions(("sysstat",))
    assert reboot == st.Reboot("Node will reboot into config new", reboot_argv())


def test_tuning_runs_are_steps_of_their_own_role() -> None:
    p = plan(mc("old"), mc("new"), Facts(tuning_file="ADD nosmt\n", cmdline="root=x"))
    assert p.steps == (st.OsCommand("tuning", ("rpm-ostree", "kargs", "--append=nosmt")),)


def test_a_reboot_still_owed_is_asked_for_again() -> None:
    owed = "Node will reboot into config prev"
    p = plan(mc("old"), mc("new"), Facts(owed_reboot=owed))
    assert p.steps == (st.Reboot(owed, reboot_argv("prev"), owed=True),)
    p = plan(mc("old"), mc("new"), Facts(owed_reboot=owed, coreos=False))
    assert p.steps == (st.Reboot(owed, st.reboot_command(owed, coreos=False), owed=True),)
    # a change that reboots anyway asks once, for itself
    p = plan(mc("old", osImageURL="quay.io/a"), mc("new", osImageURL="quay.io/b"), Facts(owed_reboot=owed))
    assert [s for s in p.steps if isinstance(s, st.Reboot)] == [
        st.Reboot("Node will reboot into config new", reboot_argv())
    ]


def test_an_unreconcilable_legacy_plan_is_still_a_legacy_plan() -> None:
    p = plan(mc("old"), mc("new", fips=True), legacy=True)
    assert p.to_json()["mode"] == "legacy"
    assert p.drain is False
    assert p.reconcilable is False


def test_drain_rules_word_for_word() -> None:
    drain_policy = policy_with_file("/etc/a", {"type": "Drain"})
    p = plan(
        mc("old", files=[ign_file("/etc/a", "1")]),
        mc("new", files=[ign_file("/etc/a", "2")]),
        policies=drain_policy,
    )
    assert (spellings(p.actions), p.drain, p.drain_rule) == (
        (Action("Drain"),),
        True,
        "a reboot or drain action drains the node",
    )
    registries = "/etc/containers/registries.conf"
    old = mc("old", files=[ign_file(registries, "")])
    new = mc("new", files=[ign_file(registries, '[[registry]]\nlocation = "r.io"\n')])
    p = plan(old, new)
    assert (p.drain, p.drain_rule) == (
        True,
        "/etc/containers/registries.conf change is not safe (a registry or mirror removed or changed, "
        "or a mirror not digest-only): drain",
    )


def test_registries_conf_is_compared_with_the_old_file_and_undecodable_bytes_are_replaced() -> None:
    registries = "/etc/containers/registries.conf"
    # the kept mirror serves tags: safe only because it was there before
    base = '[[registry]]\nlocation = "r.io"\n[[registry.mirror]]\nlocation = "tags.io"\n'
    mirror = '[[registry.mirror]]\nlocation = "m.io"\npull-from-mirror = "digest-only"\n'
    p = plan(
        mc("old", files=[ign_file(registries, base)]), mc("new", files=[ign_file(registries, base + mirror)])
    )
    assert (p.drain, p.drain_rule) == (
        False,
        "/etc/containers/registries.conf change is safe (only digest-only mirrors added): no drain",
    )
    # a byte that is not UTF-8 (in a comment) does not stop the check
    old = mc("old", files=[{"path": registries, "mode": 420, "contents": {"source": "data:,%23%FF%0A"}}])
    p = plan(old, mc("new", files=[ign_file(registries, "# x\n")]))
    assert (p.drain, spellings(p.actions)) == (False, (Action("Special"),))


def test_the_change_of_a_layered_image_names_the_layered_image() -> None:
    p = plan(ocl("old", "quay.io/ocl@sha256:1"), ocl("new", "quay.io/ocl@sha256:2"))
    assert spelled(p.changes)[0] == PlannedChange(
        "osImageURL", "quay.io/ocl@sha256:2", "modified", (REBOOT,), "osImageURL change requires a reboot"
    )


@pytest.mark.parametrize(
    ("installed", "verified"),
    [
        # the booted deployment already requests them: no extensions run, so nothing to check
        (("usbguard",), False),
        # an extensions run stages a deployment: upstream checks it (spec §5.6)
        ((), True),
    ],
)
def test_the_staged_deployment_is_checked_only_after_an_extensions_run(
    installed: tuple[str, ...], verified: bool
) -> None:
    old = mc("old", osImageURL="quay.io/a", extensions=["usbguard"])
    new = mc("new", osImageURL="quay.io/b", extensions=["usbguard"])
    p = plan(old, new, Facts(requested_packages=installed))
    kinds = [type(s).__name__ for s in p.steps]
    assert ("VerifyExtensions" in kinds) is verified
    assert ("OsCommand" in kinds and any(getattr(s, "role", "") == "extensions" for s in p.steps)) is verified
