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
from lethe.parquet.fidelity import DICT, ChunkShape, chunk_shape, compare_schema, compare_shapes
from lethe.parquet.footer import Page, chunk_range, parse_tail, row_group_range, walk_pages
from lethe.parquet.model import ColumnMetaData, FileMetaData, SchemaElement
from lethe.parquet.offsets import set_int, struct_list, substruct, with_list
from lethe.parquet.segments import Bytes, Segment
from lethe.parquet.thrift import Struct, TType, encode

__all__ = [
    "Granularity",
    "GroupRewrite",
    "WriteSpec",
    "column_spec",
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
Granularity: TypeAlias = Literal["page", "row_group"]
"""How much of an edited row group was rewritten."""


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
    _dotted_leaves(meta, k)
    leaves = meta.leaves()
    specs: list[WriteSpec] = []
    bool_blooms: dict[int, int] = {}
    for j, cc in enumerate(meta.row_groups[k].columns):
        shape = chunk_shape(walk_pages(data, base, chunk_range(cc)))
        path, elem = leaves[j][0], leaves[j][1]
        boolean = elem.type == PhysicalType.BOOLEAN
        has_bloom = cc.meta_data.bloom_filter_offset is not None
        specs.append(_spec(meta, k, j, shape, bloom_bytes[j] if has_bloom else None, boolean))
        if has_bloom and (boolean or len(path) == 1):
            bool_blooms[j] = bloom_bytes[j]  # rebuilt at its size (issue 37 item 2)
    spec = _merged(specs, bool_blooms)
    if len(spec.page_types) != 1:
        raise SpliceRefused(f"row group {k} mixes data page types {sorted(spec.page_types)}")
    if len(spec.time_utc) > 1:
        raise SpliceRefused("TIME columns disagree on isAdjustedToUTC")
    return spec


def column_spec(
    meta: FileMetaData, k: int, j: int, pages: Sequence[Page], bloom_bytes: int | None
) -> WriteSpec:
    """How chunk ``j`` of group ``k`` was written, from its metadata and the given pages
    (all of them, or the data pages to re-encode: then ``dictionary`` reflects those only),
    as the options of a one-column writer.

    Raises:
        SpliceRefused: See :func:`write_spec`.
    """
    shape = chunk_shape(pages)
    if len(shape.page_types) != 1:
        raise SpliceRefused(f"column {'.'.join(meta.leaves()[j][0])!r} mixes data page types")
    return _spec(meta, k, j, shape, bloom_bytes, False)


def _spec(
    meta: FileMetaData, k: int, j: int, shape: ChunkShape, bloom_bytes: int | None, apart: bool
) -> WriteSpec:
    """Chunk ``j`` of group ``k``, whose pages show ``shape``, as the options of a
    one-column writer: a bloom filter of ``bloom_bytes`` (none when None or built ``apart``).

    Raises:
        SpliceRefused: See :func:`write_spec`.
    """
    path, elem, _, _ = meta.leaves()[j]
    name = ".".join(path)
    cc = meta.row_groups[k].columns[j]
    m = cc.meta_data
    codec = _codec(m, path, name)
    dictionary, encoding = _encoding(name, shape)
    return WriteSpec(
        {name: codec},
        (name,) if dictionary else (),
        {name: encoding} if not dictionary and encoding is not None else {},
        (name,) if m.statistics is not None else (),
        {name: _bloom_options(bloom_bytes)}
        if bloom_bytes is not None and not apart and m.bloom_filter_offset is not None
        else {},
        shape.page_types,
        shape.crc,
        cc.column_index_offset is not None or cc.offset_index_offset is not None,
        elem.type == PhysicalType.INT96,
        _decimal_as_int(elem),
        frozenset(_time_utc(elem)),
        (shape,),
    )


def _merged(specs: Sequence[WriteSpec], bool_blooms: Mapping[int, int]) -> WriteSpec:
    """One writer's options for the columns of ``specs`` (one-column specs, in leaf order)."""
    return WriteSpec(
        {n: c for s in specs for n, c in s.compression.items()},
        tuple(n for s in specs for n in s.use_dictionary),
        {n: e for s in specs for n, e in s.column_encoding.items()},
        tuple(n for s in specs for n in s.statistics),
        {n: b for s in specs for n, b in s.blooms.items()},
        frozenset(t for s in specs for t in s.page_types),
        any(s.crc for s in specs),
        any(s.page_index for s in specs),
        any(s.int96 for s in specs),
        any(s.decimal_as_int for s in specs),
        frozenset(u for s in specs for u in s.time_utc),
        tuple(sh for s in specs for sh in s.shapes),
        bool_blooms,
    )


def _encoding(name: str, shape: ChunkShape) -> tuple[bool, str | None]:
    """Whether a chunk uses a dictionary, else its one other encoding as pyarrow names it
    (None for pyarrow's default).

    Raises:
        SpliceRefused: The chunk mixes non-dictionary encodings.
    """
    other = shape.data_encodings - {DICT}
    if shape.dictionary or DICT in shape.data_encodings:
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
    compare_schema(meta, tmeta)
    if len(tmeta.row_groups) != 1 or tmeta.row_groups[0].num_rows != n:
        raise SpliceRefused(f"re-encoding row group {k} did not give one group of {n} rows")
    trg = tmeta.row_groups[0]
    for j, ((path, _, _, _), cc, tcc, shape) in enumerate(
        zip(meta.leaves(), meta.row_groups[k].columns, trg.columns, spec.shapes, strict=True)
    ):
        new = chunk_shape(walk_pages(data, 0, chunk_range(tcc)))
        compare_shapes(".".join(path), cc, tcc, shape, new, bloom_apart=j in spec.bool_blooms)
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
