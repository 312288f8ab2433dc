"""``Table.to_arrow_reader``: DuckDB and Polars read a Lethe table in one call, deletes,
erasures and renames applied, at any retained version (issue 40 item 3)."""

from __future__ import annotations

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS, events

import lethe
from lethe import errors


@pytest.fixture
def table(table_uri: str) -> lethe.Table:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 2_000))
    t.append(events(2_000, 1_000))
    t.delete([("customer_id", "in", [3, 4])], request_id="d")
    t.erase([("customer_id", "=", 5)], request_id="e")
    with lethe.Table.open(table_uri).update_schema() as u:
        u.rename_column("payload", "body")
    return lethe.Table.open(table_uri)


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by("id")


def test_duckdb_reads_the_stream_with_deletes_applied(table: lethe.Table) -> None:
    want = table.scan()
    reader = table.to_arrow_reader()
    got = duckdb.sql("select * from reader").arrow()
    got = got.read_all() if isinstance(got, pa.RecordBatchReader) else got
    assert got.column_names == want.column_names  # DuckDB renames UTC Etc/UTC: compare values
    assert _sorted(got).to_pylist() == _sorted(want).to_pylist()
    assert "body" in got.column_names and "payload" not in got.column_names
    assert not pc.any(pc.is_in(got["customer_id"], pa.array([3, 4, 5], pa.int32()))).as_py()

    reader = table.to_arrow_reader(["customer_id", "id"])  # noqa: F841 - DuckDB reads it by name
    by = duckdb.sql(
        "select customer_id, count(*) as n from reader group by 1 order by 1"
    ).fetchall()
    counts = want.group_by("customer_id").aggregate([("id", "count")]).sort_by("customer_id")
    assert by == list(
        zip(counts["customer_id"].to_pylist(), counts["id_count"].to_pylist(), strict=True)
    )


def test_polars_and_time_travel_and_text_filters(table: lethe.Table) -> None:
    df = pl.from_arrow(table.to_arrow_reader(filters="customer_id = 7 or customer_id = 8"))
    assert isinstance(df, pl.DataFrame)
    assert sorted(df["id"].to_list()) == [i for i in range(3_000) if i % 100 in (7, 8)]
    # before the delete and the erase: the deleted customers' rows read, the erased one's
    # never again (issue 39: history minus the people erased since)
    before = table.to_arrow_reader(version=2).read_all()
    assert "payload" in before.column_names
    assert sorted(before["id"].to_pylist()) == [i for i in range(3_000) if i % 100 != 5]
    assert table.to_arrow_reader(version=table.version).read_all().num_rows == table.scan().num_rows
    with pytest.raises(errors.SnapshotNotFound):
        table.to_arrow_reader(version=table.version + 5)
    with pytest.raises(errors.InvalidRequest, match="cannot parse --where"):
        table.to_arrow_reader(filters="customer_id = 7 or")


def test_an_empty_result_is_a_frame_with_the_columns(table: lethe.Table) -> None:
    """Polars' ``from_arrow`` needs one batch to know the schema: a filter matching nothing
    still gives a (zero-row) frame with every column."""
    df = pl.from_arrow(table.to_arrow_reader(filters="customer_id = 5"))  # erased: no rows
    assert isinstance(df, pl.DataFrame) and df.height == 0
    assert df.columns == table.schema.names
