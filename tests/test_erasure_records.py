"""Erasure records stay out of the root's way (issue 26): superseded paths live in
immutable lists under ``manifest/erasures/``, completed erasures leave the root (their GC
marker keeps the record for receipts), and an old root with inline ``superseded`` still reads.
"""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from conftest import EVENTS, events

import lethe
from lethe import errors
from lethe.audit.evidence import gather
from lethe.audit.receipts import known_requests
from lethe.catalog.manifest import (
    ErasureRecord,
    Operation,
    TableProperties,
    decode_manifest,
    decode_superseded,
    encode_manifest,
    encode_superseded,
    initial_manifest,
    request_hash,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import externalize_superseded
from lethe.erasure.deletes import DeleteRequest
from lethe.erasure.erase import process_erasure
from lethe.gc import collect
from lethe.storage.layout import ERASURE_PREFIX, manifest_key

TINY = {"target_file_bytes": 8_000, "row_group_bytes": 2_000}


def _lists(t: lethe.Table) -> set[str]:
    return {k[len(t.key_of("")) :] for k in (o.key for o in t.store.list(t.key_of(ERASURE_PREFIX)))}


def _root(t: lethe.Table) -> tuple[int, int]:
    """The stored size of the head's root, and that size without its request log (each
    request adds an entry for a week, by design; what must stay flat is the rest)."""
    t.refresh()
    body = t.store.get(t.key_of(manifest_key(t.version))).body
    log = json.dumps(json.loads(body)["requests"], separators=(",", ":"))
    return len(body), len(body) - len(log)


def test_the_root_stays_flat_over_erasures_and_purges(table_uri: str) -> None:
    """Six erasures and purges, each made complete by GC: the root (without its request
    log) stays within a small constant of its size after the first; before, each erasure's
    superseded paths stayed in it for ever."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    for i in range(6):
        t.append(events(i * 300, 300))
    files = t.manifest.file_count
    assert files == 6
    later = datetime.now(UTC) + timedelta(days=8)
    sizes: list[int] = []
    receipts: dict[str, Any] = {}
    for r in range(6):
        rid = f"gdpr-{r}"
        if r % 2 == 0:
            res = t.erase([("customer_id", "=", r)], request_id=rid)
        else:
            t.delete([("customer_id", "=", r)], request_id=f"del-{r}")
            res = t.purge(request_id=rid)
        assert res.complete and res.files_spliced + res.files_removed == 6
        t.refresh()
        (rec,) = [e for e in t.manifest.erasures if e.state == "spliced"]
        # the root names lists, the lists name the files: many paths, none inline
        assert rec.superseded == () and rec.superseded_refs
        assert len([p for p in t.manifest.superseded_of(rec) if p.startswith("data/")]) == 6
        assert set(rec.superseded_refs) <= _lists(t)
        later += timedelta(days=1)
        first = collect(t.uri, retention="1v", grace="7d", erasure_grace="0s", now=later)
        (st,) = [e for e in first.erasures if e.id_hash == rec.id_hash]
        assert st.complete and st.newly_complete, st.blocking
        receipts[rid] = t.erasure_status(rid)
        assert receipts[rid].complete
        # the next run commits it out of the root; the marker keeps it for receipts
        later += timedelta(days=1)
        collect(t.uri, retention="1v", grace="7d", erasure_grace="0s", now=later)
        t.refresh()
        assert t.manifest.erasures == ()
        assert t.manifest.operation.kind == "gc"
        assert t.manifest.operation.params["erasures_archived"] == 1
        sizes.append(_root(t)[1])
    assert max(sizes) - min(sizes) <= 256, sizes
    # every list went with the manifests that named them
    later += timedelta(days=1)
    collect(t.uri, retention="1v", grace="7d", erasure_grace="0s", now=later)
    assert _lists(t) == set()
    # receipts of archived erasures read the same from the marker
    for rid, before in receipts.items():
        after = t.erasure_status(rid)
        assert after.state == "complete"
        for field in ("id_hash", "completed_at", "completed_run", "removed_version", "erasure"):
            assert getattr(after, field) == getattr(before, field), (rid, field)
        kept = {e.path for e in before.evidence if not e.path.startswith("manifest/v")}
        assert {e.path for e in after.evidence} >= kept
        assert not any(e.present for e in after.evidence)
    assert {request_hash(rid) for rid in receipts} <= set(known_requests(gather(t.catalog)))
    # a redelivered request is not re-admitted: the request log still holds it
    again = t.erase([("customer_id", "=", 0)], request_id="gdpr-0")
    assert again.duplicate
    t.refresh()
    assert t.manifest.erasures == ()


def test_lists_referenced_by_kept_manifests_are_never_swept(table_uri: str) -> None:
    """GC keeps every list a retained manifest names (the erasure is not complete while
    manifests from before its splice are kept)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    for i in range(3):
        t.append(events(i * 300, 300))
    t.erase([("customer_id", "=", 3)], request_id="gdpr-3")
    t.refresh()
    (rec,) = t.manifest.erasures
    later = datetime.now(UTC) + timedelta(days=30)
    rep = collect(t.uri, retention="100v", grace="7d", erasure_grace="60d", now=later)
    assert not rep.erasures[0].complete
    assert set(rec.superseded_refs) <= _lists(t)
    t.refresh()
    assert t.manifest.erasures == (rec,)  # incomplete: stays in the root


def test_a_crash_between_the_list_and_the_manifest_put_leaves_an_orphan_gc_removes(
    table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The splice commit writes its superseded list, then its manifest PUT fails with an
    unknown outcome: nothing is removed (it may have landed), the table is unchanged and
    correct, and GC sweeps the unreferenced list once past the grace."""
    t = lethe.Table.create(table_uri, EVENTS, key="id", **TINY)
    t.append(events(0, 300))
    t.delete_batch([DeleteRequest([("customer_id", "=", 4)], "gdpr-4", erase=True)])
    t.refresh()
    v = t.version
    (pending,) = t.manifest.erasures
    real = t.store.put

    def put(key: str, body: bytes, **kw: Any) -> str:
        if key.endswith(manifest_key(v + 1)):
            raise errors.StoreError("connection reset by peer")
        return real(key, body, **kw)

    monkeypatch.setattr(t.store, "put", put)
    with pytest.raises(errors.StoreError):
        process_erasure(t.context, pending.id_hash)
    monkeypatch.undo()
    orphans = _lists(t)
    assert len(orphans) == 1
    fresh = lethe.Table.open(table_uri)
    assert fresh.version == v and fresh.manifest.erasures[0].state == "pending"
    assert fresh.lookup(4).num_rows == 0
    assert sorted(fresh.scan(["id"])["id"].to_pylist()) == [i for i in range(300) if i % 100 != 4]
    young = collect(table_uri, retention="100v", now=datetime.now(UTC))
    assert _lists(t) == orphans and young.young.get("segment") is not None
    collect(table_uri, retention="100v", now=datetime.now(UTC) + timedelta(days=8))
    assert _lists(t) == set()
    fresh.refresh()
    assert fresh.manifest.erasures[0].state == "pending"


def test_an_old_root_with_inline_superseded_still_reads_and_stops_growing() -> None:
    """A root written before the lists (``superseded`` inline, no ``superseded_refs``)
    decodes; a commit adding paths leaves the inline ones alone and names a new list; the
    readers see the old paths then the new ones."""
    m0 = initial_manifest(
        table_uuid="t", schema=pa.schema([("id", pa.int64())]), properties=TableProperties(key="id")
    )
    doc = json.loads(encode_manifest(m0))
    doc["erasures"] = [
        {
            "id_hash": "ab" * 16,
            "deleted_version": 0,
            "state": "pending",
            "targets": [],
            "spliced_version": None,
            "superseded": ["data/a.parquet", "manifest/segments/v00000000-s-x.json.gz"],
        }
    ]
    old = Snapshot(decode_manifest(json.dumps(doc).encode()))
    (e,) = old.erasures
    assert e.superseded_refs == () and old.superseded_of(e) == e.superseded
    grown = e.model_copy(update={"superseded": (*e.superseded, "data/b.parquet")})
    nxt = old.evolve(version=1, previous=0, erasures=(grown,), operation=Operation(kind="erase"))
    out = externalize_superseded(old, nxt)
    (e1,) = out.erasures
    assert e1.superseded == e.superseded and len(e1.superseded_refs) == 1
    (listed,) = out.pending_lists().values()
    assert listed.paths == ("data/b.parquet",) and listed.version == 1
    assert out.superseded_of(e1) == (*e.superseded, "data/b.parquet")
    assert out.resolved(e1).superseded == out.superseded_of(e1)
    # the new root round-trips, and omits the empty fields old readers never wrote
    again = decode_manifest(encode_manifest(out.manifest))
    assert again.erasures == (e1,)
    bare = ErasureRecord(id_hash="cd" * 16, deleted_version=0)
    assert "superseded" not in bare.model_dump_json()


def test_one_superseded_list_per_commit_whatever_the_number_of_erasures() -> None:
    """A commit that supersedes objects for several erasures (a window's splice) writes one
    format-2 list that every record names, each reading only its own paths; a commit for
    one erasure still writes format 1 (what older readers read)."""
    hashes = [f"{i:02x}" * 16 for i in range(3)]
    m0 = initial_manifest(
        table_uuid="t", schema=pa.schema([("id", pa.int64())]), properties=TableProperties(key="id")
    )
    doc = json.loads(encode_manifest(m0))
    doc["erasures"] = [
        {"id_hash": h, "deleted_version": 0, "state": "pending", "targets": []} for h in hashes
    ]
    old = Snapshot(decode_manifest(json.dumps(doc).encode()))
    grown = tuple(
        e.model_copy(update={"superseded": (f"data/{i}.parquet", "data/shared.parquet")})
        for i, e in enumerate(old.erasures)
    )
    nxt = old.evolve(version=1, previous=0, erasures=grown, operation=Operation(kind="erase"))
    out = externalize_superseded(old, nxt)
    ((key, listed),) = out.pending_lists().items()
    assert listed.format_version == 2 and "-several-" in key
    assert {e.superseded_refs for e in out.erasures} == {(key,)}
    for i, e in enumerate(out.erasures):
        assert out.superseded_of(e) == (f"data/{i}.parquet", "data/shared.parquet")
    again = decode_superseded(encode_superseded(listed))
    assert again == listed and again.paths_of("ff" * 16) == ()
    # one erasure advanced: format 1, no by_erasure written
    one = (grown[0], *old.erasures[1:])
    single = externalize_superseded(
        old, old.evolve(version=1, previous=0, erasures=one, operation=Operation(kind="erase"))
    )
    ((_, v1),) = single.pending_lists().items()
    assert v1.format_version == 1
    assert json.loads(gzip.decompress(encode_superseded(v1))).keys() == {
        "format",
        "format_version",
        "table_uuid",
        "id_hash",
        "version",
        "paths",
    }


@pytest.mark.parametrize(
    "doc",
    [
        {"format_version": 1, "version": 1, "paths": ["a"]},  # no id_hash
        {"format_version": 2, "version": 1, "id_hash": "ab", "by_erasure": {"ab": ["a"]}},
        {"format_version": 2, "version": 1, "by_erasure": {}},
        {"format_version": 3, "version": 1, "by_erasure": {"ab": ["a"]}},
    ],
)
def test_a_superseded_list_of_neither_shape_is_corrupt(doc: dict[str, object]) -> None:
    raw = gzip.compress(
        json.dumps({"format": "lethe.superseded", "table_uuid": "u", **doc}).encode()
    )
    with pytest.raises(errors.CorruptManifest, match="fails validation"):
        decode_superseded(raw)
