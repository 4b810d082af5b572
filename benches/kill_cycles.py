"""kill -9 cycles of ``neardup serve`` under concurrent writers: is any acknowledged write lost?

Each cycle starts the server on the same data directory, lets W writer threads send
``/v1/check-and-add`` (every fifth through ``/v1/add/batch``, batches of 1..20) with new texts and
near-copies of acknowledged ones, kills the server with SIGKILL after a random 0.5-2.5 s, and
starts it again: every document acknowledged so far (in any cycle) must be there with its text,
and a near-copy of one is refused. Bounded: ``--cycles`` cycles, at most ``--seconds`` in all.

Run: ``python benches/kill_cycles.py --cycles 20`` (about two minutes; the figures of
docs/service.md, "Reliability"). Prints one line per cycle and a summary as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from service import Server  # (the server harness of benches/service.py)


def words(seed: int, n: int = 40) -> str:
    r = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join("".join(r.choices(letters, k=r.randint(3, 8))) for _ in range(n))


def cycle(
    data: Path, writers: int, acked: dict[str, str], rng: random.Random, counter: itertools.count
) -> dict[str, int]:
    """One start, write, kill -9; the number of writes sent and acknowledged in it."""
    server = Server(
        [sys.executable, "-m", "neardup", "serve", "--data", str(data), "--port", "0"]
        + ["--retention", "none", "--log-level", "warning"]
    ).start(timeout=120)
    lock = threading.Lock()
    stop = threading.Event()
    sent = [0]
    new: dict[str, str] = {}

    def send(worker: int) -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not stop.is_set():
                n = next(counter)
                body: dict[str, Any]
                if n % 5 == 0:
                    size = 1 + n % 20
                    items = [
                        {"id": f"b{n}-{j}", "text": f"{n} {j} " + words(n * 31 + j)}
                        for j in range(size)
                    ]
                    route, body = "/v1/add/batch", {"items": items}
                else:
                    items = [{"id": f"c{n}", "text": f"{n} " + words(n)}]
                    route, body = "/v1/check-and-add", items[0]
                with lock:
                    sent[0] += len(items)
                try:
                    r = http.post(route, json=body)
                except httpx.TransportError:
                    return  # killed mid-request: not acknowledged
                if r.status_code != 200:
                    continue
                answer = r.json()
                with lock:
                    if route == "/v1/check-and-add":
                        if answer["added"]:
                            new[items[0]["id"]] = items[0]["text"]
                    else:
                        new.update((it["id"], it["text"]) for it in items)

    threads = [threading.Thread(target=send, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    time.sleep(rng.uniform(0.5, 2.5))
    assert server.proc is not None
    server.proc.kill()  # SIGKILL while the writers send
    server.proc.wait()
    stop.set()
    for t in threads:
        t.join(60)
    acked.update(new)
    return {"sent": sent[0], "acknowledged": len(new)}


def verify(data: Path, acked: dict[str, str], rng: random.Random) -> int:
    """Start the server again: the acknowledged documents that are missing or changed (each is
    read back); a near-copy of a sample of them must be refused."""
    server = Server(
        [sys.executable, "-m", "neardup", "serve", "--data", str(data), "--port", "0"]
        + ["--retention", "none", "--log-level", "warning"]
    ).start(timeout=300)
    bad = 0
    try:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            for doc_id, text in acked.items():
                r = http.get(f"/v1/documents/{doc_id}?id_type=str")
                bad += r.status_code != 200 or r.json()["text"] != text
            for doc_id in rng.sample(sorted(acked), min(50, len(acked))):
                r = http.post("/v1/check", json={"text": acked[doc_id] + " again"})
                bad += doc_id not in {d["id"] for d in r.json()["duplicates"]}
    finally:
        server.stop()
    return bad


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cycles", type=int, default=20)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--seconds", type=float, default=600, help="stop starting cycles after this")
    p.add_argument("--seed", type=int, default=23)
    args = p.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="neardup-kill-"))
    acked: dict[str, str] = {}
    counter = itertools.count()
    started = time.monotonic()
    totals = {"cycles": 0, "sent": 0, "acknowledged": 0, "lost": 0}
    try:
        for n in range(args.cycles):
            if time.monotonic() - started > args.seconds:
                break
            got = cycle(root / "store", args.writers, acked, rng, counter)
            lost = verify(root / "store", acked, rng)
            totals["cycles"] += 1
            totals["sent"] += got["sent"]
            totals["acknowledged"] += got["acknowledged"]
            totals["lost"] += lost
            print(json.dumps({"cycle": n + 1, **got, "stored": len(acked), "lost": lost}))
            if lost:
                break
    finally:
        shutil.rmtree(root, ignore_errors=True)
    totals["seconds"] = round(time.monotonic() - started)
    print(json.dumps(totals))
    sys.exit(1 if totals["lost"] else 0)


if __name__ == "__main__":
    main()
