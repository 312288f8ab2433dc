"""A layout for forgetting (issue 26): ``cluster_by`` with time windows, laid out by compaction."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.audit.verify import verify
from lethe.erasure.deletes import DeleteRequest
from lethe.maintenance.clustering import (
    SORT_ORDER_ID,
    ClusterSpec,
    cluster_order,
    cluster_properties,
    file_windows,
    subject_cuts,
    window_ids,
)
from lethe.maintenance.compaction import CompactionOptions, run_rewrite_task
from tests.engines import iceberg_view

SMALL = {"target_file_bytes": 200_000, "row_group_bytes": 40_000}
HOUR_US = 3_600_000_000


def rows(t: lethe.Table) -> Counter[tuple[Any, ...]]:
    s = t.scan()
    return Counter(zip(*(s.column(n).to_pylist() for n in s.column_names), strict=True))


def clustered(table_uri: str, **extra: Any) -> lethe.Table:
    """A table clustered by customer in 1-hour windows, small files; ``extra`` properties."""
    return lethe.Table.create(
        table_uri, EVENTS, key="id", cluster_by="customer_id", cluster_window="1h", **SMALL, **extra
    )


@pytest.fixture
def table(table_uri: str) -> lethe.Table:
    t = clustered(table_uri)
    for start in (0, 10_000, 20_000):  # time-ordered appends, each spanning ~3 hours
        t.append(events(start, 10_000, customers=50))
    return t


def test_create_validates_the_clustering() -> None:
    s = pa.schema([("t", pa.timestamp("us")), ("d", pa.date32()), ("c", pa.int64())])
    with pytest.raises(errors.InvalidRequest, match="not in the schema"):
        cluster_properties(s, ["nope"], None)
    with pytest.raises(errors.InvalidRequest, match="2 timestamp/date columns"):
        cluster_properties(s, ["c"], "1d")
    with pytest.raises(errors.InvalidRequest, match="not a timestamp or date"):
        cluster_properties(s, ["c"], ("c", "1d"))
    with pytest.raises(errors.InvalidRequest, match="needs cluster_by"):
        cluster_properties(s, None, "1d")
    with pytest.raises(errors.InvalidRequest, match="twice"):
        cluster_properties(s, ["c", "c"], None)
    assert cluster_properties(s, "c", ("d", "2d")) == {
        "cluster_by": ("c",),
        "cluster_time_column": "d",
        "cluster_window_seconds": 172_800,
    }


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.integers(-5 * HOUR_US, 5 * HOUR_US)),
            st.one_of(st.none(), st.integers(0, 4)),
        ),
        max_size=60,
    )
)
def test_cluster_order_sorts_by_window_then_subject_and_is_stable(
    data: list[tuple[int | None, int | None]],
) -> None:
    t = pa.table(
        {
            "t": pa.array([d[0] for d in data], pa.timestamp("us")),
            "c": pa.array([d[1] for d in data], pa.int64()),
        }
    )
    spec = ClusterSpec(columns=("c",), time_column="t", window_seconds=3600)
    order = cluster_order(t, spec)
    assert sorted(order.tolist()) == list(range(len(data)))  # a permutation
    win = window_ids(t, spec)

    def key(i: int) -> tuple[int, int, int, int]:
        c = data[i][1]
        w = data[i][0]
        expected_w = np.iinfo(np.int64).max if w is None else w // HOUR_US  # floor, also < 0
        assert win[i] == expected_w
        return (int(expected_w), c is None, c or 0, i)  # nulls last; ties in input order

    assert order.tolist() == sorted(range(len(data)), key=key)


def _read(t: lethe.Table, path: str) -> pa.Table:
    return pq.read_table(pa.BufferReader(t.store.get(t.key_of(path)).body))


def test_compaction_lays_out_windows_sorted_by_subject(table: lethe.Table) -> None:
    before = rows(table)
    spec = ClusterSpec.of(table.manifest.properties)
    assert spec == ClusterSpec(("customer_id",), "event_time", 3600)
    r = table.compact()
    assert r.version == table.version and r.plan.cluster == spec
    assert all(g.cluster for g in r.plan.groups)
    assert rows(table) == before  # the same rows, nothing lost or added
    schema = table.manifest.arrow_schema()
    seen: set[int] = set()
    for f in table.manifest.files:
        assert f.sort_order_id == SORT_ORDER_ID
        w = file_windows(f, spec, schema)
        assert w is not None and w[0] == w[1]  # one window per file
        seen.add(w[0])
        c = _read(table, f.path).column("customer_id").to_numpy()
        assert (np.diff(c) >= 0).all()  # sorted by the subject
    assert len(seen) >= 8  # 30,000 seconds of events: about 9 one-hour windows
    assert verify(lethe.Table.open(table.uri)).ok
    # clustered: nothing left to do, however small the windows' files are
    assert table.compact().plan.empty


def test_one_subject_sits_in_one_file_per_window(table: lethe.Table) -> None:
    table.compact()
    spec = ClusterSpec.of(table.manifest.properties)
    assert spec is not None
    schema = table.manifest.arrow_schema()
    windows = {file_windows(f, spec, schema) for f in table.manifest.files}
    holding = [
        f
        for f in table.manifest.files
        if _read(table, f.path)
        .filter(pa.compute.equal(pa.compute.field("customer_id"), 7))
        .num_rows
    ]
    assert len(holding) <= len(windows)
    assert len({file_windows(f, spec, schema) for f in holding}) == len(holding)
    before = rows(table)
    r = table.erase([("customer_id", "=", 7)], request_id="gdpr-7")
    assert r.rows_deleted == sum(n for k, n in before.items() if k[2] == 7)
    after = rows(table)
    assert (
        all(k[2] != 7 for k in after)
        and sum(after.values()) == sum(before.values()) - r.rows_deleted
    )


def test_a_late_append_reclusters_only_its_window(table: lethe.Table) -> None:
    table.compact()
    clustered = {f.path for f in table.manifest.files}
    late = events(30_000, 200, customers=50)  # past the last window: a window of its own...
    table.append(late)
    plan = table.compact(dry_run=True).plan
    # ...plus the last window, which the late rows share with the third append
    rewritten = {f.path for g in plan.groups for f in g.files}
    assert 1 <= len(rewritten & clustered) <= 2 and plan.files < len(table.manifest.files)
    assert "not clustered" in {why for g in plan.groups for why in g.reasons}
    before = rows(table)
    table.compact()
    assert rows(table) == before and all(f.sort_order_id == 1 for f in table.manifest.files)


def test_delete_landing_while_clustering_is_mapped_through_the_permutation(
    table: lethe.Table,
) -> None:
    table.delete([("id", "<", 2_000)])
    late = [2_001, 9_876, 15_000, 29_999]

    def run(tasks: Any) -> list[list[Any]]:
        out = [run_rewrite_task(t, store=table.store) for t in tasks]
        other = lethe.Table.open(table.uri)  # another writer, between rewrite and commit
        assert other.delete([("id", "in", late)], request_id="late").rows_deleted == 4
        return out

    r = table.compact(CompactionOptions(coalesce_dv_containers=None), run_tasks=run)
    assert r.concurrent_deletes_mapped == 4 and r.version == table.version
    fresh = lethe.Table.open(table.uri)
    want = sorted(set(range(2_000, 30_000)) - set(late))
    assert sorted(fresh.scan(["id"])["id"].to_pylist()) == want
    assert sum(f.dv.cardinality for f in fresh.manifest.files if f.dv) == 4
    assert verify(fresh).ok


def test_erasure_landing_while_clustering_follows_its_rows(table: lethe.Table) -> None:
    def run(tasks: Any) -> list[list[Any]]:
        out = [run_rewrite_task(t, store=table.store) for t in tasks]
        other = lethe.Table.open(table.uri)
        req = DeleteRequest([("id", "in", [123, 24_680])], "e-late", erase=True)
        other.delete_batch([req])
        return out

    table.compact(CompactionOptions(coalesce_dv_containers=None), run_tasks=run)
    (e,) = table.manifest.erasures
    assert e.state == "pending" and len(e.targets) >= 1
    assert {t.path for t in e.targets} <= {f.path for f in table.manifest.files}
    table.purge()
    fresh = lethe.Table.open(table.uri)
    ids = fresh.scan(["id"])["id"].to_pylist()
    assert 123 not in ids and 24_680 not in ids and len(ids) == 30_000 - 2
    for f in fresh.manifest.files:  # physically gone, not only hidden
        assert not set(_read(fresh, f.path).column("id").to_pylist()) & {123, 24_680}


def test_cluster_can_be_turned_off_per_run_and_is_refused_without_cluster_by(
    table_uri: str, table: lethe.Table
) -> None:
    plain = lethe.Table.create(table_uri + "p", EVENTS, key="id", **SMALL)
    plain.append(events(0, 1_000))
    with pytest.raises(errors.InvalidRequest, match="cluster_by"):
        plain.compact(CompactionOptions(cluster=True))
    assert table.compact(CompactionOptions(cluster=False)).plan.cluster is None


def test_the_iceberg_view_publishes_the_sort_order(table: lethe.Table, aws: Any) -> None:
    table.compact()
    uri = table.publish_iceberg()
    view = iceberg_view(aws, uri)
    order = view.sort_order()
    assert order.order_id == SORT_ORDER_ID
    (field,) = order.fields
    assert view.schema().find_column_name(field.source_id) == "customer_id"
    files = list(view.scan().plan_files())
    assert files and all(f.file.sort_order_id == SORT_ORDER_ID for f in files)
    got = view.scan().to_arrow()
    assert got.num_rows == 30_000 and got.schema.names == EVENTS.names


def test_the_cli_creates_a_clustered_table_and_compacts_it(
    table_uri: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from lethe.cli import main

    src = tmp_path / "events.parquet"
    pq.write_table(events(0, 8_000, customers=20), src)
    args = ["create", table_uri, "--schema", str(src), "--cluster-by", "customer_id"]
    assert main([*args, "--cluster-window", "event_time=1h"]) == 0
    assert main(["append", table_uri, str(src)]) == 0
    capsys.readouterr()
    assert main(["compact", table_uri, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "clustering by customer_id in windows of 1h of event_time" in out
    assert "(cluster)" in out and "not clustered" in out
    assert main(["compact", table_uri]) == 0
    assert "groups" in capsys.readouterr().out
    t = lethe.Table.open(table_uri)
    assert len(t.manifest.files) >= 3 and all(f.sort_order_id == 1 for f in t.manifest.files)
    assert main(["create", table_uri + "x", "--schema", str(src), "--cluster-window", "1d"]) == 2
    assert "needs cluster_by" in capsys.readouterr().err


def test_append_sorts_a_batch_by_window_and_subject(table: lethe.Table) -> None:
    spec = ClusterSpec.of(table.manifest.properties)
    assert spec is not None
    for f in table.manifest.files:  # appended unsorted (customer = id % 50), written sorted
        got = _read(table, f.path).select(["event_time", "customer_id"])
        assert np.array_equal(cluster_order(got, spec), np.arange(got.num_rows))
        assert f.sort_order_id is None  # a window is clustered by compaction, not by append
    assert sorted(table.scan(["id"])["id"].to_pylist()) == list(range(30_000))
    assert table.scan(["id"], [("customer_id", "=", 7)]).num_rows == 600


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.one_of(st.none(), st.integers(0, 6))), max_size=50),
    st.one_of(st.none(), st.integers(1, 4)),
)
def test_subject_cuts_never_split_a_subject_nor_a_window(
    data: list[tuple[int, int | None]], per_file: int | None
) -> None:
    t = pa.table(
        {
            "t": pa.array([d[0] * HOUR_US for d in data], pa.timestamp("us")),
            "c": pa.array([d[1] for d in data], pa.int64()),
        }
    )
    spec = ClusterSpec(columns=("c",), time_column="t", window_seconds=3600, file_subjects=per_file)
    t = t.take(pa.array(cluster_order(t, spec)))
    cuts = subject_cuts(t, spec)
    assert cuts[0] == 0 and cuts[-1] == len(data) and cuts == sorted(set(cuts))
    pairs = list(zip(t.column("t").to_pylist(), t.column("c").to_pylist(), strict=True))
    files = [pairs[a:b] for a, b in pairwise(cuts)]
    where: dict[Any, int] = {}
    for i, f in enumerate(files):
        assert f and len({w for w, _ in f}) == 1  # one window per file
        subjects = {(w, c) for w, c in f}
        assert per_file is None or len(subjects) <= per_file
        for s in subjects:
            assert where.setdefault(s, i) == i  # a subject of a window in one file only


def test_files_hold_a_bounded_number_of_subjects(table_uri: str) -> None:
    t = clustered(table_uri, cluster_file_subjects=10)
    for start in (0, 10_000):
        t.append(events(start, 10_000, customers=50))
    before = rows(t)
    t.compact()
    assert rows(t) == before
    spec = ClusterSpec.of(t.manifest.properties)
    assert spec is not None and spec.file_subjects == 10
    schema = t.manifest.arrow_schema()
    per_window: dict[Any, list[int]] = {}
    for f in t.manifest.files:
        held = np.unique(_read(t, f.path).column("customer_id").to_numpy())
        assert len(held) <= 10
        per_window.setdefault(file_windows(f, spec, schema), []).extend(held.tolist())
    for held in per_window.values():  # no customer in two files of one window
        assert len(held) == len(set(held))
    assert len(t.manifest.files) >= 5 * len(per_window)  # 50 customers, 10 per file


def test_a_spliced_clustered_file_stays_clustered(table: lethe.Table) -> None:
    table.compact()
    table.erase([("customer_id", "=", 3)], request_id="gdpr-3")
    assert all(f.sort_order_id == SORT_ORDER_ID for f in table.manifest.files)
    assert table.compact().plan.empty  # an erasure does not make a window re-cluster


def test_compaction_drops_the_index_runs_of_the_files_it_replaced(table_uri: str) -> None:
    t = clustered(table_uri, indexes=("customer_id",))
    for start in (0, 10_000, 20_000):
        t.append(events(start, 10_000, customers=50))
    ix = t.manifest.index("customer_id")
    assert ix is not None and sum(r.entries for r in ix.runs) == 30_000
    t.compact()
    ix = t.manifest.index("customer_id")
    assert ix is not None
    # the appends' runs named only the replaced files: gone, not doubled with the new run
    assert sum(r.entries for r in ix.runs) == 30_000
    live = {f.index_version for f in t.manifest.files}
    assert all(any(r.covers_version(v) for v in live) for r in ix.runs)
    assert t.scan(["id"], [("customer_id", "=", 7)]).num_rows == 600
    assert verify(lethe.Table.open(table_uri), deep=True).ok
