"""`MCD_<FLAG>` environment defaults: a bad value is one line naming the variable (exit 1, no
traceback) for the command that reads it only; upstream's DaemonSet arguments are accepted;
KUBECONFIG is read as kubectl reads it."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from clirun import Run

from mcd.cli.main import kubeconfig_path

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "new.yaml")

BAD = [
    ("MCD_VERBOSE", "yes", "a count of -v (0, 1, 2)"),
    ("MCD_DRAIN_TIMEOUT", "1h", "a number of seconds"),
    ("MCD_RESYNC_INTERVAL", "-5", "a number of seconds"),
    ("MCD_CONFIG_GRACE", "nan", "a number of seconds"),
    ("MCD_SKIP_REBOOT", "maybe", "true or false"),
    ("MCD_BUILTIN_DRAINER", "2", "true or false"),
    ("MCD_KUBELET_HEALTHZ_ENABLED", "enabled", "true or false"),
    ("MCD_SSH_LOGIN_MONITOR", "y", "true or false"),
    ("MCD_DRIFT_POLICY", "fix", "degrade or observe or heal"),
]


@pytest.mark.parametrize("bad", BAD, ids=[b[0] for b in BAD])
def test_a_bad_environment_value_is_one_line_naming_the_variable(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bad: tuple[str, str, str]
) -> None:
    var, value, expected = bad
    monkeypatch.setenv(var, value)
    code, out, err = run("start", "--root-mount", str(tmp_path), "--node-name", "n")
    assert (code, out) == (1, "")
    assert err == f"mcd: environment variable {var}={value!r}: expected {expected}\n"


@pytest.mark.parametrize(("var", "value", "expected"), BAD, ids=[b[0] for b in BAD])
def test_a_bad_agent_value_does_not_stop_validate(
    run: Run, monkeypatch: pytest.MonkeyPatch, var: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(var, value)
    assert run("validate", EXAMPLE) == (0, "", "")


def test_the_flag_overrides_a_bad_environment_value(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MCD_DRIFT_POLICY", "fix")
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.delenv("MCD_NODE_NAME", raising=False)
    code, _, err = run("start", "--root-mount", str(tmp_path), "--drift-policy", "observe")
    assert code == 1
    assert "MCD_DRIFT_POLICY" not in err
    assert "--node-name: required" in err


def test_good_environment_values_are_converted(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcd.cli.parser import parse

    for var, value in [("MCD_DRAIN_TIMEOUT", "90"), ("MCD_SKIP_REBOOT", "yes"), ("MCD_VERBOSE", "2"),
                       ("MCD_SSH_LOGIN_MONITOR", "off"), ("MCD_DRIFT_POLICY", "heal")]:  # fmt: skip
        monkeypatch.setenv(var, value)
    args = parse(["start"])
    got = (args.drain_timeout, args.skip_reboot, args.verbose, args.ssh_login_monitor, args.drift_policy)
    assert got == (90.0, True, 2, False, "heal")


def test_upstream_daemonset_arguments_are_accepted_and_said_once(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.delenv("MCD_NODE_NAME", raising=False)
    caplog.set_level(logging.INFO, logger="mcd.cli")
    code, _, err = run(
        "start", "--payload-version=4.18.0", "--v=2", "--tls-cipher-suites=TLS_AES_128_GCM_SHA256",
        "--tls-min-version=VersionTLS12", "--root-mount", str(tmp_path),
    )  # fmt: skip
    assert code == 1 and "--node-name: required" in err  # parsed: the next check is the node name
    ignored = [r.getMessage().split("=")[0] for r in caplog.records if "ignored it" in r.getMessage()]
    flags = ("payload-version", "tls-cipher-suites", "tls-min-version")
    assert ignored == [f"accepted --{flag}" for flag in flags]


def test_kubeconfig_is_read_as_kubectl_reads_it() -> None:
    assert kubeconfig_path("/flag", {"KUBECONFIG": "/env"}) == "/flag"
    assert kubeconfig_path("", {"KUBECONFIG": "/a:/b"}) == "/a:/b"
    assert kubeconfig_path("", {}) == ""
