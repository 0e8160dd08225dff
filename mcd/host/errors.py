"""Errors raised by the host layer."""

from __future__ import annotations


class HostError(RuntimeError):
    """A host operation was refused or failed; the message names the path or command involved."""
