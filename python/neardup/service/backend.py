"""Opening the store behind the service, and the few conversions the routes need from it.

``open_backend(settings)`` returns a ``DedupBackend`` (see ``neardup.dedup``): the embedded
durable store for a directory (``Deduplicator.open``: one fsync per write call), or the
Redis one for a ``redis://``, ``rediss://`` or
``redis+cluster://`` URL (``neardup.backends.redis``, imported only then).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from neardup.service.settings import Settings, SettingsError
from neardup.textstore import Id

__all__ = [
    "StoreError",
    "check_fingerprint",
    "document_record",
    "duplicates_of",
    "make_policy",
    "near_of",
    "open_backend",
    "probe",
    "store_fault",
]

DuplicateRecord = dict[str, Any]


class StoreError(RuntimeError):
    """The store cannot be opened (unreachable, or its files unusable); the message names it."""


def _policy_flags(settings: Settings) -> str:
    """The flags that chose the policy, as a message names them."""
    given = [
        f"--{name} / NEARDUP_{name.upper()}"
        for name in ("policy", "k", "preset")
        if getattr(settings, name) is not None
    ]
    return ", ".join(given)


def make_policy(settings: Settings) -> Any:
    """The ``neardup.dedup.Policy`` that the settings ask for, or None to use the default one
    (or, for an existing data directory, the one saved there). A bad policy, file or preset
    raises :class:`SettingsError` naming the flag."""
    if settings.policy is None and settings.k is None and settings.preset is None:
        return None
    from neardup.dedup import Policy

    policy = Policy.default()
    try:
        if settings.policy is not None:
            raw = settings.policy.strip()
            if not raw.startswith("{"):
                with open(raw, encoding="utf-8") as f:
                    raw = f.read()
            try:
                spec = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ValueError(f"policy is not a JSON object: {e}") from None
            policy = Policy.from_dict(spec)
        if settings.k is not None:
            policy = policy.replace(k_short=settings.k, k_long=settings.k)
        if settings.preset is not None:
            fingerprint = {**dict(policy.fingerprint), "preset": settings.preset}
            policy = policy.replace(fingerprint=fingerprint)
        policy.make_fingerprinter()  # (an unknown preset is found here, not on open)
    except (OSError, ValueError, TypeError) as e:
        raise SettingsError(f"{_policy_flags(settings)}: {e}") from None
    return policy


def _saved_policy(path: str) -> Any:
    """The policy saved in the data directory ``path``, or None for a new one; an unreadable
    file raises :class:`StoreError` naming it."""
    from neardup.dedup import Policy

    policy_file = os.path.join(path, "policy.json")
    if not os.path.exists(policy_file):
        return None
    try:
        with open(policy_file, encoding="utf-8") as f:
            return Policy.from_dict(json.load(f))
    except (OSError, ValueError, TypeError) as e:
        raise StoreError(
            f"--data / NEARDUP_DATA: {policy_file} (the policy the directory was created "
            f"with) is unreadable: {e}"
        ) from None


def open_backend(settings: Settings) -> Any:
    """Open the ``DedupBackend`` that ``settings`` name: ``Deduplicator.open(data_dir, ...)`` or,
    for a Redis URL, ``RedisDeduplicator.from_url(url, ...)``. Bad settings raise
    :class:`SettingsError`, a store that cannot be opened :class:`StoreError`; both name the
    setting."""
    policy = make_policy(settings)
    if settings.uses_redis:
        assert settings.store is not None
        try:
            module = importlib.import_module("neardup.backends.redis")
        except ModuleNotFoundError as e:
            raise RuntimeError(
                f"store {settings.store.split('://', 1)[0]}:// needs the Redis backend: "
                f"pip install 'neardup[redis]' ({e})"
            ) from e
        timeouts: dict[str, float] = {}
        if settings.store_timeout is not None:  # (the URL's socket_timeout=... wins)
            timeouts = {
                "socket_timeout": settings.store_timeout,
                "socket_connect_timeout": settings.store_timeout,
            }
        from neardup.backends.redis_connect import redact

        shown = redact(settings.store)
        if "retention" in dict(parse_qsl(urlsplit(settings.store).query)):
            raise SettingsError(
                f"--store / NEARDUP_STORE {shown}: the service takes the retention from "
                "--retention / NEARDUP_RETENTION (default 2d), not from the URL: remove "
                "retention= from it"
            )
        try:
            return module.RedisDeduplicator.from_url(
                settings.store,
                policy=policy,
                k=settings.k,
                retention=settings.retention,
                **timeouts,
            )
        except Exception as e:
            if store_fault(e):
                raise StoreError(f"--store / NEARDUP_STORE: cannot use {shown}: {e}") from None
            if isinstance(e, (ValueError, TypeError)):
                raise SettingsError(f"--store / NEARDUP_STORE {shown}: {e}") from None
            raise
    path = settings.local_path
    assert path is not None
    from neardup.dedup import Deduplicator

    saved = _saved_policy(path)
    if policy is not None and saved is not None and policy != saved:
        raise SettingsError(
            f"{_policy_flags(settings)}: the data directory {path} keeps the policy it was "
            f"created with ({os.path.join(path, 'policy.json')}); start without these flags "
            "or with a new --data directory"
        )
    try:
        return Deduplicator.open(
            path, policy=policy, retention=settings.retention, sync=settings.sync
        )
    except (OSError, ValueError) as e:
        raise StoreError(f"--data / NEARDUP_DATA {path}: {e}") from None


# Error replies of a server that cannot serve now but may later (their first word): loading,
# busy, no master, out of memory (maxmemory), failing to save (MISCONF), a replica (READONLY),
# a user without a permission the store needs (NOPERM: until an administrator grants it).
_BUSY_REPLIES = frozenset(
    {"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "OOM", "MISCONF", "READONLY",
     "NOREPLICAS", "NOPERM"}
)  # fmt: skip


def store_fault(exc: BaseException) -> bool:
    """Whether ``exc`` says the store cannot be reached or cannot serve now (down, paused past
    the timeout, loading its data, refusing writes): a 503 to retry, not a wrong request or a
    bug."""
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    redis = sys.modules.get("redis")  # (loaded only when the store is Redis)
    if redis is None:
        return False
    errors = redis.exceptions
    # (redis-py turns some replies into classes of their own, without the reply's first word)
    unavailable = (errors.ConnectionError, errors.TimeoutError, errors.ClusterError,
                   errors.OutOfMemoryError, errors.ReadOnlyError, errors.MasterDownError,
                   errors.TryAgainError, errors.RedisClusterUnreachableError,
                   errors.NoPermissionError)  # fmt: skip
    if isinstance(exc, unavailable):
        return True
    if not isinstance(exc, errors.ResponseError):
        return False
    reply = str(exc).rsplit(" of pipeline caused error: ", 1)[-1]
    return reply.split(" ", 1)[0] in _BUSY_REPLIES


def probe(backend: Any) -> None:
    """Requests to the store as a request makes them (``backend.probe`` where it has one, else
    its count), raising what the store raises when it cannot serve; the embedded store
    answers from memory."""
    own = getattr(backend, "probe", None)
    if own is not None:
        own()
    else:
        len(backend)


def check_fingerprint(backend: Any, fingerprint: int, k: int | None) -> list[Any]:
    """Stored items whose fingerprint is within ``k`` bits of ``fingerprint`` (no text, so no
    verification: ``similarity`` is None). Uses ``backend.check_fingerprint`` when the backend
    has one, else its ``index`` and the policy's widest radius."""
    method = getattr(backend, "check_fingerprint", None)
    if method is not None:
        return list(method(fingerprint, k=k))
    index = getattr(backend, "index", None)
    if index is None:
        raise LookupError("this store cannot look up a bare fingerprint")
    if k is None:
        policy = getattr(backend, "policy", None)
        k = policy.k_max if policy is not None else None
    return [(id, int(d)) for id, d in index.query(fingerprint, k)]


def near_of(backend: Any, id: Id, text: str) -> list[Any]:
    """``GET /v1/near/{id}``: what stored document ``id``, whose text is ``text``, is a
    near-copy of, best first, the document itself left out. The one filter: of the store's
    matches (``backend.check``), the one with ``id``; with a reference set (``serve --against``:
    the backend wrapped in :class:`~neardup.service.references.WithReferences`) the references
    it is a near-copy of come too, each kept (one that shares the id is another document, never
    stored)."""
    from neardup.service.references import WithReferences, best_first

    references: list[Any] = []
    if isinstance(backend, WithReferences):
        references = backend.references.check(text)
        backend = backend.backend
    return best_first(references, [m for m in backend.check(text) if m.id != id])


# -- conversions -----------------------------------------------------------------------------------


def duplicates_of(matches: Sequence[Any]) -> list[DuplicateRecord]:
    """JSON-ready records of ``Match`` objects (or ``(id, distance)`` pairs)."""
    out: list[DuplicateRecord] = []
    for m in matches:
        if isinstance(m, tuple) and not hasattr(m, "_fields"):
            out.append({"id": m[0], "distance": int(m[1]), "similarity": None})
            continue
        sim = getattr(m, "similarity", None)
        out.append(
            {
                "id": m.id,
                "distance": int(m.distance),
                "similarity": None if sim is None else float(sim),
            }
        )
    return out


def document_record(id: Id, stored: Any) -> dict[str, Any]:
    """A JSON-ready record of what ``backend.get(id)`` returned."""
    fields: dict[str, Any]
    if isinstance(stored, dict):
        fields = dict(stored)
    elif isinstance(stored, str):
        fields = {"text": stored}
    elif hasattr(stored, "_asdict"):
        fields = dict(stored._asdict())
    elif hasattr(stored, "__dataclass_fields__"):
        fields = {name: getattr(stored, name) for name in stored.__dataclass_fields__}
    else:
        fields = {
            name: getattr(stored, name)
            for name in ("text", "fingerprint", "timestamp")
            if hasattr(stored, name)
        }
    record: dict[str, Any] = {"id": id}
    fp: int | None = fields.get("fingerprint")
    if fp is not None:
        record["fingerprint"] = int(fp)
        record["fingerprint_hex"] = f"{int(fp):016x}"
    for name, value in fields.items():
        if name not in ("id", "fingerprint"):
            record[name] = value
    return record
