"""Issue 35 item 10: a merge append from a handle opened before a concurrent rename keeps
the renamed column's values (the merge plan is made against the snapshot it commits on)."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int64()),
        ("amount", pa.int64()),
        ("note", pa.string()),
    ]
)


def _table(uri: str, s3: Any) -> lethe.Table:
    t = lethe.Table.create(uri, SCHEMA, key="id", s3=s3)
    t.append(pa.table({"id": [1], "customer_id": [10], "amount": [5], "note": ["n1"]}, SCHEMA))
    return t


def test_seam10_merge_append_from_a_stale_handle_keeps_the_renamed_column(
    table_uri: str, s3: Any
) -> None:
    """issue 35 item 10, the issue's snippet: row 2 read ``memo=None`` (acknowledged, no
    error); its "note" must land in "memo"."""
    _table(table_uri, s3)
    uri = table_uri
    stale = lethe.Table.open(uri, s3=s3)
    with lethe.Table.open(uri, s3=s3).update_schema() as u:
        u.rename_column("note", "memo")
    stale.append(
        pa.table({"id": [2], "customer_id": [20], "amount": [6], "note": ["n2"], "extra": ["x"]}),
        schema_mode="merge",
    )
    t = lethe.Table.open(uri, s3=s3)
    assert t.schema.names == ["id", "customer_id", "amount", "memo", "extra"]
    got = t.scan().sort_by("id").to_pylist()
    assert got == [
        {"id": 1, "customer_id": 10, "amount": 5, "memo": "n1", "extra": None},
        {"id": 2, "customer_id": 20, "amount": 6, "memo": "n2", "extra": "x"},
    ]


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    renames=st.lists(st.sampled_from(["note", "amount"]), max_size=2, unique=True),
    extra=st.booleans(),
    reader=st.booleans(),
)
def test_seam10_no_value_of_a_stale_merge_append_is_lost(
    bucket: str, s3: Any, renames: list[str], extra: bool, reader: bool
) -> None:
    """issue 35 item 10: whatever columns a concurrent writer renames (and whether the
    append adds a column, or comes as a stream), every value the stale handle appends
    reads back under the column's current name."""
    uri = f"s3://{bucket}/p/{uuid.uuid4().hex}"
    _table(uri, s3)
    stale = lethe.Table.open(uri, s3=s3)
    with lethe.Table.open(uri, s3=s3).update_schema() as u:
        for c in renames:
            u.rename_column(c, f"{c}_v2")
    row = {"id": [2], "customer_id": [20], "amount": [6], "note": ["n2"]}
    if extra:
        row["extra"] = ["x"]
    data = pa.table(row)
    stale.append(
        pa.RecordBatchReader.from_batches(data.schema, data.to_batches()) if reader else data,
        schema_mode="merge",
    )
    t = lethe.Table.open(uri, s3=s3)
    (got,) = [r for r in t.scan().to_pylist() if r["id"] == 2]
    for c, (v,) in row.items():
        assert got[f"{c}_v2" if c in renames else c] == v


def test_seam10_register_merge_from_a_stale_handle_keeps_the_renamed_column(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """issue 35 item 10, the registration path (a guard: it held before the fix, the file
    being read by its own recorded shape): a file registered in merge mode through a handle
    opened before a rename reads its "note" under "memo"."""
    import pyarrow.parquet as pq

    from lethe.ingest.register import register_parquet

    _table(table_uri, s3)
    stale = lethe.Table.open(table_uri, s3=s3)
    with lethe.Table.open(table_uri, s3=s3).update_schema() as u:
        u.rename_column("note", "memo")
    buf = pa.BufferOutputStream()
    pq.write_table(
        pa.table({"id": [2], "customer_id": [20], "amount": [6], "note": ["n2"], "extra": ["x"]}),
        buf,
    )
    s3.put_object(Bucket=bucket, Key="incoming/n2.parquet", Body=buf.getvalue().to_pybytes())
    register_parquet(stale, "incoming/n2.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri, s3=s3)
    (got,) = [r for r in t.scan().to_pylist() if r["id"] == 2]
    assert (got["memo"], got["extra"]) == ("n2", "x")
