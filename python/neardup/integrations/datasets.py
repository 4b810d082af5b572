"""Near-duplicates out of a Hugging Face ``datasets.Dataset`` or ``IterableDataset`` column.

>>> from datasets import Dataset
>>> from neardup.integrations.datasets import deduplicate
>>> ds = Dataset.from_dict({"text": ["a long enough text about rivers and bridges"] * 3 + ["b"]})
>>> deduplicate(ds).num_rows
2

The decision is ``neardup dedup``'s (:class:`neardup.corpus.CorpusDeduper`, the default policy
unless ``policy`` is given). A ``Dataset`` is read through Arrow a batch at a time (only the
text column becomes Python strings, which the core needs) and the result is
``dataset.select(kept_rows)``: an indices mapping over the same Arrow table, no row copied. An
``IterableDataset`` is read once to decide, and the result is the same dataset filtered by row
number, read again as it is consumed: its order must not change between the two reads (no
``shuffle`` before). ``against`` (a dataset, whose ``against_column`` is read, or a sequence of
texts) is the reference set: kept ahead of the dataset, never returned, and a row that is a
near-copy of one of its rows is dropped.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Union

import numpy as np
import numpy.typing as npt

try:
    import datasets as hf
    import pyarrow.compute as pc
except ImportError as e:  # pragma: no cover (the extra is missing)
    raise ImportError(
        f"neardup.integrations.datasets needs pip install 'neardup[datasets]' ({e})"
    ) from e

from neardup.corpus import CorpusDeduper, CorpusResult
from neardup.integrations import keep_order
from neardup.io import record_id
from neardup.policy import Policy

__all__ = [
    "KEEP",
    "check_text_column",
    "column_texts",
    "decide",
    "deduplicate",
    "deduplicate_with",
    "feed_references",
    "learn_boilerplate",
    "row_ids",
]

#: Which row of a group of near-copies stays: the first, or the one with the longest text.
KEEP = ("first", "longest")
_BATCH = 16384

AnyDataset = Union["hf.Dataset", "hf.IterableDataset"]


def check_text_column(dataset: Any, column: str, name: str) -> None:
    """Raise ValueError naming ``name`` unless ``column`` is a string column of ``dataset``."""
    features = getattr(dataset, "features", None)
    if features is None:  # (an IterableDataset whose features are not known until read)
        return
    if column not in features:
        raise ValueError(
            f"{name} {column!r} is not a column of the dataset; its columns: {', '.join(features)}"
        )
    feature = features[column]
    # (a column of nulls: an empty dataset's, which has no row; else column_texts names the row)
    if not (isinstance(feature, hf.Value) and feature.dtype in ("string", "large_string", "null")):
        raise ValueError(f"{name} {column!r} holds {feature}, not strings")


def column_texts(dataset: Any, column: str, batch_size: int, name: str) -> Iterator[list[str]]:
    """The column's texts, a batch at a time; a null is an error naming its row."""
    row = 0
    if isinstance(dataset, hf.Dataset):
        for table in dataset.with_format("arrow").iter(batch_size=batch_size):
            values = table.column(column)
            if values.null_count:
                bad = row + int(pc.index(pc.is_null(values), True).as_py())
                raise ValueError(f"{name} {column!r} is null at row {bad}")
            texts = values.to_pylist()
            row += len(texts)
            yield texts
        return
    for batch in dataset.iter(batch_size=batch_size):
        if column not in batch:
            raise ValueError(
                f"{name} {column!r} is not a column of the dataset; its columns: {', '.join(batch)}"
            )
        texts = batch[column]
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                what = "null" if t is None else f"a {type(t).__name__}, not a string"
                raise ValueError(f"{name} {column!r} is {what} at row {row + i}")
        row += len(texts)
        yield texts


def _check(dataset: Any, name: str) -> None:
    if not isinstance(dataset, (hf.Dataset, hf.IterableDataset)):
        raise TypeError(
            f"{name} must be a datasets.Dataset or IterableDataset, got {type(dataset).__name__}"
            + (" (a DatasetDict: pick a split, e.g. ds['train'])" if isinstance(
                dataset, (hf.DatasetDict, hf.IterableDatasetDict)) else "")
        )  # fmt: skip


def row_ids(dataset: Any, rows: Sequence[int], id_field: str | None) -> list[Any]:
    """The ids of ``rows`` of a dataset by the rule of every input (:func:`neardup.io.record_id`:
    its ``id_field`` column, else an ``id`` column where there is one); None for a row without
    one (the caller names it). ValueError names a bad row."""
    column = id_field or ("id" if "id" in dataset.column_names else None)
    if column is None or not len(rows):
        return [None] * len(rows)
    out = []
    for row, value in zip(rows, dataset.select(rows)[column]):
        try:
            out.append(record_id({column: value}, id_field))
        except ValueError as e:
            raise ValueError(f"row {row}: {e}") from None
    return out


def learn_boilerplate(
    deduper: CorpusDeduper,
    dataset: AnyDataset,
    column: str = "text",
    batch_size: int = _BATCH,
    *,
    again: Callable[[], object] | None = None,
) -> bool:
    """When ``dataset``'s ``column`` holds HTML pages (:meth:`Policy.has_pages`: among its
    first rows), let ``deduper`` learn the corpus's boilerplate from all of it, as the command
    does for file inputs, before references or rows are prepared; returns whether it did.
    Otherwise (with the ``"auto"`` policy) a page further down, or among references, has it
    read the column again and learn it then (:attr:`CorpusDeduper.corpus_texts`; ``again`` is
    told first), so that a page is prepared alike wherever it sits."""
    check_text_column(dataset, column, "column")
    head = itertools.chain.from_iterable(column_texts(dataset, column, batch_size, "column"))
    if deduper.policy.has_pages([head]):
        for texts in column_texts(dataset, column, batch_size, "column"):
            deduper.learn_boilerplate(texts)
        return True
    if deduper.policy.html == "auto":

        def read_again() -> Iterator[str]:
            if again is not None:
                again()
            for texts in column_texts(dataset, column, batch_size, "column"):
                yield from texts

        deduper.corpus_texts = read_again
    return False


def feed_references(
    deduper: CorpusDeduper,
    against: AnyDataset | Sequence[str],
    column: str = "text",
    batch_size: int = _BATCH,
) -> int:
    """Add the reference rows of ``against`` (a dataset's ``column``, or texts) to ``deduper``;
    returns how many."""
    before = deduper.references
    if isinstance(against, (hf.Dataset, hf.IterableDataset)):
        check_text_column(against, column, "against_column")
        for texts in column_texts(against, column, batch_size, "against_column"):
            deduper.add_references(texts)
    elif isinstance(against, (str, bytes)) or not isinstance(against, Sequence):
        raise TypeError(
            "against must be a datasets.Dataset, an IterableDataset or a sequence of str, got "
            f"{type(against).__name__}"
        )
    else:
        for start in range(0, len(against), batch_size):
            deduper.add_references(list(against[start : start + batch_size]))
    return deduper.references - before


def deduplicate_with(
    deduper: CorpusDeduper,
    dataset: AnyDataset,
    column: str = "text",
    *,
    keep: str = "first",
    batch_size: int = _BATCH,
) -> tuple[AnyDataset, CorpusResult]:
    """:func:`deduplicate` with a deduplicator of the caller's (its references already added);
    returns the kept rows and the decision (:class:`neardup.corpus.CorpusResult`, by row)."""
    _check(dataset, "dataset")
    if keep not in KEEP:
        raise ValueError(f"keep must be one of {', '.join(KEEP)}; got {keep!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    check_text_column(dataset, column, "column")
    lengths: list[npt.NDArray[np.int64]] = []
    for texts in column_texts(dataset, column, batch_size, "column"):
        if keep == "longest":
            lengths.append(np.fromiter(map(len, texts), np.int64, len(texts)))
        deduper.feed(texts)
    size = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    result = deduper.result(keep_order(keep, size))
    kept: npt.NDArray[np.bool_] = result.kept
    if isinstance(dataset, hf.Dataset):
        return dataset.select(np.flatnonzero(kept)), result
    return dataset.filter(lambda _, i: bool(kept[i]), with_indices=True), result


def deduplicate(
    dataset: AnyDataset,
    column: str = "text",
    *,
    against: AnyDataset | Sequence[str] | None = None,
    against_column: str | None = None,
    keep: str = "first",
    policy: Policy | None = None,
    batch_size: int = _BATCH,
) -> AnyDataset:
    """The rows of ``dataset`` that are not near-copies of an earlier row (``keep="first"``; or
    of a longer one, ``"longest"``) nor of a row of ``against`` (its ``against_column``, default
    ``column``), as a dataset of the same kind (see the module docstring). For the decision
    itself (which row each dropped row duplicates, the similarities), call
    :func:`deduplicate_with`."""
    _check(dataset, "dataset")

    def references(deduper: CorpusDeduper) -> None:
        if against is not None:
            feed_references(deduper, against, against_column or column, batch_size)

    kept, _ = decide(CorpusDeduper(policy), dataset, column, keep, batch_size, before=references)
    return kept


def decide(
    deduper: CorpusDeduper,
    dataset: AnyDataset,
    column: str = "text",
    keep: str = "first",
    batch_size: int = _BATCH,
    *,
    before: Callable[[CorpusDeduper], object] | None = None,
    again: Callable[[], object] | None = None,
) -> tuple[AnyDataset, CorpusResult]:
    """:func:`deduplicate_with` by a new ``deduper`` that learns the dataset's boilerplate
    (:func:`learn_boilerplate`: first when its first rows hold pages, else when a page shows,
    ``again`` told), then is given what it needs by ``before`` (references), so that a page is
    prepared alike wherever it sits (what ``neardup dedup`` does for files)."""
    learn_boilerplate(deduper, dataset, column, batch_size, again=again)
    if before is not None:
        before(deduper)
    return deduplicate_with(deduper, dataset, column, keep=keep, batch_size=batch_size)
