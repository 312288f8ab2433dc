"""Reading data files: pinned tails and footers, planned ranged GETs of column chunks, DVs applied.

Every GET of a data file carries ``If-Match: <etag in the manifest>``, so an object replaced
under a pinned snapshot fails loudly (:class:`~lethe.errors.StaleSnapshot`) instead of
mixing data. Only the column chunks of the row groups that survive pruning are fetched;
adjacent chunks are coalesced into one ranged GET and fetched in parallel.

Selective filters read pages, not chunks (:func:`read_pages`): the page index (ColumnIndex
and OffsetIndex, cached with the footer per ETag in :data:`PAGE_INDEXES`) names the pages of
the filter columns that can hold a match; those pages are fetched and decoded (see
:mod:`lethe.parquet.pages`), the DV and the filter applied, and only then the pages of the
other columns that hold the matching rows. A warm point lookup thus downloads a few pages
per column in two rounds of parallel GETs instead of the row group's chunks.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import DataFile
from lethe.dv.rowdrop import drop_rows
from lethe.parquet import footer as pqf
from lethe.parquet import model as pqm
from lethe.parquet import pages
from lethe.reading.filters import Dnf, Predicate
from lethe.storage.objects import COALESCE_GAP, PinnedObject
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

V = TypeVar("V")

__all__ = [
    "FileHandle",
    "LruCache",
    "PageIndex",
    "RowFilter",
    "SparseFile",
    "Tail",
    "TailCache",
    "read_filtered",
    "read_pages",
    "read_positions",
    "read_row_group",
]

TAIL_BYTES = 256 << 10

# Range GETs run on lethe.storage.objects' I/O pool and never wait on other tasks; row-group
# prefetches run on _OUTER and wait on range GETs. Two pools, so nested waits cannot deadlock.
_OUTER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lethe-prefetch")


class SparseFile:
    """A read-only file object over the ranges of one object already fetched.

    pyarrow reads column chunks from it; a read outside the fetched ranges falls back to a
    pinned ranged GET (counted, logged) so correctness never depends on the plan.
    """

    def __init__(self, size: int, fetch: Callable[[int, int], bytes]) -> None:
        self._size = size
        self._fetch = fetch
        self._starts: list[int] = []
        self._chunks: list[bytes] = []
        self._pos = 0
        self.closed = False
        self.misses = 0

    def add(self, start: int, data: bytes) -> None:
        i = bisect.bisect_left(self._starts, start)
        self._starts.insert(i, start)
        self._chunks.insert(i, data)

    def _find(self, pos: int, n: int) -> bytes | None:
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0:
            s = self._starts[i]
            c = self._chunks[i]
            if pos + n <= s + len(c):
                return c[pos - s : pos - s + n]
        return None

    def read_at(self, pos: int, n: int) -> bytes:
        n = max(0, min(n, self._size - pos))
        got = self._find(pos, n)
        if got is None:
            self.misses += 1
            log.debug("sparse read miss at %s+%s", pos, n)
            got = self._fetch(pos, pos + n)
            self.add(pos, got)
        return got

    # file protocol used by pa.PythonFile
    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = self._size - self._pos
        b = self.read_at(self._pos, n)
        self._pos += len(b)
        return b

    def read_buffer(self, n: int = -1) -> memoryview:
        """:meth:`read` without a copy (pa.PythonFile prefers it): a view of fetched bytes."""
        if n is None or n < 0:
            n = self._size - self._pos
        pos, n = self._pos, max(0, min(n, self._size - self._pos))
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0 and pos + n <= self._starts[i] + len(self._chunks[i]):
            at = pos - self._starts[i]
            view = memoryview(self._chunks[i])[at : at + n]
        else:
            view = memoryview(self.read_at(pos, n))
        self._pos += len(view)
        return view

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence == 0:
            self._pos = pos
        elif whence == 1:
            self._pos += pos
        else:
            self._pos = self._size + pos
        return self._pos

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


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


class FileHandle:
    """One data file of a pinned snapshot; its bytes are read through :attr:`object`."""

    def __init__(self, store: S3Store, key: str, f: DataFile, *, tails: TailCache = TAILS) -> None:
        self.store = store
        self.key = key
        self.file = f
        self.object = PinnedObject(
            store,
            key,
            f.etag,
            f.size,
            changed="{uri} changed since the snapshot was taken (ETag {etag} no longer "
            "matches); data files must never be overwritten",
            gone="{uri} is referenced by the snapshot but is gone (garbage-collected: the "
            "version is older than GC's retention, or from before an erasure whose splice is "
            "older than the erasure grace; or deleted out of band): open the table again",
        )
        self._tails = tails

    def tail(self) -> Tail:
        """The file's tail and footer (cached per ETag; one GET, two if the footer is long)."""
        ck = (self.store.bucket, self.key, self.file.etag)
        cached = self._tails.get(ck)
        if cached is not None:
            return cached
        size = self.file.size
        n = min(size, TAIL_BYTES)
        data = self.object.tail(n)
        if len(data) < 8 or data[-4:] != b"PAR1":
            if data[-4:] == b"PARE":
                raise errors.UnsupportedFile(f"{self.key} is an encrypted Parquet file")
            raise errors.UnsupportedFile(f"{self.key} is not a Parquet file (no PAR1 trailer)")
        flen = int.from_bytes(data[-8:-4], "little")
        if flen + 8 > n:
            if flen + 8 > size:
                raise errors.UnsupportedFile(f"{self.key}: footer length {flen} exceeds file size")
            extra = self.object.read(size - flen - 8, size - n)
            data = extra + data
            n = len(data)
        md = pq.read_metadata(pa.BufferReader(data[-(flen + 8) :]))
        tail = Tail(md, size - n, data)
        self._tails.put(ck, tail)
        return tail

    def chunk_ranges(self, tail: Tail, rg: int, leaves: Sequence[int]) -> list[tuple[int, int]]:
        """``[start, end)`` of the chunks ``leaves`` of row group ``rg`` (DESIGN §4.1)."""
        g = tail.arrow.row_group(rg)
        return [(r.start, r.end) for r in (pqf.chunk_span(g.column(i)) for i in leaves)]

    def prefetch(self, tail: Tail, rg: int, columns: Sequence[str] | None) -> SparseFile:
        """Fetch the chunks of ``columns`` in row group ``rg`` (parallel coalesced GETs)."""
        return self.fetch_ranges(tail, self.chunk_ranges(tail, rg, tail.leaf_indices(columns)))

    def fetch_ranges(
        self, tail: Tail, ranges: Sequence[tuple[int, int]], *, gap: int = COALESCE_GAP
    ) -> SparseFile:
        """Fetch ``[start, end)`` ranges (coalesced within ``gap``, in parallel) into a
        :class:`SparseFile` that also holds the file's tail."""
        sparse = SparseFile(self.file.size, self.object.read)
        sparse.add(tail.start, tail.data)
        for s, data in self.object.read_ranges(ranges, gap=gap, held_from=tail.start):
            sparse.add(s, data)
        return sparse

    def page_index(self, tail: Tail) -> PageIndex | None:
        """The file's page index (cached with the footer per ETag), None when it has none.

        The column and offset indexes usually lie in the tail fetched with the footer;
        otherwise they are fetched once (one ranged GET) and cached.
        """
        ck = (self.store.bucket, self.key, self.file.etag)
        pi = PAGE_INDEXES.get(ck)
        if pi is None:
            pi = self._load_page_index(tail)
            PAGE_INDEXES.put(ck, pi)
        return pi if pi.has_index else None

    def _load_page_index(self, tail: Tail) -> PageIndex:
        try:
            footer = pqf.parse_tail(tail.data, self.file.size)
            span = _index_span(footer.metadata)
            if span is None or span.length > MAX_INDEX_BYTES:
                return PageIndex(None, 0, b"")
            t0 = tail.start
            if span.start >= t0:
                data = tail.data[span.start - t0 : span.end - t0]
            else:
                head = self.object.read(span.start, min(span.end, t0))
                data = head + tail.data[: max(0, span.end - t0)]
            return PageIndex(footer, span.start, data)
        except errors.UnsupportedFile as e:  # InvalidParquet included
            log.debug("no page-level reads for %s: %s", self.key, e)
            return PageIndex(None, 0, b"")


def read_row_group(
    handle: FileHandle, tail: Tail, rg: int, columns: Sequence[str] | None, sparse: SparseFile
) -> pa.Table:
    pf = pq.ParquetFile(pa.PythonFile(sparse, mode="r"), metadata=tail.arrow, pre_buffer=False)
    return pf.read_row_group(
        rg, columns=list(columns) if columns is not None else None, use_threads=False
    )


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run a task that may itself wait on range GETs (never on the range pool)."""
    return _OUTER.submit(fn, *args)


def iter_row_groups(
    items: Sequence[tuple[FileHandle, int]],
    columns: Sequence[str] | None,
    *,
    depth: int = 3,
    transform: Callable[[FileHandle, int, pa.Table], pa.Table] | None = None,
    read: Callable[[FileHandle, int], pa.Table] | None = None,
) -> Iterator[tuple[FileHandle, int, pa.Table]]:
    """Fetch, decode and ``transform`` ``(file, row group)`` items in worker threads,
    ``depth`` items ahead of the consumer, yielding them in order.

    ``read`` replaces the default read of ``columns`` of the whole group.
    """
    futs: dict[int, Future[pa.Table]] = {}

    def work(h: FileHandle, rg: int) -> pa.Table:
        if read is not None:
            t = read(h, rg)
        else:
            ft = h.tail()
            t = read_row_group(h, ft, rg, columns, h.prefetch(ft, rg, columns))
        return transform(h, rg, t) if transform is not None else t

    nxt = 0
    for i, (h, rg) in enumerate(items):
        while nxt < len(items) and nxt <= i + depth:
            futs[nxt] = submit(work, *items[nxt])
            nxt += 1
        yield h, rg, futs.pop(i).result()


# --- filtered reads: page level through the page index, else whole row groups -------------
PAGE_COALESCE_GAP = 256 << 10
"""Page reads merge ranges closer than this (smaller than for chunks: pages are small)."""
PAGE_READ_MAX_FRACTION = 0.5
"""Page-level reads only when the candidate rows are at most this share of the group."""
MAX_INDEX_BYTES = 16 << 20
"""A page index larger than this is not loaded (reads fall back to whole row groups)."""


@dataclass(frozen=True, slots=True)
class RowFilter:
    """What a read keeps: rows not in the DV that match the filter.

    Attributes:
        dnf: The filter (pages are chosen by its predicates), or None for all rows.
        schema: The table's schema (column types for the page bounds).
        keep: DV keep mask of rows ``[start, start + n)`` of a file, None when none is deleted.
        expression: ``dnf``'s expression (rows are chosen by it).
        rows: Candidate rows ``[start, start + n)`` of a file known beforehand (from a
            secondary index), relative to ``start``; None: not known.
    """

    dnf: Dnf | None
    schema: pa.Schema
    keep: Callable[[DataFile, int, int], pa.Array | None]
    expression: pc.Expression | None = None
    rows: Callable[[DataFile, int, int], pages.Ranges | None] | None = None

    @classmethod
    def of(
        cls,
        dnf: Dnf | None,
        schema: pa.Schema,
        keep: Callable[[DataFile, int, int], pa.Array | None],
        rows: Callable[[DataFile, int, int], pages.Ranges | None] | None = None,
    ) -> RowFilter:
        return cls(dnf, schema, keep, dnf.expression() if dnf is not None else None, rows)


def read_filtered(
    handle: FileHandle,
    rg: int,
    first_row: int,
    columns: Sequence[str],
    rf: RowFilter,
    *,
    page_index: bool = True,
) -> pa.Table:
    """The rows of row group ``rg`` (whose first row is ``first_row`` of the file) that
    ``rf`` keeps, projected to ``columns``.

    With a filter and ``page_index``, only the pages that can hold matching rows are read
    (:func:`read_pages`); otherwise, or when that does not apply, the group's chunks.
    """
    if page_index and rf.dnf is not None:
        got = read_pages(handle, rg, first_row, columns, rf)
        if got is not None:
            return got
    cols = list(dict.fromkeys([*columns, *(rf.dnf.columns if rf.dnf else [])]))
    ft = handle.tail()
    t = read_row_group(handle, ft, rg, cols, handle.prefetch(ft, rg, cols))
    mask = rf.keep(handle.file, first_row, t.num_rows)
    if mask is not None:
        t = drop_rows(t, mask)
    if rf.expression is not None:
        t = t.filter(rf.expression)
    return t.select(list(columns))


@dataclass(frozen=True, slots=True)
class _PagePlan:
    layouts: dict[str, pages.ChunkLayout]
    candidates: pages.Ranges


def read_pages(
    handle: FileHandle, rg: int, first_row: int, columns: Sequence[str], rf: RowFilter
) -> pa.Table | None:
    """:func:`read_filtered` through the page index; None when page level does not apply.

    The filter columns' ColumnIndexes give the candidate rows; their pages overlapping
    those rows (with the dictionary page when one of them needs it) are fetched, decoded
    and filtered (DV, then expression); then the other columns' pages overlapping the
    matching rows. It does not apply without a page index, to nested or repeated columns,
    or when the candidates are more than :data:`PAGE_READ_MAX_FRACTION` of the group.
    """
    assert rf.dnf is not None
    pi = handle.page_index(handle.tail())
    if pi is None:
        return None
    known = rf.rows(handle.file, first_row, pi.num_rows(rg)) if rf.rows is not None else None
    plan = _plan_pages(pi, rg, columns, rf.dnf, rf.schema, known)
    if plan is None:
        return None
    try:
        return _read_planned(handle, pi, rg, first_row, columns, rf, plan)
    except (pqm.InvalidParquet, pa.ArrowException) as e:
        log.warning(
            "page-level read of %s row group %s fell back to the whole group (%s)",
            handle.key,
            rg,
            type(e).__name__,
        )
        return None


def _plan_pages(
    pi: PageIndex,
    rg: int,
    columns: Sequence[str],
    dnf: Dnf,
    schema: pa.Schema,
    known: pages.Ranges | None = None,
) -> _PagePlan | None:
    layouts: dict[str, pages.ChunkLayout] = {}
    for c in dict.fromkeys([*dnf.columns, *columns]):
        leaf = pi.leaf(c)
        layout = pi.layout(rg, leaf) if leaf is not None else None
        if layout is None:
            return None
        layouts[c] = layout
    n = pi.num_rows(rg)
    full: pages.Ranges = ((0, n),) if known is None else known
    cand: pages.Ranges = ()
    for clause in dnf.clauses:
        rows = full
        for p in clause:
            layout = layouts[p.column]
            bounds = pi.bounds(rg, layout.column, schema.field(p.column).type)
            if bounds is None or len(bounds) != len(layout.pages):
                continue
            hits = tuple(
                (s.first_row, s.end_row)
                for s, b in zip(layout.pages, bounds, strict=True)
                if _page_may_match(p, b)
            )
            rows = pages.intersect(rows, pages.union(hits))
        cand = pages.union(cand, rows)
    if pages.count(cand) > PAGE_READ_MAX_FRACTION * n:
        return None
    return _PagePlan(layouts, cand)


def _page_may_match(p: Predicate, b: pages.PageBound) -> bool:
    """Whether a page with bounds ``b`` may hold a row matching ``p`` (nulls included:
    pyarrow's ``not in`` keeps nulls, and ``in`` with a None member matches them)."""
    nulls_match = (p.op == "in" and p.has_null) or (p.op == "not in" and not p.has_null)
    if nulls_match and (b.all_null or b.null_count is None or b.null_count > 0):
        return True
    if b.all_null:
        return False
    return p.may_match((b.lo, b.hi, b.null_count))


def _row_name(names: Sequence[str]) -> str:
    name = "__lethe_row"
    while name in names:
        name += "_"
    return name


def _read_planned(
    handle: FileHandle,
    pi: PageIndex,
    rg: int,
    first_row: int,
    columns: Sequence[str],
    rf: RowFilter,
    plan: _PagePlan,
) -> pa.Table:
    assert rf.dnf is not None and rf.expression is not None
    out_schema = pa.schema([rf.schema.field(c) for c in columns])
    if not plan.candidates:
        return out_schema.empty_table()
    fcols = rf.dnf.columns
    # columns whose pages over the candidates are few come along now (one round fewer)
    cheap = [c for c in columns if c not in fcols and _cheap(plan.layouts[c], plan.candidates)]
    first = {c: plan.layouts[c] for c in [*fcols, *cheap]}
    got = _read_columns(handle, pi, rg, first, plan.candidates)
    row = _row_name(rf.schema.names)
    rows = _row_indices(plan.candidates)
    t = pa.table({**got, row: pa.array(rows)})
    mask = _dv_mask(rf, handle.file, first_row, plan.candidates)
    if mask is not None:
        t = t.filter(mask)
    t = t.filter(rf.expression)
    rest = [c for c in columns if c not in got]
    if not t.num_rows:
        return out_schema.empty_table()
    if rest:
        matched = t.column(row).to_numpy()
        more = _read_columns(
            handle, pi, rg, {c: plan.layouts[c] for c in rest}, pages.runs(matched)
        )
        return pa.table({c: more[c] if c in more else t.column(c) for c in columns})
    return t.select(list(columns))


def _cheap(layout: pages.ChunkLayout, rows: pages.Ranges) -> bool:
    """Whether reading a column's pages over ``rows`` costs little more than over a few of
    them (then it is read with the filter columns instead of in a second round)."""
    return sum(p.size for p in layout.overlapping(rows)) <= PAGE_COALESCE_GAP


def _row_indices(ranges: pages.Ranges) -> Any:
    return np.concatenate([np.arange(s, e, dtype=np.int64) for s, e in ranges])


def _dv_mask(rf: RowFilter, f: DataFile, first_row: int, ranges: pages.Ranges) -> pa.Array | None:
    parts = [rf.keep(f, first_row + s, e - s) for s, e in ranges]
    if all(m is None for m in parts):
        return None
    return pa.concat_arrays(
        [
            m if m is not None else pa.array(np.ones(e - s, dtype=bool))
            for m, (s, e) in zip(parts, ranges, strict=True)
        ]
    )


def _read_columns(
    handle: FileHandle,
    pi: PageIndex,
    rg: int,
    layouts: dict[str, pages.ChunkLayout],
    rows: pages.Ranges,
) -> dict[str, pa.ChunkedArray]:
    """The values of ``rows`` (in order) of each column, read from the pages holding them."""
    chosen = {c: layout.overlapping(rows) for c, layout in layouts.items()}
    spans: list[tuple[int, int]] = []
    for c, ps in chosen.items():
        spans += [(p.offset, p.offset + p.size) for p in ps]
        d = layouts[c].dictionary
        if d is not None and layouts[c].predicts_dictionary(ps):
            spans.append((d.start, d.end))
    sparse = handle.fetch_ranges(handle.tail(), spans, gap=PAGE_COALESCE_GAP)
    wanted = _row_indices(rows)
    out: dict[str, pa.ChunkedArray] = {}
    for c, ps in chosen.items():
        layout = layouts[c]
        raw = [sparse.read_at(p.offset, p.size) for p in ps]
        d = layout.dictionary
        dictionary = None
        if d is not None and (layout.predicts_dictionary(ps) or pages.dictionary_needed(raw)):
            dictionary = sparse.read_at(d.start, d.length)  # a GET only if mispredicted
        file = pages.chunk_file(
            pi.schema(layout.column),
            pi.chunk(rg, layout.column),
            dictionary,
            raw,
            [p.rows for p in ps],
        )
        values = pages.decode_chunk(file)
        pos = pages.positions(ps, wanted)
        out[c] = values if len(pos) == len(values) else values.take(pa.array(pos))
    return out


def read_positions(handle: FileHandle, columns: Sequence[str], positions: Any) -> pa.Table:
    """The values of ``columns`` at ``positions`` (sorted, distinct; deleted rows included)
    of the file, in position order: per row group holding some, only the pages holding them
    when the page index allows, else the group's chunks."""
    tail, pos = handle.tail(), np.asarray(positions, dtype=np.int64)
    pi, parts, first = handle.page_index(tail), [], 0
    full = tail.arrow.schema.to_arrow_schema()
    schema = pa.schema([full.field(c) for c in columns])
    for rg in range(tail.arrow.num_row_groups):
        n = tail.arrow.row_group(rg).num_rows
        mine = pos[(pos >= first) & (pos < first + n)] - first
        first += n
        if not len(mine):
            continue
        leaves = {c: pi.leaf(c) for c in columns} if pi is not None else {}
        lay = {c: pi.layout(rg, lf) for c, lf in leaves.items() if pi and lf is not None}
        if pi is not None and len(lay) == len(columns) and all(lay.values()):
            try:
                got = _read_columns(handle, pi, rg, lay, pages.runs(mine))  # type: ignore[arg-type]
                parts.append(pa.table({c: got[c] for c in columns}).cast(schema))
                continue
            except (pqm.InvalidParquet, pa.ArrowException):
                pass  # the group's chunks below
        t = read_row_group(handle, tail, rg, columns, handle.prefetch(tail, rg, columns))
        parts.append(t.take(pa.array(mine)).cast(schema))
    return pa.concat_tables(parts) if parts else schema.empty_table()
