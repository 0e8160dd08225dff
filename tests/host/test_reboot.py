"""mcd.host.reboot: the exact reboot command and failure accounting."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from recording import RecordingRunner

from mcd.host.reboot import REBOOT_FAILED, Rebooter, RebootError, Reboots
from mcd.host.runner import CommandError

RATIONALE = "Node will reboot into config rendered-worker-abc"


def test_reboot_command_on_coreos_waits_for_staged_finalization() -> None:
    runner = RecordingRunner().expect(["systemd-run"])
    Rebooter(runner).reboot(RATIONALE)
    assert runner.commands == [
        (
            "systemd-run",
            "--unit",
            "machine-config-daemon-reboot",
            "--description",
            f"machine-config-daemon: {RATIONALE}",
            "-p",
            "Requires=ostree-finalize-staged.service",
            "-p",
            "After=ostree-finalize-staged.service",
            "/bin/sh",
            "-c",
            "systemctl reboot",
        )
    ]


def test_reboot_command_off_coreos_has_no_ostree_ordering() -> None:
    runner = RecordingRunner().expect(["systemd-run"])
    Rebooter(runner, coreos=False).reboot("runOnceFromIgnition complete")
    assert runner.commands == [
        (
            "systemd-run",
            "--unit",
            "machine-config-daemon-reboot",
            "--description",
            "machine-config-daemon: runOnceFromIgnition complete",
            "/bin/sh",
            "-c",
            "systemctl reboot",
        )
    ]


def test_reboot_logs_the_rationale_before_running(caplog: pytest.LogCaptureFixture) -> None:
    seen_at_run: list[list[str]] = []

    class Runner(RecordingRunner):
        def run(self, argv: Any, **kwargs: Any) -> Any:
            seen_at_run.append([r.getMessage() for r in caplog.records])
            return super().run(argv, **kwargs)

    caplog.set_level(logging.INFO, logger="mcd.host.reboot")
    Rebooter(Runner().expect(["systemd-run"])).reboot(RATIONALE)
    assert seen_at_run == [[f"initiating reboot: {RATIONALE}"]]
    assert [r.getMessage() for r in caplog.records][-1] == "reboot successful"


@pytest.mark.parametrize(
    "expectation",
    [
        pytest.param({"returncode": 1, "stderr": "Failed to start transient service unit"}, id="exit-1"),
        pytest.param({"raises": FileNotFoundError("systemd-run")}, id="missing-systemd-run"),
    ],
)
def test_failed_reboot_is_counted_and_raises_upstreams_message(expectation: dict[str, Any]) -> None:
    rebooter = Rebooter(RecordingRunner().expect(["systemd-run"], **expectation))
    assert rebooter.failed_reboots == 0
    for expected_count in (1, 2):
        with pytest.raises(RebootError) as info:
            rebooter.reboot(RATIONALE)
        assert str(info.value) == "reboot command failed, something is seriously wrong"
        assert isinstance(info.value.__cause__, (CommandError, FileNotFoundError))
        assert rebooter.failed_reboots == expected_count


def test_reboot_failure_message_constant() -> None:
    assert REBOOT_FAILED == "reboot command failed, something is seriously wrong"


def test_the_rebooter_satisfies_the_protocol() -> None:
    rebooter: Reboots = Rebooter(RecordingRunner())
    assert rebooter.failed_reboots == 0
