"""The ASGI application: ``create_app(settings)``.

Layers, outermost first:

1. :class:`ServiceGate` (plain ASGI): bearer-token auth, request-body limit, the JSON content
   type on POST, request metrics, and the fast path that serves the POST /v1 routes straight from
   :class:`DedupService` without FastAPI's routing and dependency machinery.
2. FastAPI: every route (the POST /v1 ones too, documented at ``/docs`` and served here when the
   fast path is off), the page at ``/``, JSON errors for everything.
"""

from __future__ import annotations

import hmac
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any, Callable, Literal, Optional
from urllib.parse import parse_qs

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException

from neardup._core import IncompatibleIndexError
from neardup.service import models as schemas
from neardup.service import page
from neardup.service.backend import open_backend, store_fault
from neardup.service.core import DedupService
from neardup.service.errors import ApiError
from neardup.service.settings import Settings
from neardup.textstore import CorruptTextStoreError

__all__ = ["ServiceGate", "create_app"]

log = logging.getLogger("neardup.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "neardup_token"
# An alias, not an annotation: FastAPI evaluates it at runtime (Python 3.9 has no X | None).
OptionalIdType = Optional[Literal["str", "int"]]
JSON_HEADERS = [(b"content-type", b"application/json")]
DOCS_ASSETS = "/docs/assets"


class _AnyId(Convertor[str]):
    """A document id in a path, whole: Starlette's ``path`` stops at a newline and its ``$``
    matches before a last one, so ``/v1/documents/a%0A`` acted on the document ``a``."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("anyid", _AnyId())


def swagger_assets() -> str | None:
    """The directory of the Swagger UI 5 files (it reads OpenAPI 3.1, which FastAPI serves)
    shipped by the ``fastapi-offline`` package, or None when it is not installed (then
    ``/docs`` loads them from FastAPI's default CDN)."""
    try:
        import fastapi_offline
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(fastapi_offline.__file__), "static")
    return path if os.path.isfile(os.path.join(path, "swagger-ui-bundle.js")) else None


OPEN_PATHS = frozenset(
    {"/healthz", "/readyz"}
)  # besides POST /login, which checks the token itself
KNOWN_PATHS = frozenset(
    {
        "/",
        "/login",
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/stats",
        "/v1/check",
        "/v1/check/batch",
        "/v1/add",
        "/v1/add/batch",
        "/v1/check-and-add",
        "/v1/check-and-add/batch",
    }
)
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": schemas.ErrorResponse} for status in (400, 401, 413, 415, 422)
}


class JSONBytes(Response):
    """A response whose body is already JSON bytes."""

    media_type = "application/json"


def _json_error(err: ApiError) -> Response:
    headers = {name.decode(): value.decode() for name, value in err.headers()}
    return Response(
        err.body(), status_code=err.status, media_type="application/json", headers=headers
    )


def _unexpected(exc: Exception) -> ApiError:
    """The answer to an exception that is not an :class:`ApiError`: 503 ``unavailable`` when
    the store cannot serve now (down, timed out, loading; or its namespace now holds another
    policy, set by another process after the server lost its data), 500 ``store_damaged`` for
    a text store found damaged where it is read, else 500 ``internal_error``."""
    if store_fault(exc):
        return ApiError("unavailable", f"the store is unavailable, retry later ({exc})")
    if isinstance(exc, IncompatibleIndexError):
        return ApiError("unavailable", f"the store cannot serve this service: {exc}")
    if isinstance(exc, CorruptTextStoreError):
        return ApiError(
            "store_damaged",
            f"{exc}; stop the service and run `neardup repair DIR` on its data directory",
        )
    return ApiError("internal_error", "internal server error")


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _cookie_token(scope: Scope) -> str | None:
    raw = _header(scope, b"cookie")
    if raw is None:
        return None
    for part in raw.decode("latin-1").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


class ServiceGate:
    """Plain-ASGI front of the app; see the module docstring."""

    def __init__(self, inner: ASGIApp, service: DedupService) -> None:
        self.inner = inner
        self.service = service
        self.settings = service.settings
        self._token = self.settings.token.encode() if self.settings.token else None
        self.fast_routes: dict[str, Callable[[bytes], Awaitable[bytes]]] = {}
        if self.settings.fast_path:
            self.fast_routes = {
                "/v1/check": service.check,
                "/v1/check/batch": service.check_batch,
                "/v1/add": service.add,
                "/v1/add/batch": service.add_batch,
                "/v1/check-and-add": service.check_and_add,
                "/v1/check-and-add/batch": service.check_and_add_batch,
            }

    # -- auth -----------------------------------------------------------------------------------

    def _authorized(self, scope: Scope) -> bool:
        assert self._token is not None
        header = _header(scope, b"authorization")
        if header is not None:
            scheme, _, value = header.partition(b" ")
            if scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self._token):
                return True
        cookie = _cookie_token(scope)
        return cookie is not None and hmac.compare_digest(cookie.encode(), self._token)

    async def _login(self, receive: Receive, send: Send) -> None:
        """``POST /login`` from the login form (``token=...``): a right token sets the HttpOnly
        cookie the page's requests then carry, and redirects to ``/``."""
        body = await self._read_body(receive)
        if self._token is None:  # nothing to log in to
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", b"/"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        given = parse_qs(body.decode("latin-1")).get("token", [""])[0]
        if not hmac.compare_digest(given.encode(), self._token):
            await _send(send, 401, page.login_html(wrong=True), b"text/html; charset=utf-8")
            return
        cookie = f"{COOKIE}={given}; Path=/; HttpOnly; SameSite=Strict".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 303,
                "headers": [
                    (b"location", b"/"),
                    (b"set-cookie", cookie),
                    (b"content-length", b"0"),
                    (b"cache-control", b"no-store"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})

    # -- ASGI -----------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        start = time.perf_counter()
        path: str = scope["path"]
        method: str = scope["method"]
        state = [500, False]  # status sent, response started

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state[0] = message["status"]
                state[1] = True
            await send(message)

        try:
            if path == "/login" and method == "POST":
                await self._login(receive, tracked_send)
                return
            if self._token is not None and path not in OPEN_PATHS and not self._authorized(scope):
                if path == "/" and method == "GET":
                    await _send(tracked_send, 401, page.login_html(), b"text/html; charset=utf-8")
                    return
                raise ApiError(
                    "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)"
                )
            if method == "POST":
                self._check_post(scope)
                handler = self.fast_routes.get(path)
                if handler is not None:
                    body = await self._read_body(receive)
                    await _send(tracked_send, 200, await handler(body))
                    return
                receive = self._limited_receive(receive)
            await self.inner(scope, receive, tracked_send)
        except ApiError as e:
            if not state[1]:
                await _send(tracked_send, e.status, e.body(), extra=e.headers())
        except Exception as e:
            err = _unexpected(e)
            if err.status == 503:
                log.warning("%s %s: %s", method, path, err.message)
            else:
                log.exception("unhandled error on %s %s", method, path)
            if not state[1]:
                await _send(tracked_send, err.status, err.body(), extra=err.headers())
        finally:
            route = getattr(scope.get("route"), "path", None)
            if route is None:
                route = path if path in KNOWN_PATHS else "other"
            self.service.metrics.observe_request(route, state[0], time.perf_counter() - start)

    def _check_post(self, scope: Scope) -> None:
        ctype = _header(scope, b"content-type")
        if ctype is None or not (ctype.split(b";", 1)[0].strip().lower().endswith(b"json")):
            raise ApiError(
                "unsupported_media_type",
                f"POST bodies must be JSON with Content-Type: application/json, got "
                f"{(ctype or b'none').decode('latin-1')[:100]!r}",
            )
        for param in ctype.split(b";")[1:]:
            name, _, value = param.partition(b"=")
            charset = value.strip().strip(b'"').lower()
            if name.strip().lower() == b"charset" and charset not in (b"utf-8", b"utf8"):
                raise ApiError(
                    "unsupported_media_type",
                    f"charset {charset.decode('latin-1')[:40]!r} is not supported: send JSON in "
                    "UTF-8",
                )
        encoding = _header(scope, b"content-encoding")
        if encoding is not None and encoding.strip().lower() != b"identity":
            raise ApiError(
                "unsupported_media_type",
                f"Content-Encoding {encoding.decode('latin-1')[:40]!r} is not supported: send "
                "the body uncompressed",
            )
        length = _header(scope, b"content-length")
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                raise ApiError("malformed_json", "Content-Length is not a number") from None
            if n > self.settings.max_body_bytes:
                raise ApiError(
                    "body_too_large",
                    f"request body of {n} bytes is over the limit of "
                    f"{self.settings.max_body_bytes}",
                )

    async def _read_body(self, receive: Receive) -> bytes:
        limit = self.settings.max_body_bytes
        message = await receive()
        body = message.get("body", b"")
        if not message.get("more_body", False):
            if len(body) > limit:
                raise _too_large(limit)
            return bytes(body)
        chunks = [body]
        size = len(body)
        while message.get("more_body", False):
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ApiError("malformed_json", "client disconnected before the body ended")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def _limited_receive(self, receive: Receive) -> Receive:
        limit = self.settings.max_body_bytes
        seen = [0]

        async def limited() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen[0] += len(message.get("body", b""))
                if seen[0] > limit:
                    raise _too_large(limit)
            return message

        return limited


def _too_large(limit: int) -> ApiError:
    return ApiError("body_too_large", f"request body is over the limit of {limit} bytes")


async def _send(
    send: Send,
    status: int,
    body: bytes,
    ctype: bytes = b"application/json",
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode())]
    if extra:
        headers.extend(extra)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the FastAPI app -------------------------------------------------------------------------------


def create_app(settings: Settings | None = None, backend: Any = None) -> ASGIApp:
    """The service as an ASGI app. ``settings`` default to :meth:`Settings.from_env`;
    ``backend`` (any ``DedupBackend``) defaults to :func:`open_backend(settings)
    <neardup.service.backend.open_backend>` and is closed when the app shuts down.

    The returned app has ``.service`` (the :class:`DedupService`) and ``.fastapi`` attributes.
    """
    settings = settings if settings is not None else Settings.from_env()
    service = DedupService(settings, backend if backend is not None else open_backend(settings))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            await service.stop()

    from neardup import __version__

    assets = swagger_assets()
    api = FastAPI(
        title="neardup",
        version=__version__,
        summary="Near-duplicate text detection with SimHash: check, add, check-and-add.",
        lifespan=lifespan,
        default_response_class=JSONBytes,
        # The stock pages load Swagger UI / ReDoc from a CDN: with the assets installed
        # (fastapi-offline, in the 'service' extra) /docs is served from here, offline.
        docs_url=None if assets is not None else "/docs",
        redoc_url=None,
    )
    api.state.service = service
    if assets is not None:
        from fastapi.openapi.docs import get_swagger_ui_html
        from fastapi.staticfiles import StaticFiles

        api.mount(DOCS_ASSETS, StaticFiles(directory=assets), name="docs-assets")

        @api.get("/docs", include_in_schema=False)
        async def _docs() -> HTMLResponse:
            return get_swagger_ui_html(
                openapi_url="/openapi.json",
                title="neardup API",
                swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
                swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
                swagger_favicon_url=f"{DOCS_ASSETS}/favicon.png",
            )

    @api.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> Response:
        return _json_error(exc)

    @api.exception_handler(Exception)  # (the gate in front logs it)
    async def _unexpected_error(_: Request, exc: Exception) -> Response:
        return _json_error(_unexpected(exc))

    @api.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "invalid_value")
        return _json_error(ApiError(code, str(exc.detail), status=exc.status_code))

    @api.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ())]
        if len(loc) > 1 and loc[0] in ("path", "query", "header", "body"):
            loc = loc[1:]  # (where FastAPI found it; the field is what the caller named)
        field = ".".join(loc) or None
        message = f"field {field!r}: {first.get('msg', 'invalid')}"
        return _json_error(ApiError("invalid_value", message, field=field))

    def post(
        path: str,
        handler: Callable[[bytes], Awaitable[bytes]],
        request_model: Any,
        response_model: Any,
        summary: str,
    ) -> None:
        async def endpoint(request: Request) -> Response:
            return JSONBytes(await handler(await request.body()))

        endpoint.__doc__ = handler.__doc__
        api.add_api_route(
            path,
            endpoint,
            methods=["POST"],
            summary=summary,
            response_model=response_model,
            responses=ERROR_RESPONSES,
            openapi_extra={
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{request_model.__name__}"}
                        }
                    },
                }
            },
        )

    post(
        "/v1/check",
        service.check,
        schemas.CheckRequest,
        schemas.CheckResponse,
        "Near-duplicates of a text (or fingerprint), nearest first",
    )
    post(
        "/v1/check/batch",
        service.check_batch,
        schemas.CheckBatchRequest,
        schemas.CheckBatchResponse,
        "Check many texts, one result each, in order",
    )
    post(
        "/v1/add",
        service.add,
        schemas.AddRequest,
        schemas.Document,
        "Store a document (durable before the answer)",
    )
    post(
        "/v1/add/batch",
        service.add_batch,
        schemas.AddBatchRequest,
        schemas.AddBatchResponse,
        "Store many documents, in order",
    )
    post(
        "/v1/check-and-add",
        service.check_and_add,
        schemas.AddRequest,
        schemas.CheckAndAddResponse,
        "Store a document unless a near-duplicate is stored (atomic)",
    )
    post(
        "/v1/check-and-add/batch",
        service.check_and_add_batch,
        schemas.AddBatchRequest,
        schemas.CheckAndAddBatchResponse,
        "Check-and-add many documents in order; later ones see earlier ones",
    )

    @api.get(
        "/v1/documents/{id:anyid}",
        response_model=schemas.Document,
        responses=ERROR_RESPONSES,
        summary="A stored document (string id first, else the integer it spells)",
    )
    async def get_document(id: str, id_type: OptionalIdType = None) -> Response:
        return JSONBytes(await service.get_document(id, id_type))

    @api.delete("/v1/documents/{id:anyid}", responses=ERROR_RESPONSES, summary="Remove a document")
    async def delete_document(id: str, id_type: OptionalIdType = None) -> Response:
        return JSONBytes(await service.delete_document(id, id_type))

    @api.get(
        "/v1/near/{id:anyid}",
        response_model=schemas.NearResponse,
        responses=ERROR_RESPONSES,
        summary="Stored documents that pass the verifier against a stored one (its near pairs)",
    )
    async def near_of(id: str, id_type: OptionalIdType = None) -> Response:
        return JSONBytes(await service.near(id, id_type))

    @api.get("/v1/stats", summary="Count, memory, request rates, retention")
    async def stats() -> Response:
        return JSONBytes(
            orjson.dumps(await service.stats(), option=orjson.OPT_SERIALIZE_NUMPY, default=str)
        )

    @api.api_route("/healthz", methods=["GET", "HEAD"], summary="Liveness (no auth)")
    async def healthz() -> Response:
        ok = not service.closed and service.writer.is_alive
        body = {"status": "ok" if ok else "unavailable"}
        return JSONBytes(orjson.dumps(body), status_code=200 if ok else 503)

    @api.api_route(
        "/readyz", methods=["GET", "HEAD"], summary="Readiness: the store answers (no auth)"
    )
    async def readyz() -> Response:
        await service.ready()
        return JSONBytes(orjson.dumps({"status": "ready"}))

    @api.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics")
    async def metrics() -> Response:
        return PlainTextResponse(
            await service.metrics_text(), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    @api.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index_page() -> Response:
        return HTMLResponse(page.page_html(), headers={"cache-control": "no-store"})

    # The request models are referenced by $ref above; make sure they are in the schema.
    original_openapi = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            spec = original_openapi()
            components = spec.setdefault("components", {}).setdefault("schemas", {})
            for model in (
                schemas.CheckRequest,
                schemas.AddRequest,
                schemas.CheckBatchRequest,
                schemas.AddBatchRequest,
            ):
                model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, sub in model_schema.pop("$defs", {}).items():
                    components.setdefault(name, sub)
                components[model.__name__] = model_schema
            api.openapi_schema = spec
        return api.openapi_schema

    api.openapi = openapi  # type: ignore[method-assign]

    gate = ServiceGate(api, service)
    gate.fastapi = api  # type: ignore[attr-defined]
    gate.service = service
    return gate
