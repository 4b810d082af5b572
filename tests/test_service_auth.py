"""Bearer-token auth on every route but /healthz, on a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_service_harness import ServerProcess

TOKEN = "s3cret-token_value.42"


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("auth")
    # the token from the environment, as a deployment would pass it
    with ServerProcess(data / "store", env={"NEARDUP_TOKEN": TOKEN}) as server:
        yield server


ROUTES = [
    ("POST", "/v1/check", {"text": "hello world"}),
    ("POST", "/v1/check/batch", {"items": [{"text": "hello world"}]}),
    ("POST", "/v1/add", {"id": "a", "text": "hello world"}),
    ("POST", "/v1/add/batch", {"items": [{"id": "a", "text": "hello world"}]}),
    ("POST", "/v1/check-and-add", {"id": "b", "text": "hello world"}),
    ("POST", "/v1/check-and-add/batch", {"items": [{"id": "b", "text": "hello world"}]}),
    ("GET", "/v1/documents/a", None),
    ("DELETE", "/v1/documents/a", None),
    ("GET", "/v1/stats", None),
    ("GET", "/metrics", None),
    ("GET", "/openapi.json", None),
    ("GET", "/docs", None),
    ("GET", "/v1/unknown-route", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
@pytest.mark.parametrize(
    "auth", [None, "Bearer wrong-token-123", f"Basic {TOKEN}", f"Bearer {TOKEN}x"]
)
def test_every_route_refuses_a_missing_or_wrong_token(
    srv: ServerProcess, method: str, path: str, body: object, auth: str | None
) -> None:
    headers = {"authorization": auth} if auth else {}
    r = httpx.request(method, srv.url + path, json=body, headers=headers, timeout=30)
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


def test_nothing_was_written_without_the_token(srv: ServerProcess) -> None:
    r = httpx.get(srv.url + "/v1/stats", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.json()["count"] == 0


def test_the_right_token_opens_every_route(srv: ServerProcess) -> None:
    with httpx.Client(base_url=srv.url, headers={"authorization": f"Bearer {TOKEN}"}) as http:
        assert (
            http.post("/v1/add", json={"id": "x", "text": "hello there world"}).status_code == 200
        )
        assert http.get("/v1/documents/x").json()["text"] == "hello there world"
        assert http.post("/v1/check", json={"text": "hello there world"}).json()["duplicates"]
        assert http.get("/v1/stats").status_code == 200
        assert http.get("/metrics").status_code == 200
        assert http.get("/openapi.json").status_code == 200
        assert http.delete("/v1/documents/x").status_code == 200
        assert http.get("/").status_code == 200


def test_healthz_needs_no_token(srv: ServerProcess) -> None:
    assert httpx.get(srv.url + "/healthz").json() == {"status": "ok"}


def test_page_login_sets_an_httponly_cookie_that_opens_the_api(srv: ServerProcess) -> None:
    page = httpx.get(srv.url + "/")
    assert page.status_code == 401 and 'action="/login"' in page.text
    assert TOKEN not in page.text

    wrong = httpx.post(srv.url + "/login", data={"token": "not-the-token"})
    assert wrong.status_code == 401 and "set-cookie" not in wrong.headers

    with httpx.Client(base_url=srv.url) as browser:
        login = browser.post("/login", data={"token": TOKEN})
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert browser.get("/").status_code == 200
        assert browser.get("/v1/stats").status_code == 200
        r = browser.post("/v1/check", json={"text": "hello"})
        assert r.status_code == 200
        # the cookie does not turn a form post (what another site could send) into a write
        form = browser.post("/v1/add", data={"id": "f", "text": "hello"})
        assert form.status_code == 415


def test_bad_token_settings_are_refused_at_startup(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "s", "--token", "short")
    with pytest.raises(RuntimeError, match="token must be at least 8"):
        srv.start()
    assert srv.proc is not None and srv.proc.wait(10) == 2
