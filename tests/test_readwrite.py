"""The scan and write paths' CPU shortcuts (issue 13) keep results exact: DV rows dropped
column by column equal a table filter; files written without dictionaries for nearly unique
columns read back equal to what was written."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe.dv.rowdrop import drop_rows
from lethe.reading.sparse import SparseFile
from lethe.writing.writer import dictionary_columns


@settings(max_examples=60, deadline=None)
@given(
    keep=st.lists(st.booleans(), min_size=0, max_size=300),
    split=st.integers(min_value=0, max_value=300),
)
def test_drop_rows_equals_table_filter(keep: list[bool], split: int) -> None:
    n = len(keep)
    ids = pa.array(np.arange(n, dtype=np.int64))
    text = pa.array([None if i % 7 == 0 else f"v{i}" * (i % 5) for i in range(n)])
    t = pa.table({"id": ids, "text": text})
    if 0 < split < n:  # several chunks, as a multi-batch table has
        t = pa.concat_tables([t.slice(0, split), t.slice(split)])
    mask = pa.array(keep, pa.bool_())
    got = drop_rows(t, mask)
    assert got.schema == t.schema
    assert got.equals(t.filter(mask))


def test_sparse_file_read_buffer_is_read() -> None:
    data = bytes(range(256)) * 40
    f = SparseFile(len(data), lambda s, e: data[s:e])
    f.add(100, data[100:5000])
    f.seek(200)
    assert bytes(f.read_buffer(300)) == data[200:500]
    f.seek(4900)
    assert bytes(f.read_buffer(400)) == data[4900:5300]  # past the held range: fetched
    assert f.misses == 1 and f.tell() == 5300


def test_dictionary_only_where_values_repeat(s3: Any) -> None:
    rows = 70_000
    rng = np.random.default_rng(2)
    data = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "amount": pa.array(rng.normal(size=rows)),
            "kind": pa.array(np.array(["a", "b", "c"])[rng.integers(0, 3, rows)]),
        }
    )
    assert dictionary_columns(data.to_batches()[0]) == ["kind"]
    bucket = f"b-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    t = lethe.Table.create(f"s3://{bucket}/t", data.schema, key="id")
    t.append(data)
    assert t.scan().equals(data)
    f = t.manifest.files[0]
    body = s3.get_object(Bucket=bucket, Key=t.key_of(f.path))["Body"].read()
    md = pq.read_metadata(pa.BufferReader(body))
    enc = {
        md.row_group(0).column(i).path_in_schema: md.row_group(0).column(i).encodings
        for i in range(md.num_columns)
    }
    assert "RLE_DICTIONARY" in enc["kind"]
    assert "RLE_DICTIONARY" not in enc["id"] and "RLE_DICTIONARY" not in enc["amount"]
    assert md.row_group(0).column(0).statistics.has_min_max


def test_required_columns_go_into_nullable_ones_and_not_the_reverse(table_uri: str) -> None:
    """A table whose columns are all nullable (adopted from files whose writer declared them
    so) takes rows that declare the key required, as they are. The reverse (issue 36 item 4:
    ``pa.table({...})`` declares every field nullable): a nullable column without nulls goes
    into a required one; with nulls it is refused, naming the column and the count, in a
    table and in a stream alike, and nothing is committed."""
    loose = pa.schema([("id", pa.int64()), ("n", pa.string())])
    t = lethe.Table.create(table_uri, loose, key="id")
    tight = pa.table(
        [pa.array([1, 2], pa.int64()), pa.array(["a", None])],
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.string())]),
    )
    t.append(tight)
    t.append(pa.RecordBatchReader.from_batches(tight.schema, tight.to_batches()))
    got = lethe.Table.open(table_uri).scan()
    assert got.schema.field("id").nullable and sorted(got["id"].to_pylist()) == [1, 1, 2, 2]

    strict = lethe.Table.create(
        f"{table_uri}-strict", pa.schema([pa.field("id", pa.int64(), nullable=False)]), key="id"
    )
    strict.append(pa.table({"id": pa.array([3], pa.int64())}))  # declared nullable, no null
    usual = pa.table({"id": [4, 5]})
    strict.append(pa.RecordBatchReader.from_batches(usual.schema, usual.to_batches()))
    assert sorted(lethe.Table.open(f"{table_uri}-strict").scan()["id"].to_pylist()) == [3, 4, 5]
    assert not lethe.Table.open(f"{table_uri}-strict").scan().schema.field("id").nullable
    holes = pa.table({"id": [6, None, None]})
    for data in (holes, pa.RecordBatchReader.from_batches(holes.schema, holes.to_batches())):
        with pytest.raises(lethe.errors.SchemaMismatch, match=r"'id' holds 2 null"):
            strict.append(data)
    assert lethe.Table.open(f"{table_uri}-strict").scan().num_rows == 3
