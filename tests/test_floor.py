"""The erasure floor of the benches (issue 37, bench/floor.py): the multipart plan is the
cheapest S3 allows, and a real file's floor sees its pages."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.floor import MIN_PART, _blooms, _edited, file_floor, plan_parts
from lethe.parquet.footer import footer_length, parse_tail


def brute(size: int, must: Sequence[tuple[int, int]], min_part: int) -> int:
    """The fewest uploaded bytes over every split of [0, size) into parts (small sizes)."""
    dirty = [any(a <= x < b for a, b in must) for x in range(size)]

    @functools.cache
    def best(at: int) -> float:
        if at == size:
            return 0
        out = float("inf")
        for end in range(at + 1, size + 1):
            if end - at < min_part and end != size:
                continue
            cost = 0 if not any(dirty[at:end]) else end - at
            out = min(out, cost + best(end))
        return out

    return int(best(0))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(10, 40),
    st.lists(st.tuples(st.integers(0, 39), st.integers(1, 6)), max_size=4),
    st.integers(1, 8),
    st.integers(2, 9),
)
def test_the_plan_is_the_cheapest_split(
    size: int, edits: list[tuple[int, int]], tail: int, min_part: int
) -> None:
    edited = [(a, min(size, a + n)) for a, n in edits if a < size]
    tail_from = size - min(tail, size)
    up, parts, uploads = plan_parts(size, edited, tail_from, min_part)
    assert up == brute(size, [*edited, (tail_from, size)], min_part)
    assert 1 <= uploads <= parts
    assert up >= size - tail_from


def _parquet(t: pa.Table, blooms: dict[str, dict[str, float]] | None = None) -> bytes:
    """``t`` as one row group of 64 KiB pages with a page index, uncompressed."""
    sink = pa.BufferOutputStream()
    opts = {"bloom_filter_options": blooms} if blooms else {}
    pq.write_table(
        t,
        sink,
        row_group_size=t.num_rows,
        data_page_size=64 << 10,
        write_page_index=True,
        compression="none",
        **opts,
    )
    return sink.getvalue().to_pybytes()


def test_a_real_file_floor_counts_only_the_pages_that_hold_a_removed_row() -> None:
    n = 1_600_000
    rng = np.random.default_rng(7)
    body = _parquet(pa.table({"id": np.arange(n), "v": rng.integers(0, 1 << 40, n)}))
    assert len(body) > 2 * MIN_PART
    removed = np.zeros(n, bool)
    removed[n // 2] = True  # one row in the middle: one page per column, and the tail
    f = file_floor(body, removed)
    _, tail_from, *_ = _edited(body, removed)
    pages = 2 * (64 << 10)  # a page per column (64 KiB pages, uncompressed)
    assert f.files == 1 and f.up < f.down <= len(body) - tail_from + 2 * pages
    # bytes: only the edited pages travel (a staging object carries a run under 5 MiB);
    # requests: the assembly with the fewest pads its upload parts to 5 MiB
    assert f.down < MIN_PART and f.requests >= 5 and f.cpu >= 0
    small = _parquet(pa.table({"id": np.arange(1000)}))
    one = np.zeros(1000, bool)
    one[0] = True
    assert file_floor(small, one).down == len(small)  # one part: the file goes whole
    everything = file_floor(body, np.ones(n, bool))
    # every data page edited: nearly a rewrite (the dictionary pages stay as they are)
    assert 0.9 * len(body) < everything.down <= len(body)


def test_the_floor_counts_a_bloom_filter_whose_bits_must_change() -> None:
    """A removed value kept nowhere else in its row group changes that column's bloom
    filter: the floor uploads it; a removed value still present elsewhere leaves it."""
    n = 400_000
    blooms = {"id": {"ndv": n, "fpp": 0.01}, "c": {"ndv": 1_000, "fpp": 0.01}}
    body = _parquet(pa.table({"id": np.arange(n), "c": np.arange(n) % 1_000}), blooms)
    meta = pq.ParquetFile(pa.BufferReader(body)).metadata.row_group(0)
    assert {meta.column(i).path_in_schema for i in range(2)} == set(blooms)
    removed = np.zeros(n, bool)
    removed[5] = True  # id 5 leaves (unique); c = 5 stays in 399 other rows
    ranges, *_ = _edited(body, removed)
    tail = body[-(1 << 20) :]
    rg = parse_tail(tail[-footer_length(tail, len(body)) - 8 :], len(body)).metadata.row_groups[0]
    got = _blooms(body, 0, removed, rg)
    assert len(got) == 1 and set(got) <= set(ranges)
    off = rg.columns[0].meta_data.bloom_filter_offset
    assert got[0][0] == off  # the id column's filter, not c's
