"""Reopen and reuse with the saved engine (``texts.engine``) against re-sketching the texts.

Two timings on one JSONL corpus (``benches/workloads.py same-domain-long --n 100000``):

- ``Deduplicator.open(DIR)`` of a durable store holding the corpus, with the engine saved on
  close, then with the saved file moved aside (every stored text prepared and sketched, as
  before the engine was saved);
- ``neardup dedup QUERIES --against REF`` with ``REF`` built by ``neardup index build`` from
  the corpus, with and without its saved engine (QUERIES: the first 1,000 documents, each cut by
  a few characters).

    python benches/reopen.py /tmp/long100k.jsonl --work /tmp/reopen

Prints one JSON line per timing and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

from neardup import Deduplicator
from neardup.kept import SAVED_ENGINE


def _read(path: str) -> tuple[list[object], list[str]]:
    ids, texts = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            ids.append(d["id"])
            texts.append(d["text"])
    return ids, texts


def _timed(what: str, fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    took = time.perf_counter() - start
    print(json.dumps({"timing": what, "seconds": round(took, 2)}), flush=True)
    return took


def reopen(ids: list[object], texts: list[str], work: str) -> tuple[float, float]:
    store = os.path.join(work, "store")
    shutil.rmtree(store, ignore_errors=True)
    d = Deduplicator.open(store, sync="off")
    for start in range(0, len(texts), 4096):
        d.add_many(ids[start : start + 4096], texts[start : start + 4096])  # type: ignore[arg-type]
    _timed("close (engine saved)", d.close)
    opened: list[Deduplicator] = []
    saved = _timed("open, saved engine", lambda: opened.append(Deduplicator.open(store)))
    opened.pop().close()
    os.replace(os.path.join(store, SAVED_ENGINE), os.path.join(work, "aside.engine"))
    sketched = _timed("open, texts re-sketched", lambda: opened.append(Deduplicator.open(store)))
    opened.pop().close()
    return saved, sketched


def against(corpus: str, texts: list[str], work: str) -> tuple[float, float]:
    ref = os.path.join(work, "ref")
    shutil.rmtree(ref, ignore_errors=True)
    queries = os.path.join(work, "queries.jsonl")
    with open(queries, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts[:1000]):
            f.write(json.dumps({"id": f"q{i}", "text": t[:-5]}) + "\n")
    cli = [sys.executable, "-m", "neardup"]
    build = [*cli, "index", "build", ref, corpus, "-q"]
    _timed("index build (engine saved)", lambda: subprocess.run(build, check=True))
    run = [*cli, "dedup", queries, "--against", ref, "-o", os.path.join(work, "out.jsonl"), "-q"]
    saved = _timed("dedup --against, saved engine", lambda: subprocess.run(run, check=True))
    os.replace(os.path.join(ref, SAVED_ENGINE), os.path.join(work, "aside-ref.engine"))
    sketched = _timed("dedup --against, texts re-sketched", lambda: subprocess.run(run, check=True))
    return saved, sketched


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("corpus", help="JSONL with id and text (benches/workloads.py)")
    p.add_argument("--work", required=True, help="a directory for the store and the index")
    p.add_argument("--skip-reopen", action="store_true")
    p.add_argument("--skip-against", action="store_true")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ids, texts = _read(a.corpus)
    if not a.skip_reopen:
        saved, sketched = reopen(ids, texts, a.work)
        print(json.dumps({"reopen_docs": len(texts), "speedup": round(sketched / saved, 1)}))
    if not a.skip_against:
        saved, sketched = against(a.corpus, texts, a.work)
        print(json.dumps({"against_references": len(texts), "speedup": round(sketched / saved, 1)}))


if __name__ == "__main__":
    main()
