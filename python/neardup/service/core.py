"""The service's request handlers, independent of the web framework: JSON bytes in, JSON bytes out.

Both the FastAPI routes and the lean ASGI fast path call these, so the two give the same answers.
Writes go through the :class:`SerializedWriter` (batch writes to a store whose writes are atomic
by themselves, Redis, through a pool of their own); checks run in a pool of reader threads, off the
event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, TypeVar

import orjson

from neardup.service.backend import (
    Id,
    check_fingerprint,
    document_record,
    duplicates_of,
    near_of,
    probe,
)
from neardup.service.errors import ApiError
from neardup.service.metrics import Metrics, process_rss_bytes
from neardup.service.schemas import (
    AddItem,
    CheckItem,
    Limits,
    check_window,
    parse_add,
    parse_add_batch,
    parse_check,
    parse_check_batch,
    parse_id_path,
    parse_json,
)
from neardup.service.settings import Settings
from neardup.service.writer import (
    ADD,
    ADD_BATCH,
    CHECK_AND_ADD,
    CHECK_AND_ADD_BATCH,
    SerializedWriter,
)

__all__ = ["DedupService"]

log = logging.getLogger("neardup.service")
T = TypeVar("T")
INLINE_PARSE_BYTES = 64 * 1024  # bodies up to this size are parsed on the event loop (< ~0.1 ms)


class DedupService:
    """Everything behind the routes: the backend, the serialized writer, the readers, metrics."""

    def __init__(self, settings: Settings, backend: Any) -> None:
        self.settings = settings
        self.backend = backend
        self.limits = Limits(
            max_text_bytes=settings.max_text_bytes,
            max_batch=settings.max_batch,
            retention=settings.retention,
        )
        self.metrics = Metrics()
        # The embedded store can decide a group of single writes before it is on disk and make
        # it durable on the writer's committer thread (Deduplicator.commit): the next group is
        # decided while the last one's fsync runs. Other backends answer when durable.
        commit = getattr(backend, "commit", None)
        self._defer = callable(commit) and not settings.writer_is_inline
        self.writer = SerializedWriter(
            {
                CHECK_AND_ADD: self._check_and_add_group,
                ADD: self._add_group,
                CHECK_AND_ADD_BATCH: lambda batches: [
                    self._check_and_add_group(b, batch=True) for b in batches
                ],
                ADD_BATCH: lambda batches: [self._add_group(b, batch=True) for b in batches],
            },
            max_group=settings.writer_max_batch,
            inline=settings.writer_is_inline,
            commit=commit if self._defer else None,
        )
        self.readers = ThreadPoolExecutor(settings.read_threads, thread_name_prefix="neardup-read")
        # A store whose writes are atomic by themselves (Redis: an add is conditional on the
        # band lists it was decided on) takes batch requests from threads of their own, several
        # at once: one batch's round trips overlap another's decision (a pool apart from the
        # readers, so that checks never wait behind writes). Others: the serialized writer.
        self.batch_writers = (
            ThreadPoolExecutor(settings.read_threads, thread_name_prefix="neardup-batch")
            if getattr(backend, "concurrent_writes", False)
            else None
        )
        self._sweeper: asyncio.Task[None] | None = None
        self.last_sweep: float | None = None
        self.closed = False
        # How long a request waits for a Redis store before it is answered 503: its calls each
        # wait --store-timeout for a reply, but a cluster client goes on retrying other nodes
        # (a paused master held a check for 92 s); a request makes a few round trips, so twice
        # the timeout and a second. The embedded store has no such limit (a large batch takes
        # its time).
        timeout = settings.store_timeout
        self.deadline = None if not settings.uses_redis or timeout is None else 2 * timeout + 1

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the writer thread and the retention sweeper."""
        self.writer.start()
        if self.settings.sweep_interval is not None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="neardup-retention")

    async def stop(self) -> None:
        """Stop sweeping, apply the queued writes, close the backend."""
        if self.closed:
            return
        self.closed = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            try:
                await self._sweeper
            except asyncio.CancelledError:
                pass
        if self.writer.inline:
            self.writer.stop()
            self.writer.drain_inline()
        else:
            await asyncio.get_running_loop().run_in_executor(None, self.writer.stop)
        self.readers.shutdown(wait=True)
        if self.batch_writers is not None:  # (the batch writes under way end first)
            pool = self.batch_writers
            await asyncio.get_running_loop().run_in_executor(None, lambda: pool.shutdown(True))
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()

    async def _sweep_forever(self) -> None:
        interval = self.settings.sweep_interval
        assert interval is not None
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_now()
            except asyncio.CancelledError:
                raise
            except Exception:  # keep sweeping; the next round retries
                log.exception("retention sweep failed")

    async def expire_now(self) -> int:
        """Drop the items older than the retention window now; returns how many."""
        retention = self.settings.retention
        if retention is None:
            return 0
        before = time.time() - retention
        removed = int(await self.writer.call(lambda: self.backend.expire(before), 0) or 0)
        self.last_sweep = time.time()
        return removed

    async def _parse(self, parse: Callable[[Any, Limits], T], body: bytes) -> T:
        """Decode and validate a body; a large one off the event loop (it can take milliseconds)."""
        if len(body) <= INLINE_PARSE_BYTES:
            return parse(parse_json(body), self.limits)
        return await self._run(self.readers, lambda: parse(parse_json(body), self.limits))

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._within(self._run(self.readers, fn, *args))

    async def _within(self, work: Awaitable[T]) -> T:
        """``work`` (a request's calls into the store), answered 503 past :attr:`deadline`
        (the call itself goes on: a write cut off so may or may not be stored, as when the
        connection drops)."""
        if self.deadline is None:
            return await work
        try:
            return await asyncio.wait_for(work, self.deadline)
        except asyncio.TimeoutError:
            raise ApiError(
                "unavailable", f"the store did not answer within {self.deadline:g} s, retry later"
            ) from None

    async def _run(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a thread of ``pool`` (503 once the service is stopping: the pool's
        threads are gone)."""
        if self.closed:
            raise ApiError("unavailable", "the service is shutting down")
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def _write_batch(self, kind: str, items: list[AddItem]) -> list[Any]:
        """A batch request's writes: through the serialized writer, or on a thread of
        :attr:`batch_writers` when the store's writes are atomic by themselves (see
        ``__init__``)."""
        if self.batch_writers is None:
            return list(await self._within(self.writer.submit(kind, items)))
        write = self._check_and_add_group if kind == CHECK_AND_ADD_BATCH else self._add_group
        return await self._within(self._run(self.batch_writers, write, items, True))

    # -- the backend calls made by the writer thread ------------------------------------------

    def _chunks(self, items: list[AddItem]) -> list[list[AddItem]]:
        size = self.settings.writer_max_batch
        return [items[i : i + size] for i in range(0, len(items), size)]

    def _write_many(self, many: str, one: str, items: list[AddItem], batch: bool) -> list[Any]:
        """``backend.<many>`` over ``items`` in chunks (``backend.<one>`` for a single item of
        a backend without a committer). Consecutive calls on the writer thread: a later chunk
        sees the writes of earlier ones, so the answers are those of one call; the cap bounds
        how long other writes wait. With a committer the writes are made durable there.
        ``batch``: the items are one batch request's (else one request's each)."""
        at_the_edge = check_window(items, self.limits.retention, batch)
        if len(items) == 1 and not self._defer:
            it = items[0]
            return [getattr(self.backend, one)(it.id, it.text, timestamp=it.timestamp)]
        method = getattr(self.backend, many)
        extra = {"durable": False} if self._defer else {}
        out: list[Any] = []
        for chunk in [items] if at_the_edge else self._chunks(items):
            out.extend(
                method(
                    [it.id for it in chunk],
                    [it.text for it in chunk],
                    timestamps=[it.timestamp for it in chunk],
                    **extra,
                )
            )
        return out

    def _check_and_add_group(self, items: list[AddItem], batch: bool = False) -> list[Any]:
        return self._write_many("check_and_add_many", "check_and_add", items, batch)

    def _add_group(self, items: list[AddItem], batch: bool = False) -> list[Any]:
        return self._write_many("add_many", "add", items, batch)

    # -- handlers -----------------------------------------------------------------------------

    def _stamp(self, item: AddItem, now: float) -> AddItem:
        return item if item.timestamp is not None else AddItem(item.id, item.text, now)

    def _check_one(self, item: CheckItem, where: str = "") -> list[Any]:
        """One check; ``where``: the item's place in a batch (``items[3].``) for errors."""
        if item.text is not None:
            text = item.text
            return self._checked(item.k, lambda: list(self.backend.check(text, k=item.k)), where)
        assert item.fingerprint is not None
        try:
            return check_fingerprint(self.backend, item.fingerprint, item.k)
        except LookupError:
            raise ApiError(
                "invalid_value",
                "this store cannot look up a bare fingerprint; send 'text'",
                field=f"{where}fingerprint",
            ) from None

    @staticmethod
    def _checked(k: int | None, check: Callable[[], T], where: str = "") -> T:
        """``check()``; a ``ValueError`` with ``k`` given is about ``k`` (a store that finds
        candidates otherwise, like Redis, refuses it): invalid_value naming the field."""
        try:
            return check()
        except ValueError as e:
            if k is None:
                raise
            raise ApiError("invalid_value", str(e), field=f"{where}k") from None

    def _check_many(self, items: list[CheckItem]) -> list[list[Any]]:
        results: list[list[Any] | None] = [None] * len(items)
        # Texts sharing a k go through one batch call.
        by_k: dict[int | None, list[int]] = {}
        for i, item in enumerate(items):
            if item.text is None:
                results[i] = self._check_one(item, f"items[{i}].")
            else:
                by_k.setdefault(item.k, []).append(i)
        for k, positions in by_k.items():
            texts = [items[i].text for i in positions]
            found = self._checked(
                k,
                lambda: self.backend.check_many(texts, k=k),  # noqa: B023
                f"items[{positions[0]}].",
            )
            for i, matches in zip(positions, found):
                results[i] = list(matches)
        return [r if r is not None else [] for r in results]

    async def check(self, body: bytes) -> bytes:
        """POST /v1/check."""
        item = await self._parse(parse_check, body)
        matches = await self._read(self._check_one, item)
        self.metrics.count_documents(checked=1, duplicate=1 if matches else 0)
        return orjson.dumps({"duplicates": duplicates_of(matches)})

    async def check_batch(self, body: bytes) -> bytes:
        """POST /v1/check/batch."""
        items = await self._parse(parse_check_batch, body)
        found = await self._read(self._check_many, items) if items else []
        self.metrics.count_documents(checked=len(items), duplicate=sum(1 for m in found if m))
        return orjson.dumps({"results": [{"duplicates": duplicates_of(m)} for m in found]})

    async def add(self, body: bytes) -> bytes:
        """POST /v1/add."""
        item = self._stamp(await self._parse(parse_add, body), time.time())
        fingerprint = await self._within(self.writer.submit(ADD, item))
        self.metrics.count_documents(checked=1, added=1)
        return orjson.dumps(self._stored(item, fingerprint))

    async def add_batch(self, body: bytes) -> bytes:
        """POST /v1/add/batch."""
        now = time.time()
        items = [self._stamp(it, now) for it in await self._parse(parse_add_batch, body)]
        fps = await self._write_batch(ADD_BATCH, items) if items else []
        self.metrics.count_documents(checked=len(items), added=len(items))
        return orjson.dumps({"results": [self._stored(it, fp) for it, fp in zip(items, fps)]})

    async def check_and_add(self, body: bytes) -> bytes:
        """POST /v1/check-and-add (atomic: through the serialized writer)."""
        item = self._stamp(await self._parse(parse_add, body), time.time())
        added, matches = await self._within(self.writer.submit(CHECK_AND_ADD, item))
        self.metrics.count_documents(checked=1, added=int(added), duplicate=int(not added))
        return orjson.dumps(
            {"id": item.id, "added": bool(added), "duplicates": duplicates_of(matches)}
        )

    async def check_and_add_batch(self, body: bytes) -> bytes:
        """POST /v1/check-and-add/batch."""
        # Items without a timestamp are stamped by the backend as it adds them.
        items = await self._parse(parse_add_batch, body)
        outcomes = await self._write_batch(CHECK_AND_ADD_BATCH, items) if items else []
        added = sum(1 for a, _ in outcomes if a)
        self.metrics.count_documents(checked=len(items), added=added, duplicate=len(items) - added)
        return orjson.dumps(
            {
                "results": [
                    {"id": it.id, "added": bool(a), "duplicates": duplicates_of(m)}
                    for it, (a, m) in zip(items, outcomes)
                ]
            }
        )

    @staticmethod
    def _stored(item: AddItem, fingerprint: Any) -> dict[str, Any]:
        fp = int(fingerprint)
        return {
            "id": item.id,
            "fingerprint": fp,
            "fingerprint_hex": f"{fp:016x}",
            "timestamp": item.timestamp,
        }

    def _lookup(self, raw_id: str, id_type: str | None) -> tuple[Id, Any]:
        for candidate in parse_id_path(raw_id, id_type):
            try:
                stored = self.backend.get(candidate)
            except KeyError:
                continue
            if stored is not None:
                return candidate, stored
        raise ApiError("not_found", f"no document with id {raw_id!r}", field="id")

    async def get_document(self, raw_id: str, id_type: str | None = None) -> bytes:
        """GET /v1/documents/{id}."""
        doc_id, stored = await self._read(self._lookup, raw_id, id_type)
        return orjson.dumps(document_record(doc_id, stored))

    def _near(self, raw_id: str, id_type: str | None) -> tuple[Id, list[Any]]:
        doc_id, stored = self._lookup(raw_id, id_type)
        text = document_record(doc_id, stored).get("text")
        if not isinstance(text, str):
            raise ApiError("invalid_value", "this store keeps no text to compare with", field="id")
        return doc_id, near_of(self.backend, doc_id, text)

    async def near(self, raw_id: str, id_type: str | None = None) -> bytes:
        """GET /v1/near/{id}: the stored documents that pass the verifier against a stored one
        (the service's near pairs of an id)."""
        doc_id, matches = await self._read(self._near, raw_id, id_type)
        return orjson.dumps({"id": doc_id, "near": duplicates_of(matches)})

    def _remove(self, raw_id: str, id_type: str | None) -> Id:
        for candidate in parse_id_path(raw_id, id_type):
            try:
                self.backend.remove(candidate)
            except KeyError:
                continue
            return candidate
        raise ApiError("not_found", f"no document with id {raw_id!r}", field="id")

    async def delete_document(self, raw_id: str, id_type: str | None = None) -> bytes:
        """DELETE /v1/documents/{id}."""
        removed = await self._within(self.writer.call(lambda: self._remove(raw_id, id_type), 0))
        self.metrics.documents["removed"] += 1
        return orjson.dumps({"id": removed, "deleted": True})

    def _backend_stats(self) -> dict[str, Any]:
        stats_fn = getattr(self.backend, "stats", None)
        stats: dict[str, Any] = dict(stats_fn()) if stats_fn is not None else {}
        if "count" not in stats:
            count = stats.get("documents")
            stats["count"] = int(count) if isinstance(count, int) else len(self.backend)
        return stats

    async def stats(self) -> dict[str, Any]:
        """GET /v1/stats."""
        backend_stats = await self._read(self._backend_stats)
        m = self.metrics
        return {
            "count": backend_stats.get("count"),
            "k": self.settings.k,
            "policy": backend_stats.get("policy"),
            "retention_seconds": self.settings.retention,
            "last_retention_sweep": self.last_sweep,
            # (the store's count: its sweeps and the expiry it makes as writes arrive)
            "expired": backend_stats.get("expired", 0),
            "store": "redis" if self.settings.uses_redis else "local",
            "memory": {
                "process_rss_bytes": process_rss_bytes(),
                "backend": {
                    k: v for k, v in backend_stats.items() if "bytes" in k or "memory" in k
                },
            },
            "rates": m.rates(),
            "documents": dict(m.documents),
            "requests_total": sum(m.requests.values()),
            "writer": {
                "queue_depth": self.writer.queue_depth,
                "groups": self.writer.groups,
                "grouped_items": self.writer.grouped_items,
                "calls": self.writer.calls,
                "call_items": self.writer.call_items,
                "busy_seconds": round(self.writer.busy_seconds, 6),
                "commits": self.writer.commits,
                "commit_seconds": round(self.writer.commit_seconds, 6),
            },
            "uptime_seconds": round(time.time() - m.started, 3),
            "backend": backend_stats,
        }

    async def ready(self) -> None:
        """GET /readyz: raises when the store cannot serve now (see ``backend.store_fault``)."""
        if self.closed:
            raise ApiError("unavailable", "the service is shutting down")
        await self._read(probe, self.backend)

    async def metrics_text(self) -> str:
        """GET /metrics."""
        stats = await self._read(self._backend_stats)
        count = stats["count"]
        self.metrics.expired = int(stats.get("expired", 0))
        return self.metrics.prometheus(
            {
                "neardup_documents_stored": ("Documents in the store.", lambda: float(count)),
                "neardup_writer_queue_depth": (
                    "Writes waiting for the serialized writer.",
                    lambda: float(self.writer.queue_depth),
                ),
                "neardup_writer_groups_total": (
                    "Backend calls made by the serialized writer for grouped writes.",
                    lambda: float(self.writer.groups),
                ),
            }
        )
