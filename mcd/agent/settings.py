"""The agent's settings: one frozen value built from the flags (which default to MCD_* variables)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_METRICS_URL = "127.0.0.1:8797"
DEFAULT_KUBELET_HEALTHZ = "http://localhost:10248/healthz"


@dataclass(frozen=True)
class AgentSettings:
    node_name: str
    root_mount: str = "/rootfs"
    kubeconfig: str = ""
    metrics_url: str = DEFAULT_METRICS_URL
    # the scrape endpoint over TLS (empty: none) and its serving pair (absent: self-signed)
    secure_metrics_url: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    kubelet_healthz_enabled: bool = True
    kubelet_healthz_endpoint: str = DEFAULT_KUBELET_HEALTHZ
    builtin_drainer: bool = False
    # a node with no mcd state: record its desiredConfig as current as it is (`--adopt`) instead
    # of writing it as its first config (docs/agent.md "Nodes mcd did not provision")
    adopt: bool = False
    # upstream's informer resync is minutes; the loop re-reads everything on each
    resync_seconds: float = 600.0
    watch_timeout_seconds: int = 300
    kubelet_poll_seconds: float = 30.0
    # upstream's drain handshake waits (spec §7): 1 h for the drain, 10 min for the uncordon
    drain_timeout_seconds: float = 3600.0
    uncordon_timeout_seconds: float = 600.0
    # built-in drainer: one attempt's budget and the pause after a refused eviction (upstream's library)
    eviction_retry_seconds: float = 5.0
    # the first wait before a failed sync is tried again (doubling to 60 s: upstream's node queue)
    retry_start_seconds: float = 1.0
    rpmostree_binary: str = "rpm-ostree"
    # watchers (mcd/agent/watch): what a config drift does to the node, see docs/watchers.md
    drift_policy: str = "degrade"
    ssh_login_monitor: bool = True
    config_dir: str = ""  # MachineConfigs from a mounted directory instead of the API server
    config_grace_seconds: float = 5.0
    # /readyz fails once the API server has not answered this long; liveness never does
    # (mcd.agent.health; docs/agent.md "Health")
    api_unreachable_seconds: float = 300.0
