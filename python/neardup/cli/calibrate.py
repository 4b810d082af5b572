"""`neardup calibrate`: precision/recall/F1 against k and the verifier threshold, a plot, an HTML
page and recommended settings, from labelled pairs or from a corpus with injected edits.

    neardup calibrate --pairs pairs.jsonl --out calib/
    neardup calibrate --corpus news.jsonl --copies 1000 --out calib/

Writes ``calibrate.png``, ``calibrate.html``, ``recommendation.json`` (the recommended policy
and its scores) and ``policy.json`` under ``--out`` and prints the recommendation. A progress bar
on a terminal shows the pairs made and scored. The options and ``--out`` are checked before any
work; pairs that are all near-duplicates, or none, are refused before they are scored. Exit
codes: 0 done, 1 bad input (or an output that cannot be written), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from neardup import io as nio
from neardup.calibrate import (
    MAX_CHARS,
    calibrate,
    check_labels,
    how_to_use,
    pairs_from_corpus,
    plot,
    read_pairs,
    write_html,
)
from neardup.cli._paths import paths_refused
from neardup.cli.dedup import EXIT_INPUT, EXIT_OK, EXIT_USAGE, Progress
from neardup.dedup import Policy
from neardup.io import counted

EXAMPLES = """examples:
  neardup calibrate --corpus news.jsonl --out calib/
  neardup calibrate --corpus pages/ --copies 3000 --max-docs 50000 --out calib/
  neardup calibrate --pairs labelled.jsonl --max-k 24 --json

exit codes:
  0  done
  1  input error: a missing or unreadable file, a bad record, fewer than 2 texts, pairs that
     are all near-duplicates or none; an output that cannot be written
  2  usage error: bad flags, an unknown format, an --out that cannot be a directory
  130  interrupted
"""


def add_parser(sub: Any) -> None:
    """Register ``neardup calibrate``."""
    p = sub.add_parser(
        "calibrate",
        help="measure precision/recall against k and threshold, plot, recommend settings",
        description=(
            "Measure precision, recall and F1 of SimHash alone and with each verifier against "
            "the radius k and the threshold, on labelled pairs or on edited copies of a "
            "corpus's texts; write a plot, an HTML page and the recommended policy."
        ),
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--pairs", metavar="FILE", help='labelled pairs, JSONL {"a","b","label"}')
    src.add_argument(
        "--corpus",
        metavar="FILE",
        help="a corpus (jsonl/csv/tsv/txt/parquet/dir) to make edited copies from",
    )
    p.add_argument(
        "--format",
        choices=nio.FORMATS,
        default=None,
        help="format of the --corpus (default: from the file name)",
    )
    p.add_argument("--text-field", default="text", help="field with the text (default: text)")
    p.add_argument(
        "--copies",
        type=int,
        default=1000,
        help="edited copies to make, and as many hard negatives at most (--corpus; default: 1000)",
    )
    p.add_argument(
        "--label-threshold",
        type=float,
        default=0.8,
        help="5-gram Jaccard at or above which a copy is a near-duplicate (--corpus; default: 0.8)",
    )
    p.add_argument(
        "--max-docs",
        type=int,
        default=20000,
        help="read at most this many documents, at least 2 (--corpus; default: 20000)",
    )
    p.add_argument(
        "--max-chars",
        type=int,
        default=MAX_CHARS,
        help=f"use the first this many characters of each text, of a longer HTML page its main "
        f"text (--corpus; default: {MAX_CHARS})",
    )
    p.add_argument("--max-k", type=int, default=32, help="largest radius evaluated (default: 32)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the edits (default: 0)")
    p.add_argument(
        "--out", default="calibrate-out", help="output directory (default: calibrate-out)"
    )
    p.add_argument("--json", action="store_true", help="print the recommendation as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


#: The files written under --out.
OUTPUT_FILES = ("calibrate.png", "calibrate.html", "recommendation.json", "policy.json")


def _read_corpus(sources: list[nio.Source], text_field: str, limit: int) -> list[str]:
    texts: list[str] = []
    for source in sources:
        for item in nio.read_docs(source, nio.FieldSpec(text_field=text_field)):
            if isinstance(item, nio.InputError):
                raise ValueError(str(item))
            texts.append(item.text)
            if len(texts) >= limit:
                return texts
    return texts


def run(args: argparse.Namespace) -> int:
    """Run ``neardup calibrate``; returns the exit code."""
    if not 0 <= args.max_k <= 64:
        print(f"neardup calibrate: --max-k {args.max_k} is out of range: 0..64", file=sys.stderr)
        return EXIT_USAGE
    if args.copies < 1:
        print(f"neardup calibrate: --copies must be >= 1, got {args.copies}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_chars < 1:
        print(f"neardup calibrate: --max-chars must be >= 1, got {args.max_chars}", file=sys.stderr)
        return EXIT_USAGE
    if args.max_docs < 2:  # (pairs are made of two texts)
        print(f"neardup calibrate: --max-docs must be >= 2, got {args.max_docs}", file=sys.stderr)
        return EXIT_USAGE
    if not 0.0 < args.label_threshold <= 1.0:
        print(
            f"neardup calibrate: --label-threshold {args.label_threshold} is out of range: (0, 1]",
            file=sys.stderr,
        )
        return EXIT_USAGE
    sources: list[nio.Source] = []
    if args.corpus:
        try:
            sources = nio.input_sources(args.corpus, args.format)
        except nio.UnknownFormatError as e:
            print(f"neardup calibrate: {e}", file=sys.stderr)
            return EXIT_USAGE
    if paths_refused("calibrate", [], {"--out": args.out}, directories={"--out": OUTPUT_FILES}):
        return EXIT_USAGE
    policy = Policy.default()
    try:
        if args.pairs:
            pairs = read_pairs(args.pairs)
            check_labels(pairs, f"the {counted(len(pairs), 'labelled pair')} of {args.pairs}")
        else:
            Progress.status("neardup calibrate: reading the corpus…", args.quiet)
            texts = _read_corpus(sources, args.text_field, args.max_docs)
            bar = Progress(2 * args.copies, "making pairs", args.quiet, unit="pairs")
            try:
                pairs = pairs_from_corpus(
                    texts,
                    copies=args.copies,
                    seed=args.seed,
                    threshold=args.label_threshold,
                    policy=policy,
                    max_chars=args.max_chars,
                    progress=bar.advance,
                )
            finally:
                bar.close()
            check_labels(
                pairs,
                f"the {counted(len(pairs), 'pair')} made from {args.corpus}",
                f"5-gram Jaccard >= {args.label_threshold}",
            )
        bar = Progress(len(pairs), "scoring pairs", args.quiet, unit="pairs")
        try:
            cal = calibrate(pairs, policy, max_k=args.max_k, progress=bar.advance)
        finally:
            bar.close()
    except (OSError, ValueError) as e:
        print(f"neardup calibrate: {e}", file=sys.stderr)
        return EXIT_INPUT
    png, page, recommendation, policy_file = (os.path.join(args.out, f) for f in OUTPUT_FILES)
    rec = cal.recommendation
    try:
        os.makedirs(args.out, exist_ok=True)
        plot(cal, png)
        write_html(cal, page, png)
        with open(recommendation, "w", encoding="utf-8") as f:
            json.dump(rec, f, indent=2, sort_keys=True)
        with open(policy_file, "w", encoding="utf-8") as f:
            json.dump(rec["policy"], f, indent=2, sort_keys=True)
    except OSError as e:
        print(f"neardup calibrate: --out {args.out}: {e}", file=sys.stderr)
        return EXIT_INPUT
    if args.json:
        print(json.dumps(rec, sort_keys=True))
        return EXIT_OK
    pol = rec["policy"]
    print(f"pairs: {rec['pairs']:,} ({counted(rec['positives'], 'near-duplicate')})")
    print(f"SimHash alone: best k={rec['simhash_alone']['k']} F1={rec['simhash_alone']['f1']:.3f}")
    for name, b in rec["per_verifier"].items():
        print(
            f"+ {name:11s}: k={b['k']:2d} threshold={b['threshold']:.2f} "
            f"P={b['precision']:.3f} R={b['recall']:.3f} F1={b['f1']:.3f}"
        )
    print(
        f"recommended: verifier={pol['verifier']} threshold={pol['threshold']:.2f} "
        f"k_short={pol['k_short']} k_long={pol['k_long']} "
        f"(P={rec['precision']:.3f} R={rec['recall']:.3f} F1={rec['f1']:.3f})"
    )
    print(f"to use it: {how_to_use(pol)}")
    print(f"wrote {', '.join((png, page, recommendation, policy_file))}")
    return EXIT_OK
