"""Fault injection for tests: make chosen requests fail, stall, drop or expire.

A rule matches requests by verb, resource (plural), name and namespace (None matches any) and
fires for the next `times` matching requests (None: until cleared). Rules are checked in the
order they were added; the first live one that matches decides.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from mcd_sim.apiserver.errors import ApiError, conflict


@dataclass(frozen=True)
class RequestFacts:
    """What a rule can match on."""

    verb: str  # get list watch create update patch delete deletecollection (and "" for non-resource paths)
    resource: str  # plural, "" for discovery and other non-resource paths
    subresource: str
    namespace: str
    name: str


@dataclass
class Rule:
    action: str  # "status" | "reset" | "delay" | "expire" | "conflict"
    verb: str | None = None
    resource: str | None = None
    name: str | None = None
    namespace: str | None = None
    subresource: str | None = None
    times: int | None = 1
    code: int = 500
    reason: str = ""
    message: str = ""
    seconds: float = 0.0
    hits: int = 0

    def matches(self, req: RequestFacts) -> bool:
        verbs = {"watch", "get", "list"} if self.verb == "read" else {self.verb} if self.verb else None
        if self.action == "conflict" and self.verb is None:
            verbs = {"update", "patch"}
        return (
            (verbs is None or req.verb in verbs)
            and (self.resource is None or req.resource == self.resource)
            and (self.name is None or req.name == self.name)
            and (self.namespace is None or req.namespace == self.namespace)
            and (self.subresource is None or req.subresource == self.subresource)
        )


REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Faults:
    """The fault rules of one server; every method is safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._end_watches: Any = None  # set by the server: a callable that ends every open watch

    def fail(
        self,
        code: int = 500,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        message: str = "",
    ) -> Rule:
        """Answer matching requests with a metav1.Status of `code` (500, 429 with Retry-After …)."""
        return self._add(
            Rule(
                "status",
                verb,
                resource,
                name,
                namespace,
                subresource,
                times,
                code,
                REASONS.get(code, "InternalError"),
                message or f"injected fault: HTTP {code}",
            )
        )

    def reset(
        self,
        *,
        times: int | None = 1,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> Rule:
        """Reset the TCP connection instead of answering (the client sees ECONNRESET)."""
        return self._add(Rule("reset", verb, resource, name, namespace, None, times))

    def delay(
        self,
        seconds: float,
        *,
        times: int | None = None,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
    ) -> Rule:
        """Hold matching requests for `seconds` before serving them."""
        return self._add(Rule("delay", verb, resource, name, namespace, None, times, seconds=seconds))

    def conflict(
        self,
        *,
        times: int | None = 1,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        verb: str | None = None,
    ) -> Rule:
        """Answer matching writes (update and patch unless `verb` says) with 409 Conflict."""
        return self._add(Rule("conflict", verb, resource, name, namespace, None, times))

    def expire(self, *, times: int | None = 1, resource: str | None = None, name: str | None = None) -> Rule:
        """Answer matching watch requests with a 410 Expired ERROR event (the client must re-list)."""
        return self._add(Rule("expire", "watch", resource, name, None, None, times))

    def end_watches(self) -> int:
        """End every open watch now, as an apiserver restart or a load balancer would; returns how many."""
        end = self._end_watches
        return int(end()) if end is not None else 0

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, req: RequestFacts) -> list[Rule]:
        """The rules that fire for this request (delays first, then at most one deciding rule);
        consumes one use of each."""
        fired: list[Rule] = []
        with self._lock:
            for rule in list(self._rules):
                if not rule.matches(req):
                    continue
                if rule.action != "delay" and any(r.action != "delay" for r in fired):
                    continue
                rule.hits += 1
                if rule.times is not None:
                    rule.times -= 1
                    if rule.times <= 0:
                        self._rules.remove(rule)
                fired.append(rule)
        return fired


def status_error(rule: Rule, req: RequestFacts) -> ApiError:
    if rule.action == "conflict":
        return conflict(req.resource, "", req.name)
    # a 429 or 503 tells the client when to come back, as kube-apiserver's priority and fairness does
    retry = 1 if rule.code in (429, 503) else None
    return ApiError(rule.code, rule.reason, rule.message, retry_after=retry)
