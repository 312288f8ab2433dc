"""The Iceberg source reader (issue 28) on tables other writers built, checked against
PyIceberg's own scan: the listed files minus their deleted positions hold exactly the rows
PyIceberg returns, and identity partition values equal the files' values.

Fixtures:
- data and copy-on-write deletes: **PyIceberg 0.12** (``append``, ``delete``) through its
  ``GlueCatalog`` on moto's Glue (the SQL catalog needs SQLAlchemy, not installed here);
  PyIceberg 0.12 writes format 2 only and its ``delete`` rewrites files (copy-on-write);
- position deletes: a Parquet delete file (``file_path``, ``pos``) written by **pyarrow**, listed
  in a delete manifest written by **PyIceberg's ``ManifestWriterV2``** (content switched to
  deletes) and a manifest list by ``write_manifest_list``, committed by PyIceberg's catalog;
- format-3 deletion vectors: Lethe's Iceberg view (``publish_iceberg(format_version=3)``, Puffin
  ``deletion-vector-v1`` blobs per the spec), which PyIceberg reads (tests/test_iceberg.py);
  its format-2 view (position-delete files) too.
"""

from __future__ import annotations

import io
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.glue import GlueCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.table import StaticTable
from pyiceberg.table import Table as IceTable
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import AddSnapshotUpdate, SetSnapshotRefUpdate
from pyiceberg.typedef import Record

from lethe import errors
from lethe.adopt.iceberg import list_iceberg
from lethe.adopt.source import SourceListing
from lethe.storage.store import S3Store
from lethe.table import Table
from tests import engines
from tests.conftest import events
from tests.engines import iceberg_view

catalog = engines.catalog  # the Glue catalog fixture


def _data(start: int, n: int) -> pa.Table:
    return engines.dated_rows(start, n, v=lambda ids: [f"v{i}" for i in ids])


def _read(s3: Any, uri: str) -> pa.Table:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    return pq.read_table(io.BytesIO(s3.get_object(Bucket=bucket, Key=key)["Body"].read()))


def _live_rows(s3: Any, listing: SourceListing) -> pa.Table:
    """The listed files' rows without their deleted positions (partition values checked)."""
    parts = []
    for f in listing.files:
        t = _read(s3, f.uri)
        for col, value in f.partition.items():
            assert {
                v for v in t[col].cast(pa.int32() if col == "dt" else t[col].type).to_pylist()
            } == {value}
        keep = np.ones(t.num_rows, dtype=bool)
        keep[list(f.deleted)] = False
        parts.append(t.filter(pa.array(keep)).select(["id", "v"]))
    return pa.concat_tables(parts).sort_by("id") if parts else pa.table({"id": [], "v": []})


def _check(s3: Any, listing: SourceListing, table: IceTable | StaticTable) -> None:
    want = table.scan().to_arrow()
    planned = {task.file.file_path for task in table.scan().plan_files()}
    assert {f.uri for f in listing.files} == planned
    got = _live_rows(s3, listing)
    assert sum(f.size for f in listing.files) == listing.bytes > 0
    assert got.num_rows == want.num_rows
    assert got["id"].to_pylist() == want.sort_by("id")["id"].to_pylist()
    assert got["v"].to_pylist() == [str(v) for v in want.sort_by("id")["v"].to_pylist()]


def test_partitioned_appends_and_copy_on_write_delete(
    aws: Any, s3: Any, bucket: str, catalog: GlueCatalog
) -> None:
    t = catalog.create_table(f"db.p{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    with t.update_spec() as u:
        u.add_identity("dt")
    t.append(_data(0, 300))
    t.append(_data(300, 50))
    t.delete("id = 5")
    t.delete("id < 3")
    listing = list_iceberg(S3Store(bucket, client=s3), t.metadata_location)
    assert listing.format == "iceberg" and listing.source == t.metadata_location
    assert listing.partition_schema is not None and listing.partition_schema.names == ["dt"]
    assert listing.partition_schema.field("dt").type == pa.date32()
    assert listing.schema is not None and listing.schema.names == ["id", "dt", "v"]
    assert listing.schema.field("v").metadata[b"PARQUET:field_id"] == b"3"
    assert listing.deleted_rows == 0  # PyIceberg 0.12 deletes by rewriting files
    _check(s3, listing, t)
    assert {f.partition["dt"] for f in listing.files} == {20454, 20455, 20456}


def test_partition_spec_evolution(aws: Any, s3: Any, bucket: str, catalog: GlueCatalog) -> None:
    """Files of an older spec without the identity field carry no value for it: the column is
    then no partition column (its values are in the files, which Iceberg writers always fill).
    Non-identity transforms (bucket, truncate, day...) are skipped the same way; PyIceberg 0.12
    cannot write them here (it needs pyiceberg-core, not installed)."""
    t = catalog.create_table(f"db.b{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    t.append(_data(0, 80))
    with t.update_spec() as u:
        u.add_identity("dt")
    t.append(_data(80, 30))
    store = S3Store(bucket, client=s3)
    listing = list_iceberg(store, t.metadata_location)
    assert listing.partition_schema is None and len(listing.files) == 1 + 3
    assert all(not f.partition for f in listing.files)
    _check(s3, listing, t)
    t.delete("id < 80")  # only files of the identity spec remain
    listing = list_iceberg(store, t.metadata_location)
    assert listing.partition_schema is not None and listing.partition_schema.names == ["dt"]
    _check(s3, listing, t)


def test_unpartitioned_with_identifier_and_metadata_prefix(
    aws: Any, s3: Any, bucket: str, catalog: GlueCatalog
) -> None:
    from pyiceberg.schema import Schema
    from pyiceberg.types import DateType, LongType, NestedField, StringType

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "dt", DateType()),
        NestedField(3, "v", StringType()),
        identifier_field_ids=[1],
    )
    t = catalog.create_table(f"db.u{uuid.uuid4().hex[:6]}", schema=schema)
    arrow = _data(0, 1).schema.set(0, pa.field("id", pa.int64(), nullable=False))
    for i in range(3):
        t.append(_data(i * 100, 100).cast(arrow))
    store = S3Store(bucket, client=s3)
    listing = list_iceberg(store, t.location())  # the newest metadata file under metadata/
    assert listing.source == t.metadata_location
    assert listing.key == ("id",) and listing.partition_schema is None
    assert len(listing.files) == 3 and all(not f.partition for f in listing.files)
    _check(s3, listing, t)
    before = store.stats.snapshot()
    list_iceberg(store, t.metadata_location)
    io_ = store.stats.snapshot() - before
    assert io_.count("get") == 1 + 1 + 3  # metadata, manifest list, one manifest per append


class _DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg's format-2 manifest writer, writing a delete manifest."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def _commit_deletes(t: IceTable, deletes: list[DataFile]) -> None:
    """A new snapshot: the current manifests plus one delete manifest of ``deletes``."""
    meta = t.metadata
    parent = meta.current_snapshot()
    assert parent is not None
    sid, seq = meta.new_snapshot_id(), meta.next_sequence_number()
    base = f"{t.location()}/metadata/{uuid.uuid4().hex}"
    w = _DeleteManifestWriter(
        meta.spec(), meta.schema(), t.io.new_output(f"{base}-m0.avro"), sid, "deflate"
    )
    with w:
        for d in deletes:
            w.add(
                ManifestEntry.from_args(
                    status=ManifestEntryStatus.ADDED, snapshot_id=sid, data_file=d
                )
            )
    manifests = [*parent.manifests(t.io), w.to_manifest_file()]
    with write_manifest_list(
        2, t.io.new_output(f"{base}-list.avro"), sid, parent.snapshot_id, seq, "deflate"
    ) as ml:
        ml.add_manifests(manifests)
    snap = Snapshot(
        snapshot_id=sid,
        parent_snapshot_id=parent.snapshot_id,
        sequence_number=seq,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=f"{base}-list.avro",
        summary=Summary(Operation.DELETE),
        schema_id=meta.current_schema_id,
    )
    t._do_commit(  # PyIceberg's own commit path (its catalog's commit_table)
        updates=(
            AddSnapshotUpdate(snapshot=snap),
            SetSnapshotRefUpdate(
                snapshot_id=sid,
                parent_snapshot_id=parent.snapshot_id,
                ref_name="main",
                type="branch",
            ),
        ),
        requirements=(),
    )


def _delete_file(
    s3: Any,
    t: IceTable,
    rows: dict[str, list[int]],
    *,
    content: DataFileContent = DataFileContent.POSITION_DELETES,
) -> DataFile:
    paths = [p for p, ps in rows.items() for _ in ps]
    pos = [x for ps in rows.values() for x in ps]
    if content == DataFileContent.POSITION_DELETES:
        body = pa.table({"file_path": pa.array(paths), "pos": pa.array(pos, pa.int64())})
    else:
        body = pa.table({"id": pa.array(pos, pa.int64())})
    buf = io.BytesIO()
    pq.write_table(body, buf)
    path = f"{t.location()}/data/deletes-{uuid.uuid4().hex}.parquet"
    bucket, key = path.removeprefix("s3://").split("/", 1)
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())
    return DataFile.from_args(
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=body.num_rows,
        file_size_in_bytes=len(buf.getvalue()),
        equality_ids=[1] if content == DataFileContent.EQUALITY_DELETES else None,
    )


def test_position_delete_files(aws: Any, s3: Any, bucket: str, catalog: GlueCatalog) -> None:
    t = catalog.create_table(f"db.d{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    t.append(_data(0, 200))
    t.append(_data(200, 100))
    tasks = sorted(t.scan().plan_files(), key=lambda task: -task.file.record_count)
    files = [task.file.file_path for task in tasks]  # the 200-row file, then the 100-row one
    _commit_deletes(
        t,
        [
            _delete_file(s3, t, {files[0]: [0, 7, 199], files[1]: [3]}),
            _delete_file(s3, t, {files[0]: [7, 8]}),
        ],
    )
    t = catalog.load_table(t.name())
    listing = list_iceberg(S3Store(bucket, client=s3), t.metadata_location)
    by = {f.uri: f.deleted for f in listing.files}
    assert by == {files[0]: (0, 7, 8, 199), files[1]: (3,)}
    _check(s3, listing, t)
    assert t.scan().to_arrow().num_rows == 300 - 5
    # a position past the file's end is refused, naming the file
    _commit_deletes(t, [_delete_file(s3, t, {files[1]: [100]})])
    t = catalog.load_table(t.name())
    with pytest.raises(errors.UnsupportedSource, match=r"name row 100 of .*, which has 100 rows"):
        list_iceberg(S3Store(bucket, client=s3), t.metadata_location)


def test_a_delete_never_reaches_a_file_added_after_it(
    aws: Any, s3: Any, bucket: str, catalog: GlueCatalog
) -> None:
    """Sequence numbers: a position delete committed at sequence n names a path that PyIceberg's
    ``add_files`` registers later (sequence n+1, a pyarrow-written file): by the spec it does
    not apply (data sequence number n+1 > n)."""
    t = catalog.create_table(f"db.s{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    t.append(_data(0, 10))
    late = f"{t.location()}/data/late-{uuid.uuid4().hex}.parquet"
    first = next(iter(t.scan().plan_files())).file.file_path
    _commit_deletes(t, [_delete_file(s3, t, {late: [0, 1], first: [2]})])
    t = catalog.load_table(t.name())
    buf = io.BytesIO()
    pq.write_table(_data(100, 5), buf)
    bucket_, key = late.removeprefix("s3://").split("/", 1)
    s3.put_object(Bucket=bucket_, Key=key, Body=buf.getvalue())
    t.add_files([late])
    t = catalog.load_table(t.name())
    listing = list_iceberg(S3Store(bucket, client=s3), t.metadata_location)
    assert {f.uri: f.deleted for f in listing.files} == {first: (2,), late: ()}
    # PyIceberg's planning agrees: the late file gets no delete file ...
    plan = {task.file.file_path: len(task.delete_files) for task in t.scan().plan_files()}
    assert plan == {first: 1, late: 0}
    assert _live_rows(s3, listing).num_rows == 10 - 1 + 5
    # ... though PyIceberg 0.12's reader then applies every position delete by path, whatever
    # its task's plan (rows 100 and 101 go missing): the plan, not to_arrow, is the spec here
    assert t.scan().to_arrow().num_rows == 10 - 1 + 5 - 2


def test_version_hint_and_format_1(aws: Any, s3: Any, bucket: str, catalog: GlueCatalog) -> None:
    """A format-1 table (PyIceberg writes one on request); ``version-hint.text`` (Hadoop
    tables) names the metadata file to read even when a newer one exists."""
    t = catalog.create_table(
        f"db.h{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema, properties={"format-version": "1"}
    )
    t.append(_data(0, 30))
    first = t.metadata_location
    t.append(_data(30, 30))
    store = S3Store(bucket, client=s3)
    listing = list_iceberg(store, t.metadata_location)
    assert len(listing.files) == 2
    _check(s3, listing, t)
    folder = t.location() + "/metadata"
    name = first.rsplit("/", 1)[1]
    b, k = f"{folder}/v7.metadata.json".removeprefix("s3://").split("/", 1)
    s3.put_object(
        Bucket=b,
        Key=k,
        Body=s3.get_object(Bucket=b, Key=f"{k.rsplit('/', 1)[0]}/{name}")["Body"].read(),
    )
    s3.put_object(Bucket=b, Key=f"{k.rsplit('/', 1)[0]}/version-hint.text", Body=b"7\n")
    hinted = list_iceberg(store, folder + "/")
    assert hinted.source == f"{folder}/v7.metadata.json" and len(hinted.files) == 1


def test_equality_deletes_are_refused(aws: Any, s3: Any, bucket: str, catalog: GlueCatalog) -> None:
    t = catalog.create_table(f"db.e{uuid.uuid4().hex[:6]}", schema=_data(0, 1).schema)
    t.append(_data(0, 10))
    _commit_deletes(t, [_delete_file(s3, t, {"": [4]}, content=DataFileContent.EQUALITY_DELETES)])
    t = catalog.load_table(t.name())
    with pytest.raises(
        errors.UnsupportedSource, match=r"equality delete file .*deletes-.*applies to 1 live"
    ):
        list_iceberg(S3Store(bucket, client=s3), t.metadata_location)


@pytest.mark.parametrize("fv", [3, 2])
def test_lethe_view_deletion_vectors_and_position_files(
    aws: Any, s3: Any, table_uri: str, bucket: str, fv: int
) -> None:
    lt = Table.create(
        table_uri,
        events(0, 1).schema,
        key="id",
        target_file_bytes=32 << 10,
        row_group_bytes=8 << 10,
    )
    lt.append(events(0, 3_000))
    lt.append(events(3_000, 1_000))
    lt.delete([("id", "in", [0, 1, 2_999, 3_500])])
    lt.delete([("customer_id", "=", 7)])
    uri = lt.publish_iceberg(format_version=fv)  # type: ignore[arg-type]
    listing = list_iceberg(S3Store(bucket, client=s3), uri)
    st = iceberg_view(aws, uri)
    want = st.scan().to_arrow()
    assert want.num_rows == lt.scan().num_rows
    assert listing.deleted_rows == 4_000 - want.num_rows > 0
    assert {f.uri for f in listing.files} == {
        task.file.file_path for task in st.scan().plan_files()
    }
    got = []
    for f in listing.files:
        ids = _read(s3, f.uri)["id"].to_numpy()
        got.append(np.delete(ids, list(f.deleted)))
    assert sorted(np.concatenate(got).tolist()) == sorted(want["id"].to_pylist())
    assert listing.key == ()  # Lethe's view declares no identifier fields


def test_not_iceberg_and_missing(s3: Any, bucket: str) -> None:
    store = S3Store(bucket, client=s3)
    with pytest.raises(errors.NotFound, match="no Iceberg metadata file"):
        list_iceberg(store, f"s3://{bucket}/nothing/here")
    with pytest.raises(errors.UnsupportedSource, match="not an s3:// URI"):
        list_iceberg(store, "/tmp/warehouse/t/metadata/v1.metadata.json")
