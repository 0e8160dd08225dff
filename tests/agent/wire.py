"""The agent behind the fault proxy: a plain-HTTP stand-in API server, the proxy in front of it,
and a kubeconfig that points the agent at the proxy."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from faultproxy import FaultProxy
from harness import NODE, Agent, config_a, done_on, make_root
from simcluster import Cluster

from mcd.node import annotations as ann


class Wire:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.cluster = Cluster(tmp, tls=False)
        host, port = self.cluster.sim.listen
        self.proxy = FaultProxy((host, port)).start()
        self.kubeconfig = tmp / "kubeconfig"
        config = self.cluster.sim.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = self.proxy.url
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)
        self.agents: list[Agent] = []

    def start(self, root: Path, *extra: str, **kw: Any) -> Agent:
        # a fault's retry after 0.1 s, doubling, rather than upstream's 1 s: the same sequence, faster
        flags = ("--retry-start", "0.1", *extra)
        agent = Agent(root, self.kubeconfig, self.tmp / "agent.log", *flags, **kw).start()
        self.agents.append(agent)
        return agent

    def stop(self) -> None:
        for agent in self.agents:
            agent.kill()
        self.proxy.stop()
        self.cluster.stop()


def node_on(cluster: Cluster, config: str) -> None:
    cluster.add_node(NODE, {ann.CURRENT_CONFIG: config, ann.DESIRED_CONFIG: config, ann.STATE: "Done"})


def started_on_a(wire: Wire, *extra: str, **kw: Any) -> tuple[Path, Agent]:
    """The agent on a node running config A, Done, its drift monitor started."""
    a = config_a()
    root = make_root(wire.tmp, a)
    wire.cluster.add_mc(a)
    wire.cluster.answer_drains()
    node_on(wire.cluster, "rendered-worker-a")
    agent = wire.start(root, *extra, **kw)
    wire.cluster.wait_node(NODE, done_on("rendered-worker-a"))
    wire.cluster.wait_event("ConfigDriftMonitorStarted")
    # the boot sync's on-disk check follows the monitor's start; NodeDone comes once it passed
    wire.cluster.wait_event("NodeDone")
    return root, agent


def ends_done(wire: Wire, agent: Agent, config: str, timeout: float = 30.0) -> None:
    """The node ends Done on `config` with an empty reason, and the agent never exited."""
    # Done with the reason written empty: the boot path's own Done (the monitor may have started
    # before it, on a node already annotated Done)
    node = wire.cluster.wait_node(
        NODE, lambda n: done_on(config)(n) and n["metadata"]["annotations"].get(ann.REASON) == "", timeout
    )
    assert node["metadata"]["annotations"][ann.REASON] == ""
    assert agent.proc is not None and agent.proc.poll() is None, f"the agent exited:\n{agent.log[-4000:]}"


def eventually(
    pred: Callable[[], bool], what: str, timeout: float = 20.0, agent: Agent | None = None
) -> None:
    """Poll a condition nothing signals (a log file, a port), failing fast if the agent exits."""
    deadline = time.monotonic() + timeout
    while not pred():
        if agent is not None and agent.proc is not None and agent.proc.poll() is not None:
            raise AssertionError(f"the agent exited ({agent.proc.returncode}):\n{agent.log[-4000:]}")
        if time.monotonic() > deadline:
            tail = agent.log[-4000:] if agent is not None else ""
            raise AssertionError(f"timed out waiting for {what}\n{tail}")
        time.sleep(0.05)


def http_status(port: int, path: str = "/healthz") -> int:
    """The status of GET `path` on the agent's plain endpoint at `port` (0: no answer at all)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
