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

1. :func:`locate`: check the footer (byte-exact round trip, no encryption, no unknown
   field) and the edits; every group's byte range and every index structure's
   (:class:`Located`).
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

from lethe.errors import InvalidRequest, SpliceRefused
from lethe.parquet.decode import decode_row_group
from lethe.parquet.enums import FMD, RG
from lethe.parquet.footer import (
    MAGIC,
    ByteRange,
    Footer,
    IndexKind,
    IndexStructure,
    check_roundtrip,
    index_structures,
    read_bloom_filter_header,
    row_group_range,
)
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
from lethe.parquet.pages import Ranges, count, intersect
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
    "GroupEdit",
    "GroupFate",
    "Located",
    "NewGroups",
    "Region",
    "SplicePlan",
    "StructureSpan",
    "assemble",
    "lay_out_data",
    "lay_out_region",
    "locate",
    "needed_ranges",
    "rebuild_groups",
    "rewrite_groups",
    "splice",
]

COPY_RUN_MIN = 5 << 20
"""Runs of unchanged index structures shorter than this are inlined when already fetched."""


# --- inputs and outputs ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupEdit:
    """What to do with one row group.

    Two forms: *dense*, the group's bytes and its remaining rows (the row-group splice);
    and *sparse*, only the erased positions (``data`` and ``keep`` None): the group's
    bytes are read from the fetched extents given to :func:`splice`, which for a
    page-level rewrite need hold only the pages :func:`~lethe.parquet.partial.page_ranges`
    names (:class:`~lethe.parquet.segments.NeedBytes` says what else is needed).

    Attributes:
        data: The group's original bytes (its :func:`~lethe.parquet.footer.row_group_range`),
            or None to read them from the fetched extents.
        keep: The rows that remain, in their original order (e.g. the output of
            :func:`~lethe.parquet.decode.decode_row_group`, filtered), or None to derive
            them from ``erased``. An empty table drops the group.
        erased: The positions (within the group) of the rows that go, when known: a
            page-level rewrite needs them (:mod:`lethe.parquet.partial`); None keeps the
            row-group splice.
    """

    data: bytes | None = None
    keep: pa.Table | None = None
    erased: Ranges | None = None

    def rows_after(self, num_rows: int) -> int:
        """Rows the group keeps, of its ``num_rows``."""
        if self.keep is not None:
            return int(self.keep.num_rows)
        assert self.erased is not None
        return num_rows - count(self.erased)


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


# --- phase 1: locate -------------------------------------------------------------------
_KNOWN_FIELDS: dict[str, frozenset[int]] = {
    "FileMetaData": frozenset(range(1, 10)),
    "RowGroup": frozenset(range(1, 8)),
    "ColumnChunk": frozenset(range(1, 8)),
    "ColumnMetaData": frozenset(range(1, 18)),
}


@dataclass(frozen=True, slots=True)
class StructureSpan:
    """An index structure of the original file and its exact byte span.

    Attributes:
        kind: Which structure.
        row_group: Index of its row group.
        column: Index of its column chunk in the group.
        offset: Its offset in the original.
        length: Its length (a bloom filter's measured when the footer omits it).
    """

    kind: IndexKind
    row_group: int
    column: int
    offset: int
    length: int

    @property
    def end(self) -> int:
        """One past its last byte."""
        return self.offset + self.length

    @property
    def ident(self) -> Ident:
        """(row group, column, kind) in the original."""
        return (self.row_group, self.column, self.kind)


@dataclass(frozen=True, slots=True)
class Located:
    """The original file's row groups and index structures, checked (phase 1).

    Attributes:
        footer_start: Where the original footer begins.
        ranges: Every row group's byte range (DESIGN §4.1), in footer order.
        order: The groups in file order.
        following: For each group, where the next group in file order begins (the end of
            the last group for the last one).
        structures: Every index structure, in footer order.
    """

    footer_start: int
    ranges: tuple[ByteRange, ...]
    order: tuple[int, ...]
    following: tuple[int, ...]
    structures: tuple[StructureSpan, ...]

    @property
    def data_end(self) -> int:
        """End of the last row group (4 when there is none)."""
        return max((r.end for r in self.ranges), default=4)

    def taken(self, g: int) -> ByteRange:
        """The bytes an edited group ``g`` replaces: its range and what follows it up to the
        next group (writers such as polars put a copy of each chunk's ColumnMetaData,
        statistics included, right after the chunk)."""
        return ByteRange(self.ranges[g].start, self.following[g])

    def bloom_bytes(self, g: int) -> dict[int, int]:
        """Length of each bloom filter of group ``g``, by column."""
        return {
            s.column: s.length
            for s in self.structures
            if s.row_group == g and s.kind == "bloom_filter"
        }


def _check_known(s: Struct, kind: str) -> None:
    unknown = [f.id for f in s.fields if f.id not in _KNOWN_FIELDS[kind]]
    if unknown:
        raise SpliceRefused(
            f"{kind} has fields {unknown} unknown to Lethe (they may hold offsets a splice "
            "would have to move)"
        )


def _group_ranges(footer: Footer) -> tuple[ByteRange, ...]:
    meta = footer.metadata
    _check_known(meta.struct, "FileMetaData")
    ranges = []
    for g, rg in enumerate(meta.row_groups):
        _check_known(rg.struct, "RowGroup")
        for cc in rg.columns:
            _check_known(cc.struct, "ColumnChunk")
            _check_known(cc.meta_data.struct, "ColumnMetaData")
        r = row_group_range(rg)
        if r.start < 4 or r.end > footer.start:
            raise SpliceRefused(f"row group {g} [{r.start}, {r.end}) lies outside the data area")
        ranges.append(r)
    return tuple(ranges)


def _check_edits(
    meta: FileMetaData, ranges: Sequence[ByteRange], edits: Mapping[int, GroupEdit]
) -> None:
    groups = meta.row_groups
    for g, e in edits.items():
        if not 0 <= g < len(groups):
            raise InvalidRequest(f"no row group {g} (the file has {len(groups)})")
        if e.data is not None and len(e.data) != ranges[g].length:
            raise InvalidRequest(f"row group {g} spans {ranges[g].length} bytes, got {len(e.data)}")
        n = groups[g].num_rows
        if e.keep is None and e.erased is None:
            raise InvalidRequest(f"row group {g}: an edit needs the remaining rows or the erased")
        if e.erased is not None and (
            any(a < 0 or b > n or a >= b for a, b in e.erased)
            or any(x[1] >= y[0] for x, y in itertools.pairwise(e.erased))
        ):
            raise InvalidRequest(f"row group {g}: erased positions outside [0, {n}) or unsorted")
        if e.keep is not None and e.keep.num_rows > n:
            raise InvalidRequest(f"row group {g} has {n} rows, cannot keep {e.keep.num_rows}")
        if e.keep is not None and e.erased is not None and e.rows_after(n) != n - count(e.erased):
            raise InvalidRequest(f"row group {g}: the remaining rows and the erased disagree")


def _measure(
    footer: Footer, s: IndexStructure, ranges: Sequence[ByteRange], source: Source
) -> StructureSpan:
    """Where ``s`` lies; ``ranges`` (the groups', disjoint) in file order: one to check."""
    length = s.length
    if length is None:
        ext = source.extent_at(s.offset)
        hdr, at = read_bloom_filter_header(ext.data, s.offset - ext.offset)
        length = at + ext.offset - s.offset + hdr.num_bytes
    r = ByteRange(s.offset, s.offset + length)
    if r.start < 4 or r.end > footer.start or length <= 0:
        raise SpliceRefused(f"{s.kind} of row group {s.row_group} lies outside the file")
    j = bisect.bisect_left(ranges, r.end, key=lambda x: x.start) - 1
    if j >= 0 and ranges[j].overlaps(r):
        raise SpliceRefused(f"{s.kind} of row group {s.row_group} overlaps row group data")
    return StructureSpan(s.kind, s.row_group, s.column, s.offset, length)


def locate(footer: Footer, edits: Mapping[int, GroupEdit], source: Source) -> Located:
    """Check that the file can be spliced and locate its groups and index structures.

    Raises:
        SpliceRefused: The footer does not round-trip, the file is encrypted, a footer
            struct has fields unknown to Lethe, groups or structures lie outside the data
            area or overlap, or the header of a bloom filter of unknown length was not
            fetched.
        InvalidRequest: An edit names a missing group, has the wrong number of bytes, or
            keeps more rows than the group has.
    """
    check_roundtrip(footer.raw)
    meta = footer.metadata
    if meta.encrypted:
        raise SpliceRefused("Parquet files with encrypted columns cannot be spliced")
    ranges = _group_ranges(footer)
    _check_edits(meta, ranges, edits)
    order = tuple(sorted(range(len(ranges)), key=lambda g: ranges[g].start))
    for a, b in itertools.pairwise(order):
        if ranges[a].end > ranges[b].start:
            raise SpliceRefused(f"row groups {a} and {b} overlap")
    data_end = max((r.end for r in ranges), default=4)
    in_order = [ranges[g] for g in order]
    nxt = {a: ranges[b].start for a, b in itertools.pairwise(order)}
    return Located(
        footer.start,
        ranges,
        order,
        tuple(nxt.get(g, data_end) for g in range(len(ranges))),
        tuple(_measure(footer, s, in_order, source) for s in index_structures(meta)),
    )


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
    bytes up to the next group with it (:meth:`Located.taken`). Index structures in the
    data area (arrow-rs puts bloom filters after each group) stay where they are, unless
    they belong to an edited group (cut: they describe removed rows) or must be rewritten
    (offset indexes whose pages move: moved to the new index region).

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
    original_at = {s.ident: s.offset for s in located.structures}
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
        edits: Row group index -> its edit (:class:`GroupEdit`, dense or sparse).
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
