"""Phase 1 of a splice (:mod:`lethe.parquet.splice`): the edits and the footer checked, and
the original file's row groups and index structures located.

A splice moves every absolute offset of the file, so it first proves it knows them all: the
footer round-trips byte for byte, nothing is encrypted, no footer struct has a field unknown
to Lethe (it may hold an offset), and no row group or index structure lies outside the data
area or overlaps another. :func:`locate` returns what the later phases need
(:class:`Located`); nothing here does I/O.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lethe.errors import InvalidRequest, SpliceRefused
from lethe.parquet import footer as pqf
from lethe.parquet.footer import ByteRange, Footer, IndexStructure
from lethe.parquet.model import FileMetaData
from lethe.parquet.pages import Ranges, count
from lethe.parquet.segments import Source
from lethe.parquet.thrift import Struct

__all__ = ["GroupEdit", "Located", "StructureSpan", "locate"]


@dataclass(frozen=True, slots=True)
class GroupEdit:
    """What to do with one row group.

    Two forms: *dense*, the group's bytes and its remaining rows (the row-group splice);
    and *sparse*, only the erased positions (``data`` and ``keep`` None): the group's
    bytes are read from the fetched extents given to :func:`~lethe.parquet.splice.splice`,
    which for a page-level rewrite need hold only the pages
    :func:`~lethe.parquet.partial.page_ranges` names
    (:class:`~lethe.parquet.segments.NeedBytes` says what else is needed).

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


_KNOWN_FIELDS: dict[str, frozenset[int]] = {
    "FileMetaData": frozenset(range(1, 10)),
    "RowGroup": frozenset(range(1, 8)),
    "ColumnChunk": frozenset(range(1, 8)),
    "ColumnMetaData": frozenset(range(1, 18)),
}


@dataclass(frozen=True, slots=True)
class StructureSpan(IndexStructure):
    """An index structure of the original file (:class:`~lethe.parquet.footer.IndexStructure`)
    with its exact ``length`` (a bloom filter's measured when the footer omits it)."""

    length: int

    @property
    def end(self) -> int:
        """One past its last byte."""
        return self.offset + self.length


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
        r = pqf.row_group_range(rg)
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
        hdr, at = pqf.read_bloom_filter_header(ext.data, s.offset - ext.offset)
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
    pqf.check_roundtrip(footer.raw)
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
        tuple(_measure(footer, s, in_order, source) for s in pqf.index_structures(meta)),
    )
