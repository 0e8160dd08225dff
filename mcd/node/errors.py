"""The error a node reports: its message becomes the node's Degraded reason.

The agent's kinds of it live in `mcd.agent.errors`; the API client's refusals
(`mcd.kube.errors.ApiError`) are one too, so a refused request the sync does not handle is
reported the same way.
"""

from __future__ import annotations


class McdError(RuntimeError):
    """An error the daemon reports on the node (Degraded with this message as the reason)."""
