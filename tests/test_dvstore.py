"""The one DV load path (lethe.dv.store) on a real container in moto: the blob a delete wrote
reads back as its positions, and a reference whose CRC or cardinality disagrees is refused."""

from __future__ import annotations

import pytest
from conftest import EVENTS, events
from pyroaring import BitMap64

import lethe
from lethe import errors
from lethe.dv import store as dvstore


def test_a_deletes_dv_loads_and_a_lying_reference_is_refused(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 1_000))
    t.delete([("id", "in", [3, 500, 999])])
    [f] = t.manifest.files
    ref = f.dv
    assert ref is not None and ref.container is not None
    prefix = t.catalog.prefix
    assert sorted(dvstore.load(t.store, prefix, ref)) == [3, 500, 999]
    assert len(dvstore.load(t.store, prefix, None)) == 0
    with pytest.raises(errors.CorruptDeletionVector, match="3 positions, the manifest says 4"):
        dvstore.load(t.store, prefix, ref.model_copy(update={"cardinality": 4}), what="DV of f")
    with pytest.raises(errors.CorruptDeletionVector):
        dvstore.load(t.store, prefix, ref.model_copy(update={"crc32": (ref.crc32 + 1) % 2**32}))
    with pytest.raises(errors.CorruptDeletionVector, match="neither container nor inline"):
        dvstore.load(t.store, prefix, ref.model_copy(update={"container": None}))


def test_many_dvs_of_one_container_load_with_one_get(table_uri: str) -> None:
    """A delete over 20 files writes their DVs into one container: :func:`dvstore.load_many`
    reads them with one GET of their span (a window's splice of 500 files made 1,000 ranged
    GETs of it), each checked like :func:`dvstore.load`; a sparse pick is read blob by blob."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    for i in range(20):
        t.append(events(i * 100, 100))
    t.delete([("id", "in", [i * 100 + i for i in range(20)])])
    refs = {f.path: f.dv for f in t.manifest.files}
    assert len({r.container for r in refs.values() if r is not None}) == 1
    prefix = t.catalog.prefix
    before = t.store.stats.snapshot()
    got = dvstore.load_many(t.store, prefix, {**refs, "none": None})
    io = t.store.stats.snapshot() - before
    assert io.total_requests == 1
    assert got == {
        **{p: dvstore.load(t.store, prefix, r) for p, r in refs.items()},
        "none": BitMap64(),
    }
    assert sum(len(b) for b in got.values()) == 20
    # the first and last blobs only: a span far wider than they are is read blob by blob
    ends = sorted(refs.items(), key=lambda kv: kv[1].offset if kv[1] else 0)
    pick = dict([ends[0], ends[-1]])
    before = t.store.stats.snapshot()
    assert dvstore.load_many(t.store, prefix, pick) == {
        p: dvstore.load(t.store, prefix, r) for p, r in pick.items()
    }
    assert (t.store.stats.snapshot() - before).total_requests == 2 + 2
    # a lying reference in a dense span is refused, naming the file
    (p0, r0), *_ = refs.items()
    assert r0 is not None
    lying = {**refs, p0: r0.model_copy(update={"cardinality": r0.cardinality + 1})}
    with pytest.raises(errors.CorruptDeletionVector, match=f"DV of {p0}"):
        dvstore.load_many(t.store, prefix, lying)


def test_the_scans_cache_reads_a_container_by_the_same_rule(table_uri: str) -> None:
    """Issue 38 item 5: DV containers are read only through :mod:`lethe.dv.store`. The scans'
    cache (:class:`~lethe.reading.scan.DVCache`) merged a container's blobs by its own rule
    (gaps under 1 MiB: a sparse pick of a container in one GET, where :func:`load_many` reads
    it blob by blob); both now read :func:`dvstore.spans`: the same GETs, the same DVs."""
    from lethe.reading.scan import DVCache

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    for i in range(20):
        t.append(events(i * 100, 100))
    t.delete([("id", "in", [i * 100 + i for i in range(20)])])
    files = sorted(t.manifest.files, key=lambda f: f.dv.offset if f.dv else 0)
    prefix = t.catalog.prefix
    for pick in (files, [files[0], files[-1]]):
        before = t.store.stats.snapshot()
        cache = DVCache(t.store, prefix)
        cache.prefetch(pick)
        got = {f.path: cache.bitmap(f) for f in pick}
        cached = (t.store.stats.snapshot() - before).total_requests
        before = t.store.stats.snapshot()
        many = dvstore.load_many(t.store, prefix, {f.path: f.dv for f in pick})
        assert (t.store.stats.snapshot() - before).total_requests == cached
        assert got == many
        assert cached == len(dvstore.spans({f.path: f.dv for f in pick if f.dv}))
    assert cached == 2  # the sparse pick: blob by blob
