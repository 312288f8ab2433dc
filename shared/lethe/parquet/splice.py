"""The row-group splice, as pure functions over bytes already fetched (DESIGN §4).

A splice rewrites only the row groups that lose rows. Each edited group is re-encoded on its
own with pyarrow, using the codec, encodings, dictionary use, data page version, statistics,
page index, bloom filters and checksums its original chunks show, and is moved into place.
Every other byte range of the data area is copied unchanged, except the bytes between an
edited group and the next one, which go with the edited group (some writers store a copy of
each chunk's metadata, statistics included, after the chunk).

The index region is rebuilt after the last row group: the edited groups' bloom filters,
column indexes and offset indexes come from their re-encoding only (none of the old ones is
kept, so no statistic, page-index entry or bloom filter bit of a removed row survives); the
unchanged groups' are copies of the original ones, their offset indexes rewritten when their
pages moved (readers such as DataFusion trust those absolute offsets). The footer is the
original one, edited: groups grafted in or dropped, every absolute offset moved, row counts
and ordinals renumbered, everything else (schema, key-value metadata such as
``ARROW:schema``, unknown fields) untouched.

:func:`splice` is a pipeline of pure phases, each returning a frozen value:

1. :func:`~lethe.parquet.locate.locate`: check the footer (byte-exact round trip, no
   encryption, no unknown field) and the edits; every group's byte range and every index
   structure's (:class:`~lethe.parquet.locate.Located`, :mod:`lethe.parquet.locate`).
2. :func:`rewrite_groups`: each edited group that keeps rows re-encoded
   (:class:`~lethe.parquet.reencode.GroupRewrite`, see :mod:`lethe.parquet.reencode`).
3. :func:`lay_out_data`: the new data area: kept ranges and rewrites, where every kept
   byte moves, which index structures stay, move or are cut (:class:`DataArea`).
4. :func:`rebuild_groups`: the new row groups and the content of the new index region
   (:class:`NewGroups`).
5. :func:`lay_out_region`: the new index region and where every structure lies
   (:class:`Region`).
6. :func:`assemble`: the new footer and the plan (:class:`SplicePlan`).

The result is a list of segments (:mod:`lethe.parquet.segments`): ranges of the original file
and new bytes; :mod:`lethe.parquet.parts` plans its upload. Nothing here does I/O.

>>> import io, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
>>> from lethe.parquet.decode import decode_row_group
>>> from lethe.parquet.footer import parse_tail, row_group_range
>>> from lethe.parquet.segments import Extent, apply_segments
>>> buf = io.BytesIO()
>>> pq.write_table(pa.table({"id": list(range(10))}), buf, row_group_size=5)
>>> data = buf.getvalue()
>>> footer = parse_tail(data, len(data))
>>> rg = row_group_range(footer.metadata.row_groups[1])
>>> rows = decode_row_group(footer.metadata, 1, data[rg.start : rg.end])
>>> keep = rows.filter(pc.not_equal(rows["id"], 7))
>>> plan = splice(footer, {1: GroupEdit(data[rg.start : rg.end], keep)}, [Extent(0, data)])
>>> new = apply_segments(plan.segments, data)
>>> pq.read_table(pa.BufferReader(new))["id"].to_pylist()
[0, 1, 2, 3, 4, 5, 6, 8, 9]
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import struct as _struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pyarrow as pa

from lethe.errors import SpliceRefused
from lethe.parquet.decode import decode_row_group
from lethe.parquet.enums import FMD, RG
from lethe.parquet.footer import MAGIC, ByteRange, Footer, IndexKind
from lethe.parquet.locate import GroupEdit, Located, StructureSpan, locate
from lethe.parquet.model import FileMetaData, RowGroup
from lethe.parquet.offsets import (
    OffsetMap,
    set_int,
    shift_column,
    shift_offset_index,
    shifted,
    struct_list,
    with_list,
)
from lethe.parquet.pages import intersect
from lethe.parquet.partial import rewrite_pages
from lethe.parquet.reencode import Granularity, GroupRewrite, reencode_group
from lethe.parquet.region import (
    KIND_RANK,
    Ident,
    Locations,
    RegionEntry,
    arrange,
    needed_ranges,
    point_chunks,
)
from lethe.parquet.segments import Bytes, Copy, Extent, NeedBytes, Segment, Source, normalize
from lethe.parquet.thrift import Struct, TType, encode

__all__ = [
    "COPY_RUN_MIN",
    "DataArea",
    "GroupFate",
    "NewGroups",
    "Region",
    "SplicePlan",
    "assemble",
    "lay_out_data",
    "lay_out_region",
    "needed_ranges",
    "rebuild_groups",
    "rewrite_groups",
    "splice",
]

COPY_RUN_MIN = 5 << 20
"""Runs of unchanged index structures shorter than this are inlined when already fetched."""


# --- outputs -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupFate:
    """What happened to one row group of the original file.

    Attributes:
        index: Its index in the original footer.
        new_index: Its index in the new footer, None if dropped.
        rows_before: Rows it had.
        rows_after: Rows it has now (0 if dropped).
        edited: Whether it was re-encoded.
        level: For an edited group that keeps rows, how much was rewritten: ``"page"``
            (only pages holding erased rows) or ``"row_group"``; None otherwise.
        reason: Why an edited group fell back to the row-group splice, or which chunks of a
            page-level one were re-encoded whole (never a value of the file).
        fallbacks: Each fallback of the group, countable (issue 37 item 2): the reason it
            fell back to the row-group splice, or one reason per chunk re-encoded whole.
    """

    index: int
    new_index: int | None
    rows_before: int
    rows_after: int
    edited: bool
    level: Granularity | None = None
    reason: str | None = None
    fallbacks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SplicePlan:
    """The new file, described as ranges of the original and new bytes.

    Attributes:
        segments: Concatenated, they are the new file.
        footer: The new footer (``footer.raw`` is its serialized FileMetaData).
        groups: The fate of every original row group, in original order.
        index_region: Where the rebuilt index region lies in the new file.
    """

    segments: tuple[Segment, ...]
    footer: Footer
    groups: tuple[GroupFate, ...]
    index_region: ByteRange

    @property
    def size(self) -> int:
        """Size of the new file."""
        return self.footer.file_size

    @property
    def new_bytes(self) -> int:
        """Bytes that are not copied from the original."""
        return sum(s.length for s in self.segments if isinstance(s, Bytes))

    @property
    def copied_bytes(self) -> int:
        """Bytes copied unchanged from the original."""
        return sum(s.length for s in self.segments if isinstance(s, Copy))


# --- phase 2: re-encode ------------------------------------------------------------------
Rewrites: TypeAlias = Mapping[int, GroupRewrite | None]
"""Edited group -> its rewrite, None when it loses every row; in group order."""


def _keep(meta: FileMetaData, g: int, e: GroupEdit, data: bytes) -> pa.Table:
    if e.keep is not None:
        return e.keep
    assert e.erased is not None
    rows = decode_row_group(meta, g, data)
    n = rows.num_rows
    mask = [True] * n
    for a, b in intersect(e.erased, ((0, n),)):
        mask[a:b] = [False] * (b - a)
    return rows.filter(pa.array(mask, type=pa.bool_()))


def _rewrite(
    meta: FileMetaData, located: Located, g: int, e: GroupEdit, source: Source, page_level: bool
) -> GroupRewrite:
    """One group: page-level when it can be proven exact, else re-encoded whole.

    Raises:
        NeedBytes: Bytes of the group that must be read were not fetched.
    """
    r = located.ranges[g]
    blooms = located.bloom_bytes(g)
    if e.erased is None or not page_level:
        reason = "page level off or erased positions unknown"
    else:
        paged = rewrite_pages(meta, g, e.erased, source, blooms)
        if not isinstance(paged, str):
            new = paged.length - sum(s.length for s in paged.body if isinstance(s, Copy))
            if new < r.length:
                return paged
            paged = "page level would upload as many new bytes"
        reason = paged
    data = e.data if e.data is not None else source.read(r.start, r.length)
    full = reencode_group(meta, g, _keep(meta, g, e, data), data, r.start, blooms)
    return dataclasses.replace(full, reason=reason, fallbacks=(reason,))


def rewrite_groups(
    meta: FileMetaData,
    located: Located,
    edits: Mapping[int, GroupEdit],
    source: Source | None = None,
    page_level: bool = True,
) -> Rewrites:
    """Every edited group that keeps rows rewritten: page by page
    (:func:`~lethe.parquet.partial.rewrite_pages`) when its edit gives the erased positions,
    ``page_level`` is on and that is exact, else re-encoded whole
    (:func:`~lethe.parquet.reencode.reencode_group`, the reason recorded).

    Raises:
        SpliceRefused: A group cannot be re-encoded exactly (see the message).
        NeedBytes: Bytes of an edited group that must be read were not fetched.
    """
    rows = {g: e.rows_after(meta.row_groups[g].num_rows) for g, e in edits.items()}
    dense = [
        Extent(located.ranges[g].start, e.data) for g, e in edits.items() if e.data is not None
    ]
    source = (source or Source(())).with_extents(dense)
    out: dict[int, GroupRewrite | None] = {}
    missing: list[tuple[int, int]] = []
    for g, e in sorted(edits.items()):
        try:
            out[g] = _rewrite(meta, located, g, e, source, page_level) if rows[g] else None
        except NeedBytes as need:
            missing.extend(need.ranges)  # every group's needs at once: one more round only
    if missing:
        raise NeedBytes(missing)
    return out


# --- phase 3: the data area -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DataArea:
    """The new file up to the end of its last row group (phase 3).

    Kept ranges of the original and the rewrites, in file order. An edited group takes the
    bytes up to the next group with it (:meth:`~lethe.parquet.locate.Located.taken`). Index
    structures in the data area (arrow-rs puts bloom filters after each group) stay where
    they are, unless they belong to an edited group (cut: they describe removed rows) or
    must be rewritten (offset indexes whose pages move: moved to the new index region).

    Attributes:
        segments: The data area of the new file, leading magic included.
        move: Where a kept byte of the original lies in the new file.
        placed: Rewritten group -> where its body begins in the new file.
        in_place: Structures of unedited groups left where they are in the data area.
        relocated: Structures of unedited groups to carry into the new index region, each
            with whether it is rewritten (an offset index whose pages moved).
        end: Where the data area ends in the new file.
    """

    segments: tuple[Segment, ...]
    move: OffsetMap
    placed: Mapping[int, int]
    in_place: tuple[StructureSpan, ...]
    relocated: tuple[tuple[StructureSpan, bool], ...]
    end: int


_Cut: TypeAlias = tuple[int, int, int | None]  # (start, end, edited group or None)


def _sort_structures(
    located: Located, rewrites: Rewrites
) -> tuple[list[_Cut], list[StructureSpan], list[tuple[StructureSpan, bool]]]:
    """Cut the edited groups and decide where each index structure goes."""
    extents = [located.taken(g) for g in rewrites]
    first_cut = min((r.start for r in extents), default=located.footer_start)
    cuts: list[_Cut] = [(r.start, r.end, g) for g, r in zip(rewrites, extents, strict=True)]
    in_place: list[StructureSpan] = []
    relocated: list[tuple[StructureSpan, bool]] = []
    data_end = located.data_end
    by_start = sorted(extents, key=lambda r: r.start)  # disjoint: one candidate per offset
    for st in located.structures:
        j = bisect.bisect_right(by_start, st.offset, key=lambda r: r.start) - 1
        inside = j >= 0 and st.offset < by_start[j].end
        in_data = st.offset < data_end
        if st.row_group in rewrites:
            if in_data and not inside:
                cuts.append((st.offset, st.end, None))
            continue
        rewrite = st.kind == "offset_index" and located.ranges[st.row_group].start > first_cut
        if in_data and not inside and not rewrite:
            in_place.append(st)
            continue
        if in_data and not inside:
            cuts.append((st.offset, st.end, None))
        relocated.append((st, rewrite))
    cuts.sort()
    for (_, a_end, _), (b_start, _, _) in itertools.pairwise(cuts):
        if a_end > b_start:
            raise SpliceRefused("index structures overlap each other or row group data")
    return cuts, in_place, relocated


def lay_out_data(located: Located, rewrites: Rewrites) -> DataArea:
    """The data area of the new file: kept ranges copied, rewrites in their groups' place.

    Raises:
        SpliceRefused: Index structures overlap each other or row group data.
    """
    cuts, in_place, relocated = _sort_structures(located, rewrites)
    segments: list[Segment] = [Copy(0, 4)]
    kept: list[tuple[int, int, int]] = []
    placed: dict[int, int] = {}
    pos, out = 4, 4
    for start, end, cut_group in cuts:
        kept.append((pos, start, out))
        segments.append(Copy(pos, start))
        out += start - pos
        if cut_group is not None and (rec := rewrites[cut_group]) is not None:
            placed[cut_group] = out
            segments.extend(rec.body)
            out += rec.length
        pos = end
    data_end = located.data_end
    kept.append((pos, data_end, out))
    segments.append(Copy(pos, data_end))
    out += data_end - pos
    return DataArea(
        tuple(segments), OffsetMap(kept), placed, tuple(in_place), tuple(relocated), out
    )


# --- phase 4: the new row groups --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NewGroups:
    """The new footer's row groups, before their index structures are placed (phase 4).

    Attributes:
        numbering: Each original group's index in the new footer, None if dropped.
        structs: The new RowGroup structs, in new order (chunk offsets moved; index
            structure references not yet).
        fates: The fate of every original group, in original order.
        entries: The new index region's content: the structures carried over from the
            original, then the rewritten groups' own.
    """

    numbering: tuple[int | None, ...]
    structs: tuple[Struct, ...]
    fates: tuple[GroupFate, ...]
    entries: tuple[RegionEntry, ...]


def _carried_over(
    located: Located, area: DataArea, numbering: Sequence[int | None], source: Source
) -> list[RegionEntry]:
    """The relocated structures of unedited groups: copies, or offset indexes rewritten."""
    entries = []
    for st, rewrite in area.relocated:
        ng = numbering[st.row_group]
        assert ng is not None
        content: Segment = Copy(st.offset, st.end)
        if rewrite:
            raw = source.read(st.offset, st.length)
            moved = shift_offset_index(raw, area.move)
            if moved != raw:
                content = Bytes(moved)
        key = (st.offset, KIND_RANK[st.kind], ng, st.column)
        entries.append(RegionEntry(key, (ng, st.column, st.kind), content))
    return entries


def _place_rewrite(
    located: Located, rg: RowGroup, g: int, ng: int, rec: GroupRewrite, at: int
) -> tuple[Struct, list[RegionEntry]]:
    """A rewritten group's struct moved to ``at``, and its index structures."""
    move = shifted(ByteRange(rec.start, rec.start + rec.length), at)
    original_at = {(s.row_group, s.column, s.kind): s.offset for s in located.structures}
    cols: list[Struct] = []
    entries: list[RegionEntry] = []
    for j, tcc in enumerate(struct_list(rec.row_group, RG.COLUMNS)):
        cols.append(shift_column(tcc, move))
        kinds: tuple[tuple[IndexKind, bytes | None], ...] = (
            ("bloom_filter", rec.blooms[j]),
            ("column_index", rec.column_indexes[j]),
            ("offset_index", rec.offset_indexes[j]),
        )
        for kind, raw in kinds:
            if raw is None:
                continue
            data = shift_offset_index(raw, move) if kind == "offset_index" else raw
            key = (original_at.get((g, j, kind), located.footer_start), KIND_RANK[kind], ng, j)
            entries.append(RegionEntry(key, (ng, j, kind), Bytes(data)))
    gs = with_list(rec.row_group, RG.COLUMNS, cols)
    orig_sort = rg.struct.field(RG.SORTING_COLUMNS)
    gs = gs.without(RG.SORTING_COLUMNS)
    if orig_sort is not None:
        gs = gs.set(orig_sort.id, orig_sort.type, orig_sort.value)
    gs = gs.without(RG.FILE_OFFSET)
    if rg.file_offset is not None:
        gs = set_int(gs, RG.FILE_OFFSET, at)
    return gs, entries


def _move_group(rg: RowGroup, r: ByteRange, move: OffsetMap) -> Struct:
    """An unedited group's struct with every offset moved."""
    new_start = move(r.start)
    assert new_start is not None
    cols = [shift_column(cc.struct, move) for cc in rg.columns]
    gs = with_list(rg.struct, RG.COLUMNS, cols)
    if (fo := rg.file_offset) is not None:
        moved = move(fo)
        gs = set_int(gs, RG.FILE_OFFSET, new_start if moved is None else moved)
    return gs


def rebuild_groups(
    meta: FileMetaData, located: Located, rewrites: Rewrites, area: DataArea, source: Source
) -> NewGroups:
    """The new row groups: rewrites grafted in, dropped groups left out, offsets moved,
    ordinals renumbered; and the content of the new index region.

    Raises:
        SpliceRefused: An offset that must move does not lie in a moved range, an offset
            index to rewrite was not fetched or does not round-trip.
    """
    numbering: list[int | None] = []
    kept = 0
    for g in range(len(located.ranges)):
        if g in rewrites and rewrites[g] is None:
            numbering.append(None)
        else:
            numbering.append(kept)
            kept += 1
    entries = _carried_over(located, area, numbering, source)
    structs: list[Struct] = []
    fates: list[GroupFate] = []
    for g, rg in enumerate(meta.row_groups):
        ng = numbering[g]
        if ng is None:
            fates.append(GroupFate(g, None, rg.num_rows, 0, True))
            continue
        rec = rewrites.get(g)
        level: Granularity | None = None
        reason = None
        whys: tuple[str, ...] = ()
        if rec is not None:
            gs, own = _place_rewrite(located, rg, g, ng, rec, area.placed[g])
            entries.extend(own)
            rows_after, level, reason, whys = rec.num_rows, rec.level, rec.reason, rec.fallbacks
        else:
            gs = _move_group(rg, located.ranges[g], area.move)
            rows_after = rg.num_rows
        if rg.ordinal is not None:
            gs = set_int(gs, RG.ORDINAL, ng, TType.I16)
        else:
            gs = gs.without(RG.ORDINAL)
        structs.append(gs)
        fates.append(GroupFate(g, ng, rg.num_rows, rows_after, g in rewrites, level, reason, whys))
    return NewGroups(tuple(numbering), tuple(structs), tuple(fates), tuple(entries))


# --- phase 5: the index region ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Region:
    """The new index region (phase 5).

    Attributes:
        segments: Its content, in order.
        span: Where it lies in the new file.
        locations: Where every index structure of the new file lies, those left in the data
            area included.
    """

    segments: tuple[Segment, ...]
    span: ByteRange
    locations: Locations


def lay_out_region(area: DataArea, groups: NewGroups, source: Source, inline_below: int) -> Region:
    """Place the index structures: those left in the data area where they moved, the
    others in a new region right after the data area (ordered by
    :func:`~lethe.parquet.region.arrange`).

    Raises:
        SpliceRefused: A structure left in the data area does not lie in a moved range.
    """
    locations: dict[Ident, tuple[int, int]] = {}
    for st in area.in_place:
        moved_at = area.move(st.offset)
        if moved_at is None:
            raise SpliceRefused(f"{st.kind} at {st.offset} does not lie in a moved byte range")
        ng = groups.numbering[st.row_group]
        assert ng is not None
        locations[(ng, st.column, st.kind)] = (moved_at, st.length)
    segments: list[Segment] = []
    out = area.end
    for e in arrange(groups.entries, source, inline_below):
        locations[e.ident] = (out, e.content.length)
        segments.append(e.content)
        out += e.content.length
    return Region(tuple(segments), ByteRange(area.end, out), locations)


# --- phase 6: the footer, and the plan ----------------------------------------------------
def assemble(footer: Footer, area: DataArea, groups: NewGroups, region: Region) -> SplicePlan:
    """The new footer (the original's, edited), and the whole new file as segments."""
    final = [point_chunks(gs, ng, region.locations) for ng, gs in enumerate(groups.structs)]
    fm = with_list(footer.metadata.struct, FMD.ROW_GROUPS, final)
    fm = set_int(fm, FMD.NUM_ROWS, sum(f.rows_after for f in groups.fates))
    raw = encode(fm)
    tail = Bytes(raw + _struct.pack("<I", len(raw)) + MAGIC)
    segs = normalize([*area.segments, *region.segments, tail])
    if segs and segs[0] == Copy(0, 4):
        segs = normalize([Bytes(MAGIC), *segs[1:]])
    end = region.span.end
    new_footer = Footer(FileMetaData(fm), raw, end, end + len(raw) + 8)
    return SplicePlan(segs, new_footer, groups.fates, region.span)


# --- the splice -------------------------------------------------------------------------
def splice(
    footer: Footer,
    edits: Mapping[int, GroupEdit],
    fetched: Iterable[Extent],
    *,
    inline_below: int = COPY_RUN_MIN,
    page_level: bool = True,
) -> SplicePlan:
    """Plan the new file in which the edited row groups keep only ``edit.keep``.

    Args:
        footer: The original file's footer (:func:`~lethe.parquet.footer.parse_tail`).
        edits: Row group index -> its edit (:class:`~lethe.parquet.locate.GroupEdit`, dense
            or sparse).
        fetched: Bytes of the original file already in memory. They must cover the offset
            indexes of the unedited groups that lie after the first edited one (their page
            offsets are rewritten) and the header of any bloom filter whose length the footer
            omits; the tail from :func:`~lethe.parquet.footer.index_region` (or just the
            offset indexes) to the end does. Unchanged bloom filters and column indexes
            become :class:`~lethe.parquet.segments.Copy` segments and are not read.
        inline_below: Runs of unchanged index structures at least this long (the smallest
            multipart part) are copies at the head of the new index region; shorter runs
            join the new bytes at its end (as new bytes when fetched, saving a second GET).
        page_level: Rewrite only the pages holding erased rows where an edit gives their
            positions and that can be proven exact (:mod:`lethe.parquet.partial`); the
            group's offset and column indexes must then be in ``fetched``.

    Returns:
        The plan: segments of the new file, its footer and the fate of every group.

    Raises:
        SpliceRefused: The footer does not round-trip, the file is encrypted or uses
            something a splice cannot reproduce exactly (see the message), or needed bytes
            were not provided.
        NeedBytes: Bytes of an edited group that must be read were not fetched (fetch
            ``ranges`` and call again).
        InvalidRequest: An edit names a missing group, has the wrong number of bytes, or
            keeps more rows than the group has.
    """
    source = Source(fetched)
    located = locate(footer, edits, source)
    rewrites = rewrite_groups(footer.metadata, located, edits, source, page_level)
    area = lay_out_data(located, rewrites)
    groups = rebuild_groups(footer.metadata, located, rewrites, area, source)
    region = lay_out_region(area, groups, source, inline_below)
    return assemble(footer, area, groups, region)
