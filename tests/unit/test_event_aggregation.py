"""Events are aggregated as client-go's recorder does (tools/record/events_cache.go): a repeat
patches the Event it repeats (count, lastTimestamp); more than ten messages of one reason within
ten minutes become one combined Event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcd.agent.report.events import NAMESPACE, EventRecorder
from mcd.kube.errors import ApiError, NotFoundError


class Api:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.gone: set[str] = set()

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        assert namespace == NAMESPACE
        self.calls.append(("create", event["metadata"]["name"], dict(event)))

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        if name in self.gone:
            raise NotFoundError(404, f"events {name} not found")
        self.calls.append(("patch", name, dict(patch)))


def _recorded(*messages: tuple[str, str], api: Api | None = None) -> Api:
    api = api or Api()
    rec = EventRecorder(api, "worker-0")
    rec.uid = "uid-1"
    rec.start()
    for reason, message in messages:
        rec.normal(reason, message)
    rec.stop()
    return api


def test_a_repeat_patches_the_count_of_the_event_it_repeats() -> None:
    started = ("ConfigDriftMonitorStarted", "Config Drift Monitor started, watching against rendered-a")
    api = _recorded(started, started, ("NodeDone", "x"), started)
    verbs = [(verb, c.get("count")) for verb, _, c in api.calls]
    assert verbs == [("create", 1), ("patch", 2), ("create", 1), ("patch", 3)]
    name = api.calls[0][1]
    assert api.calls[1][1] == api.calls[3][1] == name
    assert set(api.calls[1][2]) == {"count", "lastTimestamp", "message"}
    assert api.calls[3][2]["message"] == started[1]


def test_many_messages_of_one_reason_are_combined() -> None:
    api = _recorded(*[("ServiceReload", f"message {i}") for i in range(12)])
    creates = [c for verb, _, c in api.calls if verb == "create"]
    assert [c["message"] for c in creates] == [f"message {i}" for i in range(9)] + [
        "(combined from similar events): message 9"
    ]
    assert [(verb, c["count"], c["message"]) for verb, _, c in api.calls[10:]] == [
        ("patch", 2, "(combined from similar events): message 10"),
        ("patch", 3, "(combined from similar events): message 11"),
    ]


def test_a_repeat_of_an_event_that_is_gone_is_created_again() -> None:
    api = Api()
    api.gone = _Everything()  # deleted (or expired) as soon as it is made
    _recorded(("Drain", "a"), ("Drain", "a"), api=api)
    assert [(verb, c["count"]) for verb, _, c in api.calls] == [("create", 1), ("create", 2)]
    assert api.calls[0][1] == api.calls[1][1]


class _Everything(set[str]):
    def __contains__(self, item: object) -> bool:
        return True


def test_the_event_is_the_one_upstreams_namespaced_recorder_posts_for_the_node() -> None:
    """Upstream's node reference is kind, name and uid; its NamespacedEventRecorder puts the
    cluster-scoped Node in openshift-machine-config-operator, which client-go's makeEvent then
    takes for the Event too; the reporting fields are the recorder's source."""
    api = _recorded(("NodeDone", "Setting node worker-0, currentConfig rendered-a to Done"))
    [(_, name, event)] = api.calls
    assert event["metadata"]["namespace"] == "openshift-machine-config-operator"
    assert event["involvedObject"] == {
        "kind": "Node",
        "name": "worker-0",
        "uid": "uid-1",
        "namespace": "openshift-machine-config-operator",
    }
    assert event["source"] == {"component": "machineconfigdaemon", "host": "worker-0"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("machineconfigdaemon", "worker-0")
    assert name.startswith("worker-0.")


class FailingOnce(Api):
    """The first create fails (an API server restart): nothing was made."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 1

    def create_event(self, namespace: str, event: Mapping[str, Any]) -> None:
        if self.failures:
            self.failures -= 1
            self.calls.append(("refused", event["metadata"]["name"], dict(event)))
            raise ApiError(503, "the server is restarting")
        super().create_event(namespace, event)


def test_a_repeat_of_an_event_never_made_is_created_not_patched() -> None:
    api = _recorded(("Drain", "draining"), ("Drain", "draining"), api=FailingOnce())
    assert [verb for verb, _, _ in api.calls] == ["refused", "create"]
    assert api.calls[1][2]["count"] == 1
