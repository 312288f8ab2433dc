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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar, overload

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
_V = TypeVar("_V")


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


def _opt_str(s: Struct, fid: int, what: str) -> str | None:
    return _str(_opt_bytes(s, fid, what))


def _int_or_zero(s: Struct, fid: int, what: str) -> int:
    return _opt_int(s, fid, what) or 0


def _each(view: Callable[[Struct], _V]) -> Callable[[Struct, int, str], tuple[_V, ...]]:
    """A reader of a list of structs, each seen as ``view``."""
    return lambda s, fid, what: tuple(view(x) for x in _structs(s, fid, what))


@dataclass(frozen=True, slots=True)
class _View:
    """A view of the struct it wraps (its fields are :class:`_Field` descriptors)."""

    struct: Struct


@dataclass(frozen=True, slots=True)
class _MemoView(_View):
    """A view whose :class:`_Memo` fields are kept in ``memo``."""

    memo: dict[int, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


class _Field(Generic[_V]):
    """Field ``fid`` of the struct a view wraps, read and type-checked by ``read`` on each
    access (an error names it ``View.attribute``); ``doc`` says what it is."""

    def __init__(self, fid: int, read: Callable[[Struct, int, str], _V], doc: str = "") -> None:
        self.fid, self.read, self.what, self.__doc__ = fid, read, "", doc

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.what = f"{owner.__name__}.{name}"

    @overload
    def __get__(self, view: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, view: _View, owner: type[Any]) -> _V: ...

    def __get__(self, view: _View | None, owner: type[Any]) -> _V | Self:
        return self if view is None else self.read(view.struct, self.fid, self.what)


class _Memo(_Field[_V]):
    """A :class:`_Field` read once per view, kept in the view's ``memo``: the views of a
    footer's row groups and column chunks (a splice asks for them per row group, and each
    read builds the whole list again: quadratic in the row groups, issue 37 item 4)."""

    @overload
    def __get__(self, view: None, owner: type[Any]) -> Self: ...

    @overload
    def __get__(self, view: _View, owner: type[Any]) -> _V: ...

    def __get__(self, view: _View | None, owner: type[Any]) -> _V | Self:
        if view is None:
            return self
        memo: dict[int, Any] = view.memo  # type: ignore[attr-defined]
        got = memo.get(self.fid, memo)
        if got is memo:
            got = memo[self.fid] = self.read(view.struct, self.fid, self.what)
        return got  # type: ignore[no-any-return]


class SchemaElement(_View):
    """A view of a SchemaElement.

    Attributes:
        type: The physical type (leaves only).
        type_length: Byte width of FIXED_LEN_BYTE_ARRAY.
        repetition_type: REQUIRED, OPTIONAL or REPEATED (absent on some roots).
        num_children: Number of children (0 for a leaf).
        converted_type: The legacy ConvertedType annotation.
        scale: Decimal scale (legacy annotation).
        precision: Decimal precision (legacy annotation).
        field_id: The field id, if any.
        logical_type: The LogicalType union, as a struct.
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The element's name."""
        return _str(_opt_bytes(self.struct, SE.NAME, "SchemaElement.name")) or ""

    type = _Field(SE.TYPE, _opt_int)
    type_length = _Field(SE.TYPE_LENGTH, _opt_int)
    repetition_type = _Field(SE.REPETITION_TYPE, _opt_int)
    num_children = _Field(SE.NUM_CHILDREN, _int_or_zero)
    converted_type = _Field(SE.CONVERTED_TYPE, _opt_int)
    scale = _Field(SE.SCALE, _opt_int)
    precision = _Field(SE.PRECISION, _opt_int)
    field_id = _Field(SE.FIELD_ID, _opt_int)
    logical_type = _Field(SE.LOGICAL_TYPE, _opt_struct)


class PageEncodingStats(_View):
    """A view of a PageEncodingStats entry.

    Attributes:
        page_type: The page type counted.
        encoding: The encoding of those pages.
        count: How many pages.
    """

    __slots__ = ()
    page_type = _Field(PES.PAGE_TYPE, _int)
    encoding = _Field(PES.ENCODING, _int)
    count = _Field(PES.COUNT, _int)


class ColumnMetaData(_View):
    """A view of a ColumnMetaData.

    Attributes:
        type: Physical type.
        encodings: All encodings used in the chunk (data and levels).
        codec: Compression codec.
        num_values: Number of values, nulls included.
        total_uncompressed_size: Uncompressed bytes of all pages, headers included.
        total_compressed_size: Bytes of all pages in the file, headers included.
        data_page_offset: Offset of the first data page.
        index_page_offset: Offset of the (never written) index page.
        dictionary_page_offset: Offset of the dictionary page, if any.
        statistics: Chunk statistics.
        encoding_stats: Per page type and encoding counts.
        bloom_filter_offset: Offset of the bloom filter header.
        bloom_filter_length: Length of the bloom filter, header included (older writers omit it).
    """

    __slots__ = ()
    type = _Field(CMD.TYPE, _int)
    encodings = _Field(CMD.ENCODINGS, _ints)

    @property
    def path_in_schema(self) -> tuple[str, ...]:
        """Path of the column from the root."""
        lst = _list(self.struct, CMD.PATH_IN_SCHEMA, "ColumnMetaData.path_in_schema")
        items = () if lst is None else lst.items
        return tuple(x.decode("utf-8", "replace") for x in items if isinstance(x, bytes))

    codec = _Field(CMD.CODEC, _int)
    num_values = _Field(CMD.NUM_VALUES, _int)
    total_uncompressed_size = _Field(CMD.TOTAL_UNCOMPRESSED_SIZE, _int)
    total_compressed_size = _Field(CMD.TOTAL_COMPRESSED_SIZE, _int)
    data_page_offset = _Field(CMD.DATA_PAGE_OFFSET, _int)
    index_page_offset = _Field(CMD.INDEX_PAGE_OFFSET, _opt_int)
    dictionary_page_offset = _Field(CMD.DICTIONARY_PAGE_OFFSET, _opt_int)
    statistics = _Field(CMD.STATISTICS, _opt_struct)
    encoding_stats = _Field(CMD.ENCODING_STATS, _each(PageEncodingStats))
    bloom_filter_offset = _Field(CMD.BLOOM_FILTER_OFFSET, _opt_int)
    bloom_filter_length = _Field(CMD.BLOOM_FILTER_LENGTH, _opt_int)


class ColumnChunk(_View):
    """A view of a ColumnChunk.

    Attributes:
        file_path: Set when the chunk lives in another file.
        file_offset: Deprecated; writers disagree on its meaning (0, chunk start or chunk end).
        offset_index_offset: Offset of the OffsetIndex.
        offset_index_length: Length of the OffsetIndex.
        column_index_offset: Offset of the ColumnIndex.
        column_index_length: Length of the ColumnIndex.
    """

    __slots__ = ()
    file_path = _Field(CC.FILE_PATH, _opt_str)
    file_offset = _Field(CC.FILE_OFFSET, _int_or_zero)

    @property
    def meta_data(self) -> ColumnMetaData:
        """The chunk's metadata (absent only in encrypted files)."""
        s = _opt_struct(self.struct, CC.META_DATA, "ColumnChunk.meta_data")
        if s is None:
            raise _bad("ColumnChunk.meta_data is missing")
        return ColumnMetaData(s)

    offset_index_offset = _Field(CC.OFFSET_INDEX_OFFSET, _opt_int)
    offset_index_length = _Field(CC.OFFSET_INDEX_LENGTH, _opt_int)
    column_index_offset = _Field(CC.COLUMN_INDEX_OFFSET, _opt_int)
    column_index_length = _Field(CC.COLUMN_INDEX_LENGTH, _opt_int)

    @property
    def encrypted(self) -> bool:
        """Whether the chunk carries crypto metadata."""
        return (
            self.struct.get(CC.CRYPTO_METADATA) is not None
            or self.struct.get(CC.ENCRYPTED_COLUMN_METADATA) is not None
        )


class RowGroup(_MemoView):
    """A view of a RowGroup.

    Attributes:
        columns: The column chunks, in schema leaf order.
        num_rows: Rows in the group.
        total_byte_size: Uncompressed size of the group's data.
        file_offset: Declared start of the group (unreliable in old writers' files).
        total_compressed_size: Compressed size of the group's chunks.
        ordinal: The group's position in the file, if written.
    """

    __slots__ = ()
    columns = _Memo(RG.COLUMNS, _each(ColumnChunk))
    num_rows = _Field(RG.NUM_ROWS, _int)
    total_byte_size = _Field(RG.TOTAL_BYTE_SIZE, _int)
    file_offset = _Field(RG.FILE_OFFSET, _opt_int)
    total_compressed_size = _Field(RG.TOTAL_COMPRESSED_SIZE, _opt_int)
    ordinal = _Field(RG.ORDINAL, _opt_int)


class FileMetaData(_MemoView):
    """A view of a FileMetaData (the footer).

    Attributes:
        version: Format version (1 or 2).
        schema: The flattened schema, root first.
        num_rows: Rows in the file.
        row_groups: The row groups, in file order of their metadata.
        created_by: The writer's identification string.
    """

    __slots__ = ()
    version = _Field(FMD.VERSION, _int)
    schema = _Memo(FMD.SCHEMA, _each(SchemaElement))
    num_rows = _Field(FMD.NUM_ROWS, _int)
    row_groups = _Memo(FMD.ROW_GROUPS, _each(RowGroup))
    created_by = _Field(FMD.CREATED_BY, _opt_str)

    @property
    def key_value_metadata(self) -> dict[str, str | None]:
        """Application key-value metadata (e.g. ``ARROW:schema``)."""
        out: dict[str, str | None] = {}
        for kv in _structs(self.struct, FMD.KEY_VALUE_METADATA, "key_value_metadata"):
            key = _str(_opt_bytes(kv, 1, "KeyValue.key")) or ""
            out[key] = _str(_opt_bytes(kv, 2, "KeyValue.value"))
        return out

    @property
    def encrypted(self) -> bool:
        """Whether the file (plaintext footer mode) or any column is encrypted."""
        if self.struct.get(FMD.ENCRYPTION_ALGORITHM) is not None:
            return True
        got = self.memo.get(-1)
        if got is None:
            got = self.memo[-1] = any(c.encrypted for rg in self.row_groups for c in rg.columns)
        return bool(got)

    def leaves(self) -> tuple[tuple[tuple[str, ...], SchemaElement, int, int], ...]:
        """The leaf columns in order: ``(path, element, max definition, max repetition)``
        (walked once per view)."""
        got = self.memo.get(-2)
        if got is None:
            got = self.memo[-2] = self._leaves()
        return got

    def _leaves(self) -> tuple[tuple[tuple[str, ...], SchemaElement, int, int], ...]:
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


# page type -> its own header: (its field in PageHeader, the field's name, its type's name,
# the ids of its num_values and encoding)
_SUBHEADERS: dict[int, tuple[int, str, str, int, int]] = {
    PageType.DATA_PAGE: (
        PH.DATA_PAGE_HEADER, "data_page_header", "DataPageHeader", DPH.NUM_VALUES, DPH.ENCODING
    ),
    PageType.DATA_PAGE_V2: (
        PH.DATA_PAGE_HEADER_V2, "data_page_header_v2", "DataPageHeaderV2",
        DPH2.NUM_VALUES, DPH2.ENCODING,
    ),
    PageType.DICTIONARY_PAGE: (
        PH.DICTIONARY_PAGE_HEADER, "dictionary_page_header", "DictionaryPageHeader",
        DICT.NUM_VALUES, DICT.ENCODING,
    ),
}  # fmt: skip


class PageHeader(_View):
    """A view of a PageHeader.

    Attributes:
        type: The page type.
        uncompressed_page_size: Uncompressed size, header excluded.
        compressed_page_size: Size on disk, header excluded.
        crc: CRC-32 of the page data, if written.
    """

    __slots__ = ()
    type = _Field(PH.TYPE, _int)
    uncompressed_page_size = _Field(PH.UNCOMPRESSED_PAGE_SIZE, _int)
    compressed_page_size = _Field(PH.COMPRESSED_PAGE_SIZE, _int)
    crc = _Field(PH.CRC, _opt_int)

    def _sub_int(self, encoding: bool) -> int | None:
        """The num_values (or the encoding) in the page type's own header."""
        sub = _SUBHEADERS.get(self.type)
        if sub is None:
            return None
        fid, what, name, num_values_id, encoding_id = sub
        s = _opt_struct(self.struct, fid, what)
        if s is None:
            return None
        if encoding:
            return _int(s, encoding_id, f"{name}.encoding")
        return _int(s, num_values_id, f"{name}.num_values")

    @property
    def num_values(self) -> int | None:
        """Values in a data or dictionary page."""
        return self._sub_int(False)

    @property
    def num_rows(self) -> int | None:
        """Rows in a v2 data page (v1 pages do not say)."""
        if self.type != PageType.DATA_PAGE_V2:
            return None
        s = _opt_struct(self.struct, PH.DATA_PAGE_HEADER_V2, "data_page_header_v2")
        return None if s is None else _int(s, DPH2.NUM_ROWS, "DataPageHeaderV2.num_rows")

    @property
    def encoding(self) -> int | None:
        """The values' encoding."""
        return self._sub_int(True)

    @property
    def is_data(self) -> bool:
        """Whether this is a v1 or v2 data page."""
        return self.type in (PageType.DATA_PAGE, PageType.DATA_PAGE_V2)


class PageLocation(_View):
    """A view of a PageLocation of an OffsetIndex.

    Attributes:
        offset: Absolute offset of the page header in the file.
        compressed_page_size: Page size in the file, header included.
        first_row_index: Index of the page's first row within its row group.
    """

    __slots__ = ()
    offset = _Field(PL.OFFSET, _int)
    compressed_page_size = _Field(PL.COMPRESSED_PAGE_SIZE, _int)
    first_row_index = _Field(PL.FIRST_ROW_INDEX, _int)


class OffsetIndex(_View):
    """A view of an OffsetIndex.

    Attributes:
        page_locations: One entry per data page.
    """

    __slots__ = ()
    page_locations = _Field(OI.PAGE_LOCATIONS, _each(PageLocation))


class ColumnIndex(_View):
    """A view of a ColumnIndex."""

    __slots__ = ()

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
        lists = (CI.NULL_PAGES, CI.MIN_VALUES, CI.MAX_VALUES, CI.NULL_COUNTS)
        return {f.name.lower(): self._len(f, f.name.lower()) for f in lists}


class BloomFilterHeader(_View):
    """A view of a BloomFilterHeader.

    Attributes:
        num_bytes: Size of the bitset that follows the header.
    """

    __slots__ = ()
    num_bytes = _Field(BFH.NUM_BYTES, _int)

    def _union_tag(self, fid: BFH) -> int | None:
        s = _opt_struct(self.struct, fid, f"BloomFilterHeader.{fid.name.lower()}")
        if s is None or len(s.fields) != 1:
            return None
        return s.fields[0].id

    @property
    def algorithm(self) -> int | None:
        """1 for split-block."""
        return self._union_tag(BFH.ALGORITHM)

    @property
    def hash(self) -> int | None:
        """1 for xxHash64."""
        return self._union_tag(BFH.HASH)

    @property
    def compression(self) -> int | None:
        """1 for uncompressed."""
        return self._union_tag(BFH.COMPRESSION)
