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

The result is a list of segments (:mod:`lethe.parquet.segments`): ranges of the original file
and new bytes. Nothing here does I/O.

>>> import io, pyarrow as pa, pyarrow.compute as pc, pyarrow.parquet as pq
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
import io
import itertools
import math
import struct as _struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.errors import InvalidRequest, SpliceRefused, UnsupportedFile
from lethe.parquet.enums import CC, CMD, FMD, PL, RG, Codec, Encoding, PageType, PhysicalType
from lethe.parquet.footer import (
    MAGIC,
    ByteRange,
    Footer,
    IndexStructure,
    Page,
    check_roundtrip,
    chunk_range,
    index_structures,
    parse_tail,
    read_bloom_filter_header,
    row_group_range,
    walk_pages,
)
from lethe.parquet.model import ColumnChunk, FileMetaData, InvalidParquet, SchemaElement
from lethe.parquet.segments import Bytes, Copy, Segment, apply_segments, normalize
from lethe.parquet.thrift import Struct, ThriftError, ThriftList, TType, decode, encode

__all__ = [
    "Extent",
    "GroupEdit",
    "GroupFate",
    "SplicePlan",
    "apply_segments",
    "decode_row_group",
    "needed_ranges",
    "splice",
]

_KNOWN_FIELDS: dict[str, frozenset[int]] = {
    "FileMetaData": frozenset(range(1, 10)),
    "RowGroup": frozenset(range(1, 8)),
    "ColumnChunk": frozenset(range(1, 8)),
    "ColumnMetaData": frozenset(range(1, 18)),
}
_CODEC_NAMES: dict[int, str] = {
    Codec.UNCOMPRESSED: "NONE",
    Codec.SNAPPY: "SNAPPY",
    Codec.GZIP: "GZIP",
    Codec.BROTLI: "BROTLI",
    Codec.ZSTD: "ZSTD",
    Codec.LZ4_RAW: "LZ4_RAW",
}
_COLUMN_ENCODINGS: dict[int, str] = {
    Encoding.PLAIN: "PLAIN",
    Encoding.DELTA_BINARY_PACKED: "DELTA_BINARY_PACKED",
    Encoding.DELTA_LENGTH_BYTE_ARRAY: "DELTA_LENGTH_BYTE_ARRAY",
    Encoding.DELTA_BYTE_ARRAY: "DELTA_BYTE_ARRAY",
    Encoding.BYTE_STREAM_SPLIT: "BYTE_STREAM_SPLIT",
}
_DICT = Encoding.RLE_DICTIONARY
_BLOOM_FPP = 0.05
COPY_RUN_MIN = 5 << 20
"""Runs of unchanged index structures shorter than this are inlined when already fetched."""


# --- inputs and outputs ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Extent:
    """Bytes of the original file already in memory.

    Attributes:
        offset: File offset of ``data[0]``.
        data: The bytes.
    """

    offset: int
    data: bytes

    @property
    def end(self) -> int:
        """One past the last byte held."""
        return self.offset + len(self.data)


@dataclass(frozen=True, slots=True)
class GroupEdit:
    """What to do with one row group.

    Attributes:
        data: The group's original bytes (its :func:`~lethe.parquet.footer.row_group_range`).
        keep: The rows that remain, in their original order (e.g. the output of
            :func:`decode_row_group`, filtered). An empty table drops the group.
    """

    data: bytes
    keep: pa.Table


@dataclass(frozen=True, slots=True)
class GroupFate:
    """What happened to one row group of the original file.

    Attributes:
        index: Its index in the original footer.
        new_index: Its index in the new footer, None if dropped.
        rows_before: Rows it had.
        rows_after: Rows it has now (0 if dropped).
        edited: Whether it was re-encoded.
    """

    index: int
    new_index: int | None
    rows_before: int
    rows_after: int
    edited: bool


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


class _Source:
    """Random access to the fetched extents of the original file."""

    def __init__(self, extents: Iterable[Extent]) -> None:
        self._extents = sorted(extents, key=lambda e: e.offset)

    def read(self, offset: int, length: int) -> bytes:
        for e in self._extents:
            if e.offset <= offset and offset + length <= e.end:
                return e.data[offset - e.offset : offset + length - e.offset]
        raise SpliceRefused(
            f"bytes [{offset}, {offset + length}) of the original file were not provided"
        )

    def has(self, offset: int, length: int) -> bool:
        return any(e.offset <= offset and offset + length <= e.end for e in self._extents)

    def extent_at(self, offset: int) -> Extent:
        for e in self._extents:
            if e.offset <= offset < e.end:
                return e
        raise SpliceRefused(f"byte {offset} of the original file was not provided")


# --- struct editing helpers -------------------------------------------------------------
def _set_int(s: Struct, fid: int, value: int, default: TType = TType.I64) -> Struct:
    f = s.field(fid)
    return s.set(fid, f.type if f is not None else default, value)


def _sub(s: Struct, fid: int) -> Struct:
    v = s.get(fid)
    if not isinstance(v, Struct):
        raise InvalidParquet(f"field {fid} is not a struct")
    return v


def _with_list(s: Struct, fid: int, items: Sequence[Struct]) -> Struct:
    old = s.get(fid)
    lst = ThriftList(TType.STRUCT, tuple(items))
    if isinstance(old, ThriftList):
        lst = replace(old, items=tuple(items), long_size=old.long_size and len(items) < 15)
    return s.set(fid, TType.LIST, lst)


def _check_known(s: Struct, kind: str) -> None:
    unknown = [f.id for f in s.fields if f.id not in _KNOWN_FIELDS[kind]]
    if unknown:
        raise SpliceRefused(
            f"{kind} has fields {unknown} unknown to Lethe (they may hold offsets a splice "
            "would have to move)"
        )


def _shift_column(cc: Struct, move: Callable[[int], int | None]) -> Struct:
    """Move a column chunk's page offsets and its deprecated ``file_offset``.

    ``file_offset`` means different things to different writers (0, the chunk's start, a
    copy of its metadata after it); it moves with the chunk when it lies in a moved range,
    else it becomes the chunk's new start.
    """
    md = _sub(cc, CC.META_DATA)
    for fid in (CMD.DATA_PAGE_OFFSET, CMD.DICTIONARY_PAGE_OFFSET, CMD.INDEX_PAGE_OFFSET):
        v = md.get(fid)
        if not isinstance(v, int) or (fid != CMD.DATA_PAGE_OFFSET and v == 0):
            continue
        moved = move(v)
        if moved is None:
            raise SpliceRefused(f"page offset {v} does not lie in a moved byte range")
        md = _set_int(md, fid, moved)
    cc = cc.set(CC.META_DATA, TType.STRUCT, md)
    fo = cc.get(CC.FILE_OFFSET)
    if isinstance(fo, int) and fo != 0:
        moved = move(fo)
        if moved is None:
            moved = chunk_range(ColumnChunk(cc)).start
        cc = _set_int(cc, CC.FILE_OFFSET, moved)
    return cc


def _shift_offset_index(raw: bytes, move: Callable[[int], int | None]) -> bytes:
    """Rewrite the absolute page offsets of a serialized OffsetIndex."""
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
        items.append(_set_int(loc, PL.OFFSET, moved))
    return encode(_with_list(oi, 1, items))


# --- decoding one row group -------------------------------------------------------------
def _one_group_footer(meta: FileMetaData, k: int, *, keep_kv: bool) -> bytes:
    """A footer describing only group ``k``, its data placed right after the magic."""
    rg = meta.row_groups[k]
    rng = row_group_range(rg)
    shift = 4 - rng.start

    def move(p: int) -> int | None:
        return p + shift if rng.start <= p <= rng.end else None

    cols = []
    for cc in rg.columns:
        s = _shift_column(cc.struct, move)
        s = s.without(
            CC.OFFSET_INDEX_OFFSET,
            CC.OFFSET_INDEX_LENGTH,
            CC.COLUMN_INDEX_OFFSET,
            CC.COLUMN_INDEX_LENGTH,
        )
        md = _sub(s, CC.META_DATA).without(CMD.BLOOM_FILTER_OFFSET, CMD.BLOOM_FILTER_LENGTH)
        cols.append(s.set(CC.META_DATA, TType.STRUCT, md))
    g = _with_list(rg.struct, RG.COLUMNS, cols)
    if rg.file_offset is not None:
        g = _set_int(g, RG.FILE_OFFSET, 4)
    if rg.ordinal is not None:
        g = _set_int(g, RG.ORDINAL, 0, TType.I16)
    fm = _with_list(meta.struct, FMD.ROW_GROUPS, [g])
    fm = _set_int(fm, FMD.NUM_ROWS, rg.num_rows)
    if not keep_kv:
        fm = fm.without(FMD.KEY_VALUE_METADATA)
    return encode(fm)


def _wrap(body: bytes, footer_raw: bytes) -> bytes:
    return MAGIC + body + footer_raw + _struct.pack("<I", len(footer_raw)) + MAGIC


def decode_row_group(meta: FileMetaData, rg_index: int, rg_bytes: bytes) -> pa.Table:
    """Decode one row group from its bytes alone.

    The bytes are wrapped as ``PAR1`` + group + a one-group footer (offsets moved, index
    structures left out, key-value metadata kept so that ``ARROW:schema`` types come back)
    and read with pyarrow.

    Args:
        meta: The file's footer.
        rg_index: Which group.
        rg_bytes: Its bytes, exactly its :func:`~lethe.parquet.footer.row_group_range`.

    Returns:
        The group's rows.

    Raises:
        UnsupportedFile: The file is encrypted or a chunk lives in another file.
        SpliceRefused: INT96 timestamps lie outside the range pyarrow decodes exactly
            (1677-2262), so the rows could not be re-encoded bit for bit.
        InvalidRequest: ``rg_bytes`` does not have the group's length.
    """
    if meta.encrypted:
        raise UnsupportedFile("Parquet files with encrypted columns are not supported")
    rng = row_group_range(meta.row_groups[rg_index])
    if len(rg_bytes) != rng.length:
        raise InvalidRequest(
            f"row group {rg_index} spans {rng.length} bytes, {len(rg_bytes)} were given"
        )
    file = _wrap(rg_bytes, _one_group_footer(meta, rg_index, keep_kv=True))
    table = pq.ParquetFile(pa.BufferReader(file)).read()
    if any(e.type == PhysicalType.INT96 for _, e, _, _ in meta.leaves()):
        # pyarrow decodes INT96 to nanoseconds and silently wraps outside 1677-2262: decode
        # again to microseconds (no overflow) and compare
        coarse = pq.ParquetFile(pa.BufferReader(file), coerce_int96_timestamp_unit="us").read()
        for a, b in zip(_timestamp_leaves(table), _timestamp_leaves(coarse), strict=True):
            if not (_micros(a) == _micros(b)).all():
                raise SpliceRefused(
                    "INT96 timestamps lie outside 1677-2262 and cannot be decoded exactly"
                )
    return table


def _timestamp_leaves(data: pa.Table | pa.Array) -> list[pa.Array]:
    """Every timestamp array in a table, nested ones included, in a stable order."""
    if isinstance(data, pa.Table):
        return [x for col in data.columns for x in _timestamp_leaves(col.combine_chunks())]
    if isinstance(data, pa.ChunkedArray):
        return _timestamp_leaves(data.combine_chunks())
    t = data.type
    if pa.types.is_timestamp(t):
        return [data]
    if pa.types.is_struct(t):
        return [x for i in range(t.num_fields) for x in _timestamp_leaves(data.field(i))]
    if pa.types.is_map(t):
        return _timestamp_leaves(data.keys) + _timestamp_leaves(data.items)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _timestamp_leaves(data.values)
    if pa.types.is_dictionary(t):
        return _timestamp_leaves(data.dictionary)
    return []


_PER_US = {"s": (1_000_000, 1), "ms": (1000, 1), "us": (1, 1), "ns": (1, 1000)}


def _micros(a: pa.Array) -> Any:
    """A timestamp array as whole microseconds (floor), nulls as 0, in a numpy array."""
    mul, div = _PER_US[a.type.unit]
    v = a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
    return v * mul // div


# --- re-encoding one row group ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Reencoded:
    """A re-encoded row group, in the coordinates of the temporary file it was written to."""

    data: bytes
    start: int
    row_group: Struct
    blooms: tuple[bytes | None, ...]
    column_indexes: tuple[bytes | None, ...]
    offset_indexes: tuple[bytes | None, ...]


@dataclass(frozen=True, slots=True)
class _ChunkShape:
    """What a column chunk's pages show about how it was written."""

    dictionary: bool
    data_encodings: frozenset[int]
    page_types: frozenset[int]
    crc: bool


def _shape(pages: Sequence[Page]) -> _ChunkShape:
    data = [p for p in pages if p.header.is_data]
    enc = {p.header.encoding for p in data}
    norm = frozenset(_DICT if e == Encoding.PLAIN_DICTIONARY else e for e in enc if e is not None)
    return _ChunkShape(
        dictionary=any(p.header.type == PageType.DICTIONARY_PAGE for p in pages),
        data_encodings=norm,
        page_types=frozenset(p.header.type for p in data),
        crc=any(p.header.crc is not None for p in pages),
    )


def _canon(v: object) -> object:
    """A comparable form of a thrift value that ignores header-form choices."""
    if isinstance(v, Struct):
        return tuple(sorted((f.id, _canon(f.value)) for f in v.fields))
    if isinstance(v, ThriftList):
        et = TType.BOOL if v.elem_type == TType.BOOL_FALSE else v.elem_type
        return ("list", int(et), tuple(_canon(x) for x in v.items))
    return v


def _natural_schema(meta: FileMetaData) -> pa.Schema:
    """The Arrow schema pyarrow derives from the Parquet schema alone (no ``ARROW:schema``)."""
    fm = _with_list(meta.struct, FMD.ROW_GROUPS, [])
    fm = _set_int(fm, FMD.NUM_ROWS, 0).without(FMD.KEY_VALUE_METADATA)
    return pq.ParquetFile(pa.BufferReader(_wrap(b"", encode(fm)))).schema_arrow


def _bloom_ndv(num_bytes: int) -> int:
    """An NDV for which pyarrow sizes a bloom filter at ``num_bytes`` (with FPP 5%)."""
    bits_per_value = -8.0 / math.log(1.0 - _BLOOM_FPP ** (1.0 / 8.0))
    return max(1, int(num_bytes * 8 * 0.75 / bits_per_value))


def _reencode(
    meta: FileMetaData, k: int, edit: GroupEdit, source: _Source, base: int
) -> _Reencoded:
    rg = meta.row_groups[k]
    leaves = meta.leaves()
    cols = rg.columns
    if len(leaves) != len(cols):
        raise SpliceRefused(f"row group {k} has {len(cols)} chunks for {len(leaves)} columns")
    dotted = [".".join(p) for p, _, _, _ in leaves]
    if len(set(dotted)) != len(dotted):
        raise SpliceRefused(
            "two columns share a dotted path; pyarrow options cannot tell them apart"
        )

    compression: dict[str, str] = {}
    use_dictionary: list[str] = []
    column_encoding: dict[str, str] = {}
    statistics: list[str] = []
    blooms: dict[str, dict[str, Any]] = {}
    page_types: set[int] = set()
    crc = False
    page_index = False
    int96 = False
    decimal_as_int = False
    time_utc: set[bool] = set()
    shapes: list[_ChunkShape] = []
    for (path, elem, _, _), cc, name in zip(leaves, cols, dotted, strict=True):
        m = cc.meta_data
        if m.path_in_schema != path:
            raise SpliceRefused(f"chunk {m.path_in_schema} is out of schema order")
        codec = _CODEC_NAMES.get(m.codec)
        if codec is None:
            raise SpliceRefused(f"column {name!r}: pyarrow cannot write codec {m.codec}")
        compression[name] = codec
        shape = _shape(walk_pages(edit.data, base, chunk_range(cc)))
        shapes.append(shape)
        page_types |= shape.page_types
        crc |= shape.crc
        other = shape.data_encodings - {_DICT}
        if shape.dictionary or _DICT in shape.data_encodings:
            use_dictionary.append(name)
        elif len(other) > 1:
            raise SpliceRefused(f"column {name!r} mixes encodings {sorted(other)}")
        elif other and (enc := next(iter(other))) in _COLUMN_ENCODINGS:
            column_encoding[name] = _COLUMN_ENCODINGS[enc]
        if m.statistics is not None:
            statistics.append(name)
        if cc.column_index_offset is not None or cc.offset_index_offset is not None:
            page_index = True
        if m.bloom_filter_offset is not None:
            length = m.bloom_filter_length
            if length is None:
                ext = source.extent_at(m.bloom_filter_offset)
                hdr, at = read_bloom_filter_header(ext.data, m.bloom_filter_offset - ext.offset)
                length = at + ext.offset - m.bloom_filter_offset + hdr.num_bytes
            num_bytes = 1 << max(5, length.bit_length() - 1)
            blooms[name] = {"ndv": _bloom_ndv(num_bytes), "fpp": _BLOOM_FPP}
        if elem.type == PhysicalType.INT96:
            int96 = True
        logical = elem.logical_type
        if elem.type in (PhysicalType.INT32, PhysicalType.INT64) and (
            elem.converted_type == 5 or (logical is not None and logical.get(5) is not None)
        ):
            decimal_as_int = True
        if logical is not None and isinstance(t := logical.get(7), Struct):
            time_utc.add(t.get(1) is True)
    if len(page_types) != 1:
        raise SpliceRefused(f"row group {k} mixes data page types {sorted(page_types)}")
    if len(time_utc) > 1:
        raise SpliceRefused("TIME columns disagree on isAdjustedToUTC")

    natural = _natural_schema(meta)
    try:
        table = edit.keep.cast(natural)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError) as e:
        raise SpliceRefused(f"the remaining rows do not fit the file's schema: {e}") from e
    n = table.num_rows
    buf = io.BytesIO()
    try:
        with pq.ParquetWriter(
            buf,
            natural,
            version="2.6",
            use_dictionary=use_dictionary,
            compression=compression,
            write_statistics=statistics,
            use_deprecated_int96_timestamps=int96,
            column_encoding=column_encoding or None,
            data_page_version="2.0" if PageType.DATA_PAGE_V2 in page_types else "1.0",
            use_compliant_nested_type=False,
            store_schema=False,
            write_page_index=page_index,
            write_page_checksum=crc,
            store_decimal_as_integer=decimal_as_int,
            write_time_adjusted_to_utc=True in time_utc,
            bloom_filter_options=blooms or None,
        ) as writer:
            writer.write_table(table, row_group_size=max(n, 1))
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise SpliceRefused(f"pyarrow cannot re-encode row group {k}: {e}") from e
    data = buf.getvalue()
    tf = parse_tail(data, len(data))
    tmeta = tf.metadata
    _compare_schema(meta, tmeta)
    if len(tmeta.row_groups) != 1 or tmeta.row_groups[0].num_rows != n:
        raise SpliceRefused(f"re-encoding row group {k} did not give one group of {n} rows")
    trg = tmeta.row_groups[0]
    for (path, _, _, _), cc, tcc, shape in zip(leaves, cols, trg.columns, shapes, strict=True):
        _compare_chunk(
            ".".join(path), cc, tcc, shape, _shape(walk_pages(data, 0, chunk_range(tcc)))
        )
    trange = row_group_range(trg)
    b_list: list[bytes | None] = []
    ci_list: list[bytes | None] = []
    oi_list: list[bytes | None] = []
    for tcc in trg.columns:
        tm = tcc.meta_data
        bo, bl = tm.bloom_filter_offset, tm.bloom_filter_length
        b_list.append(None if bo is None or bl is None else data[bo : bo + bl])
        co, cl = tcc.column_index_offset, tcc.column_index_length
        ci_list.append(None if co is None or cl is None else data[co : co + cl])
        oo, ol = tcc.offset_index_offset, tcc.offset_index_length
        oi_list.append(None if oo is None or ol is None else data[oo : oo + ol])
    return _Reencoded(
        data[trange.start : trange.end],
        trange.start,
        trg.struct,
        tuple(b_list),
        tuple(ci_list),
        tuple(oi_list),
    )


_TIME_UNITS = {1: "ms", 2: "us", 3: "ns"}
_CONVERTED: dict[int, tuple[object, ...]] = {
    0: ("string",),
    1: ("map",),
    3: ("list",),
    4: ("enum",),
    6: ("date",),
    7: ("time", True, "ms"),
    8: ("time", True, "us"),
    9: ("timestamp", True, "ms"),
    10: ("timestamp", True, "us"),
    11: ("int", 8, False),
    12: ("int", 16, False),
    13: ("int", 32, False),
    14: ("int", 64, False),
    15: ("int", 8, True),
    16: ("int", 16, True),
    17: ("int", 32, True),
    18: ("int", 64, True),
    19: ("json",),
    20: ("bson",),
}
_LOGICAL_TAGS = {
    1: "string",
    2: "map",
    3: "list",
    4: "enum",
    6: "date",
    11: "null",
    12: "json",
    13: "bson",
    14: "uuid",
    15: "float16",
}


def _unit(s: object) -> str:
    if isinstance(s, Struct) and len(s.fields) == 1:
        return _TIME_UNITS.get(s.fields[0].id, "?")
    return "?"


def _meaning(e: SchemaElement) -> tuple[object, ...]:
    """What a schema element says about its values, however the writer annotated it.

    Two elements with equal meanings store the same bytes for the same values and order
    them (for statistics and column indexes) the same way: a legacy ``converted_type``
    and the equivalent ``logicalType`` are the same thing, and a plain ``INT32``/``INT64``
    is a signed integer of that width.
    """
    width = e.type_length if e.type == PhysicalType.FIXED_LEN_BYTE_ARRAY else None
    shape = (e.name, e.type, width, e.repetition_type, e.num_children)
    lt = e.logical_type
    meaning: tuple[object, ...] | None = None
    if lt is not None and len(lt.fields) == 1:
        f = lt.fields[0]
        v = f.value
        if f.id in _LOGICAL_TAGS:
            meaning = (_LOGICAL_TAGS[f.id],)
        elif f.id == 5 and isinstance(v, Struct):
            meaning = ("decimal", v.get(2), v.get(1))
        elif f.id in (7, 8) and isinstance(v, Struct):
            meaning = ("time" if f.id == 7 else "timestamp", v.get(1) is True, _unit(v.get(2)))
        elif f.id == 10 and isinstance(v, Struct):
            meaning = ("int", v.get(1), v.get(2) is True)
        else:
            meaning = ("logical", _canon(lt))
    elif lt is not None:
        meaning = ("logical", _canon(lt))
    elif e.converted_type == 5:
        meaning = ("decimal", e.precision, e.scale or 0)
    elif e.converted_type is not None:
        meaning = _CONVERTED.get(e.converted_type, ("converted", e.converted_type))
    elif e.type == PhysicalType.INT32:
        meaning = ("int", 32, True)
    elif e.type == PhysicalType.INT64:
        meaning = ("int", 64, True)
    return (*shape, meaning)


def _compare_schema(orig: FileMetaData, new: FileMetaData) -> None:
    a, b = orig.schema, new.schema
    if len(a) != len(b) or a[0].num_children != b[0].num_children:
        raise SpliceRefused("the re-encoded schema has a different shape")
    for x, y in zip(a[1:], b[1:], strict=True):
        if _meaning(x) != _meaning(y):
            raise SpliceRefused(
                f"re-encoding changes schema element {x.name!r}: {_meaning(x)} -> {_meaning(y)}"
            )


def _compare_chunk(
    name: str, cc: ColumnChunk, tcc: ColumnChunk, old: _ChunkShape, new: _ChunkShape
) -> None:
    m, t = cc.meta_data, tcc.meta_data
    if (m.type, m.path_in_schema, m.codec) != (t.type, t.path_in_schema, t.codec):
        raise SpliceRefused(f"column {name!r}: re-encoding changes type, path or codec")
    if old.dictionary != new.dictionary:
        raise SpliceRefused(f"column {name!r}: re-encoding changes dictionary use")
    allowed = set(old.data_encodings)
    if old.dictionary:
        allowed |= {_DICT, Encoding.PLAIN}
    if not new.data_encodings <= allowed:
        raise SpliceRefused(
            f"column {name!r}: re-encoding uses encodings {sorted(new.data_encodings)}, "
            f"the original {sorted(old.data_encodings)}"
        )
    if old.page_types != new.page_types:
        raise SpliceRefused(f"column {name!r}: re-encoding changes the data page version")
    if (m.bloom_filter_offset is None) != (t.bloom_filter_offset is None):
        raise SpliceRefused(f"column {name!r}: re-encoding changes bloom filter presence")
    if cc.offset_index_offset is not None and tcc.offset_index_offset is None:
        raise SpliceRefused(f"column {name!r}: re-encoding loses the offset index")


# --- the splice -------------------------------------------------------------------------
class _OffsetMap:
    """Maps offsets of kept byte ranges of the original to their place in the new file."""

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


def splice(
    footer: Footer,
    edits: Mapping[int, GroupEdit],
    fetched: Iterable[Extent],
    *,
    inline_below: int = COPY_RUN_MIN,
) -> SplicePlan:
    """Plan the new file in which the edited row groups keep only ``edit.keep``.

    Args:
        footer: The original file's footer (:func:`~lethe.parquet.footer.parse_tail`).
        edits: Row group index -> its original bytes and the rows that remain.
        fetched: Bytes of the original file already in memory. They must cover the offset
            indexes of the unedited groups that lie after the first edited one (their page
            offsets are rewritten) and the header of any bloom filter whose length the footer
            omits; the tail from :func:`~lethe.parquet.footer.index_region` (or just the
            offset indexes) to the end does. Unchanged bloom filters and column indexes
            become :class:`~lethe.parquet.segments.Copy` segments and are not read.
        inline_below: Runs of unchanged index structures at least this long (the smallest
            multipart part) are copies at the head of the new index region; shorter runs
            join the new bytes at its end (as new bytes when fetched, saving a second GET).

    Returns:
        The plan: segments of the new file, its footer and the fate of every group.

    Raises:
        SpliceRefused: The footer does not round-trip, the file is encrypted or uses
            something a splice cannot reproduce exactly (see the message), or needed bytes
            were not provided.
        InvalidRequest: An edit names a missing group, has the wrong number of bytes, or
            keeps more rows than the group has.
    """
    check_roundtrip(footer.raw)
    meta = footer.metadata
    if meta.encrypted:
        raise SpliceRefused("Parquet files with encrypted columns cannot be spliced")
    _check_known(meta.struct, "FileMetaData")
    groups = meta.row_groups
    ranges = []
    for g, rg in enumerate(groups):
        _check_known(rg.struct, "RowGroup")
        for cc in rg.columns:
            _check_known(cc.struct, "ColumnChunk")
            _check_known(cc.meta_data.struct, "ColumnMetaData")
        r = row_group_range(rg)
        if r.start < 4 or r.end > footer.start:
            raise SpliceRefused(f"row group {g} [{r.start}, {r.end}) lies outside the data area")
        ranges.append(r)
    for g, e in edits.items():
        if not 0 <= g < len(groups):
            raise InvalidRequest(f"no row group {g} (the file has {len(groups)})")
        if len(e.data) != ranges[g].length:
            raise InvalidRequest(f"row group {g} spans {ranges[g].length} bytes, got {len(e.data)}")
        if e.keep.num_rows > groups[g].num_rows:
            raise InvalidRequest(
                f"row group {g} has {groups[g].num_rows} rows, cannot keep {e.keep.num_rows}"
            )
    order = sorted(range(len(groups)), key=lambda g: ranges[g].start)
    for a, b in itertools.pairwise(order):
        if ranges[a].end > ranges[b].start:
            raise SpliceRefused(f"row groups {a} and {b} overlap")
    source = _Source(fetched)
    data_end = max((r.end for r in ranges), default=4)

    # Every index structure, with its exact length.
    structures: list[tuple[IndexStructure, int]] = []
    for s in index_structures(meta):
        length = s.length
        if length is None:
            ext = source.extent_at(s.offset)
            hdr, at = read_bloom_filter_header(ext.data, s.offset - ext.offset)
            length = at + ext.offset - s.offset + hdr.num_bytes
        r = ByteRange(s.offset, s.offset + length)
        if r.start < 4 or r.end > footer.start or length <= 0:
            raise SpliceRefused(f"{s.kind} of row group {s.row_group} lies outside the file")
        if any(r.overlaps(x) for x in ranges):
            raise SpliceRefused(f"{s.kind} of row group {s.row_group} overlaps row group data")
        structures.append((s, length))

    # Re-encode the edited groups.
    reencoded: dict[int, _Reencoded | None] = {}
    for g, e in sorted(edits.items()):
        reencoded[g] = _reencode(meta, g, e, source, ranges[g].start) if e.keep.num_rows else None

    # The data area: kept ranges and replaced groups. An edited group takes the bytes up to
    # the next group with it: writers such as polars put a copy of each chunk's
    # ColumnMetaData (statistics included) right after the chunk. Index structures in the
    # data area (arrow-rs puts bloom filters after each group) stay where they are, unless
    # they belong to an edited group (cut: they describe removed rows) or must be rewritten
    # (offset indexes whose pages move: moved to the new index region).
    following = {a: ranges[b].start for a, b in itertools.pairwise(order)}
    extents = [(ranges[g].start, following.get(g, data_end)) for g in reencoded]
    first_cut = min((a for a, _ in extents), default=footer.start)
    cuts: list[tuple[int, int, int | None]] = [  # (start, end, edited group or None)
        (ranges[g].start, following.get(g, data_end), g) for g in reencoded
    ]
    in_place: dict[tuple[int, int, str], int] = {}  # unedited structure -> original offset
    relocated: list[tuple[IndexStructure, int, bool]] = []  # (structure, length, rewrite)
    for st, n in structures:
        inside = any(a <= st.offset < b for a, b in extents)
        in_data = st.offset < data_end
        if st.row_group in reencoded:
            if in_data and not inside:
                cuts.append((st.offset, st.offset + n, None))
            continue
        rewrite = st.kind == "offset_index" and ranges[st.row_group].start > first_cut
        if in_data and not inside and not rewrite:
            in_place[(st.row_group, st.column, st.kind)] = st.offset
            continue
        if in_data and not inside:
            cuts.append((st.offset, st.offset + n, None))
        relocated.append((st, n, rewrite))
    cuts.sort()
    for (_, a_end, _), (b_start, _, _) in itertools.pairwise(cuts):
        if a_end > b_start:
            raise SpliceRefused("index structures overlap each other or row group data")
    segments: list[Segment] = [Copy(0, 4)]
    kept: list[tuple[int, int, int]] = []
    placed: dict[int, int] = {}  # edited group -> new start
    pos, out = 4, 4
    for start, end, cut_group in cuts:
        kept.append((pos, start, out))
        segments.append(Copy(pos, start))
        out += start - pos
        if cut_group is not None:
            rec = reencoded[cut_group]
            if rec is not None:
                placed[cut_group] = out
                segments.append(Bytes(rec.data))
                out += len(rec.data)
        pos = end
    kept.append((pos, data_end, out))
    segments.append(Copy(pos, data_end))
    out += data_end - pos
    move = _OffsetMap(kept)

    # The new row groups, and the content of the new index region: unchanged structures
    # are copies of the original's; edited groups' come from the re-encoding.
    kind_rank = {"bloom_filter": 0, "column_index": 1, "offset_index": 2}
    new_index: dict[int, int] = {}
    for g in range(len(groups)):
        if not (g in reencoded and reencoded[g] is None):
            new_index[g] = len(new_index)
    entries: list[tuple[tuple[int, int, int, int], tuple[int, int, str], Segment]] = []
    for st, n, rewrite in relocated:
        ng = new_index[st.row_group]
        content: Segment = Copy(st.offset, st.offset + n)
        if rewrite:
            raw = source.read(st.offset, n)
            shifted = _shift_offset_index(raw, move)
            if shifted != raw:
                content = Bytes(shifted)
        key = (st.offset, kind_rank[st.kind], ng, st.column)
        entries.append((key, (ng, st.column, st.kind), content))
    original_at: dict[tuple[int, int, str], int] = {
        (st.row_group, st.column, st.kind): st.offset for st, _ in structures
    }

    new_groups: list[Struct] = []
    fates: list[GroupFate] = []
    for g, rg in enumerate(groups):
        if g not in new_index:
            fates.append(GroupFate(g, None, rg.num_rows, 0, True))
            continue
        ng = new_index[g]
        cols: list[Struct] = []
        if g in reencoded:
            rec = reencoded[g]
            assert rec is not None
            shift = placed[g] - rec.start

            def tmove(p: int, shift: int = shift, rec: _Reencoded = rec) -> int | None:
                return p + shift if rec.start <= p <= rec.start + len(rec.data) else None

            gs = rec.row_group
            for j, tcc in enumerate(ColumnChunk(x) for x in _structs(gs, RG.COLUMNS)):
                cols.append(_shift_column(tcc.struct, tmove))
                for kind, raw_or_none in (
                    ("bloom_filter", rec.blooms[j]),
                    ("column_index", rec.column_indexes[j]),
                    ("offset_index", rec.offset_indexes[j]),
                ):
                    if raw_or_none is None:
                        continue
                    data = raw_or_none
                    if kind == "offset_index":
                        data = _shift_offset_index(data, tmove)
                    at = original_at.get((g, j, kind), footer.start)
                    key = (at, kind_rank[kind], ng, j)
                    entries.append((key, (ng, j, kind), Bytes(data)))
            gs = _with_list(gs, RG.COLUMNS, cols)
            orig_sort = rg.struct.field(RG.SORTING_COLUMNS)
            gs = gs.without(RG.SORTING_COLUMNS)
            if orig_sort is not None:
                gs = gs.set(orig_sort.id, orig_sort.type, orig_sort.value)
            gs = gs.without(RG.FILE_OFFSET)
            if rg.file_offset is not None:
                gs = _set_int(gs, RG.FILE_OFFSET, placed[g])
            rows_after = edits[g].keep.num_rows
        else:
            new_start = move(ranges[g].start)
            assert new_start is not None
            cols = [_shift_column(cc.struct, move) for cc in rg.columns]
            gs = _with_list(rg.struct, RG.COLUMNS, cols)
            if (fo := rg.file_offset) is not None:
                moved = move(fo)
                gs = _set_int(gs, RG.FILE_OFFSET, new_start if moved is None else moved)
            rows_after = rg.num_rows
        if rg.ordinal is not None:
            gs = _set_int(gs, RG.ORDINAL, ng, TType.I16)
        else:
            gs = gs.without(RG.ORDINAL)
        new_groups.append(gs)
        fates.append(GroupFate(g, ng, rg.num_rows, rows_after, g in reencoded))

    # Lay out the index region and point every chunk at its structures.
    region_start = out
    locations: dict[tuple[int, int, str], tuple[int, int]] = {}
    for (og, j, kind), at in in_place.items():
        n = next(n for st, n in structures if (st.row_group, st.column, st.kind) == (og, j, kind))
        moved_at = move(at)
        if moved_at is None:
            raise SpliceRefused(f"{kind} at {at} does not lie in a moved byte range")
        locations[(new_index[og], j, kind)] = (moved_at, n)
    for _, ident, content in _arrange_region(entries, source, inline_below):
        locations[ident] = (out, content.length)
        segments.append(content)
        out += content.length
    region_end = out
    final_groups: list[Struct] = []
    for ng, gs in enumerate(new_groups):
        cols = []
        for j, c in enumerate(_structs(gs, RG.COLUMNS)):
            c = c.without(
                CC.COLUMN_INDEX_OFFSET,
                CC.COLUMN_INDEX_LENGTH,
                CC.OFFSET_INDEX_OFFSET,
                CC.OFFSET_INDEX_LENGTH,
            )
            md = _sub(c, CC.META_DATA)
            had_bloom_length = md.get(CMD.BLOOM_FILTER_LENGTH) is not None
            md = md.without(CMD.BLOOM_FILTER_OFFSET, CMD.BLOOM_FILTER_LENGTH)
            if (loc := locations.get((ng, j, "bloom_filter"))) is not None:
                md = md.set(CMD.BLOOM_FILTER_OFFSET, TType.I64, loc[0])
                if had_bloom_length:
                    md = md.set(CMD.BLOOM_FILTER_LENGTH, TType.I32, loc[1])
            c = c.set(CC.META_DATA, TType.STRUCT, md)
            if (loc := locations.get((ng, j, "offset_index"))) is not None:
                c = c.set(CC.OFFSET_INDEX_OFFSET, TType.I64, loc[0])
                c = c.set(CC.OFFSET_INDEX_LENGTH, TType.I32, loc[1])
            if (loc := locations.get((ng, j, "column_index"))) is not None:
                c = c.set(CC.COLUMN_INDEX_OFFSET, TType.I64, loc[0])
                c = c.set(CC.COLUMN_INDEX_LENGTH, TType.I32, loc[1])
            cols.append(c)
        final_groups.append(_with_list(gs, RG.COLUMNS, cols))

    fm = _with_list(meta.struct, FMD.ROW_GROUPS, final_groups)
    fm = _set_int(fm, FMD.NUM_ROWS, sum(f.rows_after for f in fates))
    raw_footer = encode(fm)
    segments.append(Bytes(raw_footer + _struct.pack("<I", len(raw_footer)) + MAGIC))
    segs = normalize(segments)
    if segs and segs[0] == Copy(0, 4):
        segs = normalize([Bytes(MAGIC), *segs[1:]])
    size = region_end + len(raw_footer) + 8
    new_footer = Footer(FileMetaData(fm), raw_footer, region_end, size)
    return SplicePlan(segs, new_footer, tuple(fates), ByteRange(region_start, region_end))


def _arrange_region(
    entries: list[tuple[tuple[int, int, int, int], tuple[int, int, str], Segment]],
    source: _Source,
    below: int,
) -> list[tuple[tuple[int, int, int, int], tuple[int, int, str], Segment]]:
    """Order the new index region for a cheap multipart upload.

    Unchanged structures, in the original's order, form runs of contiguous source bytes.
    Runs of at least ``below`` bytes (a multipart part) come first, as copies; everything
    else follows, as one stretch of new bytes that ends up with the footer in the last part:
    the edited groups' structures, rewritten offset indexes, and short runs (as new bytes
    when already fetched, else as copies the planner will download).
    """
    copies = sorted((e for e in entries if isinstance(e[2], Copy)), key=lambda e: e[0])
    rest = [e for e in entries if not isinstance(e[2], Copy)]
    head: list[tuple[tuple[int, int, int, int], tuple[int, int, str], Segment]] = []
    i = 0
    while i < len(copies):
        j = i
        while j + 1 < len(copies):
            a, b = copies[j][2], copies[j + 1][2]
            assert isinstance(a, Copy) and isinstance(b, Copy)
            if a.end != b.start:
                break
            j += 1
        run = copies[i : j + 1]
        first, last = run[0][2], run[-1][2]
        assert isinstance(first, Copy) and isinstance(last, Copy)
        if last.end - first.start >= below:
            head.extend(run)
        elif source.has(first.start, last.end - first.start):
            for key, ident, seg in run:
                assert isinstance(seg, Copy)
                rest.append((key, ident, Bytes(source.read(seg.start, seg.length))))
        else:
            rest.extend(run)
        i = j + 1
    rest.sort(key=lambda e: e[0])
    return head + rest


def needed_ranges(footer: Footer, edited: Iterable[int]) -> tuple[ByteRange, ...]:
    """The bytes of the original, besides the edited groups, that :func:`splice` must read.

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


def _structs(s: Struct, fid: int) -> list[Struct]:
    v = s.get(fid)
    if not isinstance(v, ThriftList):
        raise InvalidParquet(f"field {fid} is not a list")
    return [x for x in v.items if isinstance(x, Struct)]
