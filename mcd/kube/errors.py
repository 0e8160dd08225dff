"""What the API client raises for a refusal or failure of the API server.

`ApiError` carries the HTTP status (0: no answer) and says whether the request is worth retrying as
is; `NotFoundError`, `ConflictError` and `GoneError` are the statuses callers handle. They are
`McdError`s, so an agent sync that does not handle one reports its message on the node.
"""

from __future__ import annotations

from mcd.node.errors import McdError


class ApiError(McdError):
    """The API server refused or failed a request; `status` 0 means it could not be reached."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """Worth retrying as is: unreachable, throttled, conflicting or failing server side."""
        return self.status in (0, 409, 429) or self.status >= 500


class NotFoundError(ApiError):
    pass


class ConflictError(ApiError):
    pass


class GoneError(ApiError):
    """410: the resourceVersion a watch resumed from is too old; list again."""
