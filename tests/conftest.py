"""Test-wide guards: no external commands unless a test opts in; the scenario tier and e2e tests
only on request; `python3` a plain interpreter for the stand-ins."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NoReturn

import pytest


class CommandsNotAllowedError(RuntimeError):
    """Raised when a test runs an external command without `@pytest.mark.allow_commands`."""


def _refuse(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        shown = args[0] if args else kwargs.get("args", kwargs.get("path", "?"))
        raise CommandsNotAllowedError(
            f"test tried to run an external command via {what}: {shown!r}; "
            "use a recording runner, or mark the test @pytest.mark.allow_commands"
        )

    return refuse


@pytest.fixture(autouse=True)
def _no_external_commands(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every way of starting a process fail, so a unit test can never touch the host.

    subprocess.run/call/check_output, os.popen and asyncio's subprocesses all go through
    subprocess.Popen, so patching it covers them.
    """
    if request.node.get_closest_marker("allow_commands") is None:
        monkeypatch.setattr(subprocess, "Popen", _refuse("subprocess.Popen"))
        for name in ("system", "posix_spawn", "posix_spawnp"):
            monkeypatch.setattr(os, name, _refuse(f"os.{name}"))


_PYTHON_ENV: list[Path] = []  # the environment this process made (the controller's, under xdist)


def pytest_configure(config: pytest.Config) -> None:
    """`python3` on PATH is a bare environment of this interpreter.

    The stand-ins (tests/standins/rpm-ostree, run hundreds of times a suite) start with
    `#!/usr/bin/env python3`. Through a version manager's shim (pyenv's is a shell script) and
    the site-packages' .pth files, each start took about three times what the stand-in needs:
    its standard library alone. Workers and every process the tests start inherit the directory
    through PATH, so it is made once.
    """
    if os.environ.get("MCD_TESTS_PYTHON3"):
        return
    env = Path(tempfile.mkdtemp(prefix="mcd-tests-python-"))
    real = Path(os.path.realpath(sys.executable))
    # a venv of no packages: no site-packages to scan at each start
    (env / "pyvenv.cfg").write_text(f"home = {real.parent}\ninclude-system-site-packages = false\n")
    (env / "bin").mkdir()
    (env / "bin" / "python3").symlink_to(real)
    os.environ["PATH"] = f"{env / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    os.environ["MCD_TESTS_PYTHON3"] = str(env)
    _PYTHON_ENV.append(env)


def pytest_unconfigure(config: pytest.Config) -> None:
    for env in _PYTHON_ENV:
        shutil.rmtree(env, ignore_errors=True)
        del os.environ["MCD_TESTS_PYTHON3"]


# The scenario tier (`make scenario-test`, MCD_SCENARIO_TEST=1; .ci/run runs it after `make test`):
# tests whose length is the scenario's own clock, not the test's: leases, rollouts with drains
# and reboots, the agent's retry backoff at upstream's values (1 s doubling; no flag sets it).
# Listed here rather than marked in each file; a listed test that is renamed fails the tier.
SCENARIO_TESTS = {
    # rollouts of real agents and a controller process, drains waiting on replacement pods
    "tests/sim/test_simulate_fleet.py::test_pool_of_four_rolls_two_at_a_time_within_the_budget",
    "tests/sim/test_simulate_fleet.py::test_text_timeline_of_one_node_with_an_admins_config_and_a_reboot_of_two_seconds",
    "tests/sim/test_simulate_fleet.py::test_a_controller_breaking_the_limit_fails_the_run",
    # five faults in a row, each retried after the node key's growing backoff (1+2+4+8 s)
    "tests/agent/test_agent_robustness.py::test_500s_resets_dropped_watches_and_410s_lose_no_transition_and_write_none_twice",
    # a leader frozen past its 6 s lease, a second one taking over; a pass longer than the lease
    "tests/controller/test_fencing.py::test_a_leader_frozen_mid_pass_past_its_lease_writes_nothing_more_and_exits",
    "tests/controller/test_fencing.py::test_the_lease_is_renewed_through_a_pass_longer_than_the_lease",
    # a killed leader's lease running out before the other replica finishes the rollout
    "tests/controller/test_process.py::test_killed_mid_rollout_another_replica_takes_over_and_finishes",
    # a budget refusing the drain until the test relaxes it: kubectl's eviction retry (5 s)
    "tests/sim/test_sim_drain.py::test_drain_waits_for_the_pdb_then_completes",
    # two failed watches in a row: the watch's own backoff (1 s, then 2 s)
    "tests/agent/test_agent_mccache.py::test_a_config_held_when_the_watch_broke_off_is_read_and_the_watch_goes_on[fail]",
    # an 8 s API outage probed throughout, against a 2 s unreachable limit
    "tests/agent/test_agent_outage_liveness.py::test_liveness_holds_through_an_outage_and_readiness_follows_the_api",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the scenario tier (skipped unless MCD_SCENARIO_TEST=1); skip e2e tests unless MCD_E2E=1."""
    scenarios = os.environ.get("MCD_SCENARIO_TEST") == "1"
    later = pytest.mark.skip(reason="scenario tier: make scenario-test (MCD_SCENARIO_TEST=1)")
    for item in items:
        if item.nodeid in SCENARIO_TESTS:
            item.add_marker(pytest.mark.scenario)
            if not scenarios:
                item.add_marker(later)
    if scenarios:
        collected = {item.nodeid.split("::")[0] for item in items}
        found = {item.nodeid for item in items}
        stale = sorted(n for n in SCENARIO_TESTS if n.split("::")[0] in collected and n not in found)
        if stale:
            raise pytest.UsageError(f"tests/conftest.py SCENARIO_TESTS names tests that are gone: {stale}")
    if os.environ.get("MCD_E2E") == "1":
        return
    skip = pytest.mark.skip(reason="e2e test: set MCD_E2E=1 with the vagrant/ VM running")
    for item in items:
        if item.get_closest_marker("e2e") is not None:
            item.add_marker(skip)
