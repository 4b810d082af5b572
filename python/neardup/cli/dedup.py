"""`neardup dedup`: drop the near-copies from a corpus on disk.

Two streaming passes over the inputs: pass 1 reads each document's text (and id/time), feeds it
to the corpus deduplicator, which keeps only fingerprints and compact verifier sketches; the
deduplicator then picks one document per group of near-copies (by the ``--keep`` policy); pass 2
copies the kept records to the output in the inputs' format, in input order, and re-reads only
the documents of clusters (for ``--clusters`` ids and ``--report`` diffs).

Exit codes: 0 done; 1 the input failed (a missing or unreadable file, or a bad record with
``--on-error fail``); 2 usage (bad flags, unknown format, output format differs from input);
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any

import numpy as np
import numpy.typing as npt

from neardup import io as nio
from neardup import report
from neardup._core import PRESETS
from neardup.cli._against import (
    ReferenceInputError,
    add_references,
    open_references,
    removed_summary,
)
from neardup.cli._datasets import holds_saved_dataset, run_saved_dataset
from neardup.cli._paths import dir_output_refused, paths_refused, spark_input_refused
from neardup.cli._pipes import PipeError, run_piped, uses_pipes
from neardup.corpus import CorpusDeduper, CorpusResult, SketchedChunk
from neardup.dedup import Policy
from neardup.integrations import keep_order
from neardup.io import counted, eprint
from neardup.textstore import CorruptTextStoreError

EXIT_OK = 0
EXIT_INPUT = 1
EXIT_USAGE = 2

EXAMPLES = """examples:
  neardup dedup crawl.jsonl.zst -o kept.jsonl.zst --report report.html
  neardup dedup notices.csv --text-field body -o kept.csv --keep newest --time-field sent_at
  neardup dedup train.jsonl -o clean.jsonl --against eval.jsonl --clusters dropped.jsonl

"""

EXIT_CODES = """exit codes:
  0  done
  1  input error: a missing or unreadable input, or a bad record with --on-error fail
  2  usage error: bad flags, unknown format, output format differs from the inputs'
  130  interrupted
  141  -o -: standard output closed before all was written (e.g. | head)
"""

KEEP_POLICIES = ("first", "longest", "newest")
# Texts are prepared in chunks (the unit in which HTML boilerplate is learnt when no page was
# seen up front: its size is part of the output) and sketched and added in parts of at most
# _PART_DOCS, each while the one before is decided: small parts of short texts start the
# decision sooner and hold less (benches/bounded.py, parts of 4,096 against 16,384 documents:
# templated 200 k 4.72 -> 4.18 s, 365 -> 304 MB; families 300 k 7.2 -> 6.6 s); long documents
# fill a chunk by characters first, where fewer than 8 MB cost time.
_CHUNK_DOCS = 16384
_CHUNK_CHARS = 8 << 20
_PART_DOCS = 4096
_IN_FLIGHT = 3  # parts being prepared or sketched at once
_MAX_WARNINGS = 10


def add_parser(subparsers: Any) -> None:
    """Register ``neardup dedup``."""
    p = subparsers.add_parser(
        "dedup",
        help="drop near-duplicate documents from a corpus (JSONL, CSV/TSV, Parquet, text, dirs)",
        description=(
            "Keep one document of each group of near-copies. Inputs: JSONL (.jsonl, .gz/.xz/.zst), "
            "CSV/TSV, Parquet, text with one document per line, or directories of .txt/.html "
            "files; - reads standard input (JSONL, or --format). The output has the inputs' "
            "format, every field, and the input order; -o - writes it to standard output."
        ),
        epilog=EXAMPLES + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_input_arguments(p)
    p.add_argument(
        "-o",
        "--output",
        required=True,
        help="where the kept documents go, in the inputs' format; - for standard output",
    )
    p.add_argument(
        "--k",
        type=int,
        default=None,
        help="with --verifier none: the SimHash distance at which two documents are copies "
        "(default: the policy's k_short 13 / k_long 11); with the Jaccard verifier the "
        "candidates come from MinHash bands and k is not used",
    )
    p.add_argument(
        "--preset",
        default=None,
        choices=PRESETS,
        help="fingerprint preset (default: default, the policy's)",
    )
    p.add_argument(
        "--verifier",
        choices=("jaccard", "none"),
        default=None,
        help="check candidates by character-shingle Jaccard (default) or take every candidate",
    )
    p.add_argument(
        "--html",
        choices=("auto", "yes", "no"),
        default=None,
        help="read texts as HTML pages, by their main text: auto (those that start like a "
        "page, default), yes (all), no",
    )
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="verifier similarity at or above which candidates are near-copies (default: 0.8)",
    )
    p.add_argument(
        "--keep",
        choices=KEEP_POLICIES,
        default="first",
        help="which document of a group stays: the first read, the longest text, or the newest "
        "--time-field (ties: the first read). Default: first",
    )
    p.add_argument(
        "--clusters", metavar="FILE", help='write JSONL {"id","cluster","kept","distance"}'
    )
    p.add_argument(
        "--pairs",
        metavar="FILE",
        help='write every verified pair {"a","b","distance","similarity"} (JSONL, or Parquet '
        "when FILE ends in .parquet): each document against every earlier one in --keep order, "
        "not only the kept, within the policy's limits (verify_limit per document)",
    )
    p.add_argument(
        "--report",
        metavar="FILE.html",
        help="write an HTML report: FILE.html (what was removed, similarities, the pairs "
        "closest to the threshold, the largest clusters' diffs) and every cluster on pages in "
        "FILE-clusters/",
    )
    p.add_argument(
        "--against",
        nargs="+",
        action="extend",
        metavar="REF",
        default=[],
        help="reference documents (files or directories this command reads, or a directory made "
        "by `neardup index build`): kept ahead of the corpus and never written; a document that "
        "is a near-copy of one is dropped, and --clusters / --pairs name the reference's id. "
        "Give it after the inputs (or repeat it)",
    )
    p.add_argument(
        "--against-text-field",
        metavar="FIELD",
        default=None,
        help="field/column with the text of the --against records (default: --text-field)",
    )
    p.add_argument(
        "--against-id-field",
        metavar="FIELD",
        default=None,
        help="field/column with the id of the --against records (default: 'id' where present, "
        "else FILE:LINE)",
    )
    p.add_argument(
        "--empty",
        choices=("keep", "drop"),
        default="keep",
        help="documents with no text left to compare (blank, or a page with no visible text) are "
        "never anybody's copy; keep them in the output (default) or drop them",
    )
    p.add_argument(
        "--temp-dir",
        metavar="DIR",
        default=None,
        help="where sketches that outgrow memory go (default: $NEARDUP_TMPDIR, else $TMPDIR, "
        "else /tmp); an unnamed file, gone when the job ends",
    )
    p.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="local (this machine, default) or spark (neardup.spark, needs neardup[spark]); "
        "with spark, -o, --clusters and --pairs are directories of part files written by the "
        "executors",
    )
    spark = p.add_argument_group("--engine spark only (docs/batch.md, 'Spark')")
    spark.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default: $SPARK_MASTER, else local[*]; under spark-submit, its "
        "session)",
    )
    spark.add_argument(
        "--spark-conf",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a Spark setting for the session (repeatable), e.g. spark.executor.memory=8g",
    )
    spark.add_argument(
        "--output-format",
        choices=("jsonl", "parquet"),
        default=None,
        help="format of the part files of -o, --clusters and --pairs (default: parquet for a "
        "path ending in .parquet, else jsonl)",
    )
    spark.add_argument(
        "--checkpoint-dir",
        metavar="DIR",
        default=None,
        help="also write what the job holds between its stages to DIR, which the driver and "
        "every executor reach (hdfs://, s3a://, a shared mount), so that a lost executor does "
        "not fail the job; the job's subdirectory there is removed when it ends (default: held "
        "on the executors only)",
    )
    p.set_defaults(run=run)


def add_input_arguments(
    p: argparse.ArgumentParser, time_field: bool = True, no_id: str = "the row number"
) -> None:
    """The input options shared by dedup, fingerprint and index build; ``no_id``: what names a
    record without an id."""
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files or directories")
    p.add_argument(
        "--format",
        choices=nio.FORMATS,
        default=None,
        help="input format (default: from the file name)",
    )
    p.add_argument(
        "--text-field", default="text", help="field/column with the text (default: text)"
    )
    p.add_argument(
        "--id-field",
        default=None,
        help=f"field/column with the id (default: 'id' where present, else {no_id})",
    )
    if time_field:
        p.add_argument(
            "--time-field", default=None, help="field with the time (epoch s or ISO 8601)"
        )
    p.add_argument(
        "--on-error",
        choices=("skip", "fail"),
        default="fail",
        help="a bad record stops the job with exit 1 (fail, default) or is left out (skip)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    p.add_argument("-v", "--verbose", action="store_true", help="also print the time of each phase")


# ------------------------------------------------------------------------------------------------
# progress


class Progress:
    """A tqdm bar over input bytes (or another ``unit``) with docs/s, shown only on a terminal
    and unless quiet."""

    def __init__(self, total_bytes: int, desc: str, quiet: bool, unit: str = "B") -> None:
        self.docs = 0
        self._bar: Any = None
        self._start = time.perf_counter()
        if not quiet and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_bytes or None,
                desc=desc,
                unit=unit,
                unit_scale=True,
                unit_divisor=1000,
                dynamic_ncols=True,
                leave=False,
                file=sys.stderr,
            )

    def advance(self, nbytes: int) -> None:
        """Add bytes read."""
        if self._bar is not None and nbytes > 0:
            self._bar.update(nbytes)

    def count(self, docs: int) -> None:
        """Add documents read and show docs/s."""
        self.docs += docs
        if self._bar is not None:
            rate = self.docs / max(1e-9, time.perf_counter() - self._start)
            self._bar.set_postfix_str(f"{self.docs:,} docs, {rate:,.0f} docs/s", refresh=True)

    @staticmethod
    def status(text: str, quiet: bool) -> None:
        """A one-line status on a terminal (overwritten by the next bar or message)."""
        if not quiet and sys.stderr.isatty():
            sys.stderr.write(f"\r{text}\x1b[K")
            sys.stderr.flush()

    def message(self, text: str) -> None:
        """Print a line on stderr without breaking the bar."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stderr)
        else:
            eprint(text)

    def close(self) -> None:
        """Remove the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def input_bytes(sources: list[nio.Source]) -> int:
    """Total size on disk of the inputs (progress total)."""
    total = 0
    for s in sources:
        try:
            if s.format == "dir":
                total += sum(os.path.getsize(f) for f in nio.dir_files(s.path))
            else:
                total += os.path.getsize(s.path)
        except OSError:
            pass
    return total


def open_sources(args: argparse.Namespace, command: str) -> list[nio.Source] | int:
    """Check the inputs exist and tell their formats; an exit code on failure."""
    for path in args.inputs:
        if not os.path.exists(path):
            eprint(f"neardup {command}: {path}: no such file or directory")
            return EXIT_INPUT
    try:
        sources = [s for p in args.inputs for s in nio.input_sources(p, args.format)]
    except nio.UnknownFormatError as e:
        eprint(f"neardup {command}: {e}")
        return EXIT_USAGE
    for s in sources:
        if getattr(args, "time_field", None) and s.format in ("txt", "dir"):
            eprint(
                f"neardup {command}: --time-field needs records with fields (JSONL, CSV, TSV, "
                f"Parquet); {s.path} is {'a directory' if s.format == 'dir' else 'text lines'}"
            )
            return EXIT_USAGE
    return nio.named(sources)


# ------------------------------------------------------------------------------------------------
# the deduplication engine


def make_policy(args: argparse.Namespace) -> Policy:
    """The dedup policy: the default one (the quality benchmark's winner) with the flags applied.

    Raises ValueError naming a bad flag value.
    """
    changes: dict[str, Any] = {}
    if args.k is not None:
        if not 0 <= args.k <= 64:
            raise ValueError(f"--k {args.k} is out of range: 0..64")
        changes["k_short"] = changes["k_long"] = args.k
    if args.threshold is not None:
        if not 0.0 <= args.threshold <= 1.0:
            raise ValueError(f"--threshold {args.threshold} is out of range: 0..1")
        changes["threshold"] = args.threshold
    if args.verifier is not None:
        changes["verifier"] = args.verifier
    if getattr(args, "html", None) is not None:
        changes["html"] = {"auto": "auto", "yes": True, "no": False}[args.html]
    policy = Policy.default()
    if args.preset is not None:
        changes["fingerprint"] = {**policy.fingerprint, "preset": args.preset}
    return policy.replace(**changes) if changes else policy


# ------------------------------------------------------------------------------------------------
# the job


@dataclass
class _FileSlots:
    source: nio.Source
    n_slots: int = 0
    bad: list[int] = field(default_factory=list)


#: What is said when a page shows past the documents probed for pages.
LATE_PAGES = (
    "an HTML page past the first documents probed (or among the references): the corpus is "
    "read again for its boilerplate, learnt over all of it before any page is prepared"
)


def run(args: argparse.Namespace) -> int:
    """Run ``neardup dedup``; returns the exit code."""
    if args.engine == "spark" and args.output in ("-", "/dev/stdout"):
        # (Spark writes a directory of part files: there is no one stream to copy out)
        eprint("neardup dedup: -o - runs with --engine local only; Spark writes a directory")
        return EXIT_USAGE
    if uses_pipes(args) and not getattr(args, "output_label", None):
        args.output_label = args.output
        try:
            return run_piped(args, run)
        except (PipeError, nio.UnknownFormatError) as e:
            eprint(f"neardup dedup: {e}")
            return EXIT_USAGE
        except BrokenPipeError:
            raise  # (standard output closed by its reader: neardup.cli.main ends quietly)
        except OSError as e:
            eprint(f"neardup dedup: -: {e}")
            return EXIT_INPUT
    if holds_saved_dataset(args):
        return run_saved_dataset(args)
    started = time.perf_counter()
    if args.keep == "newest" and not args.time_field:
        eprint("neardup dedup: --keep newest needs --time-field (the field with each time)")
        return EXIT_USAGE
    if args.engine == "spark":  # (its inputs may be globs or hdfs:// / s3a:// paths)
        return _run_spark(args)
    spark_only = [
        flag
        for flag, given in (
            ("--master", args.master),
            ("--spark-conf", args.spark_conf),
            ("--output-format", args.output_format),
            ("--checkpoint-dir", args.checkpoint_dir),
        )
        if given
    ]
    if spark_only:
        eprint(f"neardup dedup: {', '.join(spark_only)} need --engine spark")
        return EXIT_USAGE
    opened = open_sources(args, "dedup")
    if isinstance(opened, int):
        return opened
    sources = opened
    for s in sources:
        if not (os.path.isfile(s.path) or os.path.isdir(s.path)):
            eprint(
                f"neardup dedup: {s.path} is not a regular file or directory; dedup reads its "
                "inputs twice, so save a stream to a file first"
            )
            return EXIT_USAGE
        if os.path.isdir(s.path) and not nio.dir_files(s.path):
            eprint(f"neardup dedup: {s.path} holds no .txt, .text, .html or .htm file")
            return EXIT_INPUT
    outputs = {
        "-o": args.output,
        "--clusters": args.clusters,
        "--pairs": args.pairs,
        "--report": args.report,
    }
    made = ("--report", "-o") if all(s.format == "dir" for s in sources) else ("--report",)
    if paths_refused("dedup", [s.path for s in sources] + args.against, outputs, made=made):
        return EXIT_USAGE
    try:
        references = open_references(args.against, args.format)
    except ReferenceInputError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    try:
        output = nio.output_source(args.output, sources)
    except nio.UnknownFormatError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_USAGE
    if output.format == "dir":
        problem = dir_output_refused(output.path, sources)
        if problem is not None:
            eprint(f"neardup dedup: {problem}")
            return EXIT_USAGE

    try:
        policy = make_policy(args)
        deduper = CorpusDeduper(policy, spill_dir=args.temp_dir)
    except ValueError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_USAGE
    spec = nio.FieldSpec(args.text_field, args.id_field, args.time_field)
    stop = threading.Event()  # (set when pass 1 ends: a read again in a worker stops)

    # ---- pages: what is site boilerplate is decided over the whole corpus first, so that a
    # page is prepared alike wherever it sits in the input (docs/batch.md)
    try:
        if _has_pages(sources, spec, policy):
            progress = Progress(input_bytes(sources), "pages: finding boilerplate", args.quiet)
            try:
                for source in sources:
                    for batch in nio.read_batches(source, spec, progress.advance):
                        deduper.learn_boilerplate(batch.texts)
            finally:
                progress.close()
        elif policy.html == "auto":
            # (a page further down, or among the references: learnt then, over all of it)
            deduper.corpus_texts = lambda: _read_again(sources, spec, args.quiet, stop)
    except (nio.InputError, OSError) as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT

    # ---- the references: kept ahead of the corpus, never written
    reference_ids: list[Any] = []
    if references:
        progress = Progress(sum(r.size() for r in references), "references", args.quiet)
        try:
            reference_ids = add_references(deduper, references, args, progress.advance)
        except ReferenceInputError as e:
            eprint(f"neardup dedup: {e}")
            return EXIT_INPUT
        except (OSError, CorruptTextStoreError) as e:
            eprint(f"neardup dedup: --against: {e}")
            return EXIT_INPUT
        finally:
            progress.close()

    # ---- pass 1: read, fingerprint, sketch
    files: list[_FileSlots] = []
    # compact per-document columns: 8 bytes each, no Python object per document
    lengths = array("q")
    times = array("d")
    nbytes = array("q")  # (--report: UTF-8 bytes and digests of the texts)
    digests = array("q")
    fell_back = 0  # (--report: pages whose main text is their whole visible text)
    skipped = 0
    warnings = 0
    total_chars = 0
    # With the input order as the keep order, documents are grouped as they are read.
    streamed = args.keep == "first"
    title = "pass 1/3: reading" + (" and grouping" if streamed else "")
    progress = Progress(input_bytes(sources), title, args.quiet)
    try:
        # Chunks overlap: one thread prepares them in order (it learns HTML boilerplate as it
        # goes), two fingerprint and sketch them (the core and numpy release the GIL), one adds
        # them in order (and groups them, streamed), and this thread reads the next.
        with (
            ThreadPoolExecutor(max_workers=1) as prepare_pool,
            ThreadPoolExecutor(max_workers=2) as sketch_pool,
            ThreadPoolExecutor(max_workers=1) as add_pool,
            _set_on_exit(stop),  # (first out: a read again stops before the pools are waited)
        ):
            in_flight: deque[Future[SketchedChunk]] = deque()
            adding: deque[Future[None]] = deque()

            def add(chunk: SketchedChunk) -> None:
                deduper.add_sketched(chunk)
                if streamed:
                    deduper.decide_fed()

            def add_next() -> None:
                adding.append(add_pool.submit(add, in_flight.popleft().result()))
                while len(adding) > 1:  # (one waits while one is added)
                    adding.popleft().result()

            def submit(texts: list[str]) -> None:
                prepared = prepare_pool.submit(deduper.prepare, texts)

                def part(a: int) -> SketchedChunk:
                    return deduper.sketch(prepared.result()[a : a + _PART_DOCS])

                for a in range(0, len(texts), _PART_DOCS):
                    in_flight.append(sketch_pool.submit(part, a))
                    while len(in_flight) > _IN_FLIGHT:
                        add_next()

            chunk: list[str] = []
            chunk_chars = 0
            for source in sources:
                slots = _FileSlots(source)
                files.append(slots)
                for batch in nio.read_batches(source, spec, progress.advance):
                    for item in batch.errors:
                        if args.on_error == "fail":
                            progress.close()
                            eprint(f"neardup dedup: {item}")
                            eprint("(--on-error skip leaves bad records out and goes on)")
                            return EXIT_INPUT
                        skipped += 1
                        if item.slot is not None:
                            slots.bad.append(item.slot)
                        if warnings < _MAX_WARNINGS and not args.quiet:
                            progress.message(f"neardup dedup: skipped {item}")
                        warnings += 1
                    slots.n_slots = max(slots.n_slots, batch.end)
                    got = batch.texts
                    if not got:
                        continue
                    sizes = list(map(len, got))
                    lengths.extend(sizes)
                    if args.report:
                        measured = report.measure(got, policy)
                        nbytes.extend(measured[0])
                        digests.extend(measured[1])
                        fell_back += measured[2]
                    if batch.times is not None:
                        times.extend(batch.times)
                    # chunks end where they did document by document: after _CHUNK_DOCS
                    # documents or at the first reaching _CHUNK_CHARS characters
                    i = 0
                    while i < len(got):
                        room = _CHUNK_DOCS - len(chunk)
                        sums = list(accumulate(sizes[i : i + room]))
                        full = bisect_left(sums, _CHUNK_CHARS - chunk_chars)
                        take = full + 1 if full < len(sums) else len(sums)
                        chunk.extend(got[i : i + take])
                        chunk_chars += sums[take - 1]
                        i += take
                        if len(chunk) >= _CHUNK_DOCS or chunk_chars >= _CHUNK_CHARS:
                            submit(chunk)
                            progress.count(len(chunk))
                            total_chars += chunk_chars
                            chunk, chunk_chars = [], 0
            if chunk:
                submit(chunk)
                progress.count(len(chunk))
                total_chars += chunk_chars
            while in_flight:
                add_next()
            while adding:
                adding.popleft().result()
    except OSError as e:  # (the temporary sketch file, while adding and grouping)
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    finally:
        progress.close()
    if warnings > _MAX_WARNINGS and not args.quiet:
        eprint(f"neardup dedup: ... {warnings - _MAX_WARNINGS} more bad records skipped")

    n = len(lengths)
    length_arr = np.frombuffer(lengths, dtype=np.int64) if n else np.zeros(0, np.int64)
    time_arr = None
    if args.time_field:
        time_arr = np.frombuffer(times, dtype=np.float64) if n else np.zeros(0, np.float64)
    order = keep_order(args.keep, length_arr, time_arr)
    t_read = time.perf_counter()
    progress = Progress(n, "pass 2/3: grouping", args.quiet, unit="docs")
    try:
        result = deduper.result(order, progress.advance)
    except OSError as e:  # (the temporary sketch file)
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    finally:
        progress.close()
    pairs = None
    if args.pairs:
        progress = Progress(n, "pass 2/3: pairs", args.quiet, unit="docs")
        try:
            pairs = deduper.near_pairs(order, progress.advance)
        except OSError as e:
            eprint(f"neardup dedup: {e}")
            return EXIT_INPUT
        finally:
            progress.close()
    t_group = time.perf_counter()
    rows = np.arange(n, dtype=np.int64)
    rep = result.representative
    groups = Clusters.of(result)
    kept, of_reference, in_cluster = groups.kept, groups.of_reference, groups.in_cluster
    cluster_reps = groups.reps
    empty = result.empty
    n_empty = int(empty.sum())
    if args.empty == "drop":
        kept = kept & ~empty  # (an empty document is nobody's copy: it stays out of clusters)

    plan = None
    if args.report:
        plan = report.ReportPlan(
            # (a near-copy of a reference is removed but in no cluster of the corpus)
            replace(result, representative=np.where(of_reference, rows, rep)),
            kept,
            length_arr,
            np.asarray(nbytes, dtype=np.int64),
            np.asarray(digests, dtype=np.int64),
            policy,
            fell_back=fell_back,
        )

    # ---- pass 2: write the kept records; re-read cluster members for ids and report texts
    need_rows = in_cluster | of_reference if (args.clusters or args.report) else np.zeros(n, bool)
    if pairs is not None:
        need_rows = need_rows.copy()
        need_rows[pairs.pairs_a] = True
        need_rows[pairs.pairs_b] = True
        need_rows[pairs.reference_pairs_row] = True
    ids: dict[int, Any] = {}
    progress = Progress(input_bytes(sources), "pass 3/3: writing", args.quiet)
    row_offset = 0
    # a file output appears whole or not at all: written aside, renamed at the end
    staged = nio.staged_output(output)
    try:
        with nio.KeptWriter(staged) as writer:
            for slots in files:
                good = np.ones(slots.n_slots, dtype=bool)
                good[slots.bad] = False
                slot_rows = row_offset + np.cumsum(good) - 1
                safe_rows = np.clip(slot_rows, 0, max(0, n - 1))
                keep_slots = good & kept[safe_rows] if n else good & False
                need_slots = good & need_rows[safe_rows] if n else good & False

                def on_need(doc: nio.Doc, slot_rows: Any = slot_rows) -> None:
                    row = int(slot_rows[doc.slot])
                    ids[row] = doc.id if doc.id is not None else row
                    if plan is not None:
                        plan.take(row, doc.text)

                writer.write(slots.source, keep_slots, need_slots, on_need, spec, progress.advance)
                row_offset += int(good.sum())
        nio.finish_output(staged, output)
    except (nio.InputError, OSError) as e:
        progress.close()
        eprint(f"neardup dedup: {e}")
        return EXIT_INPUT
    finally:
        progress.close()
        if staged is not output and os.path.exists(staged.path):
            os.remove(staged.path)

    if args.clusters:
        try:
            _write_clusters(args.clusters, rep, in_cluster, result.distance, ids)
            if references:
                _write_reference_clusters(args.clusters, result, reference_ids, ids)
        except OSError as e:
            eprint(f"neardup dedup: --clusters {args.clusters}: {e}")
            return EXIT_INPUT
    if pairs is not None:
        try:
            _write_pairs(args.pairs, pairs, ids, reference_ids if references else None)
        except (OSError, ImportError) as e:
            eprint(f"neardup dedup: --pairs {args.pairs}: {e}")
            return EXIT_INPUT

    t_write = time.perf_counter()
    elapsed = t_write - started
    n_kept = int(kept.sum())
    summary = {
        "read": n,
        "skipped": skipped,
        "kept": n_kept,
        "removed": n - n_kept,
        "clusters": len(cluster_reps),
        "references": len(reference_ids),
        "removed_as_reference_copies": int(of_reference.sum()),
        "seconds": round(elapsed, 3),
        "docs_per_second": round(n / elapsed) if elapsed > 0 else None,
        "megabytes": round(input_bytes(sources) / 1e6, 3),
        "input": list(args.inputs),
        "output": args.output,
        "keep": args.keep,
        "policy": json.dumps(policy.to_dict(), sort_keys=True),
        # (with --keep first, documents are grouped while they are read: in this figure)
        "seconds_read_and_sketch": round(t_read - started, 3),
        "grouped_while_reading": streamed,
        "seconds_group": round(t_group - t_read, 3),
        "seconds_write": round(t_write - t_group, 3),
        "candidates_per_document": round(result.stats["candidates"] / max(1, n), 3),
        "compared_per_document": round(result.stats["compared"] / max(1, n), 3),
        "empty": n_empty,
        "empty_kept": n_empty if args.empty == "keep" else 0,
        "spilled_megabytes": round(deduper.spilled_bytes() / 1e6, 1),
    }
    if plan is not None:
        try:
            plan.write(args.report, summary, ids)
        except OSError as e:
            eprint(f"neardup dedup: --report {args.report}: {e}")
            return EXIT_INPUT
    if n_empty and not args.quiet:
        eprint(
            f"neardup dedup: {counted(n_empty, 'document')} with no text to "
            f"compare (blank, or pages with no visible text): "
            + ("kept (--empty drop leaves them out)" if args.empty == "keep" else "dropped")
        )
    if not args.quiet:
        eprint(
            f"neardup dedup: read {counted(n, 'document')}"
            + (f" ({counted(skipped, 'bad record')} skipped)" if skipped else "")
            + f", kept {n_kept:,}, "
            + removed_summary(
                n - n_kept,
                len(cluster_reps),
                int(of_reference.sum()),
                len(np.unique(result.reference[of_reference])),
                len(reference_ids) if references else None,
                n_empty if args.empty == "drop" else 0,
            )
            + f", {elapsed:.1f} s ({summary['docs_per_second'] or 0:,} docs/s) -> "
            + (getattr(args, "output_label", None) or args.output)
        )
        if args.verbose:
            eprint(
                f"neardup dedup: read+fingerprint+sketch{'+group' if streamed else ''} "
                f"{t_read - started:.2f} s, group {t_group - t_read:.2f} s, "
                f"write {t_write - t_group:.2f} s, report {time.perf_counter() - t_write:.2f} s"
            )
            eprint(
                f"neardup dedup: candidates per document {summary['candidates_per_document']}, "
                f"comparisons per document {summary['compared_per_document']}, "
                f"{result.stats['capped']:,} documents capped at verify_limit, "
                f"{summary['spilled_megabytes']} MB of sketches spilled"
            )
    return EXIT_OK


@dataclass
class Clusters:
    """Which rows of a decision are in which group (the one rule of ``--clusters`` and the
    summary, for files and saved datasets alike)."""

    kept: npt.NDArray[np.bool_]  # its own representative
    of_reference: npt.NDArray[np.bool_]  # dropped as a near-copy of a reference
    member: npt.NDArray[np.bool_]  # dropped as a near-copy of a kept row of the corpus
    in_cluster: npt.NDArray[np.bool_]  # a member, or a kept row that has members
    reps: npt.NDArray[np.int64]  # the kept row of each cluster, ascending

    @classmethod
    def of(cls, result: CorpusResult) -> Clusters:
        """The groups of ``result`` (:meth:`neardup.corpus.CorpusDeduper.result`)."""
        rep = result.representative
        n = rep.size
        kept = rep == np.arange(n, dtype=np.int64)
        of_reference = (
            result.reference >= 0 if result.reference.size == n else np.zeros(n, dtype=bool)
        )
        member = ~kept & ~of_reference
        in_cluster = member.copy()
        in_cluster[rep[member]] = True
        return cls(kept, of_reference, member, in_cluster, np.unique(rep[member]))


def _write_clusters(
    path: str,
    rep: npt.NDArray[np.int64],
    in_cluster: npt.NDArray[np.bool_],
    distance: npt.NDArray[np.int64],
    ids: dict[int, Any],
) -> None:
    """JSONL, one row per document of a cluster of two or more, grouped, the kept one first."""
    rows = np.flatnonzero(in_cluster)
    reps = rep[rows]
    order = np.lexsort((rows, rows != reps, reps))
    with open(path, "w", encoding="utf-8") as f:
        for row, r in zip(rows[order].tolist(), reps[order].tolist()):
            record = {
                "id": ids.get(row, row),
                "cluster": ids.get(r, r),
                "kept": row == r,
                "distance": int(distance[row]),
            }
            f.write(nio.json_line(record) + "\n")


def _write_reference_clusters(
    path: str, result: CorpusResult, reference_ids: list[Any], ids: dict[int, Any]
) -> None:
    """Appends to the clusters file a row per document dropped as a near-copy of a reference:
    ``{"id", "cluster": <the reference's id>, "kept": false, "distance", "reference": true}``,
    grouped by reference."""
    rows = np.flatnonzero(result.reference >= 0)
    rows = rows[np.lexsort((rows, result.reference[rows]))]
    with open(path, "a", encoding="utf-8") as f:
        for row in rows.tolist():
            record = {
                "id": ids.get(row, row),
                "cluster": reference_ids[int(result.reference[row])],
                "kept": False,
                "distance": int(result.distance[row]),
                "reference": True,
            }
            f.write(nio.json_line(record) + "\n")


def _read_again(
    sources: list[nio.Source], spec: nio.FieldSpec, quiet: bool, stop: threading.Event
) -> Iterator[str]:
    """Every text of the inputs, read again from the start (for the boilerplate of a page
    that shows past the probe: :attr:`CorpusDeduper.corpus_texts`); cut short once ``stop`` is
    set (the job is ending: an interrupt, an error)."""
    if not quiet:
        from tqdm import tqdm

        tqdm.write(f"neardup dedup: {LATE_PAGES}", file=sys.stderr)  # (above a bar, if any)
    for source in sources:
        for batch in nio.read_batches(source, spec):
            for text in batch.texts:
                if stop.is_set():
                    return
                yield text


@contextmanager
def _set_on_exit(event: threading.Event) -> Iterator[None]:
    """Sets ``event`` when the block is left, however."""
    try:
        yield
    finally:
        event.set()


def _has_pages(sources: list[nio.Source], spec: nio.FieldSpec, policy: Policy) -> bool:
    """:meth:`Policy.has_pages` of file inputs."""

    def texts(source: nio.Source) -> Iterator[str]:
        for batch in nio.read_batches(source, spec):
            yield from batch.texts

    return policy.has_pages(texts(s) for s in sources)


def _write_pairs(
    path: str, pairs: CorpusResult, ids: dict[int, Any], reference_ids: list[Any] | None
) -> None:
    """Every verified pair: JSONL ``{"a", "b", "distance", "similarity"}`` (a the earlier in
    the keep order), or Parquet when ``path`` ends in ``.parquet``. With references
    (``--against``), each pair also says ``"reference"``: whether ``a`` is a reference's id;
    the pairs with references come first."""
    a = [ids.get(r, r) for r in pairs.pairs_a.tolist()]
    b = [ids.get(r, r) for r in pairs.pairs_b.tolist()]
    dist = pairs.pairs_distance.tolist()
    sim = [round(x, 6) for x in pairs.pairs_similarity.tolist()]
    columns: dict[str, list[Any]] = {"a": a, "b": b, "distance": dist, "similarity": sim}
    if reference_ids is not None:
        n_ref = len(pairs.reference_pairs_row)
        columns = {
            "a": [reference_ids[r] for r in pairs.reference_pairs_ref.tolist()] + a,
            "b": [ids.get(r, r) for r in pairs.reference_pairs_row.tolist()] + b,
            "distance": pairs.reference_pairs_distance.tolist() + dist,
            "similarity": [round(x, 6) for x in pairs.reference_pairs_similarity.tolist()] + sim,
            "reference": [True] * n_ref + [False] * len(a),
        }
    if path.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table(columns), path)
        return
    names = list(columns)
    with open(path, "w", encoding="utf-8") as f:
        for row in zip(*columns.values()):
            f.write(nio.json_line(dict(zip(names, row))) + "\n")


def _run_spark(args: argparse.Namespace) -> int:
    against = list(getattr(args, "against", None) or [])
    outputs = {"-o": args.output, "--clusters": args.clusters, "--pairs": args.pairs}
    if paths_refused("dedup", [*args.inputs, *against], outputs, local=False):
        return EXIT_USAGE
    inside = spark_input_refused([*args.inputs, *against], outputs)
    if inside is not None:
        eprint(f"neardup dedup: {inside}")
        return EXIT_USAGE
    for flag, given in (("--report", args.report), ("--temp-dir", args.temp_dir)):
        if given:
            eprint(f"neardup dedup: {flag} runs with --engine local only")
            return EXIT_USAGE
    try:
        from neardup import spark
        from neardup.spark._cli import UsageError, parse_conf
    except ImportError as e:
        eprint(f"neardup dedup: --engine spark needs pip install 'neardup[spark]' ({e})")
        return EXIT_USAGE
    try:
        policy = make_policy(args)
        conf = parse_conf(args.spark_conf)
    except ValueError as e:
        eprint(f"neardup dedup: {e}")
        return EXIT_USAGE
    try:
        summary = spark.run_dedup_cli(
            list(args.inputs),
            args.output,
            text_field=args.text_field,
            id_field=args.id_field,
            keep=args.keep,
            time_field=args.time_field,
            clusters=args.clusters,
            pairs=args.pairs,
            master=args.master,
            spark_conf=conf,
            output_format_name=args.output_format,
            input_format=args.format,
            policy=policy,
            empty=args.empty,
            against=against,
            against_text_field=args.against_text_field,
            against_id_field=args.against_id_field,
            on_error=args.on_error,
            checkpoint_dir=args.checkpoint_dir,
        )
    except UsageError as e:
        eprint(f"neardup dedup (spark): {e}")
        return EXIT_USAGE
    except (ValueError, OSError) as e:
        eprint(f"neardup dedup (spark): {e}")
        return EXIT_INPUT
    except Exception as e:  # (Spark's own: an AnalysisException, a failed job)
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        if not isinstance(e, (PySparkException, Py4JJavaError)):
            raise
        eprint(f"neardup dedup (spark): {str(e).strip().splitlines()[0]}")
        return EXIT_INPUT
    if not args.quiet:
        eprint("neardup dedup (spark): " + json.dumps(summary, default=str))
    return EXIT_OK
