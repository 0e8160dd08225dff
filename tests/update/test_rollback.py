"""A failed update leaves the node in the old config: files, units, links, keys, OS deployments.

CoreOS sandbox roots with the rpm-ostree stand-in (tests/standins/rpm-ostree) found on PATH as
`rpm-ostree`, as `mcd start` runs it; failures are injected with RPMOSTREE_STANDIN_FAIL, with a
unit systemctl refuses to enable, or with a fake `systemctl` earlier on PATH.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from builders import data_url, mc_object
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner
from trees import Tree, walk

import mcd.host.wiring
from mcd.cli.main import main
from mcd.cli.oncefrom import run_once_from
from mcd.host.root import HostRoot
from mcd.host.rpmostree import RpmOstree
from mcd.host.runner import SubprocessRunner
from mcd.update.transaction import Host, UpdateError

pytestmark = pytest.mark.allow_commands

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
UNITS = "/etc/systemd/system"
TXN = "/etc/machine-config-daemon/txn.json"
IMAGE_A = "quay.io/openshift/os@sha256:" + "a" * 64
IMAGE_B = "quay.io/openshift/os@sha256:" + "b" * 64
RETRY_DELAYS = (5.0, 10.0)


def service(text: str, install: str = "[Install]\nWantedBy=multi-user.target\n") -> str:
    return f"[Unit]\nDescription={text}\n[Service]\nExecStart=/bin/true\n{install}"


def config_a() -> dict[str, Any]:
    files: list[dict[str, Any]] = [
        {"path": "/etc/chrony.conf", "mode": 0o644, "contents": {"source": data_url("server a\n")}},
        {"path": "/etc/shared.conf", "mode": 0o600, "contents": {"source": data_url("shared A\n")}},
        {"path": "/etc/a.d/a.conf", "user": {"name": "core"}, "contents": {"source": data_url("a\n")}},
    ]
    units = [
        {
            "name": "hello.service",
            "enabled": True,
            "contents": service("hello"),
            "dropins": [{"name": "10-a.conf", "contents": "[Service]\nEnvironment=A=1\n"}],
        },
        {"name": "masked.service", "mask": True},
    ]
    return mc_object(
        "rendered-a",
        files=files,
        units=units,
        ssh_keys=["ssh-ed25519 AAAA a@example"],
        osImageURL=IMAGE_A,
        kernelArguments=["a=1", "nosmt"],
    )


def config_b(extra_units: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    files: list[dict[str, Any]] = [
        {"path": "/etc/shared.conf", "mode": 0o644, "contents": {"source": data_url("shared B\n")}},
        {"path": "/etc/b.d/b.conf", "contents": {"source": data_url("b\n")}},
    ]
    units = [
        {
            "name": "hello.service",
            "enabled": False,
            "contents": service("hello B"),
            "dropins": [{"name": "20-b.conf", "contents": "[Service]\nEnvironment=B=1\n"}],
        },
        {"name": "b.service", "enabled": True, "contents": service("b")},
        {"name": "masked.service", "mask": False},
        *(extra_units or []),
    ]
    return mc_object(
        "rendered-b",
        files=files,
        units=units,
        ssh_keys=["ssh-ed25519 BBBB b@example"],
        osImageURL=IMAGE_B,
        kernelArguments=["b=2", "nosmt"],
    )


def _diff(got: Tree, want: Tree) -> str:
    lines = [
        f"{p}: got {got.get(p)!r:.100} want {want.get(p)!r:.100}"
        for p in sorted(set(got) | set(want))
        if got.get(p) != want.get(p)
    ]
    return "\n".join(lines[:30])


class Node:
    """A CoreOS sandbox root, its stand-in state and the CLI run in-process against it."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
        self.tmp = tmp_path
        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.root = make_sandbox_root(tmp_path / "root", coreos=True)
        self.state = tmp_path / "rpm-ostree.json"
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        (self.bin / "rpm-ostree").symlink_to(STANDIN)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(self.state))
        monkeypatch.delenv("RPMOSTREE_STANDIN_FAIL", raising=False)
        # `mcd start` builds its own RpmOstree: keep its rebase retries, record the waits instead
        self.sleeps: list[float] = []
        monkeypatch.setattr(
            mcd.host.wiring,
            "RpmOstree",
            functools.partial(RpmOstree, retry_delays=RETRY_DELAYS, sleep=self.sleeps.append),
        )

    def config(self, obj: dict[str, Any]) -> str:
        path = self.tmp / f"{obj['metadata']['name']}.json"
        path.write_text(json.dumps(obj))
        return str(path)

    def cli(self, *argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--root-mount", str(self.root)])
        out, err = self.capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    def start(self, obj: dict[str, Any]) -> tuple[int, str, str]:
        return self.cli("start", "--once-from", self.config(obj), "--skip-reboot")

    def reboot(self) -> None:
        SubprocessRunner().run(["rpm-ostree", "standin-reboot"])

    def standin(self) -> dict[str, Any]:
        state: dict[str, Any] = json.loads(self.state.read_text())
        return state

    def deployments(self) -> list[tuple[str, bool, bool, tuple[str, ...]]]:
        return [
            (d["container-image-reference"], d["booted"], d["staged"], tuple(d["_kargs"]))
            for d in self.standin()["deployments"]
        ]

    def calls(self) -> list[list[str]]:
        return [c["argv"] for c in self.standin()["standin"]["calls"]]


@pytest.fixture
def node_in_a(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Node:
    """A node that applied A and rebooted into it."""
    node = Node(tmp_path, monkeypatch, capsys)
    code, _, err = node.start(config_a())
    assert code == 0, err
    node.reboot()
    assert node.deployments()[0][:3] == (f"ostree-unverified-registry:{IMAGE_A}", True, False)
    assert node.cli("check-disk")[0] == 0
    return node


def assert_back_in_a(node: Node, before: Tree, deployments: Any) -> None:
    after = walk(node.root)
    assert TXN not in after
    # every file, link, key, record and directory is A's: nothing B created stays
    assert after == before, _diff(after, before)
    assert node.deployments() == deployments  # no staged deployment left
    node.monkeypatch.delenv("RPMOSTREE_STANDIN_FAIL", raising=False)  # check-disk runs `kargs`
    code, out, _ = node.cli("check-disk")
    assert (code, out) == (0, "on-disk state matches rendered-a\n")


def test_failed_rebase_rolls_everything_back(node_in_a: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    node = node_in_a
    before, deployments, calls = walk(node.root), node.deployments(), len(node.calls())
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL", "rebase")
    code, out, err = node.start(config_b())
    assert (code, out) == (1, "")
    rebase = f"rpm-ostree rebase --experimental ostree-unverified-registry:{IMAGE_B}"
    assert err.splitlines()[-1] == (
        f"mcd: update to rendered-b failed and was rolled back: failed to update OS to {IMAGE_B} after "
        f"retries: command failed: {rebase} (exit 1): "
        "error: injected failure of 'rebase' (RPMOSTREE_STANDIN_FAIL): timed out waiting for the condition"
    )
    assert node.sleeps == list(RETRY_DELAYS)
    rebase_argv = ["rebase", "--experimental", f"ostree-unverified-registry:{IMAGE_B}"]
    # (the booted deployment is read first: the OS step is planned from it)
    assert node.calls()[calls:] == [
        ["status", "--json"],
        ["cleanup", "-p"],
        ["--version"],
        *[rebase_argv] * 3,
        ["cleanup", "-p"],
    ]
    assert_back_in_a(node, before, deployments)


def test_failed_kargs_discards_the_staged_rebase(node_in_a: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rebase is staged before the kargs command fails: the rollback must drop it."""
    node = node_in_a
    before, deployments, calls = walk(node.root), node.deployments(), len(node.calls())
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL", "kargs")
    code, _, err = node.start(config_b())
    assert code == 1
    assert err.startswith("mcd: update to rendered-b failed and was rolled back: ")
    assert err == (
        "mcd: update to rendered-b failed and was rolled back: command failed: rpm-ostree kargs "
        "--delete-if-present=a=1 --delete-if-present=nosmt --append=b=2 --append=nosmt (exit 1): "
        "error: injected failure of 'kargs' (RPMOSTREE_STANDIN_FAIL)\n"
    )
    new_calls = node.calls()[calls:]
    assert new_calls[-3][0] == "rebase"
    assert new_calls[-2][0] == "kargs"
    assert new_calls[-1] == ["cleanup", "-p"]
    assert_back_in_a(node, before, deployments)


def test_unit_systemctl_refuses_to_enable_rolls_back_files(node_in_a: Node) -> None:
    """A unit whose [Install] systemctl rejects fails the units step; files written before it go back."""
    node = node_in_a
    before, deployments, calls = walk(node.root), node.deployments(), len(node.calls())
    bad = {
        "name": "bad-alias.service",
        "enabled": True,
        "contents": service("bad", "[Install]\nAlias=x.socket\n"),
    }
    code, _, err = node.start(config_b([bad]))
    assert code == 1
    # systemctl's whole output is quoted: it enabled b.service before refusing the alias
    assert err.startswith("mcd: update to rendered-b failed and was rolled back: error enabling units: ")
    # (newlines in it escaped: one message, one line)
    assert err.endswith("\\nFailed to enable unit, cannot alias bad-alias.service as x.socket.\n")
    assert node.calls()[calls:] == [["status", "--json"]]  # read for the plan; the OS step never ran
    assert_back_in_a(node, before, deployments)


def test_failing_systemctl_rolls_back_files(node_in_a: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    """systemctl itself fails to enable B's unit (a fake one first on PATH): files written go back."""
    node = node_in_a
    real = shutil.which("systemctl")
    assert real is not None
    fake = node.bin / "systemctl"
    fake.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" enable "*" b.service "*|*" enable b.service "*)\n'
        '  echo "Failed to enable unit: Transport endpoint is not connected" >&2; exit 1;;\n'
        "esac\n"
        f'exec {real} "$@"\n'
    )
    fake.chmod(0o755)
    before, deployments = walk(node.root), node.deployments()
    code, _, err = node.start(config_b())
    assert code == 1
    assert err.splitlines()[-1] == (
        "mcd: update to rendered-b failed and was rolled back: error enabling units: "
        "Failed to enable unit: Transport endpoint is not connected"
    )
    assert_back_in_a(node, before, deployments)
    # once systemctl works again the same update goes through
    fake.unlink()
    code, _, err = node.start(config_b())
    assert code == 0, err
    node.reboot()
    assert node.cli("check-disk")[1] == "on-disk state matches rendered-b\n"


# --- a rollback that fails itself (RecordingRunner, no real process) -----------------------------------


def _b_with_a_unit(tmp_path: Path, file: str) -> Path:
    """rendered-b: `file` and an enabled unit u.service, written as b.json."""
    obj = mc_object(
        "rendered-b",
        files=[{"path": file, "contents": {"source": data_url("b\n")}}],
        units=[{"name": "u.service", "enabled": True, "contents": service("u")}],
    )
    config = tmp_path / "b.json"
    config.write_text(json.dumps(obj))
    return config


def _failing_rollback(tmp_path: Path) -> tuple[Path, str, UpdateError]:
    """Enabling the new unit fails, and so does disabling it again during the rollback."""
    root = make_sandbox_root(tmp_path / "root")
    config = _b_with_a_unit(tmp_path, "/etc/b.conf")
    flag = f"--root={root.resolve()}"
    # the link a half-done enable leaves: without one, the rollback's disable would have nothing
    # to remove and would not run at all
    wants = root / UNITS.lstrip("/") / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    (wants / "u.service").symlink_to(f"{UNITS}/u.service")
    runner = RecordingRunner()
    runner.expect(("systemctl", flag, "enable", "u.service"), 1, "", "Failed to enable unit: boom\n", times=1)
    runner.expect(("systemctl", flag, "preset", "u.service"), times=1)
    runner.expect(
        ("systemctl", flag, "disable", "u.service"), 1, "", "Failed to disable unit: bus gone\n", times=1
    )
    with pytest.raises(UpdateError) as info:
        run_once_from(Host.for_root(HostRoot(root), runner), str(config), skip_reboot=True)
    assert runner.pending() == []
    return root, str(config), info.value


def test_a_failed_rollback_keeps_the_record_and_the_next_start_converges(tmp_path: Path) -> None:
    root, config, error = _failing_rollback(tmp_path)
    assert str(error) == (
        "update to rendered-b failed: error rolling back files writes: [error disabling unit: Failed to "
        "disable unit: bus gone, error enabling units: Failed to enable unit: boom]"
    )
    assert (root / TXN.lstrip("/")).exists()
    # systemctl works again: the next start finishes the recorded update first, then has nothing to do
    runner = RecordingRunner().expect(("systemctl", f"--root={root.resolve()}"), stdout="enabled\n")
    outcome = run_once_from(Host.for_root(HostRoot(root), runner), config, skip_reboot=True)
    # nothing left to write; only the reboot rendered-b needs (skipped here) is still owed
    assert outcome.notes == ("reboot still pending",)
    assert not (root / TXN.lstrip("/")).exists()
    assert (root / "etc" / "b.conf").read_text() == "b\n"
    assert json.loads((root / "etc/machine-config-daemon/currentconfig").read_text())["metadata"] == {
        "name": "rendered-b"
    }


def test_a_failed_rollback_names_the_original_failure(tmp_path: Path) -> None:
    _, _, error = _failing_rollback(tmp_path)
    assert "error enabling units: Failed to enable unit: boom" in str(error)
    assert "Failed to disable unit: bus gone" in str(error)


def test_a_rolled_back_rebase_leaves_the_root_exactly_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing the failed update created stays: not the SSH key file and its directories (the old
    config had no keys), not the directories of new files, dropins or their stamps, no unit link."""
    node = Node(tmp_path, monkeypatch, capsys)
    a = config_a()
    del a["spec"]["config"]["passwd"]
    code, _, err = node.start(a)
    assert code == 0, err
    node.reboot()
    assert not (node.root / "home/core/.ssh").exists()
    before, deployments = walk(node.root), node.deployments()
    monkeypatch.setenv("RPMOSTREE_STANDIN_FAIL", "rebase")
    assert node.start(config_b())[0] == 1
    after = walk(node.root)
    assert after == before, _diff(after, before)
    assert node.deployments() == deployments


# --- a run killed mid-update, whose re-run fails and rolls back -------------------------------------


def test_a_rollback_after_a_restart_removes_the_directories_the_killed_run_made(tmp_path: Path) -> None:
    """The directories an update creates are recorded with it: the run killed after writing
    into new ones, the restart re-runs the update, fails where the first would have, and the
    rollback leaves the root exactly as before, those directories gone."""
    from killing import in_child

    from mcd.host import failpoints

    root = make_sandbox_root(tmp_path / "root")
    config = _b_with_a_unit(tmp_path, "/etc/new/deeper/b.conf")
    first = tmp_path / "a.json"
    first.write_text(json.dumps(mc_object("rendered-a")))
    run_once_from(Host.for_root(HostRoot(root), RecordingRunner()), str(first), skip_reboot=True)
    before = walk(root)
    flag = f"--root={root.resolve()}"

    def killed_after_the_files() -> None:
        def hook(name: str) -> None:
            if name == "step write-files done":
                os.kill(os.getpid(), 9)

        failpoints.install(hook)
        run_once_from(Host.for_root(HostRoot(root), RecordingRunner()), str(config), skip_reboot=True)

    assert in_child(killed_after_the_files, None) == 9
    assert (root / "etc/new/deeper/b.conf").exists() and (root / TXN.lstrip("/")).exists()
    runner = RecordingRunner()
    runner.expect(("systemctl", flag, "enable", "u.service"), 1, "", "Failed to enable unit: boom\n", times=1)
    runner.expect(("systemctl", flag, "preset", "u.service"), times=1)
    with pytest.raises(UpdateError, match="error enabling units"):
        run_once_from(Host.for_root(HostRoot(root), runner), str(config), skip_reboot=True)
    assert runner.pending() == []
    assert walk(root) == before
