"""Helpers of the Spark job that run in the Python workers: groups of rows that share a key
across Arrow batches, and stable hashes."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd


def sorted_groups(
    batches: Iterator[pd.DataFrame],
    key: str,
    run: Callable[[pd.DataFrame, np.ndarray], pd.DataFrame | None],
) -> Iterator[pd.DataFrame]:
    """``run(frame, starts)`` over frames of whole groups of ``key``: the rows of one partition
    arrive sorted by ``key`` (``sortWithinPartitions``) but an Arrow batch may end inside a
    group, so the last group of each batch waits for the next. ``starts`` are the offsets of
    the groups in ``frame`` (``starts[-1] == len(frame)``)."""
    carry: pd.DataFrame | None = None
    for batch in batches:
        if carry is not None and len(carry):
            batch = pd.concat([carry, batch], ignore_index=True)
        if not len(batch):
            continue
        keys = batch[key].to_numpy()
        change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        last = int(change[-1]) if change.size else 0
        if last == 0:
            carry = batch
            continue
        carry = batch.iloc[last:].reset_index(drop=True)
        whole = batch.iloc[:last].reset_index(drop=True)
        out = run(whole, np.concatenate([[0], change[change < last], [last]]))
        if out is not None and len(out):
            yield out
    if carry is not None and len(carry):
        keys = carry[key].to_numpy()
        change = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        out = run(carry, np.concatenate([[0], change, [len(carry)]]))
        if out is not None and len(out):
            yield out


def stable_hash64(text: str) -> int:
    """A 64-bit hash of ``text`` that every Python worker computes alike (``hash()`` of a str
    is salted per process), as a signed int64."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def stable_hash128(text: str) -> tuple[int, int]:
    """Two signed int64 of a 128-bit hash of ``text`` (identity of exact copies)."""
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    return (
        int.from_bytes(digest[:8], "little", signed=True),
        int.from_bytes(digest[8:], "little", signed=True),
    )
