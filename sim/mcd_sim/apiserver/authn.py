"""Who a request comes from, as kube-apiserver's authenticators decide it.

A bearer token maps to the user it was issued for (the static token file's way); a client
certificate signed by the server's client CA names its user in the subject's CN and its groups
in the O values (the x509 authenticator's way). The server's own admin token is `system:admin`
in `system:masters`. Tokens are never logged; the audit log records the user only.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass
from typing import Any

AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...]


ADMIN = User("system:admin", ("system:masters", AUTHENTICATED))
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


def service_account(namespace: str, name: str) -> User:
    """The user a ServiceAccount's token authenticates as."""
    return User(
        f"system:serviceaccount:{namespace}:{name}",
        ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED),
    )


def node(name: str) -> User:
    """The user a kubelet's client certificate authenticates as (CN system:node:NAME, O system:nodes)."""
    return User(f"system:node:{name}", ("system:nodes", AUTHENTICATED))


def user_named(name: str) -> User:
    """A user by name, with the groups kube-apiserver gives that kind of name: a ServiceAccount's
    (`system:serviceaccount:NS:NAME`), a kubelet's (`system:node:NAME`), else authenticated only."""
    kind, _, rest = name.partition(":serviceaccount:")
    if kind == "system" and rest.count(":") == 1:
        namespace, account = rest.split(":")
        return service_account(namespace, account)
    if name.startswith("system:node:") and len(name) > len("system:node:"):
        return node(name.removeprefix("system:node:"))
    return User(name, (AUTHENTICATED,))


class Authenticator:
    """Bearer tokens to users; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: list[tuple[bytes, User]] = []

    def add_token(self, user: User, token: str | None = None) -> str:
        """Accept `token` (random when None) as `user`; returns the token."""
        token = token or secrets.token_urlsafe(32)
        with self._lock:
            self._tokens.append((token.encode(), user))
        return token

    def by_header(self, authorization: str) -> User | None:
        """The user of an `Authorization: Bearer …` header; None when it names none."""
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token:  # the scheme is case-insensitive (RFC 7235)
            return None
        given = token.strip().encode()
        found = None
        with self._lock:
            tokens = list(self._tokens)
        for known, user in tokens:  # every token compared: no early exit to time
            if hmac.compare_digest(given, known):
                found = user
        return found

    @staticmethod
    def by_certificate(peer: dict[str, Any] | None) -> User | None:
        """The user of a verified client certificate (`ssl.SSLSocket.getpeercert()`), if any."""
        if not peer:
            return None
        subject = [attr for rdn in peer.get("subject", ()) for attr in rdn]
        names = [value for key, value in subject if key == "commonName"]
        if not names:
            return None
        groups = tuple(value for key, value in subject if key == "organizationName")
        return User(names[0], (*groups, AUTHENTICATED))
