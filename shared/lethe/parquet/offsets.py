"""Moving the absolute offsets of Parquet metadata, and the struct edits that do it.

A splice moves byte ranges of a file; every absolute offset into a moved range moves with
it (DESIGN §4.3). A *move* maps an offset of the original to its place in the new file, or
to None when that byte is not kept. :class:`OffsetMap` is the move of a whole splice (the
kept ranges of the original and where they went); :func:`shifted` moves one range.
:func:`shift_column` and :func:`shift_offset_index` apply a move to a column chunk and to a
serialized OffsetIndex (whose page locations are absolute offsets too).

>>> move = OffsetMap(((4, 100, 4), (150, 300, 100)))  # [150, 300) moved down by 50
>>> move(20), move(120), move(200)
(20, None, 150)
>>> shifted(ByteRange(10, 20), 4)(15), shifted(ByteRange(10, 20), 4)(21)
(9, None)
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeAlias

from lethe.errors import SpliceRefused
from lethe.parquet.enums import CC, CMD, PL
from lethe.parquet.footer import ByteRange, chunk_range
from lethe.parquet.model import ColumnChunk, InvalidParquet
from lethe.parquet.thrift import Struct, ThriftError, ThriftList, TType, decode, encode

__all__ = [
    "Move",
    "OffsetMap",
    "set_int",
    "shift_column",
    "shift_offset_index",
    "shifted",
    "struct_list",
    "substruct",
    "with_list",
]

Move: TypeAlias = Callable[[int], int | None]
"""Where an offset of the original lies in the new file; None when its byte is not kept."""


# --- struct editing -----------------------------------------------------------------------
def set_int(s: Struct, fid: int, value: int, default: TType = TType.I64) -> Struct:
    """Set an integer field, keeping its wire type when present (else ``default``)."""
    f = s.field(fid)
    return s.set(fid, f.type if f is not None else default, value)


def substruct(s: Struct, fid: int) -> Struct:
    """The struct in field ``fid``.

    Raises:
        InvalidParquet: The field is missing or not a struct.
    """
    v = s.get(fid)
    if not isinstance(v, Struct):
        raise InvalidParquet(f"field {fid} is not a struct")
    return v


def struct_list(s: Struct, fid: int) -> list[Struct]:
    """The structs of the list in field ``fid``.

    Raises:
        InvalidParquet: The field is missing or not a list.
    """
    v = s.get(fid)
    if not isinstance(v, ThriftList):
        raise InvalidParquet(f"field {fid} is not a list")
    return [x for x in v.items if isinstance(x, Struct)]


def with_list(s: Struct, fid: int, items: Sequence[Struct]) -> Struct:
    """Replace the list of structs in field ``fid``, keeping its header form when it fits."""
    old = s.get(fid)
    lst = ThriftList(TType.STRUCT, tuple(items))
    if isinstance(old, ThriftList):
        lst = replace(old, items=tuple(items), long_size=old.long_size and len(items) < 15)
    return s.set(fid, TType.LIST, lst)


# --- moves --------------------------------------------------------------------------------
class OffsetMap:
    """Maps offsets of kept byte ranges of the original to their place in the new file.

    Args:
        kept: ``(start, end, new start)`` of every kept range, sorted by ``start``. An
            offset equal to a range's ``end`` belongs to it (an end offset moves with the
            bytes before it) unless the next range starts there.
    """

    def __init__(self, kept: Sequence[tuple[int, int, int]]) -> None:
        self._kept = list(kept)
        self._starts = [k[0] for k in self._kept]

    def __call__(self, p: int) -> int | None:
        i = bisect.bisect_right(self._starts, p) - 1
        # A position at the end of a kept range that is also the start of the next one
        # belongs to the next one; bisect_right already picks the last range starting <= p.
        if i < 0:
            return None
        start, end, new = self._kept[i]
        return new + p - start if p <= end else None


def shifted(r: ByteRange, to: int) -> Move:
    """The move of range ``r`` (its end offset included) to offset ``to``."""
    shift = to - r.start

    def move(p: int) -> int | None:
        return p + shift if r.start <= p <= r.end else None

    return move


def shift_column(cc: Struct, move: Move) -> Struct:
    """Move a column chunk's page offsets and its deprecated ``file_offset``.

    ``file_offset`` means different things to different writers (0, the chunk's start, a
    copy of its metadata after it); it moves with the chunk when it lies in a moved range,
    else it becomes the chunk's new start.

    Raises:
        SpliceRefused: A page offset does not lie in a moved range.
    """
    md = substruct(cc, CC.META_DATA)
    for fid in (CMD.DATA_PAGE_OFFSET, CMD.DICTIONARY_PAGE_OFFSET, CMD.INDEX_PAGE_OFFSET):
        v = md.get(fid)
        if not isinstance(v, int) or (fid != CMD.DATA_PAGE_OFFSET and v == 0):
            continue
        moved = move(v)
        if moved is None:
            raise SpliceRefused(f"page offset {v} does not lie in a moved byte range")
        md = set_int(md, fid, moved)
    cc = cc.set(CC.META_DATA, TType.STRUCT, md)
    fo = cc.get(CC.FILE_OFFSET)
    if isinstance(fo, int) and fo != 0:
        moved = move(fo)
        if moved is None:
            moved = chunk_range(ColumnChunk(cc)).start
        cc = set_int(cc, CC.FILE_OFFSET, moved)
    return cc


def shift_offset_index(raw: bytes, move: Move) -> bytes:
    """Rewrite the absolute page offsets of a serialized OffsetIndex.

    Raises:
        SpliceRefused: The index does not round-trip through the codec, or a page location
            does not lie in a moved range.
    """
    try:
        oi = decode(raw)
    except ThriftError as e:
        raise SpliceRefused(f"an offset index does not decode: {e}") from e
    if encode(oi) != raw:
        raise SpliceRefused("an offset index does not re-serialize identically")
    locs = oi.get(1)
    if not isinstance(locs, ThriftList):
        raise SpliceRefused("an offset index has no page locations")
    items: list[Struct] = []
    for loc in locs.items:
        if not isinstance(loc, Struct) or not isinstance(off := loc.get(PL.OFFSET), int):
            raise SpliceRefused("an offset index page location has no offset")
        moved = move(off)
        if moved is None:
            raise SpliceRefused(f"offset index page location {off} is not in a moved range")
        items.append(set_int(loc, PL.OFFSET, moved))
    return encode(with_list(oi, 1, items))
