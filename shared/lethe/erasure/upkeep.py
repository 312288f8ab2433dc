"""The index upkeep of a splice (issue 37 item 3): a purge reads each file once.

The splice that removes rows holds their pages (page level), their row groups, or the whole
file in its :class:`~lethe.erasure.splice_io.Fetcher`. :func:`removed_values` reads the
indexed columns' values of the removed rows through a handle over those bytes: a page the
splice holds is not fetched again; only what it never read (a row group that leaves whole)
is fetched, ranged to the indexed columns' pages. The splices' commit then scrubs the pieces
with those values (:func:`spliced_rows` into :func:`lethe.index.erase.scrub_rows`): no data
file is read for the index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pyroaring import BitMap64

from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.erasure.splice_io import Fetcher
from lethe.index.erase import file_values
from lethe.parquet.footer import Footer, index_region
from lethe.reading.reader import FileHandle, PageIndex, Tail
from lethe.storage.store import S3Store

__all__ = ["removed_values", "spliced_rows"]


class _Held:
    """A :class:`~lethe.storage.objects.PinnedObject`'s reads served by a splice's fetcher
    (its bytes in memory first, only the gaps by pinned ranged GETs)."""

    def __init__(self, fetch: Fetcher, size: int) -> None:
        self.fetch, self.size = fetch, size

    def read(self, start: int, end: int) -> bytes:
        return self.fetch.get(start, end) if end > start else b""

    def tail(self, n: int) -> bytes:
        return self.read(self.size - min(self.size, n), self.size)

    def read_ranges(
        self, ranges: Sequence[tuple[int, int]], *, gap: int = 0, held_from: int | None = None
    ) -> list[tuple[int, bytes]]:
        self.fetch.get_many(ranges, gap)
        return [(s, self.read(s, e)) for s, e in sorted(ranges) if e > s]


class _HeldHandle(FileHandle):
    """A :class:`~lethe.reading.reader.FileHandle` reading through a splice's fetcher, its
    page index from the footer the splice parsed (not parsed again)."""

    def __init__(self, store: S3Store, f: DataFile, fetch: Fetcher, footer: Footer) -> None:
        super().__init__(store, fetch.source.key, f)
        self.object = _Held(fetch, f.size)  # type: ignore[assignment]
        self.fetch, self.footer = fetch, footer

    def _load_page_index(self, tail: Tail) -> PageIndex:
        span = index_region(self.footer)
        if span is None:
            return PageIndex(None, 0, b"")
        return PageIndex(self.footer, span.start, self.fetch.get(span.start, span.end))


def removed_values(
    store: S3Store, m: Snapshot, f: DataFile, fetch: Fetcher, footer: Footer, removed: BitMap64
) -> dict[str, frozenset[Any]]:
    """Per index of ``m``, the values of ``f``'s rows at ``removed`` (comparable form),
    read from what ``fetch`` holds, ``footer`` the file's as the splice parsed it (never a
    value logged)."""
    if not m.indexes or not removed:
        return {}
    cols = [ix.column for ix in m.indexes]
    got = file_values(_HeldHandle(store, f, fetch, footer), m, cols, removed)
    return {c: frozenset(v) for c, v in got.items()}


class Spliced(Protocol):
    """What the scrub needs of a splice (:class:`~lethe.erasure.splice_file.SpliceResult`)."""

    @property
    def old(self) -> DataFile: ...
    @property
    def removed(self) -> BitMap64: ...
    @property
    def values(self) -> dict[str, frozenset[Any]]: ...


def spliced_rows(splices: Iterable[Spliced]) -> tuple[dict[str, BitMap64], dict[str, set[Any]]]:
    """What the ``splices`` removed, for :func:`lethe.index.erase.scrub_rows`: file ->
    positions, and indexed column -> the values the splices read of those rows."""
    found: dict[str, BitMap64] = {}
    values: dict[str, set[Any]] = {}
    for s in splices:
        found[s.old.path] = s.removed
        for c, v in s.values.items():
            values.setdefault(c, set()).update(v)
    return found, values
