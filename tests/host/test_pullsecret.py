"""mcd.host.pullsecret: /run/ostree/auth.json points at the pull secret rpm-ostree pulls with."""

from __future__ import annotations

import os
from pathlib import Path

from mcd.host.pullsecret import KUBELET_AUTH, MERGED_AUTH, OSTREE_AUTH, link_pull_secret
from mcd.host.root import HostRoot


def _link(root: Path) -> str:
    return os.readlink(root / OSTREE_AUTH.lstrip("/"))


def test_the_kubelet_secret_without_a_merged_one(tmp_path: Path) -> None:
    assert link_pull_secret(HostRoot(tmp_path)) == KUBELET_AUTH
    assert _link(tmp_path) == KUBELET_AUTH


def test_the_merged_secret_when_it_is_json(tmp_path: Path) -> None:
    merged = tmp_path / MERGED_AUTH.lstrip("/")
    merged.parent.mkdir(parents=True)
    merged.write_text('{"auths": {}}')
    assert link_pull_secret(HostRoot(tmp_path)) == MERGED_AUTH
    assert _link(tmp_path) == MERGED_AUTH
    # not JSON (half written, say): back to the kubelet's, replacing the old link
    merged.write_text('{"auths": ')
    assert link_pull_secret(HostRoot(tmp_path)) == KUBELET_AUTH
    assert _link(tmp_path) == KUBELET_AUTH
    assert os.listdir(tmp_path / "run/ostree") == ["auth.json"]  # no temporary left


def test_a_file_in_the_way_is_replaced(tmp_path: Path) -> None:
    auth = tmp_path / OSTREE_AUTH.lstrip("/")
    auth.parent.mkdir(parents=True)
    auth.write_text("stale")
    link_pull_secret(HostRoot(tmp_path))
    assert _link(tmp_path) == KUBELET_AUTH
