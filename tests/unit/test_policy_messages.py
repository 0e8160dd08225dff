"""mcd.policy: every finding's text word for word, and the rules and origins the plan shows.

The API's messages are written out literally (never imported from mcd.policy): `mcd validate`
must print what `oc apply` prints, so a change to any of them must fail here.
"""

from __future__ import annotations

from typing import Any

import pytest

from mcd.policy import (
    DEFAULT_POLICIES,
    Action,
    ClusterPolicies,
    FilePolicy,
    PolicyError,
    UnitPolicy,
    combine_legacy,
    file_decision,
    legacy_actions_for_files,
    legacy_file_decision,
    merge_policies,
    parse_cluster_policies,
    policies_from_machineconfiguration,
    sshkey_decision,
    unit_decision,
)
from mcd.policy.decide import go_dir
from mcd.policy.parse import parse_action

Path = tuple[str | int, ...]
NDP: Path = ("spec", "nodeDisruptionPolicy")
STATUS: Path = ("status", "nodeDisruptionPolicyStatus", "clusterPolicies")

BAD_SUFFIX = (
    "Invalid ${SERVICETYPE} in service name. Expected format is ${NAME}${SERVICETYPE}, where "
    '${SERVICETYPE} must be one of ".service", ".socket", ".device", ".mount", ".automount", ".swap", '
    '".target", ".path", ".timer",".snapshot", ".slice" or ".scope".'
)
BAD_NAME = (
    "Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be "
    'atleast 1 character long and can only consist of alphabets, digits, ":", "-", "_", ".", and "\\"'
)
REBOOT_ALONE = "Reboot action can only be specified standalone, as it will override any other actions"
NONE_ALONE = "None action can only be specified standalone, as it will override any other actions"
RELOAD_UNION = "reload is required when type is Reload, and forbidden otherwise"
RESTART_UNION = "restart is required when type is Restart, and forbidden otherwise"
SPEC_TYPES = '"Reboot", "Drain", "Reload", "Restart", "DaemonReload", "None"'


def findings(call: Any, *args: Any) -> list[tuple[Path, str]]:
    with pytest.raises(PolicyError) as exc:
        call(*args)
    return [(f.path, f.message) for f in exc.value.findings]


def spec(ndp: object) -> list[tuple[Path, str]]:
    return findings(policies_from_machineconfiguration, {"spec": {"nodeDisruptionPolicy": ndp}})


def one_file(*actions: object) -> dict[str, Any]:
    return {"files": [{"path": "/etc/a", "actions": list(actions)}]}


ACTIONS: Path = (*NDP, "files", 0, "actions")


@pytest.mark.parametrize(
    ("actions", "expected"),
    [
        ([{"type": "Reboot"}, {"type": "Drain"}], [(ACTIONS, REBOOT_ALONE)]),
        ([{"type": "Drain"}, {"type": "None"}], [(ACTIONS, NONE_ALONE)]),
        (
            [{"type": "Reboot"}, {"type": "None"}],
            [(ACTIONS, REBOOT_ALONE), (ACTIONS, NONE_ALONE)],
        ),
        ([{"type": "Reload"}], [((*ACTIONS, 0), RELOAD_UNION)]),
        ([{"type": "Restart"}], [((*ACTIONS, 0), RESTART_UNION)]),
        (
            [{"type": "Drain", "reload": {"serviceName": "a.service"}}],
            [((*ACTIONS, 0), RELOAD_UNION)],
        ),
        (
            [{"type": "Reload", "reload": {"serviceName": "crio"}}],
            [
                ((*ACTIONS, 0, "reload", "serviceName"), BAD_SUFFIX),
                ((*ACTIONS, 0, "reload", "serviceName"), BAD_NAME),
            ],
        ),
        (
            [{"type": "Restart", "restart": {"serviceName": "-.x.service"}}],
            [],
        ),
        (
            [{"type": "Restart", "restart": {"serviceName": ".service"}}],
            [((*ACTIONS, 0, "restart", "serviceName"), BAD_NAME)],
        ),
        (
            [{"type": "Restart", "restart": {"serviceName": 5}}],
            [((*ACTIONS, 0, "restart", "serviceName"), "Invalid value: 5: must be of type string")],
        ),
        (
            [{"type": "Reload", "reload": "crio.service"}],
            [((*ACTIONS, 0, "reload"), 'Invalid value: "crio.service": must be of type object')],
        ),
        (
            [{"type": "Reload", "reload": {"serviceName": None}}],
            [((*ACTIONS, 0, "reload", "serviceName"), "Required value")],
        ),
        ([{"type": None}], [((*ACTIONS, 0, "type"), "Required value")]),
        # a union finding and the service name's findings are all reported
        (
            [{"type": "Restart", "reload": {"serviceName": "a.service"}, "restart": {"serviceName": "crio"}}],
            [
                ((*ACTIONS, 0), RELOAD_UNION),
                ((*ACTIONS, 0, "restart", "serviceName"), BAD_SUFFIX),
                ((*ACTIONS, 0, "restart", "serviceName"), BAD_NAME),
            ],
        ),
        (
            [{"type": "Special"}],
            [((*ACTIONS, 0, "type"), f'Unsupported value: "Special": supported values: {SPEC_TYPES}')],
        ),
        (["Drain"], [((*ACTIONS, 0), 'Invalid value: "Drain": must be of type object')]),
        (
            [{"type": "DaemonReload"}] * 11,
            [(ACTIONS, "Too many: 11: must have at most 10 items")],
        ),
    ],
)
def test_action_findings_word_for_word(actions: list[object], expected: list[tuple[Path, str]]) -> None:
    if expected:
        assert spec(one_file(*actions)) == expected
    else:
        assert policies_from_machineconfiguration({"spec": {"nodeDisruptionPolicy": one_file(*actions)}})


def test_ten_actions_are_allowed() -> None:
    policies = policies_from_machineconfiguration(
        {"spec": {"nodeDisruptionPolicy": one_file(*[{"type": "DaemonReload"}] * 10)}}
    )
    assert file_decision("/etc/a", policies).actions == (Action("DaemonReload"),) * 10


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a" * 247 + ".service", None),  # 255 bytes: the limit itself is allowed
        ("a" * 248 + ".service", "Too long: may not be more than 255 bytes"),
        # the limit counts bytes, not characters
        ("é" * 124 + "a.service", "Too long: may not be more than 255 bytes"),
    ],
)
def test_service_name_length_limit(name: str, problem: str | None) -> None:
    ndp = {"units": [{"name": name, "actions": [{"type": "None"}]}]}
    if problem is None:
        assert unit_decision(
            name, policies_from_machineconfiguration({"spec": {"nodeDisruptionPolicy": ndp}})
        ).matched
    else:
        found = spec(ndp)
        assert found[0] == ((*NDP, "units", 0, "name"), problem)


@pytest.mark.parametrize(
    ("ndp", "expected"),
    [
        ("x", [(NDP, 'Invalid value: "x": must be of type object')]),
        ({"files": "x"}, [((*NDP, "files"), 'Invalid value: "x": must be of type array')]),
        # values are shown as JSON with sorted keys
        (
            {"files": {"b": 1, "a": [2]}},
            [((*NDP, "files"), 'Invalid value: {"a": [2], "b": 1}: must be of type array')],
        ),
        # every entry is checked, past a bad one
        (
            {"files": ["x", {"path": "rel", "actions": []}], "units": [1, {"name": "a.service"}]},
            [
                ((*NDP, "files", 0), 'Invalid value: "x": must be of type object'),
                ((*NDP, "files", 1, "path"), 'Invalid value: "rel": must be an absolute path'),
                ((*NDP, "units", 0), "Invalid value: 1: must be of type object"),
                ((*NDP, "units", 1, "actions"), "Required value"),
            ],
        ),
        ({"units": {}}, [((*NDP, "units"), "Invalid value: {}: must be of type array")]),
        ({"files": ["x"]}, [((*NDP, "files", 0), 'Invalid value: "x": must be of type object')]),
        ({"units": [5]}, [((*NDP, "units", 0), "Invalid value: 5: must be of type object")]),
        (
            {"units": [{"name": 5, "actions": []}]},
            [((*NDP, "units", 0, "name"), "Invalid value: 5: must be of type string")],
        ),
        ({"units": [{"actions": []}]}, [((*NDP, "units", 0, "name"), "Required value")]),
        ({"units": [{"name": "a.service"}]}, [((*NDP, "units", 0, "actions"), "Required value")]),
        (
            {"units": [{"name": "a.service", "actions": []}, {"name": "a.service", "actions": []}]},
            [((*NDP, "units", 1, "name"), 'Duplicate value: {"name": "a.service"}')],
        ),
        (
            {"files": [{"path": 5, "actions": []}]},
            [((*NDP, "files", 0, "path"), "Invalid value: 5: must be of type string")],
        ),
        ({"sshkey": "x"}, [((*NDP, "sshkey"), 'Invalid value: "x": must be of type object')]),
        (
            {"sshkey": {"actions": "x"}},
            [((*NDP, "sshkey", "actions"), 'Invalid value: "x": must be of type array')],
        ),
    ],
)
def test_document_findings_word_for_word(ndp: object, expected: list[tuple[Path, str]]) -> None:
    assert spec(ndp) == expected


def test_every_finding_is_reported_and_the_error_says_where() -> None:
    obj = {"spec": "x", "status": "y"}
    assert findings(policies_from_machineconfiguration, obj) == [
        (("spec",), 'Invalid value: "x": must be of type object'),
        (("status",), 'Invalid value: "y": must be of type object'),
    ]
    with pytest.raises(PolicyError) as exc:
        policies_from_machineconfiguration(obj)
    assert str(exc.value) == (
        'spec: Invalid value: "x": must be of type object; status: Invalid value: "y": must be of type object'
    )
    assert findings(policies_from_machineconfiguration, {"status": {"nodeDisruptionPolicyStatus": 1}}) == [
        (("status", "nodeDisruptionPolicyStatus"), "Invalid value: 1: must be of type object")
    ]


def test_null_parts_are_absent_parts() -> None:
    obj = {"spec": {"nodeDisruptionPolicy": None}, "status": {"nodeDisruptionPolicyStatus": None}}
    assert policies_from_machineconfiguration(obj) == DEFAULT_POLICIES
    assert (
        policies_from_machineconfiguration({"status": {"nodeDisruptionPolicyStatus": {}}}) == DEFAULT_POLICIES
    )


# ---- parse_cluster_policies (the status the daemon reads) --------------------------------------------


def test_cluster_policies_refuse_invalid_input_at_the_given_path() -> None:
    assert findings(parse_cluster_policies, "x", ("p",)) == [
        (("p",), 'Invalid value: "x": must be of type object')
    ]
    assert findings(parse_cluster_policies, {"files": b"x"}) == [
        (("files",), "Invalid value: b'x': must be of type array")
    ]
    bad_type = {"units": [{"name": "a.service", "actions": [{"type": "Nope"}]}]}
    assert findings(parse_cluster_policies, bad_type, STATUS) == [
        (
            (*STATUS, "units", 0, "actions", 0, "type"),
            f'Unsupported value: "Nope": supported values: {SPEC_TYPES}, "Special"',
        )
    ]
    many = {"files": [{"path": f"/f{i}", "actions": [{"type": "None"}]} for i in range(101)]}
    assert findings(parse_cluster_policies, many) == [
        (("files",), "Too many: 101: must have at most 100 items")
    ]


def test_entries_of_the_status_not_among_the_defaults_are_cluster_entries() -> None:
    status = {
        "files": [
            {"path": "/etc/x", "actions": [{"type": "None"}]},
            # a default path with other actions is the cluster's, not the default
            {"path": "/var/lib/kubelet/config.json", "actions": [{"type": "Drain"}]},
            {"path": "/etc/nmstate/openshift", "actions": [{"type": "None"}]},
        ],
        "units": [
            {"name": "a.service", "actions": [{"type": "DaemonReload"}]},
            {"name": "iri-registry.service", "actions": [{"type": "Reboot"}]},
        ],
        "sshkey": {"actions": [{"type": "Drain"}]},
    }
    policies = parse_cluster_policies(status)
    assert policies == ClusterPolicies(
        (
            FilePolicy("/etc/x", (Action("None"),), "cluster"),
            FilePolicy("/var/lib/kubelet/config.json", (Action("Drain"),), "cluster"),
            FilePolicy("/etc/nmstate/openshift", (Action("None"),), "default"),
        ),
        (
            UnitPolicy("a.service", (Action("DaemonReload"),), "cluster"),
            UnitPolicy("iri-registry.service", (Action("Reboot"),), "cluster"),
        ),
        (Action("Drain"),),
        "cluster",
    )
    assert file_decision("/etc/x/y", policies).rule == "cluster policy /etc/x"
    assert unit_decision("a.service", policies).rule == "unit policy a.service (cluster)"
    assert sshkey_decision(policies).rule == "sshkey policy (cluster)"
    assert parse_cluster_policies(DEFAULT_POLICIES.to_api()) == DEFAULT_POLICIES


# ---- the Go path rules ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "actions", "rule"),
    [
        # Go's Clean turns a leading "//" into "/" (Python's normpath keeps it)
        (
            "//etc/containers/registries.d/a.yaml",
            (Action("Reload", "crio.service"),),
            "default policy /etc/containers/registries.d",
        ),
        ("///etc/crio/policies/x", (Action("Reload", "crio.service"),), "default policy /etc/crio/policies"),
        # equality is on the raw path: only a parent match cleans
        (
            "//etc/containers/registries.conf",
            (Action("Reboot"),),
            "no policy for //etc/containers/registries.conf: reboot",
        ),
    ],
)
def test_file_decision_cleans_like_go(path: str, actions: tuple[Action, ...], rule: str) -> None:
    decision = file_decision(path, DEFAULT_POLICIES)
    assert (decision.actions, decision.rule) == (actions, rule)


def test_a_longer_policy_path_wins_over_a_shorter_one_listed_later() -> None:
    policies = ClusterPolicies(
        (
            FilePolicy("/etc/a/b", (Action("Drain"),), "user"),
            FilePolicy("/etc/a", (Action("None"),), "user"),
        ),
        (),
        (),
        "default",
    )
    assert file_decision("/etc/a/b/c", policies).actions == (Action("Drain"),)


# ---- legacy rules, word for word ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "action", "rule"),
    [
        ("/etc/kubernetes/kubelet-ca.crt", None, "legacy: /etc/kubernetes/kubelet-ca.crt needs no action"),
        ("/var/lib/kubelet/config.json", None, "legacy: /var/lib/kubelet/config.json needs no action"),
        (
            "/etc/containers/registries.conf",
            "reload crio",
            "legacy: /etc/containers/registries.conf: reload crio",
        ),
        (
            "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
            "reload crio",
            "legacy: /etc/machine-config-daemon/no-reboot/containers-gpg.pub: reload crio",
        ),
        ("/etc/containers/policy.json", "reload crio", "legacy: /etc/containers/policy.json: reload crio"),
        (
            "/etc/containers/registries.d/a.yaml",
            "reload crio",
            "legacy: file in /etc/containers/registries.d: reload crio",
        ),
        (
            "//etc/containers/registries.d/a.yaml",
            "reload crio",
            "legacy: file in /etc/containers/registries.d: reload crio",
        ),
        (
            "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
            "restart crio",
            "legacy: /etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt: restart crio",
        ),
        ("/etc/nmstate/openshift/a.yml", None, "legacy: file in /etc/nmstate/openshift needs no action"),
        ("/etc/crio/policies/a.json", "reboot", "legacy: no rule for /etc/crio/policies/a.json: reboot"),
    ],
)
def test_legacy_rules_word_for_word(path: str, action: str | None, rule: str) -> None:
    decision = legacy_file_decision(path)
    assert (decision.action, decision.rule) == (action, rule)


def test_legacy_actions_for_files_returns_the_fold_and_each_decision() -> None:
    actions, decisions = legacy_actions_for_files(
        ["/etc/containers/policy.json", "/etc/kubernetes/kubelet-ca.crt"]
    )
    assert actions == ["reload crio"]
    assert [d.rule for d in decisions] == [
        "legacy: /etc/containers/policy.json: reload crio",
        "legacy: /etc/kubernetes/kubelet-ca.crt needs no action",
    ]
    assert legacy_actions_for_files([]) == (["none"], ())


# ---- the Action value -------------------------------------------------------------------------------


def test_action_text_and_api_form() -> None:
    assert str(Action("Reload", "crio.service")) == "Reload crio.service"
    assert str(Action("None")) == "None"
    assert Action("Restart", "a.service").to_api() == {
        "type": "Restart",
        "restart": {"serviceName": "a.service"},
    }
    assert Action("DaemonReload").to_api() == {"type": "DaemonReload"}
    with pytest.raises(ValueError) as exc:
        Action("Reload")
    assert str(exc.value) == "Reload action needs a service"
    with pytest.raises(ValueError) as exc:
        Action("Drain", "a.service")
    assert str(exc.value) == "Drain action takes no service"
    with pytest.raises(ValueError) as exc:
        Action("reboot")
    assert str(exc.value) == "unknown node disruption action type 'reboot'"


def test_parse_action_returns_the_action_and_no_findings() -> None:
    assert parse_action({"type": "Reload", "reload": {"serviceName": "a.service"}}, (), ("Reload",)) == (
        Action("Reload", "a.service"),
        [],
    )


def test_combine_legacy_goes_on_after_a_file_that_needs_nothing() -> None:
    decisions = [
        legacy_file_decision("/var/lib/kubelet/config.json"),
        legacy_file_decision("/etc/containers/policy.json"),
    ]
    assert combine_legacy(decisions) == ["reload crio"]
    decisions = [legacy_file_decision("/etc/nmstate/openshift/a"), legacy_file_decision("/etc/b")]
    assert combine_legacy(decisions) == ["reboot"]


def test_default_policies_are_upstreams_table() -> None:
    def reload(service: str) -> dict[str, Any]:
        return {"type": "Reload", "reload": {"serviceName": service}}

    def restart(service: str) -> dict[str, Any]:
        return {"type": "Restart", "restart": {"serviceName": service}}

    assert DEFAULT_POLICIES.to_api() == {
        "files": [
            {"path": "/var/lib/kubelet/config.json", "actions": [{"type": "None"}]},
            {
                "path": "/etc/machine-config-daemon/no-reboot/containers-gpg.pub",
                "actions": [reload("crio.service")],
            },
            {"path": "/etc/containers/policy.json", "actions": [reload("crio.service")]},
            {"path": "/etc/containers/registries.conf", "actions": [{"type": "Special"}]},
            {"path": "/etc/containers/registries.d", "actions": [reload("crio.service")]},
            {"path": "/etc/crio/policies", "actions": [reload("crio.service")]},
            {"path": "/etc/nmstate/openshift", "actions": [{"type": "None"}]},
            {
                "path": "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt",
                "actions": [restart("coreos-update-ca-trust.service"), restart("crio.service")],
            },
            {"path": "/etc/kubernetes/credential-providers", "actions": [restart("kubelet.service")]},
            {
                "path": "/etc/systemd/system/kubelet.service.d/"
                "40-kubelet-crio-image-credential-provider.conf",
                "actions": [{"type": "DaemonReload"}, restart("kubelet.service")],
            },
            {"path": "/etc/iri-registry", "actions": [restart("iri-registry.service")]},
            {"path": "/usr/local/bin/load-registry-image.sh", "actions": [restart("iri-registry.service")]},
            {
                "path": "/etc/pki/ca-trust/source/anchors/iri-root-ca.crt",
                "actions": [restart("coreos-update-ca-trust.service")],
            },
        ],
        "units": [
            {
                "name": "iri-registry.service",
                "actions": [{"type": "DaemonReload"}, restart("iri-registry.service")],
            }
        ],
        "sshkey": {"actions": [{"type": "None"}]},
    }
    assert {f.origin for f in DEFAULT_POLICIES.files} | {u.origin for u in DEFAULT_POLICIES.units} == {
        "default"
    }
    assert DEFAULT_POLICIES.sshkey_origin == "default"


def test_the_spec_is_held_to_the_spec_rules_even_beside_a_valid_status() -> None:
    special = {"files": [{"path": "/etc/a", "actions": [{"type": "Special"}]}]}
    unsupported = f'Unsupported value: "Special": supported values: {SPEC_TYPES}'
    obj = {
        "spec": {"nodeDisruptionPolicy": special},
        "status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": {}}},
    }
    assert findings(policies_from_machineconfiguration, obj) == [((*ACTIONS, 0, "type"), unsupported)]
    assert findings(merge_policies, DEFAULT_POLICIES, special, ("x",)) == [
        (("x", "files", 0, "actions", 0, "type"), unsupported)
    ]
    many = {"units": [{"name": f"u{i}.service", "actions": [{"type": "None"}]} for i in range(51)]}
    assert findings(merge_policies, DEFAULT_POLICIES, many, ()) == [
        (("units",), "Too many: 51: must have at most 50 items")
    ]


def test_an_empty_status_has_no_entries_and_no_ssh_action() -> None:
    assert parse_cluster_policies({}) == ClusterPolicies((), (), (), "cluster")


def test_every_unit_entry_is_checked_past_one_without_actions() -> None:
    ndp = {"units": [{"name": "a.service"}, {"name": 5, "actions": []}]}
    assert spec(ndp) == [
        ((*NDP, "units", 0, "actions"), "Required value"),
        ((*NDP, "units", 1, "name"), "Invalid value: 5: must be of type string"),
    ]


def test_go_dir_of_a_relative_path_stays_relative() -> None:
    assert go_dir("etc/x") == "etc"
    assert go_dir("//etc/x") == "/etc"
    assert go_dir("/x") == "/"
