"""The cost model: upload plans that count copies, requests and stages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from pqhelpers import footer_of, segment_layouts, write

from lethe.parquet.costs import CostModel, plan_upload, upload_cost
from lethe.parquet.locate import GroupEdit
from lethe.parquet.parts import PartLimits, assemble, plan_chained, plan_download
from lethe.parquet.segments import Bytes, Copy, Extent, Segment, apply_segments
from lethe.parquet.splice import splice

KiB = 1 << 10
# S3's rules scaled down 160x (5 MiB -> 32 KiB) so a small file has S3's shape
LIMITS = PartLimits(min_part=32 * KiB, max_part=64 << 20, min_copy_source=32_000)


def many_groups() -> bytes:
    """~1 MiB in 16 row groups of 8 random int64 columns, pages of ~1 KiB."""
    n = 16 * 1_000
    rng = np.random.default_rng(7)
    cols = {f"c{j}": rng.integers(-(1 << 62), 1 << 62, n) for j in range(8)}
    t = pa.table({"id": np.arange(n, dtype=np.int64), **cols})
    return write(
        t,
        row_group_size=1_000,
        data_page_size=KiB,
        write_batch_size=128,
        write_page_index=True,
        compression="none",
        use_dictionary=False,
    )


def test_a_page_in_every_group_is_uploaded_with_at_most_the_file_copied() -> None:
    data = many_groups()
    footer = footer_of(data)
    size = len(data)
    edits = {g: GroupEdit(erased=((500, 501),)) for g in range(16)}
    plan = splice(footer, edits, [Extent(0, data)])
    assert all(f.level == "page" for f in plan.groups), plan.groups
    segs = plan.segments
    assert sum(isinstance(s, Bytes) and s.length < LIMITS.min_part for s in segs) >= 16
    # the wire-minimal chain: each short segment a stage copying the stage before it whole
    old = plan_chained(segs, size, limits=LIMITS)
    assert old.bytes_copied > 5 * size
    assert len(old.stages) > 16
    new = plan_upload(segs, size, limits=LIMITS)
    cost = upload_cost(new)
    assert cost.copied <= size
    assert cost.stages <= CostModel().max_stages
    assert cost.requests < upload_cost(old).requests / 2
    assert assemble(new, data) == apply_segments(segs, data)
    # never worse than the rewrite's plan, whose copies are none
    assert cost.total() <= upload_cost(plan_download(segs, size, limits=LIMITS)).total()


def test_bytes_already_in_memory_are_not_downloaded_again() -> None:
    segs: list[Segment] = [Copy(0, 300 * KiB), Bytes(b"x" * 10), Copy(400 * KiB, 500 * KiB)]
    plan = plan_download(segs, 600 * KiB, limits=LIMITS)
    assert upload_cost(plan).downloaded == 400 * KiB
    held = upload_cost(plan, [(0, 350 * KiB)])
    assert held.downloaded == 100 * KiB and held.requests == 2  # one GET, one PUT


@settings(max_examples=200, deadline=None)
@given(segment_layouts((200, 2_000), 12, 400, 80), st.floats(0.0, 2.0), st.integers(0, 200))
def test_the_plan_is_never_worse_than_a_rewrite_and_keeps_the_caps(
    case: tuple[list[Segment], int], copy_weight: float, request: int
) -> None:
    segs, size = case
    lim = PartLimits(min_part=40, max_part=100, min_copy_source=30, max_put=1 << 20)
    model = CostModel(copy_weight=copy_weight, request_bytes=request)
    source = bytes(i % 251 for i in range(size))
    best = plan_upload(segs, size, limits=lim, model=model)
    assert assemble(best, source) == apply_segments(segs, source)
    cost = upload_cost(best)
    rewrite = upload_cost(plan_download(segs, size, limits=lim))
    assert cost.total(model) <= rewrite.total(model)
    assert cost.copied <= model.max_copy_ratio * size
    assert cost.stages <= model.max_stages
