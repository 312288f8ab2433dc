"""The multipart part planner: the 5 MiB rule at every edge, and optimal plans."""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pqhelpers import segment_layouts

from lethe.errors import SpliceRefused
from lethe.parquet.costs import plan_upload, upload_cost
from lethe.parquet.parts import (
    ChainedPlan,
    CopyPart,
    Download,
    MultipartPlan,
    PartLimits,
    Plan,
    SinglePut,
    StageCopy,
    UploadPart,
    assemble,
    bytes_moved,
    plan_chained,
    plan_download,
    plan_parts,
)
from lethe.parquet.segments import Bytes, Copy, Segment, apply_segments, normalize

MiB = 1 << 20
GiB = 1 << 30
BIG = 10 * GiB  # a source size that never limits


def new(n: int) -> Bytes:
    return Bytes(b"n" * n)


def shape(plan: Plan) -> list[tuple[str, int]]:
    """("C", size) for copies, ("U", size) for uploads."""
    assert isinstance(plan, MultipartPlan)
    return [("C" if isinstance(p, CopyPart) else "U", p.size) for p in plan.parts]


def check_limits(plan: Plan, lim: PartLimits | None = None) -> None:
    lim = lim or PartLimits()
    if isinstance(plan, SinglePut):
        return
    sizes = [p.size for p in plan.parts]
    assert all(s >= lim.min_part for s in sizes[:-1])
    assert all(0 < s <= lim.max_part for s in sizes)
    assert len(sizes) <= lim.max_parts


# --- single PUT -------------------------------------------------------------------------------
def test_source_of_5_mb_or_less_is_one_put() -> None:
    segs = [Copy(0, 4_000_000), new(6 * MiB)]
    plan = plan_parts(segs, 5_000_000)
    assert isinstance(plan, SinglePut)
    assert plan.pieces == (Download(0, 4_000_000), new(6 * MiB))
    assert plan.bytes_downloaded == 4_000_000 and plan.ranged_gets == 1 and plan.bytes_copied == 0
    assert isinstance(
        plan_parts([Copy(0, 4_000_000), Copy(4_000_000, 5_000_000)], 5_000_000), SinglePut
    )
    # a source just over 5 MB can only be copied as the (short) last part
    assert shape(plan_parts([new(6 * MiB), Copy(0, 5_000_001)], 5_000_001)) == [
        ("U", 6 * MiB),
        ("C", 5_000_001),
    ]
    assert isinstance(plan_parts([new(6 * MiB), Copy(0, 5_000_000)], 5_000_000), SinglePut)


def test_result_under_5_mib_is_one_put() -> None:
    plan = plan_parts([Copy(0, 5 * MiB - 1)], BIG)
    assert isinstance(plan, SinglePut)
    assert plan.size == 5 * MiB - 1
    assert shape(plan_parts([Copy(0, 5 * MiB)], BIG)) == [("C", 5 * MiB)]
    # 5 MiB exactly, but the copy cannot be a part of its own: nothing to copy, one PUT
    assert isinstance(plan_parts([Copy(0, 5 * MiB - 4), new(4)], BIG), SinglePut)
    assert shape(plan_parts([Copy(0, 5 * MiB), new(4)], BIG)) == [("C", 5 * MiB), ("U", 4)]


def test_nothing_to_copy_is_one_put() -> None:
    plan = plan_parts([new(7 * MiB), Copy(0, 3 * MiB), new(1)], BIG)
    assert isinstance(plan, SinglePut)
    assert plan.bytes_downloaded == 3 * MiB


# --- copy ranges ------------------------------------------------------------------------------
def test_copy_range_of_exactly_5_mib_is_copied() -> None:
    plan = plan_parts([new(5 * MiB), Copy(0, 5 * MiB), new(10)], BIG)
    assert shape(plan) == [("U", 5 * MiB), ("C", 5 * MiB), ("U", 10)]
    assert plan.bytes_downloaded == 0


def test_copy_range_under_5_mib_is_downloaded() -> None:
    plan = plan_parts([new(5 * MiB), Copy(0, 5 * MiB - 1), new(10), Copy(BIG - 6 * MiB, BIG)], BIG)
    assert shape(plan) == [("U", 10 * MiB + 9), ("C", 6 * MiB)]
    assert plan.bytes_downloaded == 5 * MiB - 1
    assert plan.ranged_gets == 1


def test_copy_ranges_over_5_gib_are_split() -> None:
    n = 11 * GiB
    plan = plan_parts([Copy(0, n), new(1)], 2 * n)
    sizes = shape(plan)
    assert [k for k, _ in sizes] == ["C", "C", "C", "U"]
    assert sum(s for _, s in sizes[:3]) == n
    check_limits(plan)
    assert plan.bytes_downloaded == 0


def test_a_short_last_copy_may_be_the_last_part() -> None:
    plan = plan_parts([Copy(0, 20 * MiB), Copy(30 * MiB, 31 * MiB)], BIG)
    # the 1 MiB range is downloaded with 4 MiB borrowed from the first's tail, or copied
    # as the last part after the 20 MiB copy: copying is free
    assert shape(plan) == [("C", 20 * MiB), ("C", 1 * MiB)]
    assert plan.bytes_downloaded == 0


# --- borrowing --------------------------------------------------------------------------------
def test_leading_magic_borrows_from_the_next_range_head() -> None:
    plan = plan_parts([Bytes(b"PAR1"), Copy(4, 100 * MiB), new(100)], BIG)
    assert shape(plan) == [("U", 5 * MiB), ("C", 95 * MiB), ("U", 100)]
    first = plan.parts[0]
    assert isinstance(first, UploadPart)
    assert first.pieces == (Bytes(b"PAR1"), Download(4, 5 * MiB))
    assert plan.bytes_downloaded == 5 * MiB - 4


def test_borrowing_that_would_leave_the_range_short_downloads_it_whole() -> None:
    # 4 bytes + a range of 10 MiB - 5: lending 5 MiB - 4 leaves 5 MiB - 1
    plan = plan_parts([Bytes(b"PAR1"), Copy(4, 10 * MiB - 1), new(100)], BIG)
    assert isinstance(plan, SinglePut)
    assert plan.bytes_downloaded == 10 * MiB - 5
    # ... one more byte and lending works
    plan = plan_parts([Bytes(b"PAR1"), Copy(4, 10 * MiB), new(100)], BIG)
    assert shape(plan) == [("U", 5 * MiB), ("C", 5 * MiB), ("U", 100)]


def test_short_buffer_between_copies_borrows_once() -> None:
    segs = [Copy(0, 50 * MiB), new(1 * MiB), Copy(60 * MiB, 100 * MiB), new(1000)]
    plan = plan_parts(segs, BIG)
    assert plan.bytes_downloaded == 4 * MiB
    assert plan.ranged_gets == 1
    assert [k for k, _ in shape(plan)] == ["C", "U", "C", "U"]
    assert shape(plan)[1] == ("U", 5 * MiB)


def test_borrowing_from_both_neighbours() -> None:
    # previous range can lend 1 MiB, next range 3 MiB: the buffer needs 4 MiB
    segs = [Copy(0, 6 * MiB), new(1 * MiB), Copy(10 * MiB, 18 * MiB), new(10)]
    plan = plan_parts(segs, BIG)
    assert plan.bytes_downloaded == 4 * MiB
    assert shape(plan) == [("C", 5 * MiB), ("U", 5 * MiB), ("C", 5 * MiB), ("U", 10)]
    middle = plan.parts[1]
    assert isinstance(middle, UploadPart)
    assert middle.pieces == (
        Download(5 * MiB, 6 * MiB),
        new(1 * MiB),
        Download(10 * MiB, 13 * MiB),
    )


def test_buffer_reaching_5_mib_needs_no_borrowing() -> None:
    segs = [Copy(0, 6 * MiB), new(5 * MiB), Copy(10 * MiB, 16 * MiB), new(1)]
    plan = plan_parts(segs, BIG)
    assert plan.bytes_downloaded == 0
    assert shape(plan) == [("C", 6 * MiB), ("U", 5 * MiB), ("C", 6 * MiB), ("U", 1)]


def test_the_final_buffer_never_borrows() -> None:
    plan = plan_parts([Copy(0, 256 * MiB), new(130_000)], BIG)
    assert shape(plan) == [("C", 256 * MiB), ("U", 130_000)]
    assert plan.bytes_downloaded == 0


def test_downloading_a_small_last_range_beats_borrowing() -> None:
    segs = [Copy(0, 20 * MiB), new(1 * MiB), Copy(30 * MiB, 31 * MiB)]
    plan = plan_parts(segs, BIG)
    assert plan.bytes_downloaded == 1 * MiB
    assert shape(plan) == [("C", 20 * MiB), ("U", 2 * MiB)]


def test_typical_splice_of_one_middle_group() -> None:
    """256 MiB file, 16 MiB groups, group 7 re-encoded: two copies and a new middle part."""
    rg = 16 * MiB
    segs = [Copy(0, 7 * rg + 4), new(rg + 100), Copy(8 * rg + 4, 16 * rg + 4), new(130_000)]
    plan = plan_parts(segs, 16 * rg + 200_000)
    assert shape(plan) == [("C", 7 * rg + 4), ("U", rg + 100), ("C", 8 * rg), ("U", 130_000)]
    assert plan.bytes_downloaded == 0
    assert plan.bytes_copied == 15 * rg + 4


def test_limits() -> None:
    with pytest.raises(ValueError, match="inconsistent"):
        PartLimits(min_part=10, max_part=15)
    with pytest.raises(ValueError, match="past the source"):
        plan_parts([Copy(0, 11)], 10)
    lim = PartLimits(min_part=2, max_part=4, max_parts=3, min_copy_source=0, max_put=100)
    with pytest.raises(SpliceRefused, match="more than 3"):
        plan_parts([Copy(0, 20), new(1)], 100, limits=lim)
    big_put = PartLimits(min_part=2, max_part=4, min_copy_source=1000, max_put=5)
    with pytest.raises(SpliceRefused, match="one PUT"):
        plan_parts([new(6)], 10, limits=big_put)


def test_segments_are_normalized_first() -> None:
    segs = [Copy(0, 3 * MiB), Copy(3 * MiB, 6 * MiB), Bytes(b""), new(1), Copy(7 * MiB, 7 * MiB)]
    plan = plan_parts(segs, BIG)
    assert shape(plan) == [("C", 6 * MiB), ("U", 1)]


# --- properties -------------------------------------------------------------------------------
def oracle(segments: Sequence[Segment], lim: PartLimits) -> int:
    """Fewest downloaded bytes over every way of cutting the target into valid parts."""
    seg_of: list[int] = []
    src: list[int | None] = []
    for i, s in enumerate(segments):
        for k in range(s.length):
            seg_of.append(i)
            src.append(s.start + k if isinstance(s, Copy) else None)
    n = len(src)
    inf = float("inf")
    best: list[float] = [inf] * (n + 1)
    best[0] = 0
    for p in range(n):
        if best[p] == inf:
            continue
        for q in range(p + 1, min(n, p + lim.max_part) + 1):
            if q - p < lim.min_part and q != n:
                continue
            copyable = all(seg_of[x] == seg_of[p] and src[x] is not None for x in range(p, q))
            cost = 0 if copyable else sum(src[x] is not None for x in range(p, q))
            best[q] = min(best[q], best[p] + cost)
    return int(best[n])


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[Segment], bytes, PartLimits]:
    """Segments over an 80-byte random source, and part limits scaled down to them."""
    mn = draw(st.integers(1, 8))
    lim = PartLimits(
        min_part=mn,
        max_part=draw(st.integers(2 * mn, 3 * mn + 2)),
        max_parts=10_000,
        min_copy_source=draw(st.sampled_from([0, 10, 60])),
        max_put=10_000,
    )
    source_size = 80
    segs: list[Segment] = []
    for _ in range(draw(st.integers(0, 7))):
        if draw(st.booleans()):
            a = draw(st.integers(0, source_size))
            b = draw(st.integers(a, min(source_size, a + 3 * mn + 5)))
            segs.append(Copy(a, b))
        else:
            segs.append(Bytes(bytes(draw(st.lists(st.integers(97, 122), max_size=2 * mn + 3)))))
    rnd = draw(st.randoms(use_true_random=False))
    return segs, bytes(rnd.randrange(256) for _ in range(source_size)), lim


@settings(max_examples=600, deadline=None)
@given(layouts())
def test_any_plan_rebuilds_the_target_within_the_limits(
    layout: tuple[list[Segment], bytes, PartLimits],
) -> None:
    segs, source, lim = layout
    source_size = len(source)
    plan = plan_parts(segs, source_size, limits=lim)
    target = apply_segments(segs, source)
    assert assemble(plan, source) == target
    assert plan.size == len(target)
    check_limits(plan, lim)
    norm = normalize(segs)
    copy_bytes = sum(s.length for s in norm if isinstance(s, Copy))
    if source_size <= lim.min_copy_source or len(target) < lim.min_part:
        assert isinstance(plan, SinglePut)
        assert plan.bytes_downloaded == copy_bytes
        return
    if isinstance(plan, MultipartPlan):
        # every copy part copies a range that lands at the same place in the target
        at = 0
        starts = []
        pos = 0
        for s in norm:
            starts.append((pos, s))
            pos += s.length
        for p in plan.parts:
            if isinstance(p, CopyPart):
                seg = next(s for b, s in starts if isinstance(s, Copy) and b <= at < b + s.length)
                base = next(b for b, s in starts if s is seg)
                assert isinstance(seg, Copy)
                assert p.start == seg.start + at - base and p.end <= seg.end
            at += p.size
        assert plan.bytes_copied + plan.bytes_downloaded == copy_bytes
    assert plan.bytes_downloaded == oracle(norm, lim)


# --- chained uploads ------------------------------------------------------------------------
def check_chain(plan: ChainedPlan, lim: PartLimits) -> None:
    """Every stage obeys the part rules on its own; stage copies read earlier stages."""
    sizes_of = []
    for i, stage in enumerate(plan.stages):
        sizes = [p.size for p in stage]
        assert sizes, f"stage {i} is empty"
        assert all(s >= lim.min_part for s in sizes[:-1]), (i, sizes)
        assert all(0 < s <= lim.max_part for s in sizes)
        for p in stage:
            if isinstance(p, StageCopy):
                assert p.stage < i and p.end <= sizes_of[p.stage]
                assert sizes_of[p.stage] > lim.min_copy_source
        sizes_of.append(sum(sizes))


def test_a_short_edit_between_copies_chains_instead_of_downloading() -> None:
    segs = [Copy(0, 100 * MiB), new(MiB), Copy(101 * MiB, 200 * MiB), new(100)]
    plain = plan_parts(segs, 200 * MiB)
    chained = plan_chained(segs, 200 * MiB)
    assert plain.bytes_downloaded == 4 * MiB
    assert chained.bytes_downloaded == 0
    assert bytes_moved(chained) == MiB + 100
    check_chain(chained, PartLimits())
    # stage 1: the prefix's last 5 MiB copied, the new bytes as its last part; the object
    # copies the rest of the prefix, then stage 1 whole
    assert chained.stages[0][0] == CopyPart(95 * MiB, 100 * MiB)
    assert [type(p).__name__ for p in chained.stages[0]] == ["CopyPart", "UploadPart"]
    assert chained.stages[1][:2] == (CopyPart(0, 95 * MiB), StageCopy(0, 0, 6 * MiB))
    assert chained.bytes_copied < 200 * MiB + 12 * MiB
    assert plan_upload(segs, 200 * MiB) == chained
    # nothing to gain: the plain plan stays
    far = [Copy(0, 100 * MiB), new(6 * MiB), Copy(101 * MiB, 200 * MiB), new(100)]
    assert isinstance(plan_upload(far, 200 * MiB), MultipartPlan)


def test_a_short_start_fills_the_first_part_then_chains() -> None:
    segs = [new(4), new(MiB), Copy(2 * MiB, 50 * MiB), new(10), Copy(60 * MiB, 80 * MiB), new(5)]
    chained = plan_chained(segs, 80 * MiB)
    check_chain(chained, PartLimits())
    source = bytes(range(256)) * (80 * MiB // 256)
    assert assemble(chained, source) == apply_segments(segs, source)
    assert chained.bytes_downloaded == 5 * MiB - (MiB + 4)


@settings(max_examples=300, deadline=None)
@given(segment_layouts((60, 400), 8, 120, 40))
def test_chained_plans_assemble_the_segments(case: tuple[list[Segment], int]) -> None:
    segs, size = case
    lim = PartLimits(
        min_part=20, max_part=50, max_parts=10_000, min_copy_source=10, max_put=1 << 20
    )
    source = bytes(random.Random(size).randrange(256) for _ in range(size))
    chained = plan_chained(segs, size, limits=lim)
    check_chain(chained, lim)
    assert assemble(chained, source) == apply_segments(segs, source)
    best = plan_upload(segs, size, limits=lim)
    assert assemble(best, source) == apply_segments(segs, source)
    # the cheapest by total cost: never worse than the plain plan or a streaming rewrite
    total = upload_cost(best).total()
    assert total <= upload_cost(plan_download(segs, size, limits=lim)).total()
    plain = plan_parts(segs, size, limits=lim)
    if upload_cost(plain).copied <= 1.5 * size:
        assert total <= upload_cost(plain).total()


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_normalize_keeps_the_bytes_and_leaves_no_mergeable_neighbours(
    layout: tuple[list[Segment], bytes, PartLimits],
) -> None:
    segs, source, _ = layout
    norm = normalize(segs)
    assert apply_segments(norm, source) == apply_segments(segs, source)
    assert all(s.length for s in norm)
    for a, b in itertools.pairwise(norm):
        assert not (isinstance(a, Bytes) and isinstance(b, Bytes))
        assert not (isinstance(a, Copy) and isinstance(b, Copy) and a.end == b.start)
