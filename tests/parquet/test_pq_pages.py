"""Page subsets decode exactly, and ColumnIndex bounds decode to the values' true min/max."""

from __future__ import annotations

import datetime as dt
import decimal
import io
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lethe.catalog.values import comparable
from lethe.errors import UnsupportedFile
from lethe.parquet.footer import parse_tail, read_column_index, read_offset_index
from lethe.parquet.model import FileMetaData, InvalidParquet
from lethe.parquet.pages import (
    ChunkLayout,
    PageSpan,
    bound_decoder,
    chunk_file,
    chunk_layout,
    chunk_schema,
    count,
    decode_chunk,
    dictionary_needed,
    flat_leaf,
    intersect,
    page_bounds,
    positions,
    runs,
    union,
)


def _write(table: pa.Table, **kw: Any) -> tuple[bytes, FileMetaData]:
    buf = io.BytesIO()
    pq.write_table(table, buf, write_page_index=True, **kw)
    data = buf.getvalue()
    return data, parse_tail(data, len(data)).metadata


def _layout(data: bytes, meta: FileMetaData, g: int, c: int) -> ChunkLayout:
    cc = meta.row_groups[g].columns[c]
    assert cc.offset_index_offset is not None and cc.offset_index_length is not None
    raw = data[cc.offset_index_offset : cc.offset_index_offset + cc.offset_index_length]
    return chunk_layout(meta.row_groups[g], c, read_offset_index(raw))


def _decode_pages(data: bytes, meta: FileMetaData, g: int, c: int, which: list[int]) -> pa.Array:
    layout = _layout(data, meta, g, c)
    ps = [layout.pages[i] for i in which]
    raw = [data[p.offset : p.offset + p.size] for p in ps]
    d = layout.dictionary
    dictionary = data[d.start : d.end] if d is not None and dictionary_needed(raw) else None
    file = chunk_file(
        chunk_schema(meta, c), meta.row_groups[g].columns[c], dictionary, raw, [p.rows for p in ps]
    )
    return decode_chunk(file).combine_chunks()


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, dict[str, Any]]:
    n = draw(st.integers(1, 600))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    null_rate = draw(st.sampled_from([0.0, 0.3, 1.0]))
    distinct = draw(st.sampled_from([3, 50, 10_000]))

    def nulls() -> Any:
        return rng.random(n) < null_rate

    words = np.array([f"w{i:05d}" * int(1 + i % 4) for i in range(distinct)], dtype=object)
    table = pa.table(
        {
            "k": pa.array(np.sort(rng.integers(-(10**12), 10**12, n))),
            "i": pa.array(rng.integers(0, distinct, n).astype(np.int32), mask=nulls()),
            "s": pa.array(words[rng.integers(0, distinct, n)], pa.string(), mask=nulls()),
            "b": pa.array([bytes([x % 256]) * (x % 7) for x in rng.integers(0, 999, n)]),
            "ts": pa.array(rng.integers(0, 10**15, n), pa.timestamp("us", tz="UTC"), mask=nulls()),
            "f": pa.array(rng.random(n), mask=nulls()),
        }
    )
    opts = {
        "use_dictionary": draw(st.booleans()),
        "data_page_version": draw(st.sampled_from(["1.0", "2.0"])),
        "max_rows_per_page": draw(st.integers(1, 80)),
        "data_page_size": draw(st.sampled_from([64, 1024, 1 << 20])),
        "dictionary_pagesize_limit": draw(st.sampled_from([16, 200, 1 << 20])),
        "compression": draw(st.sampled_from(["none", "zstd", "snappy"])),
        "row_group_size": draw(st.sampled_from([n, max(1, n // 3)])),
    }
    return table, opts


@settings(max_examples=60)
@given(tables(), st.data())
def test_any_page_subset_decodes_to_those_rows(
    case: tuple[pa.Table, dict[str, Any]], data: st.DataObject
) -> None:
    table, opts = case
    raw, meta = _write(table, **opts)
    first = 0
    for g, rg in enumerate(meta.row_groups):
        for c, name in enumerate(table.column_names):
            layout = _layout(raw, meta, g, c)
            assert layout.pages[-1].end_row == rg.num_rows
            which = sorted(
                data.draw(st.sets(st.integers(0, len(layout.pages) - 1), min_size=1), label=name)
            )
            got = _decode_pages(raw, meta, g, c, which)
            col = table.column(name).slice(first, rg.num_rows)
            want = pa.concat_arrays(
                [
                    col.slice(p.first_row, p.rows).combine_chunks()
                    for p in (layout.pages[i] for i in which)
                ]
            )
            assert got.equals(want), (name, which, opts)
        first += rg.num_rows


@settings(max_examples=30)
@given(tables())
def test_column_index_bounds_hold_every_page(case: tuple[pa.Table, dict[str, Any]]) -> None:
    table, opts = case
    raw, meta = _write(table, **opts)
    leaves = meta.leaves()
    first = 0
    for g, rg in enumerate(meta.row_groups):
        for c, name in enumerate(table.column_names):
            cc = rg.columns[c]
            t = table.schema.field(name).type
            if cc.column_index_offset is None:
                continue
            ci = read_column_index(raw[cc.column_index_offset :][: cc.column_index_length])
            bounds = page_bounds(ci, leaves[c][1], t)
            if pa.types.is_floating(t):
                assert bounds is None, "floats (NaN, -0.0) are never pruned on"
                continue
            assert bounds is not None
            layout = _layout(raw, meta, g, c)
            for p, b in zip(layout.pages, bounds, strict=True):
                values = table.column(name).slice(first + p.first_row, p.rows).to_pylist()
                present = [comparable(v, t) for v in values if v is not None]
                assert b.all_null == (not present)
                assert b.null_count == len(values) - len(present)
                if present:
                    assert (b.lo, b.hi) == (min(present), max(present))
        first += rg.num_rows


TYPED = [
    (pa.int8(), [-128, 5, 127]),
    (pa.int16(), [-30_000, 7]),
    (pa.int32(), [-(2**31), 2**31 - 1]),
    (pa.int64(), [-(2**63), 2**63 - 1]),
    (pa.uint8(), [0, 255]),
    (pa.uint16(), [1, 65_535]),
    (pa.uint32(), [0, 2**32 - 1, 2**31]),
    (pa.uint64(), [0, 2**64 - 1, 2**63]),
    (pa.bool_(), [False, True]),
    (pa.date32(), [dt.date(1900, 1, 1), dt.date(2200, 5, 6)]),
    (pa.timestamp("ms"), [dt.datetime(1960, 1, 1), dt.datetime(2030, 1, 1, 0, 0, 1)]),
    (pa.timestamp("us", tz="UTC"), [dt.datetime(1960, 1, 1, tzinfo=dt.UTC)]),
    (pa.timestamp("ns"), [dt.datetime(2000, 1, 1, 0, 0, 0, 5)]),
    (pa.time64("us"), [dt.time(0, 0, 0, 1), dt.time(23, 59)]),
    (pa.time64("ns"), [dt.time(12)]),
    (pa.duration("ms"), [dt.timedelta(seconds=-5), dt.timedelta(days=3)]),
    (pa.string(), ["", "é", "zz", "a"]),
    (pa.large_string(), ["b", "a"]),
    (pa.binary(), [b"\xff", b"\x00\x01", b""]),
    (pa.large_binary(), [b"x"]),
    (pa.binary(3), [b"\xff\x00\x00", b"\x01\x02\x03"]),
]
UNSUPPORTED = [
    (pa.float64(), [1.5, -0.0]),
    (pa.float32(), [2.0]),
    (pa.decimal128(10, 2), [decimal.Decimal("1.25"), decimal.Decimal("-3.00")]),
    (pa.timestamp("s"), [dt.datetime(2000, 1, 1)]),  # stored as milliseconds
    (pa.date64(), [dt.datetime(2000, 1, 1)]),  # stored as days
    (pa.time32("ms"), [dt.time(1)]),  # no comparable form
]


@pytest.mark.parametrize(("t", "values"), TYPED, ids=[str(t) for t, _ in TYPED])
def test_bounds_are_exact_for_every_supported_type(t: pa.DataType, values: list[Any]) -> None:
    table = pa.table({"x": pa.array([*values, None], t)})
    raw, meta = _write(table)
    cc = meta.row_groups[0].columns[0]
    ci = read_column_index(raw[cc.column_index_offset :][: cc.column_index_length])
    [b] = page_bounds(ci, meta.leaves()[0][1], t) or [None]
    assert b is not None
    present = [comparable(v, t) for v in values]
    assert (b.lo, b.hi, b.null_count) == (min(present), max(present), 1)


@pytest.mark.parametrize(("t", "values"), UNSUPPORTED, ids=[str(t) for t, _ in UNSUPPORTED])
def test_unexact_bounds_are_refused(t: pa.DataType, values: list[Any]) -> None:
    _raw, meta = _write(pa.table({"x": pa.array(values, t)}))
    assert bound_decoder(meta.leaves()[0][1], t) is None


def test_nested_and_repeated_columns_are_not_read_by_page() -> None:
    table = pa.table(
        {
            "a": [1, 2],
            "l": [[1], [2, 3]],
            "s": [{"x": 1}, {"x": 2}],
            "z": ["u", "v"],
        }
    )
    _raw, meta = _write(table)
    assert [flat_leaf(meta, n) for n in ("a", "l", "s", "z", "missing")] == [0, None, None, 3, None]
    with pytest.raises(InvalidParquet):
        chunk_schema(meta, 1)


def test_a_page_that_does_not_match_its_index_is_refused() -> None:
    raw, meta = _write(pa.table({"x": list(range(100))}), max_rows_per_page=10)
    layout = _layout(raw, meta, 0, 0)
    p = layout.pages[2]
    page = raw[p.offset : p.offset + p.size]
    d = layout.dictionary
    assert d is not None and dictionary_needed([page])
    cc = meta.row_groups[0].columns[0]
    schema = chunk_schema(meta, 0)
    with pytest.raises(InvalidParquet, match="without its dictionary"):
        chunk_file(schema, cc, None, [page], [p.rows])
    with pytest.raises(InvalidParquet, match="values"):
        chunk_file(schema, cc, raw[d.start : d.end], [page], [p.rows + 1])
    with pytest.raises(InvalidParquet, match="size"):
        chunk_file(schema, cc, raw[d.start : d.end], [page[:-1]], [p.rows])
    with pytest.raises(InvalidParquet, match="not a dictionary page"):
        chunk_file(schema, cc, page, [page], [p.rows])
    assert isinstance(InvalidParquet("x"), UnsupportedFile)


def test_dictionary_prediction_follows_encoding_stats() -> None:
    values = [f"value-{i:04d}" for i in range(400)]
    raw, meta = _write(
        pa.table({"s": values}), max_rows_per_page=20, dictionary_pagesize_limit=2000
    )
    layout = _layout(raw, meta, 0, 0)
    k = layout.dict_encoded_pages
    assert k is not None and 0 < k < len(layout.pages), "the dictionary fell back to plain"
    for p in layout.pages:
        page = raw[p.offset : p.offset + p.size]
        assert layout.predicts_dictionary([p]) == dictionary_needed([page]) == (p.index < k)
    late = [layout.pages[-1]]
    assert _decode_pages(raw, meta, 0, 0, [late[0].index]).to_pylist() == values[-late[0].rows :]


@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6),
    st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=6),
)
def test_range_algebra_matches_sets(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    ra, rb = union(tuple(a)), union(tuple(b))
    sa = {i for s, e in a for i in range(s, e)}
    sb = {i for s, e in b for i in range(s, e)}
    assert {i for s, e in ra for i in range(s, e)} == sa and count(ra) == len(sa)
    assert {i for s, e in intersect(ra, rb) for i in range(s, e)} == sa & sb
    assert runs(sorted(sa)) == ra
    pages = [p for p in _pages_of(60) if any(p.first_row < e and s < p.end_row for s, e in ra)]
    concat = [r for p in pages for r in range(p.first_row, p.end_row)]
    assert positions(pages, sorted(sa)).tolist() == [concat.index(r) for r in sorted(sa)]


def _pages_of(n: int) -> list[PageSpan]:
    return [PageSpan(i, 4 + i * 10, 10, s, min(s + 7, n)) for i, s in enumerate(range(0, n, 7))]
