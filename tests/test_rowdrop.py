"""Dropping a DV's rows from a decoded row group (``lethe.dv.rowdrop``): the slice path and the
copy path both return exactly the kept rows, in order, with the group's schema; the slice
path leaves no byte of a deleted row in the buffers its result shares; a scan on moto after
random deletes equals the plain table with those rows removed, whichever path each group
takes."""

from __future__ import annotations

import io
import pickle
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe.dv.rowdrop import SLICE_MAX_RUNS, SLICE_MIN_ROWS, drop_rows, kept_runs

MARK = 0x5A5A << 48  # ids whose bytes cannot be zeros or another column's


def group(n: int) -> pa.Table:
    """``n`` rows decoded from Parquet as a scan decodes them (fresh, writable buffers):
    fixed width, nullable, boolean, string and large string columns."""
    i = np.arange(n, dtype=np.int64)
    t = pa.table(
        {
            "id": pa.array(MARK + i),
            "at": pa.array(i * 1_000_000, pa.timestamp("us", tz="UTC")),
            "flag": pa.array((i % 3 == 0).tolist(), pa.bool_()),
            "amount": pa.array([None if k % 5 == 0 else k / 4 for k in range(n)], pa.float64()),
            "secret": pa.array([f"secret-{k:06d}|" for k in range(n)], pa.string()),
            "big": pa.array(
                [None if k % 7 == 0 else f"b{k:06d}" for k in range(n)], pa.large_string()
            ),
        }
    )
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=max(n, 1))
    buf.seek(0)
    return pq.ParquetFile(buf).read_row_group(0, use_threads=False) if n else t


def positions(n: int) -> st.SearchStrategy[set[int]]:
    """Deleted positions of an ``n``-row group: none, all, runs at either edge, a few
    scattered, dense."""
    if n == 0:
        return st.just(set())
    edge = st.integers(1, n).flatmap(
        lambda k: st.sampled_from(
            [set(range(k)), set(range(n - k, n)), set(range(k)) | set(range(n - k, n))]
        )
    )
    return st.one_of(
        st.just(set()),
        st.just(set(range(n))),
        edge,
        st.sets(st.integers(0, n - 1), max_size=6),
        st.integers(2, 9).map(lambda step: set(range(0, n, step))),
    )


def distinct_buffers(t: pa.Table, column: str, index: int) -> list[pa.Buffer]:
    seen: dict[int, pa.Buffer] = {}
    for chunk in t.column(column).chunks:
        b = chunk.buffers()[index]
        if b is not None:
            seen[b.address] = b
    return list(seen.values())


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(0, 600), path=st.sampled_from(["slice", "copy"]))
def test_drop_rows_keeps_exactly_the_kept_rows(data: st.DataObject, n: int, path: str) -> None:
    t = group(n)
    gone = data.draw(positions(n))
    keep = pa.array([i not in gone for i in range(n)], pa.bool_())
    want = t.take(pa.array([i for i in range(n) if i not in gone], pa.int64()))
    limits = {"max_runs": 10**9, "min_rows": 1} if path == "slice" else {"max_runs": 0}
    got = drop_rows(t, keep, **limits)
    assert got.schema == t.schema
    assert got.equals(want)
    (starts, _), _ = kept_runs(keep)
    if path == "slice" and len(starts):
        assert got.column("id").num_chunks == len(starts)
    else:
        assert got.column("id").num_chunks <= 1
    # whatever the path, the buffers the result holds carry no deleted row
    ids = {int(v) for b in distinct_buffers(got, "id", 1) for v in np.frombuffer(b, np.int64)}
    assert ids - {0} <= {MARK + i for i in range(n) if i not in gone}
    text = b"".join(bytes(b) for b in distinct_buffers(got, "secret", 2))
    assert text.count(b"secret-") == n - len(gone)
    big = b"".join(bytes(b) for b in distinct_buffers(got, "big", 2))
    assert big.count(b"b") == sum(1 for i in range(n) if i not in gone and i % 7)


def test_runs_decide_the_path() -> None:
    n = 102_400
    t = group(n)
    few = pa.array([i not in (0, 5_000, 99_999) for i in range(n)], pa.bool_())
    got = drop_rows(t, few)
    assert got.num_rows == n - 3 and got.column("id").num_chunks == 3  # 3 runs kept
    many = pa.array([i % 100 != 0 for i in range(n)], pa.bool_())  # 1,024 runs: copied
    assert SLICE_MAX_RUNS < 1_024
    got = drop_rows(group(n), many)
    assert got.column("id").num_chunks == 1 and got.num_rows == n - 1_024
    short = pa.array([i % (SLICE_MIN_ROWS // 2) != 0 for i in range(n)], pa.bool_())
    got = drop_rows(group(n), short)  # few enough runs, but shorter than SLICE_MIN_ROWS
    assert got.column("id").num_chunks == 1


def test_pickled_slices_hold_no_deleted_value() -> None:
    t = group(20_000)
    gone = {3, 4, 10_000, 19_999}
    got = drop_rows(t, pa.array([i not in gone for i in range(20_000)], pa.bool_()))
    assert got.column("secret").num_chunks == 3
    blob = pickle.dumps(got)
    assert b"secret-000002|" in blob and b"secret-010001|" in blob
    for i in gone:
        assert f"secret-{i:06d}|".encode() not in blob


def test_unscrubbable_columns_are_copied() -> None:
    t = pa.table({"xs": pa.array([[i] for i in range(10_000)])})  # nested: not scrubbed
    got = drop_rows(t, pa.array([i != 5 for i in range(10_000)], pa.bool_()))
    assert got.column("xs").num_chunks == 1 and got.num_rows == 9_999
    assert [5] not in got.column("xs").to_pylist()


def test_no_columns_keep_the_row_count() -> None:
    t = group(10_000).select([])
    assert drop_rows(t, pa.array([i != 3 for i in range(10_000)], pa.bool_())).num_rows == 9_999


def test_all_deleted_shares_no_buffer() -> None:
    t = group(10_000)
    got = drop_rows(t, pa.array([False] * 10_000, pa.bool_()))
    assert got.num_rows == 0 and got.schema == t.schema
    assert b"secret-" not in pickle.dumps(got)


ROWS = 60_000


def one_file_table(uri: str) -> lethe.Table:
    """``events(0, ROWS)`` in one file of several row groups (about 150 kB each)."""
    t = lethe.Table.create(
        uri, EVENTS, key="id", target_file_bytes=64 << 20, row_group_bytes=150_000
    )
    t.append(events(0, ROWS))
    return t


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_scan_after_random_deletes_equals_plain_table(bucket: str, data: st.DataObject) -> None:
    t = one_file_table(f"s3://{bucket}/t{uuid.uuid4().hex[:8]}")
    (f,) = t.manifest.files
    sizes = [rg.rows for rg in f.row_groups]
    assert len(sizes) >= 3
    gone: set[int] = set()
    first = 0
    for n in sizes:  # each group its own pattern: the paths mix within one scan
        gone |= {first + p for p in data.draw(positions(n))}
        first += n
    if gone:
        assert t.delete([("id", "in", sorted(gone))]).rows_deleted == len(gone)
    got = lethe.Table.open(t.uri).scan()
    plain = events(0, ROWS)
    want = plain.filter(pc.invert(pc.is_in(plain["id"], pa.array(sorted(gone), pa.int64()))))
    assert got.schema.remove_metadata() == EVENTS
    assert got.replace_schema_metadata(None).equals(want)
    text = b"".join(
        bytes(b) for b in distinct_buffers(got, "payload", 2)
    )  # the payloads the result's buffers hold: the kept rows' only
    assert text.count(b"payload-") == ROWS - len(gone)


@pytest.fixture
def sparse_table(bucket: str) -> Any:
    return one_file_table(f"s3://{bucket}/sparse")


def test_sparse_deletes_scan_as_slices_and_filtered_scans_agree(sparse_table: Any) -> None:
    t = sparse_table
    groups = len(t.manifest.files[0].row_groups)
    t.delete([("id", "in", [0, 7, 30_001, ROWS - 1])])
    got = lethe.Table.open(t.uri).scan()
    assert got.num_rows == ROWS - 4
    assert got.column("id").num_chunks > groups  # sliced around the deletes
    assert not set(got["id"].to_pylist()) & {0, 7, 30_001, ROWS - 1}
    f = lethe.Table.open(t.uri).scan(["id", "payload"], [("customer_id", "=", 7)])
    assert f["id"].to_pylist() == [i for i in range(ROWS) if i % 100 == 7 and i != 7]


def test_scan_of_no_columns_counts_the_live_rows(sparse_table: Any) -> None:
    sparse_table.delete([("id", "in", [5, 40_000])])
    got = lethe.Table.open(sparse_table.uri).scan([])
    assert got.num_columns == 0 and got.num_rows == ROWS - 2
