"""One object version on S3, read pinned to its ETag: ranged, tail and many-range reads.

Every GET of a :class:`PinnedObject` carries ``If-Match: <etag>``, so an object replaced
under its reader fails loudly (:class:`~lethe.errors.StaleSnapshot`, with the reader's own
reason) instead of mixing bytes of two versions. Many ranges are coalesced (ranges closer
than ``gap`` bytes become one GET) and fetched in parallel on the I/O pool, whose tasks never
wait on other tasks (callers that wait on range GETs run on pools of their own, so nested
waits cannot deadlock).

The data file reader (:mod:`lethe.reading.reader`) and the splice (:mod:`lethe.erasure.erase`) read through
it; :class:`~lethe.storage.store.S3Store` is the only thing it talks to.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lethe import errors
from lethe.storage.store import S3Store

__all__ = ["COALESCE_GAP", "PinnedObject", "coalesce", "io_pool"]

COALESCE_GAP = 1 << 20  # a GET costs about as much time as ~1 MiB of transfer

_POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="lethe-io")

CHANGED = "{uri} changed (ETag {etag} no longer matches)"


def io_pool() -> ThreadPoolExecutor:
    """The pool range GETs run on (its tasks never wait on other tasks)."""
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


@dataclass(frozen=True, slots=True)
class PinnedObject:
    """One version of one object (``size`` bytes, ``etag``), every read pinned to it.

    Attributes:
        store: the store of the object's bucket.
        key: the object's key.
        etag: the ETag every GET must match.
        size: the object's size in bytes.
        changed: the :class:`~lethe.errors.StaleSnapshot` message when the ETag no longer
            matches; ``{uri}``, ``{key}`` and ``{etag}`` are filled in.
        gone: the :class:`~lethe.errors.StaleSnapshot` message when the object is gone;
            None lets :class:`~lethe.errors.NotFound` through.
    """

    store: S3Store
    key: str
    etag: str
    size: int
    changed: str = CHANGED
    gone: str | None = None

    @property
    def uri(self) -> str:
        if self.key.startswith("s3://"):  # an adopted file in place, in any bucket
            return self.key
        return f"s3://{self.store.bucket}/{self.key}"

    def _reason(self, template: str) -> str:
        return template.format(uri=self.uri, key=self.key, etag=self.etag)

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` (one ranged GET; nothing for an empty range).

        Raises:
            StaleSnapshot: the object no longer has this ETag (or is gone, with ``gone``).
        """
        try:
            return self.store.get(self.key, etag=self.etag, start=start, end=end).body
        except errors.PreconditionFailed as e:
            raise errors.StaleSnapshot(self._reason(self.changed)) from e
        except errors.NotFound as e:
            if self.gone is None:
                raise
            raise errors.StaleSnapshot(self._reason(self.gone)) from e

    def tail(self, n: int) -> bytes:
        """The last ``n`` bytes (all of them in a smaller object)."""
        return self.read(self.size - min(self.size, n), self.size)

    def read_ranges(
        self,
        ranges: Sequence[tuple[int, int]],
        *,
        gap: int = COALESCE_GAP,
        held_from: int | None = None,
    ) -> list[tuple[int, bytes]]:
        """``(start, bytes)`` of ``ranges`` coalesced within ``gap``, fetched in parallel
        (one range: in this thread).

        Args:
            ranges: ``[start, end)`` ranges, in any order.
            gap: ranges closer than this many bytes are fetched as one.
            held_from: the caller already holds the object from this offset on (the tail
                read with the footer): coalesced ranges starting there are not fetched.
        """
        todo = [r for r in coalesce(ranges, gap) if held_from is None or r[0] < held_from]
        if len(todo) == 1:
            s, e = todo[0]
            return [(s, self.read(s, e))]
        futs = [(s, io_pool().submit(self.read, s, e)) for s, e in todo]
        return [(s, fut.result()) for s, fut in futs]
