"""The demo's "layout for forgetting" step (issue 26): the same erase on an event table before
and after a clustering compaction, in a bucket of its own (the main story's audit and GC
stay about the main table)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from devtools.datagen import SCHEMA, generate
from devtools.narrator import Narrator
from lethe.erasure.erase import EraseResult
from lethe.table import Table

__all__ = ["layout_for_forgetting", "row_ttl"]

BUCKET = "lethe-demo-layout"


def _heaviest(t: pa.Table, rank: int) -> int:
    """The customer with the ``rank``-th most rows (0: the most)."""
    counts = pc.value_counts(t.column("customer_id")).to_pylist()
    counts.sort(key=lambda c: (-c["counts"], c["values"]))
    return int(counts[rank]["values"])


def _daily_by_customer(s3: Any, name: str, **properties: Any) -> Table:
    """The demo bucket's table ``name``, clustered by customer_id in daily windows."""
    return Table.create(
        f"s3://{BUCKET}/{name}",
        SCHEMA,
        key="id",
        s3=s3,
        cluster_by=("customer_id",),
        cluster_window="1d",
        row_group_bytes=1 << 20,
        **properties,
    )


def _said(story: Narrator, what: str, r: EraseResult, files: int, table_bytes: int) -> None:
    moved = r.bytes_uploaded + r.bytes_downloaded
    story.say(
        f"{what}: {r.rows_erased:,} rows erased from {r.files_spliced + r.files_removed} of "
        f"{files} files; {moved:,} bytes over the wire ({moved / table_bytes:.0%} of the "
        f"table), {r.bytes_copied:,} copied server-side"
    )


def layout_for_forgetting(
    story: Narrator, s3: Any, *, appends: int, rows: int, customers: int
) -> dict[str, Any]:
    """Create a ``cluster_by`` table with daily windows, append ``appends`` time-ordered
    batches of ``rows`` rows, erase one customer, compact (the clustering), erase another;
    returns the figures (the end-to-end test checks them)."""
    story.step(
        "a layout for forgetting: cluster_by customer_id in daily windows, a bounded number of "
        "customers per file; an erase before and after the clustering compaction"
    )
    s3.create_bucket(Bucket=BUCKET)
    t = _daily_by_customer(
        s3,
        "events",
        cluster_file_subjects=max(5, customers // 10),  # about 10 files a day
        target_file_bytes=64 << 20,
        indexes=("customer_id",),
    )
    batches = [generate(b * rows, rows, customers=customers) for b in range(appends)]
    for data in batches:
        t.append(data)
    all_rows = pa.concat_tables(batches)
    first, second = _heaviest(all_rows, 1), _heaviest(all_rows, 2)
    files, size = len(t.manifest.files), sum(f.size for f in t.manifest.files)
    story.say(
        f"{appends} appends of {rows:,} time-ordered rows -> {files} files, {size:,} bytes; "
        f"each batch sorted by customer (cluster_by), one person's rows in every file"
    )
    before = t.erase([("customer_id", "=", first)], request_id="layout-before")
    _said(story, "erase a customer (time-ordered files)", before, files, size)
    c = t.compact()
    files, size = len(t.manifest.files), sum(f.size for f in t.manifest.files)
    story.say(
        f"clustering compaction v{c.version}: {c.files_removed} files -> {c.files_added} "
        f"(a day's rows sorted by customer_id, cut every {max(5, customers // 10)} customers; "
        "the sort order is published to the Iceberg view)"
    )
    after = t.erase([("customer_id", "=", second)], request_id="layout-after")
    _said(story, "erase another customer (clustered)", after, files, size)
    return {
        "layout_files_touched_before": before.files_spliced + before.files_removed,
        "layout_files_touched_after": after.files_spliced + after.files_removed,
        "layout_files_after": files,
        "layout_rows_erased": (before.rows_erased, after.rows_erased),
    }


def row_ttl(story: Narrator, s3: Any, *, days: int, rows: int, customers: int) -> dict[str, Any]:
    """A clustered table of ``days`` daily batches up to now with a 7-day row retention: the
    sweep drops the days past it whole (a metadata-only commit) and splices the day the
    cutoff cuts; its receipt is printed. Returns the figures."""
    story.step("row TTL: retention 7d on event_time, swept as a hard erasure, with a receipt")
    t = _daily_by_customer(s3, "clicks", retention=("event_time", "7d"))
    now = datetime.now(UTC)
    day0 = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days - 1)
    for d in range(days):
        data = generate(d * rows, rows, customers=customers)
        start = int((day0 + timedelta(days=d)).timestamp() * 1_000_000)
        times = pa.array([start + i * (86_400_000_000 // rows) for i in range(rows)])
        data = data.set_column(1, "event_time", times.cast(SCHEMA.field("event_time").type))
        t.append(data)
    t.compact()  # one file per day
    size = sum(f.size for f in t.manifest.files)
    story.say(f"{days} days of {rows:,} rows, clustered: {len(t.manifest.files)} files, {size:,} B")
    r = t.sweep_retention()
    story.say(
        f"sweep (cutoff {r.cutoff:%Y-%m-%d %H:%M} UTC): {r.files_dropped} files dropped whole "
        f"({r.bytes_dropped:,} B, no data byte moved for them), {r.files_spliced} spliced, "
        f"{r.rows_expired:,} rows erased, {r.data_bytes_moved:,} data bytes moved in all; "
        f"versions {list(r.versions)}"
    )
    receipt = t.erasure_status(r.request_id)
    lines = receipt.describe().splitlines()
    for line in lines:
        if not line.lstrip().startswith("evidence"):
            story.say(line)
    evidence = sum(1 for line in lines if line.lstrip().startswith("evidence"))
    story.say(
        f"  evidence   {evidence} objects that may still hold the rows, until GC removes them"
    )
    return {
        "ttl_files_dropped": r.files_dropped,
        "ttl_files_spliced": r.files_spliced,
        "ttl_rows_expired": r.rows_expired,
        "ttl_receipt_state": receipt.state,
        "ttl_rows_left": t.scan(["id"]).num_rows,
    }
