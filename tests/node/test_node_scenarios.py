"""The agent on a real booted node: systemd as PID 1, real reboots, real units, real journald.

Each scenario copies the cached Debian root, installs it as a node (the installer's
`mcd start --once-from A --root-mount NODE --skip-reboot`, the repo's unit, the kubelet's
kubeconfig pointing at `mcd-sim sim-cluster` on loopback), boots it with systemd-nspawn and plays the
controller with kubectl. `make node-test` runs them (tests/node/conftest.py).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import ign_file, mc_object
from nodeharness import (
    AGENT_UNIT,
    CURRENT,
    DESIRED_DRAIN,
    REASON,
    REBOOT_EXIT,
    STATE,
    Cluster,
    Node,
    deadline_poll,
    done_on,
    first_boot,
    scenario,
    unit,
)

pytestmark = pytest.mark.allow_commands

Parts = tuple[Cluster, Node, dict[str, Any]]
A, B = "rendered-worker-a", "rendered-worker-b"
A_CONF, B_CONF = "/etc/mcd-node/a.conf", "/etc/mcd-node/b.conf"
HELLO = "mcd-node-hello.service"
RELOAD_CONF, RESTART_CONF = "/etc/mcd-node/reload.conf", "/etc/mcd-node/restart.conf"
RELOADS = "/run/mcd-node-hello.reloads"
HELLO_UNIT = f"""[Unit]
Description=mcd node tier: a service the configs add, reload and restart
[Service]
Type=simple
ExecStart=/bin/sleep infinity
ExecReload=/bin/sh -c 'echo reloaded >> {RELOADS}'
[Install]
WantedBy=multi-user.target
"""


def config_a() -> dict[str, Any]:
    return mc_object(A, files=[ign_file(A_CONF, "a=1\n")])


def config_b() -> dict[str, Any]:
    return mc_object(
        B, files=[ign_file(A_CONF, "a=1\n"), ign_file(B_CONF, "b=1\n")], units=[unit(HELLO, HELLO_UNIT)]
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def cluster_node(request: pytest.FixtureRequest, workdir: Path) -> Iterator[Parts]:
    name = request.node.name.removeprefix("test_")
    with scenario(name, workdir, machine="mcd-" + name.split("_")[0]) as parts:
        yield parts


def assert_no_reboot_owed(node: Node) -> None:
    status = node.sh("mcd status --root-mount / -o json").stdout
    assert '"rebootOwed": null' in status, status
    jobs = node.sh("systemctl list-jobs --no-legend").stdout
    assert "reboot" not in jobs, jobs


# --- (a) -------------------------------------------------------------------------------------------


def test_a_first_boot_after_once_from(cluster_node: Parts) -> None:
    """The installer's step, then one boot: the agent finds the owed reboot done, and is Done on A."""
    cluster, node, figures = cluster_node
    first_boot(cluster, node, config_a())
    assert cluster.annotations()[STATE] == "Done"
    assert_no_reboot_owed(node)
    journal = node.agent_journal()
    assert f"node rebooted since {A} was applied: the pending reboot is done" in journal, journal
    assert "initiating reboot" not in journal, journal
    assert node.sh("systemctl is-active " + AGENT_UNIT).stdout.strip() == "active"
    figures["rss_kib"] = node.agent_rss_kib()
    assert node.boot_count == 1 and node.boots[0].exit_status is None


# --- (b) -------------------------------------------------------------------------------------------


def test_b_update_adding_a_unit_and_a_file_reboots_once(cluster_node: Parts) -> None:
    cluster, node, figures = cluster_node
    first_boot(cluster, node, config_a())
    cluster.create(config_b())
    cluster.set_desired_config(B)
    node.wait_boots(2, 120)
    cluster.wait_node(done_on(B), 120, f"Done on {B} after the reboot")
    node.wait_running()
    assert [b.exit_status for b in node.boots] == [REBOOT_EXIT, None]
    # what the node runs
    assert node.sh(f"systemctl is-enabled {HELLO}").stdout.strip() == "enabled"
    assert node.sh(f"systemctl is-active {HELLO}").stdout.strip() == "active"
    assert node.sh(f"cat {B_CONF}").stdout == "b=1\n"
    assert_no_reboot_owed(node)
    # what the API shows: the drain handshake both ways, Working then Done, the reboot events
    a = cluster.annotations()
    # (the first boot's Done asks for the uncordon of A too, as upstream's first run does)
    drains = cluster.drains_answered
    assert drains == [f"uncordon-{A}", f"drain-{B}", f"uncordon-{B}"], drains
    assert not cluster.seen[-1].unschedulable
    assert a.get("machineconfiguration.openshift.io/post-config-action", "") == ""
    assert cluster.states()[-2:] == ["Working", "Done"], cluster.states()
    assert cluster.wait_event("Reboot", B) == [f"Node will reboot into config {B}"]
    cluster.wait_event("NodeDone", f"currentConfig {B} to Done")
    assert cluster.errors == []
    figures["rss_kib"] = node.agent_rss_kib()
    assert node.boot_count == 2


# --- (c) and (e) ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A node on A whose managed file is edited by hand inside it, then put back.

    Module-scoped: (c) asserts what the API showed, (e) what journald kept, of the same run. The
    node is stopped before the tests look (two nodes at once would share the agent's metrics port)."""
    workdir = tmp_path_factory.mktemp("drift")
    with scenario("c_hand_edit_then_put_back", workdir, machine="mcd-c") as (cluster, node, figures):
        first_boot(cluster, node, config_a())
        # the monitor's watches are in place once it says so (after Done): an edit before that
        # would only be seen by the next full check
        cluster.wait_event("ConfigDriftMonitorStarted", f"watching against {A}")
        node.sh(f"echo 'b=2' >> {A_CONF}")
        degraded = cluster.wait_node(
            lambda a: a.get(STATE) == "Degraded" and A_CONF in a.get(REASON, ""), 30, "Degraded on the file"
        )
        node.sh(f"printf 'a=1\\n' > {A_CONF}")
        done = cluster.wait_node(done_on(A), 60, "Done again once the file is put back")
        figures["rss_kib"] = node.agent_rss_kib()
        seen = {
            "degraded": degraded, "done": done, "states": cluster.states(),
            "drift_events": cluster.wait_event("ConfigDriftDetected", A_CONF),
            "err_journal": node.agent_journal("-p", "err"),
            "journal": node.agent_journal(),
            "node": node,
        }  # fmt: skip
    return seen


def test_c_hand_edit_degrades_naming_the_file_and_putting_it_back_is_done(drifted: dict[str, Any]) -> None:
    assert drifted["degraded"][REASON] == f'content mismatch for file "{A_CONF}"', drifted["degraded"]
    assert drifted["done"][REASON] == ""
    assert drifted["states"][-3:] == ["Done", "Degraded", "Done"], drifted["states"]
    assert any(A_CONF in m for m in drifted["drift_events"]), drifted["drift_events"]
    assert [b.exit_status for b in drifted["node"].boots] == [0]  # one boot, ended by the test


def test_e_agent_errors_reach_journald_at_priority_err(drifted: dict[str, Any]) -> None:
    assert f"config drift detected on {A_CONF}" in drifted["journal"]
    assert f"config drift detected on {A_CONF}" in drifted["err_journal"], drifted["err_journal"]


# --- (d) -------------------------------------------------------------------------------------------


def config_d(name: str, reload_text: str, restart_text: str) -> dict[str, Any]:
    return mc_object(
        name,
        files=[
            ign_file(A_CONF, "a=1\n"),
            ign_file(RELOAD_CONF, reload_text),
            ign_file(RESTART_CONF, restart_text),
        ],
        units=[unit(HELLO, HELLO_UNIT)],
    )


def machineconfiguration() -> dict[str, Any]:
    """The cluster's node disruption policy: one file reloads the service, one restarts it."""
    files = [
        {"path": RELOAD_CONF, "actions": [{"type": "Reload", "reload": {"serviceName": HELLO}}]},
        {"path": RESTART_CONF, "actions": [{"type": "Restart", "restart": {"serviceName": HELLO}}]},
    ]
    return {
        "apiVersion": "operator.openshift.io/v1",
        "kind": "MachineConfiguration",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "nodeDisruptionPolicy": {"files": files}},
    }


def test_d_rebootless_updates_reload_and_restart_a_real_unit(cluster_node: Parts) -> None:
    cluster, node, figures = cluster_node
    cluster.create(machineconfiguration())
    first_boot(cluster, node, config_d("rendered-worker-d0", "r=0\n", "s=0\n"))
    assert node.sh(f"systemctl is-active {HELLO}").stdout.strip() == "active"
    invocation = node.sh(f"systemctl show -P InvocationID {HELLO}").stdout.strip()

    # reload.conf changes: the service is reloaded over D-Bus (its ExecReload ran), not restarted
    cluster.create(config_d("rendered-worker-d1", "r=1\n", "s=0\n"))
    cluster.set_desired_config("rendered-worker-d1")
    cluster.wait_node(done_on("rendered-worker-d1"), 60, "Done on d1")
    assert node.sh(f"cat {RELOADS}").stdout == "reloaded\n"
    assert node.sh(f"systemctl show -P InvocationID {HELLO}").stdout.strip() == invocation
    reloads = cluster.wait_event("ServiceReload", "mcd-node-hello")
    # upstream names the service as the policy does
    assert reloads == [f"Config changes do not require reboot. Service {HELLO} was reloaded."], reloads

    # restart.conf changes: the service is restarted (a new invocation)
    cluster.create(config_d("rendered-worker-d2", "r=1\n", "s=1\n"))
    cluster.set_desired_config("rendered-worker-d2")
    cluster.wait_node(done_on("rendered-worker-d2"), 60, "Done on d2")
    deadline_poll(
        "a new invocation of the service",
        lambda: node.sh(f"systemctl show -P InvocationID {HELLO}").stdout.strip() not in ("", invocation),
        10,
    )  # fmt: skip
    assert node.sh(f"systemctl is-active {HELLO}").stdout.strip() == "active"
    restarts = cluster.wait_event("ServiceRestart", "mcd-node-hello")
    want = f"Config changes do not require reboot. Service {HELLO} was restarted."
    assert restarts == [want], restarts
    assert cluster.drains_answered == [] or all(d.startswith("uncordon-") for d in cluster.drains_answered)
    figures["rss_kib"] = node.agent_rss_kib()
    assert node.boot_count == 1 and node.boots[0].exit_status is None


# --- (f) -------------------------------------------------------------------------------------------

# the names mcd's atomic writes give their temp files (mcd/host/atomicfs.py _temp_name)
TEMP_FILES = r"find /etc /home /var -xdev -regextype posix-extended -regex '.*/\.[^/]+\.[0-9a-f]{16}\.tmp'"
STATE_RECORDS = "/etc/machine-config-daemon/pendingconfig /etc/machine-config-daemon/txn.json"


def check_disk(node: Node) -> dict[str, Any]:
    """`mcd check-disk` inside the node, against the config recorded there."""
    out: dict[str, Any] = json.loads(node.sh("mcd check-disk --root-mount / -o json", check=False).stdout)
    return out


def test_f_systemctl_stop_mid_update_then_start_converges(cluster_node: Parts) -> None:
    """`systemctl stop` while the agent waits inside an update (its drain request held back by the
    controller): the unit stops by itself, well within TimeoutStopSec, the root is exactly in A
    with no update record or temp file left, and after `systemctl start` the update completes."""
    cluster, node, figures = cluster_node
    first_boot(cluster, node, config_a())
    cluster.hold_drains = True
    cluster.create(config_b())
    cluster.set_desired_config(B)
    asked = f"drain-{B}"
    cluster.wait_node(
        lambda a: a.get(STATE) == "Working" and a.get(DESIRED_DRAIN) == asked, 60, "the drain asked"
    )
    timeout_stop = node.unit_show("TimeoutStopUSec")
    assert timeout_stop == "10min", timeout_stop
    started = time.monotonic()
    node.sh(f"systemctl stop {AGENT_UNIT}", timeout=660)
    figures["stop_seconds"] = stopped_in = round(time.monotonic() - started, 1)
    # stopped by itself (SIGTERM, exit 0), not killed at the end of TimeoutStopSec
    assert node.unit_show("ActiveState") == "inactive"
    assert (node.unit_show("Result"), node.unit_show("ExecMainCode"), node.unit_show("ExecMainStatus")) == (
        "success", "1", "0",
    ), node.agent_journal("-n", "30")  # fmt: skip
    assert stopped_in < 60, stopped_in
    cluster.wait_event("GotSigtermDuringUpdate", "actively updating")
    # the root: exactly the old config, nothing of the new one, no record or temp file of the update
    disk = check_disk(node)
    assert (disk["config"], disk["clean"]) == (A, True), disk
    assert node.sh(f"ls {STATE_RECORDS} {B_CONF} 2>/dev/null", check=False).stdout == ""
    assert node.sh(f"systemctl cat {HELLO}", check=False).returncode != 0
    assert node.sh(TEMP_FILES).stdout == ""
    # the API: no failure reported, the update simply not done yet
    a = cluster.annotations()
    assert (a[STATE], a[CURRENT], a.get(REASON, "")) == ("Working", A, ""), a
    assert node.boot_count == 1

    node.sh(f"systemctl start {AGENT_UNIT}")
    cluster.release_drains()
    node.wait_boots(2, 120)
    cluster.wait_node(done_on(B), 120, f"Done on {B} after the restart and the reboot")
    node.wait_running()
    assert [b.exit_status for b in node.boots] == [REBOOT_EXIT, None]
    disk = check_disk(node)
    assert (disk["config"], disk["clean"]) == (B, True), disk
    assert node.sh(f"ls {STATE_RECORDS} 2>/dev/null", check=False).stdout == ""
    assert node.sh(TEMP_FILES).stdout == ""
    drains = cluster.drains_answered
    assert drains == [f"uncordon-{A}", f"drain-{B}", f"uncordon-{B}"], drains
    assert cluster.errors == []
    figures["rss_kib"] = node.agent_rss_kib()


# --- (g) -------------------------------------------------------------------------------------------

# the unit's WatchdogSec (5 min), shortened for the test
WATCHDOG_DROPIN = "[Service]\nWatchdogSec=6s\n"


def test_g_the_watchdog_restarts_a_hung_agent(cluster_node: Parts) -> None:
    """The agent's process stopped (SIGSTOP from outside, through nsenter): it sends no more
    WATCHDOG=1, systemd aborts it (Python prints its threads' stacks) and restarts it, and the new
    process reports Done again."""
    cluster, node, figures = cluster_node
    node.add_dropin("50-node-test-watchdog.conf", WATCHDOG_DROPIN)
    first_boot(cluster, node, config_a())
    assert node.unit_show("WatchdogUSec") == "6s"
    hung = node.unit_show("MainPID")
    assert node.unit_show("NRestarts") == "0"
    node.sh(f"kill -STOP {hung}")

    def restarted() -> str | None:
        pid = node.unit_show("MainPID")
        running = node.unit_show("SubState") == "running"
        return pid if running and pid not in ("0", hung) else None

    new = deadline_poll("a new agent process", restarted, 60, 0.5)
    assert node.unit_show("NRestarts") == "1"
    journal = node.agent_journal()
    assert f"{AGENT_UNIT}: Watchdog timeout (limit 6s)!" in journal, journal
    assert "Fatal Python error: Aborted" in journal, journal  # PYTHONFAULTHANDLER=1: the stacks
    assert "Thread 0x" in journal, journal
    # the new process synced: Done on A in its own log, a second NodeDone
    done_line = f"node {cluster.node} is in config {A}: Done"
    new_log = f"journalctl -b _PID={new} -o cat"
    deadline_poll("the new process's Done", lambda: done_line in node.sh(new_log).stdout, 60, 0.5)
    deadline_poll("a second NodeDone", lambda: len(cluster.event_messages("NodeDone")) >= 2, 30, 0.3)
    assert done_on(A)(cluster.annotations())
    assert node.boot_count == 1 and node.boots[0].exit_status is None
    figures["rss_kib"] = node.agent_rss_kib()


# --- (h) -------------------------------------------------------------------------------------------

SSH_ANNOTATION = "machineconfiguration.openshift.io/ssh"
NEW_SESSION = "8d45620c1a4348dbb17410da57c60c66"  # logind's "New session" message id


def test_h_an_ssh_login_marks_the_node_accessed(cluster_node: Parts, workdir: Path) -> None:
    """A config gives core an SSH key; a real login over ssh to the node's sshd is a logind session
    in the node's journal, which the agent's login monitor reads: `ssh=accessed` on the node."""
    cluster, node, figures = cluster_node
    key = workdir / "id_ed25519"
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "mcd-node-test", "-f", str(key)]
    subprocess.run(keygen, check=True, capture_output=True)
    public = key.with_suffix(".pub").read_text().strip()
    first_boot(cluster, node, mc_object(A, files=[ign_file(A_CONF, "a=1\n")], ssh_keys=[public]))
    assert SSH_ANNOTATION not in cluster.annotations()
    keys = "/home/core/.ssh/authorized_keys.d/ignition"
    assert node.sh(f"stat -c '%U %a' {keys}").stdout.strip() == "core 600"
    assert node.sh(f"cat {keys}").stdout == public + "\n"
    login = subprocess.run(
        ["ssh", "-F", "/dev/null", "-i", str(key), "-p", str(node.ssh_port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=10",
         "core@127.0.0.1", "id -un; cat /proc/sys/kernel/random/boot_id"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert login.returncode == 0, login.stderr
    boot_id = node.sh("cat /proc/sys/kernel/random/boot_id").stdout
    assert login.stdout == "core\n" + boot_id, login.stdout  # the node's sshd, not the host's
    sessions = node.sh(f"journalctl -b -u systemd-logind MESSAGE_ID={NEW_SESSION} -o cat").stdout
    assert "of user core." in sessions, sessions
    cluster.wait_node(lambda a: a.get(SSH_ANNOTATION) == "accessed", 30, "ssh=accessed")
    cluster.wait_event("SSHAccessed", "accessed over SSH")
    assert done_on(A)(cluster.annotations())
    assert node.boot_count == 1
    figures["rss_kib"] = node.agent_rss_kib()
