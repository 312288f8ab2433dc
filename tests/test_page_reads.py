"""Page-level reads against moto's server: lookups and selective scans return exactly what a
full scan with the same filter returns, download only the pages that can match, and fall back
to whole row groups where page level does not apply."""

from __future__ import annotations

import doctest
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe.reading import footers, reader
from lethe.reading.filters import normalize
from lethe.writing.writer import WriteOptions, write_files

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("grp", pa.int32()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("score", pa.float64()),
        ("pad", pa.string()),
    ]
)
ROWS = 24_000


def _data(rows: int = ROWS) -> pa.Table:
    """Sorted ids with gaps (step 3), nulls in every other column, repeated and unique values."""
    rng = np.random.default_rng(11)
    ids = np.arange(rows, dtype=np.int64) * 3
    names = np.array([f"name-{i % 700}" for i in range(rows)], dtype=object)
    return pa.table(
        {
            "id": ids,
            "grp": pa.array(
                rng.integers(0, 40, rows).astype(np.int32), mask=rng.random(rows) < 0.2
            ),
            "name": pa.array(names, pa.string(), mask=rng.random(rows) < 0.1),
            "ts": pa.array(
                1_700_000_000_000_000 + ids * 7,
                SCHEMA.field("ts").type,
                mask=rng.random(rows) < 0.05,
            ),
            "score": pa.array(rng.random(rows), mask=rng.random(rows) < 0.1),
            "pad": pa.array([f"{x:032x}" for x in rng.integers(0, 2**62, rows)]),
        },
        schema=SCHEMA,
    )


LAYOUTS: dict[str, dict[str, Any]] = {
    "dictionary-v1": {"max_rows_per_page": 300, "data_page_size": 4096},
    "plain-v2": {"use_dictionary": False, "data_page_version": "2.0", "max_rows_per_page": 500},
    "dictionary-fallback-v1": {"max_rows_per_page": 200, "dictionary_pagesize_limit": 4096},
    "dictionary-fallback-v2": {
        "max_rows_per_page": 250,
        "dictionary_pagesize_limit": 2048,
        "data_page_version": "2.0",
    },
    "no-page-index": {"write_page_index": False, "max_rows_per_page": 300},
}


def _make(s3: Any, opts: dict[str, Any], data: pa.Table | None = None) -> lethe.Table:
    data = _data() if data is None else data
    t = lethe.Table.create(f"s3://{_bucket(s3)}/t", data.schema, key="id")
    wo = WriteOptions(key="id", target_file_bytes=8 << 20, row_group_bytes=200_000, **opts)
    files = write_files(t.store, t.catalog.prefix, data, data.schema, wo)
    t.commit_files(files)
    return t


@pytest.fixture(scope="module", params=list(LAYOUTS))
def layout(request: pytest.FixtureRequest, s3: Any) -> tuple[str, lethe.Table]:
    t = _make(s3, LAYOUTS[request.param])
    f = t.manifest.files[0]
    assert f.size > 2 * reader.TAIL_BYTES and len(f.row_groups) >= 3, (
        "pages are fetched, not in the tail"
    )
    return request.param, t


def _filters() -> st.SearchStrategy[Any]:
    key = st.integers(-5, ROWS * 3 + 5)
    grp = st.integers(-1, 41)
    name = st.integers(0, 701).map(lambda i: f"name-{i}")
    ts = key.map(lambda k: pa.scalar(1_700_000_000_000_000 + k * 7, SCHEMA.field("ts").type))
    pred = st.one_of(
        key.map(lambda k: ("id", "=", k)),
        st.lists(key, min_size=1, max_size=4).map(lambda ks: ("id", "in", ks)),
        st.tuples(st.sampled_from(["<", "<=", ">", ">=", "!="]), key).map(lambda x: ("id", *x)),
        grp.map(lambda g: ("grp", "=", g)),
        st.lists(st.one_of(st.none(), grp), min_size=1, max_size=3).map(lambda v: ("grp", "in", v)),
        st.lists(st.one_of(st.none(), grp), min_size=1, max_size=3).map(
            lambda v: ("grp", "not in", v)
        ),
        name.map(lambda n: ("name", "=", n)),
        st.tuples(st.sampled_from(["<", ">="]), ts).map(lambda x: ("ts", *x)),
        st.floats(0, 1).map(lambda x: ("score", ">", x)),
    )
    clause = st.lists(pred, min_size=1, max_size=3)
    return st.one_of(clause, st.lists(clause, min_size=2, max_size=3))


class _Reference:
    """The full scan of a table version (no filter, DVs applied), computed once per version."""

    def __init__(self) -> None:
        self.full: dict[tuple[str, int], pa.Table] = {}

    def of(self, t: lethe.Table) -> pa.Table:
        k = (t.uri, t.version)
        if k not in self.full:
            self.full[k] = t.scan(page_index=False)
        return self.full[k]


REF = _Reference()


@settings(max_examples=50)
@given(
    filters=_filters(),
    columns=st.one_of(st.none(), st.lists(st.sampled_from(SCHEMA.names), min_size=1, unique=True)),
    delete=st.lists(st.integers(0, ROWS - 1).map(lambda i: i * 3), max_size=6),
    key=st.integers(-3, ROWS * 3 + 3),
)
def test_selective_reads_equal_full_scan_then_filter(
    layout: tuple[str, lethe.Table],
    filters: Any,
    columns: list[str] | None,
    delete: list[int],
    key: int,
) -> None:
    _name, t = layout
    if delete:
        t.delete([("id", "in", delete)])
    full = REF.of(t)
    want = full.filter(normalize(filters, SCHEMA).expression())
    got = t.scan(columns, filters)
    assert got.equals(want.select(columns or SCHEMA.names)), filters
    hit = full.filter(normalize([("id", "=", key)], SCHEMA).expression())
    assert t.lookup(key, columns).equals(hit.select(columns or SCHEMA.names))


def _lookup_io(t: lethe.Table, key: int, **kw: Any) -> tuple[pa.Table, Any]:
    t.lookup(key ^ 1, **kw)  # warm: footer and page index cached
    before = t.io
    got = t.lookup(key, **kw)
    return got, t.io - before


def test_lookup_downloads_a_small_fraction_of_the_row_group(s3: Any) -> None:
    rows = 60_000
    rng = np.random.default_rng(5)
    alphabet = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    raw = alphabet[rng.integers(0, len(alphabet), rows * 100)].tobytes()
    offsets = pa.array(np.arange(0, (rows + 1) * 100, 100, dtype=np.int32))
    payload = pa.Array.from_buffers(
        pa.string(), rows, [None, offsets.buffers()[1], pa.py_buffer(raw)]
    )
    data = pa.table({"id": pa.array(np.arange(rows, dtype=np.int64)), "payload": payload})
    t = lethe.Table.create(f"s3://{_bucket(s3)}/e", data.schema, key="id")
    opts = WriteOptions(
        key="id", target_file_bytes=64 << 20, row_group_bytes=16 << 20, data_page_size=64 << 10
    )
    t.commit_files(write_files(t.store, t.catalog.prefix, data, data.schema, opts))
    [rg] = t.manifest.files[0].row_groups
    assert rg.length > 4 << 20
    key = 40_001
    got, d = _lookup_io(t, key)
    assert got.to_pylist() == data.slice(key, 1).to_pylist()
    assert d.count("get") <= 3, d.describe()
    assert d.bytes_downloaded < rg.length / 10, d.describe()
    whole, dw = _lookup_io(t, key, page_index=False)
    assert whole.equals(got)
    assert dw.bytes_downloaded > 0.9 * rg.length, "the row-group read fetches every chunk"
    # a key between the last row of a page and the first of the next: no page can hold it
    t2 = _make(s3, LAYOUTS["dictionary-v1"])
    miss, dm = _lookup_io(t2, 3 * 299 + 1)
    assert miss.num_rows == 0 and dm.count("get") == 0, dm.describe()


def test_files_without_page_index_read_whole_row_groups(s3: Any) -> None:
    t = _make(s3, LAYOUTS["no-page-index"])
    got, d = _lookup_io(t, 3 * 5000)
    whole, dw = _lookup_io(t, 3 * 5000, page_index=False)
    assert got.equals(whole) and got["id"].to_pylist() == [15_000]
    assert d.bytes_downloaded == dw.bytes_downloaded and d.count("get") == dw.count("get")


def test_nested_columns_fall_back_to_row_groups(s3: Any) -> None:
    base = _data()
    data = base.append_column("tags", pa.array([[i, i + 1] for i in range(ROWS)]))
    t = _make(s3, LAYOUTS["dictionary-v1"], data)
    flat, d_flat = _lookup_io(t, 300, columns=["id", "name"])
    nested, d_nested = _lookup_io(t, 300)
    assert flat.to_pylist() == [{"id": 300, "name": data["name"][100].as_py()}]
    assert nested["tags"].to_pylist() == [[100, 101]]
    _same, d_whole = _lookup_io(t, 300, page_index=False)
    assert d_flat.bytes_downloaded < d_whole.bytes_downloaded
    assert d_nested.bytes_downloaded == d_whole.bytes_downloaded, "lists are read by row group"


def test_dvs_apply_to_page_reads(s3: Any) -> None:
    t = _make(s3, LAYOUTS["dictionary-fallback-v1"])
    t.delete([("id", "in", [3 * 7000, 3 * 7002])])
    got = t.scan(["id", "pad"], [("id", ">=", 3 * 6999), ("id", "<=", 3 * 7003)])
    assert got["id"].to_pylist() == [3 * 6999, 3 * 7001, 3 * 7003]
    assert t.lookup(3 * 7000).num_rows == 0


def test_the_dv_is_fetched_beside_the_data_once(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read starts the DV's GET with the data's (on the I/O pool, not after decoding in
    the worker that needs it), once per file, for lookups, scans and deletes alike."""
    import threading

    t = _make(s3, LAYOUTS["dictionary-fallback-v1"])
    t.delete([("id", "in", [3 * 7000, 3 * 7002])])
    t = lethe.Table.open(t.uri, s3=s3)
    container = t.manifest.files[0].dv.container  # type: ignore[union-attr]
    assert container is not None
    dv_gets: list[str] = []
    real_get = t.store.get

    def get(key: str, **kw: Any) -> Any:
        if key.endswith(container):
            dv_gets.append(threading.current_thread().name)
        return real_get(key, **kw)

    monkeypatch.setattr(t.store, "get", get)
    assert t.lookup(3 * 7000).num_rows == 0
    assert t.lookup(3 * 7001)["id"].to_pylist() == [3 * 7001]
    assert t.scan(["id"]).num_rows == ROWS - 2
    t.delete([("id", "=", 3 * 7004)])
    assert len(dv_gets) == 4, dv_gets  # one per read: two lookups, the scan, the delete
    assert all(name.startswith("lethe-io") for name in dv_gets), dv_gets


def test_dvs_of_one_container_come_in_one_get(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A delete writes the DVs of every file it touches into one container: a scan reads
    them in one ranged GET; a damaged blob fails the read with a typed error."""
    data = _data(3000)
    t = lethe.Table.create(f"s3://{_bucket(s3)}/dvs", data.schema, key="id")
    for i in range(3):
        t.append(data.slice(i * 1000, 1000))
    gone = [3 * 10, 3 * 1010, 3 * 2020, 3 * 2021]
    t.delete([("id", "in", gone)])
    refs = [f.dv for f in t.manifest.files]
    assert all(r is not None and r.container == refs[0].container for r in refs)  # type: ignore[union-attr]
    key = f"{t.catalog.prefix}/{refs[0].container}"  # type: ignore[union-attr]
    calls: list[tuple[int | None, int | None]] = []
    real_get = t.store.get

    def get(k: str, **kw: Any) -> Any:
        if k == key:
            calls.append((kw.get("start"), kw.get("end")))
        return real_get(k, **kw)

    monkeypatch.setattr(t.store, "get", get)
    got = lethe.Table.open(t.uri, s3=s3)
    monkeypatch.setattr(got.store, "get", get)
    assert sorted(got.scan(["id"])["id"].to_pylist()) == sorted(
        set(data["id"].to_pylist()) - set(gone)
    )
    assert len(calls) == 1, calls
    body = bytearray(s3.get_object(Bucket=t.store.bucket, Key=key)["Body"].read())
    r = refs[1]
    body[r.offset + r.length - 6] ^= 0xFF  # type: ignore[union-attr]  # inside the 2nd blob
    s3.put_object(Bucket=t.store.bucket, Key=key, Body=bytes(body))
    with pytest.raises(lethe.errors.CorruptDeletionVector):
        lethe.Table.open(t.uri, s3=s3).scan()


def test_page_index_cache_is_bounded() -> None:
    assert doctest.testmod(footers).failed == 0
    c = footers.LruCache[bytes](capacity=2, max_bytes=100, weigh=len)
    for i in range(5):
        c.put(("b", str(i), "e"), b"x" * 10)
    assert [c.get(("b", str(i), "e")) is not None for i in range(5)] == [
        False,
        False,
        False,
        True,
        True,
    ]
    c.put(("b", "big", "e"), b"x" * 95)
    assert c.get(("b", "4", "e")) is None and c.get(("b", "big", "e")) is not None


def _bucket(s3: Any) -> str:
    name = f"p-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def test_in_with_none_keeps_null_rows_through_every_pruning(s3: Any) -> None:
    t = _make(s3, LAYOUTS["dictionary-v1"])
    full = t.scan(page_index=False)
    for f in (
        [("grp", "in", [None])],
        [("grp", "in", [None, 99])],
        [("id", "<", 900), ("grp", "in", [None, 1])],
    ):
        want = full.filter(normalize(f, SCHEMA).expression())
        assert want.num_rows > 0
        assert t.scan(filters=f).equals(want), f
        assert t.scan(filters=f, page_index=False).equals(want), f


def test_a_page_index_beyond_the_tail_is_fetched_once(s3: Any) -> None:
    t = _make(s3, {"max_rows_per_page": 4})
    f = t.manifest.files[0]
    handle = t._handle(f)
    tail = handle.tail()
    before = t.io
    pi = handle.page_index(tail)
    assert pi is not None and pi.start < tail.start, "the index starts before the tail"
    assert (t.io - before).count("get") == 1
    full = t.scan(page_index=False)
    before = t.io
    got = t.lookup(3 * 12_345)
    d = t.io - before
    assert got.equals(full.filter(normalize([("id", "=", 3 * 12_345)], SCHEMA).expression()))
    assert got.num_rows == 1 and d.count("get") <= 2, d.describe()
