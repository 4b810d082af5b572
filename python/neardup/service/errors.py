"""The service's error type and its JSON body ``{"error": {"code", "message"}}``.

Every error the service sends has a stable machine-readable ``code`` (listed in ``CODES`` with
its HTTP status) and a message naming the offending field and value.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["CODES", "RETRY_AFTER_SECONDS", "ApiError", "error_body"]

# code -> HTTP status. The client maps the code back to an exception class.
CODES: dict[str, int] = {
    "malformed_json": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "unsupported_media_type": 415,
    "body_too_large": 413,
    "text_too_large": 413,
    "batch_too_large": 413,
    "missing_field": 422,
    "unknown_field": 422,
    "invalid_type": 422,
    "invalid_value": 422,
    "empty_text": 422,
    "invalid_id": 422,
    "invalid_k": 422,
    "invalid_fingerprint": 422,
    "invalid_timestamp": 422,
    "internal_error": 500,
    "store_damaged": 500,
    "unavailable": 503,
}
RETRY_AFTER_SECONDS = 1
"""The ``Retry-After`` of a 503: the store is down, loading or the service is shutting down."""


class ApiError(Exception):
    """An error answered as ``{"error": {"code": code, "message": message}}`` with its status."""

    def __init__(
        self, code: str, message: str, *, status: int | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status if status is not None else CODES[code]
        self.field = field

    def body(self) -> bytes:
        """The JSON body of this error."""
        return error_body(self.code, self.message, self.field)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The headers this status calls for: ``WWW-Authenticate`` (401), ``Retry-After`` (503)."""
        if self.status == 401:
            return [(b"www-authenticate", b"Bearer")]
        if self.status == 503:
            return [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]
        return []


def error_body(code: str, message: str, field: str | None = None) -> bytes:
    """JSON bytes of an error object."""
    err: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        err["field"] = field
    return orjson.dumps({"error": err})
