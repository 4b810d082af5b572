"""``neardup dedup DIR -o OUT`` where DIR is a Hugging Face dataset saved with ``save_to_disk``.

The dataset is opened with ``datasets.load_from_disk`` (memory-mapped Arrow files), its
``--text-field`` column deduplicated by :func:`neardup.integrations.datasets.deduplicate_with`
(the decision and the preparation of every other input: with pages among the rows, the
boilerplate pass over the whole column first; ids by the same rule, ``--id-field``, else the
``id`` column where there is one, else the row number), and the kept rows are written with
``save_to_disk`` to OUT, a new directory that ``load_from_disk`` opens. The options of files
that do not apply to a dataset (``--pairs``, ``--report``, ``--time-field``, ``--format``,
``--empty drop``) are refused before anything is read. ``-q`` silences the ``datasets``
package's progress bars too.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup.cli._against import (
    ReferenceInputError,
    add_references,
    is_saved_dataset,
    open_references,
    removed_summary,
)
from neardup.corpus import CorpusDeduper
from neardup.io import counted, eprint

EXIT_OK, EXIT_INPUT, EXIT_USAGE = 0, 1, 2
_BATCH = 16384


def holds_saved_dataset(args: argparse.Namespace) -> bool:
    """Whether an input of the job is a saved dataset."""
    return any(os.path.isdir(p) and is_saved_dataset(p) for p in args.inputs)


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
    problem = _refused(args)
    if problem is None and args.keep == "newest":
        problem = "--keep newest needs times: a saved dataset takes --keep first or longest"
    if problem is not None:
        eprint(f"neardup dedup: {problem}")
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
    from datasets import load_from_disk

    from neardup.cli.dedup import (
        Clusters,
        _write_clusters,
        _write_reference_clusters,
        make_policy,
    )
    from neardup.integrations.datasets import (
        check_text_column,
        deduplicate_with,
        learn_boilerplate,
    )

    started = time.perf_counter()
    (path,) = args.inputs
    try:
        references = open_references(args.against, None)
        policy = make_policy(args)
        deduper = CorpusDeduper(policy, spill_dir=args.temp_dir)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except ValueError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_USAGE
    try:
        ds = load_from_disk(path)
        check_text_column(ds, args.text_field, "--text-field")
        if args.id_field is not None and args.id_field not in ds.column_names:
            raise ValueError(f"--id-field {args.id_field!r} is not a column of {path}")
        # pages: the corpus's boilerplate is learnt first, as for the other inputs
        learn_boilerplate(deduper, ds, args.text_field, _BATCH)
        reference_ids = add_references(deduper, references, args) if references else []
        kept, result = deduplicate_with(deduper, ds, args.text_field, keep=args.keep)
        groups = Clusters.of(result)
        ids: dict[int, Any] = {}
        if args.clusters:
            ids = _row_ids(ds, np.flatnonzero(groups.in_cluster | groups.of_reference), args)
        kept.save_to_disk(args.output)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except (ValueError, OSError) as e:
        eprint(f"neardup dedup: {path}: {e}")
        return EXIT_INPUT
    if args.clusters:
        _write_clusters(
            args.clusters, result.representative, groups.in_cluster, result.distance, ids
        )
        if references:
            _write_reference_clusters(args.clusters, result, reference_ids, ids)
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
        eprint(
            f"neardup dedup: read {counted(n, 'row')}, kept {n_kept:,}, {removed}, "
            f"{time.perf_counter() - started:.1f} s -> {args.output}"
        )
    return EXIT_OK


def _row_ids(ds: Any, rows: npt.NDArray[np.int64], args: argparse.Namespace) -> dict[int, Any]:
    """The ids of ``rows`` of the dataset, by the rule of every input
    (:func:`neardup.io.record_id`: ``--id-field``, else the ``id`` column where there is one),
    else the row number (as a file's row in ``--clusters``). ValueError names a bad one."""
    from neardup.integrations.datasets import row_ids

    listed = rows.tolist()
    return {
        r: (doc_id if doc_id is not None else r)
        for r, doc_id in zip(listed, row_ids(ds, listed, args.id_field))
    }
