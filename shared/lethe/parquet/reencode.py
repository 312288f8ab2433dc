"""Re-encoding a row group's remaining rows the way its writer encoded them (DESIGN §4.2).

Three steps, each a pure function: :func:`write_spec` reads, from the original chunks'
metadata and pages, the codec, encodings, dictionary use, data page version, statistics,
page index, bloom filters and checksums, as pyarrow writer options; :func:`write_rows`
writes the rows with them into a temporary one-group file; :func:`read_back` compares that
file's schema elements and chunks with the original (refusing on any difference a reader
could see, such as INT96 coming back as INT64) and takes out the group's bytes, metadata
and index structures as a :class:`GroupRewrite`. :func:`reencode_group` composes them.

A :class:`GroupRewrite` is what the rest of a splice consumes: the group's new bytes and
metadata in the coordinates they were written in. Its ``body`` is a sequence of segments,
so that a rewrite may also keep runs of the original's pages (copies) between new ones.

>>> import io, pyarrow as pa, pyarrow.parquet as pq
>>> from lethe.parquet.footer import parse_tail, row_group_range
>>> buf = io.BytesIO()
>>> pq.write_table(pa.table({"id": list(range(10))}), buf, row_group_size=5, compression="zstd")
>>> data = buf.getvalue()
>>> meta = parse_tail(data, len(data)).metadata
>>> r = row_group_range(meta.row_groups[1])
>>> spec = write_spec(meta, 1, data[r.start : r.end], r.start, {})
>>> dict(spec.compression), spec.use_dictionary, spec.data_page_version
({'id': 'ZSTD'}, ('id',), '1.0')
>>> rewrite = reencode_group(meta, 1, pa.table({"id": [5, 9]}), data[r.start : r.end], r.start, {})
>>> rewrite.num_rows, rewrite.start, len(rewrite.body)
(2, 4, 1)
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.errors import SpliceRefused
from lethe.parquet.bloom import BLOOM_FPP, bloom_filter, bloom_ndv
from lethe.parquet.decode import wrap_file
from lethe.parquet.enums import CC, CMD, FMD, RG, Codec, Encoding, PageType, PhysicalType
from lethe.parquet.footer import Page, chunk_range, parse_tail, row_group_range, walk_pages
from lethe.parquet.model import ColumnChunk, ColumnMetaData, FileMetaData, SchemaElement
from lethe.parquet.offsets import set_int, struct_list, substruct, with_list
from lethe.parquet.segments import Bytes, Segment
from lethe.parquet.thrift import Struct, ThriftList, TType, encode

__all__ = [
    "ChunkShape",
    "Granularity",
    "GroupRewrite",
    "WriteSpec",
    "check_column",
    "chunk_shape",
    "column_spec",
    "compare_chunk",
    "natural_schema",
    "read_back",
    "reencode_group",
    "write_rows",
    "write_spec",
]

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
Granularity: TypeAlias = Literal["page", "row_group"]
"""How much of an edited row group was rewritten."""


# --- what the original chunks show --------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ChunkShape:
    """What a column chunk's pages show about how it was written."""

    dictionary: bool
    data_encodings: frozenset[int]
    page_types: frozenset[int]
    crc: bool


def chunk_shape(pages: Sequence[Page]) -> ChunkShape:
    """What the pages of a chunk show about how it was written."""
    data = [p for p in pages if p.header.is_data]
    enc = {p.header.encoding for p in data}
    norm = frozenset(_DICT if e == Encoding.PLAIN_DICTIONARY else e for e in enc if e is not None)
    return ChunkShape(
        dictionary=any(p.header.type == PageType.DICTIONARY_PAGE for p in pages),
        data_encodings=norm,
        page_types=frozenset(p.header.type for p in data),
        crc=any(p.header.crc is not None for p in pages),
    )


@dataclass(frozen=True, slots=True)
class WriteSpec:
    """How a row group's chunks were written, as pyarrow writer options.

    Attributes:
        compression: Codec per column (dotted path).
        use_dictionary: Columns with a dictionary page or dictionary-encoded pages.
        column_encoding: The one non-dictionary encoding of each other column, if not PLAIN
            by default.
        statistics: Columns whose chunks have statistics.
        blooms: Bloom filter options per column (an NDV that gives the original's size).
        page_types: The data page types of the group (exactly one).
        crc: Whether pages carry checksums.
        page_index: Whether chunks have a column or offset index.
        int96: Whether timestamps are stored as INT96.
        decimal_as_int: Whether decimals are stored as INT32/INT64.
        time_utc: The ``isAdjustedToUTC`` of TIME columns (at most one value).
        shapes: Each chunk's shape, in leaf order (the re-encoding is compared with them).
        bool_blooms: Length of the bloom filter of each BOOLEAN or flat chunk that has one, by
            leaf index: built apart at that size (:mod:`lethe.parquet.bloom`; pyarrow writes
            none for BOOLEAN and sizes the others by the distinct values it sees).
    """

    compression: Mapping[str, str]
    use_dictionary: tuple[str, ...]
    column_encoding: Mapping[str, str]
    statistics: tuple[str, ...]
    blooms: Mapping[str, Mapping[str, Any]]
    page_types: frozenset[int]
    crc: bool
    page_index: bool
    int96: bool
    decimal_as_int: bool
    time_utc: frozenset[bool]
    shapes: tuple[ChunkShape, ...]
    bool_blooms: Mapping[int, int] = field(default_factory=dict)

    @property
    def data_page_version(self) -> str:
        """pyarrow's name of the data page version."""
        return "2.0" if PageType.DATA_PAGE_V2 in self.page_types else "1.0"

    def writer_options(self) -> dict[str, Any]:
        """Keyword arguments of ``pyarrow.parquet.ParquetWriter`` (schema and sink aside)."""
        return {
            "version": "2.6",
            "use_dictionary": list(self.use_dictionary),
            "compression": dict(self.compression),
            "write_statistics": list(self.statistics),
            "use_deprecated_int96_timestamps": self.int96,
            "column_encoding": dict(self.column_encoding) or None,
            "data_page_version": self.data_page_version,
            "use_compliant_nested_type": False,
            "store_schema": False,
            "write_page_index": self.page_index,
            "write_page_checksum": self.crc,
            "store_decimal_as_integer": self.decimal_as_int,
            "write_time_adjusted_to_utc": True in self.time_utc,
            "bloom_filter_options": {k: dict(v) for k, v in self.blooms.items()} or None,
        }


def _bloom_options(length: int) -> dict[str, Any]:
    """pyarrow's options for a bloom filter of ``length`` bytes (header included)."""
    return {"ndv": bloom_ndv(1 << max(5, length.bit_length() - 1)), "fpp": BLOOM_FPP}


def _time_utc(elem: SchemaElement) -> set[bool]:
    """The ``isAdjustedToUTC`` of a TIME column, nothing for another."""
    logical = elem.logical_type
    if logical is not None and isinstance(t := logical.get(7), Struct):
        return {t.get(1) is True}
    return set()


def _dotted_leaves(meta: FileMetaData, k: int) -> list[str]:
    leaves = meta.leaves()
    cols = meta.row_groups[k].columns
    if len(leaves) != len(cols):
        raise SpliceRefused(f"row group {k} has {len(cols)} chunks for {len(leaves)} columns")
    dotted = [".".join(p) for p, _, _, _ in leaves]
    if len(set(dotted)) != len(dotted):
        raise SpliceRefused(
            "two columns share a dotted path; pyarrow options cannot tell them apart"
        )
    return dotted


def _codec(m: ColumnMetaData, path: tuple[str, ...], name: str) -> str:
    """The pyarrow name of chunk ``m``'s codec, the chunk checked to be column ``path``."""
    if m.path_in_schema != path:
        raise SpliceRefused(f"chunk {m.path_in_schema} is out of schema order")
    codec = _CODEC_NAMES.get(m.codec)
    if codec is None:
        raise SpliceRefused(f"column {name!r}: pyarrow cannot write codec {m.codec}")
    return codec


def write_spec(
    meta: FileMetaData, k: int, data: bytes, base: int, bloom_bytes: Mapping[int, int]
) -> WriteSpec:
    """How group ``k`` was written, from its metadata and page headers.

    Args:
        meta: The file's footer.
        k: The group.
        data: Bytes of the file from offset ``base`` covering the group's chunks.
        base: File offset of ``data[0]``.
        bloom_bytes: Length of each column's bloom filter (by leaf index), header included.

    Raises:
        SpliceRefused: Something pyarrow cannot reproduce: chunks out of schema order, two
            columns with one dotted path, a codec it cannot write, a column mixing
            non-dictionary encodings, mixed data page versions, TIME columns disagreeing on
            UTC adjustment.
    """
    dotted = _dotted_leaves(meta, k)
    compression: dict[str, str] = {}
    use_dictionary: list[str] = []
    column_encoding: dict[str, str] = {}
    statistics: list[str] = []
    blooms: dict[str, dict[str, Any]] = {}
    bool_blooms: dict[int, int] = {}
    page_types: set[int] = set()
    crc = page_index = int96 = decimal_as_int = False
    time_utc: set[bool] = set()
    shapes: list[ChunkShape] = []
    columns = meta.row_groups[k].columns
    for j, ((path, elem, _, _), cc, name) in enumerate(
        zip(meta.leaves(), columns, dotted, strict=True)
    ):
        m = cc.meta_data
        compression[name] = _codec(m, path, name)
        shape = chunk_shape(walk_pages(data, base, chunk_range(cc)))
        shapes.append(shape)
        page_types |= shape.page_types
        crc |= shape.crc
        dictionary, encoding = _encoding(name, shape)
        if dictionary:
            use_dictionary.append(name)
        elif encoding is not None:
            column_encoding[name] = encoding
        if m.statistics is not None:
            statistics.append(name)
        if cc.column_index_offset is not None or cc.offset_index_offset is not None:
            page_index = True
        if m.bloom_filter_offset is not None:
            if elem.type != PhysicalType.BOOLEAN:
                blooms[name] = _bloom_options(bloom_bytes[j])
            if elem.type == PhysicalType.BOOLEAN or len(path) == 1:
                bool_blooms[j] = bloom_bytes[j]  # rebuilt at its size (issue 37 item 2)
        int96 |= elem.type == PhysicalType.INT96
        decimal_as_int |= _decimal_as_int(elem)
        time_utc |= _time_utc(elem)
    if len(page_types) != 1:
        raise SpliceRefused(f"row group {k} mixes data page types {sorted(page_types)}")
    if len(time_utc) > 1:
        raise SpliceRefused("TIME columns disagree on isAdjustedToUTC")
    return WriteSpec(
        compression,
        tuple(use_dictionary),
        column_encoding,
        tuple(statistics),
        blooms,
        frozenset(page_types),
        crc,
        page_index,
        int96,
        decimal_as_int,
        frozenset(time_utc),
        tuple(shapes),
        bool_blooms,
    )


def column_spec(
    meta: FileMetaData, k: int, j: int, pages: Sequence[Page], bloom_bytes: int | None
) -> WriteSpec:
    """How chunk ``j`` of group ``k`` was written, from its metadata and the given pages
    (all of them, or the data pages to re-encode: then ``dictionary`` reflects those only),
    as the options of a one-column writer.

    Raises:
        SpliceRefused: See :func:`write_spec`.
    """
    path, elem, _, _ = meta.leaves()[j]
    name = ".".join(path)
    cc = meta.row_groups[k].columns[j]
    m = cc.meta_data
    codec = _codec(m, path, name)
    shape = chunk_shape(pages)
    if len(shape.page_types) != 1:
        raise SpliceRefused(f"column {name!r} mixes data page types")
    dictionary, encoding = _encoding(name, shape)
    blooms: dict[str, dict[str, Any]] = {}
    if m.bloom_filter_offset is not None and bloom_bytes is not None:
        blooms[name] = _bloom_options(bloom_bytes)
    utc = frozenset(_time_utc(elem))
    return WriteSpec(
        {name: codec},
        (name,) if dictionary else (),
        {name: encoding} if not dictionary and encoding is not None else {},
        (name,) if m.statistics is not None else (),
        blooms,
        shape.page_types,
        shape.crc,
        cc.column_index_offset is not None or cc.offset_index_offset is not None,
        elem.type == PhysicalType.INT96,
        _decimal_as_int(elem),
        utc,
        (shape,),
    )


def check_column(meta: FileMetaData, j: int, tmeta: FileMetaData) -> None:
    """Check that a one-column file written for leaf ``j`` stores it as the original does.

    Raises:
        SpliceRefused: The schema element differs in a way a reader would see.
    """
    a, b = meta.leaves()[j][1], tmeta.leaves()[0][1]
    if _meaning(a) != _meaning(b):
        raise SpliceRefused(
            f"re-encoding changes schema element {a.name!r}: {_meaning(a)} -> {_meaning(b)}"
        )


def compare_chunk(
    name: str, cc: ColumnChunk, tcc: ColumnChunk, old: Sequence[Page], new: Sequence[Page]
) -> None:
    """:func:`_compare_chunk` on the chunks' pages (both complete)."""
    _compare_chunk(name, cc, tcc, chunk_shape(old), chunk_shape(new))


def _encoding(name: str, shape: ChunkShape) -> tuple[bool, str | None]:
    """Whether a chunk uses a dictionary, else its one other encoding as pyarrow names it
    (None for pyarrow's default).

    Raises:
        SpliceRefused: The chunk mixes non-dictionary encodings.
    """
    other = shape.data_encodings - {_DICT}
    if shape.dictionary or _DICT in shape.data_encodings:
        return True, None
    if len(other) > 1:
        raise SpliceRefused(f"column {name!r} mixes encodings {sorted(other)}")
    if other and (enc := next(iter(other))) in _COLUMN_ENCODINGS:
        return False, _COLUMN_ENCODINGS[enc]
    return False, None


def _decimal_as_int(elem: SchemaElement) -> bool:
    """Whether a leaf is a decimal stored as INT32/INT64."""
    logical = elem.logical_type
    return elem.type in (PhysicalType.INT32, PhysicalType.INT64) and (
        elem.converted_type == 5 or (logical is not None and logical.get(5) is not None)
    )


def natural_schema(meta: FileMetaData) -> pa.Schema:
    """The Arrow schema pyarrow derives from the Parquet schema alone (no ``ARROW:schema``)."""
    fm = with_list(meta.struct, FMD.ROW_GROUPS, [])
    fm = set_int(fm, FMD.NUM_ROWS, 0).without(FMD.KEY_VALUE_METADATA)
    return pq.ParquetFile(pa.BufferReader(wrap_file(b"", encode(fm)))).schema_arrow


# --- writing and reading back -------------------------------------------------------------
def write_rows(spec: WriteSpec, schema: pa.Schema, table: pa.Table, k: int) -> bytes:
    """A Parquet file of one row group holding ``table`` (already cast to ``schema``),
    written as ``spec`` says.

    Raises:
        SpliceRefused: pyarrow refuses.
    """
    buf = io.BytesIO()
    try:
        with pq.ParquetWriter(buf, schema, **spec.writer_options()) as writer:
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise SpliceRefused(f"pyarrow cannot re-encode row group {k}: {e}") from e
    return buf.getvalue()


@dataclass(frozen=True, slots=True)
class GroupRewrite:
    """A row group's replacement, in the coordinates its metadata was written in.

    Attributes:
        body: The group's bytes, in order, as segments: new bytes (and, for a rewrite that
            keeps some of the original's pages, copies of them).
        start: Offset of the body's first byte in the coordinates of ``row_group`` and of
            ``offset_indexes`` (for a re-encoding, its place in the temporary file).
        num_rows: Rows of the group.
        row_group: Its RowGroup struct; references to index structures are replaced when
            the new index region is laid out.
        blooms: Each column's serialized bloom filter, or None.
        column_indexes: Each column's serialized ColumnIndex, or None.
        offset_indexes: Each column's serialized OffsetIndex (absolute offsets in the same
            coordinates as ``row_group``), or None.
        level: ``"row_group"`` for a re-encoding of the whole group, ``"page"`` for a
            rewrite that keeps the original's unchanged pages
            (:func:`~lethe.parquet.partial.rewrite_pages`).
        reason: Why a re-encoding is not page-level, or which chunks of a page-level
            rewrite were re-encoded whole; None when there is nothing to say.
        fallbacks: The same, one entry per fallback (the group's, or each whole chunk's).
    """

    body: tuple[Segment, ...]
    start: int
    num_rows: int
    row_group: Struct
    blooms: tuple[bytes | None, ...]
    column_indexes: tuple[bytes | None, ...]
    offset_indexes: tuple[bytes | None, ...]
    level: Granularity = "row_group"
    reason: str | None = None
    fallbacks: tuple[str, ...] = ()

    @property
    def length(self) -> int:
        """Bytes of the body."""
        return sum(s.length for s in self.body)


def _piece(data: bytes, offset: int | None, length: int | None) -> bytes | None:
    return None if offset is None or length is None else data[offset : offset + length]


def read_back(meta: FileMetaData, k: int, spec: WriteSpec, data: bytes, n: int) -> GroupRewrite:
    """Check the file :func:`write_rows` wrote for group ``k`` against the original and take
    out the group.

    Raises:
        SpliceRefused: The schema elements or a chunk differ from the original in a way a
            reader would see, or the file does not hold one group of ``n`` rows.
    """
    tmeta = parse_tail(data, len(data)).metadata
    _compare_schema(meta, tmeta)
    if len(tmeta.row_groups) != 1 or tmeta.row_groups[0].num_rows != n:
        raise SpliceRefused(f"re-encoding row group {k} did not give one group of {n} rows")
    trg = tmeta.row_groups[0]
    for j, ((path, _, _, _), cc, tcc, shape) in enumerate(
        zip(meta.leaves(), meta.row_groups[k].columns, trg.columns, spec.shapes, strict=True)
    ):
        new = chunk_shape(walk_pages(data, 0, chunk_range(tcc)))
        _compare_chunk(".".join(path), cc, tcc, shape, new, bloom_apart=j in spec.bool_blooms)
    trange = row_group_range(trg)
    cols = trg.columns
    return GroupRewrite(
        (Bytes(data[trange.start : trange.end]),),
        trange.start,
        n,
        trg.struct,
        tuple(
            _piece(data, c.meta_data.bloom_filter_offset, c.meta_data.bloom_filter_length)
            for c in cols
        ),
        tuple(_piece(data, c.column_index_offset, c.column_index_length) for c in cols),
        tuple(_piece(data, c.offset_index_offset, c.offset_index_length) for c in cols),
    )


def reencode_group(
    meta: FileMetaData,
    k: int,
    keep: pa.Table,
    data: bytes,
    base: int,
    bloom_bytes: Mapping[int, int],
) -> GroupRewrite:
    """Group ``k`` re-encoded with only the rows ``keep``, as its writer encoded it.

    Args:
        meta: The file's footer.
        k: The group.
        keep: The rows that remain.
        data: The group's original bytes.
        base: File offset of ``data[0]``.
        bloom_bytes: Length of each column's bloom filter (by leaf index), header included.

    Raises:
        SpliceRefused: See :func:`write_spec`, :func:`write_rows` and :func:`read_back`; or
            the rows do not fit the file's schema.
    """
    spec = write_spec(meta, k, data, base, bloom_bytes)
    natural = natural_schema(meta)
    try:
        table = keep.cast(natural)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError, TypeError) as e:
        raise SpliceRefused(f"the remaining rows do not fit the file's schema: {e}") from e
    rec = read_back(meta, k, spec, write_rows(spec, natural, table, k), table.num_rows)
    return _with_bool_blooms(meta, k, spec, table, rec)


def _with_bool_blooms(
    meta: FileMetaData, k: int, spec: WriteSpec, table: pa.Table, rec: GroupRewrite
) -> GroupRewrite:
    """``rec`` with the bloom filters of its BOOLEAN chunks and flat columns rebuilt at the
    original's size (see :mod:`lethe.parquet.bloom`; pyarrow sizes a filter by the distinct
    values it sees), referenced from their chunks as the original's were. A flat column's
    filter that cannot be rebuilt so keeps pyarrow's.

    Raises:
        SpliceRefused: A nested BOOLEAN column has one, or a BOOLEAN filter's size has no
            common header and bitset.
    """
    if not spec.bool_blooms:
        return rec
    blooms = list(rec.blooms)
    cols = struct_list(rec.row_group, RG.COLUMNS)
    leaves = meta.leaves()
    for j, size in spec.bool_blooms.items():
        path, elem = leaves[j][0], leaves[j][1]
        boolean = elem.type == PhysicalType.BOOLEAN
        if len(path) != 1:
            raise SpliceRefused(f"nested BOOLEAN column {'.'.join(path)!r} has a bloom filter")
        try:
            raw = bloom_filter(
                table.column(path[0]),
                size,
                PhysicalType.BOOLEAN if elem.type is None else elem.type,
                elem.type_length,
                spec.writer_options(),
            )
        except SpliceRefused:
            if boolean:
                raise
            raw = None
        if raw is None and not boolean:
            continue  # pyarrow's filter stays
        if raw is None:
            raise SpliceRefused(f"column {path[0]!r}: a rebuilt bloom filter differs in size")
        blooms[j] = raw
        md = substruct(cols[j], CC.META_DATA).set(CMD.BLOOM_FILTER_OFFSET, TType.I64, 0)
        if meta.row_groups[k].columns[j].meta_data.bloom_filter_length is not None:
            md = md.set(CMD.BLOOM_FILTER_LENGTH, TType.I32, len(raw))
        cols[j] = cols[j].set(CC.META_DATA, TType.STRUCT, md)
    return replace(rec, row_group=with_list(rec.row_group, RG.COLUMNS, cols), blooms=tuple(blooms))


# --- comparing the re-encoding with the original ------------------------------------------
def _canon(v: object) -> object:
    """A comparable form of a thrift value that ignores header-form choices."""
    if isinstance(v, Struct):
        return tuple(sorted((f.id, _canon(f.value)) for f in v.fields))
    if isinstance(v, ThriftList):
        et = TType.BOOL if v.elem_type == TType.BOOL_FALSE else v.elem_type
        return ("list", int(et), tuple(_canon(x) for x in v.items))
    return v


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
    name: str,
    cc: ColumnChunk,
    tcc: ColumnChunk,
    old: ChunkShape,
    new: ChunkShape,
    *,
    bloom_apart: bool = False,
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
    if not bloom_apart and (m.bloom_filter_offset is None) != (t.bloom_filter_offset is None):
        raise SpliceRefused(f"column {name!r}: re-encoding changes bloom filter presence")
    if cc.offset_index_offset is not None and tcc.offset_index_offset is None:
        raise SpliceRefused(f"column {name!r}: re-encoding loses the offset index")
