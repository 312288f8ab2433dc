"""Compaction without Spark: planning, the position map, the CAS commit with concurrent deletes,
erasures and DV-container coalescing (the rewrite runs in-process on moto's server)."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from conftest import EVENTS, events
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

import lethe
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.manifest import (
    DataFile,
    DVRef,
    Operation,
    RowGroupInfo,
    TableProperties,
    initial_manifest,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import apply_append
from lethe.dv.store import load
from lethe.erasure.deletes import DeleteRequest
from lethe.maintenance.compaction import (
    CompactionOptions,
    map_deletes,
    plan_compaction,
    run_rewrite_task,
)

SMALL = {"target_file_bytes": 200_000, "row_group_bytes": 40_000}


def ids(t: lethe.Table) -> list[int]:
    return t.scan(["id"])["id"].to_pylist()


def sorted_ids(t: lethe.Table) -> list[int]:
    return sorted(ids(t))


# --- the position map ----------------------------------------------------------------------------
@st.composite
def groups(draw: Any) -> tuple[list[tuple[int, BitMap64, BitMap64]], list[int]]:
    sources = []
    for _ in range(draw(st.integers(1, 4))):
        rows = draw(st.integers(0, 40))
        old = set(draw(st.sets(st.integers(0, max(0, rows - 1)), max_size=rows))) if rows else set()
        live = [p for p in range(rows) if p not in old]
        new = set(draw(st.sets(st.sampled_from(live), max_size=len(live)))) if live else set()
        sources.append((rows, BitMap64(old), BitMap64(old | new)))
    total = sum(r - len(o) for r, o, _ in sources)
    cuts = sorted(draw(st.lists(st.integers(0, total), max_size=3)))
    bounds = [0, *cuts, total]
    return sources, [b - a for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(groups())
def test_map_deletes_matches_a_brute_force_model(
    g: tuple[list[tuple[int, BitMap64, BitMap64]], list[int]],
) -> None:
    sources, outputs = g
    # the rewrite, literally: concatenate each source's rows that were live at plan time
    order = [
        (s, p) for s, (rows, old, _) in enumerate(sources) for p in range(rows) if p not in old
    ]
    deleted_now = {(s, p) for s, (_, old, now) in enumerate(sources) for p in now - old}
    want: list[set[int]] = []
    start = 0
    for n in outputs:
        want.append({i - start for i in range(start, start + n) if order[i] in deleted_now})
        start += n
    got = map_deletes(sources, outputs)
    assert [set(b) for b in got] == want


def test_map_deletes_refuses_a_shrinking_dv_and_bad_counts() -> None:
    with pytest.raises(errors.CommitConflict, match="lost positions"):
        map_deletes([(4, BitMap64([1, 2]), BitMap64([1]))], [2])
    with pytest.raises(errors.CommitConflict, match="rows"):
        map_deletes([(4, BitMap64(), BitMap64())], [3])
    with pytest.raises(errors.CommitConflict, match="beyond"):
        map_deletes([(4, BitMap64(), BitMap64([7]))], [4])


# --- planning (pure) -------------------------------------------------------------------------------
def _file(
    path: str, size: int, rows: int, deleted: int, kmin: int, container: str | None = None
) -> DataFile:
    dv = (
        DVRef(
            container=container or f"tombstone/{path}.dv",
            offset=4,
            length=10,
            cardinality=deleted,
            crc32=0,
        )
        if deleted
        else None
    )
    return DataFile(
        path=path,
        size=size,
        etag='"e"',
        rows=rows,
        row_groups=(RowGroupInfo(rows=rows, offset=4, length=size),),
        columns={"id": {"min": kmin, "max": kmin + rows - 1, "null_count": 0}},
        dv=dv,
        added_version=1,
    )


def _manifest(*files: DataFile) -> Any:
    m = initial_manifest(
        table_uuid="u",
        schema=pa.schema([("id", pa.int64())]),
        properties=TableProperties(key="id", target_file_bytes=1000, row_group_bytes=100),
    )
    return apply_append(Snapshot(m), files, Operation(kind="append"))


def test_plan_picks_deleted_and_small_files_and_bins_them_by_key() -> None:
    m = _manifest(
        _file("big-clean", 1000, 100, 0, 0),
        _file("big-60", 1000, 100, 60, 100),
        _file("big-10", 1000, 100, 10, 200),
        _file("small-b", 200, 20, 0, 400),
        _file("small-a", 200, 20, 0, 300),
        _file("empty", 500, 50, 50, 500),
        _file("lonely-small", 100, 10, 0, 10_000),
    )
    plan = plan_compaction(m, CompactionOptions(min_deleted_fraction=0.2))
    got = [[f.path for f in g.files] for g in plan.groups]
    # 60% deleted (400 B live) + the small files in key order + the fully deleted one
    assert got == [["big-60", "small-a", "small-b", "empty", "lonely-small"]], got
    assert plan.groups[0].reasons == ("60% deleted", "small", "small", "all rows deleted", "small")
    assert plan.groups[0].live_rows == 40 + 20 + 20 + 10
    text = plan.describe()
    assert "big-60" in text and "60% deleted" in text and "big-clean" not in text
    # a higher threshold leaves the 60% file alone, and a lone small file is never rewritten
    plan = plan_compaction(m, CompactionOptions(min_deleted_fraction=0.7))
    assert [[f.path for f in g.files] for g in plan.groups] == [
        ["small-a", "small-b", "empty", "lonely-small"]
    ]
    solo = plan_compaction(_manifest(_file("s", 10, 5, 0, 0)), CompactionOptions())
    assert solo.empty


def test_plan_bins_do_not_grow_past_the_target() -> None:
    files = [_file(f"f{i}", 300, 30, 0, i * 30) for i in range(10)]
    plan = plan_compaction(_manifest(*files), CompactionOptions(small_file_fraction=0.5))
    assert [len(g.files) for g in plan.groups] == [3, 3, 3]  # the 10th alone is dropped
    assert all(g.estimated_bytes <= 1100 for g in plan.groups)


def test_plan_coalesces_dv_containers_of_untouched_files() -> None:
    files = [
        _file(f"f{i}", 1000, 100, 5, i * 100, container=f"tombstone/c{i}.dv") for i in range(5)
    ]
    m = _manifest(*files)
    assert plan_compaction(m, CompactionOptions(coalesce_dv_containers=6)).coalesce == ()
    plan = plan_compaction(m, CompactionOptions(coalesce_dv_containers=5))
    assert {f.path for f in plan.coalesce} == {f"f{i}" for i in range(5)}
    assert plan.dv_containers == 5 and "coalesce the DVs of 5" in plan.describe()
    with pytest.raises(errors.InvalidRequest):
        CompactionOptions(min_deleted_fraction=0)


# --- end to end on moto (in-process rewrite) ---------------------------------------------------------
@pytest.fixture
def table(table_uri: str) -> lethe.Table:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    for start in (0, 10_000, 20_000):
        t.append(events(start, 10_000))
    return t


def test_file_with_60_percent_deleted_is_rewritten_and_scans_do_not_change(
    table: lethe.Table,
) -> None:
    victim = table.manifest.files[1]
    lo = victim.columns["id"].min
    assert isinstance(lo, int)
    table.delete([("id", ">=", lo), ("id", "<", lo + int(victim.rows * 0.6))])
    before = sorted_ids(table)
    before_full = table.scan().sort_by("id")
    r = table.compact(CompactionOptions(min_deleted_fraction=0.2, coalesce_dv_containers=None))
    assert r.version == table.version and r.groups_committed == 1
    assert r.files_removed == 1 and r.files_added == 1
    assert r.deleted_rows_purged == int(victim.rows * 0.6)
    assert r.rows_rewritten == victim.rows - r.deleted_rows_purged
    assert victim.path not in {f.path for f in table.manifest.files}
    assert all(f.dv is None for f in table.manifest.files)
    fresh = lethe.Table.open(table.uri)
    assert sorted_ids(fresh) == before
    assert fresh.scan().sort_by("id").equals(before_full)
    new = [f for f in fresh.manifest.files if f.added_version == fresh.version]
    assert len(new) == 1 and new[0].sorted_by_key and new[0].rows == r.rows_rewritten
    assert fresh.history()[0].operation == "compact"
    assert verify(fresh).ok
    # nothing left to do: a second run commits nothing
    again = fresh.compact(CompactionOptions(min_deleted_fraction=0.2))
    assert again.version is None and again.plan.empty


def rewrite_then(table: lethe.Table, meanwhile: Any) -> Any:
    """``run_tasks`` that rewrites in this process, then runs ``meanwhile`` (another writer's
    commit, landing between the rewrite and the compaction's commit)."""

    def run(tasks: Any) -> list[list[Any]]:
        out = [run_rewrite_task(t, store=table.store) for t in tasks]
        meanwhile()
        return out

    return run


def test_delete_committed_while_compacting_is_mapped_onto_the_new_file(
    table: lethe.Table,
) -> None:
    victim = table.manifest.files[0]
    table.delete([("id", "<", 6_000)])  # 60% of the first file
    late = [6_001, 7_777, 9_999]

    def concurrent_delete() -> None:  # another writer, between the rewrite and the commit
        other = lethe.Table.open(table.uri)
        assert other.delete([("id", "in", late)], request_id="late").rows_deleted == 3

    r = table.compact(
        CompactionOptions(min_deleted_fraction=0.2, coalesce_dv_containers=None),
        run_tasks=rewrite_then(table, concurrent_delete),
    )
    assert r.concurrent_deletes_mapped == 3 and r.version == table.version
    fresh = lethe.Table.open(table.uri)
    assert victim.path not in {f.path for f in fresh.manifest.files}
    want = [i for i in range(6_000, 30_000) if i not in late]
    assert sorted_ids(fresh) == want
    new = next(f for f in fresh.manifest.files if f.added_version == fresh.version)
    assert new.dv is not None and new.dv.cardinality == 3
    # the mapped positions are exactly the rows of the late keys
    keys = fresh.scan(["id"], [("id", "<", 10_000)])["id"].to_pylist()
    assert set(keys) == set(range(6_000, 10_000)) - set(late)
    dv = load(fresh.store, fresh.catalog.prefix, new.dv)
    assert sorted(dv) == [k - 6_000 for k in late]
    assert verify(fresh).ok
    # the late delete stays idempotent after the compaction
    assert fresh.delete([("id", "in", late)], request_id="late").duplicate


def test_group_whose_source_vanished_is_skipped_and_its_outputs_deleted(
    table: lethe.Table,
) -> None:
    table.delete([("id", "<", 6_000)])
    first = table.manifest.files[0].path

    def racing_compaction() -> None:
        other = lethe.Table.open(table.uri)
        assert other.compact(CompactionOptions(coalesce_dv_containers=None)).version is not None

    r = table.compact(
        CompactionOptions(coalesce_dv_containers=None),
        run_tasks=rewrite_then(table, racing_compaction),
    )
    assert r.version is None and r.groups_skipped == 1
    fresh = lethe.Table.open(table.uri)
    assert first not in {f.path for f in fresh.manifest.files}
    assert sorted_ids(fresh) == list(range(6_000, 30_000))
    data = {o.key for o in table.store.list(table.key_of("data/"))}
    live = {table.key_of(f.path) for f in fresh.manifest.files}
    assert len(data - live) == 1  # only the replaced original (GC's job), not our output


def test_small_files_are_binned_in_key_order(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", target_file_bytes=2_000_000)
    for start in (3_000, 0, 2_000, 1_000):  # appended out of key order
        t.append(events(start, 1_000))
    r = t.compact()
    assert (r.files_removed, r.files_added) == (4, 1)
    f = t.manifest.files[0]
    assert f.sorted_by_key and ids(t) == list(range(4_000))


def test_erasures_are_met_by_compaction_or_moved_to_the_new_file(table: lethe.Table) -> None:
    victim = table.manifest.files[0].path
    table.delete_batch([DeleteRequest([("id", "<", 6_000)], "erase-1", erase=True)])
    assert [e.state for e in table.manifest.erasures] == ["pending"]

    def concurrent_erase() -> None:
        other = lethe.Table.open(table.uri)
        other.delete_batch([DeleteRequest([("id", "=", 8_000)], "erase-2", erase=True)])

    table.compact(
        CompactionOptions(coalesce_dv_containers=None),
        run_tasks=rewrite_then(table, concurrent_erase),
    )
    e1, e2 = table.manifest.erasures
    assert e1.state == "spliced" and e1.spliced_version == table.version
    assert victim in table.manifest.superseded_of(e1) and e1.targets == ()
    # erase-2 landed after the plan: its row now lives (hidden by a DV) in the new file
    new = next(f for f in table.manifest.files if f.added_version == table.version)
    assert e2.state == "pending" and victim in table.manifest.superseded_of(e2)
    assert [t.path for t in e2.targets] == [new.path]
    assert new.dv is not None and new.dv.cardinality == 1


def test_dv_containers_of_untouched_files_are_coalesced(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", **SMALL)
    for start in range(0, 50_000, 10_000):
        t.append(events(start, 10_000))
    for start in range(0, 50_000, 10_000):  # one small delete (its own container) per file
        t.delete([("id", "=", start + 5)])
    containers = {f.dv.container for f in t.manifest.files if f.dv}
    assert len(containers) == 5
    before = sorted_ids(t)
    plan_only = t.compact(CompactionOptions(coalesce_dv_containers=4), dry_run=True)
    assert plan_only.version is None and len(plan_only.plan.coalesce) == 5
    assert t.version == 10 == lethe.Table.open(t.uri).version  # the dry run committed nothing
    r = t.compact(CompactionOptions(coalesce_dv_containers=4))
    assert r.dvs_coalesced == 5 and r.files_removed == 0
    assert len({f.dv.container for f in t.manifest.files if f.dv}) == 1
    fresh = lethe.Table.open(t.uri)
    assert sorted_ids(fresh) == before and verify(fresh).ok
