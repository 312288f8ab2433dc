"""The Iceberg view (issue 15), read by a real Iceberg reader: PyIceberg's StaticTable on
moto's S3. Lethe's scan is the model: the view must scan to exactly its rows, at every
published version, with no data file copied."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.table import StaticTable

from lethe import errors
from lethe.iceberg import avro, publish
from lethe.iceberg.types import iceberg_schema
from lethe.table import Table
from tests.conftest import EVENTS, events
from tests.engines import iceberg_view


def view(aws: Any, uri: str) -> StaticTable:
    return iceberg_view(aws, uri)


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def rows_of(aws: Any, uri: str, **kw: Any) -> pa.Table:
    """The view's rows as Lethe's schema (PyIceberg returns large types and drops
    nothing but may reorder): sorted by id."""
    got = view(aws, uri).scan(**kw).to_arrow()
    return _sorted(got.cast(pa.schema([EVENTS.field(n) for n in got.column_names])))


def lethe_rows(t: Table, filters: Any = None) -> pa.Table:
    return _sorted(t.scan(filters=filters))


def _assert_same(aws: Any, uri: str, t: Table) -> None:
    got = rows_of(aws, uri)
    want = lethe_rows(t)
    assert got.num_rows == want.num_rows
    assert got.equals(want.select(got.column_names)), "the view's rows differ from Lethe's"


def test_publish_append_delete_time_travel(aws: Any, table_uri: str) -> None:
    t = Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=64 << 10, row_group_bytes=16 << 10
    )
    t.append(events(0, 5_000))
    v1 = t.version
    u1 = t.publish_iceberg()
    assert u1 == f"{table_uri}/metadata/v{v1}.metadata.json"
    _assert_same(aws, u1, t)
    t.delete([("id", "in", [3, 4, 4_000])])
    t.append(events(5_000, 1_000))
    u2 = t.publish_iceberg()
    _assert_same(aws, u2, t)
    # time travel inside the newest metadata reaches the first published snapshot
    st = view(aws, u2)
    assert [s.snapshot_id for s in st.metadata.snapshots] == [v1, t.version]
    old = _sorted(st.scan(snapshot_id=v1).to_arrow().cast(EVENTS))
    assert old.equals(lethe_rows(Table.open(table_uri, version=v1)))
    # the data files are Lethe's own, not copies
    paths = {task.file.file_path for task in st.scan().plan_files()}
    assert paths == {f"{table_uri}/{f.path}" for f in t.manifest.files}


def test_publish_is_idempotent(aws: Any, table_uri: str) -> None:
    t = Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    first = publish(t.catalog, t.manifest)
    assert first.new
    again = publish(t.catalog, t.manifest)
    assert again.uri == first.uri
    assert again.written == () and again.io.puts == 0


def test_republish_in_another_format_is_refused_not_answered_with_the_old_one(
    table_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36 item 2: ``--format-version 2`` after a format 3 publish of the same version
    returned the v3 metadata without a word."""
    from lethe.cli import main

    t = Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 10))
    assert main(["iceberg", "publish", table_uri]) == 0
    capsys.readouterr()
    assert main(["iceberg", "publish", table_uri, "--format-version", "2"]) == 2
    err = capsys.readouterr().err
    assert "already published as Iceberg format 3" in err and "format_version=3" in err
    assert main(["iceberg", "publish", table_uri, "--format-version", "3"]) == 0
    assert "already published" in capsys.readouterr().out


def test_unsupported_types_are_refused() -> None:
    for bad in (
        pa.uint32(),
        pa.float16(),
        pa.timestamp("ms"),
        pa.dictionary(pa.int8(), pa.string()),
    ):
        with pytest.raises(errors.IcebergUnsupported, match="column 'x'"):
            iceberg_schema(pa.schema([("id", pa.int64()), ("x", bad)]), format_version=3)
    with pytest.raises(errors.IcebergUnsupported, match="timestamp"):
        iceberg_schema(pa.schema([("x", pa.timestamp("ns"))]), format_version=2)


def test_filters_push_down_to_files(aws: Any, table_uri: str) -> None:
    t = Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=32 << 10, row_group_bytes=8 << 10
    )
    for i in range(4):
        t.append(events(i * 1_000, 1_000))
    uri = t.publish_iceberg()
    st = view(aws, uri)
    every = list(st.scan().plan_files())
    some = list(st.scan(row_filter=EqualTo("id", 2_500)).plan_files())
    assert len(every) >= 4 and len(some) == 1
    got = rows_of(aws, uri, row_filter=GreaterThanOrEqual("id", 3_990))
    assert got.equals(lethe_rows(t, [("id", ">=", 3_990)]))
    assert pc.min(got["id"]).as_py() == 3_990


def test_metadata_shape(aws: Any, table_uri: str, s3: Any) -> None:
    t = Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 100))
    t.delete([("id", "=", 5)])
    uri = t.publish_iceberg()
    bucket, key = uri[5:].split("/", 1)
    meta = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    assert meta["format-version"] == 3
    assert meta["next-row-id"] == 100
    snap = meta["snapshots"][-1]
    assert snap["first-row-id"] == 0 and snap["added-rows"] == 100
    mapping = json.loads(meta["properties"]["schema.name-mapping.default"])
    assert [m["names"][0] for m in mapping] == EVENTS.names
    ml = s3.get_object(Bucket=bucket, Key=snap["manifest-list"].split("/", 3)[3])["Body"].read()
    hdr = avro.header(ml)
    assert hdr["format-version"] == "3"
    names = [f["name"] for f in hdr["avro.schema"]["fields"]]
    assert names[-1] == "first_row_id"
    manifests = avro.decode_manifest_list(ml)
    assert [m.content for m in manifests] == [0, 1]
    dv = avro.decode_manifest(
        s3.get_object(Bucket=bucket, Key=manifests[1].manifest_path.split("/", 3)[3])["Body"].read()
    )
    (entry,) = dv
    f = t.manifest.files[0]
    assert entry.data_file.file_format == "PUFFIN"
    assert entry.data_file.file_path == f"{table_uri}/{f.dv.container}"
    assert entry.data_file.record_count == 1


# --- a table's whole life, published after every commit --------------------------------------
def _check_every_version(
    aws: Any, t: Table, published: dict[int, str], spliced: int = 0, erased: int | None = None
) -> None:
    """Every published metadata file scans to Lethe's rows at that version, and the newest
    one time-travels to every snapshot it retains. A version from before the splice commit
    ``spliced`` reads through it in Lethe (issue 39: without the ``erased`` id), while its
    view snapshot still names the originals until GC: Lethe's rows are a subset of them."""
    for v, uri in published.items():
        if v < spliced:
            ids = set(Table.open(t.uri, version=v).scan(columns=["id"]).column("id").to_pylist())
            assert erased not in ids and ids <= set(rows_of(aws, uri).column("id").to_pylist())
            continue
        _assert_same(aws, uri, Table.open(t.uri, version=v))
    newest = view(aws, published[max(published)])
    for s in newest.metadata.snapshots:
        if s.snapshot_id < spliced:
            continue
        got = newest.scan(snapshot_id=s.snapshot_id).to_arrow()
        got = _sorted(got.cast(pa.schema([EVENTS.field(n) for n in got.column_names])))
        assert got.equals(lethe_rows(Table.open(t.uri, version=s.snapshot_id)))


@pytest.mark.slow
@pytest.mark.parametrize("fv", [3, 2])
def test_view_follows_appends_deletes_erasures_compactions_and_registrations(
    aws: Any, s3: Any, bucket: str, table_uri: str, fv: int
) -> None:
    import io

    import pyarrow.parquet as pq

    from lethe.ingest.register import register_parquet
    from lethe.maintenance.compaction import CompactionOptions

    t = Table.create(
        table_uri,
        EVENTS,
        key="id",
        target_file_bytes=200_000,
        row_group_bytes=40_000,
        segment_target_files=2,
        iceberg_view=True,
        iceberg_format_version=fv,  # type: ignore[arg-type]
    )
    for start in (0, 10_000, 20_000):
        t.append(events(start, 10_000))
    t.delete([("id", "in", [1, 2, 3, 10_001])])
    t.delete([("customer_id", "=", 7)])
    victim = t.manifest.files[1]
    lo = victim.columns["id"].min
    assert isinstance(lo, int)
    t.delete([("id", ">=", lo), ("id", "<", lo + int(victim.rows * 0.6))])
    r = t.compact(CompactionOptions(min_deleted_fraction=0.2, coalesce_dv_containers=None))
    assert r.groups_committed == 1
    t.erase([("id", "=", 25_000)])
    spliced = t.version
    buf = io.BytesIO()
    pq.write_table(events(40_000, 3_000), buf, row_group_size=1_000)
    etag = s3.put_object(Bucket=bucket, Key="incoming/x.parquet", Body=buf.getvalue())["ETag"]
    register_parquet(t, "incoming/x.parquet", etag=etag.strip('"'), size=None)
    t.refresh()
    published = {v: f"{table_uri}/metadata/v{v}.metadata.json" for v in range(1, t.version + 1)}
    for uri in published.values():  # every commit published itself
        key = uri[5:].split("/", 1)[1]
        s3.head_object(Bucket=bucket, Key=key)
    meta = view(aws, published[t.version]).metadata
    assert meta.format_version == fv
    assert [s.snapshot_id for s in meta.snapshots] == list(range(1, t.version + 1))
    assert [s.parent_snapshot_id for s in meta.snapshots] == [None, *range(1, t.version)]
    _check_every_version(aws, t, published, spliced, 25_000)
    assert rows_of(aws, published[t.version]).num_rows == t.scan().num_rows


def test_a_failed_publish_never_fails_the_commit(
    table_uri: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    def broken(*a: Any, **k: Any) -> Any:
        raise errors.StoreError("simulated outage")

    t = Table.create(table_uri, EVENTS, key="id", iceberg_view=True)
    # the module's publish, which the after-commit hook (iceberg.publish_view) calls
    monkeypatch.setattr(sys.modules["lethe.iceberg.publish"], "publish", broken)
    r = t.append(events(0, 10))
    assert r.version == 1 and t.version == 1
    assert "simulated outage" in caplog.text
    monkeypatch.undo()
    t.append(events(10, 10))  # the next commit catches up: its snapshot has every row
    assert t.store.exists(t.key_of("metadata/v2.metadata.json"))
    assert not t.store.exists(t.key_of("metadata/v1.metadata.json"))


def test_publish_after_a_one_key_delete_writes_only_what_changed(aws: Any, table_uri: str) -> None:
    t = Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=16 << 10, segment_target_files=1
    )
    for i in range(6):
        t.append(events(i * 2_000, 2_000))
    first = publish(t.catalog, t.manifest)
    assert len(t.manifest.segments) > 2
    t.delete([("id", "=", 4_321)])
    r = publish(t.catalog, t.manifest)
    kinds = sorted(k.split("/")[-1].split("-")[0] for k in r.written)
    # one delete manifest (the touched segment's), the manifest list, the metadata file
    assert kinds == ["lethe", "snap", f"v{t.version}.metadata.json"], r.written
    assert r.reused == len(t.manifest.segments)
    assert r.io.puts == 4  # + the version hint
    assert r.io.bytes_uploaded < first.io.bytes_uploaded
    _assert_same(aws, r.uri, t)


def test_gc_references_keep_retained_snapshots_and_release_the_rest(
    aws: Any, table_uri: str
) -> None:
    from lethe.iceberg import references

    t = Table.create(table_uri, EVENTS, key="id", iceberg_view=True, segment_target_files=1)
    t.append(events(0, 100))
    t.append(events(100, 100))
    t.delete([("id", "=", 5)])
    v = t.version
    refs = references(t.catalog, {v})
    assert f"metadata/v{v}.metadata.json" in refs.keep
    assert "metadata/v1.metadata.json" in refs.garbage
    assert "metadata/version-hint.text" in refs.keep
    # deleting the garbage leaves a view that still scans
    t.store.delete_many([t.key_of(k) for k in refs.garbage])
    _assert_same(aws, f"{table_uri}/metadata/v{v}.metadata.json", t)
    again = references(t.catalog, {v})
    assert again.garbage == ()


def test_erased_values_leave_the_view_with_their_segment(aws: Any, table_uri: str) -> None:
    """After an erase, the data manifests that bounded the erased key are derived from the
    superseded segment objects: once GC drops them (as it drops those segments), no object
    under metadata/ names the erased key."""
    import struct

    from lethe.iceberg import erasure_objects, references

    t = Table.create(
        table_uri, EVENTS, key="id", iceberg_view=True, target_file_bytes=64 << 10,
        row_group_bytes=16 << 10,
    )  # fmt: skip
    t.append(events(0, 2_000))
    t.append(events(2_000, 2_000))
    # the erased key is a file's lower bound, so the data manifest names it
    victim = min(f.columns["id"].min for f in t.manifest.files)  # type: ignore[type-var]
    t.erase([("id", "=", victim)])
    t.refresh()
    (rec,) = t.manifest.erasures
    assert rec.state == "spliced"
    refs = references(t.catalog, {t.version})
    held = erasure_objects(refs, t.manifest.superseded_of(rec))
    assert held and set(held) <= set(refs.garbage)
    t.store.delete_many([t.key_of(k) for k in refs.garbage])
    needle = struct.pack("<q", victim)
    for o in t.store.list(t.key_of("metadata/")):
        if o.key.endswith(".avro") and "/lethe-d-" in o.key:
            for e in avro.decode_manifest(t.store.get(o.key).body):
                assert needle not in (e.data_file.lower_bounds or {}).values()
    _assert_same(aws, f"{table_uri}/metadata/v{t.version}.metadata.json", t)


def test_gc_sweeps_the_view_like_lethe_metadata_and_erasure_waits_for_it(
    aws: Any, table_uri: str, s3: Any
) -> None:
    """GC itself (not the helper): the retained snapshot's view objects stay and still scan;
    the data manifests of superseded segments go at once with their segments (so the
    erasure completes without waiting for the grace); other unreferenced view objects wait
    for the grace like any other upload."""
    import struct
    from datetime import UTC, datetime, timedelta

    from lethe.gc import collect

    t = Table.create(
        table_uri, EVENTS, key="id", iceberg_view=True, target_file_bytes=64 << 10,
        row_group_bytes=16 << 10, gc_grace="1h",
    )  # fmt: skip
    t.append(events(0, 2_000))
    t.append(events(2_000, 2_000))
    victim = min(f.columns["id"].min for f in t.manifest.files)  # type: ignore[type-var]
    r = t.erase([("id", "=", victim)], request_id="gdpr-view")
    assert r.complete
    t.refresh()

    def view_keys() -> set[str]:
        return {o.key[len(t.key_of("")) :] for o in t.store.list(t.key_of("metadata/"))}

    before = view_keys()
    rep = collect(table_uri, retention="1v", grace="1h", erasure_grace="0s")
    (st,) = rep.erasures
    assert st.complete, st.blocking
    after = view_keys()
    assert after < before and rep.deleted["iceberg"].objects >= 1
    assert f"metadata/v{t.version}.metadata.json" in after
    _assert_same(aws, f"{table_uri}/metadata/v{t.version}.metadata.json", t)
    needle = struct.pack("<q", victim)
    for k in after:
        if k.endswith(".avro") and "/lethe-d-" in f"/{k}":
            for e in avro.decode_manifest(t.store.get(t.key_of(k)).body):
                assert needle not in (e.data_file.lower_bounds or {}).values()
    # older metadata files and manifest lists go once past the grace
    later = datetime.now(UTC) + timedelta(hours=2)
    collect(table_uri, retention="1v", grace="1h", now=later)
    assert {k for k in view_keys() if k.endswith(".metadata.json")} == {
        f"metadata/v{t.version}.metadata.json"
    }
    _assert_same(aws, f"{table_uri}/metadata/v{t.version}.metadata.json", t)
