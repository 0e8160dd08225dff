"""The stand-in API server's refusals, as kube-apiserver words them.

`ApiError` is raised by the server's store, request handling, selectors and fault rules; over
HTTP it becomes the `metav1.Status` body and code kube-apiserver would send (`status()`), and
in-process callers of the server (the controller stand-in, the tests) catch it directly. The
functions build one per case (NotFound, AlreadyExists, Conflict, Invalid, …) with kube-apiserver's
reason, code and message. Simulator only: the agent sees these as HTTP answers, which its own
client turns into `mcd.kube.errors.ApiError`.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the server refuses; `status()` is the body kube-apiserver would send."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after  # seconds, sent as Retry-After (client-go then retries by itself)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        details = dict(self.details or {})
        if self.retry_after is not None:
            details["retryAfterSeconds"] = self.retry_after
        if details:
            body["details"] = details
        body["code"] = self.code
        return body


def _details(kind: str, name: str, group: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def qualified(plural: str, group: str) -> str:
    """`nodes` or `machineconfigs.machineconfiguration.openshift.io`, as messages name resources."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{qualified(plural, group)} "{name}" not found', _details(plural, name, group)
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{qualified(plural, group)} "{name}" already exists',
        _details(plural, name, group),
    )


def conflict(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        _details(plural, name, group),
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422: `causes` are (field, message) pairs."""
    text = "; ".join(f"{field}: {msg}" for field, msg in causes)
    details = _details(kind, name, group)
    details["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]
    return ApiError(
        422, "Invalid", f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}', details
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def method_not_allowed() -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str, plural: str, group: str, name: str) -> ApiError:
    details: dict[str, Any] = {"kind": plural}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return ApiError(403, "Forbidden", message, details)


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def unsupported_media_type(accepted: tuple[str, ...]) -> ApiError:
    """415 for a patch type the resource does not take (server-side apply is not served at all)."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )
