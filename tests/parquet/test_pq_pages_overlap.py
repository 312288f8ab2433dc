"""The pages a set of erased row ranges touches: by binary search, equal to a brute force
over every row (property-based)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lethe.parquet.pages import ChunkLayout, PageSpan


@st.composite
def layouts_and_ranges(draw: st.DrawFn) -> tuple[ChunkLayout, list[tuple[int, int]]]:
    sizes = draw(st.lists(st.integers(1, 40), min_size=1, max_size=30))
    pages, at = [], 0
    for i, n in enumerate(sizes):
        pages.append(PageSpan(index=i, offset=4 + 100 * i, size=100, first_row=at, end_row=at + n))
        at += n
    rows = draw(st.lists(st.integers(0, at - 1), unique=True, max_size=60))
    ranges = []  # erased positions as disjoint runs (what the splice passes), shuffled
    for r in sorted(rows):
        if ranges and ranges[-1][1] == r:
            ranges[-1] = (ranges[-1][0], r + 1)
        else:
            ranges.append((r, r + 1))
    ranges = draw(st.permutations(ranges))
    return ChunkLayout(column=0, pages=tuple(pages), dictionary=None, dict_encoded_pages=0), ranges


@given(layouts_and_ranges())
def test_overlapping_pages_are_those_holding_a_row_of_a_range(
    case: tuple[ChunkLayout, list[tuple[int, int]]],
) -> None:
    layout, ranges = case
    rows = {r for s, e in ranges for r in range(s, e)}
    expected = tuple(p for p in layout.pages if any(p.first_row <= r < p.end_row for r in rows))
    assert layout.overlapping(ranges) == expected


def test_a_range_spanning_pages_touches_each_and_none_touches_nothing() -> None:
    pages = tuple(
        PageSpan(index=i, offset=4 + 10 * i, size=10, first_row=10 * i, end_row=10 * i + 10)
        for i in range(5)
    )
    layout = ChunkLayout(column=0, pages=pages, dictionary=None, dict_encoded_pages=None)
    assert [p.index for p in layout.overlapping([(15, 31)])] == [1, 2, 3]
    assert [p.index for p in layout.overlapping([(0, 1), (49, 50)])] == [0, 4]
    assert layout.overlapping([]) == ()
