"""A data file's tail, footer and page index, cached per ETag.

The tail (:class:`Tail`: the last bytes of a file, its footer as pyarrow decodes it) is
fetched once per ETag and kept in :data:`TAILS`; the page index (:class:`PageIndex`: the
footer as :mod:`lethe.parquet` models it and the bytes of the column and offset indexes) in
:data:`PAGE_INDEXES`. Both caches are :class:`LruCache`s bounded by entries and bytes.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.parquet import footer as pqf
from lethe.parquet import model as pqm
from lethe.parquet import pages

log = logging.getLogger(__name__)

V = TypeVar("V")

__all__ = ["TAILS", "LruCache", "PageIndex", "Tail", "TailCache", "load_page_index"]

MAX_INDEX_BYTES = 16 << 20
"""A page index larger than this is not loaded (reads fall back to whole row groups)."""


@dataclass(frozen=True, slots=True)
class Tail:
    """The last bytes of a data file, fetched once per ETag: its footer and often its page
    index.

    pyarrow decodes the footer here (its reader and the row-group statistics need pyarrow's
    metadata). The footer as :mod:`lethe.parquet` models it
    (:class:`~lethe.parquet.footer.Footer`) is parsed from the same bytes only for
    page-level reads (:class:`PageIndex`): decoding it in Python costs about a hundred
    times pyarrow's decoding.

    Attributes:
        arrow: The footer, as pyarrow decodes it.
        start: File offset of ``data[0]``.
        data: The bytes, up to the end of the file.
    """

    arrow: pq.FileMetaData
    start: int
    data: bytes

    @property
    def schema(self) -> pa.Schema:
        """The file's Arrow schema (its columns' ``PARQUET:field_id`` included)."""
        return self.arrow.schema.to_arrow_schema()

    @property
    def names(self) -> frozenset[str]:
        """The file's top-level column names."""
        md = self.arrow
        return frozenset(md.schema.column(i).path.split(".")[0] for i in range(md.num_columns))

    def leaf_indices(self, columns: Sequence[str] | None) -> list[int]:
        """Leaf column indices of the given top-level columns (all when None)."""
        md = self.arrow
        if columns is None:
            return list(range(md.num_columns))
        want = set(columns)
        return [i for i in range(md.num_columns) if md.schema.column(i).path.split(".")[0] in want]


class LruCache(Generic[V]):
    """A thread-safe LRU bounded by entry count and by total weight (bytes).

    >>> c = LruCache[bytes](capacity=8, max_bytes=10, weigh=len)
    >>> c.put(("b", "k1", "e"), b"123456"); c.put(("b", "k2", "e"), b"123456")
    >>> c.get(("b", "k1", "e")) is None, c.get(("b", "k2", "e"))
    (True, b'123456')
    """

    def __init__(
        self,
        capacity: int = 512,
        *,
        max_bytes: int = 128 << 20,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._weigh = weigh or (lambda _v: 0)
        self._d: OrderedDict[tuple[str, str, str], tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, k: tuple[str, str, str]) -> V | None:
        with self._lock:
            hit = self._d.get(k)
            if hit is None:
                return None
            self._d.move_to_end(k)
            return hit[0]

    def put(self, k: tuple[str, str, str], v: V) -> None:
        w = self._weigh(v)
        with self._lock:
            old = self._d.pop(k, None)
            if old is not None:
                self._bytes -= old[1]
            self._d[k] = (v, w)
            self._bytes += w
            while len(self._d) > self.capacity or (
                self._bytes > self.max_bytes and len(self._d) > 1
            ):
                _, (_, ow) = self._d.popitem(last=False)
                self._bytes -= ow


class TailCache(LruCache[Tail]):
    """Process-wide LRU of file tails keyed by (bucket, key, etag): a warm snapshot's lookups
    and deletes need no footer GET."""

    def __init__(self, capacity: int = 512, *, max_bytes: int = 128 << 20) -> None:
        super().__init__(capacity, max_bytes=max_bytes, weigh=lambda t: len(t.data))


TAILS = TailCache()


class PageIndex:
    """A file's footer decoded by :mod:`lethe.parquet` and the bytes of its column and offset
    indexes, with what page-level reads derive from them memoized per chunk.

    One per data file (per ETag) in :data:`PAGE_INDEXES`; ``footer`` is None and ``data``
    empty when the file has no page index or its footer cannot be decoded here (encrypted
    columns).
    """

    def __init__(self, footer: pqf.Footer | None, start: int, data: bytes) -> None:
        self.footer = footer
        self.meta = meta = footer.metadata if footer is not None else None
        self.start = start
        self.data = data
        self.footer_bytes = footer.length if footer is not None else 0
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._leaves: dict[str, int | None] = {}
        self._groups = meta.row_groups if meta is not None else ()
        self._elements = tuple(e for _p, e, _d, _r in meta.leaves()) if meta is not None else ()

    @property
    def has_index(self) -> bool:
        return self.meta is not None and bool(self.data)

    @property
    def nbytes(self) -> int:
        """Rough memory held, for the cache bound: the index bytes and what their decoding
        and the decoded footer take (Python objects: about 8x and 20x their bytes)."""
        return 8 * len(self.data) + 20 * self.footer_bytes

    def _meta(self) -> pqm.FileMetaData:
        assert self.meta is not None
        return self.meta

    def _slice(self, offset: int | None, length: int | None) -> bytes | None:
        if offset is None or not length or offset < self.start:
            return None
        at = offset - self.start
        return self.data[at : at + length] if at + length <= len(self.data) else None

    def _memoized(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            try:
                self._memo[key] = make()
            except errors.UnsupportedFile as e:  # InvalidParquet included
                log.debug("page index of %s unusable: %s", key, e)
                self._memo[key] = None
        return self._memo[key]

    def leaf(self, name: str) -> int | None:
        """Leaf index of a flat top-level column, None for nested or repeated ones."""
        if name not in self._leaves:
            self._leaves[name] = pages.flat_leaf(self._meta(), name)
        return self._leaves[name]

    def chunk(self, rg: int, col: int) -> pqm.ColumnChunk:
        return self._groups[rg].columns[col]

    def num_rows(self, rg: int) -> int:
        return self._groups[rg].num_rows

    def layout(self, rg: int, col: int) -> pages.ChunkLayout | None:
        """Where chunk ``col`` of ``rg`` has its pages (None without an OffsetIndex)."""

        def make() -> pages.ChunkLayout | None:
            cc = self.chunk(rg, col)
            raw = self._slice(cc.offset_index_offset, cc.offset_index_length)
            if raw is None:
                return None
            return pages.chunk_layout(self._groups[rg], col, pqf.read_offset_index(raw))

        return self._memoized(("layout", rg, col), make)  # type: ignore[no-any-return]

    def bounds(self, rg: int, col: int, t: pa.DataType) -> tuple[pages.PageBound, ...] | None:
        """Per-page bounds of chunk ``col`` of ``rg`` (None without a usable ColumnIndex)."""

        def make() -> tuple[pages.PageBound, ...] | None:
            cc = self.chunk(rg, col)
            raw = self._slice(cc.column_index_offset, cc.column_index_length)
            if raw is None:
                return None
            ci = pqf.read_column_index(raw)
            return pages.page_bounds(ci, self._elements[col], t)

        return self._memoized(("bounds", rg, col, str(t)), make)  # type: ignore[no-any-return]

    def schema(self, col: int) -> pages.ChunkSchema:
        """The schema part of a one-column file of leaf ``col``."""
        got: pages.ChunkSchema | None = self._memo.get(("schema", col))
        if got is None:
            got = self._memo[("schema", col)] = pages.chunk_schema(self._meta(), col)
        return got


PAGE_INDEXES = LruCache[PageIndex](512, max_bytes=128 << 20, weigh=lambda p: p.nbytes)
"""Process-wide LRU of page indexes keyed by (bucket, key, etag)."""


def _index_span(meta: pqm.FileMetaData) -> pqf.ByteRange | None:
    """The range holding every column and offset index (bloom filters left out)."""
    items = [s for s in pqf.index_structures(meta) if s.kind != "bloom_filter" and s.length]
    if not items:
        return None
    return pqf.ByteRange(
        min(s.offset for s in items), max(s.offset + (s.length or 0) for s in items)
    )


def load_page_index(
    tail: Tail, size: int, read: Callable[[int, int], bytes], name: str
) -> PageIndex:
    """The page index of a file of ``size`` bytes whose tail is ``tail``: from the tail when
    it holds the column and offset indexes, else with one ranged ``read`` of the rest; an
    empty one when the file has none or it cannot be decoded here (``name`` is logged)."""
    try:
        footer = pqf.parse_tail(tail.data, size)
        span = _index_span(footer.metadata)
        if span is None or span.length > MAX_INDEX_BYTES:
            return PageIndex(None, 0, b"")
        t0 = tail.start
        if span.start >= t0:
            data = tail.data[span.start - t0 : span.end - t0]
        else:
            data = read(span.start, min(span.end, t0)) + tail.data[: max(0, span.end - t0)]
        return PageIndex(footer, span.start, data)
    except errors.UnsupportedFile as e:  # InvalidParquet included
        log.debug("no page-level reads for %s: %s", name, e)
        return PageIndex(None, 0, b"")
