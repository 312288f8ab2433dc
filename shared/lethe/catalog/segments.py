"""The reader of one table's immutable objects below its roots: segments and superseded
lists, loaded once per key (they never change) and kept in LRUs; every
:class:`~lethe.catalog.snapshot.Snapshot` of the table loads through it. It also remembers
which segment held which file (:meth:`Segments.where`, the hint that lets a commit find the
one segment to rewrite)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from lethe import errors
from lethe.catalog.manifest import (
    Segment,
    SegmentSummary,
    SupersededList,
    decode_segment,
    decode_superseded,
)
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store

__all__ = ["GC_EXPIRY", "Segments"]

#: Why GC removes a version (the messages of a reader that asks for one it removed).
GC_EXPIRY = (
    "older than GC's retention, or from before an erasure whose splice is older than the "
    "erasure grace"
)


class Segments:
    """The segments of one table: loaded once per key (they are immutable), kept in an LRU
    bounded by the file entries it holds, and indexed by the files they hold (:meth:`where`,
    a hint)."""

    def __init__(self, store: S3Store, prefix: str, *, capacity: int = 250_000) -> None:
        self.store, self.prefix, self.capacity = store, prefix, capacity
        self._cache: OrderedDict[str, Segment] = OrderedDict()
        self._entries = 0
        self._where: dict[str, str] = {}
        self._lists: OrderedDict[str, SupersededList] = OrderedDict()
        self._lock = threading.Lock()
        self.table_uuid: str | None = None

    def _fetch(self, path: str, what: str, then: str) -> tuple[bytes, str]:
        """The body of the object at table-relative ``path`` and its URI; a missing one is
        :class:`~lethe.errors.StaleSnapshot` (GC keeps every one a retained version names)."""
        uri = f"s3://{self.store.bucket}/{object_key(self.prefix, path)}"
        try:
            return self.store.get(object_key(self.prefix, path)).body, uri
        except errors.NotFound as e:
            raise errors.StaleSnapshot(
                f"{what} {uri} is gone: the version being read was garbage-collected "
                f"({GC_EXPIRY}); open the table again{then}"
            ) from e

    def remember(self, path: str, seg: Segment) -> None:
        """Cache ``seg``, stored (or about to be) at table-relative ``path``."""
        with self._lock:
            if path not in self._cache:
                self._entries += len(seg.files)
            self._cache[path] = seg
            self._cache.move_to_end(path)
            while self._entries > self.capacity and len(self._cache) > 1:
                _, old = self._cache.popitem(last=False)
                self._entries -= len(old.files)
            for f in seg.files:
                self._where[f.path] = seg.id

    def load(self, summary: SegmentSummary) -> Segment:
        with self._lock:
            seg = self._cache.get(summary.path)
            if seg is not None:
                self._cache.move_to_end(summary.path)
                return seg
        then = " (if its current version fails too, the table is damaged: lethe verify)"
        raw, uri = self._fetch(summary.path, "segment", then)
        seg = decode_segment(raw, where=uri, table_uuid=self.table_uuid)
        if seg.id != summary.id or len(seg.files) != summary.files:
            raise errors.CorruptManifest(
                f"segment {summary.path} does not match its summary (id or file count)"
            )
        self.remember(summary.path, seg)
        return seg

    def load_many(self, summaries: Sequence[SegmentSummary]) -> list[Segment]:
        if len(summaries) <= 1:
            return [self.load(s) for s in summaries]
        with ThreadPoolExecutor(max_workers=min(16, len(summaries))) as pool:
            return list(pool.map(self.load, summaries))

    def where(self, path: str) -> str | None:
        with self._lock:
            return self._where.get(path)

    def remember_superseded(self, path: str, obj: SupersededList) -> None:
        """Cache a superseded list, stored (or about to be) at table-relative ``path``."""
        with self._lock:
            self._lists[path] = obj
            self._lists.move_to_end(path)
            while len(self._lists) > 4096:
                self._lists.popitem(last=False)

    def load_superseded(self, path: str) -> SupersededList:
        """The superseded list at ``path`` (immutable: loaded once, then cached)."""
        with self._lock:
            got = self._lists.get(path)
        if got is not None:
            return got
        raw, uri = self._fetch(path, "superseded list", "")
        got = decode_superseded(raw, where=uri, table_uuid=self.table_uuid)
        self.remember_superseded(path, got)
        return got
