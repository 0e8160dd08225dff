"""`mcd start` in cluster mode: flags default to MCD_* variables; bad input is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcd.cli.main import main
from mcd.cli.parser import parse


def test_every_agent_flag_has_an_environment_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        "MCD_NODE_NAME": "worker-9",
        "MCD_KUBECONFIG": "/k",
        "MCD_ROOT_MOUNT": str(tmp_path),
        "MCD_METRICS_URL": "127.0.0.1:9999",
        "MCD_KUBELET_HEALTHZ_ENABLED": "false",
        "MCD_KUBELET_HEALTHZ_ENDPOINT": "http://127.0.0.1:1/healthz",
        "MCD_BUILTIN_DRAINER": "true",
        "MCD_DRAIN_TIMEOUT": "90",
        "MCD_RESYNC_INTERVAL": "30",
        "MCD_VERBOSE": "2",
        "MCD_KUBELET_KUBECONFIG": "/etc/kubernetes/kubelet.conf",
        "MCD_API_ENDPOINT_KUBECONFIG": "",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    args = parse(["start"])
    assert (args.node_name, args.kubeconfig, args.root_mount, args.metrics_url) == (
        "worker-9", "/k", str(tmp_path), "127.0.0.1:9999",
    )  # fmt: skip
    assert args.kubelet_healthz_enabled is False and args.builtin_drainer is True
    assert (args.kubelet_kubeconfig, args.api_endpoint_kubeconfig) == ("/etc/kubernetes/kubelet.conf", "")
    assert (args.kubelet_healthz_endpoint, args.drain_timeout, args.resync_interval, args.verbose) == (
        "http://127.0.0.1:1/healthz", 90.0, 30.0, 2,
    )  # fmt: skip
    # a flag wins over its variable; NODE_NAME (the DaemonSet's) works too
    monkeypatch.delenv("MCD_NODE_NAME")
    monkeypatch.setenv("NODE_NAME", "from-pod")
    assert parse(["start"]).node_name == "from-pod"
    assert parse(["start", "--node-name", "x", "--builtin-drainer=false"]).builtin_drainer is False


def test_start_without_a_node_name_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    monkeypatch.delenv("MCD_NODE_NAME", raising=False)
    assert main(["start", "--root-mount", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--node-name" in err and "NODE_NAME" in err and "Traceback" not in err


def test_start_with_an_unreadable_kubeconfig_is_a_clear_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(
        ["start", "--node-name", "w", "--root-mount", str(tmp_path), "--kubeconfig", str(tmp_path / "nope")]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert err == f"{tmp_path / 'nope'}: cannot read the kubeconfig: No such file or directory\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["start"],
        ["plan", "new.yaml"],
        ["firstboot-complete-machineconfig"],
    ],
)
def test_every_lock_timeout_defaults_to_the_lock_modules(argv: list[str]) -> None:
    """One default for how long a run waits for the root's lock, whatever the command."""
    from mcd.host.rootlock import DEFAULT_TIMEOUT

    assert parse(argv).lock_timeout == DEFAULT_TIMEOUT
