"""Reading data files: pinned footers, planned ranged GETs of column chunks, DVs applied.

Every GET of a data file carries ``If-Match: <etag in the manifest>``, so an object replaced
under a pinned snapshot fails loudly (:class:`~lethe.errors.StaleSnapshot`) instead of
mixing data. Only the column chunks of the row groups that survive pruning are fetched;
adjacent chunks are coalesced into one ranged GET and fetched in parallel.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.manifest import DataFile, DVRef
from lethe.store import S3Store

log = logging.getLogger(__name__)

__all__ = ["FileHandle", "Footer", "FooterCache", "SparseFile", "coalesce", "read_row_group"]

TAIL_BYTES = 256 << 10
COALESCE_GAP = 1 << 20  # a GET costs about as much time as ~1 MiB of transfer

# Range GETs run on _POOL and never wait on other tasks; row-group prefetches run on _OUTER
# and wait on range GETs. Two pools, so nested waits cannot deadlock.
_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lethe-io")
_OUTER = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lethe-prefetch")


def io_pool() -> ThreadPoolExecutor:
    return _POOL


def coalesce(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP) -> list[tuple[int, int]]:
    """Merge ``[start, end)`` ranges closer than ``gap`` bytes.

    >>> coalesce([(10, 20), (25, 30), (100, 110)], gap=10)
    [(10, 30), (100, 110)]
    """
    out: list[tuple[int, int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1] + gap:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


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
class Footer:
    """A parsed footer with the tail bytes it came from (they often hold the page index)."""

    metadata: pq.FileMetaData
    tail_start: int
    tail: bytes

    def leaf_indices(self, columns: Sequence[str] | None) -> list[int]:
        """Leaf column indices of the given top-level columns (all when None)."""
        md = self.metadata
        if columns is None:
            return list(range(md.num_columns))
        want = set(columns)
        return [i for i in range(md.num_columns) if md.schema.column(i).path.split(".")[0] in want]


class FooterCache:
    """Process-wide LRU of footers keyed by (bucket, key, etag): a warm snapshot's lookups
    and deletes need no footer GET."""

    def __init__(self, capacity: int = 512) -> None:
        self.capacity = capacity
        self._d: OrderedDict[tuple[str, str, str], Footer] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, k: tuple[str, str, str]) -> Footer | None:
        with self._lock:
            f = self._d.get(k)
            if f is not None:
                self._d.move_to_end(k)
            return f

    def put(self, k: tuple[str, str, str], f: Footer) -> None:
        with self._lock:
            self._d[k] = f
            while len(self._d) > self.capacity:
                self._d.popitem(last=False)


FOOTERS = FooterCache()


class FileHandle:
    """One data file of a pinned snapshot."""

    def __init__(
        self, store: S3Store, key: str, f: DataFile, *, footers: FooterCache = FOOTERS
    ) -> None:
        self.store = store
        self.key = key
        self.file = f
        self._footers = footers

    def fetch(self, start: int, end: int) -> bytes:
        try:
            return self.store.get(self.key, etag=self.file.etag, start=start, end=end).body
        except errors.PreconditionFailed as e:
            raise errors.StaleSnapshot(
                f"s3://{self.store.bucket}/{self.key} changed since the snapshot was taken "
                f"(ETag {self.file.etag} no longer matches); data files must never be overwritten"
            ) from e
        except errors.NotFound as e:
            raise errors.StaleSnapshot(
                f"s3://{self.store.bucket}/{self.key} is referenced by the snapshot but is gone "
                "(garbage-collected or deleted out of band)"
            ) from e

    def footer(self) -> Footer:
        ck = (self.store.bucket, self.key, self.file.etag)
        cached = self._footers.get(ck)
        if cached is not None:
            return cached
        size = self.file.size
        n = min(size, TAIL_BYTES)
        tail = self.fetch(size - n, size)
        if len(tail) < 8 or tail[-4:] != b"PAR1":
            if tail[-4:] == b"PARE":
                raise errors.UnsupportedFile(f"{self.key} is an encrypted Parquet file")
            raise errors.UnsupportedFile(f"{self.key} is not a Parquet file (no PAR1 trailer)")
        flen = int.from_bytes(tail[-8:-4], "little")
        if flen + 8 > n:
            if flen + 8 > size:
                raise errors.UnsupportedFile(f"{self.key}: footer length {flen} exceeds file size")
            extra = self.fetch(size - flen - 8, size - n)
            tail = extra + tail
            n = len(tail)
        md = pq.read_metadata(pa.BufferReader(tail[-(flen + 8) :]))
        ft = Footer(md, size - n, tail)
        self._footers.put(ck, ft)
        return ft

    def chunk_ranges(self, footer: Footer, rg: int, leaves: Sequence[int]) -> list[tuple[int, int]]:
        g = footer.metadata.row_group(rg)
        out = []
        for i in leaves:
            c = g.column(i)
            d = c.dictionary_page_offset
            first = (
                d
                if (c.has_dictionary_page and d is not None and 0 < d < c.data_page_offset)
                else c.data_page_offset
            )
            out.append((first, first + c.total_compressed_size))
        return out

    def prefetch(self, footer: Footer, rg: int, columns: Sequence[str] | None) -> SparseFile:
        """Fetch the chunks of ``columns`` in row group ``rg`` (parallel coalesced GETs)."""
        sparse = SparseFile(self.file.size, self.fetch)
        sparse.add(footer.tail_start, footer.tail)
        ranges = coalesce(self.chunk_ranges(footer, rg, footer.leaf_indices(columns)))
        ranges = [r for r in ranges if not (r[0] >= footer.tail_start)]
        if len(ranges) == 1:
            s, e = ranges[0]
            sparse.add(s, self.fetch(s, e))
        else:
            futs = [(s, io_pool().submit(self.fetch, s, e)) for s, e in ranges]
            for s, fut in futs:
                sparse.add(s, fut.result())
        return sparse


def read_row_group(
    handle: FileHandle, footer: Footer, rg: int, columns: Sequence[str] | None, sparse: SparseFile
) -> pa.Table:
    pf = pq.ParquetFile(pa.PythonFile(sparse, mode="r"), metadata=footer.metadata, pre_buffer=False)
    return pf.read_row_group(
        rg, columns=list(columns) if columns is not None else None, use_threads=False
    )


def submit(fn: Callable[..., Any], *args: Any) -> Future[Any]:
    """Run a task that may itself wait on range GETs (never on the range pool)."""
    return _OUTER.submit(fn, *args)


def load_dv_bytes(store: S3Store, prefix: str, ref: DVRef) -> bytes:
    """The blob bytes of a DV reference (inline or a ranged GET of its container)."""
    import base64

    if ref.inline is not None:
        return base64.b64decode(ref.inline)
    if ref.container is None:
        raise errors.CorruptDeletionVector("DV reference has neither container nor inline blob")
    key = f"{prefix}/{ref.container}" if prefix else ref.container
    return store.get(key, start=ref.offset, end=ref.offset + ref.length).body


def iter_row_groups(
    items: Sequence[tuple[FileHandle, int]],
    columns: Sequence[str] | None,
    *,
    depth: int = 3,
    transform: Callable[[FileHandle, int, pa.Table], pa.Table] | None = None,
) -> Iterator[tuple[FileHandle, int, pa.Table]]:
    """Fetch, decode and ``transform`` ``(file, row group)`` items in worker threads,
    ``depth`` items ahead of the consumer, yielding them in order."""
    futs: dict[int, Future[pa.Table]] = {}

    def work(h: FileHandle, rg: int) -> pa.Table:
        ft = h.footer()
        t = read_row_group(h, ft, rg, columns, h.prefetch(ft, rg, columns))
        return transform(h, rg, t) if transform is not None else t

    nxt = 0
    for i, (h, rg) in enumerate(items):
        while nxt < len(items) and nxt <= i + depth:
            futs[nxt] = submit(work, *items[nxt])
            nxt += 1
        yield h, rg, futs.pop(i).result()
