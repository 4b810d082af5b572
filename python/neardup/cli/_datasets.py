"""``neardup dedup DIR -o OUT`` where DIR is a Hugging Face dataset saved with ``save_to_disk``.

The dataset is opened with ``datasets.load_from_disk`` (memory-mapped Arrow files), its
``--text-field`` column deduplicated by :func:`neardup.integrations.datasets.deduplicate_with`
(the decision and the preparation of every other input: with pages among the rows, the
boilerplate pass over the whole column first; ids by the same rule, ``--id-field``, else the
``id`` column where there is one, else the row number), and the kept rows are written with
``save_to_disk`` to OUT, a new directory that ``load_from_disk`` opens (with no row kept, a
dataset of no row with the input's columns). The options of files that do not apply to a
dataset (``--pairs``, ``--report``, ``--time-field``, ``--format``, ``--empty drop``) are
refused before anything is read, and the output paths are checked as those of files are
(:func:`neardup.cli._paths.paths_refused`). A row whose text is null is a bad record, as in a
file (``--on-error``). A ``DatasetDict`` saved with ``save_to_disk`` (its splits in
subdirectories) is refused naming a split's directory to give instead. ``-q`` silences the
``datasets`` package's progress bars too.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup import io as nio
from neardup.cli._against import (
    _SHOWN_SKIPS,
    ReferenceInputError,
    add_references,
    is_saved_dataset,
    open_references,
    removed_summary,
)
from neardup.cli._paths import paths_refused
from neardup.corpus import CorpusDeduper
from neardup.io import counted, eprint

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2
_BATCH = 16384
#: What ``save_to_disk`` writes in a dataset's directory (besides its ``data-*.arrow`` files).
_DATASET_FILES = ("dataset_info.json", "state.json")
#: The file of a ``DatasetDict`` saved with ``save_to_disk`` (its splits: subdirectories).
_DICT_FILE = "dataset_dict.json"


class UnreadableDatasetError(ValueError):
    """A saved dataset that ``datasets.load_from_disk`` cannot open; the message names it."""


def holds_saved_dataset(args: argparse.Namespace) -> bool:
    """Whether an input of the job is a saved dataset (or a saved ``DatasetDict``, which
    :func:`run_saved_dataset` refuses naming a split to give)."""
    return any(
        os.path.isdir(p) and (is_saved_dataset(p) or is_saved_dataset_dict(p)) for p in args.inputs
    )


def is_saved_dataset_dict(path: str) -> bool:
    """Whether ``path`` is a ``DatasetDict`` written by ``DatasetDict.save_to_disk``."""
    return os.path.isfile(os.path.join(path, _DICT_FILE))


def dataset_dict_refused(path: str) -> str:
    """What to say of ``path``, a saved ``DatasetDict``: give one of its splits' directories."""
    splits: list[str] = []
    try:
        with open(os.path.join(path, _DICT_FILE), encoding="utf-8") as f:
            listed = json.load(f).get("splits")
        if isinstance(listed, list):
            splits = [s for s in listed if isinstance(s, str)]
    except (OSError, ValueError, AttributeError):
        pass  # (then its subdirectories that are datasets)
    if not splits:
        splits = sorted(e.name for e in os.scandir(path) if e.is_dir() and is_saved_dataset(e.path))
    example = os.path.join(path, splits[0] if splits else "train")
    return (
        f"{path} is a DatasetDict saved with save_to_disk"
        + (f" (splits: {', '.join(splits)})" if splits else "")
        + f", not one dataset: give one split's directory, e.g. {example}"
    )


def load_saved(path: str) -> Any:
    """``datasets.load_from_disk(path)``, a ``datasets.Dataset``. A directory it cannot open
    (an empty dataset saved without a data file, a file of it missing or damaged, a
    ``DatasetDict``) raises :class:`UnreadableDatasetError` naming ``path`` and why."""
    from datasets import Dataset, load_from_disk

    try:
        ds = load_from_disk(path)
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as e:
        if isinstance(e, IndexError) and _lists_no_data_file(path):
            raise UnreadableDatasetError(
                f"{path}: datasets.load_from_disk cannot open it: its state.json lists no data "
                "file (a dataset of no row saved by save_to_disk without num_shards=1); save "
                "it again with save_to_disk(..., num_shards=1)"
            ) from None
        raise UnreadableDatasetError(
            f"{path}: datasets.load_from_disk cannot open it ({type(e).__name__}: {e})"
        ) from None
    if not isinstance(ds, Dataset):
        raise UnreadableDatasetError(
            dataset_dict_refused(path)
            if is_saved_dataset_dict(path)
            else f"{path}: datasets.load_from_disk gives a {type(ds).__name__}, not a Dataset"
        )
    return ds


def _lists_no_data_file(path: str) -> bool:
    try:
        with open(os.path.join(path, "state.json"), encoding="utf-8") as f:
            return json.load(f).get("_data_files") == []
    except (OSError, ValueError, AttributeError):
        return False


def null_rows(ds: Any, column: str) -> npt.NDArray[np.int64]:
    """The rows of dataset ``ds`` whose ``column`` (a string column) is null: its bad records,
    found through Arrow without making a Python string."""
    import pyarrow.compute as pc

    found: list[npt.NDArray[np.int64]] = []
    start = 0
    for table in ds.select_columns([column]).with_format("arrow").iter(batch_size=_BATCH):
        values = table.column(column)
        if values.null_count:
            nulls = np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=bool)
            found.append(start + np.flatnonzero(nulls))
        start += table.num_rows
    return np.concatenate(found).astype(np.int64) if found else np.zeros(0, np.int64)


def _refused(args: argparse.Namespace) -> str | None:
    if len(args.inputs) != 1:
        return "a saved dataset is deduplicated on its own: give it as the only input"
    for flag, given in (
        ("--pairs", args.pairs),
        ("--report", args.report),
        ("--time-field", args.time_field),
        ("--format", args.format),
        ("--empty drop", args.empty == "drop"),
        ("--engine spark", args.engine == "spark"),
    ):
        if given:
            return (
                f"{flag} does not apply to a saved dataset (only --clusters, --keep first or "
                "longest, --against and the policy's flags do)"
            )
    if os.path.exists(args.output) and (not os.path.isdir(args.output) or os.listdir(args.output)):
        return f"{args.output} exists; a saved dataset is written to a new (or empty) directory"
    return None


@contextmanager
def quiet_datasets(quiet: bool) -> Iterator[None]:
    """With ``-q``, the ``datasets`` package's own progress bars (loading, saving, selecting)
    are not shown either."""
    if not quiet:
        yield
        return
    from datasets.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def run_saved_dataset(args: argparse.Namespace) -> int:
    """Run ``neardup dedup`` over a saved dataset; returns the exit code."""
    dicts = [p for p in args.inputs if os.path.isdir(p) and not is_saved_dataset(p)]
    problem = next((dataset_dict_refused(p) for p in dicts if is_saved_dataset_dict(p)), None)
    problem = problem or _refused(args)
    if problem is None and args.keep == "newest":
        problem = "--keep newest needs times: a saved dataset takes --keep first or longest"
    if problem is not None:
        eprint(f"neardup dedup: {problem}")
        return EXIT_USAGE
    # the paths as a file input's (-o: a directory the job makes; --pairs, --report refused)
    outputs = {"-o": args.output, "--clusters": args.clusters}
    if paths_refused(
        "dedup", [*args.inputs, *args.against], outputs, directories={"-o": _DATASET_FILES}
    ):
        return EXIT_USAGE
    try:
        import datasets  # noqa: F401

        from neardup.integrations import datasets as _  # noqa: F401
    except ImportError as e:
        eprint(f"neardup dedup: a saved dataset needs pip install 'neardup[datasets]' ({e})")
        return EXIT_USAGE
    with quiet_datasets(args.quiet):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from neardup.cli.dedup import (
        LATE_PAGES,
        Clusters,
        _write_clusters,
        _write_reference_clusters,
        make_policy,
    )
    from neardup.integrations.datasets import check_text_column, decide

    started = time.perf_counter()
    (path,) = args.inputs
    try:
        references = open_references(args.against, None)
        policy = make_policy(args)
        # (made here: a --temp-dir it cannot use is a usage error)
        deduper = CorpusDeduper(policy, spill_dir=args.temp_dir)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except ValueError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_USAGE
    try:
        ds = load_saved(path)
        check_text_column(ds, args.text_field, "--text-field")
        if args.id_field is not None and args.id_field not in ds.column_names:
            raise ValueError(f"--id-field {args.id_field!r} is not a column of {path}")
        bad = null_rows(ds, args.text_field)
        if len(bad) and args.on_error == "fail":
            eprint(f"neardup dedup: {null_record(path, args.text_field, int(bad[0]))}")
            eprint("(--on-error skip leaves bad records out and goes on)")
            return EXIT_INPUT
        # --on-error skip: the rows with a text, numbered as in the input (--clusters)
        places = np.setdiff1d(np.arange(ds.num_rows, dtype=np.int64), bad) if len(bad) else None
        rows = ds.select(places) if places is not None else ds
        say_skipped(path, args.text_field, bad.tolist(), args.quiet, against=False)
        # pages: the corpus's boilerplate is learnt first, as for the other inputs (and over
        # all of it when a page shows past the rows probed), then the references are added
        reference_ids: list[Any] = []

        def add_refs(deduper: CorpusDeduper) -> None:
            reference_ids[:] = add_references(deduper, references, args) if references else []

        def say_again() -> None:
            if not args.quiet:
                eprint(f"neardup dedup: {LATE_PAGES}")

        kept, result = decide(
            deduper,
            rows,
            args.text_field,
            args.keep,
            _BATCH,
            before=add_refs,
            again=say_again,
        )
        groups = Clusters.of(result)
        ids: dict[int, Any] = {}
        if args.clusters:
            grouped = np.flatnonzero(groups.in_cluster | groups.of_reference)
            ids = _row_ids(ds, grouped, places, args)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except UnreadableDatasetError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except (ValueError, OSError) as e:
        eprint(f"neardup dedup: {path}: {e}")
        return EXIT_INPUT
    try:
        # (save_to_disk writes no data file for a dataset of no row, and load_from_disk cannot
        # open such a directory: one shard, of no row, keeps the columns)
        kept.save_to_disk(args.output, **({"num_shards": 1} if kept.num_rows == 0 else {}))
    except OSError as e:
        eprint(f"neardup dedup: -o {args.output}: {e}")
        return EXIT_INPUT
    if args.clusters:
        try:
            _write_clusters(
                args.clusters, result.representative, groups.in_cluster, result.distance, ids
            )
            if references:
                _write_reference_clusters(args.clusters, result, reference_ids, ids)
        except OSError as e:
            eprint(f"neardup dedup: --clusters {args.clusters}: {e}")
            return EXIT_INPUT
    if not args.quiet:
        n = len(result.representative)
        n_kept = int(groups.kept.sum())
        removed = removed_summary(
            n - n_kept,
            len(groups.reps),
            int(groups.of_reference.sum()),
            len(np.unique(result.reference[groups.of_reference])),
            len(reference_ids) if references else None,
        )
        skipped = f" ({counted(len(bad), 'bad record')} skipped)" if len(bad) else ""
        eprint(
            f"neardup dedup: read {counted(n, 'row')}{skipped}, kept {n_kept:,}, {removed}, "
            f"{time.perf_counter() - started:.1f} s -> {args.output}"
        )
    return EXIT_OK


def null_record(path: str, field: str, row: int) -> nio.InputError:
    """A row of a saved dataset whose text is null, named as a file's bad record (``DIR:ROW``)."""
    return nio.InputError(path, row, f"field {field!r} is null, expected a string", row)


def say_skipped(path: str, field: str, bad: list[int], quiet: bool, against: bool) -> None:
    """Under ``--on-error skip``, name the first null rows left out of a saved dataset (the
    input, or ``against``: the references), then count the rest."""
    if quiet:
        return
    where = "--against " if against else ""
    for row in bad[:_SHOWN_SKIPS]:
        eprint(f"neardup dedup: skipped {where}{null_record(path, field, row)}")
    if len(bad) > _SHOWN_SKIPS:
        of = f" of --against {path}" if against else ""
        eprint(f"neardup dedup: ... {len(bad) - _SHOWN_SKIPS} more bad records{of} skipped")


def _row_ids(
    ds: Any,
    rows: npt.NDArray[np.int64],
    places: npt.NDArray[np.int64] | None,
    args: argparse.Namespace,
) -> dict[int, Any]:
    """The ids of ``rows`` of the rows deduplicated (``places``: their rows in the dataset, the
    rows with a text, where bad ones were skipped), by the rule of every input
    (:func:`neardup.io.record_id`: ``--id-field``, else the ``id`` column where there is one),
    else the row number in the dataset (as a file's row in ``--clusters``). ValueError names a
    bad one."""
    from neardup.integrations.datasets import row_ids

    listed = rows.tolist()
    at = places[rows].tolist() if places is not None else listed
    return {
        r: (doc_id if doc_id is not None else p)
        for r, p, doc_id in zip(listed, at, row_ids(ds, at, args.id_field))
    }
