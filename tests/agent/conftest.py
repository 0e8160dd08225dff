"""Fixtures for the agent tests: the stand-in API server (`mcd_sim.apiserver`) and the agent as a
child process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from harness import Agent
from simcluster import Cluster
from wire import Wire


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    yield c
    c.stop()


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    agents: list[Agent] = []

    def start(
        cluster: Cluster,
        root: Path,
        *extra: str,
        env: dict[str, str] | None = None,
        kill_at: int | None = None,
    ) -> Agent:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        agent = Agent(root, kubeconfig, tmp_path / "agent.log", *extra, env=env, kill_at=kill_at).start()
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        agent.kill()


@pytest.fixture
def wire(tmp_path: Path) -> Iterator[Wire]:
    """A plain-HTTP stand-in API server behind the fault proxy (tests/agent/faultproxy.py)."""
    w = Wire(tmp_path)
    yield w
    w.stop()
