"""Issue 35, items 3, 12 and 13: receipts and GC read from the bucket (adopted originals outside
the table prefix, every object version), and with ``lethe gc`` defaults an erasure completes
within the month."""

from __future__ import annotations

import gzip
import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from lethe import errors
from lethe.catalog.manifest import decode_manifest
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
    s3: Any, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 35 item 3: after adopt + erase, before GC, the spliced originals under ``raw/``
    are in the bucket: the receipt (and ``lethe erasures``) says PRESENT, not ``gone``, and
    ``--audit`` reads them."""
    from lethe.cli import main

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
    assert main(["erasures", t.uri, "--request-id", "r1"]) == 0
    out = capsys.readouterr().out
    assert all(f"{p}: PRESENT" in out for p in originals) and ": gone" not in out
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
    # an original restored from a backup: the bucket holds the rows again, whatever GC marked
    put_parquet(
        s3, bucket, originals[0].removeprefix(f"s3://{bucket}/"), events(0, 60, customers=50)
    )
    r = lethe.Table.open(t.uri).erasure_status("r1")
    assert r.state == "removed" and "marked it complete" in r.blocking[0]
    assert f"{originals[0]}: PRESENT" in r.describe()


# --- item 12: with GC's defaults an erasure completes within the month -------------------------


def bucket_paths(s3: Any, uri: str) -> set[str]:
    bucket, _, prefix = uri[5:].partition("/")
    out: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        out.update(o["Key"][len(prefix) + 1 :] for o in page.get("Contents", []))
    return out


def test_seam12_gc_defaults_complete_an_erasure_after_the_erasure_grace(
    table_uri: str, s3: Any
) -> None:
    """issue 35 item 12: ``lethe gc`` defaults (retention 30d, the table's 7d grace, erasure
    grace 1h), run on a clock: what the erasure superseded (spliced files, index pieces,
    segments) goes 1h after the splice, not after the time-travel retention; since issue 39
    the versions from before it stay, read through the splice (their roots written anew)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",))
    t.append(events(0, 300))
    t.append(events(300, 300))
    before = t.version
    pieces = {p.path for ix in t.manifest.indexes for r in ix.runs for p in r.pieces}
    res = t.erase([("customer_id", "=", CUSTOMER)], request_id="r12")
    assert res.complete
    t.refresh()
    (rec,) = t.manifest.erasures
    superseded = set(t.manifest.superseded_of(rec))
    assert {p for p in superseded if p.startswith("data/")}  # the spliced files
    kept_pieces = {p.path for ix in t.manifest.indexes for r in ix.runs for p in r.pieces}
    old_pieces = pieces - kept_pieces
    assert old_pieces and pieces <= bucket_paths(s3, table_uri)

    early = collect(t, now=later(minutes=30))  # within the erasure grace: nothing yet
    assert not early.erasures[0].complete and old_pieces <= bucket_paths(s3, table_uri)

    stale = lethe.Table.open(table_uri, version=before)  # a reader of the old version
    rep = collect(t, now=later(hours=2))
    (st,) = rep.erasures
    assert st.complete, st.blocking
    # issue 39: the old version reads through the splice (the replacements), before and
    # after GC, and its root was written anew (it names no superseded object)
    assert stale.scan().num_rows == 600 - 6
    left = bucket_paths(s3, table_uri)
    assert not old_pieces & left
    assert not {p for p in superseded if not p.startswith("s3://")} & left
    older = [
        p for p in left if p.startswith("manifest/v") and p < f"manifest/v{st.spliced_version:08d}"
    ]
    assert older and all(
        decode_manifest(
            s3.get_object(Bucket=t.catalog.store.bucket, Key=t.key_of(p))["Body"].read()
        ).operation.params.get("mapped")
        for p in older
    )
    assert lethe.Table.open(table_uri).erasure_status("r12").state == "complete"
    assert lethe.Table.open(table_uri).scan().num_rows == 600 - 6
    assert lethe.Table.open(table_uri, version=before).scan().num_rows == 600 - 6


def test_seam12_gc_defaults_delete_adopted_originals_after_the_erasure_grace(
    s3: Any, bucket: str
) -> None:
    """issue 35 item 12: adopted originals an erasure superseded go with GC's defaults a day
    after the splice, not 30 days later."""
    t, _ = adopted(s3, bucket)
    t.erase([("customer_id", "=", CUSTOMER)], request_id="r12")
    rep = collect(t, now=later(days=1))
    assert rep.complete_erasures and raw_keys(s3, bucket) == []
    assert lethe.Table.open(t.uri).erasure_status("r12").state == "complete"


def test_seam12_a_grace_below_the_tables_floor_is_refused(
    table_uri: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """issue 35 item 12: ``--grace 0s`` (any grace below the table's gc_grace) is refused
    with the reason and the floor: exit 2 from the CLI, InvalidRequest from the API; nothing
    is written or deleted. Omitted, the grace is the table's; a longer one is taken."""
    from lethe.cli import main

    t = lethe.Table.create(table_uri, EVENTS, key="id")  # gc_grace 7d, the default
    t.append(events(0, 10))
    objects = bucket_paths(s3, table_uri)
    for grace in ("0s", "6d"):
        with pytest.raises(errors.InvalidRequest, match="shorter than the table's gc_grace 7d"):
            collect(t, grace=grace)
    assert main(["gc", table_uri, "--grace", "0s"]) == 2
    assert "gc_grace 7d" in capsys.readouterr().err
    assert bucket_paths(s3, table_uri) == objects
    assert collect(t).grace_seconds == 7 * 86400
    assert collect(t, grace="8d").grace_seconds == 8 * 86400


# --- item 13: versioned buckets: every version of every object that can hold a value ----------


def versioned(s3: Any) -> str:
    name = f"v-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def secret_events(i: int) -> pa.Table:
    """One day's rows; customer 42's payloads are ``secret-<id>`` (the largest strings, so
    every statistic of ``payload`` names one)."""
    t = events(i * 1000, 60, customers=50)
    pay = [
        f"secret-{r}" if c == CUSTOMER else p
        for r, c, p in zip(
            t["id"].to_pylist(), t["customer_id"].to_pylist(), t["payload"].to_pylist(), strict=True
        )
    ]
    return t.set_column(3, "payload", pa.array(pay))


def version_holders(s3: Any, bucket: str) -> list[str]:
    """Every object version of the bucket holding customer 42: Parquet decoded (a
    ``customer_id`` column, or an index piece's ``value``, equal to 42; a ``secret-``
    payload), any other object (gunzipped) searched for ``secret-``."""
    holders = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        for v in page.get("Versions", []):
            body = s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])[
                "Body"
            ].read()
            name = f"{v['Key']}?versionId={v['VersionId']}"
            if body[:4] == b"PAR1":
                t = pq.read_table(pa.BufferReader(body))
                cols = [c for c in ("customer_id", "value") if c in t.column_names]
                if any(CUSTOMER in t[c].to_pylist() for c in cols) or (
                    "payload" in t.column_names
                    and any(str(p).startswith("secret-") for p in t["payload"].to_pylist())
                ):
                    holders.append(name)
                continue
            if body[:2] == b"\x1f\x8b":
                body = gzip.decompress(body)
            if b"secret-" in body:
                holders.append(name)
    return holders


def test_seam13_versioned_bucket_gc_purges_every_version_before_complete(s3: Any) -> None:
    """issue 35 item 13: in a versioned bucket, GC (defaults, on a clock) deletes every version
    and delete marker of every object that held the erased customer: spliced data files,
    index pieces, segments, manifests, and the adopted originals outside the table prefix,
    before it says ``complete``; receipts read versions: an object deleted while old versions
    remain is not ``gone``."""
    bucket = versioned(s3)
    for i, d in enumerate(DAYS):
        put_parquet(s3, bucket, f"raw/events/dt={d}/part-0.parquet", secret_events(i))
    uri = f"s3://{bucket}/tables/ev"
    t = lethe.Table.adopt(uri, f"s3://{bucket}/raw/events/", key="id", indexes=("customer_id",))
    assert isinstance(t, lethe.Table)
    originals = sorted(f.path for f in t.manifest.files)
    t.erase([("customer_id", "=", CUSTOMER)], request_id="r13")
    # an operator deletes one original by hand: a delete marker, its bytes still in a version
    s3.delete_object(Bucket=bucket, Key=originals[0].removeprefix(f"s3://{bucket}/"))
    r = lethe.Table.open(uri).erasure_status("r13")
    first = next(e for e in r.evidence if e.path == originals[0])
    assert not first.present and first.versions == 2 and not first.gone
    assert f"{originals[0]}: deleted, but 2 old version(s) REMAIN" in r.describe()
    assert version_holders(s3, bucket)
    ids = [42, 1042, 2042]  # customer 42's ids (one per day)
    audited = lethe.Table.open(uri).erasure_status("r13", audit_values=ids).audit
    assert audited is not None
    assert any(p.startswith(f"{originals[0]}?versionId=") for p in audited.found_in)

    rep = collect(t, now=later(hours=2))
    (st,) = rep.erasures
    assert st.complete, st.blocking
    assert version_holders(s3, bucket) == []
    r = lethe.Table.open(uri).erasure_status("r13")
    assert r.state == "complete"
    for e in (e for e in r.evidence if e.path in originals):
        assert e.gone and e.versions == 0
    audited = lethe.Table.open(uri).erasure_status("r13", audit_values=ids).audit
    assert audited is not None and audited.clean and audited.objects_scanned > 0
    assert lethe.Table.open(uri).scan().num_rows == 180 - 3


def test_seam13_originals_in_a_versioned_bucket_of_their_own_are_purged(
    s3: Any, bucket: str
) -> None:
    """issue 35 item 13: the table's bucket keeps no versions, the adopted originals' bucket
    does: GC purges every version of the originals there before it says ``complete``."""
    raw = versioned(s3)
    for i, d in enumerate(DAYS):
        put_parquet(s3, raw, f"raw/events/dt={d}/part-0.parquet", secret_events(i))
    t = lethe.Table.adopt(f"s3://{bucket}/tables/ev", f"s3://{raw}/raw/events/", key="id")
    assert isinstance(t, lethe.Table)
    t.erase([("customer_id", "=", CUSTOMER)], request_id="r13b")
    rep = collect(t, now=later(hours=2))
    assert not rep.versioned and rep.complete_erasures, rep.erasures
    assert version_holders(s3, raw) == []
    r = lethe.Table.open(t.uri).erasure_status("r13b")
    assert r.state == "complete" and all(e.gone for e in r.evidence)


def test_seam03_retention_receipt_says_dropped_originals_present(s3: Any, bucket: str) -> None:
    """issue 35 item 3: a row-retention sweep that drops two adopted originals whole: its
    receipt says they are PRESENT (they are, until GC), not ``gone``."""
    t, originals = adopted(s3, bucket)
    t.set_retention("event_time", "1h")
    # day 0 and day 1 (ids 0.., 1000..: event_time 1_700_000_000 s + id) are past the cutoff
    t.sweep_retention(now=datetime.fromtimestamp(1_700_000_000 + 1500 + 3600, UTC))
    (r,) = lethe.Table.open(t.uri).retention_receipts()
    dropped = {e.path: e for e in r.evidence if e.path.startswith("s3://")}
    assert sorted(dropped) == originals[:2]
    assert all(e.present and not e.gone for e in dropped.values())
    assert all(f"{p}: PRESENT" in r.describe() for p in originals[:2])
    assert raw_keys(s3, bucket) == originals
