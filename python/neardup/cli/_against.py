"""`neardup dedup --against REF…`: the reference documents a corpus is deduplicated against.

A reference is any input the command reads (a file of a known format, a directory of .txt/.html
files, a Hugging Face dataset saved with ``save_to_disk``) or a reference directory written by
``neardup index build`` (its texts are stored in ``DIR/texts.sqlite``, so the reference corpus is
read from there, not from where it came from; opened read-only, :func:`reference_store`).
References are fed to :meth:`neardup.corpus.CorpusDeduper.add_references` before the corpus:
kept first, never written out; a corpus document that is a near-copy of one is dropped and the
outputs name the reference's id (its record's id, else ``FILE:LINE``, or the id it was stored
under in an index directory).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from neardup import io as nio
from neardup._core import CorruptIndexError, IncompatibleIndexError, Index
from neardup.corpus import CorpusDeduper
from neardup.durable import index_rows
from neardup.io import counted, eprint
from neardup.kept import saved_engine_path
from neardup.policy import Policy
from neardup.textstore import CorruptTextStoreError, SqliteTextStore

#: The stored texts of an index directory (``neardup index build``), what ``--against`` reads.
REFERENCE_TEXTS = "texts.sqlite"
_CHUNK = 16384
_logger = logging.getLogger("neardup.cli")


def removed_summary(
    removed: int,
    clusters: int,
    by_reference: int,
    matched: int,
    references: int | None,
    empty: int = 0,
) -> str:
    """How the removed documents of a dedup run split: ``removed N in C clusters``, or, with
    references (``references`` read, ``by_reference`` documents dropped as copies of ``matched``
    of them) or ``empty`` documents dropped (``--empty drop``), ``removed N (A in C clusters,
    B as near-copies of M of the R references, E empty)``."""
    if references is None and not empty:
        return f"removed {removed:,} in {counted(clusters, 'cluster')}"
    parts = [f"{removed - by_reference - empty:,} in {counted(clusters, 'cluster')}"]
    if references is not None:
        parts.append(
            f"{by_reference:,} as near-copies of {matched:,} of the "
            f"{counted(references, 'reference')}"
        )
    if empty:
        parts.append(f"{empty:,} empty")
    return f"removed {removed:,} ({', '.join(parts)})"


#: Skipped reference records named one by one (then counted), as the corpus's are.
_SHOWN_SKIPS = 10


class ReferenceInputError(ValueError):
    """A reference that cannot be used (missing, an unknown format, a bad record)."""


@dataclass
class Reference:
    """One ``--against`` argument: an input of the command or an index directory."""

    path: str
    source: nio.Source | None  # None: an index directory, or a saved dataset
    dataset: bool = False  # a Hugging Face dataset saved with save_to_disk

    def size(self) -> int:
        """Bytes on disk (progress total)."""
        if self.dataset:
            return 0
        if self.source is None:
            return os.path.getsize(os.path.join(self.path, REFERENCE_TEXTS))
        from neardup.cli.dedup import input_bytes  # (dedup imports this module)

        return input_bytes([self.source])


def is_index_dir(path: str) -> bool:
    """Whether ``path`` is a directory written by ``neardup index build``."""
    from neardup.cli.index import SETTINGS_FILE

    return os.path.isfile(os.path.join(path, SETTINGS_FILE))


def texts_missing(path: str) -> str | None:
    """What is wrong with index directory ``path`` whose settings say its texts are stored
    (``index build``) when their file is gone; None when nothing is (or they never were)."""
    from neardup.cli.index import SETTINGS_FILE

    texts = os.path.join(path, REFERENCE_TEXTS)
    try:
        with open(os.path.join(path, SETTINGS_FILE), encoding="utf-8") as f:
            stored = json.load(f).get("texts") is True
    except (OSError, ValueError, AttributeError):
        return None  # (whoever reads the settings says what is wrong with them)
    if not stored or os.path.isfile(texts):
        return None
    return (
        f"{texts} is missing: the texts of the documents indexed are gone (queries and "
        "dedup --against verify against them); restore it, or build a new directory"
    )


def is_saved_dataset(path: str) -> bool:
    """Whether ``path`` is a Hugging Face dataset written by ``Dataset.save_to_disk``."""
    return all(os.path.isfile(os.path.join(path, f)) for f in ("state.json", "dataset_info.json"))


def open_references(paths: list[str], format: str | None) -> list[Reference]:
    """Check every ``--against`` path before anything is read or written.

    Raises :class:`ReferenceInputError` naming the path and what is wrong with it.
    """
    out = []
    for path in paths:
        if not os.path.exists(path):
            raise ReferenceInputError(f"--against {path}: no such file or directory")
        if os.path.isdir(path) and is_index_dir(path):
            missing = texts_missing(path)
            if missing is not None:
                raise ReferenceInputError(f"--against {path}: {missing}")
            if not os.path.isfile(os.path.join(path, REFERENCE_TEXTS)):
                raise ReferenceInputError(
                    f"--against {path}: this index directory holds fingerprints only (built "
                    f"before index build stored texts, or with --raw); build a new directory "
                    f"from the texts with `neardup index build NEW_DIR INPUT…` (without --raw)"
                )
            out.append(Reference(path, None))
            continue
        from neardup.cli._datasets import dataset_dict_refused, is_saved_dataset_dict

        if os.path.isdir(path) and is_saved_dataset_dict(path):
            raise ReferenceInputError(f"--against {dataset_dict_refused(path)}")
        if is_saved_dataset(path):
            out.append(Reference(path, None, dataset=True))
            continue
        try:
            sources = nio.input_sources(path, None if os.path.isdir(path) else format)
        except nio.UnknownFormatError as e:
            raise ReferenceInputError(f"--against {e}") from None
        if sources[0].format == "dir" and not nio.dir_files(path):
            raise ReferenceInputError(
                f"--against {path}: holds no .txt, .text, .html or .htm file and is not an "
                "index directory (neardup index build)"
            )
        out += [Reference(s.path, s) for s in sources]
    # (directories among several references are named, as the inputs are: distinct ids)
    named = iter(nio.named([r.source for r in out if r.source is not None]))
    for r in out:
        if r.source is not None:
            r.source = next(named)
    return out


def reference_store(directory: str) -> SqliteTextStore:
    """The text store of index directory ``directory`` (``DIR/texts.sqlite``), opened
    read-only (:class:`~neardup.textstore.SqliteTextStore` with ``read_only=True``): a
    reference directory is only read (``--against``, ``index query``, ``serve --against``), so
    it may be on a read-only disk or belong to another user. A store that cannot be read raises
    :class:`~neardup.textstore.CorruptTextStoreError` or ``OSError`` naming its file."""
    return SqliteTextStore(os.path.join(directory, REFERENCE_TEXTS), read_only=True)


def index_stored(
    index: Index, store: SqliteTextStore, fingerprint_many: Callable[[list[str]], Any]
) -> None:
    """Add every row of ``store`` to ``index``, in the order written, with its stored
    fingerprint and timestamp (``fingerprint_many`` makes those of the texts stored without
    one, which the read-only store does not keep): the index an index directory's references
    are looked up in (:func:`neardup.durable.index_rows`, what a durable log replays)."""
    index_rows(index, store, fingerprint_many)


def _open_reference(path: str) -> SqliteTextStore:
    try:
        return reference_store(path)
    except (CorruptTextStoreError, OSError) as e:
        raise ReferenceInputError(f"--against {path}: {e}") from None


def _stored(path: str) -> Iterator[tuple[Any, str]]:
    store = _open_reference(path)
    try:
        for i, text, _ in store.items():
            yield i, text
    finally:
        store.close()


def _saved(
    path: str, spec: nio.FieldSpec, quiet: bool, on_error: str = "fail"
) -> Iterator[tuple[Any, str]]:
    """The rows of a saved dataset, ids by the rule of every input (:func:`neardup.io.record_id`:
    ``--against-id-field``, else the ``id`` column where there is one), else ``DIR:ROW``. A
    directory ``datasets.load_from_disk`` cannot open, or a row whose text is null under
    ``on_error`` ``"fail"``, raises :class:`ReferenceInputError` naming it; under ``"skip"``
    such rows are left out (the first named), as a file's bad records are."""
    import numpy as np

    from neardup.cli._datasets import (
        UnreadableDatasetError,
        load_saved,
        null_record,
        null_rows,
        quiet_datasets,
        say_skipped,
    )
    from neardup.integrations.datasets import check_text_column, column_texts, row_ids

    try:
        with quiet_datasets(quiet):
            ds = load_saved(path)
    except UnreadableDatasetError as e:
        raise ReferenceInputError(f"--against {e}") from None
    if spec.id_field is not None and spec.id_field not in ds.column_names:
        raise ReferenceInputError(f"--against {path}: no id column {spec.id_field!r}")
    try:
        check_text_column(ds, spec.text_field, "--against-text-field")
        # (under skip the rows with a text, named by their rows in the dataset)
        places = np.arange(ds.num_rows, dtype=np.int64)
        bad = null_rows(ds, spec.text_field).tolist() if on_error == "skip" else []
        if bad and len(bad) == ds.num_rows:
            raise ReferenceInputError(
                f"--against {path}: none of its {counted(len(bad), 'row')} could be read "
                f"(the first: {null_record(path, spec.text_field, bad[0])})"
            )
        if bad:
            say_skipped(path, spec.text_field, bad, quiet, against=True)
            places = np.delete(places, bad)
        rows = ds.select(places) if bad else ds
        at = 0
        for texts in column_texts(rows, spec.text_field, _CHUNK, "--against-text-field"):
            chunk = places[at : at + len(texts)].tolist()
            for doc_id, row, text in zip(row_ids(ds, chunk, spec.id_field), chunk, texts):
                yield nio.id_or_place(doc_id, path, row), text
            at += len(texts)
    except ReferenceInputError:
        raise
    except ValueError as e:
        raise ReferenceInputError(f"--against {path}: {e}") from None


def _read(
    ref: Reference, spec: nio.FieldSpec, on_error: str, quiet: bool
) -> Iterator[tuple[Any, str]]:
    if ref.dataset:
        yield from _saved(ref.path, spec, quiet, on_error)
        return
    if ref.source is None:
        yield from _stored(ref.path)
        return
    source = ref.source
    read, first_bad, bad = 0, None, 0
    for doc in nio.read_docs(source, spec):
        if isinstance(doc, nio.InputError):
            if on_error == "fail":
                raise ReferenceInputError(f"--against {doc}")
            first_bad, bad = first_bad or doc, bad + 1
            if not quiet and bad <= _SHOWN_SKIPS:
                eprint(f"neardup dedup: skipped --against {doc}")
            continue
        read += 1
        yield nio.id_or_place(doc.id, source.path, doc.line), doc.text
    if bad and not read:  # (a wrong --against-text-field: the references would be none)
        raise ReferenceInputError(
            f"--against {source.path}: none of its {counted(bad, 'record')} could be read "
            f"(the first: {first_bad})"
        )
    if bad > _SHOWN_SKIPS and not quiet:
        more = bad - _SHOWN_SKIPS
        eprint(f"neardup dedup: ... {more} more bad records of --against {source.path} skipped")


def save_references(path: str, store: SqliteTextStore, policy: Policy) -> str | None:
    """Save the decision engine's rows of the texts stored in index directory ``path``
    (``neardup index build``), so that ``--against``, ``index query`` and ``serve --against``
    load them instead of preparing and sketching every reference again: the rows saved
    before and still valid are loaded, the texts added since prepared. Returns the file's
    path (None: not saved, the log says why)."""
    from neardup.dedup import Deduplicator

    html_pages = sum(policy.is_html(text) for _, text, _ in store.items())
    refs = Deduplicator(policy=policy, store=store)
    return refs.save_engine({"html_pages": html_pages})


def _load_saved(deduper: CorpusDeduper, ref: Reference) -> list[Any] | None:
    """The ids of index directory ``ref``'s references, loaded into the empty ``deduper`` from
    its saved engine when that matches its text store (else None: prepared from the texts)."""
    saved = saved_engine_path(os.path.join(ref.path, REFERENCE_TEXTS))
    if len(deduper) or deduper.references or not os.path.isfile(saved):
        return None
    store = _open_reference(ref.path)
    try:
        ids, _ = store.ids_by_seq()
        deduper.load_references(saved, ids, store.last_seq)
    except (CorruptIndexError, IncompatibleIndexError) as e:
        _logger.warning("%s; reading the texts instead", e)
        return None
    finally:
        store.close()
    return ids


def add_references(
    deduper: CorpusDeduper,
    refs: list[Reference],
    args: argparse.Namespace,
    advance: Any = None,
) -> list[Any]:
    """Feed every reference document to ``deduper``; returns their ids, in feeding order.

    Records are read with ``--against-text-field`` (default: ``--text-field``) and
    ``--against-id-field``; a bad record stops with :class:`ReferenceInputError` under ``--on-error
    fail`` and is left out under ``skip``."""
    spec = nio.FieldSpec(args.against_text_field or args.text_field, args.against_id_field, None)
    ids: list[Any] = []
    for ref in refs:
        loaded = _load_saved(deduper, ref) if ref.source is None and not ref.dataset else None
        if loaded is not None:
            ids.extend(loaded)
            if advance is not None:
                advance(ref.size())
            continue
        chunk_ids: list[Any] = []
        texts: list[str] = []
        try:
            for i, text in _read(ref, spec, args.on_error, bool(getattr(args, "quiet", False))):
                chunk_ids.append(i)
                texts.append(text)
                if len(texts) >= _CHUNK:
                    deduper.add_references(texts)
                    ids.extend(chunk_ids)
                    chunk_ids, texts = [], []
        except nio.InputError as e:
            raise ReferenceInputError(f"--against {e}") from None
        if texts:
            deduper.add_references(texts)
            ids.extend(chunk_ids)
        if advance is not None:
            advance(ref.size())
    return ids
