"""OpenAPI documents (filled in with the schemas kubectl's `create -f` validation reads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def document(parts: list[str], query: Mapping[str, str]) -> Any:
    """The document at /openapi/<parts>, or None (404)."""
    return None
