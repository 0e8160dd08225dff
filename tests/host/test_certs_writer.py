"""The certificate writer's disk side (`mcd.host.certs`): upstream's paths and modes, stale
registry directories removed, nothing rewritten when nothing changed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mcd.host.certs import write_certificates
from mcd.host.root import HostRoot
from mcd.planner.certs import Certificates
from mcd.planner.managed_paths import CLOUD_CA, INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA

CERTS_D = "etc/docker/certs.d"


def certs(**kw: object) -> Certificates:
    base: dict[str, object] = {"resource_version": "1", "rotate": "", "kubelet_ca": b"CA1", "cloud_ca": b"",
                               "pull_secret": b'{"auths":{}}', "registry_cas": {}}  # fmt: skip
    base.update(kw)
    return Certificates(**base)  # type: ignore[arg-type]


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_new_files_get_upstreams_defaults_and_a_trailing_newline(tmp_path: Path) -> None:
    out = write_certificates(HostRoot(tmp_path), certs(registry_cas={"r.example:5000": b"R"}))
    assert sorted(out.files) == sorted([INTERNAL_REGISTRY_PULL_SECRET, KUBELET_CA, CLOUD_CA,
                                        "/etc/docker/certs.d/r.example:5000/ca.crt"])  # fmt: skip
    assert (tmp_path / KUBELET_CA.lstrip("/")).read_bytes() == b"CA1\n"
    assert (tmp_path / CLOUD_CA.lstrip("/")).read_bytes() == b"\n"  # upstream writes it even when empty
    assert (tmp_path / INTERNAL_REGISTRY_PULL_SECRET.lstrip("/")).read_bytes() == b'{"auths":{}}\n'
    ca = tmp_path / CERTS_D / "r.example:5000" / "ca.crt"
    assert ca.read_bytes() == b"R"  # registry CAs are written as given
    assert mode(ca) == 0o644 and mode(ca.parent) == 0o755
    assert mode(tmp_path / KUBELET_CA.lstrip("/")) == 0o644


def test_an_existing_bundle_keeps_its_mode_and_an_unchanged_one_is_not_rewritten(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    path = tmp_path / KUBELET_CA.lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"old\n")
    path.chmod(0o600)
    write_certificates(root, certs())
    assert path.read_bytes() == b"CA1\n" and mode(path) == 0o600
    inode = os.lstat(path).st_ino
    again = write_certificates(root, certs())
    assert not again and os.lstat(path).st_ino == inode


def test_registries_no_longer_listed_are_removed_and_links_and_files_left(tmp_path: Path) -> None:
    root = HostRoot(tmp_path)
    write_certificates(root, certs(registry_cas={"a": b"A", "b": b"B"}))
    base = tmp_path / CERTS_D
    (base / "stray-file").write_text("x")
    (base / "link").symlink_to("a")
    out = write_certificates(root, certs(registry_cas={"b": b"B2"}))
    assert out.removed == ["/etc/docker/certs.d/a"]
    assert out.files == ["/etc/docker/certs.d/b/ca.crt"]
    assert sorted(p.name for p in base.iterdir()) == ["b", "link", "stray-file"]
    assert (base / "b" / "ca.crt").read_bytes() == b"B2"
