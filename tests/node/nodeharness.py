"""The real-node tier's harness: a Debian root booted by systemd-nspawn, `mcd-sim sim-cluster`, kubectl.

* `base_root()` builds (once, cached by its package list) a Debian bookworm root with mmdebstrap.
* `Node` is one copy of it, installed as a node is: the installer's step
  (`mcd start --once-from A --root-mount NODE --skip-reboot`), the repo's systemd unit, the
  kubelet's kubeconfig, `/usr/local/bin/mcd` (the checkout's `.venv/bin/mcd`, shared read-only
  with the interpreter). It boots with a real systemd as PID 1 under a supervisor that starts
  nspawn again when it exits 133 (a reboot inside), as systemd-nspawn@.service does, and counts
  the boots. `Node.sh` runs a command inside (nsenter into PID 1's namespaces).
* `Cluster` is `mcd-sim sim-cluster` in its own process with real kubectl as the client, and plays
  the machine-config-controller with kubectl: it creates rendered MachineConfigs, sets
  `desiredConfig`, and answers the daemon's drain handshake (cordon/uncordon, then
  `lastAppliedDrain`) from a `kubectl get node -w` stream.

Nothing here sleeps to synchronise: every wait is on a condition (the node stream, a process)
or a poll with a deadline.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

REPO = Path(__file__).resolve().parents[2]
MCD = REPO / ".venv" / "bin" / "mcd"
MCD_SIM = REPO / ".venv" / "bin" / "mcd-sim"
UNIT = REPO / "systemd" / "machine-config-daemon.service"
CACHE = Path(os.environ.get("MCD_NODE_CACHE", "/var/tmp/mcd-node-cache"))

SUITE = "bookworm"
# what the node runs: systemd as PID 1 and D-Bus (the agent's systemd calls go over the bus),
# sshd as on a real node (libpam-systemd: an SSH login is a logind session, whose "New session"
# journal entry the agent's login monitor reads), python3 for the shared libraries the agent's
# interpreter and its C extensions (dbus-python, systemd-python) load; procps for ps in a
# debugging session
PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "openssh-server", "libpam-systemd", "python3", "libdbus-1-3",
    "libglib2.0-0", "libsystemd0", "procps",
)  # fmt: skip
# bump when the root's preparation below changes (part of the cache key)
ROOT_RECIPE = 2
CORE_USER = "core"
SSHD_DROPIN = "etc/ssh/sshd_config.d/50-mcd-node.conf"

PREFIX = "machineconfiguration.openshift.io/"
CURRENT, DESIRED, STATE, REASON = (PREFIX + k for k in ("currentConfig", "desiredConfig", "state", "reason"))
DESIRED_DRAIN, LAST_DRAIN = PREFIX + "desiredDrain", PREFIX + "lastAppliedDrain"
POST_CONFIG_ACTION = PREFIX + "post-config-action"
NODE_NAME = "node-0"
AGENT_UNIT = "machine-config-daemon.service"
# the boot id the node's systemd-nspawn gave it, kept where the agent's sandbox can bind it back
BOOT_ID_UNIT = "mcd-node-boot-id.service"
BOOT_ID_COPY = "/run/mcd-node-boot-id"
REBOOT_EXIT = 133  # systemd-nspawn's exit status when the container rebooted


class NodeTestError(AssertionError):
    """The node or the cluster did not get where the test waited for it to get."""


def deadline_poll(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    """`check()`'s first truthy value, asked every `interval` s until `timeout` s have passed."""
    end = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise NodeTestError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# --- the cached base root --------------------------------------------------------------------


def _base_path() -> tuple[Path, str]:
    """Where the root for this package list and recipe is cached, and its key."""
    key = hashlib.sha256(json.dumps([SUITE, "apt", sorted(PACKAGES), ROOT_RECIPE]).encode()).hexdigest()[:16]
    return CACHE / f"{SUITE}-{key}", key


def base_root() -> Path:
    """The Debian root every scenario copies; built on first use, then reused while the key holds."""
    root, key = _base_path()
    if (root / ".mcd-node-complete").exists():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time; a second runner reuses the first's
        if (root / ".mcd-node-complete").exists():
            return root
        shutil.rmtree(root, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=CACHE))
        try:
            log = CACHE / f"{root.name}.build.log"
            with log.open("wb") as out:
                include = "--include=" + ",".join(PACKAGES)
                argv = ["mmdebstrap", "--variant=apt", include, SUITE, str(tmp / "root")]
                # stdin closed: mmdebstrap reads sources lines from a stdin that is not a terminal
                proc = subprocess.run(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    check=False, timeout=900,
                )  # fmt: skip
            if proc.returncode != 0:
                raise NodeTestError(f"mmdebstrap failed ({proc.returncode}); see {log}")
            _prepare_base(tmp / "root")
            (tmp / "root" / ".mcd-node-complete").write_text(key + "\n")
            os.rename(tmp / "root", root)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return root


def _prepare_base(root: Path) -> None:
    # a persistent journal: every boot's log stays readable from outside (journalctl --root)
    (root / "var/log/journal").mkdir(parents=True, exist_ok=True)
    # the node has no console login to wait for, and no apt timers to run
    for unit in ("apt-daily.timer", "apt-daily-upgrade.timer", "console-getty.service"):
        (root / "etc/systemd/system" / unit).unlink(missing_ok=True)
        (root / "etc/systemd/system" / unit).symlink_to("/dev/null")
    # CoreOS's user core, whose keys a config's passwd section sets (no password: "*" is not a
    # lock, so sshd lets a key in)
    subprocess.run(
        ["useradd", f"--root={root}", "--create-home", "--shell=/bin/bash", "--password=*", CORE_USER],
        check=True, capture_output=True,
    )  # fmt: skip


# --- the interpreter the node shares -----------------------------------------------------------


@functools.cache
def shared_paths() -> tuple[Path, ...]:
    """What the node mounts read-only to run the checkout's `.venv/bin/mcd` at the same paths: the
    checkout (with its `.venv`) and the venv's base interpreter when it is not the system's."""
    out = subprocess.run(
        [str(REPO / ".venv/bin/python"), "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    base = Path(out.stdout.strip()).resolve()
    if base == Path("/usr") or base.is_relative_to(REPO):
        return (REPO,)
    return (REPO, base)


# --- the cluster: mcd-sim sim-cluster, kubectl, the controller's part ------------------------------


@dataclass
class NodeSeen:
    """One version of the Node as the watch delivered it (annotations, cordon)."""

    annotations: dict[str, str]
    unschedulable: bool
    at: float


class Cluster:
    """`mcd-sim sim-cluster` as its own process; kubectl the only client the test uses."""

    def __init__(self, workdir: Path, node: str = NODE_NAME) -> None:
        self.workdir, self.node = workdir, node
        self.kubeconfig = workdir / "kubeconfig"
        self.home = workdir / "kubectl-home"
        self.home.mkdir(parents=True, exist_ok=True)
        self._cond = threading.Condition()
        self.seen: list[NodeSeen] = []
        self.drains_answered: list[str] = []
        # while set, drain requests (not uncordons) go unanswered: the agent waits inside its update
        self.hold_drains = False
        self._drain_lock = threading.Lock()
        self.errors: list[str] = []
        self._stopping = False
        self._server: subprocess.Popen[bytes] | None = None
        self._watch: subprocess.Popen[str] | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> Cluster:
        log = (self.workdir / "sim-cluster.log").open("wb")
        self._server = subprocess.Popen(
            [str(MCD_SIM), "sim-cluster", "--kubeconfig", str(self.kubeconfig), "--node", self.node,
             "--audit-log-path", str(self.workdir / "audit.log")],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        log.close()
        server = self._server

        def ready() -> bool:
            if server.poll() is not None:
                log = self._log("sim-cluster.log")
                raise NodeTestError(f"mcd-sim sim-cluster exited {server.returncode}: {log}")
            return self.kubeconfig.exists()

        deadline_poll("mcd-sim sim-cluster's kubeconfig", ready, 30)
        self._thread = threading.Thread(target=self._follow, name="controller", daemon=True)
        self._thread.start()
        self.wait_node(lambda n: True, 30, "the node in the watch")
        return self

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        for proc in (self._watch, self._server):
            _terminate(proc)
        if self._thread is not None:
            self._thread.join(10)

    def _log(self, name: str) -> str:
        path = self.workdir / name
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    # kubectl

    def _env(self) -> dict[str, str]:
        """kubectl's environment: the sim's kubeconfig, a private home and discovery cache."""
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
        }

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        env = self._env()
        proc = subprocess.run(
            ["kubectl", "--cache-dir", str(self.home / "cache"), *args],
            input=stdin, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise NodeTestError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc.stdout

    def create(self, obj: dict[str, Any]) -> None:
        self.kubectl("create", "-f", "-", stdin=json.dumps(obj))

    def set_desired_config(self, name: str) -> None:
        """The controller's part: point the node at the rendered config `name`."""
        self.kubectl("annotate", "--overwrite", "node", self.node, f"{DESIRED}={name}")

    def events(self) -> list[dict[str, Any]]:
        out = self.kubectl(
            "get", "events", "-A", "--field-selector", f"involvedObject.name={self.node}", "-o", "json"
        )
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items

    def event_messages(self, reason: str) -> list[str]:
        return [str(e.get("message", "")) for e in self.events() if e.get("reason") == reason]

    def wait_event(self, reason: str, text: str, timeout: float = 30) -> list[str]:
        """The messages of `reason` once one contains `text` (the agent posts Events from a
        background thread: one may land after the annotation that follows it)."""
        found: list[str] = deadline_poll(
            f"a {reason} event with {text!r}",
            lambda: (m := self.event_messages(reason)) and any(text in x for x in m) and m,
            timeout, 0.3,
        )  # fmt: skip
        return found

    # the node stream and the controller's drain handshake

    def _follow(self) -> None:
        env = self._env()
        argv = [
            "kubectl", "--cache-dir", str(self.home / "cache"), "get", "node", self.node, "-w", "-o", "json",
        ]  # fmt: skip
        while True:
            with self._cond:
                if self._stopping:
                    return
                watch = self._watch = subprocess.Popen(
                    argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                    env=env, text=True,
                )  # fmt: skip
            assert watch.stdout is not None
            # kubectl prints each version of the node as indented JSON: a top-level object ends
            # with a line holding only "}"
            buf: list[str] = []
            for line in watch.stdout:
                buf.append(line)
                if line.rstrip("\n") == "}":
                    self._saw(json.loads("".join(buf)))
                    buf = []
            watch.stdout.close()
            watch.wait()
            with self._cond:
                # the watch ended (server restarted, stream cut): follow again, not in a busy loop
                if not self._stopping:
                    self._cond.wait(1.0)

    def _saw(self, obj: dict[str, Any]) -> None:
        annotations = dict(obj.get("metadata", {}).get("annotations") or {})
        seen = NodeSeen(annotations, bool((obj.get("spec") or {}).get("unschedulable")), time.monotonic())
        with self._cond:
            self.seen.append(seen)
            self._cond.notify_all()
        self._answer_drain(annotations)

    def _answer_drain(self, annotations: dict[str, str]) -> None:
        with self._drain_lock:  # the watch thread and release_drains
            want, done = annotations.get(DESIRED_DRAIN, ""), annotations.get(LAST_DRAIN, "")
            if self.hold_drains and want.startswith("drain-"):
                return
            if want and want != done and (not self.drains_answered or self.drains_answered[-1] != want):
                # upstream's controller: cordon (and evict; the node runs no pods) or uncordon, then
                # acknowledge with lastAppliedDrain
                try:
                    self.kubectl("uncordon" if want.startswith("uncordon-") else "cordon", self.node)
                    self.kubectl("annotate", "--overwrite", "node", self.node, f"{LAST_DRAIN}={want}")
                    self.drains_answered.append(want)
                except NodeTestError as exc:
                    self.errors.append(str(exc))

    def release_drains(self) -> None:
        """Answer drain requests again, the one the node is waiting on first."""
        self.hold_drains = False
        self._answer_drain(self.annotations())

    def annotations(self) -> dict[str, str]:
        with self._cond:
            return dict(self.seen[-1].annotations) if self.seen else {}

    def wait_node(self, pred: Callable[[dict[str, str]], bool], timeout: float, what: str) -> dict[str, str]:
        """The node's annotations once `pred` holds for them (woken by each watch event)."""
        end = time.monotonic() + timeout
        with self._cond:
            while True:
                if self.seen and pred(self.seen[-1].annotations):
                    return dict(self.seen[-1].annotations)
                left = end - time.monotonic()
                if left <= 0:
                    last = self.seen[-1].annotations if self.seen else None
                    raise NodeTestError(f"timed out after {timeout:.0f} s waiting for {what}; node: {last}")
                self._cond.wait(left)

    def states(self) -> list[str]:
        """The node's state annotation as it changed, in order."""
        out: list[str] = []
        with self._cond:
            for s in self.seen:
                st = s.annotations.get(STATE, "")
                if not out or out[-1] != st:
                    out.append(st)
        return out


def done_on(config: str) -> Callable[[dict[str, str]], bool]:
    """Done in `config`, with the reason cleared (the agent's last write of a finished sync)."""

    def pred(a: dict[str, str]) -> bool:
        return (
            a.get(STATE) == "Done" and a.get(CURRENT) == config and a.get(DESIRED) == config
            and not a.get(REASON) and a.get(POST_CONFIG_ACTION, "") == ""
        )  # fmt: skip

    return pred


# --- the node ----------------------------------------------------------------------------------


@dataclass
class Boot:
    number: int
    started: float
    exit_status: int | None = None
    leader: int | None = None


@dataclass
class Node:
    """A copy of the base root installed as a node and booted by systemd-nspawn."""

    workdir: Path
    machine: str
    hostname: str = NODE_NAME
    boots: list[Boot] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root = self.workdir / "root"
        self.ssh_port = 0
        self._cond = threading.Condition()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None

    # installation (the node is not running)

    def copy_base(self) -> Node:
        subprocess.run(["cp", "-a", "--reflink=auto", str(base_root()), str(self.root)], check=True)
        (self.root / ".mcd-node-complete").unlink()
        (self.root / "etc/hostname").write_text(self.hostname + "\n")
        (self.root / "etc/machine-id").write_text(uuid.uuid4().hex + "\n")
        # the node shares the host's network: its sshd listens on loopback only, on a port free
        # now (not 22), and reads the keys where the agent writes them (CoreOS reads
        # authorized_keys.d/* through its ssh-key-dir helper)
        self.ssh_port = free_port()
        (self.root / SSHD_DROPIN).write_text(
            f"Port {self.ssh_port}\nListenAddress 127.0.0.1\n"
            "AuthorizedKeysFile .ssh/authorized_keys .ssh/authorized_keys.d/ignition\n"
        )
        self._keep_boot_id()
        return self

    def _keep_boot_id(self) -> None:
        """nspawn gives each boot its own id by mounting a file over the kernel's
        /proc/sys/kernel/random/boot_id (journald stamps entries with it). The agent's unit gets a
        fresh /proc (ProtectKernelTunables and ProtectControlGroups imply MountAPIVFS), where the
        kernel's id, the host's, shows through: the login monitor's "this boot" then matched
        nothing and the reboot record never saw a reboot. On a real host the two are the same;
        here a oneshot copies the container's id before the agent starts and a drop-in binds the
        copy back over the fresh /proc's."""
        (self.root / "etc/systemd/system" / BOOT_ID_UNIT).write_text(
            "[Unit]\nDescription=Keep the boot id nspawn gave this boot (node tier)\n"
            f"DefaultDependencies=no\nBefore={AGENT_UNIT}\n"
            f"[Service]\nType=oneshot\nRemainAfterExit=yes\n"
            f"ExecStart=/bin/cp /proc/sys/kernel/random/boot_id {BOOT_ID_COPY}\n"
        )
        self.add_dropin(
            "05-node-tier-boot-id.conf",
            f"[Unit]\nRequires={BOOT_ID_UNIT}\nAfter={BOOT_ID_UNIT}\n"
            f"[Service]\nBindReadOnlyPaths={BOOT_ID_COPY}:/proc/sys/kernel/random/boot_id\n",
        )

    def add_dropin(self, name: str, text: str, unit_name: str = AGENT_UNIT) -> None:
        """A drop-in for `unit_name` (before boot, or followed by a daemon-reload)."""
        d = self.root / "etc/systemd/system" / f"{unit_name}.d"
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)

    def install(self, config: dict[str, Any], kubeconfig: Path) -> dict[str, Any]:
        """The installer's step, the unit, the kubeconfig; returns once-from's JSON summary."""
        source = self.workdir / f"{config['metadata']['name']}.json"
        source.write_text(json.dumps(config))
        proc = subprocess.run(
            [str(MCD), "start", "--once-from", str(source), "--root-mount", str(self.root), "--skip-reboot"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise NodeTestError(f"mcd start --once-from failed ({proc.returncode}): {proc.stderr}")
        summary: dict[str, Any] = json.loads(proc.stdout)
        self.install_agent(kubeconfig)
        return summary

    def install_agent(self, kubeconfig: Path) -> None:
        """The unit (enabled), the kubelet's kubeconfig and mcd where the host install puts it;
        alone, on a node mcd never ran on (no installer's step, no state)."""
        shutil.copy(UNIT, self.root / "etc/systemd/system" / AGENT_UNIT)
        enable = ["systemctl", f"--root={self.root}", "enable", AGENT_UNIT]
        subprocess.run(enable, check=True, capture_output=True)
        kubelet = self.root / "var/lib/kubelet"
        kubelet.mkdir(parents=True, exist_ok=True)
        shutil.copy(kubeconfig, kubelet / "kubeconfig")
        # where scripts/install-host.sh puts mcd (the unit's ExecStart), and its PATH link
        for link in (self.root / "opt/mcd/bin/mcd", self.root / "usr/local/bin/mcd"):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(MCD)

    # running

    def boot(self) -> Node:
        self._thread = threading.Thread(target=self._supervise, name=f"nspawn-{self.machine}", daemon=True)
        self._thread.start()
        return self

    def _argv(self) -> list[str]:
        argv = [
            "systemd-nspawn", "-D", str(self.root), "--boot", "--register=no", "--keep-unit",
            f"--machine={self.machine}", "--console=read-only", "--link-journal=no",
        ]  # fmt: skip
        argv += [f"--bind-ro={p}" for p in shared_paths()]
        return argv

    def _supervise(self) -> None:
        """systemd-nspawn@.service's part: start the container again when it rebooted (exit 133)."""
        env = dict(os.environ, TERM="dumb", SYSTEMD_COLORS="0")
        while True:
            with self._cond:
                if self._stopping:
                    return
                boot = Boot(len(self.boots) + 1, time.monotonic())
                console = (self.workdir / f"console-{boot.number}.log").open("wb")
                self._proc = subprocess.Popen(
                    self._argv(), stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, start_new_session=True,
                )  # fmt: skip
                console.close()
                self.boots.append(boot)
                self._cond.notify_all()
                proc = self._proc
            status = proc.wait()
            with self._cond:
                boot.exit_status = status
                self._cond.notify_all()
                if status != REBOOT_EXIT:
                    return

    def _leader_of(self, boot: Boot, proc: subprocess.Popen[bytes]) -> int | None:
        """The container's PID 1 (nspawn's child that is PID 1 in its own namespace), once started."""
        if boot.leader is not None:
            return boot.leader
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            return None
        for child in children:
            with contextlib.suppress(OSError):
                status = Path(f"/proc/{child}/status").read_text()
                nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith("NSpid:")), [])
                if len(nspid) >= 2 and nspid[-1] == "1":
                    boot.leader = int(child)
                    return boot.leader
        return None

    def leader(self, timeout: float = 30) -> int:
        """PID 1 of the boot running now."""

        def find() -> int | None:
            with self._cond:
                if not self.boots or self._proc is None:
                    return None
                boot = self.boots[-1]
                if boot.exit_status is not None:
                    return None
                return self._leader_of(boot, self._proc)

        pid: int = deadline_poll(f"{self.machine}'s PID 1", find, timeout, 0.05)
        return pid

    def wait_boots(self, count: int, timeout: float) -> None:
        """Until boot number `count` has started (woken when the supervisor starts one)."""
        end = time.monotonic() + timeout
        with self._cond:
            while len(self.boots) < count:
                left = end - time.monotonic()
                if left <= 0 or (self.boots and self.boots[-1].exit_status not in (None, REBOOT_EXIT)):
                    raise NodeTestError(
                        f"{self.machine}: boot {count} did not start within {timeout:.0f} s "
                        f"(boots: {[(b.number, b.exit_status) for b in self.boots]})"
                    )
                self._cond.wait(left)

    def wait_running(self, timeout: float = 90) -> str:
        """Until this boot's start-up finished (`systemctl is-system-running --wait`)."""
        seen: list[str] = []

        def finished() -> str | None:
            # "offline" (and no answer) until PID 1 listens on its bus; --wait then blocks
            out = self.sh("systemctl is-system-running --wait", check=False, timeout=timeout)
            state = out.stdout.strip()
            seen.append(state)
            if state in ("stopping", "maintenance"):
                raise NodeTestError(f"{self.machine} did not finish booting: {state!r} {out.stderr}")
            return state if state in ("running", "degraded") else None

        state: str = deadline_poll(f"{self.machine} to finish booting (seen: {seen})", finished, timeout, 0.1)
        return state

    def sh(self, script: str, *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run `sh -c script` inside the node (every namespace of its PID 1)."""
        proc = subprocess.run(
            ["nsenter", "-t", str(self.leader()), "-a", "/bin/sh", "-c", script],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise NodeTestError(f"in {self.machine}: {script!r} exited {proc.returncode}: {proc.stderr}")
        return proc

    def agent_journal(self, *args: str) -> str:
        return self.sh(f"journalctl -b -u {AGENT_UNIT} -o cat --no-pager " + " ".join(args)).stdout

    def unit_show(self, prop: str, unit_name: str = AGENT_UNIT) -> str:
        return self.sh(f"systemctl show -P {prop} {unit_name}").stdout.strip()

    def agent_rss_kib(self) -> int:
        pid = self.sh(f"systemctl show -P MainPID {AGENT_UNIT}").stdout.strip()
        status = self.sh(f"cat /proc/{pid}/status").stdout
        return int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")))

    @property
    def boot_count(self) -> int:
        with self._cond:
            return len(self.boots)

    def stop(self) -> None:
        """Power the node off (nspawn's SIGTERM), or kill its PID 1 when that takes too long."""
        with self._cond:
            self._stopping = True
            proc = self._proc
            boot = self.boots[-1] if self.boots else None
        if proc is not None and proc.poll() is None:
            leader = self._leader_of(boot, proc) if boot is not None else None
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                if leader is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(leader, signal.SIGKILL)  # ends the container's PID namespace
                _terminate(proc)
        if self._thread is not None:
            self._thread.join(10)

    def save_journal(self) -> None:
        """Every boot's journal, as text beside the other logs (read from the root, node stopped)."""
        with (self.workdir / "journal.txt").open("w") as out:
            subprocess.run(
                ["journalctl", f"--root={self.root}", "-o", "short-monotonic", "--no-pager"],
                stdout=out, stderr=subprocess.STDOUT, check=False,
            )  # fmt: skip

    def journal_boots(self) -> int:
        """Boots the node's own journal lists (each one a new boot id)."""
        proc = subprocess.run(
            ["journalctl", f"--root={self.root}", "--list-boots", "--no-pager", "-q"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return len([ln for ln in proc.stdout.splitlines() if ln.strip()])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _terminate(proc: subprocess.Popen[Any] | None, timeout: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout)


# --- figures for the run's summary ---------------------------------------------------------------

FIGURES: list[dict[str, Any]] = []
BASE: dict[str, Any] = {}


def timed_base_root() -> Path:
    """`base_root()`, its time and whether it was built, for the summary."""
    started = time.monotonic()
    cached = (_base_path()[0] / ".mcd-node-complete").exists()
    root = base_root()
    BASE.update(root=str(root), seconds=round(time.monotonic() - started, 1), cached=cached)
    return root


@contextlib.contextmanager
def scenario(name: str, workdir: Path, machine: str) -> Iterator[tuple[Cluster, Node, dict[str, Any]]]:
    """A cluster (the stand-in) and a fresh node for one scenario; both torn down (and figures
    kept) after it."""
    with scenario_on(name, workdir, machine, lambda: Cluster(workdir).start()) as parts:
        yield parts


C = TypeVar("C", bound="Stoppable")


class Stoppable(Protocol):
    def stop(self) -> None: ...


@contextlib.contextmanager
def scenario_on(
    name: str, workdir: Path, machine: str, start_cluster: Callable[[], C]
) -> Iterator[tuple[C, Node, dict[str, Any]]]:
    """`scenario` on the cluster `start_cluster` starts (the stand-in, or a real API server)."""
    started = time.monotonic()
    cluster = start_cluster()
    node = Node(workdir, machine).copy_base()
    figures: dict[str, Any] = {"scenario": name, "workdir": str(workdir)}
    try:
        yield cluster, node, figures
    finally:
        node.stop()
        cluster.stop()
        node.save_journal()
        figures.update(
            boots=node.boot_count,
            journal_boots=node.journal_boots(),
            seconds=round(time.monotonic() - started, 1),
            exits=[b.exit_status for b in node.boots],
        )
        FIGURES.append(figures)
        shutil.rmtree(node.root, ignore_errors=True)


def first_boot(cluster: Cluster, node: Node, config: dict[str, Any]) -> None:
    """The node joins on `config`: rendered config in the API, installer's step, first boot, Done."""
    name = config["metadata"]["name"]
    cluster.create(config)
    # the controller names the pool's config on a joining node (the agent's fallback without
    # node-annotations.json sets currentConfig only, as upstream's)
    cluster.set_desired_config(name)
    summary = node.install(config, cluster.kubeconfig)
    assert summary["config"] == name and summary["reboot"] == {"required": True, "done": False}, summary
    node.boot()
    node.wait_boots(1, 30)
    node.wait_running()
    cluster.wait_node(done_on(name), 90, f"Done on {name} after the first boot")

    def node_done() -> bool:
        if node.boot_count > 1:  # the agent's first start asked for a reboot
            raise NodeTestError(f"the node rebooted after its first boot (boots: {node.boot_count})")
        return any(f"currentConfig {name} to Done" in m for m in cluster.event_messages("NodeDone"))

    deadline_poll(f"the NodeDone event for {name}", node_done, 30, 0.3)


def print_figures(write: Callable[[str], None]) -> None:
    if not FIGURES:
        return
    if BASE:
        how = "cached" if BASE["cached"] else f"built in {BASE['seconds']} s"
        write(f"node tier: base root {BASE['root']} ({how})")
    write("node tier: scenario, time, boots (counted by the supervisor / listed by the node's journal),")
    write("nspawn exit statuses (133: a reboot), the agent's RSS inside the node, logs")
    for f in FIGURES:
        rss_text = f"{f['rss_kib'] / 1024:.1f} MiB" if f.get("rss_kib") else "-"
        stop = f"  systemctl stop {f['stop_seconds']} s" if "stop_seconds" in f else ""
        write(
            f"  {f['scenario']:<52} {f['seconds']:>5.1f} s  boots {f['boots']}/{f['journal_boots']}  "
            f"exits {f['exits']}  rss {rss_text}{stop}  {f['workdir']}"
        )


def unit(name: str, text: str, enabled: bool = True) -> dict[str, Any]:
    return {"name": name, "enabled": enabled, "contents": text}


if __name__ == "__main__":  # `python tests/node/nodeharness.py`: build (or find) the cached root
    print(base_root())
    sys.exit(0)
