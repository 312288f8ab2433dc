"""Per-page entries of a chunk's ColumnIndex lists, and a chunk's OffsetIndex and ColumnIndex
rebuilt from its new pages (page-level erase, :mod:`lethe.parquet.partial`).

Unchanged pages keep their entries; re-encoded pages bring the entries of the temporary file
pyarrow wrote them in, conformed to the lists of the original's ColumnIndex
(:func:`conformed`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from lethe.parquet.chunkmeta import Entries, PageFallback
from lethe.parquet.enums import CI, OI, PL
from lethe.parquet.footer import Page
from lethe.parquet.offsets import set_int, struct_list, with_list
from lethe.parquet.segments import Segment
from lethe.parquet.thrift import Struct, ThriftList, TType, Value, encode

__all__ = ["NewPage", "ci_entries", "conformed", "index_lists", "rebuilt_indexes"]

_LEVEL_HISTOGRAMS = (CI.REPETITION_LEVEL_HISTOGRAMS, CI.DEFINITION_LEVEL_HISTOGRAMS)
_UNORDERED = 0


@dataclass(frozen=True, slots=True)
class NewPage:
    """A data page of the new chunk: where its bytes come from and what it holds."""

    content: Segment
    header: Page | None  # None for an unchanged page (its header was not fetched)
    rows: int
    ci: Entries | None  # this page's ColumnIndex entries, by list field
    unencoded: Value | None  # OffsetIndex.unencoded_byte_array_data_bytes entry


def index_lists(ci: Struct | None) -> dict[int, ThriftList]:
    """A ColumnIndex's per-page lists, by field id."""
    if ci is None:
        return {}
    return {f.id: f.value for f in ci.fields if isinstance(f.value, ThriftList)}


def ci_entries(ci: Struct | None, n: int) -> list[Entries | None]:
    """Each page's entries of a ColumnIndex's per-page lists (histograms by stride)."""
    lists = index_lists(ci)
    if not lists:
        return [None] * n
    out: list[Entries | None] = []
    for i in range(n):
        row: list[tuple[Value, ...]] = []
        for fid in sorted(lists):
            items = lists[fid].items
            if len(items) % n:
                raise PageFallback("a column index list does not divide into its pages")
            k = len(items) // n
            row.append(tuple(items[i * k : (i + 1) * k]))
        out.append(tuple(row))
    return out


def conformed(
    new: Struct | None, rows: Sequence[int], like: Mapping[int, int]
) -> list[Entries | None]:
    """Each new page's ColumnIndex entries (``new`` is the temporary chunk's ColumnIndex,
    ``rows`` its pages' rows) in the lists of the original's, given as ``like``: the number
    of items per page of each of its lists, by field id.

    A list only the new index has is dropped (all are optional). A level histogram only the
    original has is derived when it has one bucket (levels all 0: a flat column's repetition
    levels, a required one's definition levels): the page's rows. parquet-java writes those,
    pyarrow does not.
    """
    mine = ci_entries(new, len(rows))
    if not like or new is None:
        return mine
    have = sorted(index_lists(new))
    out: list[Entries | None] = []
    for entries, n in zip(mine, rows, strict=True):
        assert entries is not None
        row: list[tuple[Value, ...]] = []
        for fid in sorted(like):
            if fid in have:
                row.append(entries[have.index(fid)])
            elif fid in _LEVEL_HISTOGRAMS and like[fid] == 1:
                row.append((n,))
            else:
                raise PageFallback("re-encoded pages have a different column index")
        out.append(tuple(row))
    return out


def rebuilt_indexes(
    pages: Sequence[NewPage], offsets: Sequence[int], oi: Struct, ci: Struct | None
) -> tuple[bytes, bytes | None]:
    """The rebuilt OffsetIndex and ColumnIndex of a chunk's new pages."""
    locs: list[Struct] = []
    first = 0
    template = struct_list(oi, OI.PAGE_LOCATIONS)[0]
    for p, off in zip(pages, offsets, strict=True):
        loc = set_int(template, PL.OFFSET, off)
        loc = set_int(loc, PL.COMPRESSED_PAGE_SIZE, p.content.length, TType.I32)
        locs.append(set_int(loc, PL.FIRST_ROW_INDEX, first))
        first += p.rows
    new_oi = with_list(oi, OI.PAGE_LOCATIONS, locs)
    old_u = oi.get(OI.UNENCODED_BYTE_ARRAY_DATA_BYTES)
    if isinstance(old_u, ThriftList):
        if any(p.unencoded is None for p in pages):
            raise PageFallback("re-encoded pages lack unencoded byte array sizes")
        items = tuple(p.unencoded for p in pages if p.unencoded is not None)
        new_oi = new_oi.set(
            OI.UNENCODED_BYTE_ARRAY_DATA_BYTES,
            TType.LIST,
            dataclasses.replace(old_u, items=items, long_size=old_u.long_size and len(items) < 15),
        )
    if ci is None:
        return encode(new_oi), None
    lists = index_lists(ci)
    if any(p.ci is None or len(p.ci) != len(lists) for p in pages):
        raise PageFallback("re-encoded pages have a different column index")
    new_ci = ci
    for n, fid in enumerate(sorted(lists)):
        items = tuple(v for p in pages if p.ci is not None for v in p.ci[n])
        old = lists[fid]
        new_ci = new_ci.set(
            fid,
            TType.LIST,
            dataclasses.replace(old, items=items, long_size=old.long_size and len(items) < 15),
        )
    new_ci = set_int(new_ci, CI.BOUNDARY_ORDER, _UNORDERED, TType.I32)
    return encode(new_oi), encode(new_ci)
