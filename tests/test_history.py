"""History that survives erasure (issue 39): versions from before an erasure read through
the splice's lineage (the replacement file, the version's DV mapped), minus the erased rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import EVENTS, events

import lethe
from lethe.catalog.manifest import LINEAGE_FORMAT_VERSION, decode_manifest
from lethe.gc import collect


def ids(t: pa.Table) -> list[int]:
    return sorted(t.column("id").to_pylist())


def people(start: int, n: int, customers: int = 5) -> pa.Table:
    return events(start, n, customers=customers)


@pytest.fixture
def history(table_uri: str) -> tuple[lethe.Table, dict[int, list[int]]]:
    """Three appends, a delete: versions 1..4 and the ids each reads."""
    t = lethe.Table.create(table_uri, EVENTS, key="customer_id")
    model: dict[int, list[int]] = {}
    for start in (0, 20, 40):
        t.append(people(start, 20))
        model[t.version] = list(range(0, start + 20))
    t.delete([("id", "in", [3, 41])])
    model[t.version] = [i for i in range(60) if i not in (3, 41)]
    return t, model


def test_an_old_version_reads_minus_the_person_erased_after_it(history: tuple) -> None:
    """Issue 39 item 1: time travel after an erase returned the person's rows; it returns the
    version's rows minus the erased ones (its own DV mapped), the replacement's stats prune.
    A splice removes only the erased rows: rows 3 and 41, deleted (not erased) after
    versions 1..3, still read in them (docs/format.md §6b)."""
    t, model = history
    t.erase([("customer_id", "=", 2)], request_id="gone-2")
    erased = {i for i in range(60) if i % 5 == 2}
    for v, want in model.items():
        old = lethe.Table.open(t.uri, version=v)
        assert ids(old.scan()) == sorted(set(want) - erased), v
        got = old.scan(filters=[("customer_id", "=", 2)])
        assert got.num_rows == 0
        ones = [i for i in want if i % 5 == 1 and i not in erased]
        assert ids(old.scan(filters=[("customer_id", "=", 1)])) == ones
        assert old.lookup(2).num_rows == 0
        assert ids(old.lookup(1)) == ones
        reader = t.to_arrow_reader(version=v)
        assert ids(reader.read_all()) == sorted(set(want) - erased)
    root = t.store.get(t.key_of(f"manifest/v{t.version:08d}.json")).body
    assert decode_manifest(root).format_version == LINEAGE_FORMAT_VERSION


def test_chains_of_erasures_collapse(history: tuple) -> None:
    """Issue 39 item 1: through several erasures (a file spliced twice, the lineage maps it
    straight to the newest replacement) and a compaction of the replacements after them."""
    t, model = history
    t.erase([("customer_id", "=", 2)], request_id="gone-2")
    v_mid = t.version
    mid = ids(t.scan())
    t.erase([("customer_id", "=", 4)], request_id="gone-4")
    t.compact()
    erased = {i for i in range(60) if i % 5 in (2, 4)}
    for v, want in model.items():
        assert ids(lethe.Table.open(t.uri, version=v).scan()) == sorted(set(want) - erased), v
    assert ids(lethe.Table.open(t.uri, version=v_mid).scan()) == [i for i in mid if i not in erased]
    assert pc.sum(lethe.Table.open(t.uri).scan()["id"]).as_py() == sum(
        i for i in range(60) if i not in erased and i not in (3, 41)
    )


SCHEMA = pa.schema([("id", pa.int64(), False), ("customer", pa.string()), ("note", pa.string())])


def rows(start: int, n: int) -> pa.Table:
    ids_ = list(range(start, start + n))
    return pa.table(
        {
            "id": ids_,
            "customer": [f"c{i % 5}" for i in ids_],
            "note": [f"n{i}" for i in ids_],
        },
        schema=SCHEMA,
    )


def test_gc_completes_the_erasure_and_keeps_every_version(table_uri: str) -> None:
    """Issue 39 item 2: retention 30d, erasure grace 0: the receipt stayed `removed` (the
    originals were kept for the older versions, or the versions expired); now the
    superseded objects go, every version stays readable without the person, the receipt is
    `complete` and lists the versions mapped, and no object of the table names the person."""
    t = lethe.Table.create(table_uri, SCHEMA, key="customer", gc_grace="60s")
    model = {}
    for start in (0, 20, 40):
        t.append(rows(start, 20))
        model[t.version] = list(range(start + 20))
    t.erase([("customer", "=", "c4")], request_id="gone-c4")  # c4 is every file's max
    v_erase = t.version  # the splice commit (the DV commit before it)
    model[v_erase - 1] = model[v_erase] = [i for i in range(60) if i % 5 != 4]
    rep = collect(
        t.uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(hours=1)
    )
    assert rep.objects_deleted > 0
    for v, want in model.items():
        got = ids(lethe.Table.open(t.uri, version=v).scan())
        assert got == [i for i in want if i % 5 != 4], v
    head = lethe.Table.open(t.uri)
    ref = head.manifest.manifest.lineage
    assert ref is not None and t.store.head(t.key_of(ref.path)).size > 0  # kept by GC
    live = {h.version: h.live_rows for h in head.history()}  # every version, as it reads
    assert all(live[v] == len([i for i in want if i % 5 != 4]) for v, want in model.items())
    r = head.erasure_status("gone-c4", audit_values=["c4"])
    assert r.state == "complete", [e for e in r.evidence if not e.gone]
    assert r.mapped_versions == tuple(range(v_erase))  # create .. the DV commit
    assert r.audit is not None and r.audit.clean, r.audit
    # a second run rewrites nothing and keeps every version
    collect(t.uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(hours=2))
    for v, want in model.items():
        assert ids(lethe.Table.open(t.uri, version=v).scan()) == [i for i in want if i % 5 != 4]


def test_cli_at_version_reads_through_the_erasure(
    history: tuple, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 39 item 1: ``lethe scan --at-version`` of a version from before an erase."""
    import pyarrow.parquet as pq

    from lethe.cli import main

    t, model = history
    t.erase([("customer_id", "=", 2)], request_id="gone-2")
    out = tmp_path / "v1.parquet"
    assert main(["scan", t.uri, "--at-version", "1", "--out", str(out)]) == 0
    capsys.readouterr()
    got = ids(pq.read_table(out))
    assert got == [i for i in model[1] if i % 5 != 2]  # row 3 was deleted, not erased


def test_the_iceberg_view_keeps_its_current_snapshot_through_an_erasure(
    aws: Any, table_uri: str
) -> None:
    """Issue 39 item 4: the view keeps its current snapshot only (its older snapshots name
    the replaced files): after GC maps the old Lethe versions, PyIceberg reads the current
    snapshot without the person, and the view's data manifests of the old versions are gone."""
    from pyiceberg.table import StaticTable

    t = lethe.Table.create(table_uri, SCHEMA, key="customer", gc_grace="60s", iceberg_view=True)
    for start in (0, 20):
        t.append(rows(start, 20))
    t.erase([("customer", "=", "c4")], request_id="gone-c4")
    t.refresh()
    collect(t.uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(hours=1))
    props = {
        "s3.endpoint": aws.endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    st = StaticTable.from_metadata(f"{t.uri}/metadata/v{t.version}.metadata.json", props)
    got = st.scan().to_arrow()
    assert sorted(got.column("id").to_pylist()) == [i for i in range(40) if i % 5 != 4]
    names = [o.key for o in t.store.list(t.key_of("metadata/"))]
    assert not any(f"metadata/v{v}.metadata.json" in k for k in names for v in (1, 2))
    assert ids(lethe.Table.open(t.uri, version=1).scan()) == [i for i in range(20) if i % 5 != 4]


def test_versions_from_before_a_ttl_sweep_stay_after_gc(table_uri: str, s3: Any) -> None:
    """Issue 39: a row TTL sweep drops whole files and splices the straddling one; the
    versions from before it read without the expired rows, and GC (retention 30d, erasure
    grace 0) keeps them (the drops are in the lineage too) and completes the sweep."""
    from test_retention import at, time_ordered

    t = time_ordered(table_uri, s3)
    before = t.version
    r = t.sweep_retention(now=at(1250))  # ids 0..249 expire: two files dropped, one spliced
    assert lethe.Table.open(table_uri, version=before).scan(columns=["id"]).num_rows == 350
    # GC sweeps first, at its clock: every row has expired by now (all files dropped)
    collect(t.uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(days=8))
    old = lethe.Table.open(table_uri, version=before)  # still there, read through both
    assert old.scan(columns=["id"]).num_rows == 0
    head = lethe.Table.open(table_uri)
    assert head.scan().num_rows == 0 and head.erasure_status(r.request_id).state == "complete"


def test_index_lookups_on_an_old_version_stay_correct(table_uri: str) -> None:
    """Issue 39 item 1: on a table with a secondary index, an old version read through the
    lineage answers lookups and indexed filters without the erased rows (it reads the
    replacements, pruned by their statistics), before and after GC deleted the old pieces."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", indexes=("customer_id",), gc_grace="60s")
    for start in (0, 20):
        t.append(people(start, 20))
    v = t.version
    t.erase([("customer_id", "=", 3)], request_id="gone-3")

    def check() -> None:
        old = lethe.Table.open(t.uri, version=v)
        assert old.scan(filters=[("customer_id", "=", 3)]).num_rows == 0
        assert ids(old.scan(filters=[("customer_id", "in", [1, 3])])) == [
            i for i in range(40) if i % 5 == 1
        ]
        assert old.lookup(8).num_rows == 0 and old.lookup(9).num_rows == 1

    check()
    collect(t.uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(hours=1))
    check()


def test_a_bounded_erase_keeps_plain_deleted_rows_in_history(table_uri: str) -> None:
    """Issue 39 known limit, closed: an erase bounded by ``max_bytes`` splices a file one row
    group per call; the target's rest moves to the new file with its erased positions rebased
    (it used to move without them, so the later splice removed every hidden row of those
    groups, and versions from before a plain delete lost that row)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", row_group_bytes=1024)
    t.append(people(0, 200))
    [f] = t.manifest.files
    assert len(f.row_groups) >= 3
    before = t.version
    kept = [i for i in range(200) if i % 5 == 1][-1]  # a plain delete in a late row group
    t.delete([("id", "=", kept)])
    erased = {i for i in range(200) if i % 5 == 2}
    r = t.erase([("customer_id", "=", 2)], request_id="slow-2", max_bytes=1)
    rounds = 1
    while not r.complete:
        r = t.erase([("customer_id", "=", 2)], request_id="slow-2", max_bytes=1)
        rounds += 1
        assert rounds < 20
    assert rounds >= 2
    old = lethe.Table.open(t.uri, version=before)
    assert ids(old.scan()) == sorted(set(range(200)) - erased)
    assert kept in ids(old.scan())
    assert ids(t.refresh().scan()) == sorted(set(range(200)) - erased - {kept})


def test_a_compaction_keeps_the_positions_of_targets_on_other_files() -> None:
    """Issue 39: compacting some files rebuilt every target of a pending erasure from its row
    groups alone, so targets on files the compaction never touched lost their erased
    positions (their later splice then removed every hidden row); they stay as they were."""
    from pyroaring import BitMap64

    from lethe.catalog.manifest import ErasureRecord, ErasureTarget
    from lethe.catalog.transforms.erasures import update_erasures
    from lethe.dv.blob import b64_of

    erased = b64_of(BitMap64([130]))
    other = ErasureTarget(path="data/b.parquet", row_groups=(1,), positions=erased)
    e = ErasureRecord(
        id_hash="h",
        deleted_version=5,
        targets=(ErasureTarget(path="data/a.parquet", row_groups=(0,)), other),
    )
    moved = {"data/a.parquet": [ErasureTarget(path="data/c.parquet", row_groups=(2,))]}
    [after] = update_erasures([e], {"data/a.parquet"}, 4, moved, 6)
    assert other in after.targets
    assert {t.path for t in after.targets} == {"data/b.parquet", "data/c.parquet"}
    assert "data/a.parquet" in after.superseded and after.state == "pending"
