"""`mcd-sim simulate --nodes N` shows each node's progress on stderr as it goes (issue 28):
a line per change of a node's state, configs or cordon, with the count Done on the target; the
JSON of `-o json` on stdout stays whole."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from mcd_sim.apiserver.store import WatchEvent
from mcd_sim.cli import main
from mcd_sim.simulate import PoolProgress

from mcd.node import annotations as ann

REPO = Path(__file__).resolve().parents[2]
OLD, NEW = REPO / "examples" / "old.yaml", REPO / "examples" / "new.yaml"


def _node(name: str, state: str, current: str, desired: str, cordoned: bool = False) -> WatchEvent:
    annotations = {ann.STATE: state, ann.CURRENT_CONFIG: current, ann.DESIRED_CONFIG: desired}
    obj = {
        "kind": "Node",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"unschedulable": cordoned},
    }
    return WatchEvent("MODIFIED", f"Node/{name}", 1, obj, None)


def test_a_line_per_change_with_the_count_done_as_of_that_change() -> None:
    out = io.StringIO()
    ticks = iter([0.0, 1.5, 2.0, 3.25, 4.0])
    progress = PoolProgress(["w-0", "w-1"], out, clock=lambda: next(ticks))
    progress.target = "B"
    progress.hook(_node("w-0", "Working", "A", "B", cordoned=True))
    progress.hook(_node("w-0", "Working", "A", "B", cordoned=True))  # no change: no line
    progress.hook(_node("other", "Working", "A", "B"))  # not in the pool
    progress.hook(_node("w-0", "Done", "B", "B"))
    assert out.getvalue() == ""  # written by flush, from the waiting thread, not by the hook
    progress.flush()
    progress.hook(_node("w-1", "Done", "B", "B"))
    progress.flush()
    assert out.getvalue().splitlines() == [
        "[    1.5 s] w-0 Working current=A desired=B cordoned  (Done on B: 0/2)",
        "[    2.0 s] w-0 Done current=B desired=B  (Done on B: 1/2)",
        "[    3.2 s] w-1 Done current=B desired=B  (Done on B: 2/2)",
    ]
    assert progress.lines == out.getvalue().splitlines()


@pytest.mark.allow_commands  # one `python -m mcd start` per node
def test_simulate_nodes_prints_each_nodes_progress_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "simulate",
        "--nodes",
        "2",
        "--old",
        str(OLD),
        "--new",
        str(NEW),
        "--workdir",
        str(tmp_path),
        "-o",
        "json",
    ]
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)  # stdout is the JSON alone
    assert result["allDone"]
    lines = captured.err.splitlines()
    for node in ("worker-00", "worker-01"):
        mine = [line for line in lines if f"] {node} " in line]
        assert any(" Working " in line for line in mine), lines
        assert mine[-1].split("]", 1)[1].split("  (")[0].split()[:2] == [node, "Done"], lines
    assert lines[-1].endswith(": 2/2)"), lines
