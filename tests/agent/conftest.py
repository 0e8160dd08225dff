"""Fixtures for the agent tests: a test API server with one node, a controller stand-in for the
drain handshake, and the agent as a child process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakeapi import FakeApi
from harness import Agent


@pytest.fixture
def cluster() -> Iterator[FakeApi]:
    api = FakeApi().start()
    yield api
    api.stop()


@pytest.fixture
def start_agent(tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    agents: list[Agent] = []

    def start(
        cluster: FakeApi,
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
