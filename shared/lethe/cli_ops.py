"""CLI commands for deletes, erasure, verification and GC (registered by :mod:`lethe.cli`)."""

from __future__ import annotations

import argparse
from typing import Any

from lethe import errors

__all__ = ["register"]


def _filters(a: argparse.Namespace) -> Any:
    from lethe.cli import _filters as parse

    f = parse(a)
    if f is None:
        raise errors.InvalidRequest(
            "give --where or --filters: refusing to delete without a filter"
        )
    return f


def cmd_delete(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    r = t.delete(_filters(a), request_id=a.request_id)
    if r.duplicate:
        print(f"request already committed in version {r.version}: {r.rows_deleted} rows")
    elif r.version is None:
        print("no rows matched: nothing committed")
    else:
        print(
            f"deleted {r.rows_deleted} rows in {r.files_touched} files -> version {r.version} ({r.io.describe()})"
        )
    return 0


def cmd_erase(a: argparse.Namespace) -> int:
    from lethe.table import Table

    t = Table.open(a.uri)
    r = t.erase(_filters(a), request_id=a.request_id, max_bytes=a.max_bytes)
    if r.duplicate and r.rows_erased == 0:
        print(
            f"request already committed: {r.rows_deleted} rows (erasure {'complete' if r.complete else 'pending'})"
        )
        return 0
    print(
        f"erased {r.rows_erased} rows ({r.rows_deleted} newly deleted) in {r.files_spliced} spliced and "
        f"{r.files_removed} removed files -> version {r.version}"
    )
    print(
        f"  source files {r.source_bytes:,} B: copied server-side {r.bytes_copied:,} B, "
        f"uploaded {r.bytes_uploaded:,} B, downloaded {r.bytes_downloaded:,} B"
        + ("" if r.complete else "  (more row groups pending: run again)")
    )
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    from lethe.table import Table
    from lethe.verify import verify

    rep = verify(Table.open(a.uri, version=a.version))
    for p in rep.problems:
        print(f"PROBLEM {p}")
    print(
        f"version {rep.version}: {rep.files_checked} files, {rep.dvs_checked} DVs checked, {len(rep.problems)} problems"
    )
    return 0 if rep.ok else 1


def register(sub: Any, add_filters: Any) -> None:
    """Add the maintenance commands to the ``lethe`` parser."""
    c = sub.add_parser("delete", help="delete rows (deletion vectors, constant time)")
    c.add_argument("uri")
    add_filters(c)
    c.add_argument("--request-id")
    c.set_defaults(fn=cmd_delete)

    c = sub.add_parser("erase", help="delete and physically remove rows (row-group splice)")
    c.add_argument("uri")
    add_filters(c)
    c.add_argument("--request-id")
    c.add_argument("--max-bytes", type=int, help="row-group bytes to splice in this run")
    c.set_defaults(fn=cmd_erase)

    from lethe import gc

    gc.add_cli(sub)  # lethe gc s3://b/t [--dry-run] [--retention 30d|1000v] [--grace 7d]

    c = sub.add_parser("verify", help="check every reference and DV of a snapshot")
    c.add_argument("uri")
    c.add_argument("--version", type=int)
    c.set_defaults(fn=cmd_verify)
