"""The MachineConfigNode's conditions: upstream's merge rules for one report. Pure."""

from __future__ import annotations

from typing import Any

from mcd.node import machineconfignode as mcn


def _merge(status: dict[str, Any] | None, report: mcn.Report, **kw: Any) -> dict[str, Any] | None:
    args = {"spec_desired": "rendered-worker-b", "current_config": "rendered-worker-a",
            "desired_config": "rendered-worker-b", "now": 0.0, **kw}  # fmt: skip
    return mcn.merge(status, report, **args)


def _by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_new_status_has_every_condition_the_unreached_ones_not_yet_occurred() -> None:
    status = _merge(None, mcn.needs_update("worker-0"))
    assert status is not None
    conditions = _by_type(status)
    assert set(conditions) == set(mcn.ALL_TYPES)
    assert conditions["Updated"]["status"] == "False" and conditions["Updated"]["reason"] == "Updated"
    assert conditions["Drained"] == {**conditions["Drained"], "status": "False", "reason": "NotYetOccurred"}
    assert status["configVersion"] == {"current": "rendered-worker-a", "desired": "rendered-worker-b"}


def test_a_report_that_changes_nothing_writes_nothing() -> None:
    status = _merge(None, mcn.resumed("rendered-worker-a"))
    assert _merge(status, mcn.resumed("rendered-worker-a"), now=5.0) is None


def test_a_child_takes_its_parents_type_in_its_reason() -> None:
    status = _merge(_merge(None, mcn.needs_update("n")), mcn.drained("done"))
    assert status is not None
    conditions = _by_type(status)
    assert (conditions["UpdateExecuted"]["status"], conditions["UpdateExecuted"]["reason"]) == (
        "Unknown",
        "Drained",
    )
    assert (conditions["Drained"]["status"], conditions["Drained"]["reason"]) == (
        "True",
        "UpdateExecutedDrained",
    )


def test_updated_turns_the_update_s_conditions_false_naming_the_update() -> None:
    status = _merge(None, mcn.prepared(["Reboot"], True))
    status = _merge(status, mcn.reboot_required())
    status = _merge(status, mcn.updated("n"))
    assert status is not None
    conditions = _by_type(status)
    assert conditions["Updated"]["status"] == "True"
    for kind in ("UpdatePrepared", "RebootedNode"):
        assert conditions[kind]["status"] == "False"
        assert conditions[kind]["message"].startswith("During the update to rendered-worker-b: ")
    # a phase reported while the node is up to date: it no longer is
    after = _merge(status, mcn.needs_update("n"))
    assert after is not None and _by_type(after)["Updated"]["status"] == "False"


def test_the_desired_version_waits_for_a_compatible_update() -> None:
    refused = _merge(None, mcn.not_prepared("a", "b", "no"))
    assert refused is not None and refused["configVersion"]["desired"] == mcn.NOT_YET_SET
    accepted = _merge(refused, mcn.prepared([], False))
    assert accepted is not None and accepted["configVersion"]["desired"] == "rendered-worker-b"


def test_the_pool_comes_from_the_rendered_config_name() -> None:
    assert mcn.pool_of("rendered-worker-0123abc") == "worker"
    assert mcn.pool_of("rendered-infra-gpu-0123abc") == "infra-gpu"
    assert mcn.pool_of("my-config") == "worker"
    assert mcn.pool_of("") == "worker"
