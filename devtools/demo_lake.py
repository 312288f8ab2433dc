"""The demo's lake step (issue 29): one customer in three tables (orders, events, tickets),
one request, one receipt, the GC making it complete. In a bucket of its own, so the main
story's audit and GC stay about the main table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow.compute as pc

from devtools.audit import Needle
from devtools.datagen import SCHEMA, generate
from devtools.narrator import Narrator
from lethe.catalog.grace import format_duration
from lethe.gc import collect
from lethe.lake import Lake
from lethe.table import Table

__all__ = ["lake_story"]

BUCKET = "lethe-demo-lake"
TABLES = ("orders", "events", "tickets")
REQUEST_ID = "demo-lake-gdpr-1"  # hashed in everything printed


def lake_story(story: Narrator, s3: Any, *, rows: int, customers: int) -> dict[str, Any]:
    """Three tables of ``rows`` rows (two files each, time-ordered, so the person is in every
    file), mapped to ``customer``; one erase request through the lake (hidden at once, spliced
    by the window run), the GC on each table, the receipt printed. Returns the figures."""
    story.step(
        "the lake: orders, events and tickets; one person in all three, one request, one receipt"
    )
    s3.create_bucket(Bucket=BUCKET)
    lake = Lake.create(f"s3://{BUCKET}/_lethe", s3=s3)  # erasure window: one day (default)
    for i, name in enumerate(TABLES):
        uri = f"s3://{BUCKET}/tables/{name}"
        t = Table.create(uri, SCHEMA, key="id", s3=s3, gc_grace="1s", row_group_bytes=64 << 10)
        n = max(200, rows // (1 + 4 * i))  # tickets are rarer than orders
        for half in range(2):
            t.append(generate(i * 10_000_000 + half * n, n, customers=customers, seed=11 + i))
        lake.map_subject("customer", table=uri, column="customer_id")
    person = int(
        pc.min(Table.open(f"s3://{BUCKET}/tables/tickets", s3=s3).scan(["customer_id"])[0]).as_py()
    )
    story.say(
        f"lake {lake.uri}: {len(lake.tables())} tables, subject 'customer' mapped to "
        "customer_id in each (indexed); erasure window "
        f"{format_duration(lake.erasure_window)}"
    )
    payloads = _own_payloads([Table.open(u, s3=s3) for u in lake.tables()], person)
    r = lake.forget("customer", [person], request_id=REQUEST_ID, mode="erase")
    story.say(
        f"request {r.id_hash[:16]}…: recorded in lake.json, {r.rows_deleted} rows hidden in "
        f"{len(r.tables)} tables (one commit each); splices wait for the window"
    )
    run = lake.splice_due(now=datetime.now(UTC) + lake.erasure_window + timedelta(seconds=1))
    story.say(
        f"the window run (scheduled; here, as if the window had closed): {run.files_spliced} "
        f"files spliced in {run.commits} commits, each once for every request of the window"
    )
    for uri in lake.tables():
        collect(uri, retention="1v", grace="7d", erasure_grace="0s", s3=s3)
    receipt = lake.erasure_status(REQUEST_ID)
    for line in receipt.describe().splitlines():
        story.say(line)
    left = sum(
        Table.open(u, s3=s3).scan(filters=[("customer_id", "=", person)]).num_rows
        for u in lake.tables()
    )
    return {
        "lake_tables": len(receipt.tables),
        "lake_rows_hidden": r.rows_deleted,
        "lake_files_spliced": run.files_spliced,
        "lake_state": receipt.state,
        "lake_done": receipt.done,
        "lake_rows_left": left,
        "lake_receipt": receipt.describe(),
        "lake_person": person,
        "lake_bucket": BUCKET,
        # what the demo's closing audit looks for (never printed): the rows' payloads, the
        # customer in decoded columns and index pieces, the values object's JSON
        "lake_needles": {
            "lake person": Needle(
                (*(p.encode() for p in payloads), f'"values": [{person}]'.encode()),
                values=(("customer_id", person),),
            )
        },
    }


def _own_payloads(tables: list[Table], person: int) -> list[str]:
    """The person's payloads that no other row's payload contains (a byte search for one
    then means the person's row, not a neighbour's)."""
    mine: set[str] = set()
    others: list[str] = []
    for t in tables:
        got = t.scan(["customer_id", "payload"])
        for c, p in zip(got["customer_id"].to_pylist(), got["payload"].to_pylist(), strict=True):
            if c == person:
                mine.add(p)
            else:
                others.append(p)
    return sorted(p for p in mine if not any(p in o for o in others))
