"""One file spliced: the rows an erasure names physically removed from a data file, the new
object written under a new key (not yet committed).

For each affected row group the pages (or the whole group) holding erased rows are fetched
with pinned ranged GETs, decoded, stripped of those rows and re-encoded; the level (page, row
group, or a rewrite through the client) and the upload plan are chosen by predicted cost
(:mod:`lethe.parquet.costs`). The new object is assembled by :mod:`lethe.erasure.splice_io`;
the commit of several spliced files is :mod:`lethe.erasure.erase`'s.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile
from lethe.catalog.partitions import partition_stats
from lethe.dv import store as dvstore
from lethe.dv.blob import keep_mask
from lethe.erasure.ownership import check_owned
from lethe.erasure.splice_io import Fetcher, read_footer, upload
from lethe.erasure.upkeep import removed_values
from lethe.index.origins import spliced_origin
from lethe.parquet.costs import (
    DEFAULT_MODEL,
    CostModel,
    LevelChoice,
    choose_level,
    page_level_hopeless,
    plan_upload,
)
from lethe.parquet.fates import FileGranularity, granularity
from lethe.parquet.footer import ByteRange, Footer, index_region, row_group_range
from lethe.parquet.locate import GroupEdit
from lethe.parquet.pages import Ranges, count, runs
from lethe.parquet.partial import page_ranges
from lethe.parquet.segments import NeedBytes, Source
from lethe.parquet.splice import GroupFate, SplicePlan, splice
from lethe.storage.counters import IOCounters
from lethe.writing.mapped import describe_named
from lethe.writing.writer import new_data_path

log = logging.getLogger(__name__)

__all__ = ["SpliceResult", "splice_file"]

SPLICE_ROUNDS = 4  # fetch-and-plan rounds of one splice (each fetches what the last lacked)


@dataclass(frozen=True, slots=True)
class SpliceResult:
    """One file spliced (not yet committed)."""

    old: DataFile
    new: DataFile | None  # None: every row of the file is gone, the file leaves the table
    removed: BitMap64  # positions of the old file physically removed
    fates: tuple[GroupFate, ...]
    bytes_copied: int
    bytes_uploaded: int
    bytes_downloaded: int
    io: IOCounters
    written_at: float | None = None  # time.time() before ``new`` was uploaded (GC grace clock)
    choice: LevelChoice | None = None  # the level chosen by predicted cost, and the predictions
    values: dict[str, frozenset[Any]] = field(default_factory=dict)  # indexed values removed

    @property
    def granularity(self) -> FileGranularity:
        """How the file's edited groups were rewritten, and why any fell back."""
        return granularity(self.old.path, self.fates)


def _erased(
    footer: Footer, bm: BitMap64, row_groups: Iterable[int]
) -> tuple[dict[int, Ranges], BitMap64]:
    """The erased positions of every given group holding deleted rows, and the file
    positions removed."""
    meta = footer.metadata
    starts = [0]
    for rg in meta.row_groups:
        starts.append(starts[-1] + rg.num_rows)
    erased: dict[int, Ranges] = {}
    removed = BitMap64()
    for k in sorted(set(row_groups)):
        n = meta.row_groups[k].num_rows
        gone = bm.range_cardinality(starts[k], starts[k] + n) if len(bm) else 0
        if not gone:
            continue
        erased[k] = runs(np.flatnonzero(~keep_mask(bm, starts[k], n)))
        window = BitMap64()
        window.add_range(starts[k], starts[k] + n)
        removed |= bm & window
    return erased, removed


def _pages(
    footer: Footer, erased: dict[int, Ranges], source: Source
) -> dict[int, tuple[ByteRange, ...]] | str:
    """The bytes a page-level rewrite reads in each edited group that keeps rows and where
    it is possible (:func:`~lethe.parquet.partial.page_ranges`), after the cheap check that
    it may win (:func:`~lethe.parquet.costs.page_level_hopeless`); or why it is out."""
    meta = footer.metadata
    out: dict[int, tuple[ByteRange, ...]] = {}
    why: list[str] = []
    for k, e in erased.items():
        if count(e) == meta.row_groups[k].num_rows:
            continue
        pages = page_level_hopeless(meta, k, e, source) or page_ranges(meta, k, e, source)
        if isinstance(pages, str):
            why.append(pages)
        else:
            out[k] = pages
    return out if out else "; ".join(dict.fromkeys(why)) or "no group keeps rows"


def _fetch_for(
    fetch: Fetcher, footer: Footer, erased: dict[int, Ranges], choice: LevelChoice, pages: Any
) -> None:
    """Fetch what the chosen level reads: the whole file for a rewrite (one GET of what
    is not in memory), else the pages or groups it re-encodes."""
    meta = footer.metadata
    if choice.level == "rewrite":
        fetch.get(0, footer.file_size)
        return
    wanted: list[tuple[int, int]] = []
    for k, e in erased.items():
        if count(e) == meta.row_groups[k].num_rows:
            continue  # the group goes: nothing of it is read
        if choice.level == "page" and isinstance(pages, dict) and k in pages:
            wanted.extend((r.start, r.end) for r in pages[k])
        else:
            r = row_group_range(meta.row_groups[k])
            wanted.append((r.start, r.end))
    fetch.get_many(wanted)


def _choose(
    fetch: Fetcher,
    footer: Footer,
    erased: dict[int, Ranges],
    removed: int,
    page_level: bool,
    model: CostModel,
) -> LevelChoice:
    """The level of the file's splice (:func:`~lethe.parquet.costs.choose_level`), before
    any row is decoded; what it reads is fetched."""
    if removed == footer.metadata.num_rows:
        return LevelChoice("row_group", {}, "the file loses every row")
    pages = _pages(footer, erased, Source(fetch.extents)) if page_level else "page level off"
    choice = choose_level(footer, erased, pages, _held(fetch), model=model)
    log.debug("splice level %s (%s)", choice.level, choice.reason)
    _fetch_for(fetch, footer, erased, choice, pages)
    return choice


def _fates(fates: tuple[GroupFate, ...], choice: LevelChoice) -> tuple[GroupFate, ...]:
    """The groups' fates, a whole-group re-encoding's reason the choice's when page level
    was not tried."""
    if choice.level == "page":
        return fates
    why = choice.reason or f"{choice.level.replace('_', '-')} predicted cheaper than page level"
    return tuple(
        dataclasses.replace(g, reason=why, fallbacks=(why,)) if g.level == "row_group" else g
        for g in fates
    )


def _held(fetch: Fetcher) -> list[tuple[int, int]]:
    return [(e.offset, e.end) for e in fetch.extents]


def _plan(
    fetch: Fetcher, footer: Footer, edits: dict[int, GroupEdit], page_level: bool
) -> SplicePlan:
    """The splice, fetching what it finds missing (a chunk to re-encode whole)."""
    for _ in range(SPLICE_ROUNDS - 1):
        try:
            return splice(footer, edits, fetch.extents, page_level=page_level)
        except NeedBytes as e:
            fetch.get_many(e.ranges)
    return splice(footer, edits, fetch.extents, page_level=page_level)


def _entry(
    ctx: TableContext, f: DataFile, plan: SplicePlan, path: str, etag: str, removed: BitMap64
) -> DataFile:
    """The manifest entry of the spliced copy of ``f`` uploaded at ``path``."""
    md = pq.read_metadata(
        pa.BufferReader(plan.footer.raw + len(plan.footer.raw).to_bytes(4, "little") + b"PAR1")
    )
    groups, cols = describe_named(md, ctx.schema, ctx.key, mapped=bool(f.mapped))
    cols |= partition_stats(f.partition, md.num_rows)
    return DataFile(
        path=path,
        size=plan.size,
        etag=etag,
        rows=md.num_rows,
        row_groups=groups,
        columns=cols,
        added_version=0,
        sorted_by_key=f.sorted_by_key,
        sort_order_id=f.sort_order_id,  # removing rows keeps the order (a clustered file)
        partition=f.partition,
        mapped=f.mapped,
        # the index keeps answering for it through the file it was spliced from
        index_origin=spliced_origin(f, removed)
        if f.index_origin is not None or ctx.snapshot.indexes
        else None,
    )


def splice_file(
    ctx: TableContext,
    f: DataFile,
    row_groups: Iterable[int],
    *,
    dv: BitMap64 | None = None,
    page_level: bool = True,
    model: CostModel = DEFAULT_MODEL,
    index: bool = True,
) -> SpliceResult:
    """Physically remove the rows ``dv`` names (default: all ``f``'s DV hides) of the groups.

    Inside each edited group only the pages holding deleted rows are rewritten where that
    can be proven exact (``page_level``, :mod:`lethe.parquet.partial`; ``fates`` say which
    level each group got and why). The file's level (page, row group, or a rewrite through
    the client) and the upload plan are chosen by predicted cost under ``model``
    (:mod:`lethe.parquet.costs`, ``choice``). Writes the new object under a new key and
    returns its manifest entry (not committed; an adopted file's partition values and names
    kept); a failed upload leaves nothing. ``index``: the removed rows' indexed values ride
    along for the commit's index scrub (issue 37 item 3: a purge reads each file once).
    """
    check_owned([f], "a splice")
    store = ctx.store.child()
    src_key = ctx.key_of(f.path)
    fetch = Fetcher(store, src_key, f)
    bm = dv if dv is not None else dvstore.load(ctx.store, ctx.prefix, f.dv)
    footer = read_footer(fetch, f.size)
    region = index_region(footer)
    if region is not None:
        fetch.get(region.start, f.size)
    erased, removed = _erased(footer, bm, row_groups)
    if not erased:
        raise errors.InvalidRequest(f"{f.path}: the given row groups hold no deleted rows")
    choice = _choose(fetch, footer, erased, len(removed), page_level, model)
    edits = {k: GroupEdit(erased=e) for k, e in erased.items()}
    plan = _plan(fetch, footer, edits, choice.level == "page")
    fates = _fates(plan.groups, choice)
    vals = removed_values(store, ctx.snapshot, f, fetch, footer, removed) if index else {}
    io0 = store.stats.snapshot()
    if all(g.rows_after == 0 for g in plan.groups):
        done = store.stats.snapshot()
        return SpliceResult(f, None, removed, fates, 0, 0, 0, done, None, choice, vals)
    new_key = ctx.key_of(new_path := new_data_path())
    rewrite = choice.level == "rewrite"
    parts = plan_upload(plan.segments, f.size, model=model, fetched=_held(fetch), rewrite=rewrite)
    written_at = time.time()
    etag = upload(store, fetch, new_key, parts, f.etag, ctx.key_of)
    new = _entry(ctx, f, plan, new_path, etag, removed)
    total = store.stats.snapshot()
    moved = ((d := total - io0).bytes_copied, d.bytes_uploaded, total.bytes_downloaded)
    return SpliceResult(f, new, removed, fates, *moved, total, written_at, choice, vals)
