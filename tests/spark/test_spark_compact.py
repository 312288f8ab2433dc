"""The Spark compaction job on local Spark against moto's server."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EVENTS, SPARK_MARKS, events

import lethe
from lethe.audit.verify import verify
from lethe.dv.store import load
from lethe.maintenance.compaction import CompactionOptions
from spark_jobs.compact import main, run_compaction, spark_runner

pytestmark = SPARK_MARKS


@pytest.fixture
def table(table_uri: str) -> lethe.Table:
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", target_file_bytes=1_000_000, row_group_bytes=150_000
    )
    for start in (0, 50_000, 100_000):
        t.append(events(start, 50_000))
    return t


def test_file_with_60_percent_deleted_is_rewritten_by_spark(
    spark: Any, table: lethe.Table, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = table.manifest.files[1]
    assert (victim.columns["id"].min, victim.rows) == (50_000, 50_000)
    table.delete([("id", ">=", 50_000), ("id", "<", 80_000)])  # 60% of the middle file
    before = table.scan().sort_by("id")

    assert main(["--table", table.uri, "--dry-run"]) == 0  # plans only, commits nothing
    plan = capsys.readouterr().out
    assert victim.path in plan and "60% deleted" in plan
    assert lethe.Table.open(table.uri).version == table.version

    r = run_compaction(table.uri, 0.2, spark=spark)
    assert (r.groups_committed, r.files_removed, r.files_added) == (1, 1, 1)
    assert (r.deleted_rows_purged, r.rows_rewritten) == (30_000, 20_000)
    fresh = lethe.Table.open(table.uri)
    assert fresh.version == table.version + 1 and fresh.history()[0].operation == "compact"
    assert victim.path not in {f.path for f in fresh.manifest.files}
    assert all(f.dv is None for f in fresh.manifest.files)  # the DV is gone with its file
    assert fresh.scan().sort_by("id").equals(before)
    new = next(f for f in fresh.manifest.files if f.added_version == fresh.version)
    assert new.sorted_by_key and new.columns["id"].min == 80_000 and new.rows == 20_000
    assert verify(fresh).ok


def test_delete_committed_while_the_job_runs_survives(spark: Any, table: lethe.Table) -> None:
    table.delete([("id", "<", 30_000)])  # 60% of the first file
    late = [30_000, 31_234, 49_999]

    def concurrent_delete() -> None:  # lands after the rewrite, before the commit
        other = lethe.Table.open(table.uri)
        assert other.delete([("id", "in", late)]).rows_deleted == 3

    def rewrite_then_delete(tasks: Any) -> Any:  # the job's Spark runner, then the delete
        out = spark_runner(spark)(tasks)
        concurrent_delete()
        return out

    r = lethe.Table.open(table.uri).compact(
        CompactionOptions(min_deleted_fraction=0.2), run_tasks=rewrite_then_delete
    )
    assert r.version is not None and r.concurrent_deletes_mapped == 3
    fresh = lethe.Table.open(table.uri)
    ids = sorted(fresh.scan(["id"])["id"].to_pylist())
    assert ids == [i for i in range(30_000, 150_000) if i not in late]
    for k in late:
        assert fresh.lookup(k).num_rows == 0
    new = next(f for f in fresh.manifest.files if f.added_version == fresh.version)
    assert new.dv is not None and sorted(load(fresh.store, fresh.catalog.prefix, new.dv)) == [
        k - 30_000 for k in late
    ]
    assert verify(fresh).ok


def test_a_clustered_table_is_laid_out_by_spark(spark: Any, table_uri: str) -> None:
    from lethe.maintenance.clustering import ClusterSpec, file_windows

    t = lethe.Table.create(
        table_uri + "c",
        EVENTS,
        key="id",
        cluster_by="customer_id",
        cluster_window="1h",
        target_file_bytes=1_000_000,
        row_group_bytes=150_000,
    )
    for start in (0, 10_000, 20_000):
        t.append(events(start, 10_000, customers=40))
    before = t.scan().sort_by("id")
    r = run_compaction(t.uri, spark=spark)
    assert r.version is not None and r.plan.cluster is not None and r.files_added >= 8
    fresh = lethe.Table.open(t.uri)
    assert fresh.scan().sort_by("id").equals(before)
    spec = ClusterSpec.of(fresh.manifest.properties)
    assert spec is not None
    schema = fresh.manifest.arrow_schema()
    for f in fresh.manifest.files:
        w = file_windows(f, spec, schema)
        assert f.sort_order_id == 1 and w is not None and w[0] == w[1]
    assert verify(fresh).ok
