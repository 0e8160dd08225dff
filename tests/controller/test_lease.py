"""Leader election through the Lease, against the stand-in API server: one leader of two, no
takeover while the leader renews, takeover once it stopped for the lease duration (on the
follower's own clock), a release hands over at once, and a lost race is a conflict."""

from __future__ import annotations

import pytest
from mcd_sim.apiserver import ApiServer

from mcd.kube.client import KubeClient
from mcd.kube.errors import ConflictError
from mcd.kube.lease import LeaderElector, LeaseSettings

NS, NAME = "openshift-machine-config-operator", "machine-config-controller"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def elector(api: KubeClient, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(api, LeaseSettings(NS, NAME, identity, duration=15, renew_deadline=10), clock=clock)


def holder(sim: ApiServer) -> tuple[str, int]:
    spec = (sim.get("Lease", NAME, NS) or {}).get("spec") or {}
    return str(spec.get("holderIdentity", "")), int(spec.get("leaseTransitions", 0))


def test_one_leader_until_it_stops_renewing(sim: ApiServer, api: KubeClient) -> None:
    ca, cb = Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.tick() is True
    assert b.tick() is False
    for _ in range(5):  # a renews every few seconds: b never takes over
        ca.now += 5
        cb.now += 5
        assert a.tick() is True
        assert b.tick() is False
    assert holder(sim) == ("a", 0)
    # a stops renewing (killed): b must have seen the same record for the whole duration
    cb.now += 14
    assert b.tick() is False
    cb.now += 2
    assert b.tick() is True
    assert holder(sim) == ("b", 1)
    # a comes back: it reads b's record and follows (it leads only by a write of its own)
    ca.now += 30
    assert a.tick() is False
    assert a.leading is False and a.holder == "b"


def test_a_leader_that_cannot_renew_stops_leading_before_anyone_may_take_over(
    sim: ApiServer, api: KubeClient
) -> None:
    ca = Clock()
    a = elector(api, "a", ca)
    assert a.tick() is True
    sim.faults.fail(code=503, times=10, resource="leases")
    ca.now += 5
    assert a.tick() is True  # within the renew deadline
    ca.now += 6
    assert a.tick() is False  # 11 s without a renewal: a stops, 4 s before the lease expires
    sim.faults.clear()


def test_release_hands_over_at_once(sim: ApiServer, api: KubeClient) -> None:
    ca, cb = Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.tick() is True
    assert b.tick() is False
    a.release()
    assert holder(sim)[0] == ""
    assert b.tick() is True
    assert holder(sim) == ("b", 1)


def test_of_two_racing_writes_one_conflicts(sim: ApiServer, api: KubeClient) -> None:
    ca, cb = Clock(), Clock()
    a, b = elector(api, "a", ca), elector(api, "b", cb)
    assert a.tick() is True
    a.release()
    # both read the released Lease; b writes first, so a's write (same resourceVersion) conflicts
    lease = api.get_lease(NS, NAME)
    assert lease is not None
    assert b.tick() is True
    stale = {**lease, "spec": {**lease["spec"], "holderIdentity": "a"}}
    with pytest.raises(ConflictError):
        api.update_lease(NS, stale)
    assert holder(sim)[0] == "b"
