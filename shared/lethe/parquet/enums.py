"""Field ids of the Parquet Thrift structures and the format's enumerations.

Field ids follow ``parquet.thrift`` of apache/parquet-format; the generic
:class:`~lethe.parquet.thrift.Struct` is addressed with them.

>>> from lethe.parquet.thrift import Field, Struct, TType
>>> s = Struct((Field(CMD.CODEC, TType.I32, Codec.ZSTD),))
>>> Codec(s.get(CMD.CODEC)).name
'ZSTD'
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "BFH",
    "CC",
    "CI",
    "CMD",
    "DICT",
    "DPH",
    "DPH2",
    "FMD",
    "OI",
    "PES",
    "PH",
    "PL",
    "RG",
    "SE",
    "Codec",
    "Encoding",
    "PageType",
    "PhysicalType",
    "Repetition",
]


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
