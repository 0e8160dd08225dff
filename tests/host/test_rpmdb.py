"""`rpm -q` against the booted deployment (mcd.host.rpmdb): which root it reads, how its exit
status is read, and upstream's verdict on an extension's package sets asked package by package."""

from __future__ import annotations

from pathlib import Path

import pytest
from recording import RecordingRunner

from mcd.host.root import HostRoot
from mcd.host.rpmdb import RpmDb, RpmQueryError


def _db(runner: RecordingRunner, root: Path, *, chrooted: bool = False) -> RpmDb:
    return RpmDb(runner, HostRoot(root), chrooted=chrooted)


def test_a_plain_directory_is_named_with_root_and_a_chrooted_runner_is_not(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["rpm"], stdout="usbguard-1.1-1.x86_64\n")
    assert _db(runner, tmp_path).installed("usbguard")
    assert _db(runner, tmp_path, chrooted=True).installed("usbguard")
    assert runner.commands == [
        ("rpm", "--root", str(tmp_path), "-q", "usbguard"),
        ("rpm", "-q", "usbguard"),
    ]


def test_exit_one_is_not_installed_and_anything_else_fails_the_query(tmp_path: Path) -> None:
    runner = RecordingRunner()
    runner.expect(
        ["rpm", "--root", str(tmp_path), "-q", "sysstat"],
        returncode=1,
        stdout="package sysstat is not installed\n",
    )
    runner.expect(
        ["rpm", "--root", str(tmp_path), "-q", "usbguard"], returncode=2, stderr="error: db5 error\n"
    )
    db = _db(runner, tmp_path)
    assert not db.installed("sysstat")
    with pytest.raises(RpmQueryError) as failed:
        db.installed("usbguard")
    assert (
        str(failed.value)
        == 'failed to query RPM database for package "usbguard": exit status 2: error: db5 error'
    )


def test_no_rpm_binary_fails_the_query(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["rpm"], raises=FileNotFoundError(2, "No such file or directory"))
    with pytest.raises(RpmQueryError, match='package "usbguard"'):
        _db(runner, tmp_path).installed("usbguard")


def test_the_legacy_set_is_asked_only_when_the_current_one_is_incomplete(tmp_path: Path) -> None:
    runner = RecordingRunner()
    installed = {"NetworkManager-libreswan", "libreswan"}  # an older image: ipsec without openvswitch
    for pkg in ("NetworkManager-libreswan", "libreswan", "openvswitch3.5-ipsec"):
        runner.expect(["rpm", "-q", pkg], returncode=0 if pkg in installed else 1)
    db = _db(runner, tmp_path, chrooted=True)
    assert db.extensions_verdict(["ipsec"]) is None
    asked = [c[-1] for c in runner.commands]
    assert asked.count("libreswan") == 1 and "openvswitch3.5-ipsec" in asked


def test_a_missing_package_is_named_per_set_as_upstream(tmp_path: Path) -> None:
    runner = RecordingRunner().expect(["rpm", "-q"], returncode=1)
    verdict = _db(runner, tmp_path, chrooted=True).extensions_verdict(["kerberos"])
    assert verdict == (
        'extension "kerberos" verification failed: no valid package set is fully installed. '
        "Tried 1 package set(s), missing packages per set: [[krb5-workstation libkadm5]]"
    )
