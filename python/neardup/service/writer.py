"""The single serialized writer of seed 003: every mutation goes through one queue and one thread.

Requests that arrive at the same moment are applied one after the other, so of many near-copies
sent at once exactly one is added and the others report it. Reads do not queue: they run
concurrently in a thread pool.

Consecutive single-document writes found waiting in the queue are applied together through the
backend's batch call (group commit): one write-ahead-log sync acknowledges the whole group, in
queue order, with the same result as applying them one by one. A future is completed only after
the backend call returned, i.e. after the write is durable.

With a ``commit`` function (the embedded store: ``Deduplicator.commit``), the groups are
applied without waiting for the disk (``durable=False``) and a second thread, the committer,
makes them durable: it takes every group applied so far, calls ``commit()`` once (one fsync for
all of them) and only then completes their futures. So the writer decides the next group while
the last one's fsync runs, and a group always sees the groups before it (the check-and-add stays
atomic), while no answer leaves before its write is durable. If a commit fails, every group it
covered gets the error (their writes stay staged and the next commit retries them).

``inline=True`` applies the queue on the event loop's own thread instead (the writes that the
requests handled in one turn of the loop queued, as one group, in a callback scheduled after
them): the same order, groups and answers, without handing each group to another thread and the
GIL back and forth (each handoff can wait for the other thread's switch interval). It blocks
the loop while the store works, so it suits a store whose writes do not wait for the disk
(``--sync normal``); with ``--sync full`` the thread lets the loop read the next requests while
a commit's fsync runs.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any, Callable, Optional

from neardup.service.errors import ApiError

__all__ = ["SerializedWriter"]

log = logging.getLogger("neardup.service")

# Kinds of queued work. Single check-and-add / add requests are grouped; CALL runs a callable.
CHECK_AND_ADD = "check_and_add"
ADD = "add"
CALL = "call"
# Batch requests: applied one request at a time (never merged with another), like CALL, but
# completed like a group (through the committer when there is one). The group function gets a
# list with one payload, a list of items, and returns a list with one result, a list.
CHECK_AND_ADD_BATCH = "check_and_add_batch"
ADD_BATCH = "add_batch"
_SOLO = frozenset({CHECK_AND_ADD_BATCH, ADD_BATCH})

_STOP = object()

Entry = tuple[str, Any, asyncio.AbstractEventLoop, "asyncio.Future[Any]"]
GroupFn = Callable[[list[Any]], list[Any]]
Outcome = tuple["asyncio.Future[Any]", Any, Optional[BaseException]]


class SerializedWriter:
    """One thread that applies queued writes in arrival order.

    ``group_fns`` maps a groupable kind to a function applying a list of payloads at once and
    returning one result per payload (in order).
    """

    def __init__(
        self,
        group_fns: dict[str, GroupFn],
        max_group: int = 4096,
        inline: bool = False,
        commit: Callable[[], None] | None = None,
    ) -> None:
        self._group_fns = group_fns
        self._commit = None if inline else commit
        """Makes the applied groups durable (see the module docstring); None: they already are."""
        self._acks: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._committer = threading.Thread(
            target=self._commit_forever, name="neardup-committer", daemon=True
        )
        self._max_group = max_group
        self.inline = inline
        """Apply the writes on the event loop's thread (see the module docstring)."""
        self._pending: list[Entry] = []
        self._scheduled = False
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
        self.commits = 0
        """Commits made by the committer thread."""
        self.commit_seconds = 0.0
        """Time the committer spent committing."""

    def start(self) -> None:
        """Start the writer thread (nothing to start when inline)."""
        if not self.inline:
            self._thread.start()
            if self._commit is not None:
                self._committer.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Apply what is queued, then stop. Later submissions fail with 503 ``unavailable``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.inline:
                return  # the callback already scheduled applies what is pending
            self._queue.put(_STOP)
        self._thread.join(timeout)
        if self._commit is not None and self._committer.is_alive():
            self._acks.put(_STOP)  # after every group the writer handed over
            self._committer.join(timeout)

    def drain_inline(self) -> None:
        """Inline mode, on the loop's thread after :meth:`stop`: apply what is still pending
        (before the store is closed)."""
        if self.inline:
            self._run_inline()

    @property
    def is_alive(self) -> bool:
        """True while the writer accepts writes."""
        threads_up = self.inline or (
            self._thread.is_alive() and (self._commit is None or self._committer.is_alive())
        )
        return threads_up and not self._closed

    @property
    def queue_depth(self) -> int:
        """Writes waiting (approximate)."""
        return len(self._pending) if self.inline else self._queue.qsize()

    async def submit(self, kind: str, payload: Any) -> Any:
        """Queue one write and wait until it has been applied; returns its result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            if self._closed:
                raise ApiError("unavailable", "the service is shutting down")
            if self.inline:
                self._pending.append((kind, payload, loop, fut))
                if not self._scheduled:
                    # After the callbacks already queued: the other requests of this turn of
                    # the loop join the group.
                    self._scheduled = True
                    loop.call_soon(self._run_inline)
            else:
                self._queue.put((kind, payload, loop, fut))
        return await fut

    async def call(self, fn: Callable[[], Any], items: int = 1) -> Any:
        """Run ``fn()`` on the writer thread, in queue order with the other writes; ``items``
        (documents it writes) only feeds the statistics."""
        return await self.submit(CALL, (fn, items))

    # -- inline: on the event loop --------------------------------------------------------------

    def _run_inline(self) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            self._scheduled = False
        i = 0
        while i < len(pending):
            entry = pending[i]
            kind = entry[0]
            if kind == CALL:
                _complete([self._apply_call(entry)])
                i += 1
                continue
            j = i + 1
            while (
                j < len(pending)
                and j - i < self._max_group
                and pending[j][0] == kind
                and kind not in _SOLO
            ):
                j += 1
            _complete(self._apply_group(kind, pending[i:j]))
            i = j

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
                self._deliver_all([entry], [self._apply_call(entry)])
                continue
            # Gather the consecutive writes of the same kind already waiting.
            group = [entry]
            while len(group) < self._max_group and kind not in _SOLO:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP or nxt[0] != kind:
                    pending = nxt
                    break
                group.append(nxt)
            self._finish(group, self._apply_group(kind, group))
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
                self._deliver_all([entry], [self._apply_call(entry)])
            else:
                self._finish([entry], self._apply_group(entry[0], [entry]))

    def _finish(self, group: list[Entry], outcomes: list[Outcome]) -> None:
        """Complete an applied group: at once, or after the committer's next commit."""
        if self._commit is None:
            self._deliver_all(group, outcomes)
        else:
            self._acks.put((group, outcomes))

    # -- the committer thread -------------------------------------------------------------------

    def _commit_forever(self) -> None:
        assert self._commit is not None
        while True:
            item = self._acks.get()
            if item is _STOP:
                return
            # Every group applied so far: one commit covers them all.
            batch = [item]
            stop = False
            while True:
                try:
                    nxt = self._acks.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                batch.append(nxt)
            t0 = time.perf_counter()
            error: BaseException | None = None
            try:
                self._commit()
            except BaseException as e:  # nothing these groups wrote is acknowledged
                log.exception("committer: commit of %d group(s) failed", len(batch))
                error = e
            self.commit_seconds += time.perf_counter() - t0
            self.commits += 1
            for group, outcomes in batch:
                if error is not None:
                    outcomes = [(fut, None, err or error) for fut, _, err in outcomes]
                self._deliver_all(group, outcomes)
            if stop:
                return

    @staticmethod
    def _deliver_all(entries: list[Entry], outcomes: list[Outcome]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
        for entry, outcome in zip(entries, outcomes):
            by_loop.setdefault(entry[2], []).append(outcome)
        for loop, items in by_loop.items():
            _deliver(loop, items)

    def _apply_call(self, entry: Entry) -> Outcome:
        _, (fn, items), _loop, fut = entry
        t0 = time.perf_counter()
        try:
            result: Any = fn()
            error: BaseException | None = None
        except BaseException as e:  # delivered to the awaiting request
            result, error = None, e
        self.busy_seconds += time.perf_counter() - t0
        self.calls += 1
        self.call_items += items
        return (fut, result, error)

    def _apply_group(self, kind: str, group: list[Entry]) -> list[Outcome]:
        fn = self._group_fns[kind]
        t0 = time.perf_counter()
        outcomes: list[Outcome]
        try:
            results = fn([e[1] for e in group])
            outcomes = [(e[3], r, None) for e, r in zip(group, results)]
        except (ApiError, ValueError, TypeError, KeyError) as e:
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
        if kind in _SOLO:
            self.calls += 1
            self.call_items += len(group[0][1])
        else:
            self.groups += 1
            self.grouped_items += len(group)
        return outcomes


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
