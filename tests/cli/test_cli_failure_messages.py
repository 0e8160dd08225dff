"""Failures as the admin reads them: which step, what the system said, what state the node is in.

Real failures where they can be had (a path too long for the kernel, a missing rpm-ostree);
a full disk is injected through the failpoint hook, raising ENOSPC where the write would fail.
Each asserts the exit code, the message, no traceback, and the root as it was (or rolled back).
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from builders import data_url, mc_object
from clirun import Run
from mcd_sim.sandbox import make_sandbox_root
from trees import Tree, walk

from mcd.host import failpoints

STANDIN = Path(__file__).resolve().parents[1] / "standins" / "rpm-ostree"
STATE = "/etc/machine-config-daemon"


@pytest.fixture
def disk_full_after() -> Iterator[Callable[[str | None], None]]:
    """Arm a full disk: the first temp file written after failpoint `after` (None: from the start)
    fails with ENOSPC, as a write(2) on a full filesystem would; later writes succeed."""

    def arm(after: str | None) -> None:
        seen, failed = after is None, False

        def hook(name: str) -> None:
            nonlocal seen, failed
            if name == after:
                seen = True
            elif seen and not failed and name == "temp file written, not renamed":
                failed = True  # once: the rollback finds room again
                raise OSError(errno.ENOSPC, "No space left on device", "/etc/.x.0123456789abcdef.tmp")

        failpoints.install(hook)

    yield arm
    failpoints.install(None)


def _outside_state(tree: Tree) -> Tree:
    return {k: v for k, v in tree.items() if not k.startswith(STATE)}


def _ignition(tmp_path: Path, path: str = "/etc/hello") -> Path:
    src = tmp_path / "hello.ign"
    doc = {
        "ignition": {"version": "3.2.0"},
        "storage": {"files": [{"path": path, "contents": {"source": data_url("hi\n")}}]},
    }
    src.write_text(json.dumps(doc))
    return src


def _mc(tmp_path: Path, **spec: object) -> Path:
    src = tmp_path / "os.json"
    obj = {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {"name": "os"},
        "spec": {"config": {"ignition": {"version": "3.2.0"}}, **spec},
    }
    src.write_text(json.dumps(obj))
    return src


def test_a_full_disk_at_the_update_record_names_it_and_changes_nothing(
    run: Run, tmp_path: Path, disk_full_after: Callable[[str | None], None]
) -> None:
    root = make_sandbox_root(tmp_path / "root")
    before = walk(root)
    disk_full_after(None)
    code, out, err = run("start", "--once-from", str(_ignition(tmp_path)), "--root-mount", str(root))
    assert (code, out) == (1, "")
    assert err == (
        "mcd: update to hello.ign failed writing the update record /etc/machine-config-daemon/pendingconfig: "
        "No space left on device: /etc/.x.0123456789abcdef.tmp; nothing was changed\n"
    )
    # the daemon's own (empty) state directory may stay; no record in it, nothing else touched
    assert _outside_state(walk(root)) == before
    assert not any((root / STATE.lstrip("/")).iterdir())


def test_a_full_disk_while_writing_files_names_the_step_and_rolls_back(
    run: Run, tmp_path: Path, disk_full_after: Callable[[str | None], None]
) -> None:
    root = make_sandbox_root(tmp_path / "root")
    before = walk(root)
    disk_full_after("transaction recorded")
    code, _, err = run("start", "--once-from", str(_ignition(tmp_path)), "--root-mount", str(root))
    assert code == 1
    assert err == (
        "mcd: update to hello.ign failed and was rolled back: write 1 file(s): /etc/hello: "
        "No space left on device: /etc/.x.0123456789abcdef.tmp\n"
    )
    # rolled back: only the (empty) state directory the record lived in is left
    assert _outside_state(walk(root)) == before


def test_a_path_too_long_for_the_kernel_is_clipped_and_changes_nothing(run: Run, tmp_path: Path) -> None:
    # a real ENAMETOOLONG: the root alone is close to PATH_MAX, the config's path takes it over
    # (an exact length, whatever tmp_path's: the sandbox's own paths must still fit)
    deep = tmp_path
    while len(str(deep)) < 3950 - 201:
        deep = deep / ("d" * 200)
    deep = deep / ("d" * (3950 - len(str(deep)) - 1))
    assert len(str(deep)) == 3950
    root = make_sandbox_root(deep)
    before = walk(root)
    code, out, err = run(
        "start", "--once-from", str(_ignition(tmp_path, "/etc/" + "n" * 250)), "--root-mount", str(root)
    )
    assert (code, out) == (1, "")
    assert err.startswith("mcd: ")
    assert "File name too long" in err
    assert "…" in err and len(err) < 700
    assert "Traceback" not in err and "Errno" not in err
    assert walk(root) == before


@pytest.mark.allow_commands
def test_a_missing_rpm_ostree_on_an_rpm_ostree_root_is_named_before_anything_is_written(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    before = walk(root)
    code, out, err = run(
        "start", "--once-from", str(_mc(tmp_path, kernelArguments=["a=b"])), "--root-mount", str(root)
    )
    assert (code, out) == (1, "")
    assert err == (
        f"mcd: rpm-ostree: command not found, but /run/ostree-booted marks {root} as an rpm-ostree system "
        "(install rpm-ostree, or remove /run/ostree-booted for a root that is not one); nothing was changed\n"
    )
    assert walk(root) == before


@pytest.mark.allow_commands
def test_os_fields_on_a_root_that_is_not_rpm_ostree_based_are_noted(run: Run, tmp_path: Path) -> None:
    root = make_sandbox_root(tmp_path / "root")
    src = str(_mc(tmp_path, kernelArguments=["a=b"], osImageURL="quay.io/x/y@sha256:" + "0" * 64))
    note = "not an rpm-ostree system (no /run/ostree-booted): osImageURL, kernelArguments not applied"
    code, out, _ = run("plan", "--root-mount", str(root), src, "-o", "text")
    assert code == 0
    assert f"note: {note}\n" in out
    code, out, _ = run("start", "--once-from", src, "--root-mount", str(root), "--skip-reboot")
    assert code == 0
    assert note in json.loads(out)["notes"]


def test_the_default_root_mount_says_which_flag_is_missing(run: Run, tmp_path: Path) -> None:
    code, out, err = run("check-disk")
    assert (code, out) == (1, "")
    hint = "give --root-mount DIR for a root other than /rootfs"
    assert err == f"mcd: --root-mount /rootfs is not a directory ({hint})\n"


def test_a_long_file_argument_is_clipped(run: Run, tmp_path: Path) -> None:
    name = str(tmp_path / ("x" * 300))
    code, out, err = run("validate", name)
    assert (code, out) == (1, "")
    assert err.endswith("…: cannot read: File name too long\n")
    assert len(err) < 260


# --- once-from parity (spec §10.1) and the kubelet's kubeconfig (spec §4.5) ---------------------

ENCAPSULATED = "/etc/ignition-machine-config-encapsulated.json"
SSH_KEYS = "/home/core/.ssh/authorized_keys.d/ignition"


def _with_users(path: Path, mc: bool) -> Path:
    ign = {
        "ignition": {"version": "3.2.0"},
        "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA a@example"]}]},
        "storage": {"files": [{"path": "/etc/hello", "contents": {"source": data_url("hi\n")}}]},
    }
    doc = ign
    if mc:
        doc = {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "mc"},
            "spec": {"config": ign},
        }
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("mc", "keys", "encapsulated"),
    [
        # upstream: a bare Ignition config is files and units only, and drops the encapsulated config
        pytest.param(False, None, None, id="bare-ignition"),
        pytest.param(True, "ssh-ed25519 AAAA a@example\n", "{}", id="machineconfig"),
    ],
)
def test_once_from_writes_ssh_keys_and_keeps_the_encapsulated_config_for_a_machineconfig_only(
    run: Run, tmp_path: Path, mc: bool, keys: str | None, encapsulated: str | None
) -> None:
    root = make_sandbox_root(tmp_path / "root")
    (root / ENCAPSULATED.lstrip("/")).write_text("{}")
    src = _with_users(tmp_path / ("mc.json" if mc else "x.ign"), mc=mc)
    code, _, _ = run("start", "--once-from", str(src), "--root-mount", str(root), "--skip-reboot")
    assert code == 0
    assert (root / "etc/hello").read_text() == "hi\n"

    def text(path: str) -> str | None:
        host = root / path.lstrip("/")
        return host.read_text() if host.exists() else None

    assert (text(SSH_KEYS), text(ENCAPSULATED)) == (keys, encapsulated)


@pytest.mark.allow_commands
def test_an_rpm_ostree_node_without_the_kubelet_kubeconfig_fails_before_any_write(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "rpm-ostree").symlink_to(STANDIN)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("RPMOSTREE_STANDIN_STATE", str(tmp_path / "rpm-ostree.json"))
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    assert (root / "etc/kubernetes/kubeconfig").is_file()  # the sandbox has one: updates work
    (root / "etc/kubernetes/kubeconfig").unlink()
    before = walk(root)
    code, out, err = run(
        "start", "--once-from", str(_ignition(tmp_path)), "--root-mount", str(root), "--skip-reboot"
    )
    assert (code, out) == (1, "")
    assert err == "mcd: cannot stat /etc/kubernetes/kubeconfig: no such regular file; nothing was changed\n"
    assert _outside_state(walk(root)) == _outside_state(before)


def test_a_bare_ignition_once_from_records_the_users_the_node_kept(run: Run, tmp_path: Path) -> None:
    """The users of a bare Ignition config are not applied: the recorded config keeps those of
    the config before it, so the next update compares against what the node really has."""
    root = make_sandbox_root(tmp_path / "root")
    first = tmp_path / "first.json"
    first.write_text(json.dumps(mc_object("first", ssh_keys=["ssh-ed25519 BBBB b@example"])))
    for src in (first, _with_users(tmp_path / "x.ign", mc=False)):
        code, _, err = run("start", "--once-from", str(src), "--root-mount", str(root), "--skip-reboot")
        assert code == 0, err
    recorded = json.loads((root / "etc/machine-config-daemon/currentconfig").read_text())
    assert recorded["spec"]["config"]["passwd"] == {
        "users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 BBBB b@example"]}]
    }
    assert recorded["spec"]["config"]["storage"]["files"][0]["path"] == "/etc/hello"
    assert (root / SSH_KEYS.lstrip("/")).read_text() == "ssh-ed25519 BBBB b@example\n"
