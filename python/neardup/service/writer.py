"""The single serialized writer of seed 003: every mutation goes through one queue and one thread.

Requests that arrive at the same moment are applied one after the other, so of many near-copies
sent at once exactly one is added and the others report it. Reads do not queue: they run
concurrently in a thread pool.

Consecutive single-document writes found waiting in the queue are applied together through the
backend's batch call (group commit): one write-ahead-log sync acknowledges the whole group, in
queue order, with the same result as applying them one by one. A future is completed only after
the backend call returned, i.e. after the write is durable.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any, Callable

from neardup.service.errors import ApiError

__all__ = ["SerializedWriter"]

log = logging.getLogger("neardup.service")

# Kinds of queued work. Single check-and-add / add requests are grouped; CALL runs a callable.
CHECK_AND_ADD = "check_and_add"
ADD = "add"
CALL = "call"

_STOP = object()

Entry = tuple[str, Any, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
GroupFn = Callable[[list[Any]], list[Any]]


class SerializedWriter:
    """One thread that applies queued writes in arrival order.

    ``group_fns`` maps a groupable kind to a function applying a list of payloads at once and
    returning one result per payload (in order).
    """

    def __init__(self, group_fns: dict[str, GroupFn], max_group: int = 4096) -> None:
        self._group_fns = group_fns
        self._max_group = max_group
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="neardup-writer", daemon=True)
        self._closed = False
        self._lock = threading.Lock()
        self.groups = 0
        """Backend calls made for grouped writes (for the stats)."""
        self.grouped_items = 0
        """Single writes applied through those calls."""
        self.calls = 0
        """Other calls (batches, removals, expiry)."""
        self.call_items = 0
        """Documents written by those calls."""
        self.busy_seconds = 0.0
        """Time spent in the backend on this thread."""

    def start(self) -> None:
        """Start the writer thread."""
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Apply what is queued, then stop. Later submissions fail with 503 ``unavailable``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queue.put(_STOP)
        self._thread.join(timeout)

    @property
    def is_alive(self) -> bool:
        """True while the writer thread runs and accepts writes."""
        return self._thread.is_alive() and not self._closed

    @property
    def queue_depth(self) -> int:
        """Writes waiting (approximate)."""
        return self._queue.qsize()

    async def submit(self, kind: str, payload: Any) -> Any:
        """Queue one write and wait until it has been applied; returns its result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._closed:
                raise ApiError("unavailable", "the service is shutting down")
            self._queue.put((kind, payload, loop, fut))
        return await fut

    async def call(self, fn: Callable[[], Any], items: int = 1) -> Any:
        """Run ``fn()`` on the writer thread, in queue order with the other writes; ``items``
        (documents it writes) only feeds the statistics."""
        return await self.submit(CALL, (fn, items))

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        pending: Any | None = None
        while True:
            entry = pending if pending is not None else self._queue.get()
            pending = None
            if entry is _STOP:
                return
            kind = entry[0]
            if kind == CALL:
                self._apply_call(entry)
                continue
            # Gather the consecutive writes of the same kind already waiting.
            group = [entry]
            while len(group) < self._max_group:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP or nxt[0] != kind:
                    pending = nxt
                    break
                group.append(nxt)
            self._apply_group(kind, group)
            if pending is _STOP:
                # Apply whatever was queued before the stop (nothing can be queued after it).
                self._drain_after_stop()
                return

    def _drain_after_stop(self) -> None:
        while True:
            try:
                entry = self._queue.get_nowait()
            except queue.Empty:
                return
            if entry is _STOP:
                continue
            if entry[0] == CALL:
                self._apply_call(entry)
            else:
                self._apply_group(entry[0], [entry])

    def _apply_call(self, entry: Entry) -> None:
        _, (fn, items), loop, fut = entry
        t0 = time.perf_counter()
        try:
            result: Any = fn()
            error: BaseException | None = None
        except BaseException as e:  # delivered to the awaiting request
            result, error = None, e
        self.busy_seconds += time.perf_counter() - t0
        self.calls += 1
        self.call_items += items
        _deliver(loop, [(fut, result, error)])

    def _apply_group(self, kind: str, group: list[Entry]) -> None:
        fn = self._group_fns[kind]
        t0 = time.perf_counter()
        outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]
        try:
            results = fn([e[1] for e in group])
            outcomes = [(e[3], r, None) for e, r in zip(group, results)]
        except (ValueError, TypeError, KeyError) as e:
            if len(group) == 1:
                outcomes = [(group[0][3], None, e)]
            else:
                # An input error inside a group: apply one by one so only its sender gets it.
                log.warning("grouped %s failed (%s); applying one by one", kind, e)
                outcomes = []
                for entry in group:
                    try:
                        outcomes.append((entry[3], fn([entry[1]])[0], None))
                    except BaseException as one:
                        outcomes.append((entry[3], None, one))
        except BaseException as e:  # OSError etc.: nothing in the group is acknowledged
            log.exception("writer: %s of %d item(s) failed", kind, len(group))
            outcomes = [(entry[3], None, e) for entry in group]
        self.busy_seconds += time.perf_counter() - t0
        self.groups += 1
        self.grouped_items += len(group)
        by_loop: dict[asyncio.AbstractEventLoop, list[Any]] = {}
        for entry, outcome in zip(group, outcomes):
            by_loop.setdefault(entry[2], []).append(outcome)
        for loop, items in by_loop.items():
            _deliver(loop, items)


def _deliver(
    loop: asyncio.AbstractEventLoop,
    outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]],
) -> None:
    try:
        loop.call_soon_threadsafe(_complete, outcomes)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


def _complete(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for fut, result, error in outcomes:
        if fut.done():  # the request was cancelled (client went away); the write still stands
            continue
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)
