"""Connecting to Redis or Redis Cluster from a URL, and neardup's options in its query string."""

from __future__ import annotations

from typing import Any, Union
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

try:
    import redis as redis_py
    from redis.cluster import RedisCluster
except ModuleNotFoundError as e:  # pragma: no cover - exercised only without the extra
    raise ModuleNotFoundError(
        "neardup.backends.redis needs the redis package: pip install 'neardup[redis]'",
        name=e.name,
    ) from e

__all__ = ["Client", "connect"]

Client = Union["redis_py.Redis", "RedisCluster"]

_OUR_OPTIONS = {"namespace": str, "retention": float}
# Options of the SimHash-block store (Redis format 2), refused with a word on why.
_GONE_OPTIONS = ("blocks", "period", "wait_replicas", "wait_timeout", "spin_us")


def connect(url: str, **client_kwargs: Any) -> tuple[Client, dict[str, Any]]:
    """A redis-py client for ``url`` and the neardup options found in its query string.

    - ``redis://[user:password@]host:port[/db]``: one Redis server;
    - ``rediss://...``: the same over TLS (``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
      ``ssl_cert_reqs`` query parameters pass through to redis-py);
    - ``redis+cluster://[user:password@]host:port`` (``rediss+cluster://`` for TLS): a Redis
      Cluster reached through any of its nodes;
    - ``unix:///path/to/socket?db=0``.

    Query parameters ``namespace`` and ``retention`` are neardup's; the others are passed to
    redis-py (e.g. ``socket_timeout``, ``health_check_interval``). Bad options raise
    ``ValueError`` naming them, before any connection.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be str, got {type(url).__name__}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    known = ("redis", "rediss", "unix", "redis+cluster", "rediss+cluster")
    if scheme not in known:
        raise ValueError(f"url scheme must be one of {', '.join(known)}; got {url!r}")
    options: dict[str, Any] = {}
    passthrough: list[tuple[str, str]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _GONE_OPTIONS:
            raise ValueError(
                f"url option {name}={value!r} is no longer used: the Redis store keeps MinHash "
                "band lists (format 5), not SimHash blocks; remove it"
            )
        conv = _OUR_OPTIONS.get(name)
        if conv is None:
            passthrough.append((name, value))
            continue
        try:
            options[name] = conv(value)
        except ValueError:
            raise ValueError(
                f"url option {name}={value!r} is not a valid {conv.__name__}"
            ) from None
    cluster = scheme.endswith("+cluster")
    base = scheme.split("+", 1)[0]
    clean = urlunsplit((base, parts.netloc, parts.path, urlencode(passthrough), parts.fragment))
    if not parts.netloc:  # unix:///path: urlunsplit would drop the "//" that redis-py needs
        clean = f"{base}://{clean[len(base) + 1 :]}"
    client_kwargs.setdefault("decode_responses", False)
    if cluster:
        return RedisCluster.from_url(clean, **client_kwargs), options
    return redis_py.Redis.from_url(clean, **client_kwargs), options


def redact(url: str) -> str:
    """``url`` with its password (in the address or a ``password`` query option) as ``***``."""
    parts = urlsplit(url)
    netloc, query = parts.netloc, parts.query
    if parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[-1]
        netloc = f"{parts.username or ''}:***@{host}"
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    if any(name == "password" for name, _ in pairs):
        query = urlencode([(n, "***" if n == "password" else v) for n, v in pairs], safe="*")
    if (netloc, query) == (parts.netloc, parts.query):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
