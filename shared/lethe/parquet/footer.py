"""Where things lie in a Parquet file: the footer, row groups, pages and index structures.

The footer is parsed from a speculative tail read (:func:`parse_tail`) into the typed views
of :mod:`lethe.parquet.model`; every splice first proves that the codec reproduces it byte
for byte (:func:`check_roundtrip`). A row group's byte range follows one rule
(:func:`row_group_span`, DESIGN §4.1) whoever asks: the splice, the reader and the writer.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from lethe.errors import SpliceRefused, UnsupportedFile
from lethe.parquet.enums import FMD
from lethe.parquet.model import (
    BloomFilterHeader,
    ColumnChunk,
    ColumnIndex,
    FileMetaData,
    InvalidParquet,
    OffsetIndex,
    PageHeader,
    RowGroup,
)
from lethe.parquet.thrift import Struct, ThriftError, decode, decode_prefix, encode

__all__ = [
    "MAGIC",
    "MAGIC_ENCRYPTED",
    "ByteRange",
    "ChunkOffsets",
    "Footer",
    "IndexKind",
    "IndexStructure",
    "Page",
    "TailTooShort",
    "check_roundtrip",
    "chunk_range",
    "chunk_span",
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
    "row_group_span",
    "walk_pages",
]

MAGIC = b"PAR1"
MAGIC_ENCRYPTED = b"PARE"


class TailTooShort(InvalidParquet):
    """The tail given to :func:`parse_tail` does not hold the whole footer.

    Attributes:
        needed: How many bytes from the end of the file are needed.
    """

    def __init__(self, needed: int) -> None:
        super().__init__(f"the footer needs the last {needed} bytes of the file")
        self.needed = needed


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


class ChunkOffsets(Protocol):
    """What the byte-range rule reads of a column chunk's metadata.

    :class:`~lethe.parquet.model.ColumnMetaData` has these three, and so has pyarrow's
    ``ColumnChunkMetaData`` (whose ``dictionary_page_offset`` is None when the field is not
    set), so the reader and the writer apply the rule to pyarrow's metadata unchanged.
    """

    @property
    def dictionary_page_offset(self) -> int | None:
        """Offset of the dictionary page; None or 0 (some writers) for none."""

    @property
    def data_page_offset(self) -> int:
        """Offset of the first data page."""

    @property
    def total_compressed_size(self) -> int:
        """Bytes of all the chunk's pages, headers included."""


def chunk_span(m: ChunkOffsets) -> ByteRange:
    """The byte range of a column chunk's pages (DESIGN §4.1), unchecked.

    It starts at the dictionary page when ``0 < dictionary_page_offset < data_page_offset``
    (some writers store 0 for "none"), else at the first data page, and spans
    ``total_compressed_size`` bytes. :func:`chunk_range` is the checked form.

    >>> from types import SimpleNamespace as Meta
    >>> chunk_span(Meta(dictionary_page_offset=4, data_page_offset=30, total_compressed_size=50))
    ByteRange(start=4, end=54)
    >>> chunk_span(Meta(dictionary_page_offset=0, data_page_offset=30, total_compressed_size=50))
    ByteRange(start=30, end=80)
    """
    dpo = m.data_page_offset
    dict_off = m.dictionary_page_offset
    start = dict_off if dict_off is not None and 0 < dict_off < dpo else dpo
    return ByteRange(start, start + m.total_compressed_size)


def row_group_span(chunks: Iterable[ChunkOffsets]) -> ByteRange:
    """The byte range of a row group (DESIGN §4.1): from the first page of its chunks to the
    end of its last chunk, each chunk's range from :func:`chunk_span`.

    Computed from the column chunks, never from ``RowGroup.file_offset`` (old writers got it
    wrong). The splice, the reader and the writer all locate groups with this function.

    Raises:
        InvalidParquet: The group has no columns.
    """
    ranges = [chunk_span(m) for m in chunks]
    if not ranges:
        raise InvalidParquet("malformed Parquet metadata: row group without columns")
    return ByteRange(min(r.start for r in ranges), max(r.end for r in ranges))


def chunk_range(c: ColumnChunk) -> ByteRange:
    """Byte range of a column chunk's pages: :func:`chunk_span`, checked.

    Raises:
        UnsupportedFile: The chunk is stored in another file.
        InvalidParquet: The range starts inside the leading magic or has a negative size.
    """
    if c.file_path:
        raise UnsupportedFile(f"column chunk stored in another file ({c.file_path!r})")
    r = chunk_span(c.meta_data)
    if r.start < 4 or r.length < 0:
        raise InvalidParquet(
            f"malformed Parquet metadata: column chunk at {r.start} of size {r.length}"
        )
    return r


def row_group_range(rg: RowGroup) -> ByteRange:
    """Byte range of a row group: :func:`row_group_span` of its chunks, each checked by
    :func:`chunk_range` first.

    Raises:
        UnsupportedFile: A chunk is stored in another file.
        InvalidParquet: The group has no columns, or a chunk's range is impossible.
    """
    columns = rg.columns
    for c in columns:
        chunk_range(c)
    return row_group_span(c.meta_data for c in columns)


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
    index, offset index (walked once per footer view).
    """
    got = meta.memo.get(-3)
    if got is None:
        got = meta.memo[-3] = tuple(_iter_index(meta))
    return got


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


_V = TypeVar("_V")


def _decode_at(data: bytes, offset: int, view: Callable[[Struct], _V], what: str) -> tuple[_V, int]:
    """The struct at ``offset`` seen as ``view``, and the offset after it."""
    try:
        s, end = decode_prefix(data, offset)
    except ThriftError as e:
        raise InvalidParquet(f"no {what} at {offset}: {e}") from e
    return view(s), end


def _decode_whole(data: bytes, view: Callable[[Struct], _V], what: str) -> _V:
    """``data``, exactly one struct, seen as ``view``."""
    try:
        return view(decode(data))
    except ThriftError as e:
        raise InvalidParquet(f"{what} does not decode: {e}") from e


def read_page_header(data: bytes, offset: int) -> tuple[PageHeader, int]:
    """Decode the page header at ``offset``; returns it and the offset of the page data.

    Raises:
        InvalidParquet: The bytes there are not a page header.
    """
    return _decode_at(data, offset, PageHeader, "page header")


def read_bloom_filter_header(data: bytes, offset: int) -> tuple[BloomFilterHeader, int]:
    """Decode the bloom filter header at ``offset``; returns it and the bitset's offset.

    Raises:
        InvalidParquet: The bytes there are not a bloom filter header.
    """
    return _decode_at(data, offset, BloomFilterHeader, "bloom filter header")


def read_offset_index(data: bytes) -> OffsetIndex:
    """Decode a serialized OffsetIndex.

    Raises:
        InvalidParquet: The bytes are not exactly one OffsetIndex struct.
    """
    return _decode_whole(data, OffsetIndex, "offset index")


def read_column_index(data: bytes) -> ColumnIndex:
    """Decode a serialized ColumnIndex.

    Raises:
        InvalidParquet: The bytes are not exactly one ColumnIndex struct.
    """
    return _decode_whole(data, ColumnIndex, "column index")


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
