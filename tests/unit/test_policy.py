"""mcd.policy: NodeDisruptionPolicy parsing, merging, matching, folding, drain; legacy table."""

from __future__ import annotations

from typing import Any

import pytest
from builders import action_from_api

from mcd.policy import (
    DEFAULT_POLICIES,
    Action,
    ClusterPolicies,
    Decision,
    FilePolicy,
    LegacyDecision,
    PolicyError,
    UnitPolicy,
    actions_for_changes,
    combine_actions,
    combine_legacy,
    file_decision,
    legacy_drain_required,
    legacy_file_decision,
    merge_policies,
    ndp_drain_required,
    parse_cluster_policies,
    policies_from_machineconfiguration,
    sshkey_decision,
    unit_decision,
)
from mcd.policy.model import (
    MSG_BAD_NAME,
    MSG_BAD_SUFFIX,
    MSG_NONE_ALONE,
    MSG_REBOOT_ALONE,
    MSG_RELOAD_UNION,
    MSG_RESTART_UNION,
)

REBOOT, NONE, DRAIN, SPECIAL, DAEMON_RELOAD = (
    Action(t) for t in ("Reboot", "None", "Drain", "Special", "DaemonReload")
)
RELOAD_CRIO = Action("Reload", "crio.service")
NDP = ("spec", "nodeDisruptionPolicy")


def restart(service: str) -> Action:
    return Action("Restart", service)


def findings_of(exc: pytest.ExceptionInfo[PolicyError]) -> list[tuple[tuple[str | int, ...], str]]:
    return [(f.path, f.message) for f in exc.value.findings]


def spec_errors(ndp: dict[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    with pytest.raises(PolicyError) as exc:
        policies_from_machineconfiguration({"spec": {"nodeDisruptionPolicy": ndp}})
    return findings_of(exc)


def never() -> bool:
    raise AssertionError("registries.conf safety must not be consulted")


# ---- Action API form --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "action"),
    [
        ({"type": "Reboot"}, REBOOT),
        ({"type": "Reload", "reload": {"serviceName": "crio.service"}}, RELOAD_CRIO),
        ({"type": "Restart", "restart": {"serviceName": "kubelet.service"}}, restart("kubelet.service")),
        ({"type": "Special"}, SPECIAL),
    ],
)
def test_action_round_trips_through_the_api_form(api: dict[str, Any], action: Action) -> None:
    assert action_from_api(api, ()) == action
    assert action.to_api() == api


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        ("Reboot", [((), 'Invalid value: "Reboot": must be of type object')]),
        ({}, [(("type",), "Required value")]),
        (
            {"type": "Rebooot"},
            [
                (
                    ("type",),
                    'Unsupported value: "Rebooot": supported values: "Reboot", "Drain", "Reload", "Restart", '
                    '"DaemonReload", "None", "Special"',
                )
            ],
        ),
        ({"type": "Reload"}, [((), MSG_RELOAD_UNION)]),
        (
            {"type": "Restart", "reload": {"serviceName": "a.service"}},
            [((), MSG_RELOAD_UNION), ((), MSG_RESTART_UNION)],
        ),
        ({"type": "Drain", "restart": {"serviceName": "a.service"}}, [((), MSG_RESTART_UNION)]),
        ({"type": "Reload", "reload": {}}, [(("reload", "serviceName"), "Required value")]),
        (
            {"type": "Reload", "reload": {"serviceName": "crio"}},
            [(("reload", "serviceName"), MSG_BAD_SUFFIX), (("reload", "serviceName"), MSG_BAD_NAME)],
        ),
        (
            {"type": "Reload", "reload": {"serviceName": "/x.service"}},
            [(("reload", "serviceName"), MSG_BAD_NAME)],
        ),
        (
            {"type": "Reload", "reload": {"serviceName": "crio.conf"}},
            [(("reload", "serviceName"), MSG_BAD_SUFFIX)],
        ),
        (
            {"type": "Reload", "reload": {"serviceName": "crio.service\n"}},
            [(("reload", "serviceName"), MSG_BAD_SUFFIX)],
        ),
        (
            {"type": "Reload", "reload": {"serviceName": "a" * 248 + ".service"}},
            [(("reload", "serviceName"), "Too long: may not be more than 255 bytes")],
        ),
    ],
)
def test_invalid_actions_are_reported_at_their_json_path(api: object, expected: list[Any]) -> None:
    with pytest.raises(PolicyError) as exc:
        action_from_api(api, ())
    assert findings_of(exc) == expected


@pytest.mark.parametrize(
    "name",
    ["a.service", "my:unit.x.socket", "back\\slash.timer", "a.b.c.slice", "x-y_z.scope", "a.b@c d.mount"],
)
def test_valid_service_names_are_accepted(name: str) -> None:
    # the API's name rule only checks the start (allowed characters up to a dot): "a.b@c d.mount" passes
    assert action_from_api({"type": "Restart", "restart": {"serviceName": name}}, ()).service == name


def test_template_instance_names_are_refused_as_upstream_does() -> None:
    with pytest.raises(PolicyError) as exc:
        action_from_api({"type": "Restart", "restart": {"serviceName": "getty@tty1.service"}}, ())
    assert findings_of(exc) == [(("restart", "serviceName"), MSG_BAD_NAME)]


def test_special_is_refused_where_users_write_policies() -> None:
    assert action_from_api({"type": "Special"}, (), allow_special=True) == SPECIAL
    with pytest.raises(PolicyError):
        action_from_api({"type": "Special"}, (), allow_special=False)


def test_action_objects_reject_impossible_shapes() -> None:
    with pytest.raises(ValueError, match="needs a service"):
        Action("Reload")
    with pytest.raises(ValueError, match="takes no service"):
        Action("Reboot", "crio.service")
    with pytest.raises(ValueError, match="unknown"):
        Action("reboot")


# ---- validation of MachineConfiguration documents ---------------------------------------------------


def test_bad_service_name_is_located_at_the_exact_json_path() -> None:
    ndp = {
        "files": [
            {
                "path": "/etc/a",
                "actions": [{"type": "DaemonReload"}, {"type": "Reload", "reload": {"serviceName": "crio"}}],
            }
        ]
    }
    path = (*NDP, "files", 0, "actions", 1, "reload", "serviceName")
    assert spec_errors(ndp) == [(path, MSG_BAD_SUFFIX), (path, MSG_BAD_NAME)]


def test_policy_error_message_names_the_paths() -> None:
    with pytest.raises(PolicyError, match=r"spec\.nodeDisruptionPolicy\.files\[0\]\.path: .*absolute"):
        policies_from_machineconfiguration(
            {"spec": {"nodeDisruptionPolicy": {"files": [{"path": "etc/a", "actions": []}]}}}
        )
    assert issubclass(PolicyError, ValueError)


def test_reboot_and_none_must_stand_alone() -> None:
    ndp = {
        "files": [{"path": "/etc/a", "actions": [{"type": "Reboot"}, {"type": "Drain"}]}],
        "units": [{"name": "a.service", "actions": [{"type": "None"}, {"type": "DaemonReload"}]}],
        "sshkey": {"actions": [{"type": "Drain"}, {"type": "Reboot"}]},
    }
    assert spec_errors(ndp) == [
        ((*NDP, "files", 0, "actions"), MSG_REBOOT_ALONE),
        ((*NDP, "units", 0, "actions"), MSG_NONE_ALONE),
        ((*NDP, "sshkey", "actions"), MSG_REBOOT_ALONE),
    ]


def test_at_most_ten_actions() -> None:
    ndp = {"files": [{"path": "/etc/a", "actions": [{"type": "DaemonReload"}] * 11}]}
    assert spec_errors(ndp) == [((*NDP, "files", 0, "actions"), "Too many: 11: must have at most 10 items")]


def test_spec_allows_fifty_entries_and_status_a_hundred() -> None:
    def entries(n: int) -> dict[str, Any]:
        return {
            "files": [{"path": f"/etc/f{i}", "actions": [{"type": "None"}]} for i in range(n)],
            "units": [{"name": f"u{i}.service", "actions": [{"type": "None"}]} for i in range(n)],
        }

    assert (
        len(policies_from_machineconfiguration({"spec": {"nodeDisruptionPolicy": entries(50)}}).files) == 63
    )
    assert spec_errors(entries(51)) == [
        ((*NDP, "files"), "Too many: 51: must have at most 50 items"),
        ((*NDP, "units"), "Too many: 51: must have at most 50 items"),
    ]
    status_path = ("status", "nodeDisruptionPolicyStatus", "clusterPolicies")
    assert len(parse_cluster_policies(entries(100)).files) == 100
    with pytest.raises(PolicyError) as exc:
        policies_from_machineconfiguration(
            {"status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": entries(101)}}}
        )
    assert findings_of(exc) == [
        ((*status_path, "files"), "Too many: 101: must have at most 100 items"),
        ((*status_path, "units"), "Too many: 101: must have at most 100 items"),
    ]


def test_entries_need_their_key_and_actions_and_keys_are_unique() -> None:
    ndp = {
        "files": [
            {"actions": []},
            {"path": "/etc/a"},
            {"path": "/etc/b", "actions": []},
            {"path": "/etc/b", "actions": []},
            {"path": "relative/c", "actions": []},
        ],
        "units": [{"name": "bad name.service", "actions": []}, {"name": "a.service", "actions": "Reboot"}],
    }
    assert spec_errors(ndp) == [
        ((*NDP, "files", 0, "path"), "Required value"),
        ((*NDP, "files", 1, "actions"), "Required value"),
        ((*NDP, "files", 3, "path"), 'Duplicate value: {"path": "/etc/b"}'),
        ((*NDP, "files", 4, "path"), 'Invalid value: "relative/c": must be an absolute path'),
        ((*NDP, "units", 0, "name"), MSG_BAD_NAME),
        ((*NDP, "units", 1, "actions"), 'Invalid value: "Reboot": must be of type array'),
    ]


def test_users_cannot_write_special_but_status_can_hold_it() -> None:
    ndp = {"files": [{"path": "/etc/a", "actions": [{"type": "Special"}]}]}
    assert [p for p, _ in spec_errors(ndp)] == [(*NDP, "files", 0, "actions", 0, "type")]
    assert parse_cluster_policies(ndp).files[0].actions == (SPECIAL,)


def test_invalid_spec_is_reported_even_when_status_is_used() -> None:
    obj = {
        "spec": {"nodeDisruptionPolicy": {"units": [{"name": "x", "actions": []}]}},
        "status": {
            "nodeDisruptionPolicyStatus": {"clusterPolicies": {"files": [{"path": "/a", "actions": [{}]}]}}
        },
    }
    with pytest.raises(PolicyError) as exc:
        policies_from_machineconfiguration(obj)
    assert [p for p, _ in findings_of(exc)] == [
        (*NDP, "units", 0, "name"),
        (*NDP, "units", 0, "name"),
        ("status", "nodeDisruptionPolicyStatus", "clusterPolicies", "files", 0, "actions", 0, "type"),
    ]


# ---- merge and sources ----------------------------------------------------------------------------------


def test_merge_replaces_defaults_in_place_and_appends_new_entries() -> None:
    user = {
        "files": [
            {"path": "/home/core/test", "actions": [{"type": "None"}]},
            {"path": "/etc/containers/policy.json", "actions": [{"type": "Drain"}]},
        ],
        "units": [
            {
                "name": "foo.service",
                "actions": [{"type": "Restart", "restart": {"serviceName": "foo.service"}}],
            },
            {"name": "iri-registry.service", "actions": [{"type": "Reboot"}]},
        ],
    }
    merged = merge_policies(DEFAULT_POLICIES, user, NDP)
    assert merged.files[2] == FilePolicy("/etc/containers/policy.json", (DRAIN,), "user")
    assert merged.files[:2] == DEFAULT_POLICIES.files[:2]
    assert merged.files[3:-1] == DEFAULT_POLICIES.files[3:]
    assert merged.files[-1] == FilePolicy("/home/core/test", (NONE,), "user")
    assert merged.units == (
        UnitPolicy("iri-registry.service", (REBOOT,), "user"),
        UnitPolicy("foo.service", (restart("foo.service"),), "user"),
    )
    assert (merged.sshkey, merged.sshkey_origin) == ((NONE,), "default")


@pytest.mark.parametrize("sshkey", [None, {}, {"actions": None}, {"actions": []}])
def test_sshkey_policy_is_replaced_only_by_a_non_empty_list(sshkey: object) -> None:
    merged = merge_policies(DEFAULT_POLICIES, {} if sshkey is None else {"sshkey": sshkey}, NDP)
    assert (merged.sshkey, merged.sshkey_origin) == ((NONE,), "default")
    drained = merge_policies(DEFAULT_POLICIES, {"sshkey": {"actions": [{"type": "Drain"}]}}, NDP)
    assert (drained.sshkey, drained.sshkey_origin) == ((DRAIN,), "user")


def test_merge_locates_findings_under_the_given_path() -> None:
    with pytest.raises(PolicyError) as exc:
        merge_policies(DEFAULT_POLICIES, {"files": [{"path": "/a", "actions": [{"type": "Nope"}]}]}, ("x",))
    assert [p for p, _ in findings_of(exc)] == [("x", "files", 0, "actions", 0, "type")]


def test_spec_is_merged_over_the_defaults_when_status_is_absent() -> None:
    # the shape of upstream's e2e fixture nodedisruptionpolicy-rebootless-path.yaml
    obj = {
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {
            "nodeDisruptionPolicy": {"files": [{"path": "/home/core/test", "actions": [{"type": "None"}]}]}
        },
    }
    policies = policies_from_machineconfiguration(obj)
    assert file_decision("/home/core/test", policies).rule == "user policy /home/core/test"
    assert policies_from_machineconfiguration({}) == DEFAULT_POLICIES
    assert policies_from_machineconfiguration({"spec": {}, "status": {}}) == DEFAULT_POLICIES


def test_status_is_used_as_is_with_default_entries_keeping_their_origin() -> None:
    cluster = DEFAULT_POLICIES.to_api()
    cluster["files"] = [  # type: ignore[index]
        {"path": "/etc/containers/policy.json", "actions": [{"type": "Drain"}]},
        {
            "path": "/etc/crio/policies",
            "actions": [{"type": "Reload", "reload": {"serviceName": "crio.service"}}],
        },
    ]
    obj = {
        "spec": {"nodeDisruptionPolicy": {"files": [{"path": "/ignored", "actions": [{"type": "None"}]}]}},
        "status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": cluster}},
    }
    policies = policies_from_machineconfiguration(obj)
    assert [(f.path, f.origin) for f in policies.files] == [
        ("/etc/containers/policy.json", "cluster"),
        ("/etc/crio/policies", "default"),
    ]
    assert policies.units == DEFAULT_POLICIES.units
    assert (policies.sshkey, policies.sshkey_origin) == ((NONE,), "default")
    # the daemon does not merge: a path missing from status has no policy
    assert file_decision("/etc/nmstate/openshift/a.yml", policies).actions == (REBOOT,)


def test_empty_status_sshkey_gives_no_ssh_action() -> None:
    policies = parse_cluster_policies({"sshkey": {"actions": []}})
    assert sshkey_decision(policies).actions == ()
    assert policies.sshkey_origin == "cluster"
    assert actions_for_changes([], [], True, policies)[0] == ()


# ---- file / unit / sshkey decisions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "actions", "rule"),
    [
        ("/etc/containers/registries.conf", (SPECIAL,), "default policy /etc/containers/registries.conf"),
        (
            "/etc/containers/registries.d/a.yaml",
            (RELOAD_CRIO,),
            "default policy /etc/containers/registries.d",
        ),
        (
            "/etc/containers/registries.d/x/y/z.yaml",
            (RELOAD_CRIO,),
            "default policy /etc/containers/registries.d",
        ),
        ("/etc/crio//policies/./ns/../p.json", (RELOAD_CRIO,), "default policy /etc/crio/policies"),
        ("/etc/containers/registries.dx", (REBOOT,), "no policy for /etc/containers/registries.dx: reboot"),
        ("/etc/containers", (REBOOT,), "no policy for /etc/containers: reboot"),
        ("/etc/kubernetes/kubelet-ca.crt", (REBOOT,), "no policy for /etc/kubernetes/kubelet-ca.crt: reboot"),
        (
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            (restart("coreos-update-ca-trust.service"), restart("crio.service")),
            "default policy /etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
        ),
    ],
)
def test_file_decision_with_default_policies(path: str, actions: tuple[Action, ...], rule: str) -> None:
    decision = file_decision(path, DEFAULT_POLICIES)
    assert (decision.actions, decision.rule) == (actions, rule)
    assert decision.matched is (actions != (REBOOT,))


def _files(*entries: tuple[str, tuple[Action, ...]]) -> ClusterPolicies:
    return ClusterPolicies(tuple(FilePolicy(p, a, "user") for p, a in entries), (), (NONE,), "default")


def test_longest_matching_path_wins_whatever_the_order() -> None:
    policies = _files(
        ("/etc/a/b", (DRAIN,)), ("/etc", (REBOOT,)), ("/etc/a", (NONE,)), ("/etc/a/b/c/d", (SPECIAL,))
    )
    assert file_decision("/etc/a/b/c/file", policies) == Decision((DRAIN,), "user policy /etc/a/b")
    assert file_decision("/etc/a/x", policies).actions == (NONE,)
    assert file_decision("/etc/other", policies).actions == (REBOOT,)
    assert file_decision("/etc/a/b/c/d", policies).actions == (SPECIAL,)


def test_equally_long_matches_go_to_the_first_entry() -> None:
    policies = _files(("/etc/a/", (DRAIN,)), ("/etc/a", (NONE,)))
    # "/etc/a/" and "/etc/a" both clean to the same parent; the longer raw string is listed first
    assert file_decision("/etc/a/f", policies).actions == (DRAIN,)
    policies = _files(("/etc/x", (DRAIN,)), ("/etc/x", (NONE,)))
    assert file_decision("/etc/x/f", policies).actions == (DRAIN,)


def test_root_policy_matches_only_the_root_itself() -> None:
    # upstream quirk: "/" + "/" is never a prefix of a cleaned path
    policies = _files(("/", (NONE,)))
    assert file_decision("/etc/a", policies).actions == (REBOOT,)
    assert file_decision("/", policies).actions == (NONE,)


def test_unit_decision_is_an_exact_name_match() -> None:
    decision = unit_decision("iri-registry.service", DEFAULT_POLICIES)
    assert decision.actions == (DAEMON_RELOAD, restart("iri-registry.service"))
    assert decision.rule == "unit policy iri-registry.service (default)"
    missing = unit_decision("iri-registry", DEFAULT_POLICIES)
    assert (missing.actions, missing.rule, missing.matched) == (
        (REBOOT,),
        "no policy for unit iri-registry: reboot",
        False,
    )


def test_sshkey_decision_uses_the_sshkey_policy() -> None:
    assert sshkey_decision(DEFAULT_POLICIES) == Decision((NONE,), "sshkey policy (default)")


# ---- folding and drain --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ([RELOAD_CRIO, REBOOT, NONE], (REBOOT,)),
        ([NONE, RELOAD_CRIO, NONE, DRAIN], (RELOAD_CRIO, DRAIN)),
        ([NONE, SPECIAL], (SPECIAL,)),
        ([NONE, NONE], (NONE,)),
        ([RELOAD_CRIO, RELOAD_CRIO, DAEMON_RELOAD], (RELOAD_CRIO, RELOAD_CRIO, DAEMON_RELOAD)),
        ([DRAIN, RELOAD_CRIO], (DRAIN, RELOAD_CRIO)),
        ([], ()),
    ],
)
def test_combine_actions(actions: list[Action], expected: tuple[Action, ...]) -> None:
    assert combine_actions(actions) == expected


def test_actions_for_changes_orders_files_units_then_ssh() -> None:
    user = {
        "units": [
            {
                "name": "foo.service",
                "actions": [{"type": "Restart", "restart": {"serviceName": "foo.service"}}],
            }
        ],
        "sshkey": {"actions": [{"type": "Drain"}]},
    }
    policies = merge_policies(DEFAULT_POLICIES, user, NDP)
    actions, decisions = actions_for_changes(
        ["/var/lib/kubelet/config.json", "/etc/containers/policy.json"], ["foo.service"], True, policies
    )
    assert actions == (RELOAD_CRIO, restart("foo.service"), DRAIN)
    assert [d.rule for d in decisions] == [
        "default policy /var/lib/kubelet/config.json",
        "default policy /etc/containers/policy.json",
        "unit policy foo.service (user)",
        "sshkey policy (user)",
    ]
    assert actions_for_changes(["/etc/containers/policy.json"], ["bar.service"], False, policies)[0] == (
        REBOOT,
    )


def test_drain_for_reboot_or_drain_without_asking_about_registries() -> None:
    assert ndp_drain_required([REBOOT], never) is True
    assert ndp_drain_required([SPECIAL, DRAIN], never) is True
    assert ndp_drain_required([RELOAD_CRIO, DAEMON_RELOAD, restart("a.service")], never) is False
    assert ndp_drain_required([NONE], never) is False


def test_special_drains_only_for_an_unsafe_registries_change() -> None:
    assert ndp_drain_required([SPECIAL, RELOAD_CRIO], lambda: True) is False
    assert ndp_drain_required([SPECIAL], lambda: False) is True


# ---- legacy table ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "action"),
    [
        ("/etc/kubernetes/kubelet-ca.crt", None),
        ("/var/lib/kubelet/config.json", None),
        ("/etc/containers/registries.conf", "reload crio"),
        ("/etc/machine-config-daemon/no-reboot/containers-gpg.pub", "reload crio"),
        ("/etc/containers/policy.json", "reload crio"),
        ("/etc/containers/registries.d/a.yaml", "reload crio"),
        ("/etc/containers/registries.d/sub/a.yaml", "reboot"),
        ("/etc/containers/registries.d", "reboot"),
        ("/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt", "restart crio"),
        ("/etc/nmstate/openshift/worker.yml", None),
        ("/etc/nmstate/openshift/sub/worker.yml", "reboot"),
        ("/etc/crio/policies/ns.json", "reboot"),
        ("/etc/kubernetes/credential-providers/ecr.yaml", "reboot"),
    ],
)
def test_legacy_file_decision(path: str, action: str | None) -> None:
    assert legacy_file_decision(path).action == action


def _legacy(*actions: str | None) -> list[LegacyDecision]:
    return [LegacyDecision(a, "test") for a in actions]


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ((), ["none"]),
        ((None, None), ["none"]),
        (("reload crio", None), ["reload crio"]),
        (("restart crio", "reload crio"), ["restart crio"]),
        (("reload crio", "restart crio"), ["restart crio"]),
        (("reload crio", "reboot", "restart crio"), ["reboot"]),
    ],
)
def test_combine_legacy(actions: tuple[str | None, ...], expected: list[str]) -> None:
    assert combine_legacy(_legacy(*actions)) == expected


def test_combine_legacy_rejects_unknown_actions() -> None:
    with pytest.raises(ValueError, match="unknown legacy action"):
        combine_legacy(_legacy("drain"))


def test_legacy_drain() -> None:
    assert legacy_drain_required(["reboot"], True, never) is True
    assert legacy_drain_required(["none"], True, never) is False
    assert legacy_drain_required(["reload crio"], False, never) is False
    assert legacy_drain_required(["restart crio"], False, never) is False
    assert legacy_drain_required(["reload crio"], True, lambda: True) is False
    assert legacy_drain_required(["restart crio"], True, lambda: False) is True
    # upstream drains for anything it does not recognise
    assert legacy_drain_required([], False, never) is True
