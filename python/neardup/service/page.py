"""The web page at ``/``: one self-contained HTML file (inline CSS and JS, no external assets),
so it works offline and behind the bearer token (the token travels as an HttpOnly cookie set by
``/?token=...``, and the page's fetches are same-origin)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

__all__ = ["login_html", "page_html"]


@lru_cache(maxsize=1)
def page_html() -> bytes:
    """The page (UTF-8 HTML)."""
    return resources.files("neardup.service").joinpath("static/index.html").read_bytes()


def login_html(wrong: bool = False) -> bytes:
    """Answered with 401 at ``/`` when a token is required and none (or a wrong one) was given.
    The form posts the token to ``/login`` (never in the URL, so never in logs or history)."""
    note = b'<p id="wrong" style="color:#b00">Wrong token.</p>' if wrong else b""
    return (
        b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>neardup: token required</title>
<link rel="icon" href="data:,">
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem}
input,button{font:inherit;padding:.4rem}</style></head>
<body><h1>neardup</h1><p>This server needs its access token.</p>"""
        + note
        + b"""<form method="post" action="/login"><label>Token <input id="token" name="token"
type="password" autocomplete="current-password" required></label>
<button id="login" type="submit">Open</button></form></body></html>
"""
    )
