"""``neardup serve``: the HTTP dedup service on the embedded durable index (or a Redis store)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from neardup._core import PRESETS

HELP = """\
Start the HTTP JSON dedup service (POST /v1/check, /v1/add, /v1/check-and-add and their /batch
forms, GET/DELETE /v1/documents/{id}, /v1/stats, /healthz, /metrics, a web page at /, API docs at
/docs). Binds 127.0.0.1 unless --host says otherwise. Every flag can also come from the
environment: NEARDUP_DATA, NEARDUP_STORE, NEARDUP_SYNC, NEARDUP_HOST, NEARDUP_PORT, NEARDUP_K,
NEARDUP_RETENTION, NEARDUP_PRESET, NEARDUP_POLICY, NEARDUP_TOKEN, NEARDUP_MAX_BODY_BYTES,
NEARDUP_MAX_TEXT_BYTES, NEARDUP_MAX_BATCH, NEARDUP_EXPIRE_INTERVAL, NEARDUP_STORE_TIMEOUT; flags
win."""

EPILOG = """examples:
  neardup serve --data data/ --retention 2d
  NEARDUP_TOKEN=s3cret neardup serve --data data/ --host 0.0.0.0 --port 8080
  neardup serve --store redis://localhost:6379/0

exit codes:
  0  stopped (Ctrl-C or SIGTERM)
  1  the store cannot be opened, or the address cannot be bound
  2  usage error: bad flags or settings, the service extra missing
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``neardup serve``."""
    p = subparsers.add_parser(
        "serve",
        help="run the HTTP dedup service",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", metavar="DIR", help="directory of the durable store (created if new)")
    p.add_argument(
        "--store",
        metavar="URL",
        help="redis://, rediss:// or redis+cluster:// URL instead of --data",
    )
    p.add_argument(
        "--sync",
        choices=["full", "normal"],
        help="full (default): an acknowledged write is fsynced (survives a power cut); normal: "
        "written to the OS (survives kill -9 of the server, not a power cut), much faster",
    )
    p.add_argument(
        "--against",
        metavar="DIR",
        help="a reference directory made by `neardup index build`, loaded read-only: a text "
        "that is a near-copy of one of its documents is a duplicate of it and is not added",
    )
    p.add_argument("--host", help="address to bind (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, help="TCP port (default: 8000; 0 picks a free one)")
    p.add_argument(
        "--k",
        type=int,
        help="candidate radius in bits: the stored texts within k bits are verified (default: "
        "the policy's own candidates, MinHash bands of the verifier's shingles; with another "
        "verifier 13 bits for texts of up to 200 characters, 11 for longer ones)",
    )
    p.add_argument(
        "--retention",
        metavar="DURATION",
        help="keep items this long: 90s, 30m, 12h, 2d, 1w or 'none' (default: 2d)",
    )
    p.add_argument(
        "--preset",
        choices=PRESETS,
        help="fingerprinter preset (default: default, the policy's)",
    )
    p.add_argument(
        "--policy",
        metavar="JSON|FILE",
        help="deduplicator policy: a JSON object as Policy.to_dict() writes it, or a file holding "
        "one, e.g. '{\"threshold\": 0.85}' (default: the default policy, or the one saved in "
        "--data)",
    )
    p.add_argument(
        "--token",
        help="require 'Authorization: Bearer TOKEN' (prefer NEARDUP_TOKEN "
        "or --token-file: flags show in ps)",
    )
    p.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    p.add_argument("--max-body", metavar="SIZE", help="request body limit (default: 16MiB)")
    p.add_argument(
        "--max-text", metavar="SIZE", help="per-text limit in UTF-8 bytes (default: 1MiB)"
    )
    p.add_argument(
        "--max-batch", type=int, metavar="N", help="items per batch request (default: 10000)"
    )
    p.add_argument("--read-threads", type=int, metavar="N", help="checker threads (default: 4)")
    p.add_argument(
        "--expire-interval",
        metavar="DURATION",
        help="time between retention sweeps (default: retention/100, between 1s and 60s)",
    )
    p.add_argument(
        "--store-timeout",
        metavar="DURATION",
        help="how long a request waits for the Redis store before a 503 (default: 5s; 'none')",
    )
    p.add_argument(
        "--writer",
        choices=["thread", "inline"],
        help="where the serialized writer applies writes: its own thread (default) or the "
        "event loop's (no thread handoffs; for --sync normal)",
    )
    p.add_argument(
        "--no-fast-path",
        action="store_true",
        help="serve every route through FastAPI (slower; for comparison)",
    )
    p.add_argument(
        "--log-level",
        choices=["critical", "error", "warning", "info", "debug"],
        help="log messages of this level and above (default: warning)",
    )
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Run the service until interrupted; 2 on bad settings, 1 when the store cannot open."""
    from neardup.service.settings import Settings, SettingsError, parse_duration, parse_size

    try:
        token = args.token
        if args.token_file:
            with open(args.token_file, encoding="utf-8") as f:
                token = f.read().strip()
        overrides: dict[str, Any] = {
            "data_dir": args.data,
            "store": args.store,
            "sync": args.sync,
            "host": args.host,
            "port": args.port,
            "k": args.k,
            "preset": args.preset,
            "policy": args.policy,
            "token": token,
            "max_batch": args.max_batch,
            "read_threads": args.read_threads,
            "log_level": args.log_level,
            "writer": args.writer,
        }
        if args.retention is not None:
            retention = parse_duration(args.retention, "--retention")
            overrides["retention"] = retention
        if args.expire_interval is not None:
            overrides["expire_interval"] = parse_duration(args.expire_interval, "--expire-interval")
        if args.store_timeout is not None:
            overrides["store_timeout"] = parse_duration(args.store_timeout, "--store-timeout")
        if args.max_body is not None:
            overrides["max_body_bytes"] = parse_size(args.max_body, "--max-body")
        if args.max_text is not None:
            overrides["max_text_bytes"] = parse_size(args.max_text, "--max-text")
        if args.no_fast_path:
            overrides["fast_path"] = False
        settings = Settings.from_env(**overrides)
        for flag in ("retention", "store_timeout"):  # '--retention none' beats the env
            if getattr(args, flag) is not None and overrides.get(flag) is None:
                settings = settings.replace(**{flag: None})
    except (SettingsError, OSError) as e:
        print(f"neardup serve: {e}", file=sys.stderr)
        return 2
    try:
        from neardup.service.app import create_app
        from neardup.service.backend import StoreError, open_backend
        from neardup.service.runner import serve
    except ModuleNotFoundError as e:
        print(
            f"neardup serve: needs the service extra: pip install 'neardup[service]' ({e})",
            file=sys.stderr,
        )
        return 2
    try:
        backend = open_backend(settings)
    except SettingsError as e:
        print(f"neardup serve: {e}", file=sys.stderr)
        return 2
    except (StoreError, RuntimeError) as e:  # (RuntimeError: the Redis extra is missing)
        print(f"neardup serve: {e}", file=sys.stderr)
        return 1
    if args.against:
        from neardup.dedup import Policy
        from neardup.service.references import WithReferences, load_references

        try:
            policy = getattr(backend, "policy", None) or Policy.default()
            backend = WithReferences(backend, load_references(args.against, policy))
        except (ValueError, OSError) as e:
            backend.close()
            print(f"neardup serve: {e}", file=sys.stderr)
            return 2
    try:
        serve(settings, create_app(settings, backend=backend))
    except OSError as e:
        print(f"neardup serve: {e}", file=sys.stderr)
        return 1
    finally:
        # (the app closes it when it shuts down, but not when the address cannot be bound;
        # closing is idempotent)
        backend.close()
    return 0
