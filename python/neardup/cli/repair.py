"""``neardup repair DIR``: rebuild a damaged data directory from what can still be read."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

HELP = """\
Rebuild the data directory of `Deduplicator.open` / `neardup serve --data` after its text store
was damaged (the open refused it with CorruptTextStoreError): the text store's files and the
index are moved to DIR/damaged-<time>/, every row that can still be read is written to a new text
store, and the index is rebuilt from it on the next open. Prints what was recovered and what is
lost. Stop the service on DIR first."""

EPILOG = """\
examples:
  neardup repair /var/lib/neardup
  neardup repair data/ > repair-report.json

exit codes:
  0  repaired (the report says what was recovered and what is lost)
  1  DIR is not a data directory (no text store, or missing), is in use, or its policy.json
     cannot be trusted (edited, or missing with no record of the policy): nothing was changed
"""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``neardup repair``."""
    p = subparsers.add_parser(
        "repair",
        help="rebuild a damaged data directory from what can be read",
        description=HELP,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", metavar="DIR", help="the data directory")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    """Repair ``args.dir``; the report as JSON on stdout, a summary on stderr."""
    from neardup.durable import TEXTS, repair
    from neardup.io import counted

    if not os.path.isfile(os.path.join(args.dir, TEXTS)):
        print(
            f"neardup repair: {args.dir} is not a data directory (no {TEXTS}); nothing was changed",
            file=sys.stderr,
        )
        return 1
    try:
        report = repair(args.dir)
    except (OSError, ValueError) as e:
        # (in use by a service or another process, a disk error; a policy that cannot be
        # trusted, an index of another fingerprint configuration: nothing was changed)
        print(f"neardup repair: {args.dir}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    indexed = report["indexed_before"]
    print(
        f"recovered {counted(report['recovered'], 'text')}; "
        + (
            "the index was damaged too, so what is lost cannot be told"
            if indexed is None
            else f"the index held {counted(indexed, 'item')}: at least "
            f"{counted(report['lost_at_least'], 'document')} lost"
        )
        + (f" (reading stopped at: {report['read_error']})" if report["read_error"] else "")
        + f"; the old files are in {report['moved_aside']}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":  # until the subcommand is registered: python -m neardup.cli.repair
    parser = argparse.ArgumentParser(prog="neardup repair", description=HELP)
    parser.add_argument("dir", metavar="DIR")
    sys.exit(run(parser.parse_args()))
