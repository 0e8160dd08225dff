"""`mcd-sim sim-cluster`: serve the stand-in API server until SIGINT or SIGTERM."""

from __future__ import annotations

import base64
import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from mcd.host.atomicfs import atomic_write
from mcd_sim.apiserver import ApiServer
from mcd_sim.apiserver.authn import user_named


@dataclass(frozen=True)
class SimClusterOptions:
    kubeconfig: Path
    listen: tuple[str, int]
    nodes: tuple[str, ...]
    audit_log_path: Path | None
    # (user name, kubeconfig to write for it)
    users: tuple[tuple[str, Path], ...] = ()
    # YAML files or directories of ClusterRoles, Roles and bindings: RBAC enforced when any
    rbac: tuple[Path, ...] = ()


def parse_user(text: str) -> tuple[str, Path]:
    """`USER=FILE`; raises ValueError with a readable message."""
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--user {text!r}: expected USER=FILE, e.g. system:node:worker-0=kubelet.kubeconfig")
    return name, Path(path)


def load_rbac(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    """The objects of the YAML files (a directory: its *.yaml files, not its subdirectories)."""
    out: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.glob("*.yaml")) if path.is_dir() else [path]
        for file in files:
            try:
                docs = list(yaml.safe_load_all(file.read_text()))
            except (OSError, yaml.YAMLError) as exc:
                raise ValueError(f"--rbac {file}: cannot read: {exc}") from None
            out.extend(d for d in docs if isinstance(d, dict))
    return out


def _write_user_kubeconfig(server: ApiServer, name: str, path: Path) -> None:
    """A kubeconfig for user `name`: a kubelet (`system:node:…`) gets a client certificate, as
    kubelets authenticate; anyone else a bearer token."""
    user = user_named(name)
    body: dict[str, Any]
    if user.name.startswith("system:node:") and server.cert is not None:
        cert, key = server.issue_client_cert(user)
        body = {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        }
    else:
        body = {"token": server.add_token(user)}
    data = yaml.safe_dump(server.kubeconfig(user=body), sort_keys=False).encode()
    atomic_write(path, data, 0o600)


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (port 0 picks a free one); raises ValueError with a readable message."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:0")
    return host.strip("[]"), int(port)


def serve(
    options: SimClusterOptions, *, ready: threading.Event | None = None, stop: threading.Event | None = None
) -> int:
    """Start the server, create the nodes, write the kubeconfig (last: a script waits for the
    file), then serve until SIGINT/SIGTERM (or `stop`, for tests that run it in a thread)."""
    stop = stop or threading.Event()
    host, port = options.listen
    server = ApiServer(options.listen, audit_log_path=options.audit_log_path)
    for name in options.nodes:
        server.add_node(name)
    if options.rbac:
        server.enforce_rbac(load_rbac(options.rbac))
    previous: dict[signal.Signals, object] = {}
    in_main = threading.current_thread() is threading.main_thread()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    if in_main:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, on_signal)
    try:
        try:
            server.start()
        except OSError as exc:
            raise ValueError(f"--listen {host}:{port}: cannot listen: {exc.strerror or exc}") from None
        with server:
            for name, path in options.users:
                _write_user_kubeconfig(server, name, path)
            server.write_kubeconfig(options.kubeconfig)
            # the token stays in the kubeconfig (mode 0600); never printed or logged
            sys.stderr.write(f"mcd-sim sim-cluster: serving {server.url}; kubeconfig {options.kubeconfig}\n")
            sys.stderr.flush()
            if ready is not None:
                ready.set()
            while not stop.wait(1.0):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    sys.stderr.write("mcd-sim sim-cluster: stopped\n")
    return 0
