"""``lethe gc``: garbage-collect a table in this process (:func:`lethe.gc.collect`)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from lethe.catalog.grace import DEFAULT_ERASURE_GRACE, DEFAULT_RETENTION
from lethe.cli.common import add_command

if TYPE_CHECKING:
    from lethe.gc import GcReport

__all__ = ["add_cli", "cli_command", "collect_with"]


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``lethe gc`` on the ``lethe`` command's subparsers; returns the parser.

    ``lethe gc s3://b/t [--dry-run] [--retention 30d|1000v] [--grace 7d]
    [--erasure-grace 1h] [--versioned|--not-versioned] [--json] [--show N]``
    """
    c = add_command(
        subparsers,
        "gc",
        "garbage-collect: unreferenced files, expired versions, stale uploads",
        "uri",
        description="Delete objects no retained version references (older than the grace "
        "period), expire versions past retention, abort stale multipart uploads, purge old "
        "versions of erased data, and report which erasure requests are complete.",
    )
    c.add_argument("--dry-run", action="store_true", help="report only; delete nothing")
    c.add_argument(
        "--retention",
        default=DEFAULT_RETENTION,
        help="versions to keep: 30d (age), 1000v (count) or 30d,1000v (either); default %(default)s",
    )
    c.add_argument(
        "--grace",
        default=None,
        help="keep unreferenced objects younger than this (default and minimum: the "
        "table's gc_grace property; a shorter one is refused, exit 2)",
    )
    c.add_argument(
        "--erasure-grace",
        default=DEFAULT_ERASURE_GRACE,
        help="delete what an erasure superseded (the versions before its splice and what only "
        "they reference) this long after its splice, whatever --retention (default %(default)s)",
    )
    v = c.add_mutually_exclusive_group()
    v.add_argument(
        "--versioned",
        dest="versioned",
        action="store_true",
        default=None,
        help="the bucket keeps versions: delete every version (default: ask the bucket)",
    )
    v.add_argument(
        "--not-versioned",
        dest="versioned",
        action="store_false",
        help="the bucket keeps no versions (skip asking it)",
    )
    c.add_argument("--json", action="store_true", help="print the full report as JSON")
    c.add_argument(
        "--show",
        type=int,
        default=None,
        help="list up to N keys per category (default: 50 in a dry run, 0 otherwise)",
    )
    c.set_defaults(fn=cli_command, progress=None)  # `lethe` sets the progress callback
    return c


def collect_with(uri: str, args: argparse.Namespace) -> GcReport:
    """:func:`lethe.gc.collect` of ``uri`` with the options of ``lethe gc`` (or ``lethe lake
    gc``, which has no ``--versioned``: the bucket is asked)."""
    from lethe.gc import collect

    return collect(
        uri,
        retention=args.retention,
        grace=args.grace,
        erasure_grace=args.erasure_grace,
        dry_run=args.dry_run,
        versioned=getattr(args, "versioned", None),
        progress=args.progress,
    )


def cli_command(args: argparse.Namespace) -> int:
    """Run ``lethe gc`` with parsed arguments; exit status 1 if some deletion failed."""
    report = collect_with(args.uri, args)
    if args.json:
        print(json.dumps(report.model_dump(mode="json"), indent=2))
    else:
        print(report.describe())
        show = args.show if args.show is not None else (50 if args.dry_run else 0)
        for cat, ks in report.keys.items():
            for k in ks[:show]:
                print(f"  {cat:<10} {k}")
            if show and len(ks) > show:
                print(f"  {cat:<10} … and {len(ks) - show} more")
    return 1 if report.failed else 0
