"""``neardup dedup DIR -o OUT`` where DIR is a Hugging Face dataset saved with ``save_to_disk``.

The dataset is opened with ``datasets.load_from_disk`` (memory-mapped Arrow files), its
``--text-field`` column deduplicated by :func:`neardup.integrations.datasets.deduplicate_with`
(the decision of every other input), and the kept rows are written with ``save_to_disk`` to
OUT, a new directory that ``load_from_disk`` opens. The options of files that do not apply to a
dataset (``--pairs``, ``--report``, ``--time-field``, ``--format``, ``--empty drop``) are refused
before anything is read.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

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


def run_saved_dataset(args: argparse.Namespace) -> int:
    """Run ``neardup dedup`` over a saved dataset; returns the exit code."""
    from neardup.cli.dedup import _write_clusters, _write_reference_clusters, make_policy

    started = time.perf_counter()
    problem = _refused(args)
    if problem is None and args.keep == "newest":
        problem = "--keep newest needs times: a saved dataset takes --keep first or longest"
    if problem is not None:
        eprint(f"neardup dedup: {problem}")
        return EXIT_USAGE
    try:
        from datasets import load_from_disk

        from neardup.integrations.datasets import check_text_column, deduplicate_with
    except ImportError as e:
        eprint(f"neardup dedup: a saved dataset needs pip install 'neardup[datasets]' ({e})")
        return EXIT_USAGE
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
        reference_ids = add_references(deduper, references, args) if references else []
        kept, result = deduplicate_with(deduper, ds, args.text_field, keep=args.keep)
        kept.save_to_disk(args.output)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    except (ValueError, OSError) as e:
        eprint(f"neardup dedup: {path}: {e}")
        return EXIT_INPUT
    n = len(result.representative)
    of_reference = result.reference >= 0
    rows = np.arange(n, dtype=np.int64)
    member = (result.representative != rows) & ~of_reference
    rep = result.representative
    in_cluster = member.copy()
    in_cluster[rep[member]] = True
    if args.clusters:
        need = np.flatnonzero(in_cluster | of_reference)
        ids: dict[int, Any] = {int(r): int(r) for r in need}
        if args.id_field is not None and need.size:
            values = ds.select(need)[args.id_field]
            ids = dict(zip(need.tolist(), values))
        _write_clusters(args.clusters, rep, in_cluster, result.distance, ids)
        if references:
            _write_reference_clusters(args.clusters, result, reference_ids, ids)
    if not args.quiet:
        n_kept = int(result.kept.sum())
        clusters = len(np.unique(rep[member]))
        removed = removed_summary(
            n - n_kept,
            clusters,
            int(of_reference.sum()),
            len(np.unique(result.reference[of_reference])),
            len(reference_ids) if references else None,
        )
        eprint(
            f"neardup dedup: read {counted(n, 'row')}, kept {n_kept:,}, {removed}, "
            f"{time.perf_counter() - started:.1f} s -> {args.output}"
        )
    return EXIT_OK
