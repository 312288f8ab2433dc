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

from bench.floor import MIN_PART, file_floor, plan_parts


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


def test_a_real_file_floor_counts_only_the_pages_that_hold_a_removed_row() -> None:
    n = 1_600_000
    rng = np.random.default_rng(7)
    t = pa.table({"id": np.arange(n), "v": rng.integers(0, 1 << 40, n)})
    sink = pa.BufferOutputStream()
    pq.write_table(
        t,
        sink,
        row_group_size=n,
        data_page_size=64 << 10,
        write_page_index=True,
        compression="none",
    )
    body = sink.getvalue().to_pybytes()
    assert len(body) > 2 * MIN_PART
    removed = np.zeros(n, bool)
    removed[n // 2] = True  # one row in the middle: one page per column, padded to 5 MiB
    f = file_floor(body, removed)
    assert f.files == 1 and MIN_PART <= f.down < len(body) // 2 and f.up <= f.down
    assert f.requests >= 5 and f.cpu >= 0
    everything = file_floor(body, np.ones(n, bool))
    assert everything.down == len(body)  # every page edited: the floor is a rewrite
