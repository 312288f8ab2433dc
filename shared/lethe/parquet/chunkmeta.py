"""Chunk metadata of a page-level rewrite without re-encoding the chunk (DESIGN §4).

The statistics, ``size_statistics`` and ``encoding_stats`` of a column chunk whose pages
holding erased rows were re-encoded (:mod:`lethe.parquet.partial`), derived from the
original's and from the erased values, or :class:`WholeChunk` when that cannot be proven
exact (the chunk is then re-encoded whole):

- ``null_count`` drops by the erased nulls; ``distinct_count`` is dropped.
- ``min``/``max`` stay when every erased value lies strictly inside them (byte arrays only
  when the writer marked them exact: a truncated max may have come from an erased value).
  Otherwise, for fixed-width types, they are the extremes of the pages' ColumnIndex
  entries (exact there). Types without an exact comparable form (floating point,
  decimals) are not provable.
- ``size_statistics``: the level histograms and unencoded byte-array bytes less the erased
  values', or dropped (optional) when their shape is not the flat one.
- ``encoding_stats``: the original's less the replaced pages', plus the new pages'.

>>> import pyarrow as pa
>>> from lethe.parquet.thrift import Field, Struct, TType
>>> from lethe.parquet.enums import PhysicalType
>>> leaf = SchemaElement(Struct((Field(1, TType.I32, PhysicalType.INT64),)))
>>> enc = lambda v: v.to_bytes(8, "little", signed=True)
>>> st = Struct((Field(3, TType.I64, 1), Field(5, TType.BINARY, enc(9)), Field(6, TType.BINARY, enc(1))))
>>> new = statistics(leaf, pa.int64(), st, pa.array([5, None], pa.int64()), [], [])
>>> new.get(3), new.get(5) == enc(9)
(0, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lethe.parquet.enums import CI, CMD, PES, PageType, PhysicalType
from lethe.parquet.footer import Page
from lethe.parquet.model import SchemaElement
from lethe.parquet.offsets import set_int, with_list
from lethe.parquet.pages import bound_decoder
from lethe.parquet.thrift import Struct, ThriftList, TType, Value

__all__ = [
    "Entries",
    "PageFallback",
    "WholeChunk",
    "encoding_stats",
    "encodings",
    "size_statistics",
    "statistics",
]

Entries = tuple[tuple[Value, ...], ...]
"""One page's entries of each per-page list of a ColumnIndex, by field id order."""

# Statistics field ids
_ST_MAX, _ST_MIN, _ST_NULLS, _ST_DISTINCT, _ST_MAX_V, _ST_MIN_V, _ST_MAX_X, _ST_MIN_X = range(1, 9)


class PageFallback(Exception):
    """Page level cannot be proven exact here (the message says why)."""


class WholeChunk(Exception):
    """This chunk must be re-encoded whole (the message says why)."""


def _comparable(a: pa.Array) -> list[Any]:
    t = a.type
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_duration(t):
        a = a.cast(pa.int64())
    elif pa.types.is_date32(t):
        a = a.cast(pa.int32())
    return list(a.to_pylist())


def _bounds_from_pages(
    pages: Sequence[Entries | None], ci_fids: Sequence[int], dec: Any
) -> tuple[bytes, bytes]:
    """The chunk's min and max (raw) from its pages' ColumnIndex entries."""
    if CI.MIN_VALUES not in ci_fids or CI.MAX_VALUES not in ci_fids:
        raise WholeChunk("chunk statistics not provable without a column index")
    at_null = ci_fids.index(CI.NULL_PAGES) if CI.NULL_PAGES in ci_fids else None
    at_lo, at_hi = ci_fids.index(CI.MIN_VALUES), ci_fids.index(CI.MAX_VALUES)
    lo: tuple[Any, bytes] | None = None
    hi: tuple[Any, bytes] | None = None
    for ci in pages:
        if ci is None:
            raise WholeChunk("chunk statistics not provable without a column index")
        if at_null is not None and ci[at_null] == (True,):
            continue
        raw_lo, raw_hi = ci[at_lo][0], ci[at_hi][0]
        if not isinstance(raw_lo, bytes) or not isinstance(raw_hi, bytes):
            raise WholeChunk("a column index entry has the wrong type")
        vl, vh = dec(raw_lo), dec(raw_hi)
        if vl is None or vh is None:
            raise WholeChunk("a column index entry does not decode")
        if lo is None or vl < lo[0]:
            lo = (vl, raw_lo)
        if hi is None or vh > hi[0]:
            hi = (vh, raw_hi)
    if lo is None or hi is None:
        raise WholeChunk("only nulls remain in the chunk")
    return lo[1], hi[1]


def statistics(
    element: SchemaElement,
    arrow_type: pa.DataType,
    st: Struct,
    gone: pa.Array,
    pages: Sequence[Entries | None],
    ci_fids: Sequence[int],
) -> Struct:
    """Chunk statistics ``st`` without the erased values ``gone``.

    Args:
        element: The column's schema element.
        arrow_type: Its natural Arrow type (the type of ``gone``).
        st: The original chunk statistics.
        gone: The erased values.
        pages: Each page of the new chunk's ColumnIndex entries (by ``ci_fids``).
        ci_fids: The ColumnIndex's list field ids, sorted.

    Raises:
        WholeChunk: They cannot be proven without re-encoding the chunk.
    """
    st = st.without(_ST_DISTINCT)
    if isinstance(nc := st.get(_ST_NULLS), int) and not isinstance(nc, bool):
        st = set_int(st, _ST_NULLS, nc - gone.null_count)
    values = gone.drop_null()
    if not len(values) or all(st.get(f) is None for f in (_ST_MAX, _ST_MIN, _ST_MAX_V, _ST_MIN_V)):
        return st
    dec = bound_decoder(element, arrow_type)
    lo_raw, hi_raw = st.get(_ST_MIN_V), st.get(_ST_MAX_V)
    if dec is None or not isinstance(lo_raw, bytes) or not isinstance(hi_raw, bytes):
        raise WholeChunk("chunk statistics not provable for this type")
    legacy = [st.get(_ST_MIN), st.get(_ST_MAX)]
    if legacy != [None, None] and legacy != [lo_raw, hi_raw]:
        raise WholeChunk("legacy chunk statistics differ from min_value/max_value")
    variable = element.type in (PhysicalType.BYTE_ARRAY, PhysicalType.FIXED_LEN_BYTE_ARRAY)
    if variable and not (st.get(_ST_MIN_X) is True and st.get(_ST_MAX_X) is True):
        raise WholeChunk("chunk statistics may be truncated")
    lo, hi = dec(lo_raw), dec(hi_raw)
    if lo is not None and hi is not None and all(lo < v < hi for v in _comparable(values)):
        return st
    if variable:
        raise WholeChunk(
            "an erased value bounds the chunk statistics (page bounds may be truncated)"
        )
    new_lo, new_hi = _bounds_from_pages(pages, ci_fids, dec)
    st = st.set(_ST_MIN_V, TType.BINARY, new_lo).set(_ST_MAX_V, TType.BINARY, new_hi)
    if legacy != [None, None]:
        st = st.set(_ST_MIN, TType.BINARY, new_lo).set(_ST_MAX, TType.BINARY, new_hi)
    return st


def _level_list(v: Value | None, gone: int, nulls: int) -> ThriftList | bool | None:
    """A level histogram less the erased values (False: not adjustable)."""
    if not isinstance(v, ThriftList):
        return None
    items = list(v.items)
    if len(items) == 0:
        return v
    if len(items) == 1 and isinstance(items[0], int):
        return dataclasses.replace(v, items=(items[0] - gone,))
    if len(items) == 2 and all(isinstance(x, int) for x in items):
        a, b = items
        assert isinstance(a, int) and isinstance(b, int)
        return dataclasses.replace(v, items=(a - nulls, b - (gone - nulls)))
    return False


def size_statistics(md: Struct, element_type: int | None, gone: pa.Array) -> Struct:
    """``size_statistics`` less the erased values, or dropped when not adjustable."""
    ss = md.get(CMD.SIZE_STATISTICS)
    if not isinstance(ss, Struct):
        return md
    new = ss
    u = ss.get(1)
    if isinstance(u, int) and not isinstance(u, bool):
        if element_type != PhysicalType.BYTE_ARRAY:
            return md.without(CMD.SIZE_STATISTICS)
        values = gone.drop_null()
        lost = pc.sum(pc.binary_length(values)).as_py() or 0 if len(values) else 0
        new = set_int(new, 1, u - lost)
    for fid, nulls in ((2, 0), (3, gone.null_count)):
        adjusted = _level_list(ss.get(fid), len(gone), nulls)
        if adjusted is False:
            return md.without(CMD.SIZE_STATISTICS)
        if isinstance(adjusted, ThriftList):
            new = new.set(fid, TType.LIST, adjusted)
    return md.set(CMD.SIZE_STATISTICS, TType.STRUCT, new)


def encoding_stats(md: Struct, old: Sequence[Page], new: Sequence[Page]) -> Struct:
    """``encoding_stats`` less the replaced pages, plus the new ones."""
    stats = md.get(CMD.ENCODING_STATS)
    if not isinstance(stats, ThriftList):
        return md
    counts: dict[tuple[int, int], int] = {}
    order: list[tuple[int, int]] = []
    for s in stats.items:
        if not isinstance(s, Struct):
            raise PageFallback("encoding stats of the wrong type")
        t, e, c = s.get(PES.PAGE_TYPE), s.get(PES.ENCODING), s.get(PES.COUNT)
        if not isinstance(t, int) or not isinstance(e, int) or not isinstance(c, int):
            raise PageFallback("encoding stats of the wrong type")
        order.append((t, e))
        counts[(t, e)] = counts.get((t, e), 0) + c
    for p, sign in [(p, -1) for p in old] + [(p, 1) for p in new]:
        key = (p.header.type, p.header.encoding if p.header.encoding is not None else 0)
        if key not in counts and (PageType.DATA_PAGE, key[1]) in counts:
            key = (PageType.DATA_PAGE, key[1])  # writers such as Arrow count v2 pages so
        if key not in counts:
            order.append(key)
        counts[key] = counts.get(key, 0) + sign
    if any(c < 0 for c in counts.values()):
        raise PageFallback("encoding stats disagree with the pages")
    items = [
        Struct(())
        .set(PES.PAGE_TYPE, TType.I32, t)
        .set(PES.ENCODING, TType.I32, e)
        .set(PES.COUNT, TType.I32, counts[(t, e)])
        for (t, e) in dict.fromkeys(order)
        if counts[(t, e)]
    ]
    return with_list(md, CMD.ENCODING_STATS, items)


def encodings(md: Struct, new: Sequence[Page]) -> Struct:
    """``encodings`` with those of the new pages it lacks (a PLAIN page replacing a
    dictionary-encoded one)."""
    have = md.get(CMD.ENCODINGS)
    if not isinstance(have, ThriftList):
        return md
    items = list(have.items)
    for p in new:
        e = p.header.encoding
        if e is not None and e not in items:
            items.append(e)
    if len(items) == len(have.items):
        return md
    lst = dataclasses.replace(
        have, items=tuple(items), long_size=have.long_size and len(items) < 15
    )
    return md.set(CMD.ENCODINGS, TType.LIST, lst)
