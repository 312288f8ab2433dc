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
_T = TypeVar("_T")


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


def _optional(kind: type[_T], noun: str) -> Callable[[Struct, int, str], _T | None]:
    """A reader of an optional field of type ``kind`` (``noun`` names it in an error)."""

    def read(s: Struct, fid: int, what: str) -> _T | None:
        v = s.get(fid)
        if v is None or isinstance(v, kind):
            return v
        raise _bad(f"{what} is not {noun}")

    return read


_opt_bytes = _optional(bytes, "binary")
_opt_struct = _optional(Struct, "a struct")
_list = _optional(ThriftList, "a list")


def _list_of(kind: type[_T], noun: str) -> Callable[[Struct, int, str], tuple[_T, ...]]:
    """A reader of an optional list of ``kind`` (booleans are not integers), () if absent."""

    def read(s: Struct, fid: int, what: str) -> tuple[_T, ...]:
        lst = _list(s, fid, what)
        if lst is None:
            return ()
        out = tuple(x for x in lst.items if isinstance(x, kind) and not isinstance(x, bool))
        if len(out) != len(lst.items):
            raise _bad(f"{what} is not a list of {noun}")
        return out

    return read


_structs = _list_of(Struct, "structs")
_ints = _list_of(int, "integers")


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
    """A view of a SchemaElement."""

    __slots__ = ()

    @property
    def name(self) -> str:
        """The element's name."""
        return _str(_opt_bytes(self.struct, SE.NAME, "SchemaElement.name")) or ""

    #: The physical type (leaves only).
    type = _Field(SE.TYPE, _opt_int)
    #: Byte width of FIXED_LEN_BYTE_ARRAY.
    type_length = _Field(SE.TYPE_LENGTH, _opt_int)
    #: REQUIRED, OPTIONAL or REPEATED (absent on some roots).
    repetition_type = _Field(SE.REPETITION_TYPE, _opt_int)
    #: Number of children (0 for a leaf).
    num_children = _Field(SE.NUM_CHILDREN, _int_or_zero)
    #: The legacy ConvertedType annotation.
    converted_type = _Field(SE.CONVERTED_TYPE, _opt_int)
    #: Decimal scale (legacy annotation).
    scale = _Field(SE.SCALE, _opt_int)
    #: Decimal precision (legacy annotation).
    precision = _Field(SE.PRECISION, _opt_int)
    #: The field id, if any.
    field_id = _Field(SE.FIELD_ID, _opt_int)
    #: The LogicalType union, as a struct.
    logical_type = _Field(SE.LOGICAL_TYPE, _opt_struct)


class PageEncodingStats(_View):
    """A view of a PageEncodingStats entry."""

    __slots__ = ()
    #: The page type counted.
    page_type = _Field(PES.PAGE_TYPE, _int)
    #: The encoding of those pages.
    encoding = _Field(PES.ENCODING, _int)
    #: How many pages.
    count = _Field(PES.COUNT, _int)


class ColumnMetaData(_View):
    """A view of a ColumnMetaData."""

    __slots__ = ()
    #: Physical type.
    type = _Field(CMD.TYPE, _int)
    #: All encodings used in the chunk (data and levels).
    encodings = _Field(CMD.ENCODINGS, _ints)

    @property
    def path_in_schema(self) -> tuple[str, ...]:
        """Path of the column from the root."""
        lst = _list(self.struct, CMD.PATH_IN_SCHEMA, "ColumnMetaData.path_in_schema")
        items = () if lst is None else lst.items
        return tuple(x.decode("utf-8", "replace") for x in items if isinstance(x, bytes))

    #: Compression codec.
    codec = _Field(CMD.CODEC, _int)
    #: Number of values, nulls included.
    num_values = _Field(CMD.NUM_VALUES, _int)
    #: Uncompressed bytes of all pages, headers included.
    total_uncompressed_size = _Field(CMD.TOTAL_UNCOMPRESSED_SIZE, _int)
    #: Bytes of all pages in the file, headers included.
    total_compressed_size = _Field(CMD.TOTAL_COMPRESSED_SIZE, _int)
    #: Offset of the first data page.
    data_page_offset = _Field(CMD.DATA_PAGE_OFFSET, _int)
    #: Offset of the (never written) index page.
    index_page_offset = _Field(CMD.INDEX_PAGE_OFFSET, _opt_int)
    #: Offset of the dictionary page, if any.
    dictionary_page_offset = _Field(CMD.DICTIONARY_PAGE_OFFSET, _opt_int)
    #: Chunk statistics.
    statistics = _Field(CMD.STATISTICS, _opt_struct)
    #: Per page type and encoding counts.
    encoding_stats = _Field(CMD.ENCODING_STATS, _each(PageEncodingStats))
    #: Offset of the bloom filter header.
    bloom_filter_offset = _Field(CMD.BLOOM_FILTER_OFFSET, _opt_int)
    #: Length of the bloom filter, header included (older writers omit it).
    bloom_filter_length = _Field(CMD.BLOOM_FILTER_LENGTH, _opt_int)


class ColumnChunk(_View):
    """A view of a ColumnChunk."""

    __slots__ = ()
    #: Set when the chunk lives in another file.
    file_path = _Field(CC.FILE_PATH, _opt_str)
    #: Deprecated; writers disagree on its meaning (0, chunk start or chunk end).
    file_offset = _Field(CC.FILE_OFFSET, _int_or_zero)

    @property
    def meta_data(self) -> ColumnMetaData:
        """The chunk's metadata (absent only in encrypted files)."""
        s = _opt_struct(self.struct, CC.META_DATA, "ColumnChunk.meta_data")
        if s is None:
            raise _bad("ColumnChunk.meta_data is missing")
        return ColumnMetaData(s)

    #: Offset of the OffsetIndex.
    offset_index_offset = _Field(CC.OFFSET_INDEX_OFFSET, _opt_int)
    #: Length of the OffsetIndex.
    offset_index_length = _Field(CC.OFFSET_INDEX_LENGTH, _opt_int)
    #: Offset of the ColumnIndex.
    column_index_offset = _Field(CC.COLUMN_INDEX_OFFSET, _opt_int)
    #: Length of the ColumnIndex.
    column_index_length = _Field(CC.COLUMN_INDEX_LENGTH, _opt_int)

    @property
    def encrypted(self) -> bool:
        """Whether the chunk carries crypto metadata."""
        return (
            self.struct.get(CC.CRYPTO_METADATA) is not None
            or self.struct.get(CC.ENCRYPTED_COLUMN_METADATA) is not None
        )


class RowGroup(_MemoView):
    """A view of a RowGroup."""

    __slots__ = ()
    #: The column chunks, in schema leaf order.
    columns = _Memo(RG.COLUMNS, _each(ColumnChunk))
    #: Rows in the group.
    num_rows = _Field(RG.NUM_ROWS, _int)
    #: Uncompressed size of the group's data.
    total_byte_size = _Field(RG.TOTAL_BYTE_SIZE, _int)
    #: Declared start of the group (unreliable in old writers' files).
    file_offset = _Field(RG.FILE_OFFSET, _opt_int)
    #: Compressed size of the group's chunks.
    total_compressed_size = _Field(RG.TOTAL_COMPRESSED_SIZE, _opt_int)
    #: The group's position in the file, if written.
    ordinal = _Field(RG.ORDINAL, _opt_int)


class FileMetaData(_MemoView):
    """A view of a FileMetaData (the footer)."""

    __slots__ = ()
    #: Format version (1 or 2).
    version = _Field(FMD.VERSION, _int)
    #: The flattened schema, root first.
    schema = _Memo(FMD.SCHEMA, _each(SchemaElement))
    #: Rows in the file.
    num_rows = _Field(FMD.NUM_ROWS, _int)
    #: The row groups, in file order of their metadata.
    row_groups = _Memo(FMD.ROW_GROUPS, _each(RowGroup))
    #: The writer's identification string.
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
    """A view of a PageHeader."""

    __slots__ = ()
    #: The page type.
    type = _Field(PH.TYPE, _int)
    #: Uncompressed size, header excluded.
    uncompressed_page_size = _Field(PH.UNCOMPRESSED_PAGE_SIZE, _int)
    #: Size on disk, header excluded.
    compressed_page_size = _Field(PH.COMPRESSED_PAGE_SIZE, _int)
    #: CRC-32 of the page data, if written.
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
    """A view of a PageLocation of an OffsetIndex."""

    __slots__ = ()
    #: Absolute offset of the page header in the file.
    offset = _Field(PL.OFFSET, _int)
    #: Page size in the file, header included.
    compressed_page_size = _Field(PL.COMPRESSED_PAGE_SIZE, _int)
    #: Index of the page's first row within its row group.
    first_row_index = _Field(PL.FIRST_ROW_INDEX, _int)


class OffsetIndex(_View):
    """A view of an OffsetIndex."""

    __slots__ = ()
    #: One entry per data page.
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
    """A view of a BloomFilterHeader."""

    __slots__ = ()
    #: Size of the bitset that follows the header.
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
