"""A failed post-config action fails the update with upstream's exact text (spec §3.6) and rolls it back.

Legacy `restart crio` runs `update-ca-trust` first and stops when it fails; a failed crio restart
there is worded as a reload (upstream's text). The policy actions word a restart as a restart.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from builders import ign_file, mc
from recording import RecordingRunner

from mcd.execute import Host, UpdateError, update
from mcd.host.root import HostRoot
from mcd.host.systemd import SystemdError, SystemdManager
from mcd.sim.sandbox import make_sandbox_root

BUNDLE = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
REGISTRIES = "/etc/containers/registries.conf"
REG_A = 'unqualified-search-registries = ["registry.access.redhat.com"]\n'
REG_B = 'unqualified-search-registries = ["registry.access.redhat.com", "docker.io"]\n'
ROLLED_BACK = "update to b failed and was rolled back: "


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


@pytest.fixture
def root(tmp_path: Path) -> Path:
    base = make_sandbox_root(tmp_path / "root")
    (base / "proc/sys/kernel/random").mkdir(parents=True, exist_ok=True)
    (base / "proc/sys/kernel/random/boot_id").write_text("boot-1\n")
    return base


def _host(base: Path, runner: RecordingRunner, *, live: bool = True) -> Host:
    return dataclasses.replace(Host.for_root(HostRoot(base), runner, coreos=False), live=live)


CASES = [
    pytest.param(
        True,
        REGISTRIES,
        (REG_A, REG_B),
        {"crio.service"},
        0,
        "could not apply update: reloading crio.service configuration failed. Error: Job for crio.service failed",
        ["reload crio.service"],
        id="legacy-reload-crio",
    ),
    pytest.param(
        True,
        BUNDLE,
        ("ca a\n", "ca b\n"),
        {"crio.service"},
        0,
        "could not apply update: reloading crio.service configuration failed. Error: Job for crio.service failed",
        ["restart crio.service"],
        id="legacy-restart-crio",
    ),
    pytest.param(
        True,
        BUNDLE,
        ("ca a\n", "ca b\n"),
        set(),
        1,
        "error running update-ca-trust: p11-kit: broken\n: exit status 1",
        [],
        id="legacy-update-ca-trust",
    ),
    pytest.param(
        False,
        BUNDLE,
        ("ca a\n", "ca b\n"),
        {"crio.service"},
        0,
        "could not apply update: restarting crio.service service failed. Error: Job for crio.service failed",
        ["restart coreos-update-ca-trust.service", "restart crio.service"],
        id="policy-restart",
    ),
    pytest.param(
        False,
        BUNDLE,
        ("ca a\n", "ca b\n"),
        {"coreos-update-ca-trust.service"},
        1,
        "error running update-ca-trust: p11-kit: broken\n: exit status 1",
        ["restart coreos-update-ca-trust.service"],
        id="policy-ca-trust-fallback",
    ),
]


@pytest.mark.parametrize(("legacy", "path", "texts", "fail", "ca_rc", "message", "done"), CASES)
def test_a_failed_action_fails_with_upstreams_text(
    root: Path,
    legacy: bool,
    path: str,
    texts: tuple[str, str],
    fail: set[str],
    ca_rc: int,
    message: str,
    done: list[str],
) -> None:
    a, b = mc("a", files=[ign_file(path, texts[0])]), mc("b", files=[ign_file(path, texts[1])])
    update(_host(root, RecordingRunner(), live=False), mc("empty"), a, legacy=legacy, skip_reboot=True)
    runner = RecordingRunner().expect(["update-ca-trust"], ca_rc, stderr="p11-kit: broken\n")
    h = _host(root, runner)
    failing = Failing(h.systemd, fail)
    with pytest.raises(UpdateError) as info:
        update(dataclasses.replace(h, systemd=failing), a, b, legacy=legacy)
    assert str(info.value) == ROLLED_BACK + message
    assert failing.done == done
    # rolled back: the old file is in place again
    assert (root / path.lstrip("/")).read_text() == texts[0]
