"""Settings of the dedup service, read from ``NEARDUP_*`` environment variables or given directly.

Kept free of FastAPI imports so that the CLI can parse and check them before the optional
service dependencies load.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Settings", "SettingsError", "parse_duration", "parse_size"]


class SettingsError(ValueError):
    """A setting (flag or environment variable) has an invalid value; the message names it."""


_DURATION_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._~+/=-]{8,512}$")
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_duration(value: str, name: str = "duration") -> float | None:
    """Parse ``"90s"``, ``"15m"``, ``"12h"``, ``"2d"``, ``"1w"`` or plain seconds into seconds.

    ``"0"``, ``"none"``, ``"off"`` and ``""`` mean no limit and give ``None``.
    """
    text = value.strip().lower()
    if text in ("", "0", "none", "off", "never"):
        return None
    m = _DURATION_RE.match(text)
    if m is None:
        raise SettingsError(
            f"{name} must be a duration such as 90s, 15m, 12h, 2d or 1w (or 'none'), got {value!r}"
        )
    seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2).lower()]
    if not math.isfinite(seconds) or seconds <= 0:
        raise SettingsError(f"{name} must be positive, got {value!r}")
    return seconds


def parse_size(value: str, name: str = "size") -> int:
    """Parse ``"1048576"``, ``"512k"``, ``"16MiB"``, ``"1g"`` into a number of bytes (> 0)."""
    m = _SIZE_RE.match(value)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _SIZE_UNITS:
        raise SettingsError(
            f"{name} must be a byte size such as 65536, 512k or 16MiB, got {value!r}"
        )
    size = int(m.group(1)) * _SIZE_UNITS[unit]
    if size <= 0:
        raise SettingsError(f"{name} must be positive, got {value!r}")
    return size


def _is_redis_url(url: str) -> bool:
    schemes = ("redis", "rediss", "redis+cluster", "rediss+cluster", "unix")
    return url.split("://", 1)[0].lower() in schemes


@dataclass
class Settings:
    """How the service runs. Build it directly, with :meth:`from_env`, or from ``neardup serve``.

    Environment variables (all optional): ``NEARDUP_DATA``, ``NEARDUP_STORE``, ``NEARDUP_HOST``,
    ``NEARDUP_SYNC``, ``NEARDUP_PORT``, ``NEARDUP_K``, ``NEARDUP_RETENTION``, ``NEARDUP_PRESET``,
    ``NEARDUP_POLICY``, ``NEARDUP_TOKEN``, ``NEARDUP_MAX_BODY_BYTES``, ``NEARDUP_MAX_TEXT_BYTES``,
    ``NEARDUP_MAX_BATCH``, ``NEARDUP_EXPIRE_INTERVAL``, ``NEARDUP_READ_THREADS``,
    ``NEARDUP_WRITER_MAX_BATCH``, ``NEARDUP_WRITER`` (``thread`` or ``inline``),
    ``NEARDUP_FAST_PATH``, ``NEARDUP_LOG_LEVEL``, ``NEARDUP_STORE_TIMEOUT``.
    """

    data_dir: str | None = None
    """Directory of the embedded durable store (index WAL + texts). Needed unless ``store`` is a
    Redis URL."""
    store: str | None = None
    """``redis://``, ``rediss://`` or ``redis+cluster://`` URL of a shared store; a plain path or
    ``file://`` URL is the same as ``data_dir``."""
    sync: str = "full"
    """Durability of an acknowledged write in the embedded store: ``"full"`` (fsynced before
    the answer: survives a power cut) or ``"normal"`` (written to the OS before the answer:
    survives ``kill -9`` of the server, not a power cut)."""
    host: str = "127.0.0.1"
    port: int = 8000
    k: int | None = None
    """Candidate radius in bits (a stored item within k bits is a candidate, then verified).
    ``None``: the policy's own (length-aware) radius."""
    retention: float | None = 2 * 86400.0
    """Seconds an item is kept; ``None`` keeps everything."""
    preset: str | None = None
    """Fingerprinter preset (``None``: the policy's own)."""
    policy: str | None = None
    """Deduplicator policy: a JSON object (``Policy.to_dict()``) or the path of a JSON file
    holding one (``None``: the default policy, or the one saved in the data directory)."""
    token: str | None = field(default=None, repr=False)
    """Bearer token required on every route but ``/healthz`` and ``/readyz`` (``None``: no auth)."""
    max_body_bytes: int = 16 * 1024 * 1024
    max_text_bytes: int = 1024 * 1024
    max_batch: int = 10_000
    """Most items in one batch request."""
    expire_interval: float | None = None
    """Seconds between retention sweeps (``None``: retention / 100, between 1 s and 60 s)."""
    read_threads: int = 4
    """Threads that run checks (fingerprint + query) off the event loop."""
    writer_max_batch: int = 1024
    """Most documents per backend call: queued single writes are grouped up to this many, and a
    larger batch request is applied in consecutive calls of this many (same answers; one
    durable commit per call)."""
    writer: str = "thread"
    """Where the serialized writer applies the writes: ``"thread"`` (a thread of its own: the
    event loop keeps reading requests while a commit waits for the disk or a batch is applied)
    or ``"inline"`` (on the event loop's thread, after the requests of each turn of the loop: no
    handoff between threads; for stores whose writes do not wait for the disk, e.g.
    ``sync="normal"``)."""
    store_timeout: float | None = 5.0
    """Seconds a request waits for the Redis store (connecting, or one reply) before it is
    answered 503 ``unavailable``; ``None``: no limit. (A ``socket_timeout`` in the URL wins.)"""
    fast_path: bool = True
    """Serve the POST /v1 routes by a lean ASGI dispatcher in front of FastAPI (same handlers)."""
    log_level: str = "warning"

    def __post_init__(self) -> None:
        self.validate()

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``NEARDUP_*`` variables, then ``overrides`` (those that are not None)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}

        def get(name: str) -> str | None:
            raw = env.get("NEARDUP_" + name)
            return raw if raw is not None and raw.strip() != "" else None

        def as_int(name: str, raw: str) -> int:
            try:
                return int(raw.strip())
            except ValueError:
                raise SettingsError(f"NEARDUP_{name} must be an integer, got {raw!r}") from None

        for attr in (
            "data_dir",
            "store",
            "sync",
            "host",
            "preset",
            "policy",
            "token",
            "log_level",
            "writer",
        ):
            raw = get("DATA" if attr == "data_dir" else attr.upper())
            if raw is not None:
                values[attr] = raw
        for attr in ("port", "k", "max_batch", "read_threads", "writer_max_batch"):
            raw = get(attr.upper())
            if raw is not None:
                values[attr] = as_int(attr.upper(), raw)
        for attr in ("max_body_bytes", "max_text_bytes"):
            raw = get(attr.upper())
            if raw is not None:
                values[attr] = parse_size(raw, f"NEARDUP_{attr.upper()}")
        raw = get("RETENTION")
        if raw is not None:
            values["retention"] = parse_duration(raw, "NEARDUP_RETENTION")
        raw = get("EXPIRE_INTERVAL")
        if raw is not None:
            values["expire_interval"] = parse_duration(raw, "NEARDUP_EXPIRE_INTERVAL")
        raw = get("STORE_TIMEOUT")
        if raw is not None:
            values["store_timeout"] = parse_duration(raw, "NEARDUP_STORE_TIMEOUT")
        raw = get("FAST_PATH")
        if raw is not None:
            values["fast_path"] = raw.strip().lower() not in ("0", "false", "no", "off")
        values.update({key: v for key, v in overrides.items() if v is not None})
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    # -- checks -------------------------------------------------------------------------------

    @property
    def uses_redis(self) -> bool:
        """True when the store is a Redis or Redis Cluster URL."""
        return self.store is not None and _is_redis_url(self.store)

    @property
    def writer_is_inline(self) -> bool:
        """Whether the serialized writer runs on the event loop's thread (see ``writer``)."""
        return self.writer == "inline"

    @property
    def local_path(self) -> str | None:
        """The directory of the embedded store, or None for a Redis store."""
        if self.uses_redis:
            return None
        if self.store is not None:
            return self.store[len("file://") :] if self.store.startswith("file://") else self.store
        return self.data_dir

    @property
    def sweep_interval(self) -> float | None:
        """Seconds between retention sweeps, or None when nothing expires."""
        if self.retention is None:
            return None
        if self.expire_interval is not None:
            return self.expire_interval
        return min(60.0, max(1.0, self.retention / 100.0))

    def validate(self) -> None:
        """Raise :class:`SettingsError` naming the first invalid setting."""
        if self.store is not None and "://" in self.store:
            scheme = self.store.split("://", 1)[0].lower()
            if scheme != "file" and not _is_redis_url(self.store):
                raise SettingsError(
                    f"store must be a directory, file://, redis://, rediss:// or redis+cluster:// "
                    f"URL, got scheme {scheme!r}"
                )
        if self.local_path is None and not self.uses_redis:
            raise SettingsError(
                "data_dir (--data / NEARDUP_DATA) is required without a Redis store"
            )
        if self.sync not in ("full", "normal"):
            raise SettingsError(f"sync must be 'full' or 'normal', got {self.sync!r}")
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise SettingsError(f"port must be in 0..65535, got {self.port!r}")
        if self.k is not None and (
            not isinstance(self.k, int) or isinstance(self.k, bool) or not 0 <= self.k <= 64
        ):
            raise SettingsError(f"k must be an integer in 0..64, got {self.k!r}")
        if self.retention is not None and not (
            math.isfinite(self.retention) and self.retention > 0
        ):
            raise SettingsError(f"retention must be positive seconds or None, got {self.retention}")
        if self.store_timeout is not None and not (
            math.isfinite(self.store_timeout) and self.store_timeout > 0
        ):
            raise SettingsError(
                f"store_timeout must be positive seconds or None, got {self.store_timeout}"
            )
        if self.expire_interval is not None and not self.expire_interval > 0:
            raise SettingsError(f"expire_interval must be positive, got {self.expire_interval}")
        if self.token is not None and not _TOKEN_RE.match(self.token):
            raise SettingsError(
                "token must be at least 8 characters of A-Z a-z 0-9 . _ ~ + / = -"
                " (NEARDUP_TOKEN / --token)"
            )
        for name in ("max_body_bytes", "max_text_bytes", "max_batch", "read_threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise SettingsError(f"{name} must be a positive integer, got {value!r}")
        if self.writer not in ("thread", "inline"):
            raise SettingsError(f"writer must be 'thread' or 'inline', got {self.writer!r}")
        if self.writer == "inline" and self.store is not None and _is_redis_url(self.store):
            raise SettingsError(
                "writer 'inline' waits for the store on the event loop's thread: with a Redis "
                "store every route, /healthz too, would wait out a slow or lost server; use "
                "the default writer, 'thread'"
            )
        if self.writer_max_batch <= 0:
            raise SettingsError(f"writer_max_batch must be positive, got {self.writer_max_batch}")
        if self.max_text_bytes > self.max_body_bytes:
            raise SettingsError(
                f"max_text_bytes ({self.max_text_bytes}) must not exceed max_body_bytes "
                f"({self.max_body_bytes})"
            )
