"""A failed undo is reported in upstream's words (spec §2.5): `error rolling back <what>: <aggregate>`.

Upstream's deferred rollbacks run newest first; each failing one wraps the error so far together
with its own in a Kubernetes aggregate (`[undo error, error so far]`; a single error stands alone).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcd_sim.sandbox import make_sandbox_root
from recording import RecordingRunner

from mcd.config.ignition import EMPTY_IGNITION
from mcd.host.root import HostRoot
from mcd.update.transaction import Host, UpdateError, _roll_back, go_aggregate, rollback_error


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("files and units", "error rolling back files writes: [disk full, boom]"),
        ("ssh keys", "error rolling back SSH keys updates: [disk full, boom]"),
        ("os", "error rolling back changes to OS: [disk full, boom]"),
    ],
)
def test_each_phase_has_upstreams_words(phase: str, expected: str) -> None:
    assert rollback_error(phase, "disk full", "boom") == expected


@pytest.mark.parametrize(
    ("messages", "text"),
    [(["a"], "a"), (["a", "b"], "[a, b]"), (["a", "a"], "a"), (["a", "b", "a"], "[a, b]")],
)
def test_aggregate_text_is_kubernetes(messages: list[str], text: str) -> None:
    assert go_aggregate(messages) == text


def _fails(message: str) -> Callable[[], None]:
    def undo() -> None:
        raise OSError(message)

    return undo


def test_failed_undos_nest_newest_first(tmp_path: Path) -> None:
    host = Host.for_root(HostRoot(make_sandbox_root(tmp_path / "root")), RecordingRunner(), coreos=False)
    ran: list[str] = []
    undo = [
        ("files and units", _fails("files gone")),
        ("ssh keys", lambda: ran.append("ssh keys")),
        ("os", _fails("rpm-ostree busy")),
    ]
    with pytest.raises(UpdateError) as info:
        _roll_back(host, EMPTY_IGNITION, undo, failed="b", cause="rebase failed")
    assert str(info.value) == (
        "error rolling back files writes: [files gone, "
        "error rolling back changes to OS: [rpm-ostree busy, rebase failed]]"
    )
    assert ran == ["ssh keys"]  # every undo runs, failed ones too
