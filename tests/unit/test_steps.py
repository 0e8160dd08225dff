"""mcd.planner.steps: each step's JSON, command line and text line, word for word."""

from __future__ import annotations

from typing import Any

import pytest

from mcd.planner import steps as st

REBOOT_ARGV = ("systemd-run", "--unit", "machine-config-daemon-reboot", "/bin/sh", "-c", "systemctl reboot")


@pytest.mark.parametrize(
    ("step", "json", "argv", "text"),
    [
        (
            st.ConsumeForcefile(),
            {"kind": "consume-forcefile"},
            None,
            "remove the forcefile /run/machine-config-daemon-force",
        ),
        (st.Drain(), {"kind": "drain"}, None, "drain the node"),
        (
            st.WriteFiles(("/etc/a", "/etc/b")),
            {"kind": "write-files", "paths": ["/etc/a", "/etc/b"]},
            None,
            "write 2 file(s): /etc/a /etc/b",
        ),
        (
            st.WriteFiles(tuple(f"/f{i}" for i in range(6))),
            {"kind": "write-files", "paths": [f"/f{i}" for i in range(6)]},
            None,
            "write 6 file(s): /f0 /f1 /f2 /f3 (and 2 more)",
        ),
        (
            st.WriteFiles(tuple(f"/f{i}" for i in range(4))),
            {"kind": "write-files", "paths": [f"/f{i}" for i in range(4)]},
            None,
            "write 4 file(s): /f0 /f1 /f2 /f3",
        ),
        (st.RemoveFile("/etc/a"), {"kind": "remove-file", "path": "/etc/a"}, None, "remove /etc/a"),
        (
            st.RestoreOriginal("/etc/a"),
            {"kind": "restore-original", "path": "/etc/a"},
            None,
            "restore the original /etc/a",
        ),
        (
            st.WriteUnitFiles(("/etc/systemd/system/a.service",)),
            {"kind": "write-unit-files", "paths": ["/etc/systemd/system/a.service"]},
            None,
            "write 1 unit file(s): /etc/systemd/system/a.service",
        ),
        (st.Mask("a.service"), {"kind": "mask", "unit": "a.service"}, None, "mask a.service"),
        (st.Unmask("a.service"), {"kind": "unmask", "unit": "a.service"}, None, "unmask a.service"),
        (
            st.Enable(("a.service", "b.service")),
            {"kind": "enable", "units": ["a.service", "b.service"]},
            ("systemctl", "enable", "a.service", "b.service"),
            "systemctl enable a.service b.service",
        ),
        (
            st.Disable(("a.service",)),
            {"kind": "disable", "units": ["a.service"], "reason": "config"},
            ("systemctl", "disable", "a.service"),
            "systemctl disable a.service",
        ),
        (
            st.Disable(("a b.service",), "rewrite"),
            {"kind": "disable", "units": ["a b.service"], "reason": "rewrite"},
            ("systemctl", "disable", "a b.service"),
            "systemctl disable 'a b.service'  (rewrite)",
        ),
        (
            st.Preset("a.service"),
            {"kind": "preset", "unit": "a.service"},
            ("systemctl", "preset", "a.service"),
            "systemctl preset a.service",
        ),
        (
            st.Chmod("/etc/kubernetes/kubeconfig", 0o600),
            {"kind": "chmod", "path": "/etc/kubernetes/kubeconfig", "mode": "0600"},
            None,
            "chmod 0600 /etc/kubernetes/kubeconfig",
        ),
        (
            st.WriteSshKeys("core", 2),
            {"kind": "ssh-keys", "user": "core", "keys": 2},
            None,
            "write 2 SSH key(s) for core",
        ),
        (
            st.SetPassword("core"),
            {"kind": "password", "user": "core"},
            ("usermod", "-p", "<passwordHash>", "core"),
            "usermod -p '<passwordHash>' core",
        ),
        (
            st.ClearPassword("core"),
            {"kind": "clear-password", "user": "core"},
            ("usermod", "-p", "", "core"),
            "usermod -p '' core",
        ),
        (
            st.OsCommand(st.OS_CLEANUP, ("rpm-ostree", "cleanup", "-p")),
            {"kind": "rpm-ostree", "role": "cleanup", "argv": ["rpm-ostree", "cleanup", "-p"]},
            ("rpm-ostree", "cleanup", "-p"),
            "rpm-ostree cleanup -p",
        ),
        (
            st.Rebase("quay.io/os", ("rpm-ostree", "rebase", "x")),
            {"kind": "rebase", "image": "quay.io/os", "argv": ["rpm-ostree", "rebase", "x"]},
            ("rpm-ostree", "rebase", "x"),
            "rpm-ostree rebase x",
        ),
        (
            st.VerifyExtensions(("usbguard",)),
            {"kind": "verify-extensions", "packages": ["usbguard"]},
            None,
            "check the staged deployment requests usbguard",
        ),
        (
            st.ReloadService("crio.service"),
            {"kind": "reload", "unit": "crio.service"},
            ("systemctl", "reload", "crio.service"),
            "systemctl reload crio.service",
        ),
        (
            st.RestartService("crio.service"),
            {"kind": "restart", "unit": "crio.service"},
            ("systemctl", "restart", "crio.service"),
            "systemctl restart crio.service",
        ),
        (
            st.DaemonReload(),
            {"kind": "daemon-reload"},
            ("systemctl", "daemon-reload"),
            "systemctl daemon-reload",
        ),
        (st.UpdateCaTrust(), {"kind": "update-ca-trust"}, ("update-ca-trust",), "update-ca-trust"),
        (
            st.Reboot("because", REBOOT_ARGV),
            {"kind": "reboot", "reason": "because", "argv": list(REBOOT_ARGV), "owed": False},
            REBOOT_ARGV,
            "reboot: because",
        ),
        (
            st.Reboot("because", REBOOT_ARGV, owed=True),
            {"kind": "reboot", "reason": "because", "argv": list(REBOOT_ARGV), "owed": True},
            REBOOT_ARGV,
            "reboot: because  (still owed: the node has not rebooted since)",
        ),
    ],
)
def test_each_step(step: st.Step, json: dict[str, Any], argv: tuple[str, ...] | None, text: str) -> None:
    assert st.step_json(step) == json
    assert st.command(step) == argv
    assert st.step_text(step) == text


def test_reboot_command_off_coreos_has_no_ostree_ordering() -> None:
    assert st.reboot_command("because", coreos=False) == (
        "systemd-run",
        "--unit",
        "machine-config-daemon-reboot",
        "--description",
        "machine-config-daemon: because",
        "/bin/sh",
        "-c",
        "systemctl reboot",
    )
    assert st.reboot_command("x")[5:9] == (
        "-p",
        "Requires=ostree-finalize-staged.service",
        "-p",
        "After=ostree-finalize-staged.service",
    )
