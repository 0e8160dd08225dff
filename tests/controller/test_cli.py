"""`mcd pool-controller`'s command line: bad input is one line and exit 1, never a traceback;
`--once` against a cluster it cannot reach, or with a pool it cannot act on, exits 1 saying why."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes import add_nodes, mc, pool
from mcd_sim.apiserver import ApiServer

from mcd.cli.main import main


@pytest.mark.parametrize("flag", [["--lease-duration", "1"], ["--interval", "0"], ["--eviction-retry", "0"]])
def test_a_bad_flag_value_is_one_line(capsys: pytest.CaptureFixture[str], flag: list[str]) -> None:
    assert main(["pool-controller", *flag, "--kubeconfig", "/nonexistent"]) == 1
    out, err = capsys.readouterr()
    want = "mcd: --lease-duration must be at least 3 seconds, --interval and --eviction-retry positive\n"
    assert (out, err) == ("", want)


def test_an_unreadable_kubeconfig_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert main(["pool-controller", "--kubeconfig", str(missing), "--once"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"{missing}: cannot read the kubeconfig: No such file or directory\n"


def test_once_against_a_failing_server_says_why(
    sim: ApiServer, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim.faults.fail(code=503, times=None, resource="leases")
    assert main(["pool-controller", "--kubeconfig", str(kubeconfig), "--once"]) == 1
    assert any(
        r.getMessage().startswith(
            "cannot take the lease openshift-machine-config-operator/machine-config-controller: "
        )
        and "503" in r.getMessage()
        for r in caplog.records
    )


def test_once_with_a_pool_it_cannot_act_on_exits_1(
    sim: ApiServer, kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim.put(mc("00-worker"))
    sim.put(pool(maxUnavailable="half"))
    add_nodes(sim, 1, "rendered-worker-boot")
    assert main(["pool-controller", "--kubeconfig", str(kubeconfig), "--once"]) == 1
    assert "pool worker: spec.maxUnavailable: 'half' is not an integer or a percentage" in caplog.text
    sim.patch("MachineConfigPool", "worker", {"spec": {"maxUnavailable": 1}})
    assert main(["pool-controller", "--kubeconfig", str(kubeconfig), "--once"]) == 0
