"""Upstream's kubelet health poll: consecutive transport failures become `mcd_kubelet_state`.

As upstream, a body other than `ok` is only logged (the kubelet answered, so it is alive);
the alert `KubeletHealthState` fires on `mcd_kubelet_state > 2`. Anything that is not an
answer counts as a failure: a refused connection, a timeout, and also something on the port
that does not speak HTTP (`http.client.BadStatusLine`, which is no OSError).
"""

from __future__ import annotations

import http.client
import logging
import threading
import urllib.request

from prometheus_client import Gauge

LOG = logging.getLogger(__name__)

TIMEOUT = 30.0


class KubeletHealth:
    def __init__(self, url: str, interval: float, gauge: Gauge, stop: threading.Event) -> None:
        self.url, self.interval, self.gauge, self.stop = url, interval, gauge, stop
        self.failures = 0

    def check(self) -> None:
        """One poll: reset the count on an answer, add one on a transport failure."""
        try:
            with urllib.request.urlopen(self.url, timeout=TIMEOUT) as resp:  # a local endpoint given by flag
                body = resp.read(64).decode(errors="replace").strip()
            self.failures = 0
            if body != "ok":
                LOG.info("kubelet health at %s answered %r", self.url, body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            self.failures += 1
            LOG.warning(
                "kubelet health check failed (%d in a row): %s", self.failures, str(exc) or type(exc).__name__
            )
        self.gauge.set(self.failures)

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            self.check()
