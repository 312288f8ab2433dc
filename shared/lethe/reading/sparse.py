"""A read-only file object over the byte ranges of one object fetched so far (pyarrow reads
column chunks and pages from it)."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable

from lethe.storage.fileobj import FileObject

log = logging.getLogger(__name__)

__all__ = ["SparseFile"]


class SparseFile(FileObject):
    """A read-only file object over the ranges of one object already fetched.

    pyarrow reads column chunks from it; a read outside the fetched ranges falls back to a
    pinned ranged GET (counted, logged) so correctness never depends on the plan.
    """

    READABLE = SEEKABLE = True

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

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self.closed = True
