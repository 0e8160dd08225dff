"""`mcd simulate --nodes N` end to end: real agents (processes) on sandbox roots, the controller
stand-in rolling the pool, a workload under a PodDisruptionBudget; every verdict is computed from
the API server's commits, and checked here against the audit log too."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from mcd_sim.cli import main
from mcd_sim.fleet import Fleet, FleetOptions
from mcd_sim.poolcontrollers import Change, StandInController

REPO = Path(__file__).resolve().parents[2]
OLD, REBOOT = REPO / "examples" / "old.yaml", REPO / "examples" / "reboot.yaml"
ADMIN = REPO / "examples" / "pool"  # a file, an SSH key and unit, a kernel argument: a drain and a reboot


@pytest.mark.allow_commands  # it spawns one `python -m mcd start` per node
def test_pool_of_four_rolls_two_at_a_time_within_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    picture = tmp_path / "rollout.svg"
    argv = ["simulate", "--nodes", "4", "--max-unavailable", "2", "--pdb", "maxUnavailable=1",
            "--pod-start", "0.5", "--old", str(OLD), "--new", str(REBOOT), "--workdir", str(tmp_path / "run"),
            "-o", "json", "--picture", str(picture)]  # fmt: skip
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    result = json.loads(out)
    # two nodes are asked to move at once (the limit is used), never a third
    assert result["maxConcurrentlyUnavailable"] == 2 and result["maxUnavailable"] == 2
    assert result["pdbViolations"] == 0
    assert result["pdbs"][0]["minHealthy"] >= result["pdbs"][0]["desiredHealthy"] == 3
    assert result["allDone"] and result["poolUpdated"]
    # the pool controller writes over HTTPS: the audit log alone tells the same
    assert result["auditLog"]["maxConcurrentlyUnavailable"] == 2
    assert result["apiRequests"]["others"] > 0 and result["peakRssKiB"]["controller"] > 0
    nodes = result["perNode"]
    assert [n["name"] for n in nodes] == ["worker-00", "worker-01", "worker-02", "worker-03"]
    for n in nodes:  # the change needs a drain and a reboot on every node, in that order
        assert n["desired"] <= n["working"] <= n["drainStart"] <= n["drainEnd"] <= n["rebootStart"], n
        assert n["rebootStart"] < n["rebootEnd"] <= n["done"] <= result["totalSeconds"], n
    assert result["apiRequests"]["agentsPerNode"] > 0 and result["bytesSentByApiServer"] > 0
    assert all(kib and kib > 0 for kib in result["peakRssKiB"]["agents"].values())
    root = ET.parse(picture).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert {"worker-00", "worker-03", "rebooting"} <= {
        t.text for t in root.iter("{http://www.w3.org/2000/svg}text")
    }


@pytest.mark.allow_commands
def test_text_timeline_of_one_node_with_an_admins_config_and_a_reboot_of_two_seconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["simulate", "--nodes", "1", "--old", str(OLD), "--pool", "worker", str(ADMIN),
            "--workdir", str(tmp_path), "--reboot-seconds", "2"]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("== timeline (seconds after the pool was pointed at the new config)")
    assert lines[header + 1].split() == ["node", "desired", "working", "drain", "reboot", "done", "took"]
    node, _, _, _, reboot, _, _ = lines[header + 2].split()
    assert node == "worker-00"
    start, end = (float(t) for t in reboot.split("-"))
    assert end - start >= 2.0  # the node stayed down as long as asked, then booted
    assert "unavailable at once: at most 1 (maxUnavailable 1)" in lines
    assert lines[header + 4].startswith("all nodes Done: yes; pool Updated: yes; rollout took ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-unavailable", "2"], "--max-unavailable: needs --nodes N"),
        (["--pdb", "minAvailable=1"], "--pdb: needs --nodes N"),
        (["-o", "json"], "--output: needs --nodes N"),
    ],
)
def test_pool_flags_need_nodes(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 1
    err = capsys.readouterr().err
    assert err.strip() == message


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "0"], "argument --nodes: expected a whole number of at least 1, not '0'"),
        (["--nodes", "2", "--pdb", "max=1"], "argument --pdb: expected minAvailable=X or maxUnavailable=X"),
        (["--nodes", "2", "--max-unavailable", "x%"], "argument --max-unavailable: expected a count or a"),
    ],
)
def test_bad_pool_flags_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["simulate", *argv])
    assert exited.value.code == 1  # mcd's parser: bad input is 1, as every other command
    first, hint = capsys.readouterr().err.splitlines()  # one line and a hint, not the whole usage
    assert first.startswith("mcd-sim simulate: error: " + message)
    assert hint == "See 'mcd-sim simulate --help'."


class GreedyController(StandInController):
    """A controller that ignores maxUnavailable: every node at once."""

    def roll(self, change: Change) -> None:
        super().roll(change)
        self.inner.set_desired_config(change.rendered["metadata"]["name"])


@pytest.mark.allow_commands
def test_a_controller_breaking_the_limit_fails_the_run(tmp_path: Path) -> None:
    options = FleetOptions(workdir=tmp_path, old=OLD, new=REBOOT, nodes=3, max_unavailable=1, timeout=120,
                           output="json", controller="stand-in")  # fmt: skip
    out = io.StringIO()
    assert Fleet(options, out, GreedyController).run() == 1
    result = json.loads(out.getvalue())
    assert result["maxConcurrentlyUnavailable"] == 3 and result["maxUnavailable"] == 1
    assert sorted(result["maxConcurrentlyUnavailableNodes"]) == ["worker-00", "worker-01", "worker-02"]
    assert result["allDone"]  # everything else went fine: the limit alone fails it


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes", "2", "--pool", "worker"], "--pool: expected the pool's name and files or directories"),
        (["--pool", "worker", str(ADMIN)], "--pool: needs --nodes N"),
        (["--nodes", "2", "--kill-controller-after", "-1"],
         "--kill-controller-after: expected a number of nodes from 0 to 1 (fewer than --nodes)"),
        (["--nodes", "2", "--kill-controller-after", "2"],
         "--kill-controller-after: expected a number of nodes from 0 to 1 (fewer than --nodes)"),
    ],
)  # fmt: skip
def test_pool_input_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", *argv]) == 1
    assert capsys.readouterr().err.strip() == message
