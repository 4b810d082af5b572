"""Request counters, latency histograms and per-second rates, written out in the Prometheus text
exposition format (version 0.0.4) without a client library: a few dict updates per request.
"""

from __future__ import annotations

import bisect
import os
import resource
import time
from typing import Callable

__all__ = ["Metrics", "process_rss_bytes"]

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
RATE_WINDOW = 60  # seconds of history behind the rates in /v1/stats


class _Histogram:
    __slots__ = ("counts", "total", "count")

    def __init__(self) -> None:
        self.counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
        self.total += value
        self.count += 1


class _Rate:
    """Events per second over the last ``RATE_WINDOW`` whole seconds."""

    __slots__ = ("slots", "second", "first")

    def __init__(self) -> None:
        self.slots = [0] * RATE_WINDOW
        self.second = int(time.time())
        self.first = self.second  # the second counting began in (partial: not averaged over)

    def _advance(self, now: int) -> None:
        gap = now - self.second
        if gap > 0:
            for s in range(self.second + 1, self.second + 1 + min(gap, RATE_WINDOW)):
                self.slots[s % RATE_WINDOW] = 0
            self.second = now

    def add(self, n: int, now: int) -> None:
        self._advance(now)
        self.slots[now % RATE_WINDOW] += n

    def per_second(self, now: int) -> float:
        self._advance(now)
        # The current second is incomplete: average over the full seconds before it, and in
        # the first minute over the seconds there were (not over the whole window).
        full = sum(self.slots) - self.slots[now % RATE_WINDOW]
        seconds = min(RATE_WINDOW - 1, now - self.first)
        return full / seconds if seconds > 0 else 0.0


def process_rss_bytes() -> int:
    """Resident memory of this process in bytes (0 when unknown)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class Metrics:
    """What the service counts. Updated on the event loop thread only (no locks needed)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.requests: dict[tuple[str, int], int] = {}
        self.latency: dict[str, _Histogram] = {}
        self.documents: dict[str, int] = {"checked": 0, "added": 0, "duplicate": 0, "removed": 0}
        self.expired = 0  # (the store's count of expiries, read before each rendering)
        self.request_rate = _Rate()
        self.document_rate = _Rate()

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        """Count one finished request."""
        key = (route, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        hist = self.latency.get(route)
        if hist is None:
            hist = self.latency[route] = _Histogram()
        hist.observe(seconds)
        self.request_rate.add(1, int(time.time()))

    def count_documents(self, checked: int = 0, added: int = 0, duplicate: int = 0) -> None:
        """Count documents looked at, stored, and found to be near-duplicates."""
        docs = self.documents
        docs["checked"] += checked
        docs["added"] += added
        docs["duplicate"] += duplicate
        if checked:
            self.document_rate.add(checked, int(time.time()))

    def rates(self) -> dict[str, float]:
        """Requests and documents per second over the last minute."""
        now = int(time.time())
        return {
            "requests_per_second": round(self.request_rate.per_second(now), 3),
            "documents_per_second": round(self.document_rate.per_second(now), 3),
            "window_seconds": float(RATE_WINDOW - 1),
        }

    def prometheus(self, gauges: dict[str, tuple[str, Callable[[], float]]] | None = None) -> str:
        """The Prometheus text format of every metric, plus ``gauges`` (name -> help, getter)."""
        lines: list[str] = []

        def header(name: str, kind: str, help_text: str) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")

        header("neardup_http_requests_total", "counter", "HTTP requests by route and status.")
        for (route, status), n in sorted(self.requests.items()):
            lines.append(f'neardup_http_requests_total{{route="{route}",status="{status}"}} {n}')
        header("neardup_http_request_duration_seconds", "histogram", "Request latency by route.")
        for route, hist in sorted(self.latency.items()):
            cumulative = 0
            for bound, n in zip(LATENCY_BUCKETS, hist.counts):
                cumulative += n
                lines.append(
                    f'neardup_http_request_duration_seconds_bucket{{route="{route}",le="{bound}"}}'
                    f" {cumulative}"
                )
            lines.append(
                f'neardup_http_request_duration_seconds_bucket{{route="{route}",le="+Inf"}}'
                f" {hist.count}"
            )
            lines.append(
                f'neardup_http_request_duration_seconds_sum{{route="{route}"}} {hist.total!r}'
            )
            lines.append(
                f'neardup_http_request_duration_seconds_count{{route="{route}"}} {hist.count}'
            )
        header("neardup_documents_total", "counter", "Documents checked, added, found duplicate.")
        for op, n in sorted(self.documents.items()):
            lines.append(f'neardup_documents_total{{result="{op}"}} {n}')
        header("neardup_expired_total", "counter", "Documents removed by retention.")
        lines.append(f"neardup_expired_total {self.expired}")
        header("neardup_uptime_seconds", "gauge", "Seconds since the service started.")
        lines.append(f"neardup_uptime_seconds {time.time() - self.started:.3f}")
        header("neardup_process_resident_memory_bytes", "gauge", "Resident memory of the server.")
        lines.append(f"neardup_process_resident_memory_bytes {process_rss_bytes()}")
        for name, (help_text, getter) in (gauges or {}).items():
            header(name, "gauge", help_text)
            lines.append(f"{name} {getter()}")
        return "\n".join(lines) + "\n"
