"""A failed post-config action fails the update with upstream's exact text (spec §3.6) and rolls it back.

Legacy `restart crio` runs `update-ca-trust` first and stops when it fails; a failed crio restart
there is worded as a reload (upstream's text). The policy actions word a restart as a restart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from builders import ign_file, mc
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.host.root import HostRoot
from mcd.host.systemd import SystemdError, SystemdManager
from mcd.update.perform import ActionError
from mcd.update.transaction import Host, UpdateError, update

BUNDLE = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
REGISTRIES = "/etc/containers/registries.conf"
CREDENTIAL_PROVIDER = "/etc/systemd/system/kubelet.service.d/40-kubelet-crio-image-credential-provider.conf"
REG_A = 'unqualified-search-registries = ["registry.access.redhat.com"]\n'
REG_B = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n'
ROLLED_BACK = "update to b failed and was rolled back: "
JOB_FAILED = "Job for crio.service failed"
CA_TRUST = "coreos-update-ca-trust.service"


class Failing:
    """The offline manager, except that the named units fail to reload or restart."""

    def __init__(self, inner: SystemdManager, fail: set[str]) -> None:
        self.inner, self.fail = inner, fail
        self.done: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def reload(self, unit: str) -> None:
        self.done.append(f"reload {unit}")
        if unit in self.fail:
            raise SystemdError(f"Job for {unit} failed")

    def restart(self, unit: str) -> None:
        self.done.append(f"restart {unit}")
        if unit in self.fail:
            raise SystemdError(f"Job for {unit} failed")

    def daemon_reload(self) -> None:
        self.done.append("daemon-reload")
        if "daemon-reload" in self.fail:
            raise SystemdError("Access denied")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = make_sandbox_root(tmp_path / "root")
    (base / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (base / "proc/sys/kernel/random/boot_id").write_text("boot-1\n")
    return base


def _host(base: Path, runner: RecordingRunner, *, live: bool = True) -> Host:
    return dataclasses.replace(Host.for_root(HostRoot(base), runner, coreos=False), live=live)


RELOAD_CRIO = "could not apply update: reloading crio.service configuration failed. "
CA_TRUST_FAILED = "error running update-ca-trust: p11-kit: broken\n: exit status 1"


@dataclasses.dataclass(frozen=True)
class Case:
    legacy: bool
    path: str
    texts: tuple[str, str]
    fail: frozenset[str]
    ca_rc: int
    message: str
    done: tuple[str, ...]
    # upstream's Warning Event for it (pkg/daemon/update.go), None: it posts none
    event: tuple[str, str] | None


CA = ("ca a\n", "ca b\n")
CRIO = frozenset({"crio.service"})
CASES = {
    "legacy-reload-crio": Case(
        True,
        REGISTRIES,
        (REG_A, REG_B),
        CRIO,
        0,
        RELOAD_CRIO + "Error: Job for crio.service failed",
        ("reload crio.service",),
        ("FailedServiceReload", "Reloading crio service failed. Error: Job for crio.service failed"),
    ),
    # upstream words a failed legacy crio restart as a reload
    "legacy-restart-crio": Case(
        True,
        BUNDLE,
        CA,
        CRIO,
        0,
        RELOAD_CRIO + "Error: Job for crio.service failed",
        ("restart crio.service",),
        ("FailedServiceReload", "Reloading crio service failed. Error: Job for crio.service failed"),
    ),
    # update-ca-trust failing stops the legacy action before crio is touched
    "legacy-update-ca-trust": Case(True, BUNDLE, CA, frozenset(), 1, CA_TRUST_FAILED, (), None),
    # the policy's Special action: upstream names crio `crio`
    "policy-special": Case(
        False,
        REGISTRIES,
        (REG_A, REG_B),
        CRIO,
        0,
        RELOAD_CRIO + "Error: Job for crio.service failed",
        ("reload crio.service",),
        ("FailedServiceReload", "Reloading service crio failed. Error: Job for crio.service failed"),
    ),
    "policy-daemon-reload": Case(
        False,
        CREDENTIAL_PROVIDER,
        ("a\n", "b\n"),
        frozenset({"daemon-reload"}),
        0,
        "could not apply update: reloading daemon-reload configuration failed. Error: Access denied",
        ("daemon-reload",),
        ("FailedServiceReload", "Reloading service daemon-reload failed. Error: Access denied"),
    ),
    "policy-restart": Case(
        False,
        BUNDLE,
        CA,
        CRIO,
        0,
        "could not apply update: restarting crio.service service failed. Error: Job for crio.service failed",
        ("restart coreos-update-ca-trust.service", "restart crio.service"),
        ("FailedServiceRestart", "Restarting crio.service service failed. Error: " + JOB_FAILED),
    ),
    # the unit failing, upstream runs update-ca-trust itself; its failure is the error
    "policy-ca-trust-fallback": Case(
        False,
        BUNDLE,
        CA,
        frozenset({"coreos-update-ca-trust.service"}),
        1,
        CA_TRUST_FAILED,
        ("restart coreos-update-ca-trust.service",),
        # the Event quotes Go's exec error alone
        ("FailedServiceRestart", f"Restarting {CA_TRUST} service failed. Error: exit status 1"),
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_failed_action_fails_with_upstreams_text(root: Path, case: Case) -> None:
    path, texts = case.path, case.texts
    a, b = mc("a", files=[ign_file(path, texts[0])]), mc("b", files=[ign_file(path, texts[1])])
    update(_host(root, RecordingRunner(), live=False), mc("empty"), a, legacy=case.legacy, skip_reboot=True)
    runner = RecordingRunner().expect(["update-ca-trust"], case.ca_rc, stderr="p11-kit: broken\n")
    h = _host(root, runner)
    failing = Failing(h.systemd, set(case.fail))
    with pytest.raises(UpdateError) as info:
        update(dataclasses.replace(h, systemd=failing), a, b, legacy=case.legacy)
    assert str(info.value) == ROLLED_BACK + case.message
    cause = info.value.__cause__
    assert isinstance(cause, ActionError) and cause.event == case.event
    assert tuple(failing.done) == case.done
    # rolled back: the old file is in place again
    assert (root / path.lstrip("/")).read_text() == texts[0]
