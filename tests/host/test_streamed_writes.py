"""Large files are written and verified as streams: never held whole, atomic all the same.

The chunking is tested directly (what a write reads, when the stream fails half-way), and end to
end: `start --once-from` and `check-disk` with a file above what the parser keeps, while
decoding a whole file (`File.data` of a file not kept) fails the test.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcd_sim.sandbox import make_sandbox_root

from mcd.cli.main import main
from mcd.config.contents import ContentsError
from mcd.config.ignition_model import KEEP_DATA_UP_TO, File
from mcd.host import atomicfs
from mcd.host.streamdata import Stream

PIECE = 1 << 16


def _pieces(count: int, seen: list[int], fail_at: int | None = None) -> Iterator[bytes]:
    for i in range(count):
        if i == fail_at:
            raise ContentsError(("source",), "bad data half-way")
        seen.append(PIECE)
        yield bytes([i % 256]) * PIECE


def test_a_stream_is_written_piece_by_piece_and_compared_the_same_way(tmp_path: Path) -> None:
    target = tmp_path / "big"
    seen: list[int] = []
    stream = Stream(8 * PIECE, lambda: _pieces(8, seen))
    assert atomicfs.atomic_write(target, stream, 0o644)
    assert target.read_bytes() == b"".join(bytes([i]) * PIECE for i in range(8))
    assert max(seen) == PIECE  # no piece larger than the source gave
    # identical contents are compared as they stream in, and not written again
    assert not atomicfs.atomic_write(target, stream, 0o644)
    # a difference in the last piece is found
    other = Stream(8 * PIECE, lambda: (bytes([i if i < 7 else 99]) * PIECE for i in range(8)))
    assert not atomicfs.is_exactly(target, other, 0o644)


def test_a_stream_failing_half_way_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "big"
    target.write_bytes(b"old")
    target.chmod(0o644)
    with pytest.raises(ContentsError, match="bad data half-way"):
        atomicfs.atomic_write(target, Stream(8 * PIECE, lambda: _pieces(8, [], fail_at=5)), 0o644)
    assert target.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["big"]


def test_a_stream_shorter_than_measured_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "big"
    with pytest.raises(ValueError, match="produced 131072 bytes, expected 196608"):
        atomicfs.atomic_write(target, Stream(3 * PIECE, lambda: _pieces(2, [])), 0o644)
    assert os.listdir(tmp_path) == []


def test_start_and_check_disk_never_hold_a_large_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    size = KEEP_DATA_UP_TO + (1 << 20)  # above what the parser keeps: decoded on demand
    blob = base64.b64encode(gzip.compress(bytes(size))).decode()
    config = tmp_path / "big.json"
    entry = {"path": "/etc/big", "contents": {"source": f"data:;base64,{blob}", "compression": "gzip"}}
    config.write_text(json.dumps({"ignition": {"version": "3.2.0"}, "storage": {"files": [entry]}}))
    whole = File.data

    def refuse_whole(self: File) -> bytes:
        assert self.kept, f"{self.path} decoded whole"
        return whole.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(File, "data", property(refuse_whole))
    root = make_sandbox_root(tmp_path / "root")
    assert main(["start", "--once-from", str(config), "--root-mount", str(root), "--skip-reboot"]) == 0
    assert (root / "etc/big").stat().st_size == size
    assert main(["check-disk", "--root-mount", str(root)]) == 0
    with (root / "etc/big").open("r+b") as f:  # one byte off at the end: found by the streamed compare
        f.seek(size - 1)
        f.write(b"x")
    capsys.readouterr()
    assert main(["check-disk", "--root-mount", str(root)]) == 2
    assert 'content mismatch for file "/etc/big"' in capsys.readouterr().out


def test_contents_failing_mid_stream_roll_the_update_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    size = KEEP_DATA_UP_TO + (1 << 20)
    blob = base64.b64encode(gzip.compress(bytes(size))).decode()
    config = tmp_path / "big.json"
    entry = {"path": "/etc/big", "contents": {"source": f"data:;base64,{blob}", "compression": "gzip"}}
    config.write_text(json.dumps({"ignition": {"version": "3.2.0"}, "storage": {"files": [entry]}}))
    streamed = File.iter_data

    def failing(self: File) -> Iterator[bytes]:
        for n, piece in enumerate(streamed(self)):
            if n == 3:  # as if the source went bad after a few pieces were on disk
                raise ContentsError(("source",), f"contents of {self.path} cannot be decoded")
            yield piece

    monkeypatch.setattr(File, "iter_data", failing)
    root = make_sandbox_root(tmp_path / "root")
    before = {p for p in root.rglob("*")}
    assert main(["start", "--once-from", str(config), "--root-mount", str(root), "--skip-reboot"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "mcd: update to big.json failed and was rolled back: write 1 file(s): /etc/big: "
        "contents of /etc/big cannot be decoded\n"
    )
    # no temp file, no half file, no record: only the daemon's (empty) directories may stay
    left = {p for p in root.rglob("*")} - before
    assert all(p.is_dir() for p in left), left
