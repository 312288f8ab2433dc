"""Maintenance commands: delete, erase, purge, gc (:mod:`lethe.cli.gc`), compact, verify."""

from __future__ import annotations

import argparse
from typing import Any

from lethe import errors
from lethe.cli.common import add_at_version, add_command, add_filters
from lethe.cli.common import filters as parse

__all__ = ["register"]


def _filters(a: argparse.Namespace) -> Any:
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
    r = t.erase(_filters(a), request_id=a.request_id, max_bytes=a.max_bytes, progress=a.progress)
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


def cmd_purge(a: argparse.Namespace) -> int:
    import uuid

    from lethe.table import Table

    t = Table.open(a.uri)
    rid = a.request_id or f"purge-{uuid.uuid4().hex}"
    if a.queue_url:  # record here, splice in the stack's bounded splice worker
        from lethe.erasure.erase import record_purge
        from lethe.erasure.jobs import SpliceJob, send_jobs

        h, version, duplicate, _ = record_purge(t.context, rid)
        if version is None:
            print("no row is hidden by a deletion vector: nothing to purge")
            return 0
        send_jobs([SpliceJob(table=t.uri, erasure=h)], queue_url=a.queue_url)
        print(
            f"purge {'already ' if duplicate else ''}recorded in version {version} "
            f"(request id {rid}); splice job queued"
        )
        return 0
    r = t.purge(request_id=rid, max_bytes=a.max_bytes, progress=a.progress)
    if r.version is None and r.complete:
        print("no row is hidden by a deletion vector: nothing to purge")
        return 0
    print(
        f"purged {r.rows_erased} hidden rows in {r.files_spliced} spliced and "
        f"{r.files_removed} removed files -> version {r.version} (request id {rid})"
    )
    print(
        f"  source files {r.source_bytes:,} B: copied server-side {r.bytes_copied:,} B, "
        f"uploaded {r.bytes_uploaded:,} B, downloaded {r.bytes_downloaded:,} B"
        + ("" if r.complete else f"  (more pending: run again with --request-id {rid})")
    )
    return 0


def cmd_compact(a: argparse.Namespace) -> int:
    from lethe.maintenance.compaction import CompactionOptions
    from lethe.table import Table

    t = Table.open(a.uri)
    opts = CompactionOptions(
        min_deleted_fraction=a.min_deleted_fraction, cluster=False if a.no_cluster else None
    )
    r = t.compact(opts, dry_run=a.dry_run, progress=a.progress)
    print(r.describe())
    if not a.dry_run and r.version is not None:
        print(f"  {r.bytes_before:,} B -> {r.bytes_after:,} B ({r.io.describe()})")
    return 0


def cmd_verify(a: argparse.Namespace) -> int:
    from lethe.audit.verify import verify
    from lethe.table import Table

    rep = verify(Table.open(a.uri, version=a.version), deep=a.deep)
    for p in rep.problems:
        print(f"PROBLEM {p}")
    print(
        f"version {rep.version}: {rep.segments_checked} segments, {rep.files_checked} files, "
        f"{rep.dvs_checked} DVs, {rep.index_pieces_checked} index pieces"
        + (f" ({rep.index_entries_checked} entries)" if a.deep else "")
        + f" checked, {len(rep.problems)} problems"
    )
    return 0 if rep.ok else 1


def register(sub: Any) -> None:
    """Add the maintenance commands to the ``lethe`` parser."""
    what = "delete rows (deletion vectors, constant time)"
    c = add_command(sub, "delete", what, "uri", fn=cmd_delete)
    add_filters(c)
    c.add_argument("--request-id")

    what = "delete and physically remove rows (row-group splice)"
    c = add_command(sub, "erase", what, "uri", fn=cmd_erase)
    add_filters(c)
    c.add_argument("--request-id")
    c.add_argument("--max-bytes", type=int, help="row-group bytes to splice in this run")

    what = "physically remove every row a deletion vector hides (row-group splices)"
    c = add_command(sub, "purge", what, "uri", fn=cmd_purge)
    c.add_argument("--request-id", help="resume (or make idempotent) a purge by its id")
    c.add_argument("--max-bytes", type=int, help="row-group bytes to splice in this run")
    c.add_argument(
        "--queue-url", help="record the purge and leave the splicing to the splice worker's queue"
    )

    from lethe.cli.gc import add_cli

    add_cli(sub)  # lethe gc s3://b/t [--dry-run] [--retention 30d|1000v] [--grace 7d]

    what = (
        "rewrite files with many deleted rows, bin small files; re-cluster the windows "
        "of a table with cluster_by (in this process; spark_jobs/compact.py at scale)"
    )
    c = add_command(sub, "compact", what, "uri", fn=cmd_compact)
    c.add_argument("--min-deleted-fraction", type=float, default=0.2)
    c.add_argument("--no-cluster", action="store_true", help="bin by key even with cluster_by")
    c.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")

    what = "check every reference and DV of a snapshot"
    c = add_command(sub, "verify", what, "uri", fn=cmd_verify)
    add_at_version(c, "verify this table version (default: the latest)")
    c.add_argument(
        "--deep", action="store_true", help="also decode index pieces and check every entry"
    )
