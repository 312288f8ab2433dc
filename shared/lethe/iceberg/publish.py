"""The Iceberg view, I/O part: publish one Lethe snapshot as Iceberg metadata.

``publish(catalog, manifest)`` writes, under ``<table>/metadata/``:

1. the manifests the snapshot needs that the view's newest metadata does not list yet: one
   data manifest per new segment object, one delete manifest per segment whose DVs changed
   (format 2: position-delete files for DVs not yet written), each create-only under a name
   derived from what it holds, so a racing publisher's copy is the same object;
2. a manifest list (a unique name);
3. ``metadata/v<N>.metadata.json``, create-only: the commit point. A publisher that finds it
   there already (the same version published twice, or a racer) writes nothing more;
4. ``metadata/version-hint.text`` (the newest published version, for engines that find a
   table by directory, and the base of the next publish), advanced by conditional PUT and
   never moved back.

Publishing after every commit costs O(change): the base is the version the hint names, its
manifest list says which manifests exist, and only the touched segments are loaded. An
older version than the newest published one is published on its own (no parent, full).
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import ManifestContent, ManifestEntry

import lethe.iceberg.avro as avro
from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.grace import check_fresh
from lethe.catalog.manifest import DataFile, Segment
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore
from lethe.iceberg.evolution import current_schema, with_history
from lethe.iceberg.mapping import (
    HINT_KEY,
    POS_PATH_ID,
    POS_POS_ID,
    ListEntry,
    SegmentUnit,
    View,
    assign_row_ids,
    check_format,
    data_manifest_entries,
    dv_entry,
    manifest_list_key,
    metadata_key,
    new_metadata,
    position_delete_entry,
    position_delete_key,
    segment_units,
    stem_of_manifest,
)
from lethe.iceberg.partitioning import (
    SPEC_ID,
    ViewSpec,
    spec_manifest_key,
    split_by_spec,
    view_spec,
)
from lethe.iceberg.summary import snapshot_summary
from lethe.iceberg.types import FormatVersion
from lethe.progress import Progress, track
from lethe.storage.counters import IOCounters
from lethe.storage.layout import METADATA_PREFIX, manifest_key, object_key
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = ["PublishResult", "publish", "read_hint"]

_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(frozen=True, slots=True)
class PublishResult:
    """What a publish did: the metadata URI, and the objects it wrote or reused."""

    uri: str
    version: int
    written: tuple[str, ...]  # table-relative keys this call created
    reused: int  # manifests taken over from the previous published snapshot
    io: IOCounters

    @property
    def new(self) -> bool:
        """Whether this call created the metadata (False: it was published already)."""
        return bool(self.written)


def pmap(fn: Callable[[_T], _R], items: Sequence[_T]) -> list[_R]:
    """``[fn(x) for x in items]``, up to 8 at a time (each ``fn`` does its own requests)."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        return list(pool.map(fn, items))


def read_hint(store: S3Store, key: str) -> tuple[int | None, str | None]:
    """The version ``version-hint.text`` names and its ETag ((None, None) when absent)."""
    try:
        r = store.get(key)
    except errors.NotFound:
        return None, None
    text = r.body.decode("ascii", "replace").strip()
    return (int(text) if text.isdigit() else None), r.etag


class _Publisher:
    def __init__(
        self, catalog: Catalog, m: Snapshot, view: View, progress: Progress | None = None
    ) -> None:
        self.cat, self.m, self.view, self.progress = catalog, m, view, progress
        self.fv, self.location, self.schema = view.format_version, view.location, view.schema
        self.store: S3Store = catalog.store
        self.written: list[str] = []

    def key(self, rel: str) -> str:
        return self.cat.key(rel)

    # --- storage helpers ------------------------------------------------------------------------
    def put_new(self, rel: str, body: bytes) -> int:
        """PUT create-only; returns the stored object's size (a racer's copy if it won)."""
        try:
            self.store.put(self.key(rel), body, if_none_match=True)
        except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
            return self.store.head(self.key(rel)).size
        self.written.append(rel)
        return len(body)

    def read_base(self, version: int) -> tuple[dict[str, Any], dict[str, ListEntry]] | None:
        rel = metadata_key(version)
        try:
            base: dict[str, Any] = json.loads(self.store.get(self.key(rel)).body)
        except errors.NotFound:
            return None
        cur = base.get("current-snapshot-id")
        snap = next((s for s in base.get("snapshots", []) if s["snapshot-id"] == cur), None)
        if snap is None:
            return base, {}
        ml = snap["manifest-list"]
        try:
            body = self.store.get(self.key(ml[len(self.location) + 1 :])).body
        except errors.NotFound:  # GC expired that snapshot: publish without reuse
            return base, {}
        entries = [
            ListEntry.from_manifest_file(mf, self.location)
            for mf in avro.decode_manifest_list(body)
        ]
        return base, {e.path: e for e in entries}

    # --- manifests --------------------------------------------------------------------------------
    def split(self, files: Iterable[DataFile]) -> list[_Part]:
        """One segment's files grouped by partition spec, each with its manifest key's
        suffix: the first group keeps the plain key (a segment of one spec is one manifest,
        as before), a second one is its ``.spec<N>`` companion."""
        spec = view_spec(self.m.arrow_schema(), self.schema.schema)
        groups = split_by_spec(files, spec)
        return [
            _Part(s, fs, i > 0, spec.names if s is None and spec is not None else ())
            for i, (s, fs) in enumerate(groups)
        ]

    def data_manifest(self, u: SegmentUnit, seg: Segment) -> list[ListEntry]:
        out = []
        # the data manifests ignore DVs: the segment object alone defines them
        for part in self.split(seg.files):
            entries = data_manifest_entries(
                part.files,
                summary=u.summary,
                view=self.view,
                key=self.m.key,
                spec=part.spec,
                bounded=part.bounded,
            )
            out.append(self.manifest(part, u.data_key, entries, "data", u.summary.created_version))
        return out

    def manifest(
        self,
        part: _Part,
        plain_key: str,
        entries: list[ManifestEntry],
        content: Literal["data", "deletes"],
        snapshot_id: int,
    ) -> ListEntry:
        """Store the manifest of ``part`` holding ``entries``; its manifest list entry."""
        body = avro.encode_manifest(
            entries,
            schema=self.schema,
            content=ManifestContent.DATA if content == "data" else ManifestContent.DELETES,
            format_version=self.fv,
            spec=part.spec,
        )
        rel = part.key(plain_key)
        size = self.put_new(rel, body)
        return ListEntry.of(
            rel, size, entries, content=content, snapshot_id=snapshot_id, spec_id=part.spec_id
        )

    def old_deletes(
        self, prev: dict[str, ListEntry], units: Iterable[SegmentUnit]
    ) -> dict[str, Any]:
        """Delete entries of the previous delete manifests of the same segment ids, by the
        path of the delete file: what is known of containers / position files already."""
        ids = {u.summary.id for u in units}
        stems = {e.path: stem_of_manifest(e.path) for e in prev.values()}
        paths = [
            p
            for p, got in stems.items()
            if got and got[0] == "deletes" and _segment_id(got[1]) in ids
        ]
        bodies = pmap(lambda p: self.store.get(self.key(p)).body, paths)
        return {
            me.data_file.file_path: me.data_file for b in bodies for me in avro.decode_manifest(b)
        }

    def delete_manifest(
        self,
        u: SegmentUnit,
        files: Sequence[DataFile],
        sizes: dict[str, int],
        known: dict[str, Any],
    ) -> tuple[list[ListEntry], int, int]:
        seq = u.summary.created_version
        with_dv = [f for f in files if f.dv is not None and f.dv.cardinality > 0]
        key = u.delete_key
        assert key is not None

        def entry(f: DataFile, spec: ViewSpec | None) -> ManifestEntry:
            if self.fv < 3:
                return self.position_deletes(f, known, seq, spec)
            size = sizes.get(f.dv.container or "", 0) if f.dv is not None else 0
            return dv_entry(
                f, location=self.location, container_size=size, sequence_number=seq, spec=spec
            )

        out = [
            self.manifest(part, key, [entry(f, part.spec) for f in part.files], "deletes", seq)
            for part in self.split(with_dv)
        ]
        return out, len(with_dv), sum(f.dv.cardinality for f in with_dv if f.dv)

    def position_deletes(
        self, f: DataFile, known: dict[str, Any], seq: int, spec: ViewSpec | None = None
    ) -> ManifestEntry:
        """Format 2: the position-delete file of ``f``'s DV (written once per DV)."""
        assert f.dv is not None
        rel = position_delete_key(f.path, f.dv)
        uri = f"{self.location}/{rel}"
        old = known.get(uri)
        if old is not None:
            lo = int.from_bytes(old.lower_bounds[POS_POS_ID], "little", signed=True)
            hi = int.from_bytes(old.upper_bounds[POS_POS_ID], "little", signed=True)
            size = int(old.file_size_in_bytes)
        else:
            bm = dvstore.load(self.store, self.cat.prefix, f.dv, what=f"DV of {f.path}")
            pos = pa.array(list(bm), pa.int64())
            lo, hi = (int(pos[0].as_py()), int(pos[-1].as_py())) if len(pos) else (0, 0)
            size = self.put_new(rel, _position_file(object_key(self.location, f.path), pos))
        return position_delete_entry(
            f, location=self.location, path=rel, size=size, positions=(lo, hi),
            sequence_number=seq, spec=spec,
        )  # fmt: skip

    def container_sizes(self, files: Iterable[DataFile], known: dict[str, Any]) -> dict[str, int]:
        """Sizes of the DV containers the files reference (known ones from the previous
        delete manifests, the rest by HEAD)."""
        used = {f.dv.container for f in files if f.dv is not None and f.dv.container is not None}
        uris = {c: f"{self.location}/{c}" for c in used}
        out = {c: int(known[u].file_size_in_bytes) for c, u in uris.items() if u in known}
        heads = pmap(lambda c: (c, self.store.head(self.key(c)).size), sorted(used - out.keys()))
        return out | dict(heads)

    # --- snapshots ----------------------------------------------------------------------------
    def expired(self, base: dict[str, Any]) -> list[int]:
        """Snapshots of the base whose Lethe manifest GC has expired, oldest first (GC
        expires a prefix of the history, so the first one still present ends the search)."""
        out = []
        for s in sorted(base.get("snapshots", []), key=lambda s: s["snapshot-id"]):
            sid = int(s["snapshot-id"])
            if sid >= self.m.version or self.store.exists(self.key(manifest_key(sid))):
                break
            out.append(sid)
        return out

    def advance_hint(self, etag: str | None, current: int | None) -> None:
        body = str(self.m.version).encode()
        for _ in range(5):
            if current is not None and current >= self.m.version:
                return
            try:
                if etag is None:
                    self.store.put(self.key(HINT_KEY), body, if_none_match=True)
                else:
                    self.store.put(self.key(HINT_KEY), body, if_match=etag)
                return
            except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
                current, etag = read_hint(self.store, self.key(HINT_KEY))
        log.warning("version hint of %s not advanced (contention)", self.cat.uri)


@dataclass(frozen=True, slots=True)
class _Part:
    """The files of one segment under one partition spec (None: the unpartitioned spec 0),
    and the columns whose bounds their entries carry."""

    spec: ViewSpec | None
    files: list[DataFile]
    companion: bool
    bounded: tuple[str, ...]

    @property
    def spec_id(self) -> int:
        return self.spec.spec_id if self.spec is not None else 0

    def key(self, plain: str) -> str:
        return spec_manifest_key(plain, self.spec_id) if self.companion else plain


def _companions(plain: str, prev: Mapping[str, ListEntry]) -> list[ListEntry]:
    """The manifests of one segment the previous publish wrote under ``plain`` and its
    spec companions (a segment object never changes, so they are all or none)."""
    return [prev[k] for k in (plain, spec_manifest_key(plain, SPEC_ID)) if k in prev]


def _segment_id(stem: str) -> str:
    """``v00000012-<id>-<rand>`` -> ``<id>``."""
    parts = stem.split("-")
    return parts[1] if len(parts) >= 3 else stem


def _position_file(data_uri: str, pos: pa.Array) -> bytes:
    """A position-delete Parquet file (Iceberg field ids on both columns)."""
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(POS_PATH_ID)}),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": str(POS_POS_ID)}),
        ]
    )
    t = pa.table({"file_path": pa.array([data_uri] * len(pos), pa.string()), "pos": pos}, schema)
    buf = io.BytesIO()
    pq.write_table(t, buf, compression="zstd")
    return buf.getvalue()


def publish(
    catalog: Catalog,
    m: Snapshot,
    *,
    format_version: FormatVersion = 3,
    max_snapshots: int = 100,
    progress: Progress | None = None,
) -> PublishResult:
    """Publish Lethe snapshot ``m`` of ``catalog``'s table as Iceberg metadata.

    Returns the ``s3://…/metadata/v<N>.metadata.json`` URI (see the module docstring).
    ``progress`` hears of each manifest written (task ``"publish"``; :mod:`lethe.progress`).

    Raises:
        IcebergUnsupported: the schema has a type without an exact Iceberg equivalent, or
            the manifest is format 1.
        InvalidRequest: the view exists in another format version, or bad options.
        GraceExpired: the publish took longer than the table's GC grace allows.
    """
    if format_version not in (2, 3):
        raise errors.InvalidRequest(f"format_version must be 2 or 3, not {format_version!r}")
    if max_snapshots < 1:
        raise errors.InvalidRequest("max_snapshots must be at least 1")
    started = time.time()
    before = catalog.store.stats.snapshot()
    schema = current_schema(m, format_version)
    view = View(catalog.uri.rstrip("/"), format_version, schema, max_snapshots)
    p = _Publisher(catalog, m, view, progress)
    units = segment_units(m)
    hint, etag = read_hint(p.store, p.key(HINT_KEY))

    def done(reused: int = 0) -> PublishResult:
        uri = f"{p.location}/{metadata_key(m.version)}"
        return PublishResult(
            uri, m.version, tuple(p.written), reused, catalog.store.stats.snapshot() - before
        )

    if _already_published(p, m.version, hint, etag, format_version):
        return done()
    got = p.read_base(hint) if hint is not None and hint < m.version else None
    base, prev = got if got is not None else (None, {})
    check_format(base, view)
    new_data, new_del = _new_manifests(p, units, prev)
    entries, delete_files, position_deletes = _list_entries(units, new_data, new_del, prev)
    meta, ml_rel, entries = _next_metadata(p, base, hint, entries, delete_files, position_deletes)
    check_fresh(started, m.properties.gc_grace_seconds)
    if not _put_metadata(p, meta, ml_rel):
        return done()
    if hint is None or hint < m.version:
        p.advance_hint(etag, hint)
    reused = sum(1 for e in entries if e.path in prev)
    log.info(
        "published the Iceberg view of %s version %s: %d objects written, %d manifests reused",
        catalog.uri,
        m.version,
        len(p.written),
        reused,
    )
    return done(reused)


def _put_metadata(p: _Publisher, meta: dict[str, Any], ml_rel: str) -> bool:
    """Store the version's metadata create-only (the commit point); False when a racer
    published this version first (then our manifest list is garbage: nothing references it,
    GC removes it, publishers hold no delete right)."""
    meta_rel = metadata_key(p.m.version)
    try:
        p.store.put(p.key(meta_rel), json.dumps(meta).encode(), if_none_match=True)
    except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
        p.written.remove(ml_rel)
        log.info("version %s of %s was published concurrently", p.m.version, p.cat.uri)
        return False
    p.written.append(meta_rel)
    return True


def _already_published(
    p: _Publisher, version: int, hint: int | None, etag: str | None, fv: FormatVersion
) -> bool:
    """Whether ``version`` is published already (the hint moved up to it when behind); in
    another format than ``fv`` it is refused (:func:`_same_format`)."""
    behind = hint is None or hint < version
    if hint != version and not p.store.exists(p.key(metadata_key(version))):
        return False
    _same_format(p, version, fv)
    if behind:
        p.advance_hint(etag, hint)
    return True


def _same_format(p: _Publisher, version: int, format_version: FormatVersion) -> None:
    """Refuse to return a published version's metadata in another format than asked (a
    ``--format-version 2`` after a format 3 publish once got the v3 metadata without a word).

    Raises:
        InvalidRequest: naming both formats and the ways on.
    """
    meta = json.loads(p.store.get(p.key(metadata_key(version))).body)
    got = meta.get("format-version")
    if got != format_version:
        raise errors.InvalidRequest(
            f"version {version} is already published as Iceberg format {got} at "
            f"{p.location}/{metadata_key(version)}; a view keeps one format version (publish "
            f"with format_version={got}, or delete {METADATA_PREFIX} to start over in format "
            f"{format_version})"
        )


def _new_manifests(
    p: _Publisher, units: Sequence[SegmentUnit], prev: dict[str, ListEntry]
) -> tuple[dict[str, list[ListEntry]], dict[str, tuple[list[ListEntry], int, int]]]:
    """Write the data and delete manifests the previous publish does not have (in parallel):
    data manifest key -> entries (one per spec), delete manifest key -> (entries, files,
    positions)."""
    m = p.m
    need_data = [u for u in units if u.data_key not in prev]
    need_del = [u for u in units if u.delete_key is not None and u.delete_key not in prev]
    wanted = list({u.summary.path: u.summary for u in (*need_data, *need_del)}.values())
    segs = {s.path: seg for s, seg in zip(wanted, m.segments_of(wanted), strict=True)}
    del_files = {u.summary.path: m.segment_files(u.summary, segs[u.summary.path]) for u in need_del}
    known = p.old_deletes(prev, need_del)
    all_del = (f for fs in del_files.values() for f in fs)
    sizes = p.container_sizes(all_del, known) if p.fv >= 3 else {}
    total = len(need_data) + len(need_del)
    with track(p.progress, "publish", total=total, unit="manifests") as tracker:
        data = pmap(tracker.each(lambda u: p.data_manifest(u, segs[u.summary.path])), need_data)
        dels = pmap(
            tracker.each(lambda u: p.delete_manifest(u, del_files[u.summary.path], sizes, known)),
            need_del,
        )
    new_data = {u.data_key: d for u, d in zip(need_data, data, strict=True)}
    return new_data, {str(u.delete_key): d for u, d in zip(need_del, dels, strict=True)}


def _list_entries(
    units: Sequence[Any],
    new_data: Mapping[str, list[ListEntry]],
    new_del: Mapping[str, tuple[list[ListEntry], int, int]],
    prev: Mapping[str, ListEntry],
) -> tuple[list[ListEntry], int, int]:
    """The manifest list's entries (data manifests first, then delete manifests), with the
    number of delete files and of deleted positions."""
    entries: list[ListEntry] = []
    for u in units:
        entries.extend(new_data.get(u.data_key) or _companions(u.data_key, prev))
    delete_files = position_deletes = 0
    for u in units:
        if u.delete_key is None:
            continue
        if u.delete_key in new_del:
            les, n, card = new_del[u.delete_key]
        else:
            les = _companions(u.delete_key, prev)
            n = sum(le.added_files + le.existing_files for le in les)
            card = sum(le.rows for le in les)
        entries.extend(les)
        delete_files += n
        position_deletes += card
    return entries, delete_files, position_deletes


def _next_metadata(
    p: _Publisher,
    base: dict[str, Any] | None,
    hint: int | None,
    entries: list[ListEntry],
    delete_files: int,
    position_deletes: int,
) -> tuple[dict[str, Any], str, list[ListEntry]]:
    """Row ids, the manifest list (written) and the new table metadata (not yet written)."""
    m, fv = p.m, p.fv
    next_row_id = int(base.get("next-row-id", 0) or 0) if base else 0
    added_rows = 0
    if fv >= 3:
        entries, added_rows = assign_row_ids(entries, next_row_id)
    ml_rel = manifest_list_key(m.version)
    ml_body = avro.encode_manifest_list(
        [e.manifest_file(p.location, fv) for e in entries],
        snapshot_id=m.version,
        parent_snapshot_id=base.get("current-snapshot-id") if base else None,
        sequence_number=m.version,
        first_row_id=next_row_id if fv >= 3 else None,
        format_version=fv,
    )
    p.put_new(ml_rel, ml_body)
    meta = new_metadata(  # then every schema of the history (lethe.iceberg.evolution)
        base,
        m=m,
        view=p.view,
        manifest_list=ml_rel,
        summary=snapshot_summary(
            m, entries, delete_files=delete_files, position_deletes=position_deletes
        ),
        added_rows=added_rows,
        base_uri=f"{p.location}/{metadata_key(hint)}"
        if base is not None and hint is not None
        else None,
        drop_snapshots=p.expired(base) if base is not None else (),
    )
    return with_history(meta, m, fv), ml_rel, entries


def publish_view(catalog: Catalog, m: Snapshot) -> None:
    """A catalog's after-commit hook: publish the Iceberg view when the table asks for it."""
    if m.properties.iceberg_view:
        publish(catalog, m, format_version=m.properties.iceberg_format_version)
