"""``purge()`` reaches the index (issue 24, item 6): every row its splices remove leaves the
index pieces, the old pieces await GC like spliced-away data files, and ``verify --deep``
flags an entry naming a row a splice removed."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from conftest import EVENTS, events

import lethe
from devtools.audit import Needle, audit_bucket
from lethe.audit.verify import verify
from lethe.catalog.manifest import request_hash
from lethe.catalog.transforms.indexes import piece_paths
from lethe.erasure.erase import commit_splice, splice_file
from lethe.gc import collect
from lethe.index.core import index_plans
from lethe.index.origins import origin_removed
from lethe.reading.filters import normalize
from lethe.storage.store import parse_s3_uri

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}
GONE = 17  # customer 17: ids 17, 117, ..., 1917 (20 rows in many files)


def entries(t: lethe.Table) -> pa.Table:
    """Every entry of the index on customer_id in the head, its pieces decoded."""
    (ix,) = t.manifest.indexes
    return pa.concat_tables(
        pq.read_table(pa.BufferReader(t.store.get(t.key_of(p.path)).body))
        for r in ix.runs
        for p in r.pieces
    )


def customer_rows(t: lethe.Table, c: int) -> list[int]:
    """The ids of customer ``c`` found through the index (no file read the unindexed way)."""
    f = [("customer_id", "=", c)]
    (plan,) = index_plans(t.store, t.catalog.prefix, t.manifest, [normalize(f, t.schema)])
    assert plan is not None and plan.unindexed == ()
    return sorted(t.scan(["id"], f)["id"].to_pylist())


def deleted(uri: str) -> lethe.Table:
    t = lethe.Table.create(uri, EVENTS, key="id", indexes=("customer_id",), gc_grace="7d", **TINY)
    t.append(events(0, 1000))
    t.append(events(1000, 1000))
    assert t.delete([("customer_id", "=", GONE)]).rows_deleted == 20
    assert entries(t)["value"].to_pylist().count(GONE) == 20  # a delete keeps the entries
    return t


def test_purge_scrubs_the_index_and_gc_completes_it(table_uri: str, s3: Any) -> None:
    t = deleted(table_uri)
    bucket = parse_s3_uri(table_uri)[0]
    needle = {"c": Needle.column("customer_id", GONE)}
    before = audit_bucket(s3, bucket, needle)
    assert any("/index/" in k for k in before.found("c"))  # the audit decodes index pieces
    assert "decoded index piece" in {how for _, how in before.hits["c"]}
    old = piece_paths(t.manifest)

    r = t.purge(request_id="purge-17")
    assert r.complete and r.rows_erased == 20
    t.refresh()
    # no piece the head references holds the value; every other entry is still there
    have = entries(t)
    assert GONE not in have["value"].to_pylist() and have.num_rows == 2000 - 20
    for c in (16, 18, 42):
        assert customer_rows(t, c) == [i for i in range(2000) if i % 100 == c]
    assert customer_rows(t, GONE) == []
    assert t.lookup(117).num_rows == 0 and t.lookup(118)["customer_id"].to_pylist() == [18]
    rep = verify(t, deep=True)
    assert rep.ok, rep.problems
    # the old pieces are superseded by the purge's erasure: it waits for them
    rec = next(e for e in t.manifest.erasures if e.id_hash == request_hash("purge-17"))
    gone = old - piece_paths(t.manifest)
    assert gone and gone <= set(t.manifest.superseded_of(rec))
    later = datetime.now(UTC) + timedelta(days=8)
    rep1 = collect(table_uri, retention="30d", erasure_grace="10d", now=later)
    (st,) = [e for e in rep1.erasures if e.id_hash == rec.id_hash]
    assert not st.complete  # within the erasure grace, retained manifests reference them
    assert t.erasure_status("purge-17").state != "complete"
    left = {o.key[len(t.key_of("")) :] for o in t.store.list(t.key_of("index/"))}
    assert gone & left
    rep2 = collect(table_uri, retention="1v", erasure_grace="0s", now=later)
    (st,) = [e for e in rep2.erasures if e.id_hash == rec.id_hash]
    assert st.complete
    left = {o.key[len(t.key_of("")) :] for o in t.store.list(t.key_of("index/"))}
    assert not (gone & left)
    assert t.erasure_status("purge-17").state == "complete"
    assert audit_bucket(s3, bucket, needle).found("c") == ()
    assert audit_bucket(s3, bucket, {"c": Needle.column("customer_id", 18)}).found("c")
    t = lethe.Table.open(table_uri)
    assert verify(t, deep=True).ok
    assert customer_rows(t, 18) == [i for i in range(2000) if i % 100 == 18]


def test_an_erase_removes_only_its_rows_and_the_deleted_ones_keep_their_entries(
    table_uri: str,
) -> None:
    """Issue 39: a splice removes only the erased rows. Row 117 (deleted, not erased) in
    the group the erase of 118 edits stays in the new file under its DV, versions from
    before its delete still read it, and its index entry stays (it names a row that is
    there); a purge then removes it and scrubs its entries."""
    t = deleted(table_uri)
    before_delete = t.version - 1
    r = t.erase([("id", "=", 118)], request_id="e-118")  # 117 sits in the same group
    assert r.complete and r.rows_erased == 1
    t.refresh()
    assert sum(len(origin_removed(f)) for f in t.manifest.files) == 1
    values = entries(t)["value"].to_pylist()
    assert values.count(GONE) == 20 and values.count(18) == 19
    assert verify(t, deep=True).ok
    old = lethe.Table.open(table_uri, version=before_delete).scan(["id"])["id"].to_pylist()
    assert 117 in old and 118 not in old and len(old) == 1_999
    assert t.purge(request_id="p").rows_erased == 20
    t.refresh()
    assert GONE not in entries(t)["value"].to_pylist()
    assert verify(t, deep=True).ok
    old = lethe.Table.open(table_uri, version=before_delete).scan(["id"])["id"].to_pylist()
    assert 117 not in old and len(old) == 2_000 - 21  # a purge erases the deleted rows


def test_an_erase_removes_the_persons_rows_a_plain_delete_hid_before(table_uri: str) -> None:
    """Issue 39: the splice removes the erased positions, hidden before the erase or not: a
    person partly deleted first, then erased, leaves no row in any file (the positions come
    from what the erase matched, not from the DV its commit added)."""
    t = deleted(table_uri)
    assert t.delete([("id", "in", [18, 118])]).rows_deleted == 2  # customer 18, partly
    r = t.erase([("customer_id", "=", 18)], request_id="e-18")
    assert r.complete and r.rows_erased == 20
    t.refresh()
    for f in t.manifest.files:
        got = pq.read_table(pa.BufferReader(t.store.get(t.key_of(f.path)).body))
        assert 18 not in got["customer_id"].to_pylist(), f.path
    assert sum(len(origin_removed(f)) for f in t.manifest.files) == 20
    assert entries(t)["value"].to_pylist().count(GONE) == 20  # deleted, not erased: kept
    assert verify(t, deep=True).ok


def test_deep_verify_flags_entries_of_rows_a_splice_removed(table_uri: str) -> None:
    """A splice without the scrub (purge before the fix: the library's splice and commit
    called directly, the splice handing no values: ``index=False``, issue 37 item 3) leaves
    entries naming removed rows: readers skip them, verify flags them by count, never by
    value."""
    t = deleted(table_uri)
    hit = [f for f in t.manifest.files if f.dv is not None][:2]
    for f in hit:
        groups = range(len(f.row_groups))
        commit_splice(
            t.context,
            splice_file(t.context, f, [g for g in groups if _holds_dv(t, f, g)], index=False),
        )
    t.refresh()
    assert customer_rows(t, GONE) == []  # readers drop them
    removed = sum(len(origin_removed(f)) for f in t.manifest.files)
    assert removed >= len(hit)
    rep = verify(t, deep=True)
    form = re.compile(
        r"data/\S+: index on 'customer_id' has (\d+) entries naming rows a splice removed "
        r"from data/\S+ \(their values must leave the index\)"
    )
    stale = [form.fullmatch(p) for p in rep.problems]
    assert all(stale) and len(stale) == len(hit), rep.problems  # counts and paths only
    assert sum(int(m.group(1)) for m in stale if m) == removed
    # a purge now scrubs them (their value's entries point at removed rows)
    t.purge(request_id="p")
    assert verify(t.refresh(), deep=True).ok
    assert GONE not in entries(t)["value"].to_pylist()


def _holds_dv(t: lethe.Table, f: Any, g: int) -> bool:
    from lethe.dv.store import load

    start = sum(rg.rows for rg in f.row_groups[:g])
    return (
        load(t.store, t.catalog.prefix, f.dv).range_cardinality(start, start + f.row_groups[g].rows)
        > 0
    )
