"""mcd.policy.action: the post-config action as one typed value, and the drain rule on it."""

from __future__ import annotations

import pytest
from builders import ign_file, mc

from mcd.planner.plan import plan
from mcd.planner.plantext import plan_text
from mcd.policy import Action, ActionKind, PostConfigAction, drain_required
from mcd.policy.action import from_api, from_legacy

CA_BUNDLE = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
REGISTRIES = "/etc/containers/registries.conf"


def never() -> bool:
    raise AssertionError("registries.conf safety must not be consulted")


@pytest.mark.parametrize(
    ("api", "kind", "service"),
    [
        (Action("None"), ActionKind.NONE, None),
        (Action("Reboot"), ActionKind.REBOOT, None),
        (Action("Drain"), ActionKind.DRAIN, None),
        (Action("Reload", "a.service"), ActionKind.RELOAD, "a.service"),
        (Action("Restart", "b.service"), ActionKind.RESTART, "b.service"),
        (Action("DaemonReload"), ActionKind.DAEMON_RELOAD, None),
        (Action("Special"), ActionKind.RELOAD_CRIO, None),
    ],
)
def test_every_policy_action_maps_to_one_kind_and_back(
    api: Action, kind: ActionKind, service: str | None
) -> None:
    typed = PostConfigAction.from_api(api)
    assert (typed.kind, typed.service, typed.legacy) == (kind, service, False)
    assert typed.to_json() == api.to_api()
    assert typed.to_api() == api.to_api()
    assert str(typed) == str(api)
    assert typed.spelling() == api
    assert typed != api  # a typed value, not its spelling


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("none", ActionKind.NONE),
        ("reload crio", ActionKind.RELOAD_CRIO),
        ("restart crio", ActionKind.RESTART_CRIO_WITH_CA_TRUST),
        ("reboot", ActionKind.REBOOT),
    ],
)
def test_every_legacy_word_maps_to_one_kind_and_back(word: str, kind: ActionKind) -> None:
    typed = PostConfigAction.from_legacy(word)
    assert (typed.kind, typed.service, typed.legacy) == (kind, None, True)
    assert typed.to_json() == word
    assert str(typed) == word
    assert typed.spelling() == word
    assert typed != word  # a typed value, not its spelling


def test_the_two_spellings_of_one_kind_are_different_values() -> None:
    legacy, ndp = PostConfigAction.from_legacy("reload crio"), PostConfigAction.from_api(Action("Special"))
    assert legacy.kind is ndp.kind
    assert legacy != ndp
    assert (legacy.spelling(), ndp.spelling()) == ("reload crio", Action("Special"))
    assert PostConfigAction(ActionKind.REBOOT) != PostConfigAction(ActionKind.REBOOT, legacy=True)
    assert PostConfigAction(ActionKind.REBOOT) != 1
    assert len({legacy, PostConfigAction.from_legacy("reload crio"), ndp}) == 2


def test_a_legacy_action_has_no_api_form() -> None:
    with pytest.raises(ValueError, match="legacy action 'restart crio' has no API form"):
        PostConfigAction.from_legacy("restart crio").to_api()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kind": ActionKind.RELOAD}, "RELOAD action: service None"),
        ({"kind": ActionKind.NONE, "service": "a.service"}, "NONE action: service 'a.service'"),
        ({"kind": ActionKind.DRAIN, "legacy": True}, "the legacy table has no DRAIN action"),
        ({"kind": ActionKind.RESTART_CRIO_WITH_CA_TRUST}, "node disruption policy has no RESTART_CRIO"),
    ],
)
def test_values_neither_table_produces_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PostConfigAction(**kwargs)  # type: ignore[arg-type]


def test_an_unknown_legacy_word_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown legacy action 'drain'"):
        PostConfigAction.from_legacy("drain")


# ---- the drain rule on typed values ----------------------------------------------------------------


@pytest.mark.parametrize("legacy", [False, True])
def test_reboot_drains_in_both_modes_without_asking(legacy: bool) -> None:
    reboot = PostConfigAction(ActionKind.REBOOT, legacy=legacy)
    assert drain_required([reboot], legacy=legacy, registries_changed=True, registries_change_safe=never)


def test_policy_mode_drain() -> None:
    def ndp(actions: list[Action], safe: bool | None = None) -> bool:
        check = never if safe is None else (lambda: safe)
        return drain_required(
            from_api(actions), legacy=False, registries_changed=False, registries_change_safe=check
        )

    assert ndp([Action("Drain")])
    assert not ndp([Action("None")])
    assert not ndp([])
    assert not ndp([Action("Reload", "crio.service"), Action("DaemonReload"), Action("Restart", "a.service")])
    # Special is registries.conf's own policy: it asks even when told registries.conf did not change
    assert ndp([Action("Special")], safe=False)
    assert not ndp([Action("Special")], safe=True)


def test_legacy_mode_drain() -> None:
    def old(words: list[str], changed: bool, safe: bool | None = None) -> bool:
        check = never if safe is None else (lambda: safe)
        return drain_required(
            from_legacy(words), legacy=True, registries_changed=changed, registries_change_safe=check
        )

    assert not old(["none"], True)
    assert old([], False)  # upstream's safe default
    for word in ("reload crio", "restart crio"):
        assert not old([word], False)
        assert old([word], True, safe=False)
        assert not old([word], True, safe=True)


# ---- the plan carries typed values and prints each table's spelling --------------------------------


def test_legacy_plan_holds_typed_actions_and_prints_the_words() -> None:
    p = plan(
        mc("old", files=[ign_file(CA_BUNDLE, "a")]), mc("new", files=[ign_file(CA_BUNDLE, "b")]), legacy=True
    )
    assert [(a.kind, a.legacy) for a in p.actions] == [(ActionKind.RESTART_CRIO_WITH_CA_TRUST, True)]
    assert [(a.kind, a.legacy) for a in p.changes[0].actions] == [
        (ActionKind.RESTART_CRIO_WITH_CA_TRUST, True)
    ]
    doc = p.to_json()
    assert doc["actions"] == ["restart crio"]
    assert doc["changes"][0]["actions"] == ["restart crio"]
    assert "action: restart crio  (" in plan_text(p)


def test_policy_plan_holds_typed_actions_and_prints_the_api_form() -> None:
    p = plan(mc("old", files=[ign_file(CA_BUNDLE, "a")]), mc("new", files=[ign_file(CA_BUNDLE, "b")]))
    assert [(a.kind, a.service, a.legacy) for a in p.actions] == [
        (ActionKind.RESTART, "coreos-update-ca-trust.service", False),
        (ActionKind.RESTART, "crio.service", False),
    ]
    doc = p.to_json()
    assert doc["actions"] == [
        {"type": "Restart", "restart": {"serviceName": "coreos-update-ca-trust.service"}},
        {"type": "Restart", "restart": {"serviceName": "crio.service"}},
    ]
    assert doc["changes"][0]["actions"] == doc["actions"]
    assert "action: Restart coreos-update-ca-trust.service, Restart crio.service  (" in plan_text(p)


def test_special_and_legacy_reload_crio_run_the_same_step() -> None:
    files_old, files_new = [ign_file(REGISTRIES, "a")], [ign_file(REGISTRIES, "b")]
    ndp = plan(mc("old", files=files_old), mc("new", files=files_new))
    legacy = plan(mc("old", files=files_old), mc("new", files=files_new), legacy=True)
    assert ndp.actions[0].kind is legacy.actions[0].kind is ActionKind.RELOAD_CRIO
    assert ndp.steps[-1:] == legacy.steps[-1:]
