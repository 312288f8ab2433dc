"""A snapshot: one manifest plus the reader of its segments.

The manifest models (:mod:`lethe.catalog.manifest`) are only data: a format-2 root lists its
segments by :class:`~lethe.catalog.manifest.SegmentSummary` and never loads them. A
:class:`Snapshot` is what readers and commits work with: the frozen
:class:`~lethe.catalog.manifest.Manifest`, a :class:`SegmentSource` that loads (and caches, and
remembers which segment held which file) the table's immutable segment objects, and the
segments a commit built that are not stored yet (``pending``). :attr:`Snapshot.files` loads
every segment, :meth:`Snapshot.files_where` only those whose summary passes a test,
:meth:`Snapshot.file` the one that holds a path. The catalog
(:class:`lethe.catalog.commit.Catalog`) hands out snapshots and stores their pending segments
before their manifest; the transforms (:mod:`lethe.catalog.transforms`) build snapshot N+1 from N,
with :meth:`Snapshot.evolve` for changes of the root alone.

>>> import pyarrow as pa
>>> from lethe.catalog.manifest import TableProperties, initial_manifest
>>> s = Snapshot(initial_manifest(table_uuid="t", schema=pa.schema([("id", pa.int64())]),
...                               properties=TableProperties(key="id")))
>>> (s.version, s.file_count, s.files, s.evolve(commit_id="c").manifest.commit_id)
(0, 0, (), 'c')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar, cast, overload

import pyarrow as pa

from lethe import errors
from lethe.catalog.manifest import (
    ColumnIndex,
    DataFile,
    DVRef,
    ErasureRecord,
    Manifest,
    Operation,
    OverlayDV,
    RequestRecord,
    Segment,
    SegmentSummary,
    SupersededList,
    TableProperties,
)

__all__ = ["SegmentSource", "Snapshot"]

V = TypeVar("V")


class SegmentSource(Protocol):
    """Loads a table's immutable segment objects (the catalog's cache)."""

    def load(self, summary: SegmentSummary) -> Segment: ...

    def load_many(self, summaries: Sequence[SegmentSummary]) -> list[Segment]: ...

    def where(self, path: str) -> str | None:
        """The id of the segment a path was last seen in (a hint), or None."""
        ...

    def load_superseded(self, path: str) -> SupersededList:
        """The superseded-list object at ``path`` (of an erasure record)."""
        ...


class _Of(Generic[V]):
    """A field of a snapshot's manifest, read through: ``snap.version`` is
    ``snap.manifest.version``."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, snap: None, owner: type) -> _Of[V]: ...
    @overload
    def __get__(self, snap: Snapshot, owner: type) -> V: ...
    def __get__(self, snap: Snapshot | None, owner: type) -> V | _Of[V]:
        return self if snap is None else cast(V, getattr(snap.manifest, self.name))


class Snapshot:
    """One manifest and the reader of its segments (see the module docstring).

    Equal when their manifests are equal. The fields of the manifest read through
    (``s.version``, ``s.properties``, ...); ``s.manifest`` is the model itself.
    """

    __slots__ = ("_all", "_lists", "_overlay", "_pending", "_source", "manifest")

    def __init__(
        self,
        manifest: Manifest,
        source: SegmentSource | None = None,
        pending: Mapping[str, Segment] | None = None,
        lists: Mapping[str, SupersededList] | None = None,
    ) -> None:
        self.manifest = manifest
        self._source = source
        referenced = {s.path for s in manifest.segments}
        self._pending = {p: s for p, s in (pending or {}).items() if p in referenced}
        refs = {r for e in manifest.erasures for r in e.superseded_refs}
        self._lists = {p: x for p, x in (lists or {}).items() if p in refs}
        self._all: tuple[DataFile, ...] | None = None
        self._overlay: dict[str, dict[str, DVRef]] | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Snapshot):
            return NotImplemented
        return self.manifest == other.manifest

    def __hash__(self) -> int:
        return hash((self.manifest.table_uuid, self.manifest.version, self.manifest.commit_id))

    def __repr__(self) -> str:
        m = self.manifest
        return f"Snapshot(version={m.version}, files={self.file_count}, uuid={m.table_uuid!r})"

    # --- building ------------------------------------------------------------------------------
    def evolve(self, **update: Any) -> Snapshot:
        """This snapshot with fields of its manifest replaced (same reader, and the pending
        segments and superseded lists the new manifest still references)."""
        return Snapshot(
            self.manifest.model_copy(update=update), self._source, self._pending, self._lists
        )

    def successor(
        self,
        manifest: Manifest,
        new_segments: Mapping[str, Segment] | None = None,
        new_lists: Mapping[str, SupersededList] | None = None,
    ) -> Snapshot:
        """A snapshot of ``manifest`` built from this one: same reader; pending are this
        snapshot's pending segments (and superseded lists) ``manifest`` still references,
        plus ``new_segments`` (and ``new_lists``)."""
        return Snapshot(
            manifest,
            self._source,
            {**self._pending, **(new_segments or {})},
            {**self._lists, **(new_lists or {})},
        )

    def stored(self, source: SegmentSource) -> Snapshot:
        """This snapshot once its pending objects are stored (loaded through ``source``)."""
        return Snapshot(self.manifest, source)

    @property
    def source(self) -> SegmentSource | None:
        return self._source

    def pending_segments(self) -> dict[str, Segment]:
        """Segments this snapshot references that are not stored yet (path -> segment)."""
        return dict(self._pending)

    def pending_lists(self) -> dict[str, SupersededList]:
        """Superseded lists its erasure records reference that are not stored yet."""
        return dict(self._lists)

    # --- erasure records -----------------------------------------------------------------------
    def superseded_of(self, e: ErasureRecord) -> tuple[str, ...]:
        """Every object erasure ``e`` superseded: its inline ``superseded`` (older
        manifests), then the paths of its superseded lists (pending, or loaded through the
        source, which caches them), each once, in order."""
        if not e.superseded_refs:
            return e.superseded
        paths = list(e.superseded)
        for ref in e.superseded_refs:
            got = self._lists.get(ref)
            if got is None:
                if self._source is None:
                    raise errors.CorruptManifest(
                        f"version {self.version}: superseded list {ref} cannot be loaded"
                    )
                got = self._source.load_superseded(ref)
            paths.extend(got.paths_of(e.id_hash))
        return tuple(dict.fromkeys(paths))

    def resolved(self, e: ErasureRecord) -> ErasureRecord:
        """``e`` with ``superseded`` holding every object it superseded (the form GC and
        receipts read; ``superseded_refs`` still name the lists)."""
        if not e.superseded_refs:
            return e
        return e.model_copy(update={"superseded": self.superseded_of(e)})

    # --- the manifest's fields (read through) ------------------------------------------------
    format_version = _Of[int]()
    layout = _Of[str]()
    table_uuid = _Of[str]()
    version = _Of[int]()
    previous = _Of[int | None]()
    commit_id = _Of[str]()
    created_at = _Of[datetime]()
    operation = _Of[Operation]()
    schema_b64 = _Of[str]()
    properties = _Of[TableProperties]()
    inline_files = _Of[tuple[DataFile, ...]]()
    segments = _Of[tuple[SegmentSummary, ...]]()
    dv_overlay = _Of[tuple[OverlayDV, ...]]()
    requests = _Of[tuple[RequestRecord, ...]]()
    erasures = _Of[tuple[ErasureRecord, ...]]()
    indexes = _Of[tuple[ColumnIndex, ...]]()
    key = _Of[str]()
    segmented = _Of[bool]()
    current_schema_id = _Of[int]()
    file_count = _Of[int]()
    total_rows = _Of[int]()  # live rows (physical rows minus deleted ones)

    def arrow_schema(self) -> pa.Schema:
        return self.manifest.arrow_schema()

    def schema_history(self) -> list[tuple[int, pa.Schema]]:
        return self.manifest.schema_history()

    def schema_of(self, f: DataFile) -> pa.Schema:
        return self.manifest.schema_of(f)

    def index(self, column: str) -> ColumnIndex | None:
        return self.manifest.index(column)

    def find_request(self, id_hash: str) -> RequestRecord | None:
        return self.manifest.find_request(id_hash)

    # --- segments ------------------------------------------------------------------------------
    def segment(self, summary: SegmentSummary) -> Segment:
        """The segment ``summary`` describes (pending, or loaded through the source)."""
        seg = self._pending.get(summary.path)
        if seg is not None:
            return seg
        if self._source is None:
            raise errors.CorruptManifest(
                f"version {self.version}: segment {summary.path} cannot be loaded (no source)"
            )
        return self._source.load(summary)

    def overlay_of(self, segment_id: str) -> dict[str, DVRef]:
        """The overlay's DVs of the files of one segment (path -> DV)."""
        if self._overlay is None:
            by_seg: dict[str, dict[str, DVRef]] = {}
            for o in self.manifest.dv_overlay:
                by_seg.setdefault(o.segment, {})[o.path] = o.dv
            self._overlay = by_seg
        return self._overlay.get(segment_id, {})

    def segment_files(
        self, summary: SegmentSummary, seg: Segment | None = None
    ) -> tuple[DataFile, ...]:
        """The files of one segment as of this snapshot (the DV overlay applied)."""
        seg = seg if seg is not None else self.segment(summary)
        ov = self.overlay_of(summary.id)
        if not ov:
            return seg.files
        return tuple(
            f.model_copy(update={"dv": ov[f.path]}) if f.path in ov else f for f in seg.files
        )

    def segments_of(self, summaries: Sequence[SegmentSummary]) -> list[Segment]:
        """Several segments, loaded in parallel where the source can."""
        missing = [s for s in summaries if s.path not in self._pending]
        loaded: dict[str, Segment] = {}
        if missing:
            if self._source is None:
                raise errors.CorruptManifest(
                    f"version {self.version}: segments cannot be loaded (no source)"
                )
            loaded = {
                s.path: seg for s, seg in zip(missing, self._source.load_many(missing), strict=True)
            }
        return [self._pending.get(s.path) or loaded[s.path] for s in summaries]

    # --- files ---------------------------------------------------------------------------------
    @property
    def files(self) -> tuple[DataFile, ...]:
        """Every live file (a segmented manifest loads all its segments)."""
        if not self.segmented:
            return self.manifest.inline_files
        if self._all is None:
            segs = self.segments_of(self.segments)
            self._all = tuple(
                f
                for s, seg in zip(self.segments, segs, strict=True)
                for f in self.segment_files(s, seg)
            )
        return self._all

    def files_where(self, keep: Callable[[SegmentSummary], bool]) -> list[DataFile]:
        """Live files of the segments whose summary passes ``keep`` (all files if inline)."""
        if not self.segmented:
            return list(self.manifest.inline_files)
        if self._all is not None:
            chosen = {s.path for s in self.segments if keep(s)}
            if len(chosen) == len(self.segments):
                return list(self._all)
        wanted = [s for s in self.segments if keep(s)]
        segs = self.segments_of(wanted)
        return [f for s, seg in zip(wanted, segs, strict=True) for f in self.segment_files(s, seg)]

    def locate(self, paths: Sequence[str], *, exhaustive: bool = True) -> dict[str, SegmentSummary]:
        """The segment holding each of ``paths`` that is live (absent paths are left out).

        Uses the source's hint of where a path was last seen, then (``exhaustive``) opens
        every segment for the rest (a file moved by a segment merge, or not in this table).
        Without ``exhaustive`` only hinted segments are opened: a path found nowhere may
        still be in an unopened segment (appends of new paths use this)."""
        if not self.segmented:
            return {}
        out: dict[str, SegmentSummary] = {}
        by_id = {s.id: s for s in self.segments}
        todo = set(paths)
        hinted: dict[str, SegmentSummary] = {}
        for p in todo:
            sid = self._source.where(p) if self._source is not None else None
            if sid is not None and sid in by_id:
                hinted[p] = by_id[sid]

        def scan(summaries: Sequence[SegmentSummary], wanted: set[str]) -> None:
            for summ, seg in zip(summaries, self.segments_of(summaries), strict=True):
                out.update((f.path, summ) for f in seg.files if f.path in wanted)

        if hinted:
            scan(list({s.path: s for s in hinted.values()}.values()), todo)
        rest = todo - out.keys()
        if rest and exhaustive:
            scan(self.segments, rest)
        return out

    def files_at(self, paths: Sequence[str]) -> dict[str, DataFile]:
        """The live files among ``paths`` (path -> file), opening each segment that holds
        one of them once."""
        if not self.segmented:
            wanted = set(paths)
            return {f.path: f for f in self.manifest.inline_files if f.path in wanted}
        where = self.locate(sorted(set(paths)))
        out: dict[str, DataFile] = {}
        for summ in {s.path: s for s in where.values()}.values():
            for f in self.segment_files(summ):
                if f.path in where:
                    out[f.path] = f
        return out

    def file(self, path: str) -> DataFile | None:
        """The live file at ``path``, or None."""
        return self.files_at([path]).get(path)
