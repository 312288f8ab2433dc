"""Reading data files: pinned tails and footers, planned ranged GETs of column chunks.

Every GET of a data file carries ``If-Match: <etag in the manifest>``, so an object replaced
under a pinned snapshot fails loudly (:class:`~lethe.errors.StaleSnapshot`) instead of
mixing data. Only the column chunks of the row groups that survive pruning are fetched;
adjacent chunks are coalesced into one ranged GET and fetched in parallel. Filtered reads
(pages through the page index, DVs applied) are :mod:`lethe.reading.filtered`'s; tails and
page indexes are cached per ETag (:mod:`lethe.reading.footers`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.manifest import DataFile
from lethe.parquet import footer as pqf
from lethe.reading.footers import (
    PAGE_INDEXES,
    TAILS,
    LruCache,
    PageIndex,
    Tail,
    TailCache,
    load_page_index,
)
from lethe.reading.sparse import SparseFile
from lethe.storage.objects import COALESCE_GAP, PinnedObject
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = [
    "TAILS",
    "FileHandle",
    "LruCache",  # re-exported: lethe.reading.footers
    "PageIndex",
    "SparseFile",  # re-exported: lethe.reading.sparse
    "Tail",
    "TailCache",
    "iter_row_groups",
    "read_row_group",
    "submit",
]

TAIL_BYTES = 256 << 10

# Range GETs run on lethe.storage.objects' I/O pool and never wait on other tasks; row-group
# prefetches run on _OUTER and wait on range GETs. Two pools, so nested waits cannot deadlock.
_OUTER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lethe-prefetch")


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
            pi = load_page_index(tail, self.file.size, self.object.read, self.key)
            PAGE_INDEXES.put(ck, pi)
        return pi if pi.has_index else None


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
