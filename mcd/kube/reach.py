"""API outages told once: `ApiReach` is fed by the API client with every answer.

It logs an outage once when it starts (401: the token; 403: RBAC; no answer or 5xx: the server,
the network, the kubeconfig), at WARNING or ERROR so the default log level shows it, and once
when it ends, and says how long ago the API last answered (the agent's health rule reads it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

LOG = logging.getLogger(__name__)

# an outage is the server down (no answer, or 5xx: one outage, however it shows) or the
# credentials refused (401); a 403 is RBAC's answer to one request, not an outage
_DOWN, _UNAUTHORIZED, _FORBIDDEN = "down", "unauthorized", "forbidden"


def _kind(status: int) -> str | None:
    if status == 0 or status >= 500:
        return _DOWN
    if status == 401:
        return _UNAUTHORIZED
    if status == 403:
        return _FORBIDDEN
    return None


@dataclass(frozen=True)
class Hints:
    """What an outage message tells the operator to check, per identity."""

    credentials: str  # on a 401
    rbac: str  # on a 403


SERVICE_ACCOUNT_HINTS = Hints(
    "the token (a revoked or expired service account token, or the kubeconfig's user)",
    "the agent's RBAC (its service account's ClusterRole and binding, manifests/)",
)


def kubeconfig_hints(path: str) -> Hints:
    """The reader's hints when it is `--kubeconfig` (a host install: the kubelet's identity), not
    the pod's ServiceAccount: the account to check is that file's user, which the API server's
    own message names (`User "system:node:…" cannot …`)."""
    return Hints(
        f"the credentials of the kubeconfig {path} (its user's token or client certificate)",
        f"the RBAC of the kubeconfig {path}'s user, named in the message (the kubelet's identity "
        "system:node:<node> needs manifests/host/ applied)",
    )


NODE_WRITER_HINTS = Hints(
    "the node writer's credentials (the kubelet's kubeconfig and its client certificate: expired, "
    "or rotated by the kubelet, when the agent reads it again)",
    "the node's own authorization (the Node authorizer and the system:node role let a kubelet write "
    "its own Node and Events, and evict the pods bound to it)",
)


class ApiReach:
    """The API server's reachability as this process sees it; every method is thread-safe."""

    def __init__(
        self, url: str, clock: Callable[[], float] = time.monotonic, *, hints: Hints = SERVICE_ACCOUNT_HINTS
    ) -> None:
        self.url = url
        self.hints = hints
        self._clock = clock
        self._lock = threading.Lock()
        # the process start counts as reached: the limit runs from there
        self._last_ok = clock()
        self._streams = 0
        self._outage: str | None = None  # the kind of the outage going on (not 403s)
        self._outage_since = 0.0
        self._outage_failures = 0
        self._forbidden: set[str] = set()  # requests answered 403 (RBAC is per request)

    # -- fed by the client

    def answered(self, status: int, what: str, message: str) -> None:
        """An answer (`status`) or a transport failure (0) of request `what`."""
        kind = _kind(status)
        if kind is None:
            self._ok(what)
        elif kind == _FORBIDDEN:
            self._ok_transport()
            with self._lock:
                first = what not in self._forbidden
                self._forbidden.add(what)
            if first:
                LOG.warning(
                    "the API server at %s forbids %s (403): %s; check %s - retrying with backoff",
                    self.url,
                    what,
                    message,
                    self.hints.rbac,
                )
        else:
            self._failed(kind, status, message)

    def stream(self, opened: bool) -> None:
        """A watch stream opened (True) or ended: while one is open the API is reached."""
        with self._lock:
            # an open stream was the API reached until this moment: the limit runs from its end,
            # not from the last request answered before it opened (maybe minutes ago)
            if not opened and self._streams > 0 and self._outage is None:
                self._last_ok = self._clock()
            self._streams += 1 if opened else -1

    def _ok_transport(self) -> None:
        with self._lock:
            self._last_ok = self._clock()
            outage, self._outage = self._outage, None
            since, failures = self._outage_since, self._outage_failures
        if outage == _DOWN:
            LOG.warning(
                "the API server at %s answers again, after %.0fs and %d failed request(s)",
                self.url,
                self._clock() - since,
                failures,
            )
        elif outage == _UNAUTHORIZED:
            LOG.warning("the API server at %s accepts the agent's credentials again", self.url)

    def _ok(self, what: str) -> None:
        self._ok_transport()
        with self._lock:
            was_forbidden = what in self._forbidden
            self._forbidden.discard(what)
        if was_forbidden:
            LOG.warning("the API server at %s allows %s again", self.url, what)

    def _failed(self, kind: str, status: int, message: str) -> None:
        with self._lock:
            # a 401 is an answer, but not a usable one: `_last_ok` stays where it was
            if self._outage == kind:
                self._outage_failures += 1
                return
            now = self._clock()
            # a watch open until now reached the API until now: the limit runs from here, whether
            # the stream's end or a request's failure is told first when the server goes away
            if self._streams > 0 and self._outage is None:
                self._last_ok = now
            self._outage, self._outage_since, self._outage_failures = kind, now, 1
        if kind == _UNAUTHORIZED:
            LOG.error(
                "the API server at %s rejects the agent's credentials (401 Unauthorized): %s; check "
                "%s - retrying with backoff",
                self.url,
                message,
                self.hints.credentials,
            )
        elif status == 0:
            LOG.warning(
                "cannot reach the API server at %s: %s; check the kubeconfig's server address, the "
                "network and that the API server runs - retrying with backoff",
                self.url,
                message,
            )
        else:
            LOG.warning("the API server at %s is failing: %s - retrying with backoff", self.url, message)

    # -- read by the health rule

    def unreached_for(self) -> float:
        """Seconds since the API server last answered usefully (0 while a watch is open)."""
        with self._lock:
            if self._streams > 0 and self._outage is None:
                return 0.0
            return max(0.0, self._clock() - self._last_ok)
