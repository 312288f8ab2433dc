"""Issue 35, items 3, 12 and 13: receipts and GC read from the bucket (adopted originals outside
the table prefix, every object version), and with ``lethe gc`` defaults an erasure completes
within the month."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import events

import lethe
from lethe.gc import collect

DAYS = ("2026-01-01", "2026-01-02", "2026-01-03")
CUSTOMER = 42


def put_parquet(s3: Any, bucket: str, key: str, t: pa.Table) -> None:
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="none")
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())


def adopted(s3: Any, bucket: str, **kw: Any) -> tuple[lethe.Table, list[str]]:
    """Three Hive files under ``raw/events/`` adopted in place (customer 42 in each);
    returns the table and the originals' absolute paths."""
    for i, d in enumerate(DAYS):
        put_parquet(
            s3, bucket, f"raw/events/dt={d}/part-0.parquet", events(i * 1000, 60, customers=50)
        )
    uri = f"s3://{bucket}/tables/ev{uuid.uuid4().hex[:6]}"
    t = lethe.Table.adopt(uri, f"s3://{bucket}/raw/events/", key="id", **kw)
    assert isinstance(t, lethe.Table)
    originals = sorted(f.path for f in t.manifest.files)
    assert len(originals) == 3 and all(p.startswith(f"s3://{bucket}/raw/") for p in originals)
    return t, originals


def raw_keys(s3: Any, bucket: str) -> list[str]:
    got = s3.list_objects_v2(Bucket=bucket, Prefix="raw/").get("Contents", [])
    return sorted(f"s3://{bucket}/{o['Key']}" for o in got)


def erased_ids(t: lethe.Table) -> list[int]:
    got = t.scan(filters=[("customer_id", "=", CUSTOMER)])
    return sorted(got["id"].to_pylist())


def later(**delta: float) -> datetime:
    return datetime.now(UTC) + timedelta(**delta)


# --- item 3: receipts and GC reports know adopted originals ----------------------------------


def test_seam03_receipt_says_adopted_originals_present_until_gc_deletes_them(
    s3: Any, bucket: str
) -> None:
    """issue 35 item 3: after adopt + erase, before GC, the spliced originals under ``raw/``
    are in the bucket: the receipt says PRESENT (not ``gone``) and ``--audit`` reads them."""
    t, originals = adopted(s3, bucket)
    ids = erased_ids(t)
    t.erase([("customer_id", "=", CUSTOMER)], request_id="r1")
    r = t.erasure_status("r1")
    assert r.state == "removed"
    raw = {e.path: e for e in r.evidence if e.path.startswith("s3://")}
    assert sorted(raw) == originals == raw_keys(s3, bucket)
    assert all(e.present and e.kind == "data" for e in raw.values())
    text = r.describe()
    for p in originals:
        assert f"{p}: PRESENT" in text
    audited = t.erasure_status("r1", audit_values=ids)
    assert audited.audit is not None and not audited.audit.clean
    assert set(originals) <= set(audited.audit.found_in)


def test_seam03_gc_is_not_complete_while_adopted_originals_remain(s3: Any, bucket: str) -> None:
    """issue 35 item 3: with ``erasure_grace="1d"`` the originals stay a day after the splice;
    GC must not report the erasure complete meanwhile, and says why."""
    t, originals = adopted(s3, bucket)
    t.erase([("customer_id", "=", CUSTOMER)], request_id="r1")
    rep = collect(t, retention="1v", erasure_grace="1d", now=later(hours=1))
    (st,) = rep.erasures
    assert raw_keys(s3, bucket) == originals
    assert not st.complete and rep.complete_erasures == ()
    assert any("3 superseded file(s) remain" in b for b in st.blocking), st.blocking
    r = lethe.Table.open(t.uri).erasure_status("r1")
    assert r.state == "removed" and r.completed_at is None
    rep = collect(t, retention="1v", erasure_grace="1d", now=later(days=2))
    assert raw_keys(s3, bucket) == [] and rep.complete_erasures == (st.id_hash,)
    r = lethe.Table.open(t.uri).erasure_status("r1")
    assert r.state == "complete"
    gone = [e for e in r.evidence if e.path in originals]
    assert len(gone) == 3 and not any(e.present for e in gone)
    assert all(e.deleted_by_run == rep.run_id for e in gone)
