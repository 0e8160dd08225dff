"""`mcd sim-cluster`: serve the stand-in API server until SIGINT or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from mcd_sim.apiserver import ApiServer


@dataclass(frozen=True)
class SimClusterOptions:
    kubeconfig: Path
    listen: tuple[str, int]
    nodes: tuple[str, ...]
    audit_log_path: Path | None


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
            server.write_kubeconfig(options.kubeconfig)
            # the token stays in the kubeconfig (mode 0600); never printed or logged
            sys.stderr.write(f"mcd sim-cluster: serving {server.url}; kubeconfig {options.kubeconfig}\n")
            sys.stderr.flush()
            if ready is not None:
                ready.set()
            while not stop.wait(1.0):
                pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]
    sys.stderr.write("mcd sim-cluster: stopped\n")
    return 0
