"""Typed, read-only views of the Parquet Thrift structures, and footer location helpers.

The views wrap the generic :class:`~lethe.parquet.thrift.Struct` decoded by the schema-less
codec, so nothing a writer put in a footer is lost: edits are made on the structs (see
:mod:`lethe.parquet.splice`) and re-encoded. Field ids follow ``parquet.thrift`` of
apache/parquet-format.

>>> import io, pyarrow as pa, pyarrow.parquet as pq
>>> buf = io.BytesIO()
>>> pq.write_table(pa.table({"x": [1, 2, 3]}), buf)
>>> data = buf.getvalue()
>>> footer = parse_tail(data[-4096:], len(data))
>>> footer.metadata.num_rows, len(footer.metadata.row_groups)
(3, 1)
>>> row_group_range(footer.metadata.row_groups[0]).start
4
"""

from __future__ import annotations

import struct as _struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

from lethe.errors import SpliceRefused, UnsupportedFile
from lethe.parquet.thrift import Struct, ThriftError, ThriftList, decode, decode_prefix, encode

__all__ = [
    "MAGIC",
    "MAGIC_ENCRYPTED",
    "BloomFilterHeader",
    "ByteRange",
    "ColumnChunk",
    "ColumnIndex",
    "ColumnMetaData",
    "FileMetaData",
    "Footer",
    "IndexKind",
    "IndexStructure",
    "InvalidParquet",
    "OffsetIndex",
    "Page",
    "PageHeader",
    "PageLocation",
    "PageType",
    "RowGroup",
    "SchemaElement",
    "TailTooShort",
    "check_roundtrip",
    "chunk_range",
    "footer_length",
    "index_region",
    "index_structures",
    "parse_tail",
    "read_bloom_filter_header",
    "read_column_index",
    "read_offset_index",
    "read_page_header",
    "row_group_range",
    "row_group_ranges",
    "walk_pages",
]

MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"


class InvalidParquet(UnsupportedFile):
    """The bytes are not a well-formed Parquet file (a footer field is missing or mistyped)."""


class TailTooShort(InvalidParquet):
    """The tail given to :func:`parse_tail` does not hold the whole footer.

    Attributes:
        needed: How many bytes from the end of the file are needed.
    """

    def __init__(self, needed: int) -> None:
        super().__init__(f"the footer needs the last {needed} bytes of the file")
        self.needed = needed


# --- field ids (parquet.thrift) -----------------------------------------------------------
class FMD(IntEnum):
    """FileMetaData field ids."""

    VERSION = 1
    SCHEMA = 2
    NUM_ROWS = 3
    ROW_GROUPS = 4
    KEY_VALUE_METADATA = 5
    CREATED_BY = 6
    COLUMN_ORDERS = 7
    ENCRYPTION_ALGORITHM = 8
    FOOTER_SIGNING_KEY_METADATA = 9


class SE(IntEnum):
    """SchemaElement field ids."""

    TYPE = 1
    TYPE_LENGTH = 2
    REPETITION_TYPE = 3
    NAME = 4
    NUM_CHILDREN = 5
    CONVERTED_TYPE = 6
    SCALE = 7
    PRECISION = 8
    FIELD_ID = 9
    LOGICAL_TYPE = 10


class RG(IntEnum):
    """RowGroup field ids."""

    COLUMNS = 1
    TOTAL_BYTE_SIZE = 2
    NUM_ROWS = 3
    SORTING_COLUMNS = 4
    FILE_OFFSET = 5
    TOTAL_COMPRESSED_SIZE = 6
    ORDINAL = 7


class CC(IntEnum):
    """ColumnChunk field ids."""

    FILE_PATH = 1
    FILE_OFFSET = 2
    META_DATA = 3
    OFFSET_INDEX_OFFSET = 4
    OFFSET_INDEX_LENGTH = 5
    COLUMN_INDEX_OFFSET = 6
    COLUMN_INDEX_LENGTH = 7
    CRYPTO_METADATA = 8
    ENCRYPTED_COLUMN_METADATA = 9


class CMD(IntEnum):
    """ColumnMetaData field ids."""

    TYPE = 1
    ENCODINGS = 2
    PATH_IN_SCHEMA = 3
    CODEC = 4
    NUM_VALUES = 5
    TOTAL_UNCOMPRESSED_SIZE = 6
    TOTAL_COMPRESSED_SIZE = 7
    KEY_VALUE_METADATA = 8
    DATA_PAGE_OFFSET = 9
    INDEX_PAGE_OFFSET = 10
    DICTIONARY_PAGE_OFFSET = 11
    STATISTICS = 12
    ENCODING_STATS = 13
    BLOOM_FILTER_OFFSET = 14
    BLOOM_FILTER_LENGTH = 15
    SIZE_STATISTICS = 16
    GEOSPATIAL_STATISTICS = 17


class PES(IntEnum):
    """PageEncodingStats field ids."""

    PAGE_TYPE = 1
    ENCODING = 2
    COUNT = 3


class PH(IntEnum):
    """PageHeader field ids."""

    TYPE = 1
    UNCOMPRESSED_PAGE_SIZE = 2
    COMPRESSED_PAGE_SIZE = 3
    CRC = 4
    DATA_PAGE_HEADER = 5
    INDEX_PAGE_HEADER = 6
    DICTIONARY_PAGE_HEADER = 7
    DATA_PAGE_HEADER_V2 = 8


class DPH(IntEnum):
    """DataPageHeader field ids."""

    NUM_VALUES = 1
    ENCODING = 2
    DEFINITION_LEVEL_ENCODING = 3
    REPETITION_LEVEL_ENCODING = 4
    STATISTICS = 5


class DPH2(IntEnum):
    """DataPageHeaderV2 field ids."""

    NUM_VALUES = 1
    NUM_NULLS = 2
    NUM_ROWS = 3
    ENCODING = 4
    DEFINITION_LEVELS_BYTE_LENGTH = 5
    REPETITION_LEVELS_BYTE_LENGTH = 6
    IS_COMPRESSED = 7
    STATISTICS = 8


class DICT(IntEnum):
    """DictionaryPageHeader field ids."""

    NUM_VALUES = 1
    ENCODING = 2
    IS_SORTED = 3


class PL(IntEnum):
    """PageLocation field ids."""

    OFFSET = 1
    COMPRESSED_PAGE_SIZE = 2
    FIRST_ROW_INDEX = 3


class OI(IntEnum):
    """OffsetIndex field ids."""

    PAGE_LOCATIONS = 1
    UNENCODED_BYTE_ARRAY_DATA_BYTES = 2


class CI(IntEnum):
    """ColumnIndex field ids."""

    NULL_PAGES = 1
    MIN_VALUES = 2
    MAX_VALUES = 3
    BOUNDARY_ORDER = 4
    NULL_COUNTS = 5
    REPETITION_LEVEL_HISTOGRAMS = 6
    DEFINITION_LEVEL_HISTOGRAMS = 7


class BFH(IntEnum):
    """BloomFilterHeader field ids."""

    NUM_BYTES = 1
    ALGORITHM = 2
    HASH = 3
    COMPRESSION = 4


class PageType(IntEnum):
    """Parquet page types."""

    DATA_PAGE = 0
    INDEX_PAGE = 1
    DICTIONARY_PAGE = 2
    DATA_PAGE_V2 = 3


class PhysicalType(IntEnum):
    """Parquet physical types."""

    BOOLEAN = 0
    INT32 = 1
    INT64 = 2
    INT96 = 3
    FLOAT = 4
    DOUBLE = 5
    BYTE_ARRAY = 6
    FIXED_LEN_BYTE_ARRAY = 7


class Codec(IntEnum):
    """Parquet compression codecs."""

    UNCOMPRESSED = 0
    SNAPPY = 1
    GZIP = 2
    LZO = 3
    BROTLI = 4
    LZ4 = 5
    ZSTD = 6
    LZ4_RAW = 7


class Encoding(IntEnum):
    """Parquet encodings."""

    PLAIN = 0
    GROUP_VAR_INT = 1
    PLAIN_DICTIONARY = 2
    RLE = 3
    BIT_PACKED = 4
    DELTA_BINARY_PACKED = 5
    DELTA_LENGTH_BYTE_ARRAY = 6
    DELTA_BYTE_ARRAY = 7
    RLE_DICTIONARY = 8
    BYTE_STREAM_SPLIT = 9


class Repetition(IntEnum):
    """Parquet field repetition types."""

    REQUIRED = 0
    OPTIONAL = 1
    REPEATED = 2


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


def _opt_bool(s: Struct, fid: int, what: str) -> bool | None:
    v = s.get(fid)
    if v is None or isinstance(v, bool):
        return v
    raise _bad(f"{what} is not a boolean")


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
class ByteRange:
    """A half-open byte range ``[start, end)`` of a file.

    Attributes:
        start: First byte.
        end: One past the last byte.
    """

    start: int
    end: int

    @property
    def length(self) -> int:
        """``end - start``."""
        return self.end - self.start

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self.start <= offset < self.end

    def overlaps(self, other: ByteRange) -> bool:
        """Whether the two ranges share at least one byte."""
        return self.start < other.end and other.start < self.end


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


# --- reading --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Footer:
    """A parsed footer and where it lies in the file.

    Attributes:
        metadata: The decoded FileMetaData.
        raw: Its exact bytes.
        start: Offset of its first byte in the file.
        file_size: Size of the file.
    """

    metadata: FileMetaData
    raw: bytes
    start: int
    file_size: int

    @property
    def length(self) -> int:
        """Length of the serialized FileMetaData."""
        return len(self.raw)


def footer_length(tail: bytes, file_size: int) -> int:
    """Length of the FileMetaData, from the last 8 bytes of a file.

    Args:
        tail: At least the last 8 bytes of the file.
        file_size: Size of the file.

    Raises:
        UnsupportedFile: The file has an encrypted footer (``PARE``).
        InvalidParquet: The file does not end with ``PAR1`` or the length is impossible.
    """
    if len(tail) < 8 or file_size < 12:
        raise InvalidParquet("not a Parquet file: too short")
    magic = tail[-4:]
    if magic == MAGIC_ENCRYPTED:
        raise UnsupportedFile("encrypted Parquet files (PARE footer) are not supported")
    if magic != MAGIC:
        raise InvalidParquet("not a Parquet file: no PAR1 at the end")
    (n,) = _struct.unpack("<I", tail[-8:-4])
    if n + 12 > file_size:
        raise InvalidParquet(f"footer length {n} exceeds the file size {file_size}")
    return int(n)


def parse_tail(tail: bytes, file_size: int) -> Footer:
    """Parse the footer from the last bytes of a file.

    Args:
        tail: The last ``len(tail)`` bytes of the file (e.g. a speculative 1 MiB GET).
        file_size: Size of the whole file.

    Returns:
        The footer.

    Raises:
        TailTooShort: ``tail`` does not hold the whole footer; ``needed`` says how much does.
        UnsupportedFile: Encrypted footer or encrypted columns.
        InvalidParquet: Not a Parquet file, or a footer that does not decode.
    """
    n = footer_length(tail, file_size)
    if n + 8 > len(tail):
        raise TailTooShort(n + 8)
    raw = bytes(tail[len(tail) - 8 - n : len(tail) - 8])
    try:
        struct, end = decode_prefix(raw)
    except ThriftError as e:
        raise InvalidParquet(f"footer does not decode: {e}") from e
    meta = FileMetaData(struct)
    if struct.get(FMD.ENCRYPTION_ALGORITHM) is not None:
        # plaintext footer mode: a signature follows the FileMetaData
        raise UnsupportedFile("Parquet files with encrypted columns are not supported")
    if end != len(raw):
        raise InvalidParquet(f"footer does not decode: {len(raw) - end} trailing bytes")
    if meta.encrypted:
        raise UnsupportedFile("Parquet files with encrypted columns are not supported")
    return Footer(meta, raw, file_size - 8 - n, file_size)


def check_roundtrip(raw: bytes) -> Struct:
    """Decode a footer and prove that it re-encodes to the same bytes.

    Every splice is guarded by this check: if the codec could not reproduce a footer byte
    for byte, an edit could lose or alter something, so the splice is refused.

    Args:
        raw: The serialized FileMetaData.

    Returns:
        The decoded struct.

    Raises:
        SpliceRefused: The bytes do not decode, or do not re-encode identically.
    """
    try:
        s = decode(raw)
    except ThriftError as e:
        raise SpliceRefused(f"the footer does not decode: {e}") from e
    again = encode(s)
    if again != raw:
        at = next(
            (i for i, (a, b) in enumerate(zip(raw, again, strict=False)) if a != b),
            min(len(raw), len(again)),
        )
        raise SpliceRefused(
            f"the footer does not re-serialize identically (first difference at byte {at})"
        )
    return s


def chunk_range(c: ColumnChunk) -> ByteRange:
    """Byte range of a column chunk's pages.

    It starts at the dictionary page when ``0 < dictionary_page_offset < data_page_offset``
    (some writers store 0 for "none"), else at the first data page, and spans
    ``total_compressed_size`` bytes.
    """
    if c.file_path:
        raise UnsupportedFile(f"column chunk stored in another file ({c.file_path!r})")
    m = c.meta_data
    dpo = m.data_page_offset
    dict_off = m.dictionary_page_offset
    start = dict_off if dict_off is not None and 0 < dict_off < dpo else dpo
    size = m.total_compressed_size
    if start < 4 or size < 0:
        raise _bad(f"column chunk at {start} of size {size}")
    return ByteRange(start, start + size)


def row_group_range(rg: RowGroup) -> ByteRange:
    """Byte range of a row group: its first chunk's first page to its last chunk's end.

    Computed from the column chunks, never from ``RowGroup.file_offset`` (old writers got it
    wrong).

    Raises:
        InvalidParquet: The group has no columns.
    """
    ranges = [chunk_range(c) for c in rg.columns]
    if not ranges:
        raise _bad("row group without columns")
    return ByteRange(min(r.start for r in ranges), max(r.end for r in ranges))


def row_group_ranges(meta: FileMetaData) -> tuple[ByteRange, ...]:
    """:func:`row_group_range` of every group, in metadata order."""
    return tuple(row_group_range(rg) for rg in meta.row_groups)


IndexKind = Literal["bloom_filter", "column_index", "offset_index"]


@dataclass(frozen=True, slots=True)
class IndexStructure:
    """A page index or bloom filter referenced by a column chunk.

    Attributes:
        kind: Which structure.
        row_group: Index of the row group.
        column: Index of the column chunk in the group.
        offset: Absolute offset in the file.
        length: Its length; None for a bloom filter whose writer omitted it (then it is
            header length + ``numBytes``, see :func:`read_bloom_filter_header`).
    """

    kind: IndexKind
    row_group: int
    column: int
    offset: int
    length: int | None


def _iter_index(meta: FileMetaData) -> Iterator[IndexStructure]:
    for g, rg in enumerate(meta.row_groups):
        for c, cc in enumerate(rg.columns):
            m = cc.meta_data
            if m.bloom_filter_offset is not None:
                yield IndexStructure(
                    "bloom_filter", g, c, m.bloom_filter_offset, m.bloom_filter_length
                )
            if cc.column_index_offset is not None:
                yield IndexStructure(
                    "column_index", g, c, cc.column_index_offset, cc.column_index_length or 0
                )
            if cc.offset_index_offset is not None:
                yield IndexStructure(
                    "offset_index", g, c, cc.offset_index_offset, cc.offset_index_length or 0
                )


def index_structures(meta: FileMetaData) -> tuple[IndexStructure, ...]:
    """Every bloom filter, column index and offset index the footer references.

    Returned in the order groups and columns appear; for each chunk: bloom filter, column
    index, offset index.
    """
    return tuple(_iter_index(meta))


def index_region(footer: Footer) -> ByteRange | None:
    """The smallest range holding every index structure, or None when there are none.

    A bloom filter of unknown length is assumed to extend up to the next structure or the
    footer. Fetch this range (usually already in the tail) before planning a splice.
    """
    items = index_structures(footer.metadata)
    if not items:
        return None
    starts = sorted({s.offset for s in items} | {footer.start})
    end = 0
    for s in items:
        if s.length is None:
            nxt = next(x for x in starts if x > s.offset)
            end = max(end, nxt)
        else:
            end = max(end, s.offset + s.length)
    return ByteRange(min(s.offset for s in items), min(max(end, 0), footer.start))


def read_page_header(data: bytes, offset: int) -> tuple[PageHeader, int]:
    """Decode the page header at ``offset``; returns it and the offset of the page data.

    Raises:
        InvalidParquet: The bytes there are not a page header.
    """
    try:
        s, end = decode_prefix(data, offset)
    except ThriftError as e:
        raise InvalidParquet(f"no page header at {offset}: {e}") from e
    return PageHeader(s), end


def read_bloom_filter_header(data: bytes, offset: int) -> tuple[BloomFilterHeader, int]:
    """Decode the bloom filter header at ``offset``; returns it and the bitset's offset.

    Raises:
        InvalidParquet: The bytes there are not a bloom filter header.
    """
    try:
        s, end = decode_prefix(data, offset)
    except ThriftError as e:
        raise InvalidParquet(f"no bloom filter header at {offset}: {e}") from e
    return BloomFilterHeader(s), end


def read_offset_index(data: bytes) -> OffsetIndex:
    """Decode a serialized OffsetIndex.

    Raises:
        InvalidParquet: The bytes are not exactly one OffsetIndex struct.
    """
    try:
        return OffsetIndex(decode(data))
    except ThriftError as e:
        raise InvalidParquet(f"offset index does not decode: {e}") from e


def read_column_index(data: bytes) -> ColumnIndex:
    """Decode a serialized ColumnIndex.

    Raises:
        InvalidParquet: The bytes are not exactly one ColumnIndex struct.
    """
    try:
        return ColumnIndex(decode(data))
    except ThriftError as e:
        raise InvalidParquet(f"column index does not decode: {e}") from e


@dataclass(frozen=True, slots=True)
class Page:
    """A page located in a column chunk.

    Attributes:
        offset: Absolute offset of the page header.
        header: The decoded header.
        header_length: Length of the serialized header.
    """

    offset: int
    header: PageHeader
    header_length: int

    @property
    def data_offset(self) -> int:
        """Absolute offset of the page's data."""
        return self.offset + self.header_length

    @property
    def end(self) -> int:
        """One past the page's last byte."""
        return self.offset + self.header_length + self.header.compressed_page_size


def walk_pages(data: bytes, base: int, chunk: ByteRange) -> tuple[Page, ...]:
    """The pages of a column chunk, header by header.

    Args:
        data: Bytes of the file starting at file offset ``base`` and covering ``chunk``.
        base: File offset of ``data[0]``.
        chunk: The chunk's byte range (see :func:`chunk_range`).

    Raises:
        InvalidParquet: A header does not decode, a size is negative, or a page runs past the
            chunk's end.
    """
    if chunk.start < base or chunk.end > base + len(data):
        raise InvalidParquet(f"chunk [{chunk.start}, {chunk.end}) is outside the given bytes")
    pages: list[Page] = []
    pos = chunk.start
    while pos < chunk.end:
        header, data_at = read_page_header(data, pos - base)
        if data_at + base > chunk.end:
            raise InvalidParquet(f"page header at {pos} runs past the chunk's end {chunk.end}")
        size = header.compressed_page_size
        if size < 0:
            raise InvalidParquet(f"page at {pos} has a negative size")
        page = Page(pos, header, data_at + base - pos)
        if page.end > chunk.end:
            raise InvalidParquet(
                f"page at {pos} ends at {page.end}, past the chunk's end {chunk.end}"
            )
        pages.append(page)
        pos = page.end
    return tuple(pages)
