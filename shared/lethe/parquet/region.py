"""The index region a splice rebuilds after the last row group (DESIGN §4.4).

Its content is a set of :class:`RegionEntry`: each names one index structure of the new
file (new row group, column, kind) and holds its bytes, as a copy of the original's
unchanged structure or as new bytes (an edited group's re-encoded structures, an offset
index whose pages moved). :func:`arrange` orders them for a cheap upload, and
:func:`point_chunks` points every column chunk of a new row group at its structures once
they have their place.

>>> from lethe.parquet.segments import Copy, Source
>>> entries = [
...     RegionEntry((300, 2, 0, 0), (0, 0, "offset_index"), Copy(300, 340)),
...     RegionEntry((200, 1, 0, 0), (0, 0, "column_index"), Copy(200, 300)),
... ]
>>> [e.ident[2] for e in arrange(entries, Source([]), below=100)]
['column_index', 'offset_index']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from lethe.parquet.enums import CC, CMD, RG
from lethe.parquet.footer import ByteRange, Footer, IndexKind, index_structures, row_group_range
from lethe.parquet.offsets import struct_list, substruct, with_list
from lethe.parquet.segments import Bytes, Copy, Segment, Source
from lethe.parquet.thrift import Struct, TType

__all__ = [
    "KIND_RANK",
    "Ident",
    "Locations",
    "RegionEntry",
    "arrange",
    "needed_ranges",
    "point_chunks",
]

KIND_RANK: dict[IndexKind, int] = {"bloom_filter": 0, "column_index": 1, "offset_index": 2}
"""The order of a chunk's structures among entries placed at the same original offset."""

Ident: TypeAlias = tuple[int, int, str]
"""An index structure of the new file: (new row group, column, kind)."""

Locations: TypeAlias = Mapping[Ident, tuple[int, int]]
"""Where each index structure of the new file lies: (offset, length)."""


@dataclass(frozen=True, slots=True)
class RegionEntry:
    """One index structure of the new index region.

    Attributes:
        key: Its sort key: (offset in the original, or the original footer's for a
            structure the original did not have; :data:`KIND_RANK`; new row group; column).
        ident: Which structure of the new file it is.
        content: Its bytes: a copy of the original's or new bytes.
    """

    key: tuple[int, int, int, int]
    ident: Ident
    content: Segment


def arrange(entries: Iterable[RegionEntry], source: Source, below: int) -> list[RegionEntry]:
    """Order the new index region for a cheap multipart upload.

    Unchanged structures, in the original's order, form runs of contiguous source bytes.
    Runs of at least ``below`` bytes (a multipart part) come first, as copies; everything
    else follows, as one stretch of new bytes that ends up with the footer in the last part:
    the edited groups' structures, rewritten offset indexes, and short runs (as new bytes
    when already fetched, else as copies the planner will download).
    """
    entries = list(entries)
    copies = sorted((e for e in entries if isinstance(e.content, Copy)), key=lambda e: e.key)
    rest = [e for e in entries if not isinstance(e.content, Copy)]
    head: list[RegionEntry] = []
    i = 0
    while i < len(copies):
        j = i
        while j + 1 < len(copies):
            a, b = copies[j].content, copies[j + 1].content
            assert isinstance(a, Copy) and isinstance(b, Copy)
            if a.end != b.start:
                break
            j += 1
        run = copies[i : j + 1]
        first, last = run[0].content, run[-1].content
        assert isinstance(first, Copy) and isinstance(last, Copy)
        if last.end - first.start >= below:
            head.extend(run)
        elif source.has(first.start, last.end - first.start):
            for e in run:
                seg = e.content
                assert isinstance(seg, Copy)
                rest.append(RegionEntry(e.key, e.ident, Bytes(source.read(seg.start, seg.length))))
        else:
            rest.extend(run)
        i = j + 1
    rest.sort(key=lambda e: e.key)
    return head + rest


def point_chunks(group: Struct, new_index: int, locations: Locations) -> Struct:
    """A new row group whose chunks reference their index structures where they now lie.

    References to structures without a location are removed; a bloom filter length is
    written only when the original chunk had one.
    """
    cols = []
    for j, c in enumerate(struct_list(group, RG.COLUMNS)):
        c = c.without(
            CC.COLUMN_INDEX_OFFSET,
            CC.COLUMN_INDEX_LENGTH,
            CC.OFFSET_INDEX_OFFSET,
            CC.OFFSET_INDEX_LENGTH,
        )
        md = substruct(c, CC.META_DATA)
        had_bloom_length = md.get(CMD.BLOOM_FILTER_LENGTH) is not None
        md = md.without(CMD.BLOOM_FILTER_OFFSET, CMD.BLOOM_FILTER_LENGTH)
        if (loc := locations.get((new_index, j, "bloom_filter"))) is not None:
            md = md.set(CMD.BLOOM_FILTER_OFFSET, TType.I64, loc[0])
            if had_bloom_length:
                md = md.set(CMD.BLOOM_FILTER_LENGTH, TType.I32, loc[1])
        c = c.set(CC.META_DATA, TType.STRUCT, md)
        if (loc := locations.get((new_index, j, "offset_index"))) is not None:
            c = c.set(CC.OFFSET_INDEX_OFFSET, TType.I64, loc[0])
            c = c.set(CC.OFFSET_INDEX_LENGTH, TType.I32, loc[1])
        if (loc := locations.get((new_index, j, "column_index"))) is not None:
            c = c.set(CC.COLUMN_INDEX_OFFSET, TType.I64, loc[0])
            c = c.set(CC.COLUMN_INDEX_LENGTH, TType.I32, loc[1])
        cols.append(c)
    return with_list(group, RG.COLUMNS, cols)


def needed_ranges(footer: Footer, edited: Iterable[int]) -> tuple[ByteRange, ...]:
    """The bytes of the original, besides the edited groups, that :func:`~lethe.parquet.splice.splice` must read.

    They are the offset indexes of unedited groups after the first edited one (their page
    offsets are rewritten) and the headers of bloom filters whose length the footer omits
    (up to 64 bytes each). Everything else unchanged becomes a copy. A speculative tail
    read usually holds them all.

    Args:
        footer: The original footer.
        edited: Indexes of the groups to edit.

    Returns:
        Coalesced ranges, in file order.
    """
    meta = footer.metadata
    ranges = [row_group_range(rg) for rg in meta.row_groups]
    chosen = set(edited)
    first = min((ranges[g].start for g in chosen), default=footer.start)
    out: list[ByteRange] = []
    for st in index_structures(meta):
        if st.length is None:
            out.append(ByteRange(st.offset, min(st.offset + 64, footer.start)))
        elif (
            st.kind == "offset_index"
            and st.row_group not in chosen
            and ranges[st.row_group].start > first
        ):
            out.append(ByteRange(st.offset, st.offset + st.length))
    out.sort(key=lambda r: r.start)
    merged: list[ByteRange] = []
    for r in out:
        if merged and r.start <= merged[-1].end:
            merged[-1] = ByteRange(merged[-1].start, max(merged[-1].end, r.end))
        else:
            merged.append(r)
    return tuple(merged)
