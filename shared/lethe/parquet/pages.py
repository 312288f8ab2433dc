"""Page-level reads through the page index, as pure functions over bytes already fetched.

A point lookup need not read whole column chunks: the OffsetIndex of a chunk says where each
data page lies and which rows it holds (from ``first_row_index``), the ColumnIndex gives each
page's min/max, null count and whether it holds only nulls. The caller (see
:mod:`lethe.reading.reader`) picks the row ranges that can match from the ColumnIndex, fetches the
pages of each column that overlap them (page boundaries differ per column), and decodes
them here: the chosen pages, after their dictionary page when any of them is
dictionary-encoded, are wrapped as a minimal Parquet file of one column and one row group
whose footer counts exactly those pages' values and rows and carries no statistics, so
pyarrow decodes them as it would decode the whole chunk. Only flat columns (no repetition)
are read this way: a v1 data page of a repeated column does not say where its rows start.

Row sets are half-open ranges of row indices within a row group, sorted and disjoint.

>>> import io, pyarrow as pa, pyarrow.parquet as pq
>>> from lethe.parquet.footer import parse_tail, read_offset_index
>>> buf = io.BytesIO()
>>> t = pa.table({"id": list(range(1000))})
>>> pq.write_table(t, buf, write_page_index=True, data_page_size=512, max_rows_per_page=100)
>>> data = buf.getvalue()
>>> meta = parse_tail(data, len(data)).metadata
>>> cc = meta.row_groups[0].columns[0]
>>> oi = read_offset_index(data[cc.offset_index_offset :][: cc.offset_index_length])
>>> layout = chunk_layout(meta.row_groups[0], 0, oi)
>>> len(layout.pages), layout.pages[3].first_row, layout.pages[3].end_row
(10, 300, 400)
>>> pages = layout.overlapping(((350, 360),))
>>> [p.index for p in pages]
[3]
>>> raw = [data[p.offset : p.offset + p.size] for p in pages]
>>> d = layout.dictionary
>>> dictionary = data[d.start : d.end] if d and dictionary_needed(raw) else None
>>> file = chunk_file(chunk_schema(meta, 0), cc, dictionary, raw, [p.rows for p in pages])
>>> decode_chunk(file).to_pylist()[50:53]
[350, 351, 352]
"""

from __future__ import annotations

import base64
import struct as _struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lethe.parquet.enums import (
    CC,
    CI,
    CMD,
    FMD,
    RG,
    SE,
    Encoding,
    PageType,
    PhysicalType,
    Repetition,
)
from lethe.parquet.footer import MAGIC, ByteRange, chunk_range, read_page_header
from lethe.parquet.model import (
    ColumnChunk,
    ColumnIndex,
    FileMetaData,
    InvalidParquet,
    OffsetIndex,
    RowGroup,
    SchemaElement,
)
from lethe.parquet.thrift import Field, Struct, ThriftList, TType, encode

__all__ = [
    "ChunkLayout",
    "ChunkSchema",
    "PageBound",
    "PageSpan",
    "Ranges",
    "bound_decoder",
    "chunk_file",
    "chunk_layout",
    "chunk_schema",
    "count",
    "decode_chunk",
    "dictionary_needed",
    "flat_leaf",
    "intersect",
    "page_bounds",
    "positions",
    "runs",
    "union",
]

Ranges = tuple[tuple[int, int], ...]
"""Sorted, disjoint, non-empty half-open ``[start, end)`` row ranges."""

_DICT_ENCODINGS = (Encoding.PLAIN_DICTIONARY, Encoding.RLE_DICTIONARY)
_DATA_PAGES = (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)


# --- row ranges ---------------------------------------------------------------------------
def union(*parts: Ranges) -> Ranges:
    """The rows in any of ``parts``.

    >>> union(((0, 5),), ((3, 8), (10, 12)), ((12, 13),))
    ((0, 8), (10, 13))
    """
    out: list[tuple[int, int]] = []
    for s, e in sorted(r for p in parts for r in p if r[0] < r[1]):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return tuple(out)


def intersect(a: Ranges, b: Ranges) -> Ranges:
    """The rows in both ``a`` and ``b``.

    >>> intersect(((0, 5), (8, 20)), ((3, 10), (15, 16)))
    ((3, 5), (8, 10), (15, 16))
    """
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def count(r: Ranges) -> int:
    """Number of rows in ``r``.

    >>> count(((0, 5), (8, 10)))
    7
    """
    return sum(e - s for s, e in r)


def runs(rows: Any) -> Ranges:
    """Ranges of sorted, distinct row indices (a sequence or numpy array).

    >>> runs([1, 2, 3, 7, 9, 10])
    ((1, 4), (7, 8), (9, 11))
    """
    a = np.asarray(rows, dtype=np.int64)
    if not len(a):
        return ()
    cut = np.flatnonzero(np.diff(a) != 1) + 1
    starts = np.concatenate(([0], cut))
    ends = np.concatenate((cut, [len(a)]))
    return tuple((int(a[s]), int(a[e - 1]) + 1) for s, e in zip(starts, ends, strict=True))


# --- layout of a column chunk -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PageSpan:
    """A data page of a column chunk, from its OffsetIndex entry.

    Attributes:
        index: Ordinal of the data page in its chunk.
        offset: Absolute offset of the page header.
        size: Bytes of the page, header included.
        first_row: Index of its first row in the row group.
        end_row: One past its last row.
    """

    index: int
    offset: int
    size: int
    first_row: int
    end_row: int

    @property
    def rows(self) -> int:
        """Rows of the page."""
        return self.end_row - self.first_row


@dataclass(frozen=True, slots=True)
class ChunkLayout:
    """Where a column chunk's pages lie and which rows they hold.

    Attributes:
        column: Leaf index of the chunk.
        pages: The data pages, in order.
        dictionary: The bytes before the first data page (the dictionary page), if any.
        dict_encoded_pages: How many data pages the writer reported as dictionary-encoded
            (``encoding_stats``), None when it did not say. Writers fall back from the
            dictionary to plain once, so those are the first ones; this only predicts
            whether the dictionary will be needed (:func:`dictionary_needed` decides).
    """

    column: int
    pages: tuple[PageSpan, ...]
    dictionary: ByteRange | None
    dict_encoded_pages: int | None

    def overlapping(self, ranges: Ranges) -> tuple[PageSpan, ...]:
        """The pages holding at least one row of ``ranges`` (half-open row ranges, in any
        order; by binary search over the ranges, not a pass per range)."""
        if not self.pages or not ranges:
            return ()
        r = np.asarray(sorted(ranges), dtype=np.int64).reshape(-1, 2)
        starts, reach = r[:, 0], np.maximum.accumulate(r[:, 1])
        first = np.fromiter((p.first_row for p in self.pages), np.int64, len(self.pages))
        end = np.fromiter((p.end_row for p in self.pages), np.int64, len(self.pages))
        # page i holds a row of a range iff some range starting before end[i] reaches past
        # first[i]: the ranges starting before end[i] are a prefix; its furthest reach decides
        n = np.searchsorted(starts, end, side="left")
        hit = (n > 0) & (reach[np.maximum(n - 1, 0)] > first)
        return tuple(self.pages[i] for i in np.flatnonzero(hit))

    def predicts_dictionary(self, pages: Sequence[PageSpan]) -> bool:
        """Whether ``pages`` probably need the dictionary page (fetch it with them)."""
        if self.dictionary is None:
            return False
        k = self.dict_encoded_pages
        return k is None or any(p.index < k for p in pages)


def _dict_encoded_pages(cc: ColumnChunk) -> int | None:
    stats = cc.meta_data.encoding_stats
    if not stats:
        return None
    return sum(
        s.count for s in stats if s.page_type in _DATA_PAGES and s.encoding in _DICT_ENCODINGS
    )


def chunk_layout(rg: RowGroup, column: int, oi: OffsetIndex) -> ChunkLayout:
    """The layout of chunk ``column`` of ``rg`` from its OffsetIndex.

    Raises:
        InvalidParquet: The OffsetIndex is empty, does not start at row 0, has a page
            without rows, or places a page outside the chunk.
    """
    cc = rg.columns[column]
    rng = chunk_range(cc)
    locs = oi.page_locations
    n = rg.num_rows
    if not locs or locs[0].first_row_index != 0:
        raise InvalidParquet(f"offset index of column {column} does not start at row 0")
    pages: list[PageSpan] = []
    for i, loc in enumerate(locs):
        end = locs[i + 1].first_row_index if i + 1 < len(locs) else n
        p = PageSpan(i, loc.offset, loc.compressed_page_size, loc.first_row_index, end)
        if p.rows <= 0 or p.size <= 0 or p.offset < rng.start or p.offset + p.size > rng.end:
            raise InvalidParquet(f"offset index of column {column}: page {i} is inconsistent")
        if pages and p.offset < pages[-1].offset + pages[-1].size:
            raise InvalidParquet(f"offset index of column {column}: pages {i - 1}, {i} overlap")
        pages.append(p)
    first = pages[0].offset
    dictionary = ByteRange(rng.start, first) if rng.start < first else None
    return ChunkLayout(column, tuple(pages), dictionary, _dict_encoded_pages(cc))


# --- page statistics ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PageBound:
    """One page's statistics from the ColumnIndex, in comparable Python form.

    Attributes:
        lo: Minimum, or None when unknown (or the page holds only nulls).
        hi: Maximum, or None when unknown.
        null_count: Nulls in the page, or None when unknown.
        all_null: The page holds only nulls.
    """

    lo: Any
    hi: Any
    null_count: int | None
    all_null: bool


def _time_unit(element: SchemaElement, logical_field: int) -> str | None:
    """The unit of a TIME (7) or TIMESTAMP (8) logical type, else of the converted type."""
    lt = element.logical_type
    if lt is not None:
        sub = lt.get(logical_field)
        if not isinstance(sub, Struct):
            return None
        unit = sub.get(2)
        if not isinstance(unit, Struct) or len(unit.fields) != 1:
            return None
        return {1: "ms", 2: "us", 3: "ns"}.get(unit.fields[0].id)
    legacy = {8: {9: "ms", 10: "us"}, 7: {7: "ms", 8: "us"}}[logical_field]
    ct = element.converted_type
    return legacy.get(ct) if ct is not None else None


def _is_unsigned(element: SchemaElement) -> bool | None:
    """Whether an integer leaf sorts unsigned; None when its annotation is not an integer."""
    lt = element.logical_type
    if lt is not None:
        it = lt.get(10)
        if not isinstance(it, Struct):
            return None
        return it.get(2) is False
    ct = element.converted_type
    if ct is None or 15 <= ct <= 18:
        return False
    return True if 11 <= ct <= 14 else None


def _unpacker(fmt: str) -> Callable[[bytes], Any]:
    s = _struct.Struct(fmt)

    def dec(b: bytes) -> Any:
        return s.unpack(b)[0] if len(b) == s.size else None

    return dec


def _utf8(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _int_decoder(element: SchemaElement, t: pa.DataType) -> Callable[[bytes], Any] | None:
    wide = t.bit_width == 64
    if element.type != (PhysicalType.INT64 if wide else PhysicalType.INT32):
        return None
    unsigned = _is_unsigned(element)
    if unsigned is None or unsigned == pa.types.is_signed_integer(t):
        return None
    return _unpacker(("<Q" if unsigned else "<q") if wide else ("<I" if unsigned else "<i"))


def _temporal_decoder(element: SchemaElement, t: pa.DataType) -> Callable[[bytes], Any] | None:
    p = element.type
    if pa.types.is_date32(t):
        return _unpacker("<i") if p == PhysicalType.INT32 else None
    if pa.types.is_timestamp(t):
        ok = p == PhysicalType.INT64 and _time_unit(element, 8) == t.unit
        return _unpacker("<q") if ok else None
    if pa.types.is_time64(t):  # time32 values have no comparable form (no cast to int)
        ok = p == PhysicalType.INT64 and _time_unit(element, 7) == t.unit
        return _unpacker("<q") if ok else None
    if pa.types.is_duration(t):
        plain = element.logical_type is None and element.converted_type is None
        return _unpacker("<q") if p == PhysicalType.INT64 and plain else None
    return None


def bound_decoder(element: SchemaElement, t: pa.DataType) -> Callable[[bytes], Any] | None:
    """How to read a ColumnIndex min/max of a leaf as the comparable value of Arrow type ``t``.

    Comparable values are those of :func:`lethe.catalog.values.comparable`: integers (temporal types
    as integers in the column's unit), ``str``, ``bytes`` and ``bool``. Only types whose
    Parquet sort order is exactly Python's order of those values are supported; None for
    the others (floating point, decimals, coerced units), which are then never pruned.

    >>> from lethe.parquet.thrift import Field, Struct, TType
    >>> leaf = SchemaElement(Struct((Field(1, TType.I32, PhysicalType.INT64),)))
    >>> bound_decoder(leaf, pa.int64())((-3).to_bytes(8, "little", signed=True))
    -3
    >>> bound_decoder(leaf, pa.float64()) is None
    True
    """
    p = element.type
    if pa.types.is_boolean(t):
        return (
            (lambda b: bool(b[0]) if len(b) == 1 else None) if p == PhysicalType.BOOLEAN else None
        )
    if pa.types.is_integer(t):
        return _int_decoder(element, t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _utf8 if p == PhysicalType.BYTE_ARRAY else None
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return bytes if p == PhysicalType.BYTE_ARRAY else None
    if pa.types.is_fixed_size_binary(t):
        plain = element.logical_type is None and element.converted_type is None
        return bytes if p == PhysicalType.FIXED_LEN_BYTE_ARRAY and plain else None
    return _temporal_decoder(element, t)


def _ci_list(ci: ColumnIndex, fid: int) -> tuple[Any, ...] | None:
    v = ci.struct.get(fid)
    return v.items if isinstance(v, ThriftList) else None


def page_bounds(
    ci: ColumnIndex, element: SchemaElement, t: pa.DataType
) -> tuple[PageBound, ...] | None:
    """Per-page bounds of a ColumnIndex, or None when they cannot be used for Arrow type ``t``.

    Raises:
        InvalidParquet: The ColumnIndex lists have different lengths or wrong types.
    """
    dec = bound_decoder(element, t)
    if dec is None:
        return None
    null_pages = _ci_list(ci, CI.NULL_PAGES)
    mins = _ci_list(ci, CI.MIN_VALUES)
    maxs = _ci_list(ci, CI.MAX_VALUES)
    nulls = _ci_list(ci, CI.NULL_COUNTS)
    if null_pages is None or mins is None or maxs is None:
        raise InvalidParquet("column index without null_pages, min_values or max_values")
    n = len(null_pages)
    if len(mins) != n or len(maxs) != n or (nulls is not None and len(nulls) != n):
        raise InvalidParquet("column index lists differ in length")
    out: list[PageBound] = []
    for i in range(n):
        lo, hi, nc = mins[i], maxs[i], nulls[i] if nulls is not None else None
        if (
            not isinstance(lo, bytes)
            or not isinstance(hi, bytes)
            or not isinstance(null_pages[i], bool)
        ):
            raise InvalidParquet("column index entries have the wrong type")
        count_ = nc if isinstance(nc, int) and not isinstance(nc, bool) else None
        if null_pages[i]:
            out.append(PageBound(None, None, count_, True))
        else:
            out.append(PageBound(dec(lo), dec(hi), count_, False))
    return tuple(out)


# --- a minimal file of some pages ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChunkSchema:
    """What a one-column file of a leaf needs besides the pages (computed once per file).

    Attributes:
        column: The leaf index.
        file: The FileMetaData fields for a file of that leaf alone: schema, key-value
            metadata (``ARROW:schema`` reduced to the one field) and column order.
    """

    column: int
    file: Struct


def flat_leaf(meta: FileMetaData, name: str) -> int | None:
    """Leaf index of top-level column ``name`` if it is one flat (non-repeated) leaf, else None.

    >>> import io, pyarrow as pa, pyarrow.parquet as pq
    >>> from lethe.parquet.footer import parse_tail
    >>> buf = io.BytesIO()
    >>> pq.write_table(pa.table({"a": [1], "b": [[1, 2]], "c": ["x"]}), buf)
    >>> meta = parse_tail(buf.getvalue(), buf.tell()).metadata
    >>> flat_leaf(meta, "a"), flat_leaf(meta, "b"), flat_leaf(meta, "c")
    (0, None, 2)
    """
    for j, (path, element, _d, r) in enumerate(meta.leaves()):
        if path[0] == name:
            flat = len(path) == 1 and r == 0 and element.repetition_type != Repetition.REPEATED
            return j if flat else None
    return None


def _arrow_schema_of(meta: FileMetaData, name: str) -> bytes | None:
    """The ``ARROW:schema`` value reduced to field ``name`` (None when absent)."""
    raw = meta.key_value_metadata.get("ARROW:schema")
    if raw is None:
        return None
    try:
        schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(raw)))
    except (ValueError, pa.ArrowException):
        return None
    i = schema.get_field_index(name)
    if i < 0:
        return None
    return base64.b64encode(pa.schema([schema.field(i)]).serialize().to_pybytes())


def chunk_schema(meta: FileMetaData, column: int) -> ChunkSchema:
    """The schema part of a one-column file of leaf ``column`` (a flat leaf).

    Raises:
        InvalidParquet: The leaf is not a flat top-level column.
    """
    leaves = meta.leaves()
    path, element, _d, r = leaves[column]
    if len(path) != 1 or r:
        raise InvalidParquet(f"column {'.'.join(path)} is nested or repeated")
    root = meta.schema[0].struct.set(SE.NUM_CHILDREN, TType.I32, 1)
    fm = meta.struct.without(FMD.KEY_VALUE_METADATA, FMD.ROW_GROUPS, FMD.COLUMN_ORDERS)
    fm = fm.set(FMD.SCHEMA, TType.LIST, ThriftList(TType.STRUCT, (root, element.struct)))
    arrow = _arrow_schema_of(meta, path[0])
    if arrow is not None:
        kv = Struct((Field(1, TType.BINARY, b"ARROW:schema"), Field(2, TType.BINARY, arrow)))
        fm = fm.set(FMD.KEY_VALUE_METADATA, TType.LIST, ThriftList(TType.STRUCT, (kv,)))
    orders = meta.struct.get(FMD.COLUMN_ORDERS)
    if isinstance(orders, ThriftList) and len(orders.items) == len(leaves):
        one = ThriftList(orders.elem_type, (orders.items[column],))
        fm = fm.set(FMD.COLUMN_ORDERS, TType.LIST, one)
    return ChunkSchema(column, fm)


def dictionary_needed(pages: Sequence[bytes]) -> bool:
    """Whether any of these data pages (header + data each) is dictionary-encoded.

    Raises:
        InvalidParquet: A page header does not decode.
    """
    return any(read_page_header(p, 0)[0].encoding in _DICT_ENCODINGS for p in pages)


def _check_page(page: bytes, rows: int, i: int) -> int:
    """Validate one data page against its row count; returns its uncompressed length."""
    h, at = read_page_header(page, 0)
    if not h.is_data:
        raise InvalidParquet(f"selected page {i} is not a data page")
    if at + h.compressed_page_size != len(page):
        raise InvalidParquet(f"selected page {i}: header and offset index disagree on its size")
    if h.num_values != rows or (h.type == PageType.DATA_PAGE_V2 and h.num_rows != rows):
        raise InvalidParquet(f"selected page {i} does not hold {rows} values of a flat column")
    return at + h.uncompressed_page_size


def _dictionary_page(raw: bytes) -> tuple[bytes, int]:
    h, at = read_page_header(raw, 0)
    if h.type != PageType.DICTIONARY_PAGE:
        raise InvalidParquet("the bytes before the first data page are not a dictionary page")
    end = at + h.compressed_page_size
    if end > len(raw):
        raise InvalidParquet("the dictionary page runs past the first data page")
    return raw[:end], at + h.uncompressed_page_size


def chunk_file(
    schema: ChunkSchema,
    cc: ColumnChunk,
    dictionary: bytes | None,
    pages: Sequence[bytes],
    rows: Sequence[int],
) -> bytes:
    """A Parquet file of one column and one row group made of the given pages.

    Args:
        schema: From :func:`chunk_schema` for the chunk's leaf.
        cc: The original column chunk (codec, type, encodings are kept; statistics, page
            index and bloom filter references are dropped, so nothing can prune wrongly).
        dictionary: The bytes from the chunk's start to its first data page (the
            dictionary page), or None when no page is dictionary-encoded.
        pages: The data pages (header included), in chunk order.
        rows: Rows of each page, from the OffsetIndex.

    Raises:
        InvalidParquet: A page does not match its OffsetIndex entry, or a page is
            dictionary-encoded and no dictionary was given.
    """
    body = bytearray(MAGIC)
    uncompressed = 0
    if dictionary is not None:
        page, size = _dictionary_page(dictionary)
        body += page
        uncompressed += size
    elif dictionary_needed(pages):
        raise InvalidParquet("a dictionary-encoded page was given without its dictionary")
    data_at = len(body)
    for i, (page, n) in enumerate(zip(pages, rows, strict=True)):
        uncompressed += _check_page(page, n, i)
        body += page
    total = sum(rows)
    sizes = (total, uncompressed, len(body) - 4, data_at)
    raw = _footer(schema, _chunk_meta(cc, sizes, dictionary is not None), sizes)
    return bytes(body) + raw + _struct.pack("<I", len(raw)) + MAGIC


def _chunk_meta(cc: ColumnChunk, sizes: tuple[int, int, int, int], dictionary: bool) -> Struct:
    """The chunk's ColumnMetaData for :func:`chunk_file`: statistics, page index and bloom
    filter references dropped; ``sizes``: values, uncompressed and compressed bytes, and
    where the first data page lies."""
    md = cc.meta_data.struct.without(
        CMD.STATISTICS,
        CMD.ENCODING_STATS,
        CMD.BLOOM_FILTER_OFFSET,
        CMD.BLOOM_FILTER_LENGTH,
        CMD.SIZE_STATISTICS,
        CMD.GEOSPATIAL_STATISTICS,
        CMD.INDEX_PAGE_OFFSET,
        CMD.DICTIONARY_PAGE_OFFSET,
    )
    fids = (CMD.NUM_VALUES, CMD.TOTAL_UNCOMPRESSED_SIZE, CMD.TOTAL_COMPRESSED_SIZE)
    for fid, v in zip((*fids, CMD.DATA_PAGE_OFFSET), sizes, strict=True):
        md = md.set(fid, TType.I64, v)
    return md.set(CMD.DICTIONARY_PAGE_OFFSET, TType.I64, 4) if dictionary else md


def _footer(schema: ChunkSchema, md: Struct, sizes: tuple[int, int, int, int]) -> bytes:
    """The serialized footer of :func:`chunk_file`: one group of one chunk (``md``)."""
    total, uncompressed, compressed, _ = sizes
    chunk = Struct((Field(CC.FILE_OFFSET, TType.I64, 4), Field(CC.META_DATA, TType.STRUCT, md)))
    group = Struct(
        (
            Field(RG.COLUMNS, TType.LIST, ThriftList(TType.STRUCT, (chunk,))),
            Field(RG.TOTAL_BYTE_SIZE, TType.I64, uncompressed),
            Field(RG.NUM_ROWS, TType.I64, total),
            Field(RG.FILE_OFFSET, TType.I64, 4),
            Field(RG.TOTAL_COMPRESSED_SIZE, TType.I64, compressed),
            Field(RG.ORDINAL, TType.I16, 0),
        )
    )
    fm = schema.file.set(FMD.NUM_ROWS, TType.I64, total)
    fm = fm.set(FMD.ROW_GROUPS, TType.LIST, ThriftList(TType.STRUCT, (group,)))
    return encode(fm)


def decode_chunk(file: bytes) -> pa.ChunkedArray:
    """The values of a file built by :func:`chunk_file`."""
    return pq.ParquetFile(pa.BufferReader(file)).read(use_threads=False).column(0)


def positions(pages: Sequence[PageSpan], rows: Any) -> Any:
    """Where rows (sorted row indices of the group, all within ``pages``) are in the
    concatenation of ``pages`` (a numpy int64 array).

    >>> pages = [PageSpan(0, 4, 10, 0, 100), PageSpan(2, 40, 10, 250, 300)]
    >>> positions(pages, [5, 250, 299]).tolist()
    [5, 100, 149]
    """
    r = np.asarray(rows, dtype=np.int64)
    first = np.fromiter((p.first_row for p in pages), dtype=np.int64, count=len(pages))
    sizes = np.fromiter((p.rows for p in pages), dtype=np.int64, count=len(pages))
    before = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    k = np.searchsorted(first, r, side="right") - 1
    return before[k] + r - first[k]
