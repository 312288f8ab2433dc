"""Page splices of dictionary-encoded, bloom-filtered chunks re-encode only the touched pages
(issue 37 item 2): the pages against the chunk's own dictionary, the bloom filter rebuilt
at the size it had."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pqhelpers import (
    bloom_may_contain,
    expected,
    footer_of,
    read_duckdb,
    read_pyarrow,
    same_rows,
    write,
)
from test_pq_partial import plan_pages
from test_pq_sparse import sparse

from lethe.parquet.bloom import bloom_filter
from lethe.parquet.chunkmeta import WholeChunk
from lethe.parquet.dictpages import Dictionary, rle_decode, rle_encode
from lethe.parquet.enums import Encoding, PageType, PhysicalType
from lethe.parquet.footer import chunk_range, walk_pages
from lethe.parquet.segments import Bytes, Copy, apply_segments

_DICT = (Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 24),
    st.lists(st.tuples(st.integers(0, 2**24), st.integers(1, 40)), max_size=60),
)
def test_rle_hybrid_round_trips(width: int, runs: list[tuple[int, int]]) -> None:
    """Issue 37 item 2: what rle_encode writes, rle_decode reads back (runs and literals)."""
    values = np.array([v % (1 << width) for v, n in runs for _ in range(n)], dtype=np.int64)
    assert rle_decode(rle_encode(values, width), width, len(values)).tolist() == values.tolist()


def _chunks(data: bytes, g: int) -> dict[str, list[Any]]:
    meta = footer_of(data).metadata
    out = {}
    for cc in meta.row_groups[g].columns:
        out[cc.meta_data.path_in_schema[0]] = list(walk_pages(data, 0, chunk_range(cc)))
    return out


def _bloom(data: bytes, g: int, column: str) -> bytes:
    for cc in footer_of(data).metadata.row_groups[g].columns:
        if cc.meta_data.path_in_schema[0] == column:
            at, n = cc.meta_data.bloom_filter_offset, cc.meta_data.bloom_filter_length
            assert at is not None and n is not None
            return data[at : at + n]
    raise AssertionError(column)


def test_dictionary_bloom_chunk_reencodes_only_the_touched_page(tmp_path: Path) -> None:
    """Issue 37 item 2 (done-when): a page splice of a dictionary-encoded, bloom-filtered
    chunk re-encodes only the page holding the erased row: the chunk's other pages are
    copied, its pages stay dictionary-encoded, its bloom filter keeps its size and finds
    every kept value but not the erased one (before: the chunk was re-encoded whole, 'the
    rebuilt bloom filter differs in size' / 'a plain page would precede ...')."""
    n = 20_000
    rng = np.random.default_rng(37)
    cust = np.sort(rng.integers(0, 2_000, n)).astype(np.int64)
    t = pa.table({"id": np.arange(n, dtype=np.int64), "customer": cust})
    data = write(
        t,
        row_group_size=n,
        write_page_index=True,
        data_page_size=2048,
        compression="zstd",
        bloom_filter_options={"customer": {"ndv": n, "fpp": 0.01}},
    )
    victim = int(cust[n // 2])
    rows = [int(i) for i in np.flatnonzero(cust == victim)]
    new, plan, _, _ = sparse(data, {0: rows})
    fate = plan.groups[0]
    assert (fate.level, fate.reason) == ("page", None)
    assert read_pyarrow(new).equals(expected(t, data, {0: rows}))
    (tmp_path / "new.parquet").write_bytes(new)
    assert same_rows(read_duckdb(tmp_path / "new.parquet"), expected(t, data, {0: rows}), "id")
    before, after = _chunks(data, 0)["customer"], _chunks(new, 0)["customer"]
    assert after[0].header.type == PageType.DICTIONARY_PAGE
    assert all(p.header.encoding in _DICT for p in after[1:])
    touched = {i for i, p in enumerate(before[1:]) if p.header.num_values and i}
    assert len(after) >= len(before) - 1 and touched
    new_bytes = sum(s.length for s in plan.segments if isinstance(s, Bytes))
    copied = sum(s.length for s in plan.segments if isinstance(s, Copy))
    assert new_bytes < copied
    old_bloom, new_bloom = _bloom(data, 0, "customer"), _bloom(new, 0, "customer")
    assert len(new_bloom) == len(old_bloom) and new_bloom != old_bloom
    bits = new_bloom[len(new_bloom) - (1 << (len(new_bloom).bit_length() - 1)) :]
    for v in np.unique(np.delete(cust, rows)):
        assert bloom_may_contain(bits, int(v).to_bytes(8, "little", signed=True))
    assert not bloom_may_contain(bits, victim.to_bytes(8, "little", signed=True))
    # the erased customer's dictionary entry is gone, the others stay where they were
    cc = footer_of(new).metadata.row_groups[0].columns[1]
    d = after[0]
    raw = new[d.data_offset : d.end]
    parsed = Dictionary.parse(d, raw, cc.meta_data.codec, PhysicalType.INT64, None)
    entries = [parsed.entries[i : i + 1].tobytes() for i in range(len(parsed.entries))]
    assert victim.to_bytes(8, "little", signed=True) not in entries
    kept = {int(v) for v in np.unique(np.delete(cust, rows))}
    assert {int.from_bytes(e, "little", signed=True) for e in entries} == kept


@st.composite
def cases(draw: st.DrawFn) -> tuple[pa.Table, dict[str, Any], list[int]]:
    """A table of dictionary-encoded columns with nulls, its layout and erased positions."""
    n = draw(st.integers(300, 4000))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    nulls = draw(st.sampled_from([0.0, 0.1, 0.6]))
    k = draw(st.integers(1, 300))
    tag = rng.integers(0, k, n)
    if draw(st.booleans()):
        tag = np.sort(tag)
    names = pa.array([f"tag-{v:05d}" for v in tag], mask=rng.random(n) < nulls)
    t = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "tag": names,
            "small": pa.array(rng.integers(-5, 5, n), type=pa.int32(), mask=rng.random(n) < nulls),
            "day": pa.array(tag.astype("datetime64[D]").astype("int32"), type=pa.date32()),
        }
    )
    kw = {
        "row_group_size": n,
        "write_page_index": True,
        "use_dictionary": ["tag", "small", "day"],
        "data_page_size": draw(st.sampled_from([256, 1024])),
        "write_batch_size": 64,
        "data_page_version": draw(st.sampled_from(["1.0", "2.0"])),
        "compression": draw(st.sampled_from(["none", "zstd", "snappy", "gzip"])),
        "write_page_checksum": draw(st.booleans()),
        "bloom_filter_options": {"tag": {"ndv": 256}, "day": {"ndv": 512}}
        if draw(st.booleans())
        else None,
    }
    keep = draw(st.sampled_from([0.5, 0.95, 0.999]))
    gone = sorted(int(i) for i in np.flatnonzero(rng.random(n) > keep))
    if not gone:
        gone = [draw(st.integers(0, n - 1))]
    return t, kw, gone


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_dictionary_page_splice_reads_back_the_model(
    case: tuple[pa.Table, dict[str, Any], list[int]],
) -> None:
    """Issue 37 item 2: for random keep-masks and null patterns, a page splice that
    re-encodes dictionary-encoded pages against their own dictionary reads back exactly
    the table minus the erased rows (pyarrow, same types), the chunks stay
    dictionary-encoded, and no erased-only value is left in a dictionary."""
    t, kw, gone = case
    data = write(t, **kw)
    erase = {0: gone}
    new, plan, _, _ = sparse(data, erase)
    want = expected(t, data, erase)
    got = read_pyarrow(new)
    assert got.schema == t.schema and got.equals(want)
    for name in ("tag", "small", "day"):
        pages = _chunks(new, 0)[name]
        assert all(p.header.encoding in _DICT for p in pages if p.header.is_data), name
    left = set(want["tag"].to_pylist())
    for v in set(t["tag"].to_pylist()) - left - {None}:
        d = pq.read_table(pa.BufferReader(new), read_dictionary=["tag"])["tag"]
        assert v not in d.combine_chunks().dictionary.to_pylist()
    assert plan.groups[0].level in ("page", "row_group")


def test_bloom_filter_rebuilt_at_its_size() -> None:
    """Issue 37 item 2b: pyarrow sizes a filter by the distinct values it sees, so one
    fewer value can halve it; the splice rebuilds it at the size it had, and the chunk is
    not re-encoded whole (before: 'the rebuilt bloom filter differs in size'). Kept values
    are found, the erased one is not (checked with an independent xxHash64)."""
    n = 1024
    t = pa.table({"id": np.arange(n, dtype=np.int64) * 7, "v": np.arange(n, dtype=np.int32)})
    data = write(
        t,
        row_group_size=n,
        write_page_index=True,
        data_page_size=512,
        write_batch_size=64,
        use_dictionary=False,
        bloom_filter_options={"id": {"ndv": n, "fpp": 0.01}},
    )
    new, plan, _, _ = sparse(data, {0: [500]})
    assert (plan.groups[0].level, plan.groups[0].reason) == ("page", None)
    dense = apply_segments(plan_pages(data, {0: [500]}, page_level=False).segments, data)
    assert _bloom(dense, 0, "id") == _bloom(new, 0, "id")  # the row-group splice's too
    assert read_pyarrow(new).equals(expected(t, data, {0: [500]}))
    old_bloom, new_bloom = _bloom(data, 0, "id"), _bloom(new, 0, "id")
    assert len(new_bloom) == len(old_bloom)
    bits = new_bloom[len(new_bloom) - (1 << (len(new_bloom).bit_length() - 1)) :]
    ids = t["id"].to_pylist()
    assert all(
        bloom_may_contain(bits, v.to_bytes(8, "little")) for i, v in enumerate(ids) if i != 500
    )
    assert not bloom_may_contain(bits, ids[500].to_bytes(8, "little"))


def test_bloom_filter_of_no_value_is_empty_at_its_size() -> None:
    """Issue 37 item 2b: a chunk whose remaining values are all null keeps a filter of the
    original's size with no bit set (found by the splice-vs-rewrite property test)."""
    raw = bloom_filter(pa.array([None, None], pa.decimal128(9, 3)), 47, PhysicalType.INT32)
    assert raw is not None and len(raw) == 47 and not any(raw[-32:])


@given(
    mine=st.lists(st.binary(max_size=3), min_size=1, max_size=30),
    fixed=st.booleans(),
    data=st.data(),
)
def test_dictionary_mapping_finds_the_first_same_bytes(
    mine: list[bytes], fixed: bool, data: st.DataObject
) -> None:
    """The vectorized mapping (issue 37 item 4) gives each entry of the other dictionary the
    first index of the same bytes here, for byte arrays and fixed widths, and refuses an
    entry that is not here."""
    if fixed:
        mine = [e.ljust(3, b"\0") for e in mine]
        phys, arr = PhysicalType.FIXED_LEN_BYTE_ARRAY, np.frombuffer(b"".join(mine), "V3")
    else:
        phys, arr = PhysicalType.BYTE_ARRAY, np.array([*mine, b""], dtype=object)[:-1]
    theirs = data.draw(st.lists(st.sampled_from(mine), max_size=20))
    if fixed:
        other = np.frombuffer(b"".join(theirs), "V3") if theirs else np.zeros(0, "V3")
    else:
        other = np.array([*theirs, b""], dtype=object)[:-1]
    here = Dictionary(None, 0, phys, arr)  # type: ignore[arg-type]
    got = here.mapping(Dictionary(None, 0, phys, other))  # type: ignore[arg-type]
    assert got.tolist() == [mine.index(e) for e in theirs]
    absent = b"\xff\xff\xff\xff"[: 3 if fixed else 4]
    extra = np.frombuffer(absent, "V3") if fixed else np.array([absent, b""], dtype=object)[:1]
    if absent not in mine:
        with pytest.raises(WholeChunk):
            here.mapping(Dictionary(None, 0, phys, extra))  # type: ignore[arg-type]
