"""The agent's adapter to the executor: action labels as values, the recorded config parsed once."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import ign_file, mc_object
from harness import config_a, make_root
from recording import RecordingRunner
from trees import walk

from mcd.agent.applied import ServiceAction, parse_machineconfig
from mcd.agent.applied import service_action as _service_action
from mcd.agent.node_apply import NodeApplier
from mcd.config.ignition import File
from mcd.host.files import FileWriter
from mcd.host.root import HostRoot
from mcd.host.runner import SubprocessRunner
from mcd.policy import DEFAULT_POLICIES


def test_executor_action_labels_become_values_named_as_upstreams_events_name_them() -> None:
    # crio as upstream's Special action names it; any other service as the policy does
    assert _service_action("reload crio.service") == ServiceAction("reload", "crio", skipped=False)
    assert _service_action("restart kubelet.service (skipped: not the live root)") == ServiceAction(
        "restart", "kubelet.service", skipped=True
    )
    assert _service_action("restart crio.service") == ServiceAction("restart", "crio.service", skipped=False)
    assert _service_action("daemon-reload") == ServiceAction("daemon-reload", "daemon-reload", skipped=False)


def test_recorded_config_is_parsed_once_per_version(tmp_path: Path) -> None:
    root = make_root(tmp_path, config_a())
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    first = applier.disk_config()
    assert first is not None and first.name == "rendered-worker-a"
    assert applier.disk_config() is first
    current = root / "etc/machine-config-daemon/currentconfig"
    current.write_text(current.read_text().replace("rendered-worker-a", "rendered-worker-z"))
    changed = applier.disk_config()
    assert changed is not None and changed.name == "rendered-worker-z"


@pytest.mark.allow_commands
def test_check_reports_a_wants_directory_leading_out_of_the_root(tmp_path: Path) -> None:
    unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    obj = mc_object("rendered-worker-a", units=[{"name": "hello.service", "enabled": True, "contents": unit}])
    root = make_root(tmp_path / "node", obj, SubprocessRunner())
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    mc = applier.disk_config()
    assert mc is not None and applier.check(mc) is None
    wants = root / "etc/systemd/system/multi-user.target.wants"
    outside = tmp_path / "outside"
    wants.rename(outside)
    wants.symlink_to(outside)
    problem = applier.check(mc)
    assert problem is not None
    assert problem.startswith("refusing /etc/systemd/system/multi-user.target.wants")


def test_check_reports_the_first_difference_with_upstreams_text(tmp_path: Path) -> None:
    root = make_root(tmp_path, config_a())
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    mc = applier.disk_config()
    assert mc is not None
    assert applier.check(mc) is None
    (root / "etc/mcd-test/a.conf").chmod(0o600)
    assert applier.check(mc) == (
        'mode mismatch for file: "/etc/mcd-test/a.conf"; '
        "expected: -rw-r--r--/420/0644; received: -rw-------/384/0600"
    )


# ---- the probe after the preflight check ------------------------------------------------------------


CA = "/etc/kubernetes/kubelet-ca.crt"  # the certificate writer's: the on-disk check skips it


def _configs() -> tuple[dict[str, object], dict[str, object]]:
    same = [ign_file("/etc/mcd-test/a.conf", "a"), ign_file("/etc/mcd-test/b.conf", "b"), ign_file(CA, "ca")]
    old = mc_object("rendered-old", files=[*same, ign_file("/etc/mcd-test/c.conf", "c1")])
    new = mc_object("rendered-new", files=[*same, ign_file("/etc/mcd-test/c.conf", "c2")])
    return old, new


def _reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the probe compares with the disk (FileWriter.matches), in order."""
    paths: list[str] = []
    real = FileWriter.matches

    def matches(self: FileWriter, f: File) -> bool:
        paths.append(f.path)
        return real(self, f)

    monkeypatch.setattr(FileWriter, "matches", matches)
    return paths


def test_a_checked_old_config_spares_the_probe_reading_the_unchanged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old_obj, new_obj = _configs()
    root = make_root(tmp_path, old_obj)
    (root / CA.lstrip("/")).write_text("rotated by the certificate writer")
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    old, new = parse_machineconfig(old_obj, "old"), parse_machineconfig(new_obj, "new")
    assert applier.check(old) is None
    reads = _reads(monkeypatch)
    read_all = applier.facts(old, new, "HighlyAvailable")
    assert reads == ["/etc/mcd-test/a.conf", "/etc/mcd-test/b.conf", CA]
    reads.clear()
    trusted = applier.facts(old, new, "HighlyAvailable", checked=old)
    assert reads == [CA]  # the check does not vouch for the files it skips
    assert trusted == read_all
    assert trusted.matching_paths == {"/etc/mcd-test/a.conf", "/etc/mcd-test/b.conf"}


def test_only_the_very_config_checked_is_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old_obj, new_obj = _configs()
    root = make_root(tmp_path, old_obj)
    applier = NodeApplier(HostRoot(root), RecordingRunner())
    old, new = parse_machineconfig(old_obj, "old"), parse_machineconfig(new_obj, "new")
    (root / "etc/mcd-test/a.conf").write_text("drifted after the check")
    reads = _reads(monkeypatch)
    # another parse of the same config, or another config, proves nothing about the disk
    for checked in (parse_machineconfig(old_obj, "old"), parse_machineconfig(mc_object("rendered-old"), "x")):
        reads.clear()
        facts = applier.facts(old, new, "HighlyAvailable", checked=checked)
        assert reads == ["/etc/mcd-test/a.conf", "/etc/mcd-test/b.conf", CA]
        assert facts.matching_paths == {"/etc/mcd-test/b.conf", CA}


@pytest.mark.allow_commands
def test_reapplying_the_current_config_repairs_units_dropins_and_links(tmp_path: Path) -> None:
    unit = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    obj = mc_object(
        "rendered-worker-a",
        files=[ign_file("/etc/mcd-test/a.conf", "a=1\n")],
        units=[
            {
                "name": "hello.service",
                "enabled": True,
                "contents": unit,
                "dropins": [{"name": "10-env.conf", "contents": "[Service]\nEnvironment=A=1\n"}],
            }
        ],
    )
    root = make_root(tmp_path, obj, SubprocessRunner())
    units = root / "etc/systemd/system"
    good = walk(root)
    (units / "hello.service").write_text("[Service]\nExecStart=/bin/false\n")
    (units / "hello.service.d/10-env.conf").unlink()
    (units / "multi-user.target.wants/hello.service").unlink()
    applier = NodeApplier(HostRoot(root), SubprocessRunner())
    mc = applier.disk_config()
    assert mc is not None and applier.check(mc) is not None
    facts = applier.facts(mc, mc, "HighlyAvailable")
    p = applier.plan(mc, mc, facts, DEFAULT_POLICIES)
    assert p.repairs == (
        "/etc/systemd/system/hello.service.d/10-env.conf",
        "/etc/systemd/system/hello.service",
        "hello.service",
    )
    applier.apply(mc, mc, facts, DEFAULT_POLICIES)
    assert applier.check(mc) is None
    assert walk(root) == good
