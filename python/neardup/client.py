"""``neardup.Client``: the Python client of the neardup HTTP service (``neardup serve``).

It speaks the same language as :class:`neardup.Deduplicator`: ``check`` returns
:class:`neardup.Match` objects, ``check_and_add`` returns ``(added, matches)``, so code written
against one runs against the other. Built on httpx (in the ``service`` extra): a pooled keep-alive
connection, safe to share between threads.

Errors carry the server's code: :class:`ServiceError` and its subclasses, which also subclass the
standard exception a local call would raise (``ValueError`` for bad input, ``KeyError`` for an
unknown id, ``PermissionError`` for a wrong token, ``ConnectionError`` when the server cannot be
reached).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import quote

from neardup.dedup import Match, check_texts, check_writes
from neardup.textstore import Id, Ids, Timestamps

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "NotFoundError",
    "ServiceError",
    "ServiceUnavailableError",
]


class ServiceError(Exception):
    """An error answered by the service: ``status`` (HTTP), ``code`` (stable, e.g.
    ``"empty_text"``), ``message`` and, when the error is about one field, ``field``."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(status, code, message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.code} (HTTP {self.status}): {self.message}"


class BadRequestError(ServiceError, ValueError):
    """The request was rejected (400, 413, 415, 422): bad JSON, type, size, k, id..."""


class NotFoundError(ServiceError, KeyError):
    """No such document (404)."""

    def __str__(self) -> str:  # KeyError would show the repr of its args
        return ServiceError.__str__(self)


class AuthenticationError(ServiceError, PermissionError):
    """Missing or wrong token (401)."""


class ServiceUnavailableError(ServiceError, ConnectionError):
    """The server cannot be reached, timed out, or is shutting down (503)."""


def _error_class(status: int) -> type[ServiceError]:
    if status == 404:
        return NotFoundError
    if status == 401:
        return AuthenticationError
    if status in (502, 503, 504):
        return ServiceUnavailableError
    if 400 <= status < 500:
        return BadRequestError
    return ServiceError


def _matches(duplicates: Sequence[dict[str, Any]]) -> list[Match]:
    return [Match(d["id"], int(d["distance"]), d.get("similarity")) for d in duplicates]


def _document_path(id: Id, route: str = "/v1/documents") -> str:
    if isinstance(id, bool) or not isinstance(id, (int, str)):
        raise TypeError(f"id must be int or str, got {type(id).__name__}")
    kind = "int" if isinstance(id, int) else "str"
    # (dots too: an id "." or ".." would be a path's dot segment, which URLs resolve away)
    return f"{route}/{quote(str(id), safe='').replace('.', '%2E')}?id_type={kind}"


def _chunks(n: int, size: int) -> Iterator[tuple[int, int]]:
    for start in range(0, n, size):
        yield start, min(n, start + size)


class Client:
    """Client of a neardup service at ``url`` (e.g. ``"http://127.0.0.1:8000"``).

    ``token``: the service's bearer token, if it has one. ``timeout``: seconds per request.
    ``batch_size``: items per request in the ``*_many`` methods (longer lists are sent in
    several requests, in order). Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        url: str = "http://127.0.0.1:8000",
        token: str | None = None,
        timeout: float = 30.0,
        batch_size: int = 1000,
    ) -> None:
        try:
            import httpx
        except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
            raise ModuleNotFoundError(
                "neardup.Client needs httpx: pip install 'neardup[service]'", name="httpx"
            ) from e
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, got {url!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        self.url = url.rstrip("/")
        self.batch_size = batch_size
        headers = {"accept": "application/json"}
        if token is not None:
            headers["authorization"] = f"Bearer {token}"
        self._httpx = httpx
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    # -- plumbing -----------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        httpx = self._httpx
        content = None
        headers = None
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
            headers = {"content-type": "application/json"}
        try:
            response = self._http.request(method, path, content=content, headers=headers)
        except httpx.TimeoutException as e:
            raise ServiceUnavailableError(0, "timeout", f"{method} {path}: timed out ({e})") from e
        except httpx.TransportError as e:
            raise ServiceUnavailableError(
                0, "unreachable", f"{method} {self.url}{path}: {e}"
            ) from e
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 300:  # (no route of the service redirects)
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict):
                code, message = str(err.get("code")), str(err.get("message"))
                field = err.get("field")
            else:
                code, message, field = f"http_{response.status_code}", response.text[:500], None
            raise _error_class(response.status_code)(response.status_code, code, message, field)
        return data

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # -- single documents ---------------------------------------------------------------------

    def check(
        self,
        text: str | None = None,
        k: int | None = None,
        *,
        fingerprint: int | None = None,
    ) -> list[Match]:
        """Stored near-duplicates of ``text`` (or of a 64-bit ``fingerprint``: Hamming distance
        <= k only, unverified), best first."""
        body: dict[str, Any] = {"fingerprint": fingerprint} if text is None else {"text": text}
        if k is not None:
            body["k"] = k
        return _matches(self._request("POST", "/v1/check", body)["duplicates"])

    def add(self, id: Id, text: str, timestamp: float | None = None) -> int:
        """Store ``text`` under ``id`` (replacing it); durable when this returns. Returns the
        fingerprint."""
        body = self._items([id], [text], [timestamp], one=True)[0]
        return int(self._request("POST", "/v1/add", body)["fingerprint"])

    def check_and_add(
        self, id: Id, text: str, timestamp: float | None = None
    ) -> tuple[bool, list[Match]]:
        """Store ``text`` unless a near-duplicate is stored, atomically; ``(added, matches)``."""
        body = self._items([id], [text], [timestamp], one=True)[0]
        result = self._request("POST", "/v1/check-and-add", body)
        return bool(result["added"]), _matches(result["duplicates"])

    def get(self, id: Id) -> str:
        """The stored text of ``id``; :class:`NotFoundError` (a ``KeyError``) if unknown."""
        return str(self.get_document(id).get("text"))

    def get_document(self, id: Id) -> dict[str, Any]:
        """The stored record of ``id`` (``{"id", "text", ...}``)."""
        return dict(self._request("GET", _document_path(id)))

    def near(self, id: Id) -> list[Match]:
        """The stored documents that pass the verifier against the stored ``id`` (itself left
        out), most similar first; :class:`NotFoundError` (a ``KeyError``) if unknown."""
        return _matches(self._request("GET", _document_path(id, "/v1/near"))["near"])

    def remove(self, id: Id) -> None:
        """Forget ``id``; :class:`NotFoundError` (a ``KeyError``) if unknown."""
        self._request("DELETE", _document_path(id))

    delete = remove

    # -- batches ------------------------------------------------------------------------------

    def check_many(self, texts: Sequence[str], k: int | None = None) -> list[list[Match]]:
        """:meth:`check` for each text, in order."""
        check_texts(texts)
        out: list[list[Match]] = []
        for a, b in _chunks(len(texts), self.batch_size):
            body: dict[str, Any] = {"items": [{"text": t} for t in texts[a:b]]}
            if k is not None:
                body["k"] = k
            out.extend(
                _matches(r["duplicates"])
                for r in self._request("POST", "/v1/check/batch", body)["results"]
            )
        return out

    @staticmethod
    def _items(
        ids: Ids, texts: Sequence[str], timestamps: Timestamps | None, *, one: bool = False
    ) -> list[dict[str, Any]]:
        # (every item checked before the first chunk is sent: a bad one sends nothing; ``one``:
        # the single write's, named as its arguments)
        id_list, tss = check_writes(ids, texts, timestamps, None, one=one)
        items: list[dict[str, Any]] = []
        for id, text, ts in zip(id_list, texts, tss):
            item: dict[str, Any] = {"id": id, "text": text}
            if ts is not None:
                item["timestamp"] = ts
            items.append(item)
        return items

    def add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
    ) -> list[int]:
        """:meth:`add` for each text, in order; returns the fingerprints."""
        items = self._items(ids, texts, timestamps)
        out: list[int] = []
        for results in self._batches("/v1/add/batch", items):
            out.extend(int(r["fingerprint"]) for r in results)
        return out

    def check_and_add_many(
        self,
        ids: Ids,
        texts: Sequence[str],
        timestamps: Timestamps | None = None,
    ) -> list[tuple[bool, list[Match]]]:
        """:meth:`check_and_add` for each text, in order (later ones see earlier adds)."""
        items = self._items(ids, texts, timestamps)
        out: list[tuple[bool, list[Match]]] = []
        for results in self._batches("/v1/check-and-add/batch", items):
            out.extend((bool(r["added"]), _matches(r["duplicates"])) for r in results)
        return out

    def _batches(self, path: str, items: list[dict[str, Any]]) -> Iterator[list[Any]]:
        """The results of ``items`` sent to ``path`` in requests of :attr:`batch_size`; an
        error names the item by its place in ``items``, not in its request."""
        for a, b in _chunks(len(items), self.batch_size):
            try:
                yield self._request("POST", path, {"items": items[a:b]})["results"]
            except ServiceError as e:
                if a == 0 or not e.field:
                    raise

                def shift(m: re.Match[str], a: int = a) -> str:
                    return f"items[{a + int(m.group(1))}]"

                field = re.sub(r"items\[(\d+)\]", shift, e.field)
                message = re.sub(r"items\[(\d+)\]", shift, e.message)
                raise type(e)(e.status, e.code, message, field) from None

    # -- service ------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The service's ``/v1/stats``: count, memory, rates, retention, writer, backend."""
        return dict(self._request("GET", "/v1/stats"))

    def health(self) -> bool:
        """True when ``/healthz`` answers ok; False when the server is unreachable or unwell."""
        try:
            return bool(self._request("GET", "/healthz").get("status") == "ok")
        except ServiceError:
            return False

    def metrics(self) -> str:
        """The Prometheus text of ``/metrics``."""
        try:
            response = self._http.get("/metrics")
        except self._httpx.TransportError as e:
            raise ServiceUnavailableError(0, "unreachable", f"GET {self.url}/metrics: {e}") from e
        if response.status_code >= 300:  # (no route of the service redirects)
            self._request("GET", "/metrics")  # raises the mapped error
        return str(response.text)

    def __len__(self) -> int:
        return int(self.stats()["count"])

    def __contains__(self, id: object) -> bool:
        if isinstance(id, bool) or not isinstance(id, (int, str)):
            return False
        try:
            self.get_document(id)
        except NotFoundError:
            return False
        return True
