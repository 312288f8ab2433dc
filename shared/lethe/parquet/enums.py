"""Field ids of the Parquet Thrift structures and the format's enumerations.

Field ids follow ``parquet.thrift`` of apache/parquet-format; the generic
:class:`~lethe.parquet.thrift.Struct` is addressed with them. Every struct below numbers its
fields 1, 2, 3, ... in the order listed (the functional ``IntEnum`` counts from 1), and every
enumeration its values 0, 1, 2, ... (``start=0``), as the specification does.

>>> from lethe.parquet.thrift import Field, Struct, TType
>>> s = Struct((Field(CMD.CODEC, TType.I32, Codec.ZSTD),))
>>> Codec(s.get(CMD.CODEC)).name, int(CMD.BLOOM_FILTER_LENGTH), int(PageType.DATA_PAGE_V2)
('ZSTD', 15, 3)
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

# --- field ids (parquet.thrift), from 1 -----------------------------------------------------
FMD = IntEnum(  # FileMetaData
    "FMD",
    "VERSION SCHEMA NUM_ROWS ROW_GROUPS KEY_VALUE_METADATA CREATED_BY COLUMN_ORDERS"
    " ENCRYPTION_ALGORITHM FOOTER_SIGNING_KEY_METADATA",
)
SE = IntEnum(  # SchemaElement
    "SE",
    "TYPE TYPE_LENGTH REPETITION_TYPE NAME NUM_CHILDREN CONVERTED_TYPE SCALE PRECISION"
    " FIELD_ID LOGICAL_TYPE",
)
RG = IntEnum(  # RowGroup
    "RG",
    "COLUMNS TOTAL_BYTE_SIZE NUM_ROWS SORTING_COLUMNS FILE_OFFSET TOTAL_COMPRESSED_SIZE ORDINAL",
)
CC = IntEnum(  # ColumnChunk
    "CC",
    "FILE_PATH FILE_OFFSET META_DATA OFFSET_INDEX_OFFSET OFFSET_INDEX_LENGTH COLUMN_INDEX_OFFSET"
    " COLUMN_INDEX_LENGTH CRYPTO_METADATA ENCRYPTED_COLUMN_METADATA",
)
CMD = IntEnum(  # ColumnMetaData
    "CMD",
    "TYPE ENCODINGS PATH_IN_SCHEMA CODEC NUM_VALUES TOTAL_UNCOMPRESSED_SIZE TOTAL_COMPRESSED_SIZE"
    " KEY_VALUE_METADATA DATA_PAGE_OFFSET INDEX_PAGE_OFFSET DICTIONARY_PAGE_OFFSET STATISTICS"
    " ENCODING_STATS BLOOM_FILTER_OFFSET BLOOM_FILTER_LENGTH SIZE_STATISTICS"
    " GEOSPATIAL_STATISTICS",
)
PES = IntEnum("PES", "PAGE_TYPE ENCODING COUNT")  # PageEncodingStats
PH = IntEnum(  # PageHeader
    "PH",
    "TYPE UNCOMPRESSED_PAGE_SIZE COMPRESSED_PAGE_SIZE CRC DATA_PAGE_HEADER INDEX_PAGE_HEADER"
    " DICTIONARY_PAGE_HEADER DATA_PAGE_HEADER_V2",
)
DPH = IntEnum(  # DataPageHeader
    "DPH",
    "NUM_VALUES ENCODING DEFINITION_LEVEL_ENCODING REPETITION_LEVEL_ENCODING STATISTICS",
)
DPH2 = IntEnum(  # DataPageHeaderV2
    "DPH2",
    "NUM_VALUES NUM_NULLS NUM_ROWS ENCODING DEFINITION_LEVELS_BYTE_LENGTH"
    " REPETITION_LEVELS_BYTE_LENGTH IS_COMPRESSED STATISTICS",
)
DICT = IntEnum("DICT", "NUM_VALUES ENCODING IS_SORTED")  # DictionaryPageHeader
PL = IntEnum("PL", "OFFSET COMPRESSED_PAGE_SIZE FIRST_ROW_INDEX")  # PageLocation
OI = IntEnum("OI", "PAGE_LOCATIONS UNENCODED_BYTE_ARRAY_DATA_BYTES")  # OffsetIndex
CI = IntEnum(  # ColumnIndex
    "CI",
    "NULL_PAGES MIN_VALUES MAX_VALUES BOUNDARY_ORDER NULL_COUNTS REPETITION_LEVEL_HISTOGRAMS"
    " DEFINITION_LEVEL_HISTOGRAMS",
)
BFH = IntEnum("BFH", "NUM_BYTES ALGORITHM HASH COMPRESSION")  # BloomFilterHeader

# --- enumerations, from 0 -------------------------------------------------------------------
PageType = IntEnum("PageType", "DATA_PAGE INDEX_PAGE DICTIONARY_PAGE DATA_PAGE_V2", start=0)
PhysicalType = IntEnum(
    "PhysicalType",
    "BOOLEAN INT32 INT64 INT96 FLOAT DOUBLE BYTE_ARRAY FIXED_LEN_BYTE_ARRAY",
    start=0,
)
Codec = IntEnum("Codec", "UNCOMPRESSED SNAPPY GZIP LZO BROTLI LZ4 ZSTD LZ4_RAW", start=0)
Encoding = IntEnum(
    "Encoding",
    "PLAIN GROUP_VAR_INT PLAIN_DICTIONARY RLE BIT_PACKED DELTA_BINARY_PACKED"
    " DELTA_LENGTH_BYTE_ARRAY DELTA_BYTE_ARRAY RLE_DICTIONARY BYTE_STREAM_SPLIT",
    start=0,
)
Repetition = IntEnum("Repetition", "REQUIRED OPTIONAL REPEATED", start=0)
