"""The demo's adoption step (issue 28): a lake that already exists (Hive-partitioned Parquet
under ``raw/``, written by pyarrow, no page index), its readiness report, adopted in place,
one person erased, GC deleting the superseded originals, and the whole-bucket audit. In a
bucket of its own, so the main story's audit and GC stay about the main table. Prints
counts and hashes only, never a value."""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from devtools.audit import Needle, audit_bucket
from devtools.datagen import generate
from devtools.narrator import Narrator
from lethe.adopt.plan import AdoptPlan
from lethe.catalog.manifest import request_hash
from lethe.errors import InvalidRequest
from lethe.gc import collect
from lethe.table import Table

__all__ = ["BUCKET", "REQUEST_ID", "adopt_story"]

BUCKET = "lethe-demo-adopt"
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")
REQUEST_ID = "demo-adopt-gdpr-1"  # hashed in everything printed


def _raw(s3: Any, bucket: str) -> list[str]:
    got = s3.list_objects_v2(Bucket=bucket, Prefix="raw/").get("Contents", [])
    return sorted(o["Key"] for o in got)


def adopt_story(
    story: Narrator, s3: Any, *, rows: int, customers: int, bucket: str = BUCKET
) -> dict[str, Any]:
    """Three daily files of ``rows`` rows under ``raw/events/dt=.../``; the dry run's
    readiness, the adoption in place, one customer erased, GC, the audit. Returns figures.

    Raises:
        InvalidRequest: ``bucket`` exists already (the story needs a lake of its own: a
            second run would adopt its re-uploaded originals beside the spliced ones).
    """
    story.step("adopting the lake you have: Hive-partitioned Parquet under raw/, in place")
    s3.create_bucket(Bucket=bucket)  # moto (us-east-1): a no-op when it exists
    if s3.list_objects_v2(Bucket=bucket, MaxKeys=1).get("KeyCount", 0):
        raise InvalidRequest(f"the demo's adoption needs an empty bucket; {bucket} has objects")
    written = 0
    for i, day in enumerate(DAYS):
        buf = io.BytesIO()
        pq.write_table(generate(i * rows, rows, customers=customers, seed=31), buf)
        key = f"raw/events/dt={day}/part-0.parquet"
        s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
        written += buf.tell()
    uri, src = f"s3://{bucket}/tables/adopted_events", f"s3://{bucket}/raw/events/"
    story.say(f"someone's lake: {len(DAYS)} files, {written:,} bytes, written by pyarrow")
    options: dict[str, Any] = {
        "key": "id",
        "partition_types": {"dt": pa.date32()},
        "indexes": ("customer_id",),
        "s3": s3,
    }
    plan = Table.adopt(uri, src, dry_run=True, **options)
    assert isinstance(plan, AdoptPlan)
    story.say(
        f"lethe adopt {uri} {src} --partitioning hive --key id --index customer_id "
        "--partition-type dt=date --dry-run:"
    )
    for line in plan.describe().splitlines()[:5]:
        story.say("  " + line)
    t = Table.adopt(uri, src, **options)
    assert isinstance(t, Table)
    io_, adopted = t.store.stats.snapshot(), len(t.manifest.files)
    story.say(
        f"adopted in place: {adopted} files, {t.manifest.total_rows:,} rows, "
        f"dt a date partition; {io_.bytes_downloaded:,} bytes read (footers, and the "
        f"customer_id column for its index), {io_.bytes_copied:,} copied"
    )
    got = t.scan(["id", "customer_id", "payload"])
    person = int(pc.min(got["customer_id"]).as_py())
    mine = got.filter(pc.equal(got["customer_id"], person))
    needles = {
        "person": Needle(
            tuple(p.encode() for p in mine["payload"].to_pylist()),
            values=(("customer_id", person),),  # decoded: data files and index pieces
        )
    }
    r = t.erase([("customer_id", "=", person)], request_id=REQUEST_ID)
    story.say(
        f"erase request {request_hash(REQUEST_ID)[:16]}…: {r.rows_deleted} rows, "
        f"{r.files_spliced} originals spliced into data/, "
        f"{r.bytes_uploaded + r.bytes_copied:,} bytes moved"
    )
    before = audit_bucket(s3, bucket, needles)
    gc = collect(t, retention="1v", erasure_grace="0s")
    after = audit_bucket(s3, bucket, needles)
    receipt = Table.open(uri, s3=s3).erasure_status(REQUEST_ID)
    left = _raw(s3, bucket)
    hashed = hashlib.sha256(str(person).encode()).hexdigest()[:12]
    story.say(
        f"GC deleted {gc.objects_deleted} objects; raw/ originals left: {len(left)} of "
        f"{len(DAYS)}; receipt {receipt.state}"
    )
    story.say(
        f"audit of the whole bucket (raw/ included): {after.objects} objects, "
        f"{after.bytes:,} bytes, {after.pages} pages; person {hashed}: "
        f"{len(before.found('person'))} objects before GC, {len(after.found('person'))} after"
    )
    return {
        "adopt_plan_files": len(plan.files),
        "adopt_plan_actions": dict(Counter(f.action for f in plan.files)),
        "adopt_files": adopted,
        "adopt_copied": io_.bytes_copied,
        "adopt_rows_erased": r.rows_deleted,
        "adopt_files_spliced": r.files_spliced,
        "adopt_person_rows": mine.num_rows,
        "adopt_raw_left": left,
        "adopt_found_before": before.found("person"),
        "adopt_found_after": after.found("person"),
        "adopt_receipt_state": receipt.state,
        "adopt_bucket": bucket,
        "adopt_needles": needles,  # what the demo's closing audit looks for (never printed)
    }
