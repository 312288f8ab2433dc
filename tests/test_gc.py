"""Garbage collection against moto's server: mark, sweep, expire, abort, purge, report."""

from __future__ import annotations

import argparse
import re
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from conftest import EVENTS, events
from faults import on_request

import lethe
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.changes import ReplaceFiles
from lethe.catalog.commit import Direct
from lethe.catalog.manifest import Operation, manifest_key, request_hash
from lethe.erasure.deletes import DeleteRequest
from lethe.gc import Retention, Tuning, collect, parse_duration
from lethe.storage.layout import is_manifest_key
from lethe.storage.store import S3Store, parse_s3_uri

# --- helpers -------------------------------------------------------------------------------


def listing(s3: Any, uri: str) -> set[str]:
    """Every object under the table prefix, table-relative."""
    bucket, prefix = parse_s3_uri(uri)
    out: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        out.update(o["Key"][len(prefix) + 1 :] for o in page.get("Contents", []))
    return out


def put(s3: Any, uri: str, rel: str, body: bytes = b"x" * 10) -> None:
    bucket, prefix = parse_s3_uri(uri)
    s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=body)


def referenced(uri: str, versions: range | list[int]) -> set[str]:
    t = lethe.Table.open(uri)
    refs: set[str] = set()
    for v in versions:
        m = t.catalog.read_manifest(v)
        refs |= {f.path for f in m.files}
        refs |= {f.dv.container for f in m.files if f.dv is not None and f.dv.container}
        refs |= {s.path for s in m.segments}
        refs |= {o.dv.container for o in m.dv_overlay if o.dv.container}
    return refs


# The tables' GC grace (a table property its writers obey): GC runs below look ahead with
# ``now=soon()`` past it instead of sleeping.
GRACE = "30s"
# Tests that run GC on the real clock (CLI, workflow steps) use a short grace and wait it out:
# 2 s grace, LastModified rounded up to the next second, so 3.1 s after the last write.
QUICK = "2s"


def past_quick_grace() -> None:
    time.sleep(3.1)


def soon(seconds: float = 60) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def table_with_history(uri: str, *, gc_grace: str = GRACE) -> lethe.Table:
    """v0 create, v1 append, v2 append, v3 delete (DV), v4 replace of v1's file."""
    t = lethe.Table.create(uri, EVENTS, key="id", gc_grace=gc_grace)
    t.append(events(0, 100))
    t.append(events(100, 100))
    t.delete([("id", "=", 150)])
    replace_file(t, t.manifest.files[0].path)
    return t


def replace_file(t: lethe.Table, old: str) -> str:
    """A compaction-like commit: rewrite ``old`` (no DV on it) as a new file."""
    t.refresh()
    f = t.manifest.file(old)
    assert f is not None and f.dv is None
    rows = t.scan(filters=[("id", ">=", f.columns["id"].min), ("id", "<=", f.columns["id"].max)])
    new = t.write_data_files(rows)
    op = Operation(kind="compact", files_removed=1, files_added=len(new))
    update = ReplaceFiles((old,), {old: None}, tuple(new), op, plan_version=t.version)
    out = t.catalog.commit_change(Direct(update))
    assert out.manifest is not None
    t.refresh()
    return new[0].path


def erase(t: lethe.Table, key_value: int, rid: str) -> tuple[str, str, int]:
    """Simulate an erase: a DV delete recording a pending ErasureRecord, then the splice
    commit (files replaced, the record turned ``spliced`` with ``superseded``), through
    the normal commit loop. Returns (id hash, superseded path, spliced version)."""
    res = t.delete_batch(
        [DeleteRequest([("id", "=", key_value)], request_id=rid, erase=True)], kind="erase"
    )
    assert res.rows_deleted == 1
    t.refresh()
    h = request_hash(rid)
    rec = next(e for e in t.manifest.erasures if e.id_hash == h)
    assert rec.state == "pending" and len(rec.targets) == 1
    old = rec.targets[0].path
    f = t.manifest.file(old)
    assert f is not None
    # the rows of that file minus the erased one (the test tables keep one file per range)
    lo, hi = f.columns["id"].min, f.columns["id"].max
    rows = t.scan(filters=[("id", ">=", lo), ("id", "<=", hi)])
    new = t.write_data_files(rows)
    op = Operation(kind="erase", rows_erased=1, files_removed=1, files_added=len(new))

    # a compaction of the file past the delete meets the erasure: the record turns
    # ``spliced`` and supersedes the old file (and the segment that described it)
    update = ReplaceFiles((old,), {old: f.dv}, tuple(new), op, plan_version=t.version)
    out = t.catalog.commit_change(Direct(update))
    assert out.manifest is not None
    t.refresh()
    assert t.lookup(key_value).num_rows == 0
    return h, old, out.manifest.version


def versioned_bucket(s3: Any) -> str:
    name = f"v-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    return name


def versions_of(s3: Any, bucket: str, key: str) -> list[dict[str, Any]]:
    r = s3.list_object_versions(Bucket=bucket, Prefix=key)
    return [v for v in r.get("Versions", []) + r.get("DeleteMarkers", []) if v["Key"] == key]


# --- options -------------------------------------------------------------------------------


def test_durations_and_retention_parse() -> None:
    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("0s") == timedelta(0)
    assert parse_duration(12) == timedelta(seconds=12)
    for bad in ("7 days", "-1d", "", "d"):
        with pytest.raises(errors.InvalidRequest):
            parse_duration(bad)
    r = Retention.parse("30d,100v")
    assert (r.max_age, r.versions, str(r)) == (timedelta(days=30), 100, "30d,100v")
    assert str(Retention.parse("1000v")) == "1000v"
    now = datetime.now(UTC)
    old = now - timedelta(days=40)
    assert r.keeps(0, old, now) and r.keeps(99, old, now) and not r.keeps(100, old, now)
    assert r.keeps(500, now - timedelta(days=1), now)
    for bad in ("0v", "1v,2v", "1d,2d", "forever"):
        with pytest.raises(errors.InvalidRequest):
            Retention.parse(bad)


# --- mark and sweep ------------------------------------------------------------------------


def test_orphans_old_go_young_stay_referenced_never(table_uri: str, s3: Any) -> None:
    table_with_history(table_uri, gc_grace="2s")
    retained_only = set(referenced(table_uri, [1, 2, 3])) - referenced(table_uri, [4])
    assert retained_only  # the file v4 replaced, referenced only by retained versions
    put(s3, table_uri, "data/2026/01/01/00/old-orphan.parquet")
    put(s3, table_uri, "tombstone/2026/01/01/00/old-orphan.dv")
    put(s3, table_uri, "_staging/upload-1/part.parquet")
    # LastModified has one-second resolution (truncated) and GC rounds it up: 3.1 s apart, a
    # 2 s grace splits them
    time.sleep(3.1)
    put(s3, table_uri, "data/2026/01/01/00/young-orphan.parquet")
    young_at = datetime.now(UTC)
    before = listing(s3, table_uri)

    rep = collect(table_uri, retention="30d", grace="2s", now=young_at)
    after = listing(s3, table_uri)
    gone = before - after
    assert gone == {
        "data/2026/01/01/00/old-orphan.parquet",
        "tombstone/2026/01/01/00/old-orphan.dv",
        "_staging/upload-1/part.parquet",
    }
    assert "data/2026/01/01/00/young-orphan.parquet" in after
    assert retained_only <= after
    assert rep.deleted["data"].objects == 1 and rep.deleted["tombstone"].objects == 1
    assert rep.deleted["staging"].objects == 1 and rep.young["data"].objects == 1
    assert rep.kept_versions == 5 and rep.oldest_kept_version == 0
    assert verify(lethe.Table.open(table_uri)).ok
    for v in range(5):  # every retained version still reads, all of its live rows
        old = lethe.Table.open(table_uri, version=v)
        assert old.scan(["id"]).num_rows == old.manifest.total_rows
    assert f"_gc/{rep.run_id}/report.json" in after


def test_retention_by_count_expires_versions_and_their_files(table_uri: str, s3: Any) -> None:
    t = table_with_history(table_uri)
    head = t.version
    replaced = referenced(table_uri, [1]) - referenced(table_uri, [head])
    rep = collect(table_uri, retention="2v", now=soon())
    assert (rep.oldest_kept_version, rep.kept_versions) == (head - 1, 2)
    still = replaced & referenced(table_uri, [head - 1])
    assert still and still <= listing(s3, table_uri)  # v(head-1) still references them
    assert not (replaced - still) & listing(s3, table_uri)
    assert verify(lethe.Table.open(table_uri, version=head - 1)).ok
    rep = collect(table_uri, retention="1v", now=soon())
    after = listing(s3, table_uri)
    assert not replaced & after
    assert {p for p in after if is_manifest_key(p)} == {manifest_key(head)}
    assert {p for p in after if p.startswith("manifest/segments/")} == {
        s.path for s in lethe.Table.open(table_uri).manifest.segments
    }
    assert rep.deleted["manifest"].objects == 1
    assert rep.deleted["data"].objects == len({p for p in replaced if p.startswith("data/")})
    assert verify(lethe.Table.open(table_uri)).ok


def test_expired_version_is_snapshot_not_found_naming_oldest(table_uri: str) -> None:
    t = table_with_history(table_uri)
    collect(table_uri, retention="2v", now=soon())
    oldest = t.version - 1
    with pytest.raises(errors.SnapshotNotFound) as e:
        lethe.Table.open(table_uri, version=1)
    assert "expired" in str(e.value) and f"oldest available version is {oldest}" in str(e.value)
    # history stops at the oldest retained version instead of failing
    assert [h.version for h in lethe.Table.open(table_uri).history()] == [t.version, oldest]


def test_age_retention_keeps_recent_versions(table_uri: str) -> None:
    t = table_with_history(table_uri)
    rep = collect(table_uri, retention="1h", grace="7d", now=soon(1800))
    assert (rep.kept_versions, rep.oldest_kept_version) == (t.version + 1, 0)
    rep = collect(table_uri, retention="1h", grace="7d", now=soon(7200))
    assert (rep.kept_versions, rep.oldest_kept_version) == (1, t.version)
    with pytest.raises(errors.SnapshotNotFound):
        lethe.Table.open(table_uri, version=t.version - 1)


def _sweep_batch(params: dict[str, Any]) -> list[str]:
    """The keys of a DeleteObjects request (``params``: the serialized request) that is a
    sweep batch ([] for the manifests that the expire step deletes)."""
    body = params["body"]
    keys = re.findall(r"<Key>([^<]*)</Key>", body.decode() if isinstance(body, bytes) else body)
    roots = [k for k in keys if "/manifest/" in k and is_manifest_key(k[k.index("manifest/") :])]
    return [] if len(roots) == len(keys) else keys


def test_commit_landing_after_listing_keeps_its_files(table_uri: str, s3: Any) -> None:
    """A commit landing between GC's listing and its marking (injected on GC's own client:
    at its first read after it listed) keeps its files."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 50))
    files = t.write_data_files(events(50, 50))  # uploaded, not committed: an orphan now
    path = files[0].path
    seen: list[str] = []

    def commit_after_listing(op: str, params: dict[str, Any]) -> None:
        if op == "ListObjectsV2":
            seen.append(op)
        elif seen and "committed" not in seen:
            seen.append("committed")
            t.commit_files(files)  # t has a client of its own: this hook does not see it

    with on_request(s3, ("ListObjectsV2", "GetObject", "HeadObject"), commit_after_listing):
        rep = collect(table_uri, now=soon(), s3=s3)
    assert "committed" in seen
    assert path in listing(s3, table_uri)
    assert rep.objects_deleted == 0
    assert lethe.Table.open(table_uri).scan().num_rows == 100
    assert verify(lethe.Table.open(table_uri)).ok


def test_commit_landing_between_mark_and_delete_is_spared(table_uri: str, s3: Any) -> None:
    """A commit landing after the plan marked, before a sweep batch re-checks the head
    (injected when the expire step lists the manifests: a run lists ``manifest/`` when it
    plans, when it marks, when it expires, then in each sweep batch's re-check)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 50))
    files = t.write_data_files(events(50, 50))
    put(s3, table_uri, "data/2026/01/01/00/orphan.parquet")
    seen: list[list[str]] = []
    manifest_listings: list[str] = []

    def hook(op: str, params: dict[str, Any]) -> None:
        prefix = str(params.get("query_string", {}).get("prefix", ""))
        if op == "ListObjectsV2" and prefix.endswith("/manifest/"):
            manifest_listings.append(prefix)
            if len(manifest_listings) == 2:  # the expire step: after the plan, before sweeps
                t.commit_files(files)
        elif op == "DeleteObjects" and (keys := _sweep_batch(params)):
            seen.append(keys)

    with on_request(s3, ("ListObjectsV2", "DeleteObjects"), hook):
        rep = collect(table_uri, now=soon(), s3=s3)
    assert len(manifest_listings) >= 4  # the sweep's re-check came after the commit
    after = listing(s3, table_uri)
    assert files[0].path in after  # re-checked against the new head right before deleting
    assert "data/2026/01/01/00/orphan.parquet" not in after
    assert t.key_of(files[0].path) not in seen[0] and rep.deleted["data"].objects == 1
    assert lethe.Table.open(table_uri).scan().num_rows == 100


def test_default_grace_protects_a_slow_writer(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    files = t.write_data_files(events(0, 50))
    rep = collect(table_uri)  # grace 7 days: the upload may still be committed
    assert rep.objects_deleted == 0 and rep.young["data"].objects == 1
    t.commit_files(files)
    assert verify(lethe.Table.open(table_uri)).ok


def test_landed_commit_whose_head_update_is_pending_keeps_its_files(
    table_uri: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 10))
    files = t.write_data_files(events(10, 10))
    from lethe.catalog.manifest import encode_manifest
    from lethe.catalog.transforms import apply_append

    nxt = apply_append(t.manifest, files, Operation(kind="append"))
    t.catalog.write_segments(nxt)
    # a committer died between its manifest PUT (the commit point) and its head PUT
    t.store.put(
        t.key_of(manifest_key(nxt.version)), encode_manifest(nxt.manifest), if_none_match=True
    )
    from lethe.gc import plan_step

    st = plan_step(table_uri, retention="1v")
    assert st.head_version == 1 and not st.batches  # marked: nothing to sweep
    collect(table_uri, retention="1v", now=soon())
    assert files[0].path in listing(s3, table_uri)
    t.catalog.roll_forward()
    assert lethe.Table.open(table_uri).scan().num_rows == 20


def test_dry_run_deletes_nothing_and_lists_what_it_would(table_uri: str, s3: Any) -> None:
    table_with_history(table_uri)
    put(s3, table_uri, "data/2026/01/01/00/orphan.parquet")
    before = listing(s3, table_uri)
    rep = collect(table_uri, retention="1v", dry_run=True, now=soon())
    assert listing(s3, table_uri) == before  # nothing deleted, nothing written
    assert rep.dry_run and "data/2026/01/01/00/orphan.parquet" in rep.keys["data"]
    assert rep.deleted["manifest"].objects == 4 and len(rep.keys["manifest"]) == 4
    real = collect(table_uri, retention="1v", now=soon())
    assert {c: s.objects for c, s in real.deleted.items()} == {
        c: s.objects for c, s in rep.deleted.items()
    }
    assert set(before) - listing(s3, table_uri) == {k for ks in rep.keys.values() for k in ks}


def test_interrupted_sweep_rerun_reaches_the_same_end_state(table_uri: str, s3: Any) -> None:
    t = table_with_history(table_uri)
    for i in range(35):
        put(s3, table_uri, f"data/2026/01/01/00/orphan-{i:02d}.parquet")
    batches: list[list[str]] = []

    def crash_on_second(op: str, params: dict[str, Any]) -> None:
        if keys := _sweep_batch(params):
            batches.append(keys)
            if len(batches) > 1:
                raise RuntimeError("Lambda timed out")

    with (
        on_request(s3, ("DeleteObjects",), crash_on_second),
        pytest.raises(errors.StoreError, match="Lambda timed out"),
    ):
        collect(table_uri, retention="2v", now=soon(), tuning=Tuning(batch_keys=10), s3=s3)
    middle = listing(s3, table_uri)
    assert sum(p.startswith("data/2026/01/01/00/orphan-") for p in middle) == 25  # one batch done
    rep = collect(table_uri, retention="2v", now=soon(), tuning=Tuning(batch_keys=10))
    end = listing(s3, table_uri)
    kept = referenced(table_uri, [t.version - 1, t.version])
    assert {p for p in end if p.startswith(("data/", "tombstone/", "manifest/segments/"))} == kept
    assert {p for p in end if is_manifest_key(p)} == {
        manifest_key(t.version - 1),
        manifest_key(t.version),
    }
    assert rep.deleted["data"].objects == 25  # the rest (v(head-1) still needs its files)
    again = collect(table_uri, retention="2v", now=soon(), tuning=Tuning(batch_keys=10))
    assert again.objects_deleted == 0
    assert {p for p in listing(s3, table_uri) if not p.startswith("_gc/")} == {
        p for p in end if not p.startswith("_gc/")
    }
    assert verify(lethe.Table.open(table_uri)).ok


def test_stale_multipart_uploads_are_aborted_active_ones_kept(table_uri: str, s3: Any) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    bucket, prefix = parse_s3_uri(table_uri)
    # moto reports every upload as initiated in 2010; an upload receiving parts is active
    stale = s3.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/data/stale.parquet")
    active = s3.create_multipart_upload(Bucket=bucket, Key=f"{prefix}/data/active.parquet")
    s3.upload_part(
        Bucket=bucket,
        Key=f"{prefix}/data/active.parquet",
        UploadId=active["UploadId"],
        PartNumber=1,
        Body=b"p" * 100,
    )
    other = s3.create_multipart_upload(Bucket=bucket, Key="elsewhere/x")
    dry = collect(table_uri, grace="1h", dry_run=True)
    assert dry.deleted["upload"].objects == 1
    rep = collect(table_uri, grace="1h")
    assert rep.keys["upload"] == ("data/stale.parquet",)
    left = {u["UploadId"] for u in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}
    assert stale["UploadId"] not in left
    assert {active["UploadId"], other["UploadId"]} <= left
    s3.abort_multipart_upload(Bucket=bucket, Key="elsewhere/x", UploadId=other["UploadId"])


def test_workspace_of_finished_runs_is_cleaned(table_uri: str, s3: Any) -> None:
    table_with_history(table_uri)
    from lethe.gc import plan_step

    st = plan_step(table_uri, retention="30d")
    run_files = {p for p in listing(s3, table_uri) if p.startswith(f"_gc/{st.run_id}/")}
    assert f"_gc/{st.run_id}/plan.json" in run_files
    # unfinished and recent: kept; finished (report written): cleaned, report kept
    rep = collect(table_uri, now=soon())
    assert run_files <= listing(s3, table_uri) and rep.young["workspace"].objects == len(run_files)
    rep = collect(table_uri, now=soon(13 * 3600))
    assert run_files.isdisjoint(listing(s3, table_uri))
    assert rep.deleted["workspace"].objects == len(run_files)


# --- erasure -------------------------------------------------------------------------------


def test_erase_then_gc_removes_the_old_object_and_reports_completion(
    table_uri: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 100))
    t.append(events(100, 100))
    h, old, spliced = erase(t, 42, "erase-42")

    rep = collect(table_uri, retention="30d", grace="7d", erasure_grace="1h")
    (st,) = rep.erasures
    assert not st.complete and st.spliced_version == spliced
    assert any("manifest(s) from before the splice" in b for b in st.blocking)
    assert old in listing(s3, table_uri)  # retained versions still reference it

    rep = collect(table_uri, retention="1v", grace="7d", erasure_grace="0s")
    (st,) = rep.erasures
    assert st.complete and st.newly_complete and st.completed_at is not None
    assert rep.complete_erasures == (h,)
    after = listing(s3, table_uri)
    assert old not in after
    assert f"_gc/erasures/{h}.json" in after
    assert not [p for p in after if is_manifest_key(p) and p < manifest_key(spliced)]
    assert verify(lethe.Table.open(table_uri)).ok
    assert lethe.Table.open(table_uri).scan().num_rows == 199

    again = collect(table_uri, retention="1v", grace="7d", erasure_grace="0s")
    (st2,) = again.erasures
    assert st2.complete and not st2.newly_complete and st2.completed_at is not None
    assert abs((st2.completed_at - st.completed_at).total_seconds()) < 2.5


def test_erasure_grace_counts_from_the_splice(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 100))
    h, old, _ = erase(t, 7, "erase-7")
    rep = collect(table_uri, retention="1v", erasure_grace="1h", now=soon())
    assert old in listing(s3, table_uri) and not rep.erasures[0].complete
    assert rep.young["data"].objects == 1  # held back by the plan, not only by the sweep
    assert any("superseded" in b for b in rep.erasures[0].blocking)
    rep = collect(table_uri, retention="1v", grace="7d", erasure_grace="1h", now=soon(3700))
    assert old not in listing(s3, table_uri) and rep.complete_erasures == (h,)


def test_pending_erasure_is_not_complete(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 100))
    t.delete_batch([DeleteRequest([("id", "=", 3)], request_id="e-3", erase=True)], kind="erase")
    rep = collect(table_uri, retention="1v", now=soon())
    (st,) = rep.erasures
    assert st.state == "pending" and not st.complete and "not spliced" in st.blocking[0]


def test_erase_in_versioned_bucket_purges_old_versions(s3: Any) -> None:
    bucket = versioned_bucket(s3)
    uri = f"s3://{bucket}/tables/people"
    t = lethe.Table.create(uri, EVENTS, key="id", gc_grace=GRACE)
    t.append(events(0, 100))
    t.append(events(100, 100))
    h, old, spliced = erase(t, 150, "erase-150")
    live_before = {f.path for f in t.manifest.files}

    dry = collect(uri, retention="1v", grace="7d", erasure_grace="0s", dry_run=True, now=soon())
    assert dry.versioned and dry.complete_erasures == (h,)  # would be complete
    assert versions_of(s3, bucket, f"tables/people/{old}")  # but nothing happened

    rep = collect(uri, retention="1v", grace="7d", erasure_grace="0s", now=soon())
    assert rep.complete_erasures == (h,)
    assert versions_of(s3, bucket, f"tables/people/{old}") == []  # no version, no marker
    for v in range(spliced):
        assert versions_of(s3, bucket, f"tables/people/{manifest_key(v)}") == []
    assert rep.deleted["version"].objects >= 1 + spliced
    for p in live_before:  # live objects untouched
        assert len(versions_of(s3, bucket, f"tables/people/{p}")) == 1
    assert verify(lethe.Table.open(uri)).ok
    assert lethe.Table.open(uri).lookup(150).num_rows == 0


def test_versioned_bucket_without_erasures_leaves_versions_to_lifecycle(s3: Any) -> None:
    bucket = versioned_bucket(s3)
    uri = f"s3://{bucket}/t"
    lethe.Table.create(uri, EVENTS, key="id", gc_grace=GRACE).append(events(0, 10))
    put(s3, uri, "data/orphan.parquet")
    rep = collect(uri, now=soon())
    assert rep.deleted["data"].objects == 1 and "version" not in rep.deleted
    kinds = sorted(
        "VersionId" in v and "ETag" in v for v in versions_of(s3, bucket, "t/data/orphan.parquet")
    )
    assert kinds == [False, True]  # the delete marker and the noncurrent version


# --- store additions and CLI ---------------------------------------------------------------


def test_store_version_primitives(s3: Any) -> None:
    bucket = versioned_bucket(s3)
    store = S3Store(bucket)
    assert store.versioning() == "Enabled"
    for i in range(3):
        store.put("p/k", f"v{i}".encode())
    store.delete_many(["p/k"])
    vs = list(store.list_object_versions("p/"))
    assert sum(v.is_delete_marker for v in vs) == 1 and len(vs) == 4
    assert next(v for v in vs if v.is_latest).is_delete_marker
    assert store.delete_versions((v.key, v.version_id) for v in vs) == ()
    assert list(store.list_object_versions("p/")) == []
    plain = S3Store(f"n-{uuid.uuid4().hex[:10]}")
    s3.create_bucket(Bucket=plain.bucket)
    assert plain.versioning() == ""
    up = plain.create_multipart("m")
    plain.upload_part("m", up, 1, b"abc")
    ((n, size, when),) = plain.list_parts("m", up)
    assert (n, size) == (1, 3) and when is not None
    plain.abort_multipart("m", up)


def test_cli_command(table_uri: str, s3: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from lethe.cli.gc import add_cli, cli_command

    table_with_history(table_uri, gc_grace=QUICK)
    put(s3, table_uri, "data/2026/01/01/00/orphan.parquet")
    past_quick_grace()
    p = argparse.ArgumentParser(prog="lethe")
    add_cli(p.add_subparsers(dest="cmd"))
    a = p.parse_args(["gc", table_uri, "--dry-run", "--retention", "1000v"])
    assert a.fn is cli_command
    assert cli_command(a) == 0
    out = capsys.readouterr().out
    assert "would delete" in out and "orphan.parquet" in out
    assert "data/2026/01/01/00/orphan.parquet" in listing(s3, table_uri)
    a = p.parse_args(["gc", table_uri, "--json"])
    assert cli_command(a) == 0
    assert '"kind": "lethe.gc.report"' in capsys.readouterr().out
    assert "data/2026/01/01/00/orphan.parquet" not in listing(s3, table_uri)
    with pytest.raises(errors.InvalidRequest):
        cli_command(p.parse_args(["gc", table_uri, "--retention", "soon"]))


def test_lethe_command_line_runs_gc(
    table_uri: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from lethe.cli import main

    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=QUICK).append(events(0, 10))
    put(s3, table_uri, "data/orphan.parquet")
    past_quick_grace()
    assert main(["gc", table_uri, "--dry-run"]) == 0
    assert "data/orphan.parquet" in capsys.readouterr().out
    assert "data/orphan.parquet" in listing(s3, table_uri)
    assert main(["gc", table_uri]) == 0
    assert "data/orphan.parquet" not in listing(s3, table_uri)
    assert main(["gc", table_uri, "--grace", "a week"]) == 2  # a typed error, exit status 2
    assert "InvalidRequest" in capsys.readouterr().err
