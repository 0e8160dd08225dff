"""The plan is what runs: every host operation an update performs is one of its plan's steps, in order.

For each upstream case `mcd plan` can express (old and new configs, node facts, a policy) and
for the benchmark workload pair, a CoreOS sandbox root is first brought to the old config,
then the plan of old -> new is made from that root (as `mcd plan --root-mount` does) and the
update is applied with every host service recording what it is asked to do: the file writer,
systemd, the SSH writer, rpm-ostree (over a recording runner), the rebooter and the drain. The
recorded operations must equal the planned steps exactly, in order.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from casebuilders import legacy_side_mc, ndp_configs, reconcile_side_mc, registries_mc
from casefiles import CASES_DIR, case_params, load_cases
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd import policy
from mcd.config.ignition import File
from mcd.config.machineconfig import MachineConfig, empty_machineconfig
from mcd.config.ostables import ExtensionError, extension_packages
from mcd.host import state
from mcd.host.files import FileWriter
from mcd.host.originals import Originals
from mcd.host.root import HostRoot
from mcd.host.rpmostree import RpmOstree
from mcd.host.ssh import SshKeyWriter
from mcd.host.units import UnitFiles, UnitWriter
from mcd.planner import steps as st
from mcd.update.transaction import Host, Unreconcilable, UpdateError, mc_json, plan_on_host, update

Op = tuple[Any, ...]


def op_of(step: st.Step) -> Op:
    """What a step asks of the host, in the recorders' terms (a Disable's reason is not visible)."""
    match step:
        case st.WriteFiles(paths=paths) | st.WriteUnitFiles(paths=paths):
            return (step.kind, paths)
        case st.RemoveFile(path=path) | st.RestoreOriginal(path=path):
            return (step.kind, path)
        case st.Mask(unit=u) | st.Unmask(unit=u) | st.Preset(unit=u):
            return (step.kind, u)
        case st.ReloadService(unit=u) | st.RestartService(unit=u):
            return (step.kind, u)
        case st.Enable(units=units) | st.Disable(units=units):
            return (step.kind, units)
        case st.SetPassword(user=user) | st.ClearPassword(user=user):
            return (step.kind, user)
        case st.OsCommand(argv=argv):
            return (step.kind, argv)
        case st.Rebase(image=image):
            return (step.kind, image)
        case st.VerifyExtensions(packages=packages):
            return (step.kind, packages)
        case st.Reboot(reason=reason):
            return (step.kind, reason)
    return (step.kind,)


class Recorder:
    def __init__(self) -> None:
        self.ops: list[Op] = []


class RecordingFiles(FileWriter):
    recorder: Recorder

    def write_files(self, files: Sequence[File], *args: Any, **kwargs: Any) -> list[str]:
        self.recorder.ops.append(("write-files", tuple(f.path for f in files)))
        return super().write_files(files, *args, **kwargs)


class RecordingOriginals(Originals):
    recorder: Recorder

    def remove_path(self, path: str) -> bool:
        self.recorder.ops.append(("remove-file", path))
        return super().remove_path(path)

    def restore(self, path: str) -> bool:
        self.recorder.ops.append(("restore-original", path))
        return super().restore(path)


class RecordingUnitFiles(UnitFiles):
    recorder: Recorder

    def write_unit_files(self, items: Sequence[tuple[str, str | bytes, int]]) -> list[bool]:
        self.recorder.ops.append(("write-unit-files", tuple(path for path, _, _ in items)))
        return super().write_unit_files(items)

    def mask_unit_path(self, path: str) -> bool:
        self.recorder.ops.append(("mask", path.rsplit("/", 1)[1]))
        return super().mask_unit_path(path)

    def unmask_unit_path(self, path: str) -> bool:
        self.recorder.ops.append(("unmask", path.rsplit("/", 1)[1]))
        return super().unmask_unit_path(path)


class RecordingSsh(SshKeyWriter):
    recorder: Recorder

    def apply(self, users: Sequence[Any]) -> bool:
        self.recorder.ops.append(("ssh-keys",))
        return super().apply(users)

    def set_password(self, user: str, password_hash: str | None) -> None:
        self.recorder.ops.append(("password", user))

    def clear_password(self, user: str) -> None:
        self.recorder.ops.append(("clear-password", user))


class RecordingRpmOstree(RpmOstree):
    recorder: Recorder

    def require_feature(self, feature: str) -> None:
        self.recorder.ops.append(("check-rpm-ostree",))
        super().require_feature(feature)

    def link_pull_secret(self) -> str:
        self.recorder.ops.append(("link-pull-secret",))
        return super().link_pull_secret()

    def rebase(self, url: str, before_attempt: Callable[[], None] | None = None) -> None:
        self.recorder.ops.append(("rebase", url))
        super().rebase(url, before_attempt)

    def run_planned(self, argv: Sequence[str]) -> None:
        self.recorder.ops.append(("rpm-ostree", tuple(argv)))
        super().run_planned(argv)

    def verify_extensions(self, expected: Sequence[str]) -> None:
        self.recorder.ops.append(("verify-extensions", tuple(expected)))
        super().verify_extensions(expected)


@dataclasses.dataclass
class RecordingSystemd:
    """A live systemd stand-in: it records the operations and keeps enablement in memory."""

    recorder: Recorder
    enabled: set[str] = dataclasses.field(default_factory=set)

    def enable(self, names: Sequence[str]) -> None:
        self.recorder.ops.append(("enable", tuple(names)))
        self.enabled |= set(names)

    def disable(self, names: Sequence[str]) -> None:
        self.recorder.ops.append(("disable", tuple(names)))
        self.enabled -= set(names)

    def preset(self, name: str) -> None:
        self.recorder.ops.append(("preset", name))

    def is_enabled(self, names: Sequence[str]) -> dict[str, str]:
        return {n: "enabled" if n in self.enabled else "disabled" for n in names}

    def daemon_reload(self) -> None:
        self.recorder.ops.append(("daemon-reload",))

    def reload(self, unit: str) -> None:
        self.recorder.ops.append(("reload", unit))

    def restart(self, unit: str) -> None:
        self.recorder.ops.append(("restart", unit))

    def unit_file_known(self, name: str) -> bool:
        return False


@dataclasses.dataclass
class RecordingRebooter:
    recorder: Recorder

    def reboot(self, rationale: str) -> None:
        self.recorder.ops.append(("reboot", rationale))


def _status(image: str, packages: Sequence[str], staged: Sequence[str] | None = None) -> str:
    booted: dict[str, Any] = {"id": "fedora-coreos-0", "booted": True, "requested-packages": list(packages)}
    if image:
        booted["container-image-reference"] = f"ostree-unverified-registry:{image}"
    if staged is None:
        return json.dumps({"deployments": [booted]})
    # what the OS step staged (read by the extensions check)
    pending = {**booted, "id": "fedora-coreos-1", "booted": False, "staged": True}
    pending["requested-packages"] = list(staged)
    return json.dumps({"deployments": [pending, booted]})


def _packages(mc: MachineConfig) -> list[str]:
    try:
        return extension_packages(list(mc.extensions))
    except ExtensionError:
        return []


class CaTrustRecordingRunner(RecordingRunner):
    recorder: Recorder

    def run(self, argv: Sequence[str], **kwargs: Any) -> Any:
        if list(argv) == ["update-ca-trust"]:
            self.recorder.ops.append(("update-ca-trust",))
        return super().run(argv, **kwargs)


def recording_host(
    root: Path, booted: MachineConfig, staged: MachineConfig, systemd: RecordingSystemd
) -> tuple[Host, Recorder]:
    """A CoreOS host on `root` whose services record each operation.

    rpm-ostree says `booted` runs (to the two probes: `mcd plan --root-mount`'s and the update's)
    and, after that, that a staged deployment requests the extension packages of `staged`.
    """
    recorder = systemd.recorder
    runner = CaTrustRecordingRunner()
    runner.recorder = recorder
    status = ["rpm-ostree", "status", "--json"]
    runner.expect(status, stdout=_status(booted.os_image_url, _packages(booted)), times=2)
    runner.expect(status, stdout=_status(booted.os_image_url, _packages(booted), _packages(staged)))
    version = "rpm-ostree:\n Version: '2025.1'\n Features:\n  - container\n"
    runner.expect(["rpm-ostree", "--version"], stdout=version)
    runner.expect(["rpm-ostree"])
    runner.expect(["update-ca-trust"])
    host = Host.for_root(HostRoot(root), runner, coreos=True)
    files = RecordingFiles(host.root, host.accounts, coreos=True)
    files.originals = RecordingOriginals(host.root, True, files.matches)
    unit_files = RecordingUnitFiles(files.originals)
    ssh = RecordingSsh(host.root, host.accounts, runner)
    rpm = RecordingRpmOstree(runner, retry_delays=(), root=host.root)
    for service in (files, files.originals, unit_files, ssh, rpm):
        service.recorder = recorder
    host = dataclasses.replace(
        host,
        files=files,
        units=UnitWriter(host.root, systemd, unit_files),
        ssh=ssh,
        rpmostree=rpm,
        systemd=systemd,
        rebooter=RecordingRebooter(recorder),
        live=True,
    )
    return host, recorder


def check_plan_is_what_runs(
    tmp_path: Path,
    old: MachineConfig,
    new: MachineConfig,
    *,
    legacy: bool,
    policies: policy.ClusterPolicies = policy.DEFAULT_POLICIES,
    node_fips: str | None = None,
    storage_overrides: Sequence[str] = (),
    forcefile: bool = False,
    prepare: Callable[[Path], None] | None = None,
) -> list[st.Step]:
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    if node_fips is not None:
        (root / "proc/sys/crypto").mkdir(parents=True)
        (root / "proc/sys/crypto/fips_enabled").write_text(node_fips)
    systemd = RecordingSystemd(Recorder())
    empty = empty_machineconfig()
    host, _ = recording_host(root, empty, old, systemd)
    try:
        update(host, empty, old, legacy=True, skip_reboot=True)
    except UpdateError:
        # a config no update can bring (disks, an unsupported extension …): record it as applied
        state.begin(host.root, state.Transaction(None, mc_json(old), "apply", "legacy"))
        state.commit(host.root)
    if prepare is not None:
        prepare(root)
    if forcefile:
        (root / "run").mkdir(exist_ok=True)
        (root / "run/machine-config-daemon-force").write_text("")
    host, recorder = recording_host(root, old, new, dataclasses.replace(systemd, recorder=Recorder()))
    planned = plan_on_host(
        host, old, new, legacy=legacy, policies=policies, storage_overrides=storage_overrides
    )

    def drain() -> None:
        recorder.ops.append(("drain",))

    try:
        outcome = update(
            host, old, new, legacy=legacy, policies=policies, drain=drain, storage_overrides=storage_overrides
        )
    except Unreconcilable:
        assert not planned.reconcilable
        assert planned.steps == ()
        assert recorder.ops == []
        return []
    except UpdateError:
        # an OS field this node cannot apply: the plan runs up to its failure step, then rolls back
        assert planned.os_errors
        assert isinstance(planned.steps[-1], st.OsFailure)
        ran = [op_of(s) for s in planned.steps[:-1] if not isinstance(s, st.ConsumeForcefile)]
        assert recorder.ops[: len(ran)] == ran
        return list(planned.steps)
    assert outcome.plan.steps == planned.steps
    assert [r.step for r in outcome.ran] == list(planned.steps)
    # the forcefile's removal is checked on disk by its test; every other step is an operation
    assert recorder.ops == [op_of(s) for s in planned.steps if not isinstance(s, st.ConsumeForcefile)]
    return list(planned.steps)


# ---------------------------------------------------------------- the case tables


@pytest.mark.parametrize("case", case_params(load_cases("reconcilable.json")))
def test_reconcilable_cases(case: dict[str, Any], tmp_path: Path) -> None:
    inp = case["input"]
    old, new = reconcile_side_mc("old", inp["old"]), reconcile_side_mc("new", inp["new"])
    overrides = (inp.get("irreconcilableValidationOverrides") or {}).get("storage", [])
    fips = inp["old"].get("node_proc_sys_crypto_fips_enabled")
    check_plan_is_what_runs(tmp_path, old, new, legacy=False, node_fips=fips, storage_overrides=overrides)


@pytest.mark.parametrize("case", case_params(load_cases("post_config_action_legacy.json")))
def test_legacy_action_cases(case: dict[str, Any], tmp_path: Path) -> None:
    old, new = legacy_side_mc(case["input"]["old"]), legacy_side_mc(case["input"]["new"])
    check_plan_is_what_runs(tmp_path, old, new, legacy=True)


@pytest.mark.parametrize(
    "case", case_params(load_cases("node_disruption_policy.json", kind="node_disruption_actions"))
)
def test_node_disruption_policy_cases(case: dict[str, Any], tmp_path: Path) -> None:
    inp = case["input"]
    if inp["diff"].get("forcefile"):
        pytest.skip("the forcefile is a node fact: covered by test_forcefile_is_consumed_as_planned")
    cluster = inp["clusterPolicies"]
    policies = (
        policy.DEFAULT_POLICIES
        if cluster == "defaults"
        else policy.policies_from_machineconfiguration(
            {"status": {"nodeDisruptionPolicyStatus": {"clusterPolicies": cluster}}}
        )
    )
    old, new = ndp_configs(inp["diff"])
    check_plan_is_what_runs(tmp_path, old, new, legacy=False, policies=policies)


@pytest.mark.parametrize("case", case_params(load_cases("registries_conf_drain.json")))
def test_registries_cases(case: dict[str, Any], tmp_path: Path) -> None:
    inp = case["input"]
    old = registries_mc("old", inp["old_registries_conf"])
    new = registries_mc("new", inp["new_registries_conf"])
    check_plan_is_what_runs(tmp_path, old, new, legacy=False)


def test_forcefile_is_consumed_as_planned(tmp_path: Path) -> None:
    old, new = ndp_configs({"files": ["/etc/a"]})
    steps = check_plan_is_what_runs(tmp_path, old, new, legacy=False, forcefile=True)
    assert steps[0] == st.ConsumeForcefile()
    assert not (tmp_path / "root/run/machine-config-daemon-force").exists()


# ---------------------------------------------------------------- the benchmark workload


def _workload() -> Iterator[Any]:
    path = CASES_DIR.parent / "bench" / "make_workload.py"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    spec = importlib.util.spec_from_file_location("make_workload", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


def test_workload_pair(tmp_path: Path) -> None:
    from builders import load

    module = next(_workload())
    old_obj, new_obj = module.build(300, 40)
    steps = check_plan_is_what_runs(tmp_path, load(old_obj), load(new_obj), legacy=False)
    kinds = [s.kind for s in steps]
    # a unit change reboots under the default policy, so the node is drained first
    # (the [Install] sections stay the same: no unit is disabled before its rewrite)
    assert kinds == ["drain", "write-files", "write-unit-files", "enable", "disable", "reboot"]
    [files] = [s for s in steps if isinstance(s, st.WriteFiles)]
    # 10% of the files changed, and registries.conf
    assert len(files.paths) == 31


def test_the_tuning_file_is_applied_as_planned(tmp_path: Path) -> None:
    def tuning(root: Path) -> None:
        (root / "etc/pivot").mkdir(parents=True)
        (root / "etc/pivot/kernel-args").write_text("ADD nosmt\nDELETE quiet\n")
        (root / "proc").mkdir(exist_ok=True)
        (root / "proc/cmdline").write_text("root=UUID=1 quiet\n")
        # Fedora CoreOS: every tuning argument counts (RHCOS allowlists nosmt only)
        (root / "etc/os-release").write_text("ID=fedora\nVARIANT_ID=coreos\n")

    old, new = ndp_configs({"files": ["/etc/a"]})
    steps = check_plan_is_what_runs(tmp_path, old, new, legacy=False, prepare=tuning)
    assert [s.argv for s in steps if isinstance(s, st.OsCommand) and s.role == "tuning"] == [
        ("rpm-ostree", "kargs", "--append=nosmt"),
        ("rpm-ostree", "kargs", "--delete=quiet"),
    ]


# ---------------------------------------------------------------- the drain leads the transaction


class _DrainBlocked(Exception):
    pass


def _drained_host(tmp_path: Path) -> tuple[Host, MachineConfig, MachineConfig, Recorder]:
    old, new = ndp_configs({"files": ["/etc/a"]})  # a file without policy: Reboot, so a drain
    root = make_sandbox_root(tmp_path / "root", coreos=True)
    systemd = RecordingSystemd(Recorder())
    empty = empty_machineconfig()
    host, _ = recording_host(root, empty, old, systemd)
    update(host, empty, old, legacy=True, skip_reboot=True)
    host, recorder = recording_host(root, old, new, dataclasses.replace(systemd, recorder=Recorder()))
    return host, old, new, recorder


def test_the_drain_runs_before_the_write_ahead_record(tmp_path: Path) -> None:
    host, old, new, recorder = _drained_host(tmp_path)
    records_during_drain: list[object] = []

    def drain() -> None:
        records_during_drain.append(state.pending(host.root))
        recorder.ops.append(("drain",))

    update(host, old, new, legacy=False, drain=drain, skip_reboot=True)
    # nothing to replay without the drain if the process dies while draining
    assert records_during_drain == [None]
    assert recorder.ops[0] == ("drain",)


def test_a_failed_drain_reaches_the_caller_as_raised_and_changes_nothing(tmp_path: Path) -> None:
    host, old, new, recorder = _drained_host(tmp_path)
    before = (host.root.prefix / "etc/a").read_bytes()

    def drain() -> None:
        raise _DrainBlocked("PodDisruptionBudget shop/web allows 0 disruptions")

    with pytest.raises(_DrainBlocked):
        update(host, old, new, legacy=False, drain=drain, skip_reboot=True)
    assert state.pending(host.root) is None
    assert (host.root.prefix / "etc/a").read_bytes() == before
    assert recorder.ops == []
