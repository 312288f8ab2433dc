"""Typed, read-only views of the Parquet Thrift structures.

The views wrap the generic :class:`~lethe.parquet.thrift.Struct` decoded by the schema-less
codec, so nothing a writer put in a footer is lost: edits are made on the structs (see
:mod:`lethe.parquet.splice`) and re-encoded. A view checks a field's type when it is read
and raises :class:`InvalidParquet` if a writer put something else there.

>>> from lethe.parquet.thrift import Field, Struct, TType
>>> rg = RowGroup(Struct((Field(RG.NUM_ROWS, TType.I64, 3),)))
>>> rg.num_rows, rg.ordinal, rg.columns
(3, None, ())
>>> RowGroup(Struct((Field(RG.NUM_ROWS, TType.BINARY, b"3"),))).num_rows
Traceback (most recent call last):
...
lethe.parquet.model.InvalidParquet: malformed Parquet metadata: RowGroup.num_rows is not an integer
"""

from __future__ import annotations

from dataclasses import dataclass

from lethe.errors import UnsupportedFile
from lethe.parquet.enums import (
    BFH,
    CC,
    CI,
    CMD,
    DICT,
    DPH,
    DPH2,
    FMD,
    OI,
    PES,
    PH,
    PL,
    RG,
    SE,
    PageType,
    Repetition,
)
from lethe.parquet.thrift import Struct, ThriftList

__all__ = [
    "BloomFilterHeader",
    "ColumnChunk",
    "ColumnIndex",
    "ColumnMetaData",
    "FileMetaData",
    "InvalidParquet",
    "OffsetIndex",
    "PageEncodingStats",
    "PageHeader",
    "PageLocation",
    "RowGroup",
    "SchemaElement",
]


class InvalidParquet(UnsupportedFile):
    """The bytes are not a well-formed Parquet file (a footer field is missing or mistyped)."""


# --- typed access -------------------------------------------------------------------------
def _bad(what: str) -> InvalidParquet:
    return InvalidParquet(f"malformed Parquet metadata: {what}")


def _opt_int(s: Struct, fid: int, what: str) -> int | None:
    v = s.get(fid)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"{what} is not an integer")
    return v


def _int(s: Struct, fid: int, what: str) -> int:
    v = _opt_int(s, fid, what)
    if v is None:
        raise _bad(f"{what} is missing")
    return v


def _opt_bytes(s: Struct, fid: int, what: str) -> bytes | None:
    v = s.get(fid)
    if v is None or isinstance(v, bytes):
        return v
    raise _bad(f"{what} is not binary")


def _opt_struct(s: Struct, fid: int, what: str) -> Struct | None:
    v = s.get(fid)
    if v is None or isinstance(v, Struct):
        return v
    raise _bad(f"{what} is not a struct")


def _list(s: Struct, fid: int, what: str) -> ThriftList | None:
    v = s.get(fid)
    if v is None or isinstance(v, ThriftList):
        return v
    raise _bad(f"{what} is not a list")


def _structs(s: Struct, fid: int, what: str) -> tuple[Struct, ...]:
    lst = _list(s, fid, what)
    if lst is None:
        return ()
    out = tuple(x for x in lst.items if isinstance(x, Struct))
    if len(out) != len(lst.items):
        raise _bad(f"{what} is not a list of structs")
    return out


def _ints(s: Struct, fid: int, what: str) -> tuple[int, ...]:
    lst = _list(s, fid, what)
    if lst is None:
        return ()
    out = tuple(x for x in lst.items if isinstance(x, int) and not isinstance(x, bool))
    if len(out) != len(lst.items):
        raise _bad(f"{what} is not a list of integers")
    return out


def _str(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class SchemaElement:
    """A view of a SchemaElement."""

    struct: Struct

    @property
    def name(self) -> str:
        """The element's name."""
        return _str(_opt_bytes(self.struct, SE.NAME, "SchemaElement.name")) or ""

    @property
    def type(self) -> int | None:
        """The physical type (leaves only)."""
        return _opt_int(self.struct, SE.TYPE, "SchemaElement.type")

    @property
    def type_length(self) -> int | None:
        """Byte width of FIXED_LEN_BYTE_ARRAY."""
        return _opt_int(self.struct, SE.TYPE_LENGTH, "SchemaElement.type_length")

    @property
    def repetition_type(self) -> int | None:
        """REQUIRED, OPTIONAL or REPEATED (absent on some roots)."""
        return _opt_int(self.struct, SE.REPETITION_TYPE, "SchemaElement.repetition_type")

    @property
    def num_children(self) -> int:
        """Number of children (0 for a leaf)."""
        return _opt_int(self.struct, SE.NUM_CHILDREN, "SchemaElement.num_children") or 0

    @property
    def converted_type(self) -> int | None:
        """The legacy ConvertedType annotation."""
        return _opt_int(self.struct, SE.CONVERTED_TYPE, "SchemaElement.converted_type")

    @property
    def scale(self) -> int | None:
        """Decimal scale (legacy annotation)."""
        return _opt_int(self.struct, SE.SCALE, "SchemaElement.scale")

    @property
    def precision(self) -> int | None:
        """Decimal precision (legacy annotation)."""
        return _opt_int(self.struct, SE.PRECISION, "SchemaElement.precision")

    @property
    def field_id(self) -> int | None:
        """The field id, if any."""
        return _opt_int(self.struct, SE.FIELD_ID, "SchemaElement.field_id")

    @property
    def logical_type(self) -> Struct | None:
        """The LogicalType union, as a struct."""
        return _opt_struct(self.struct, SE.LOGICAL_TYPE, "SchemaElement.logicalType")


@dataclass(frozen=True, slots=True)
class PageEncodingStats:
    """A view of a PageEncodingStats entry."""

    struct: Struct

    @property
    def page_type(self) -> int:
        """The page type counted."""
        return _int(self.struct, PES.PAGE_TYPE, "PageEncodingStats.page_type")

    @property
    def encoding(self) -> int:
        """The encoding of those pages."""
        return _int(self.struct, PES.ENCODING, "PageEncodingStats.encoding")

    @property
    def count(self) -> int:
        """How many pages."""
        return _int(self.struct, PES.COUNT, "PageEncodingStats.count")


@dataclass(frozen=True, slots=True)
class ColumnMetaData:
    """A view of a ColumnMetaData."""

    struct: Struct

    @property
    def type(self) -> int:
        """Physical type."""
        return _int(self.struct, CMD.TYPE, "ColumnMetaData.type")

    @property
    def encodings(self) -> tuple[int, ...]:
        """All encodings used in the chunk (data and levels)."""
        return _ints(self.struct, CMD.ENCODINGS, "ColumnMetaData.encodings")

    @property
    def path_in_schema(self) -> tuple[str, ...]:
        """Path of the column from the root."""
        lst = _list(self.struct, CMD.PATH_IN_SCHEMA, "ColumnMetaData.path_in_schema")
        items = () if lst is None else lst.items
        return tuple(x.decode("utf-8", "replace") for x in items if isinstance(x, bytes))

    @property
    def codec(self) -> int:
        """Compression codec."""
        return _int(self.struct, CMD.CODEC, "ColumnMetaData.codec")

    @property
    def num_values(self) -> int:
        """Number of values, nulls included."""
        return _int(self.struct, CMD.NUM_VALUES, "ColumnMetaData.num_values")

    @property
    def total_uncompressed_size(self) -> int:
        """Uncompressed bytes of all pages, headers included."""
        return _int(self.struct, CMD.TOTAL_UNCOMPRESSED_SIZE, "total_uncompressed_size")

    @property
    def total_compressed_size(self) -> int:
        """Bytes of all pages in the file, headers included."""
        return _int(self.struct, CMD.TOTAL_COMPRESSED_SIZE, "total_compressed_size")

    @property
    def data_page_offset(self) -> int:
        """Offset of the first data page."""
        return _int(self.struct, CMD.DATA_PAGE_OFFSET, "ColumnMetaData.data_page_offset")

    @property
    def index_page_offset(self) -> int | None:
        """Offset of the (never written) index page."""
        return _opt_int(self.struct, CMD.INDEX_PAGE_OFFSET, "index_page_offset")

    @property
    def dictionary_page_offset(self) -> int | None:
        """Offset of the dictionary page, if any."""
        return _opt_int(self.struct, CMD.DICTIONARY_PAGE_OFFSET, "dictionary_page_offset")

    @property
    def statistics(self) -> Struct | None:
        """Chunk statistics."""
        return _opt_struct(self.struct, CMD.STATISTICS, "ColumnMetaData.statistics")

    @property
    def encoding_stats(self) -> tuple[PageEncodingStats, ...]:
        """Per page type and encoding counts, if written."""
        return tuple(
            PageEncodingStats(s)
            for s in _structs(self.struct, CMD.ENCODING_STATS, "ColumnMetaData.encoding_stats")
        )

    @property
    def bloom_filter_offset(self) -> int | None:
        """Offset of the bloom filter header."""
        return _opt_int(self.struct, CMD.BLOOM_FILTER_OFFSET, "bloom_filter_offset")

    @property
    def bloom_filter_length(self) -> int | None:
        """Length of the bloom filter, header included (older writers omit it)."""
        return _opt_int(self.struct, CMD.BLOOM_FILTER_LENGTH, "bloom_filter_length")


@dataclass(frozen=True, slots=True)
class ColumnChunk:
    """A view of a ColumnChunk."""

    struct: Struct

    @property
    def file_path(self) -> str | None:
        """Set when the chunk lives in another file."""
        return _str(_opt_bytes(self.struct, CC.FILE_PATH, "ColumnChunk.file_path"))

    @property
    def file_offset(self) -> int:
        """Deprecated; writers disagree on its meaning (0, chunk start or chunk end)."""
        return _opt_int(self.struct, CC.FILE_OFFSET, "ColumnChunk.file_offset") or 0

    @property
    def meta_data(self) -> ColumnMetaData:
        """The chunk's metadata (absent only in encrypted files)."""
        s = _opt_struct(self.struct, CC.META_DATA, "ColumnChunk.meta_data")
        if s is None:
            raise _bad("ColumnChunk.meta_data is missing")
        return ColumnMetaData(s)

    @property
    def offset_index_offset(self) -> int | None:
        """Offset of the OffsetIndex."""
        return _opt_int(self.struct, CC.OFFSET_INDEX_OFFSET, "offset_index_offset")

    @property
    def offset_index_length(self) -> int | None:
        """Length of the OffsetIndex."""
        return _opt_int(self.struct, CC.OFFSET_INDEX_LENGTH, "offset_index_length")

    @property
    def column_index_offset(self) -> int | None:
        """Offset of the ColumnIndex."""
        return _opt_int(self.struct, CC.COLUMN_INDEX_OFFSET, "column_index_offset")

    @property
    def column_index_length(self) -> int | None:
        """Length of the ColumnIndex."""
        return _opt_int(self.struct, CC.COLUMN_INDEX_LENGTH, "column_index_length")

    @property
    def encrypted(self) -> bool:
        """Whether the chunk carries crypto metadata."""
        return (
            self.struct.get(CC.CRYPTO_METADATA) is not None
            or self.struct.get(CC.ENCRYPTED_COLUMN_METADATA) is not None
        )


@dataclass(frozen=True, slots=True)
class RowGroup:
    """A view of a RowGroup."""

    struct: Struct

    @property
    def columns(self) -> tuple[ColumnChunk, ...]:
        """The column chunks, in schema leaf order."""
        return tuple(ColumnChunk(s) for s in _structs(self.struct, RG.COLUMNS, "RowGroup.columns"))

    @property
    def num_rows(self) -> int:
        """Rows in the group."""
        return _int(self.struct, RG.NUM_ROWS, "RowGroup.num_rows")

    @property
    def total_byte_size(self) -> int:
        """Uncompressed size of the group's data."""
        return _int(self.struct, RG.TOTAL_BYTE_SIZE, "RowGroup.total_byte_size")

    @property
    def file_offset(self) -> int | None:
        """Declared start of the group (unreliable in files of old writers)."""
        return _opt_int(self.struct, RG.FILE_OFFSET, "RowGroup.file_offset")

    @property
    def total_compressed_size(self) -> int | None:
        """Compressed size of the group's chunks."""
        return _opt_int(self.struct, RG.TOTAL_COMPRESSED_SIZE, "RowGroup.total_compressed_size")

    @property
    def ordinal(self) -> int | None:
        """The group's position in the file, if written."""
        return _opt_int(self.struct, RG.ORDINAL, "RowGroup.ordinal")


@dataclass(frozen=True, slots=True)
class FileMetaData:
    """A view of a FileMetaData (the footer)."""

    struct: Struct

    @property
    def version(self) -> int:
        """Format version (1 or 2)."""
        return _int(self.struct, FMD.VERSION, "FileMetaData.version")

    @property
    def schema(self) -> tuple[SchemaElement, ...]:
        """The flattened schema, root first."""
        return tuple(
            SchemaElement(s) for s in _structs(self.struct, FMD.SCHEMA, "FileMetaData.schema")
        )

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return _int(self.struct, FMD.NUM_ROWS, "FileMetaData.num_rows")

    @property
    def row_groups(self) -> tuple[RowGroup, ...]:
        """The row groups, in file order of their metadata."""
        return tuple(
            RowGroup(s) for s in _structs(self.struct, FMD.ROW_GROUPS, "FileMetaData.row_groups")
        )

    @property
    def key_value_metadata(self) -> dict[str, str | None]:
        """Application key-value metadata (e.g. ``ARROW:schema``)."""
        out: dict[str, str | None] = {}
        for kv in _structs(self.struct, FMD.KEY_VALUE_METADATA, "key_value_metadata"):
            key = _str(_opt_bytes(kv, 1, "KeyValue.key")) or ""
            out[key] = _str(_opt_bytes(kv, 2, "KeyValue.value"))
        return out

    @property
    def created_by(self) -> str | None:
        """The writer's identification string."""
        return _str(_opt_bytes(self.struct, FMD.CREATED_BY, "FileMetaData.created_by"))

    @property
    def encrypted(self) -> bool:
        """Whether the file (plaintext footer mode) or any column is encrypted."""
        if self.struct.get(FMD.ENCRYPTION_ALGORITHM) is not None:
            return True
        return any(c.encrypted for rg in self.row_groups for c in rg.columns)

    def leaves(self) -> tuple[tuple[tuple[str, ...], SchemaElement, int, int], ...]:
        """The leaf columns in order: ``(path, element, max definition, max repetition)``."""
        schema = self.schema
        out: list[tuple[tuple[str, ...], SchemaElement, int, int]] = []
        pos = 1

        def walk(n: int, path: tuple[str, ...], d: int, r: int) -> None:
            nonlocal pos
            for _ in range(n):
                if pos >= len(schema):
                    raise _bad("schema has fewer elements than its num_children declare")
                e = schema[pos]
                pos += 1
                rep = e.repetition_type
                dd = d + (rep is not None and rep != Repetition.REQUIRED)
                rr = r + (rep == Repetition.REPEATED)
                p = (*path, e.name)
                if e.num_children:
                    walk(e.num_children, p, dd, rr)
                else:
                    out.append((p, e, dd, rr))

        if not schema:
            raise _bad("empty schema")
        walk(schema[0].num_children, (), 0, 0)
        return tuple(out)


@dataclass(frozen=True, slots=True)
class PageHeader:
    """A view of a PageHeader."""

    struct: Struct

    @property
    def type(self) -> int:
        """The page type."""
        return _int(self.struct, PH.TYPE, "PageHeader.type")

    @property
    def uncompressed_page_size(self) -> int:
        """Uncompressed size, header excluded."""
        return _int(self.struct, PH.UNCOMPRESSED_PAGE_SIZE, "uncompressed_page_size")

    @property
    def compressed_page_size(self) -> int:
        """Size on disk, header excluded."""
        return _int(self.struct, PH.COMPRESSED_PAGE_SIZE, "compressed_page_size")

    @property
    def crc(self) -> int | None:
        """CRC-32 of the page data, if written."""
        return _opt_int(self.struct, PH.CRC, "PageHeader.crc")

    def _sub(self, fid: int, what: str) -> Struct | None:
        return _opt_struct(self.struct, fid, what)

    @property
    def num_values(self) -> int | None:
        """Values in a data or dictionary page."""
        t = self.type
        if t == PageType.DATA_PAGE:
            s = self._sub(PH.DATA_PAGE_HEADER, "data_page_header")
            return None if s is None else _int(s, DPH.NUM_VALUES, "DataPageHeader.num_values")
        if t == PageType.DATA_PAGE_V2:
            s = self._sub(PH.DATA_PAGE_HEADER_V2, "data_page_header_v2")
            return None if s is None else _int(s, DPH2.NUM_VALUES, "DataPageHeaderV2.num_values")
        if t == PageType.DICTIONARY_PAGE:
            s = self._sub(PH.DICTIONARY_PAGE_HEADER, "dictionary_page_header")
            return (
                None if s is None else _int(s, DICT.NUM_VALUES, "DictionaryPageHeader.num_values")
            )
        return None

    @property
    def num_rows(self) -> int | None:
        """Rows in a v2 data page (v1 pages do not say)."""
        if self.type != PageType.DATA_PAGE_V2:
            return None
        s = self._sub(PH.DATA_PAGE_HEADER_V2, "data_page_header_v2")
        return None if s is None else _int(s, DPH2.NUM_ROWS, "DataPageHeaderV2.num_rows")

    @property
    def encoding(self) -> int | None:
        """The values' encoding."""
        t = self.type
        if t == PageType.DATA_PAGE:
            s = self._sub(PH.DATA_PAGE_HEADER, "data_page_header")
            return None if s is None else _int(s, DPH.ENCODING, "DataPageHeader.encoding")
        if t == PageType.DATA_PAGE_V2:
            s = self._sub(PH.DATA_PAGE_HEADER_V2, "data_page_header_v2")
            return None if s is None else _int(s, DPH2.ENCODING, "DataPageHeaderV2.encoding")
        if t == PageType.DICTIONARY_PAGE:
            s = self._sub(PH.DICTIONARY_PAGE_HEADER, "dictionary_page_header")
            return None if s is None else _int(s, DICT.ENCODING, "DictionaryPageHeader.encoding")
        return None

    @property
    def is_data(self) -> bool:
        """Whether this is a v1 or v2 data page."""
        return self.type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)


@dataclass(frozen=True, slots=True)
class PageLocation:
    """A view of a PageLocation of an OffsetIndex."""

    struct: Struct

    @property
    def offset(self) -> int:
        """Absolute offset of the page header in the file."""
        return _int(self.struct, PL.OFFSET, "PageLocation.offset")

    @property
    def compressed_page_size(self) -> int:
        """Page size in the file, header included."""
        return _int(self.struct, PL.COMPRESSED_PAGE_SIZE, "PageLocation.compressed_page_size")

    @property
    def first_row_index(self) -> int:
        """Index of the page's first row within its row group."""
        return _int(self.struct, PL.FIRST_ROW_INDEX, "PageLocation.first_row_index")


@dataclass(frozen=True, slots=True)
class OffsetIndex:
    """A view of an OffsetIndex."""

    struct: Struct

    @property
    def page_locations(self) -> tuple[PageLocation, ...]:
        """One entry per data page."""
        return tuple(
            PageLocation(s)
            for s in _structs(self.struct, OI.PAGE_LOCATIONS, "OffsetIndex.page_locations")
        )


@dataclass(frozen=True, slots=True)
class ColumnIndex:
    """A view of a ColumnIndex."""

    struct: Struct

    def _len(self, fid: int, what: str) -> int | None:
        lst = _list(self.struct, fid, what)
        return None if lst is None else len(lst.items)

    @property
    def num_pages(self) -> int:
        """Number of pages described (length of ``null_pages``)."""
        return self._len(CI.NULL_PAGES, "ColumnIndex.null_pages") or 0

    @property
    def list_lengths(self) -> dict[str, int | None]:
        """Lengths of the per-page lists, by name (None when absent)."""
        return {
            "null_pages": self._len(CI.NULL_PAGES, "null_pages"),
            "min_values": self._len(CI.MIN_VALUES, "min_values"),
            "max_values": self._len(CI.MAX_VALUES, "max_values"),
            "null_counts": self._len(CI.NULL_COUNTS, "null_counts"),
        }


@dataclass(frozen=True, slots=True)
class BloomFilterHeader:
    """A view of a BloomFilterHeader."""

    struct: Struct

    @property
    def num_bytes(self) -> int:
        """Size of the bitset that follows the header."""
        return _int(self.struct, BFH.NUM_BYTES, "BloomFilterHeader.numBytes")

    def _union_tag(self, fid: int, what: str) -> int | None:
        s = _opt_struct(self.struct, fid, what)
        if s is None or len(s.fields) != 1:
            return None
        return s.fields[0].id

    @property
    def algorithm(self) -> int | None:
        """1 for split-block."""
        return self._union_tag(BFH.ALGORITHM, "BloomFilterHeader.algorithm")

    @property
    def hash(self) -> int | None:
        """1 for xxHash64."""
        return self._union_tag(BFH.HASH, "BloomFilterHeader.hash")

    @property
    def compression(self) -> int | None:
        """1 for uncompressed."""
        return self._union_tag(BFH.COMPRESSION, "BloomFilterHeader.compression")
