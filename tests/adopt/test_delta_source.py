"""The Delta source reader (issue 28) on tables **delta-rs** (``deltalake`` 1.6) wrote to moto's
S3, each listing checked against delta-rs's own view: the files ``DeltaTable.file_uris()``
names, and the rows ``to_pyarrow_table()`` returns.

The deletion-vector fixture is built to the Delta protocol's documented layout (PROTOCOL.md,
"Deletion Vector Format" and "Deletion Vector File Storage Format"): delta-rs 1.6 deletes by
rewriting files even with ``delta.enableDeletionVectors``, so a commit adding the same file
with a ``deletionVector`` descriptor is written here: the bitmap is pyroaring's portable
64-bit serialization behind the little-endian magic 1681511377; in a file, version byte 1,
big-endian size, the bitmap, big-endian CRC-32; inline, z85 of the bitmap.
"""

from __future__ import annotations

import io
import json
import struct
import uuid
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap64

from lethe import errors
from lethe.adopt.delta import list_delta
from lethe.adopt.delta_format import DELTA_DV_MAGIC, decode_bitmap_array, z85_encode
from lethe.adopt.source import SourceListing
from lethe.catalog.values import from_json
from lethe.storage.store import S3Store
from tests.engines import delta_options


def _data(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids),
            "region": pa.array(["eu", "us", "ap"][int(i) % 3] for i in ids),
            "day": pa.array([f"2026-01-0{1 + int(i) % 2}" for i in ids]).cast(pa.date32()),
            "v": pa.array([float(i) / 2 for i in ids]),
        }
    )


def _get(s3: Any, uri: str) -> bytes:
    bucket, key = uri.removeprefix("s3://").split("/", 1)
    return bytes(s3.get_object(Bucket=bucket, Key=key)["Body"].read())


def _rows(s3: Any, listing: SourceListing, physical: dict[str, str] | None = None) -> pa.Table:
    """The listed files' live rows, partition columns filled from the listing, logical names."""
    parts = []
    for f in listing.files:
        t = pq.read_table(io.BytesIO(_get(s3, f.uri)))
        if physical:
            t = t.rename_columns([physical.get(n, n) for n in t.column_names])
        keep = np.ones(t.num_rows, dtype=bool)
        keep[list(f.deleted)] = False
        t = t.filter(pa.array(keep))
        assert listing.partition_schema is None or set(f.partition) == set(
            listing.partition_schema.names
        )
        for col, value in f.partition.items():
            typ = listing.partition_schema.field(col).type  # type: ignore[union-attr]
            carrier = _carrier(typ)
            t = t.append_column(
                col, pa.array([from_json(value, typ)] * t.num_rows, carrier).cast(typ)
            )
        parts.append(t.select(sorted(t.column_names)))
    return pa.concat_tables(parts).sort_by("id")


def _carrier(t: pa.DataType) -> pa.DataType:
    """The Arrow type the canonical JSON form of a ``t`` value has (temporal: integers)."""
    if pa.types.is_date32(t):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.int64()
    return t


def _check(
    s3: Any,
    listing: SourceListing,
    dt: DeltaTable,
    physical: dict[str, str] | None = None,
    written: pa.Table | None = None,
) -> None:
    assert [f.uri for f in listing.files] == sorted(dt.file_uris())
    want = dt.to_pyarrow_table()
    if written is not None:  # delta-rs 1.6 reads column-mapped files back as nulls
        assert want.num_rows == written.num_rows
        want = written
    got = _rows(s3, listing, physical)
    assert got.num_rows == want.num_rows
    want = want.select(sorted(want.column_names)).sort_by("id")
    for name in want.column_names:
        assert got[name].to_pylist() == want[name].to_pylist(), name


def test_partitioned_appends_delete_overwrite_checkpoint(aws: Any, s3: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/delta/t{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    write_deltalake(uri, _data(0, 100), partition_by=["region", "day"], storage_options=so)
    write_deltalake(
        uri, _data(100, 50), partition_by=["region", "day"], storage_options=so, mode="append"
    )
    dt = DeltaTable(uri, storage_options=so)
    dt.delete("id < 10")
    dt.create_checkpoint()
    write_deltalake(
        uri, _data(150, 30), partition_by=["region", "day"], storage_options=so, mode="append"
    )
    dt = DeltaTable(uri, storage_options=so)
    store = S3Store(bucket, client=s3)
    listing = list_delta(store, uri)
    assert listing.format == "delta" and listing.source == uri + "/"
    assert listing.partition_schema is not None
    assert listing.partition_schema.names == ["region", "day"]
    assert listing.partition_schema.field("day").type == pa.date32()
    assert listing.schema is not None and listing.schema.names == ["id", "region", "day", "v"]
    assert {f.partition["day"] for f in listing.files} == {20454, 20455}  # days since 1970
    assert not listing.physical_names and listing.deleted_rows == 0
    _check(s3, listing, dt)
    # an older version: before the delete (commit 1), from the JSON commits alone
    old = list_delta(store, uri, version=1)
    _check(s3, old, DeltaTable(uri, storage_options=so, version=1))
    # the checkpoint is read rather than the commits before it
    before = store.stats.snapshot()
    list_delta(store, uri)
    io_ = store.stats.snapshot() - before
    assert io_.count("list") == 0
    # _last_checkpoint, the checkpoint, the one commit after it, the next (missing) one
    assert io_.count("get") == 4
    # an overwrite replaces everything
    write_deltalake(
        uri, _data(500, 10), partition_by=["region", "day"], storage_options=so, mode="overwrite"
    )
    _check(s3, list_delta(store, uri), DeltaTable(uri, storage_options=so))
    with pytest.raises(errors.SnapshotNotFound, match="no version 99"):
        list_delta(store, uri, version=99)


def test_typed_partition_values(aws: Any, s3: Any, bucket: str) -> None:
    """Timestamp, boolean, integer and decimal partition columns, and a null partition value,
    as delta-rs serializes them into the log."""
    from decimal import Decimal

    uri = f"s3://{bucket}/delta/ty{uuid.uuid4().hex[:6]}"
    n = 12
    t = pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "ts": pa.array(
                [1_767_225_600_000_000 + (i % 2) * 1_500_000 for i in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "flag": pa.array([i % 3 == 0 for i in range(n)]),
            "k": pa.array([None if i == 5 else i % 2 for i in range(n)], pa.int32()),
            "d": pa.array([Decimal("1.25")] * n, pa.decimal128(5, 2)),
        }
    )
    write_deltalake(
        uri, t, partition_by=["ts", "flag", "k", "d"], storage_options=delta_options(aws)
    )
    dt = DeltaTable(uri, storage_options=delta_options(aws))
    listing = list_delta(S3Store(bucket, client=s3), uri)
    assert listing.partition_schema is not None
    assert listing.partition_schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert {f.partition["ts"] for f in listing.files} == {
        1_767_225_600_000_000,
        1_767_225_601_500_000,
    }
    assert {f.partition["d"] for f in listing.files} == {"1.25"}
    assert None in {f.partition["k"] for f in listing.files}
    _check(s3, listing, dt)


def test_column_mapping_names(aws: Any, s3: Any, bucket: str) -> None:
    """delta-rs writes column mapping (name mode, physical names and field ids in the files) but
    its 1.6 reader returns the mapped columns as nulls: values are checked against what was
    written, files and row counts against delta-rs."""
    uri = f"s3://{bucket}/delta/cm{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    write_deltalake(
        uri,
        _data(0, 40),
        partition_by=["region"],
        storage_options=so,
        configuration={"delta.columnMapping.mode": "name"},
    )
    write_deltalake(uri, _data(40, 40), partition_by=["region"], storage_options=so, mode="append")
    dt = DeltaTable(uri, storage_options=so)
    listing = list_delta(S3Store(bucket, client=s3), uri)
    assert listing.schema is not None
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in listing.schema}
    assert sorted(ids.values()) == [1, 2, 3, 4]
    assert set(listing.physical_names) == set(ids.values())
    assert all(n.startswith("col-") for n in listing.physical_names.values())
    assert {f.partition["region"] for f in listing.files} == {"eu", "us", "ap"}
    physical = {listing.physical_names[i]: n for n, i in ids.items()}
    _check(s3, listing, dt, physical, written=pa.concat_tables([_data(0, 40), _data(40, 40)]))


def test_multi_part_checkpoint(aws: Any, s3: Any, bucket: str) -> None:
    """delta-rs writes single-file checkpoints; its checkpoint's rows are split here into the
    protocol's multi-part naming (``<v>.checkpoint.<i>.<n>.parquet``)."""
    uri = f"s3://{bucket}/delta/mp{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    for i in range(4):
        mode = "append" if i else "error"
        write_deltalake(
            uri, _data(i * 20, 20), partition_by=["region"], storage_options=so, mode=mode
        )
    dt = DeltaTable(uri, storage_options=so)
    dt.delete("id = 25")
    dt.create_checkpoint()
    write_deltalake(uri, _data(80, 20), partition_by=["region"], storage_options=so, mode="append")
    dt = DeltaTable(uri, storage_options=so)
    log = f"{uri.split('/', 3)[3]}/_delta_log"
    cp = pq.read_table(io.BytesIO(_get(s3, f"s3://{bucket}/{log}/{4:020d}.checkpoint.parquet")))
    half = cp.num_rows // 2
    for i, part in enumerate((cp.slice(0, half), cp.slice(half)), start=1):
        buf = io.BytesIO()
        pq.write_table(part, buf)
        s3.put_object(
            Bucket=bucket,
            Key=f"{log}/{4:020d}.checkpoint.{i:010d}.0000000002.parquet",
            Body=buf.getvalue(),
        )
    s3.delete_object(Bucket=bucket, Key=f"{log}/{4:020d}.checkpoint.parquet")
    s3.put_object(
        Bucket=bucket,
        Key=f"{log}/_last_checkpoint",
        Body=json.dumps({"version": 4, "size": cp.num_rows, "parts": 2}).encode(),
    )
    for n in range(4):  # the commits a checkpoint covers may be cleaned up
        s3.delete_object(Bucket=bucket, Key=f"{log}/{n:020d}.json")
    store = S3Store(bucket, client=s3)
    _check(s3, list_delta(store, uri), dt)  # through _last_checkpoint
    _check(s3, list_delta(store, uri, version=5), dt)  # through the listing
    with pytest.raises(
        errors.SnapshotNotFound, match=r"commit 0{20}\.json is missing .*covers version 3"
    ):
        list_delta(store, uri, version=3)
    s3.delete_object(Bucket=bucket, Key=f"{log}/_last_checkpoint")
    _check(s3, list_delta(store, uri), dt)


def _bitmap_array(positions: list[int]) -> bytes:
    return struct.pack("<I", DELTA_DV_MAGIC) + BitMap64(positions).serialize()


def _commit(s3: Any, uri: str, version: int, actions: list[dict[str, Any]]) -> None:
    body = "\n".join(json.dumps(a) for a in actions).encode()
    s3.put_object(
        Bucket=uri.removeprefix("s3://").split("/", 1)[0],
        Key=f"{uri.split('/', 3)[3]}/_delta_log/{version:020d}.json",
        Body=body,
    )


def test_deletion_vectors_built_to_the_protocol(aws: Any, s3: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/delta/dv{uuid.uuid4().hex[:6]}"
    so = delta_options(aws)
    write_deltalake(
        uri,
        _data(0, 300),
        storage_options=so,
        configuration={"delta.enableDeletionVectors": "true"},
    )
    write_deltalake(uri, _data(300, 200), storage_options=so, mode="append")
    dt = DeltaTable(uri, storage_options=so)
    adds = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    assert len(adds) == 2
    a, b = sorted(adds, key=lambda r: r["num_records"], reverse=True)  # 300 rows, 200 rows
    # a DV file (storage 'u', with a random prefix) holding two DVs; an inline DV for b
    dv_a, dv_a2 = _bitmap_array([0, 5, 299]), _bitmap_array([1])
    u = uuid.uuid4()
    file = b"\x01"
    offsets = []
    for data in (dv_a2, dv_a):
        offsets.append(len(file))
        file += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    s3.put_object(
        Bucket=bucket, Key=f"{uri.split('/', 3)[3]}/ab/deletion_vector_{u}.bin", Body=file
    )
    inline = _bitmap_array([7, 8, 9, 199])
    padded = inline + b"\0" * (-len(inline) % 4)
    v = dt.version() + 1

    def re_add(row: dict[str, Any], dv: dict[str, Any]) -> list[dict[str, Any]]:
        base = {
            "path": row["path"],
            "partitionValues": {},
            "size": row["size_bytes"],
            "dataChange": True,
        }
        stats = json.dumps({"numRecords": row["num_records"]})
        return [
            {"remove": {**base, "deletionTimestamp": 1}},
            {"add": {**base, "modificationTime": 1, "stats": stats, "deletionVector": dv}},
        ]

    _commit(
        s3,
        uri,
        v,
        [
            *re_add(
                a,
                {
                    "storageType": "u",
                    "pathOrInlineDv": "ab" + z85_encode(u.bytes),
                    "offset": offsets[1],
                    "sizeInBytes": len(dv_a),
                    "cardinality": 3,
                },
            ),
            *re_add(
                b,
                {
                    "storageType": "i",
                    "pathOrInlineDv": z85_encode(padded),
                    "sizeInBytes": len(inline),
                    "cardinality": 4,
                },
            ),
        ],
    )
    listing = list_delta(S3Store(bucket, client=s3), uri)
    by = {f.uri.rsplit("/", 1)[1]: f.deleted for f in listing.files}
    assert by == {a["path"]: (0, 5, 299), b["path"]: (7, 8, 9, 199)}
    # delta-rs's own DV reader: its keep masks name exactly the positions listed
    dt = DeltaTable(uri, storage_options=so)
    masks = pa.table(dt.deletion_vectors()).to_pylist()
    assert {
        r["filepath"]: tuple(i for i, keep in enumerate(r["selection_vector"]) if not keep)
        for r in masks
    } == {f.uri: f.deleted for f in listing.files}
    assert [f.uri for f in listing.files] == sorted(dt.file_uris())
    got = _rows(s3, listing)
    assert got.num_rows == 500 - 7
    assert set(got["id"].to_pylist()) == set(range(500)) - {0, 5, 299, 307, 308, 309, 499}

    # a corrupt CRC is refused, not read
    bad = bytearray(file)
    bad[-1] ^= 0xFF
    s3.put_object(
        Bucket=bucket, Key=f"{uri.split('/', 3)[3]}/ab/deletion_vector_{u}.bin", Body=bytes(bad)
    )
    with pytest.raises(errors.CorruptDeletionVector, match="CRC"):
        list_delta(S3Store(bucket, client=s3), uri)


def test_unknown_features_are_refused(aws: Any, s3: Any, bucket: str) -> None:
    uri = f"s3://{bucket}/delta/f{uuid.uuid4().hex[:6]}"
    write_deltalake(uri, _data(0, 10), storage_options=delta_options(aws))
    _commit(
        s3,
        uri,
        1,
        [
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["typeWidening"],
                    "writerFeatures": ["typeWidening"],
                }
            }
        ],
    )
    with pytest.raises(errors.UnsupportedSource, match="reader feature 'typeWidening'"):
        list_delta(S3Store(bucket, client=s3), uri)
    assert len(list_delta(S3Store(bucket, client=s3), uri, version=0).files) == 1
    with pytest.raises(errors.NotFound, match="no Delta log"):
        list_delta(S3Store(bucket, client=s3), f"s3://{bucket}/nothing")


@given(
    st.sets(
        st.one_of(
            st.integers(0, 70_000),
            st.integers(2**32 - 5, 2**32 + 70_000),
            st.integers(0, 2**63 - 1),
        ),
        max_size=200,
    )
)
def test_bitmap_array_round_trips(positions: set[int]) -> None:
    data = _bitmap_array(sorted(positions))
    assert sorted(decode_bitmap_array(data)) == sorted(positions)


def test_bitmap_array_refuses_bad_magic_and_reserved_bit() -> None:
    with pytest.raises(errors.CorruptDeletionVector, match="magic"):
        decode_bitmap_array(b"\0\0\0\0" + BitMap64([1]).serialize())
    with pytest.raises(errors.CorruptDeletionVector, match="most significant bit"):
        decode_bitmap_array(_bitmap_array([2**63]))
