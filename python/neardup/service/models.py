"""The request and response shapes of the service, for the OpenAPI page at ``/docs``.

(Requests are validated by hand in :mod:`neardup.service.schemas`, which gives every failure its
own error code; these models document the same shapes.) No ``from __future__ import annotations``
here: pydantic evaluates these annotations at runtime, on Python 3.9 too.
"""

from typing import Optional, Union

from pydantic import BaseModel, Field


class CheckRequest(BaseModel):
    """A text (or a fingerprint) to look up. Exactly one of ``text``, ``fingerprint`` and
    ``fingerprint_hex``; no other fields."""

    model_config = {"extra": "forbid"}

    text: Optional[str] = Field(None, description="The text to check (non-empty).")
    fingerprint: Optional[Union[int, str]] = Field(
        None, description="A 64-bit SimHash fingerprint: number, decimal or 0x-hex string."
    )
    fingerprint_hex: Optional[str] = Field(
        None, description="A fingerprint as the answers' fingerprint_hex: 16 hex digits."
    )
    k: Optional[int] = Field(None, ge=0, le=64, description="Max Hamming distance (inclusive).")


class AddRequest(BaseModel):
    """A document to store (``/v1/add``) or to store unless a near-copy exists
    (``/v1/check-and-add``)."""

    id: Union[int, str] = Field(..., description="Signed 64-bit integer or non-empty string.")
    text: str = Field(..., description="The document text (non-empty).")
    timestamp: Optional[float] = Field(
        None,
        description="Seconds since the epoch, in 0..1e15 and not older than the retention "
        "window (default: now); retention counts from it.",
    )


class CheckBatchRequest(BaseModel):
    """Many checks; ``k`` applies to items that give none."""

    items: list[CheckRequest]
    k: Optional[int] = Field(None, ge=0, le=64)


class AddBatchRequest(BaseModel):
    """Many documents, applied in order."""

    items: list[AddRequest]


class Duplicate(BaseModel):
    """A stored near-duplicate: its id, Hamming distance and (when the policy verifies texts)
    the exact similarity in 0..1."""

    id: Union[int, str]
    distance: int
    similarity: Optional[float] = None


class CheckResponse(BaseModel):
    """Near-duplicates of the checked text, nearest first."""

    duplicates: list[Duplicate]


class Document(BaseModel):
    """A stored document: ``/v1/add`` answers its id, fingerprint (also as 16 hex digits, for
    JavaScript, whose numbers lose bits above 2^53) and timestamp; ``GET /v1/documents/{id}``
    its id and text."""

    id: Union[int, str]
    fingerprint: Optional[int] = None
    fingerprint_hex: Optional[str] = None
    timestamp: Optional[float] = None
    text: Optional[str] = None


class NearResponse(BaseModel):
    """The stored documents that pass the verifier against a stored one (itself left out), most
    similar first: what ``/v1/check`` answers for its text."""

    id: Union[int, str]
    near: list[Duplicate]


class CheckAndAddResponse(BaseModel):
    """``added`` is true when no near-duplicate was stored; otherwise they are listed."""

    id: Union[int, str]
    added: bool
    duplicates: list[Duplicate]


class CheckBatchResponse(BaseModel):
    """One result per item, in order."""

    results: list[CheckResponse]


class AddBatchResponse(BaseModel):
    """One stored document per item, in order."""

    results: list[Document]


class CheckAndAddBatchResponse(BaseModel):
    """One result per item, in order; later items see earlier ones."""

    results: list[CheckAndAddResponse]


class ErrorDetail(BaseModel):
    """A stable code, a message naming the field and value, and the field when there is one."""

    code: str
    message: str
    field: Optional[str] = None


class ErrorResponse(BaseModel):
    """Every 4xx/5xx body."""

    error: ErrorDetail
