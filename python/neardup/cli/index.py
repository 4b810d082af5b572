"""`neardup index build|query`: a reference directory of documents, built once and reused.

``neardup index build DIR INPUT…`` fingerprints the documents of the inputs and adds them to the
durable index at DIR (made when missing, added to when it exists), and stores their texts in
``DIR/texts.sqlite`` for verification: ids come from ``--id-field`` (default: the ``id`` field
where present, else ``FILE:LINE``; a directory's files by relative path), times from
``--time-field`` (default: now). Adding an id that is already there (from an earlier build)
replaces it; an id that comes twice among the inputs of one build is a bad record, named with
where it came first (``--on-error fail``: exit 1; ``skip``: the later one is left out and
counted), as storing it would silently replace the first. The directory is what
``neardup dedup --against DIR`` reads (the texts, not the original inputs).

``neardup index query DIR (--text TEXT | --fingerprint FP | INPUT…)`` prints one JSON line per
query: ``{"query": <the INPUT record's id>, "fingerprint": "<hex>", "matches": [{"id": …,
"distance": d, "similarity": s}, …]}``: the stored documents the query is a near-copy of, best
first, verified as ``neardup dedup`` decides (the Jaccard of character shingles reaches the
policy's threshold; with ``--k``, among the stored documents within k bits). A ``--fingerprint``
has no text to verify: every stored item within ``--k`` bits (default: the index's k), nearest
first, with ``"similarity": null`` (as for a directory built with ``--raw``, which holds no texts).
A query only reads the directory, so it may be read-only (a read-only disk, another user's): its
text store is opened read-only, and its fingerprints go into an index in memory with the
directory's k (recorded in ``DIR/neardup-cli.json`` by ``index build``); only a ``--raw``
directory, which has no text store, is queried through the durable index, opened for writing.

Texts are fingerprinted as the deduplicators do (``Policy.prepare``; ``--raw``: as they are). The
fingerprinter's settings are written to ``DIR/neardup-cli.json`` at build time and reused by
every later build and query, so a query is always fingerprinted like the stored documents.

Exit codes: 0 done, 1 input error (missing input or index, bad record with --on-error fail,
a corrupt index), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import zlib
from typing import Any

import numpy as np

from neardup import IncompatibleIndexError, Index
from neardup import io as nio
from neardup._core import PRESETS
from neardup.cli._against import (
    REFERENCE_TEXTS,
    index_stored,
    reference_store,
    save_references,
    texts_missing,
)
from neardup.cli._paths import paths_refused
from neardup.cli._pipes import STDOUT_NAMES
from neardup.cli.dedup import (
    EXIT_INPUT,
    EXIT_OK,
    EXIT_USAGE,
    Progress,
    add_input_arguments,
    eprint,
    input_bytes,
    open_sources,
)
from neardup.cli.fingerprint import TextFingerprinter, make_policy
from neardup.dedup import Deduplicator, Match, Policy
from neardup.io import counted
from neardup.textstore import SqliteTextStore, check_id

SETTINGS_FILE = "neardup-cli.json"
_CHUNK = 16384

BUILD_EXAMPLES = """examples:
  neardup index build evals/ mmlu.jsonl gsm8k.jsonl --text-field question
  neardup index build last-month/ crawl-2026-11.jsonl.zst
  neardup dedup crawl-2026-12.jsonl.zst -o new.jsonl.zst --against last-month/

"""

QUERY_EXAMPLES = """examples:
  neardup index query evals/ --text "Natalia sold clips to 48 of her friends in April"
  neardup index query evals/ train.jsonl -o hits.jsonl
  neardup index query evals/ --fingerprint 3f2a9c0d11e4b7a2 --k 6

"""

INDEX_EXAMPLES = """examples:
  neardup index build evals/ mmlu.jsonl --text-field question
  neardup index query evals/ --text "…"
  neardup dedup train.jsonl -o clean.jsonl --against evals/

"""

INDEX_EXIT_CODES = """exit codes:
  0  done
  1  input error: a missing input or index directory, a corrupt index, or a bad record with
     --on-error fail
  2  usage error: bad flags, a --preset other than the directory's
  130  interrupted
"""


def add_parser(subparsers: Any) -> None:
    """Register ``neardup index build`` and ``neardup index query``."""
    p = subparsers.add_parser(
        "index",
        help="build or query a persistent fingerprint index directory",
        description=(
            "A reference directory: the fingerprints of its documents in a durable index and "
            "their texts, built once, then queried or used by `neardup dedup --against DIR`."
        ),
        epilog=INDEX_EXAMPLES + INDEX_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="index_command", metavar="{build,query}")
    sub.required = True

    b = sub.add_parser(
        "build",
        help="add the documents of INPUT… to the index at DIR",
        description=(
            "Fingerprint the documents of INPUT… and add them, with their texts, to DIR (made "
            "when missing; an id already there from an earlier build is replaced, an id that "
            "comes twice among the inputs is a bad record, see --on-error). `neardup dedup "
            "--against DIR` and `neardup index query DIR` read it."
        ),
        epilog=BUILD_EXAMPLES + INDEX_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    b.add_argument("index_dir", metavar="DIR", help="index directory (made when missing)")
    add_input_arguments(b, no_id="FILE:LINE")
    b.add_argument(
        "--k",
        type=int,
        default=None,
        help="the index's default radius in bits for --fingerprint queries (default: 3 for a "
        "new directory, else the one it was built with)",
    )
    b.add_argument(
        "--preset",
        default=None,
        choices=PRESETS,
        help="fingerprint preset, only for a new index (default: default, the policy's)",
    )
    b.add_argument(
        "--raw",
        action="store_true",
        help="fingerprint texts as they are, not as the deduplicators do, and store no texts "
        "(only for a new index; its queries are not verified, and --against cannot use it)",
    )
    b.set_defaults(run=run_build)

    q = sub.add_parser(
        "query",
        help="find the stored documents near a text, a fingerprint or each document of INPUT…",
        description=(
            "Print, per query, the stored documents it is a near-copy of (verified as neardup "
            "dedup decides), with their distance and similarity; a --fingerprint gets every "
            "stored item within --k bits, unverified. The stored texts are loaded first."
        ),
        epilog=QUERY_EXAMPLES + INDEX_EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    q.add_argument("index_dir", metavar="DIR", help="index directory")
    what = q.add_mutually_exclusive_group(required=True)
    what.add_argument("--text", help="a text to look up")
    what.add_argument(
        "--fingerprint",
        help="a fingerprint: 16 hex digits (as `neardup fingerprint` writes it; 16 decimal "
        "digits are read as hex too), 0x…, or a decimal integer of another length",
    )
    what.add_argument("inputs", nargs="*", default=[], metavar="INPUT", help="files to look up")
    q.add_argument(
        "--k",
        type=int,
        default=None,
        help="verify the stored documents within k bits of the query instead of the decision's "
        "own candidates (MinHash bands); for --fingerprint, the radius (default: the index's k, "
        "3 unless built with another)",
    )
    q.add_argument(
        "--format", choices=nio.FORMATS, default=None, help="input format (default: from the name)"
    )
    q.add_argument("--text-field", default="text", help="field/column of the text (default: text)")
    q.add_argument(
        "--id-field",
        default=None,
        help="field/column of the id (default: 'id' where present, else FILE:LINE)",
    )
    q.add_argument(
        "--on-error",
        choices=("skip", "fail"),
        default="fail",
        help="a bad record stops the job with exit 1 (fail, default) or is left out (skip)",
    )
    q.add_argument("-o", "--output", default=None, help="write the results here (default stdout)")
    q.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    q.set_defaults(run=run_query)


def parse_fingerprint(value: str) -> int:
    """A fingerprint from the command line: 16 hex digits, ``0x…`` hex, or a decimal integer."""
    s = value.strip().lower()
    try:
        if s.startswith("0x"):
            fp = int(s[2:], 16)
        elif len(s) == 16 and not s.isdigit():
            fp = int(s, 16)
        elif len(s) == 16 and s.isdigit():
            # 16 decimal digits read the same in hex: the fingerprint command writes hex
            fp = int(s, 16)
        else:
            fp = int(s, 10)
    except ValueError:
        raise ValueError(
            f"--fingerprint {value!r} is not 16 hex digits, 0x-prefixed hex, or a decimal integer"
        ) from None
    if not 0 <= fp < 1 << 64:
        raise ValueError(f"--fingerprint {value!r} is out of range: 0..2**64-1")
    return fp


def _open_index(path: str, k: int | None, settings: dict[str, Any]) -> Any:
    """The durable index at ``path``; the fingerprint settings are stored with it and a
    mismatch is refused by the index (IncompatibleIndexError, a ValueError)."""
    opener = getattr(Index, "open", None)
    if opener is None:
        raise RuntimeError(
            "this build of neardup has no persistent Index (Index.open); "
            "rebuild with the index core"
        )
    # (how the fingerprints are made; "texts" says what else the directory holds, "k" is the
    # index's own)
    config = json.dumps(
        {name: v for name, v in settings.items() if name not in ("texts", "k")}, sort_keys=True
    )
    if k is not None:
        return opener(path, k=k, fingerprint_config=config)
    return opener(path, fingerprint_config=config)


def _load_settings(path: str) -> dict[str, Any] | None:
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"{path} is a file, not an index directory")
    try:
        with open(os.path.join(path, SETTINGS_FILE), encoding="utf-8") as f:
            settings = json.load(f)
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise ValueError(f"{os.path.join(path, SETTINGS_FILE)}: not valid JSON: {e}") from None
    if not isinstance(settings, dict) or not isinstance(settings.get("fingerprint"), dict):
        raise ValueError(f"{os.path.join(path, SETTINGS_FILE)}: not neardup CLI settings")
    return settings


def _settings_of(fingerprinter: TextFingerprinter) -> dict[str, Any]:
    return {
        "fingerprint": dict(fingerprinter.policy.fingerprint),
        "html": fingerprinter.policy.html,
        "raw": fingerprinter.raw,
        # the texts are stored (in REFERENCE_TEXTS) from the first build on
        "texts": not fingerprinter.raw,
    }


def _policy_from(settings: dict[str, Any]) -> Policy:
    return Policy.default().replace(
        fingerprint=dict(settings["fingerprint"]), html=settings.get("html", "auto")
    )


def _fingerprinter_from(settings: dict[str, Any]) -> TextFingerprinter:
    try:
        return TextFingerprinter(_policy_from(settings), raw=bool(settings.get("raw", False)))
    except TypeError as e:  # (a hand-edited file: "preset": 5)
        raise ValueError(f"{SETTINGS_FILE}: {e}") from None


def run_build(args: argparse.Namespace) -> int:
    """Run ``neardup index build``; returns the exit code."""
    if args.k is not None and not 0 <= args.k <= 64:
        eprint(f"neardup index build: --k {args.k} is out of range: 0..64")
        return EXIT_USAGE
    opened = open_sources(args, "index build")
    if isinstance(opened, int):
        return opened
    sources = opened
    try:
        settings = _load_settings(args.index_dir)
        if settings is None:
            fingerprinter = TextFingerprinter(make_policy(args.preset), raw=args.raw)
            settings = _settings_of(fingerprinter)
        else:
            if args.preset is not None and settings["fingerprint"].get("preset") != args.preset:
                eprint(
                    f"neardup index build: {args.index_dir} was built with preset "
                    f"{settings['fingerprint'].get('preset')!r}, not {args.preset!r}"
                )
                return EXIT_USAGE
            if args.raw and not settings.get("raw", False):
                eprint(
                    f"neardup index build: {args.index_dir} was built without --raw (its "
                    "fingerprints are of prepared texts); build --raw into a new directory"
                )
                return EXIT_USAGE
            fingerprinter = _fingerprinter_from(settings)
    except ValueError as e:
        eprint(f"neardup index build: {e}")
        return EXIT_USAGE
    try:
        os.makedirs(args.index_dir, exist_ok=True)
        index = _open_index(args.index_dir, args.k, settings)
    except IncompatibleIndexError as e:
        if args.k is not None and "was built with k=" in str(e):
            eprint(
                f"neardup index build: {args.index_dir} was built with another --k: leave --k "
                "out to keep it (index query --k searches farther)"
            )
            return EXIT_USAGE
        eprint(f"neardup index build: {args.index_dir}: {e}")
        return EXIT_INPUT
    except (OSError, ValueError, RuntimeError) as e:
        eprint(f"neardup index build: {args.index_dir}: {e}")
        return EXIT_INPUT
    store = None
    if settings.get("texts"):
        texts_path = os.path.join(args.index_dir, REFERENCE_TEXTS)
        missing = texts_missing(args.index_dir) if len(index) else None
        if missing is not None:
            _close(index)
            eprint(f"neardup index build: {missing}")
            return EXIT_INPUT
        try:
            store = SqliteTextStore(texts_path, sync="normal")
        except ValueError as e:
            _close(index)
            eprint(f"neardup index build: {e}")
            return EXIT_INPUT
    elif not args.quiet and not settings.get("raw"):
        eprint(
            f"neardup index build: {args.index_dir} was built without its texts (by an earlier "
            "version): it holds fingerprints only, so queries are not verified and dedup "
            "--against cannot use it; build a new directory to have both"
        )
    # (the index's radius, for the queries, which read the directory without opening it)
    settings["k"] = int(index.k)
    with open(os.path.join(args.index_dir, SETTINGS_FILE), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2, sort_keys=True)
    spec = nio.FieldSpec(args.text_field, args.id_field, args.time_field)
    added = skipped = 0
    progress = Progress(input_bytes(sources), "indexing", args.quiet)
    ids: list[Any] = []
    texts: list[str] = []
    times: list[float | None] = []

    def flush() -> None:
        nonlocal added
        if not texts:
            return
        fps = fingerprinter.many(texts)
        stamps = times if args.time_field else None
        if store is not None:  # (texts first: a fingerprint is never stored without its text)
            store.put_many(list(zip(ids, texts, stamps or [None] * len(ids))), fps.tolist())
        index.add_many(ids, fps, stamps)
        added += len(texts)
        progress.count(len(texts))
        ids.clear()
        texts.clear()
        times.clear()

    seen: set[Any] = set()  # (the ids of this build: one that comes again is refused)
    repeated = 0
    try:
        for source in sources:
            for doc in nio.read_docs(source, spec, progress.advance):
                if not isinstance(doc, nio.InputError):
                    doc_id = nio.id_or_place(doc.id, source.path, doc.line)
                    try:
                        check_id(doc_id)
                    except ValueError as e:  # (an int beyond 64 bits)
                        doc = nio.InputError(source.path, doc.line, str(e), doc.slot)
                if not isinstance(doc, nio.InputError):
                    if doc_id in seen:
                        repeated += 1
                        doc = _repeated(doc_id, source, doc, sources, spec, skipped < 10)
                    else:
                        seen.add(doc_id)
                if isinstance(doc, nio.InputError):
                    if args.on_error == "fail":
                        progress.close()
                        eprint(f"neardup index build: {doc}")
                        eprint("(--on-error skip leaves bad records out and goes on)")
                        flush()
                        _close(index, store)
                        return EXIT_INPUT
                    skipped += 1
                    if skipped <= 10 and not args.quiet:
                        progress.message(f"neardup index build: skipped {doc}")
                    continue
                ids.append(doc_id)
                texts.append(doc.text)
                times.append(doc.time)
                if len(texts) >= _CHUNK:
                    flush()
        flush()
    finally:
        progress.close()
    size = len(index)
    if store is not None and added:
        # the decision engine's rows, saved: --against, index query and serve load them
        Progress.status("neardup index build: saving the references' engine…", args.quiet)
        save_references(args.index_dir, store, _policy_from(settings))
        Progress.status("", args.quiet)
    _close(index, store)
    if not args.quiet:
        left_out = [
            counted(skipped - repeated, "bad record") if skipped > repeated else "",
            f"{counted(repeated, 'repeated id')}" if repeated else "",
        ]
        eprint(
            f"neardup index build: added {counted(added, 'document')}"
            + (f" ({' and '.join(x for x in left_out if x)} skipped)" if skipped else "")
            + f"; {args.index_dir} holds {size:,}"
        )
    return EXIT_OK


def _repeated(
    doc_id: Any,
    source: nio.Source,
    doc: nio.Doc,
    sources: list[nio.Source],
    spec: nio.FieldSpec,
    name_first: bool,
) -> nio.InputError:
    """A document whose id an earlier document of the same build has: a bad record (stored,
    it would replace the earlier one unseen). Names where the id was first met when
    ``name_first`` (read again from the inputs; only for the first few, as they are shown)."""
    where = ""
    if name_first:
        for s in sources:
            first = next(
                (
                    d
                    for d in nio.read_docs(s, spec)
                    if not isinstance(d, nio.InputError)
                    and nio.id_or_place(d.id, s.path, d.line) == doc_id
                ),
                None,
            )
            if first is not None:
                path, line = _place(s, first)
                where = f" of {path}" + (f":{line}" if line is not None else "")
                break
    path, line = _place(source, doc)
    return nio.InputError(
        path,
        line,
        f"id {doc_id!r} repeats the id{where}: ids must be unique among the inputs of a build "
        "(an id already in the directory from an earlier build is replaced)",
        doc.slot,
    )


def _place(source: nio.Source, doc: nio.Doc) -> tuple[str, int | None]:
    """Where a document is: its file and line (a directory's file: its path)."""
    if source.format == "dir":
        return os.path.join(source.path, str(doc.id)), None
    return source.path, doc.line


def _close(index: Any, store: SqliteTextStore | None = None) -> None:
    index.flush()
    index.close()
    if store is not None:
        store.close()


def run_query(args: argparse.Namespace) -> int:
    """Run ``neardup index query``; returns the exit code."""
    if args.k is not None and not 0 <= args.k <= 64:
        eprint(f"neardup index query: --k {args.k} is out of range: 0..64")
        return EXIT_USAGE
    if not os.path.isdir(args.index_dir):
        eprint(f"neardup index query: {args.index_dir}: no such index directory")
        return EXIT_INPUT
    if args.output in ("-", *STDOUT_NAMES):
        args.output = None  # (standard output, as without -o)
    # (the index directory as an input: an output inside it would overwrite its files)
    if paths_refused("index query", [*args.inputs, args.index_dir], {"-o": args.output}):
        return EXIT_USAGE
    try:
        settings = _load_settings(args.index_dir)
        if settings is None:
            eprint(
                f"neardup index query: {args.index_dir} has no {SETTINGS_FILE}; "
                "build it with `neardup index build`"
            )
            return EXIT_INPUT
        fingerprinter = _fingerprinter_from(settings)
    except ValueError as e:
        eprint(f"neardup index query: {e}")
        return EXIT_INPUT
    missing = texts_missing(args.index_dir)
    if missing is not None:
        eprint(f"neardup index query: {missing}")
        return EXIT_INPUT
    if settings.get("texts") and os.path.isfile(os.path.join(args.index_dir, REFERENCE_TEXTS)):
        return _query_stored(args, settings, fingerprinter)
    # Fingerprints only (--raw, or built by an earlier version): the durable index itself.
    try:
        index = _open_index(args.index_dir, None, settings)
    except PermissionError as e:
        eprint(
            f"neardup index query: {args.index_dir}: {e}: a directory of fingerprints only "
            "(--raw) is opened for writing; copy it somewhere writable"
        )
        return EXIT_INPUT
    except (OSError, ValueError, RuntimeError) as e:
        eprint(f"neardup index query: {args.index_dir}: {e}")
        return EXIT_INPUT
    if args.fingerprint is None and not args.quiet:
        eprint(
            f"neardup index query: {args.index_dir} holds fingerprints only (built with --raw "
            "or by an earlier version): the matches are every stored item within --k bits, "
            'not verified ("similarity": null)'
        )
    try:
        return _query_to_output(args, index, fingerprinter, None)
    finally:
        _close(index)


def _query_to_output(
    args: argparse.Namespace, index: Any, fingerprinter: TextFingerprinter, checker: Any
) -> int:
    """:func:`_query` written to the ``-o`` file, or standard output; a file that cannot be
    opened (what ``paths_refused`` cannot foresee) is said, exit 1."""
    if not args.output:
        return _query(args, index, fingerprinter, checker, sys.stdout)
    try:
        out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        eprint(f"neardup index query: -o {args.output}: {e}")
        return EXIT_INPUT
    with out:
        return _query(args, index, fingerprinter, checker, out)


def _query_stored(
    args: argparse.Namespace, settings: dict[str, Any], fingerprinter: TextFingerprinter
) -> int:
    """``index query`` of a directory that holds its texts, which it only reads, so that it
    may be on a read-only disk or another user's: its text store opened read-only
    (:func:`~neardup.cli._against.reference_store`), the stored fingerprints in an index in
    memory with the directory's k (:func:`directory_k`), and for texts the deduplicator the
    ``--against`` references are checked by (the saved engine loaded when it is the store's)."""
    try:
        k = directory_k(args.index_dir, settings)
        store = reference_store(args.index_dir)
    except (OSError, ValueError) as e:
        eprint(f"neardup index query: {e}")
        return EXIT_INPUT
    what = "fingerprints" if args.fingerprint is not None else "texts"
    Progress.status(f"neardup index query: loading the stored {what}…", args.quiet)
    checker = None
    try:
        index = Index(k=k)
        index_stored(index, store, fingerprinter.many)
        if args.fingerprint is None:
            checker = Deduplicator(policy=_policy_from(settings), index=index, store=store)
    except (OSError, ValueError) as e:
        store.close()
        eprint(f"neardup index query: {e}")
        return EXIT_INPUT
    Progress.status("", args.quiet)
    try:
        return _query_to_output(args, index, fingerprinter, checker)
    finally:
        if checker is not None:
            checker.close()  # (the index and the store with it)
        else:
            index.close()
            store.close()


#: The durable index's file of settings: b"NDUPMETA", u32 format version, u32 n, n bytes of
#: JSON (with "k"), CRC-32 of all that (little-endian; crates/neardup-core/src/index/store.rs).
_INDEX_META = "index.meta"


def directory_k(path: str, settings: dict[str, Any]) -> int:
    """The radius of the index of directory ``path`` (``index build --k``, fixed when it was
    made): recorded in its settings, else (a directory last built before they recorded it) read
    from the durable index's meta file, which is read, not opened. ``ValueError`` naming the
    file when neither says."""
    k = settings.get("k")
    if isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= 64:
        return k
    meta = os.path.join(path, _INDEX_META)
    try:
        with open(meta, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{meta}: cannot read the index's k: {e}") from None
    body, crc = data[:-4], data[-4:]
    try:
        if len(data) < 20 or data[:8] != b"NDUPMETA":
            raise ValueError("not a neardup index meta file")
        if zlib.crc32(body).to_bytes(4, "little") != crc:
            raise ValueError("checksum mismatch")
        (n,) = struct.unpack_from("<I", body, 12)
        k = json.loads(body[16 : 16 + n])["k"]
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 64:
            raise ValueError(f"k {k!r} out of range")
    except (ValueError, KeyError, TypeError, struct.error) as e:
        raise ValueError(f"{meta}: cannot read the index's k: {e}") from None
    return k


def _emit(out: Any, query: Any, fp: int, matches: list[Match]) -> None:
    record: dict[str, Any] = {} if query is None else {"query": query}
    record["fingerprint"] = f"{fp:016x}"
    record["matches"] = [
        {
            "id": m.id,
            "distance": int(m.distance),
            "similarity": None if m.similarity is None else round(m.similarity, 6),
        }
        for m in matches
    ]
    out.write(nio.json_line(record) + "\n")


def _unverified(hits: list[tuple[Any, int]]) -> list[Match]:
    return [Match(i, int(d), None) for i, d in hits]


def _query(
    args: argparse.Namespace,
    index: Any,
    fingerprinter: TextFingerprinter,
    checker: Deduplicator | None,
    out: Any,
) -> int:
    def lookup(texts: list[str]) -> tuple[list[int], list[list[Match]]]:
        fps = np.asarray(fingerprinter.many(texts), dtype=np.uint64)
        if checker is not None:
            found = checker.check_many(texts, args.k)
        else:
            found = [_unverified(h) for h in index.query_many(fps, args.k)]
        return fps.tolist(), found

    if args.text is not None:
        fps, found = lookup([args.text])
        _emit(out, None, fps[0], found[0])
        return EXIT_OK
    if args.fingerprint is not None:
        try:
            fp = parse_fingerprint(args.fingerprint)
        except ValueError as e:
            eprint(f"neardup index query: {e}")
            return EXIT_USAGE
        _emit(out, args.fingerprint, fp, _unverified(index.query(fp, args.k)))
        return EXIT_OK
    args.time_field = None
    opened = open_sources(args, "index query")
    if isinstance(opened, int):
        return opened
    spec = nio.FieldSpec(args.text_field, args.id_field, None)
    queries: list[Any] = []
    texts: list[str] = []

    def flush() -> None:
        if not texts:
            return
        fps, found = lookup(texts)
        for q, fp, matches in zip(queries, fps, found):
            _emit(out, q, fp, matches)
        queries.clear()
        texts.clear()

    for source in opened:
        for doc in nio.read_docs(source, spec):
            if isinstance(doc, nio.InputError):
                if args.on_error == "fail":
                    flush()
                    eprint(f"neardup index query: {doc}")
                    return EXIT_INPUT
                if not args.quiet:
                    eprint(f"neardup index query: skipped {doc}")
                continue
            queries.append(nio.id_or_place(doc.id, source.path, doc.line))
            texts.append(doc.text)
            if len(texts) >= _CHUNK:
                flush()
    flush()
    return EXIT_OK
