"""The agent never dies of the network: faults injected on the wire (tests/agent/faultproxy.py)
during its reports and during each phase of a sync; each test checks that the process never
exits, that it converges, and that the node ends Done with an empty reason."""

from __future__ import annotations

import json
import re

import pytest
from atomicwriter import publish
from builders import ign_file, mc_object
from harness import NODE, config_a, done_on, in_state, make_root
from journals import new_session, write_journal
from wire import Wire, ends_done, eventually, free_port, http_status, node_on, started_on_a

from mcd.node import annotations as ann

pytestmark = pytest.mark.allow_commands

A = "/etc/mcd-test/a.conf"
NODE_PATH = rf"^/api/v1/nodes/{NODE}(\?|$)"
SSH = "machineconfiguration.openshift.io/ssh"


def config_b() -> dict[str, object]:
    return mc_object("rendered-worker-b", files=[ign_file(A, "a=2\n")],
                     ssh_keys=["ssh-ed25519 AAAA one", "ssh-ed25519 BBBB two"])  # fmt: skip


@pytest.mark.parametrize("faults", [["503"], ["reset", "401"]])
def test_a_failed_drift_report_is_retried_and_the_agent_lives(wire: Wire, faults: list[str]) -> None:
    """Reported: one 503 on the drift report's PATCH ended the process (exit 1)."""
    root, agent = started_on_a(wire)
    for action in faults:
        wire.proxy.add(action, method="PATCH", path=NODE_PATH, body="content mismatch")
    (root / A.lstrip("/")).write_text("a=2\n")
    wire.cluster.wait_node(NODE, in_state("Degraded"))
    assert len(wire.proxy.faulted()) == len(faults)
    agent.wait_log("retry in")
    (root / A.lstrip("/")).write_text("a=1\n")
    ends_done(wire, agent, "rendered-worker-a")
    assert agent.stop() == 0


def test_an_outage_and_cut_watches_during_a_drift_report(wire: Wire) -> None:
    root, agent = started_on_a(wire)
    wire.proxy.outage(True)
    (root / A.lstrip("/")).write_text("a=2\n")
    agent.wait_log("cannot reach the API server")
    wire.proxy.outage(False)
    wire.cluster.wait_node(NODE, in_state("Degraded"))
    (root / A.lstrip("/")).write_text("a=1\n")
    # the repair outlives its watches being cut: once they are open again, cut them
    eventually(lambda: wire.proxy.open_watches() > 0, "the watches open again", agent=agent)
    assert wire.proxy.cut_streams() > 0
    cut_at = wire.proxy.cut_at
    # the syncs that failed in the outage left the node's key backing off (up to 60 s, as
    # upstream's queue): the repair converges, on a loaded machine not within the usual 30 s
    ends_done(wire, agent, "rendered-worker-a", timeout=120.0)
    agent.wait_log("answers again")
    eventually(lambda: wire.proxy.open_watches() > 0, "the cut watches opened again", agent=agent)
    assert any("watch=" in s.target.lower() for s in wire.proxy.seen[cut_at:])
    assert agent.stop() == 0


def test_a_failed_config_dir_report_is_retried(wire: Wire) -> None:
    a, b = config_a(), config_b()
    root = make_root(wire.tmp, a)
    cm = wire.tmp / "cm"
    publish(cm, {"a.json": json.dumps(a), "b.json": json.dumps(b), "desiredConfig": "rendered-worker-a"})
    node_on(wire.cluster, "rendered-worker-a")
    agent = wire.start(root, "--config-dir", str(cm), "--config-grace", "0.2", "--builtin-drainer")
    wire.cluster.wait_node(NODE, done_on("rendered-worker-a"))
    wire.proxy.add("503", method="PATCH", path=NODE_PATH, body='desiredConfig":"rendered-worker-b"')
    wire.proxy.add("reset", method="PATCH", path=NODE_PATH, body='desiredConfig":"rendered-worker-b"')
    publish(cm, {"a.json": json.dumps(a), "b.json": json.dumps(b), "desiredConfig": "rendered-worker-b"})
    ends_done(wire, agent, "rendered-worker-b")
    assert len(wire.proxy.faulted()) == 2
    assert (root / A.lstrip("/")).read_text() == "a=2\n"
    assert agent.stop() == 0


def test_a_failed_login_report_is_retried(wire: Wire) -> None:
    a = config_a()
    root = make_root(wire.tmp, a)
    journal = root / "var/log/journal"
    write_journal(journal / "a.journal", [new_session(1, boot="0" * 32)])  # another boot: not counted
    wire.cluster.add_mc(a)
    wire.cluster.answer_drains()
    node_on(wire.cluster, "rendered-worker-a")
    agent = wire.start(root)
    wire.cluster.wait_node(NODE, done_on("rendered-worker-a"))
    wire.proxy.add("401", method="PATCH", path=NODE_PATH, body=SSH)
    wire.proxy.add("close", method="PATCH", path=NODE_PATH, body=SSH)
    write_journal(journal / "b.journal", [new_session(2)])
    wire.cluster.wait_node(NODE, lambda n: n["metadata"]["annotations"].get(SSH) == "accessed")
    wire.cluster.wait_event("SSHAccessed")
    assert len(wire.proxy.faulted()) == 2
    ends_done(wire, agent, "rendered-worker-a")
    assert agent.stop() == 0


# each phase of an update A -> B, the request that marks it, and the faults it gets
PHASES = {
    "machineconfig": ({"method": "GET", "path": "/machineconfigs/rendered-worker-b"}, ["503", "reset"]),
    "machineconfiguration": ({"method": "GET", "path": "/machineconfigurations/"}, ["401"]),
    "working": ({"method": "PATCH", "path": NODE_PATH, "body": '"Working"'}, ["reset", "503"]),
    "drain": ({"method": "PATCH", "path": NODE_PATH, "body": '"drain-rendered-worker-b"'}, ["close"]),
    "uncordon": ({"method": "PATCH", "path": NODE_PATH, "body": '"uncordon-rendered-worker-b"'}, ["500"]),
    "done": ({"method": "PATCH", "path": NODE_PATH, "body": '"Done"'}, ["401", "reset"]),
    "events": ({"method": "POST", "path": "/events$"}, ["503", "reset", "close"]),
}


@pytest.mark.parametrize("phase", sorted(PHASES))
def test_faults_in_each_phase_of_an_update(wire: Wire, phase: str) -> None:
    # made before the agent starts, the config is read with a GET (its watch starts from "now")
    read = phase == "machineconfig"
    if read:
        wire.cluster.add_mc(config_b())
    _, agent = started_on_a(wire)
    if not read:
        wire.cluster.add_mc(config_b())
    match, faults = PHASES[phase]
    for action in faults:
        wire.proxy.add(action, **match)
    wire.cluster.patch_node(NODE, {"metadata": {"annotations": {ann.DESIRED_CONFIG: "rendered-worker-b"}}})
    ends_done(wire, agent, "rendered-worker-b")
    assert len(wire.proxy.faulted()) == len(faults), wire.proxy.faulted()
    assert agent.stop() == 0


def test_a_revoked_token_is_logged_once_at_the_default_level_and_fails_readyz(wire: Wire) -> None:
    """Reported: 401 on every request printed nothing at the default level, /healthz stayed 200.
    Now /readyz says so; /healthz (liveness) stays 200: a restart would not cure it."""
    port = free_port()
    _, agent = started_on_a(
        wire, "--api-unreachable-limit", "2", verbosity=(), metrics_url=f"127.0.0.1:{port}"
    )
    eventually(lambda: http_status(port, "/readyz") == 200, "/readyz 200", agent=agent)
    everything = wire.proxy.add("401", times=None)
    wire.proxy.cut_streams()
    eventually(lambda: http_status(port, "/readyz") == 503, "/readyz 503 after the limit", agent=agent)
    eventually(lambda: everything.fired >= 2, "refused requests", agent=agent)
    assert http_status(port) == 200  # alive all along
    wire.proxy.clear()
    eventually(lambda: http_status(port, "/readyz") == 200, "/readyz 200 again", agent=agent)
    agent.wait_log("accepts the agent's credentials again")
    log = agent.log
    refused = [line for line in log.splitlines() if "rejects the agent's credentials" in line]
    assert len(refused) == 1, log  # once per outage, not per retry
    # klog's lines: the severity letter first (E error, W warning, I info and debug)
    assert wire.proxy.url in refused[0] and "token" in refused[0] and refused[0].startswith("E")
    assert not re.search(r"^I\d{4} ", log, re.M)  # the default level: nothing below WARNING
    ends_done(wire, agent, "rendered-worker-a")
    assert agent.stop() == 0
