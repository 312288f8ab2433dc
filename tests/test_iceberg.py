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
from lethe.iceberg.mapping import iceberg_schema
from lethe.table import Table
from tests.conftest import EVENTS, events


def _props(aws: Any) -> dict[str, str]:
    return {
        "s3.endpoint": aws.endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }


def view(aws: Any, uri: str) -> StaticTable:
    return StaticTable.from_metadata(uri, properties=_props(aws))


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
