"""A streaming multipart upload to S3 as a binary file-like sink (``S3Store.open_writer``)."""

from __future__ import annotations

import builtins
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from lethe import errors
from lethe.storage.parts import PartBody

if TYPE_CHECKING:  # pragma: no cover
    from lethe.storage.store import S3Store

__all__ = ["MAX_PARTS", "MAX_PART_BYTES", "MIN_PART_BYTES", "MultipartWriter"]

MIN_PART_BYTES = 5 << 20
MAX_PART_BYTES = 5 << 30
MAX_PARTS = 10_000


class MultipartWriter:
    """A binary file-like sink that streams to S3 with a multipart upload.

    Writes are kept as they come (not copied, see :class:`PartBody`) until they make a part
    of ``part_bytes``, which uploads on a background thread while the caller writes on (at
    most ``in_flight`` parts at a time; a failed part surfaces at the next write or close).
    Under one part, a single create-only PUT; a multipart upload completes create-only. On
    any failure, or :meth:`abort`, the upload is aborted so that no orphaned parts remain.
    """

    def __init__(
        self, store: S3Store, key: str, *, part_bytes: int = 8 << 20, in_flight: int = 2
    ) -> None:
        if part_bytes < MIN_PART_BYTES:
            raise errors.InvalidRequest("part_bytes must be at least 5 MiB")
        self.store = store
        self.key = key
        self.part_bytes = part_bytes
        self.in_flight = max(1, in_flight)
        self._chunks: builtins.list[bytes] = []
        self._buffered = 0
        self._upload_id: str | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._running: deque[tuple[int, Future[str]]] = deque()
        self._parts: builtins.list[tuple[int, str]] = []
        self._pos = 0
        self.closed = False
        self.etag: str | None = None

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    def flush(self) -> None:
        return None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:
            raise ValueError("write to a closed MultipartWriter")
        chunk = data if isinstance(data, bytes) else bytes(data)  # the caller may reuse its buffer
        self._chunks.append(chunk)
        self._buffered += len(chunk)
        self._pos += len(chunk)
        if self._buffered >= self.part_bytes:
            try:
                self._submit(self._take())
            except BaseException:
                self.abort()
                raise
        return len(chunk)

    def _take(self) -> PartBody:
        part, self._chunks, self._buffered = PartBody(self._chunks), [], 0
        return part

    def _submit(self, body: PartBody) -> None:
        """Start uploading ``body`` as the next part, once fewer than ``in_flight`` run."""
        if self._upload_id is None:
            self._upload_id = self.store.create_multipart(self.key)
            self._pool = ThreadPoolExecutor(self.in_flight, thread_name_prefix="lethe-upload")
        assert self._pool is not None
        while len(self._running) >= self.in_flight:
            self._collect_oldest()
        n = len(self._parts) + len(self._running) + 1
        fut = self._pool.submit(self.store.upload_part, self.key, self._upload_id, n, body)
        self._running.append((n, fut))

    def _collect_oldest(self) -> None:
        n, fut = self._running.popleft()
        self._parts.append((n, fut.result()))

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._upload_id is None:
                self.etag = self.store.put(self.key, b"".join(self._chunks), if_none_match=True)
            else:
                if self._buffered:
                    self._submit(self._take())
                while self._running:
                    self._collect_oldest()
                self.etag = self.store.complete_multipart(self.key, self._upload_id, self._parts)
                self._upload_id = None
        except BaseException:
            self.abort()
            raise
        finally:
            self._shutdown()
            self.closed = True

    def abort(self) -> None:
        self._shutdown()
        if self._upload_id is not None:
            self.store.abort_multipart(self.key, self._upload_id)
            self._upload_id = None
        self.closed = True

    def _shutdown(self) -> None:
        """Wait for the running parts (their outcome no longer matters), stop the pool."""
        for _, fut in self._running:
            fut.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._running.clear()
        self._chunks, self._buffered = [], 0

    def __enter__(self) -> MultipartWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
