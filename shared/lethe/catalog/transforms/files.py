"""Pure commit transforms: manifest N+1 from manifest N plus one change.

Nothing here does I/O of its own: a segmented base (a :class:`~lethe.catalog.snapshot.Snapshot`)
loads the segments a change touches through its reader (immutable objects, cached), and the
new snapshot holds the segments it introduces until the catalog stores them
(:meth:`~lethe.catalog.snapshot.Snapshot.pending_segments`). These functions are what a commit
rebases: the commit loop calls them again on a newer base.

A commit writes O(change) (DESIGN §2, "Scale"):

* an append puts its files into the tail segment while it has room (rewriting only it), and
  into new segments beyond;
* a DV update changes only the root: the new DVs go into its *DV overlay*, which readers
  apply over the segments' entries (so a one-key delete stays at three PUTs: container,
  root, head); when the overlay outgrows ``dv_overlay_max`` entries, the segments with the
  most overlaid files are rewritten with their DVs folded in (amortized, bounded);
* a replace (splice, compaction) rewrites only the segments holding the replaced files; the
  new files go where the first replaced file was;
* a rewritten segment left with fewer than a quarter of ``segment_target_files`` entries is
  merged with a neighbour when both fit in one (bounded: one neighbour per segment), and
  one over the target is split, so the segment count stays O(files / target).

An inline (format 1) base is upgraded by any transform: its files are cut into segments.

>>> import pyarrow as pa
>>> from lethe.catalog.manifest import TableProperties, initial_manifest
>>> m0 = Snapshot(initial_manifest(table_uuid="t", schema=pa.schema([("id", pa.int64())]),
...                                properties=TableProperties(key="id")))
>>> m1 = apply_append(m0, [], Operation(kind="append"))
>>> (m1.version, m1.previous, m1.layout, len(m1.segments))
(1, 0, 'segmented', 0)
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from lethe import errors
from lethe.catalog.manifest import (
    EVOLVED_FORMAT_VERSION,
    FORMAT_VERSION,
    ColumnStats,
    DataFile,
    DVRef,
    ErasureRecord,
    Operation,
    OverlayDV,
    RequestRecord,
    Segment,
    SegmentSummary,
    TableProperties,
    schema_from_b64,
    segment_key,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import from_json

__all__ = [
    "apply_append",
    "apply_dv_updates",
    "apply_properties",
    "apply_replace",
    "summarize",
    "upgrade",
]


@functools.lru_cache(maxsize=64)
def _schema(b64: str) -> pa.Schema:
    return schema_from_b64(b64)


def _merge_stats(files: Sequence[DataFile], schema: pa.Schema) -> dict[str, ColumnStats]:
    """Per column: min/max over ``files`` when every file has them; null counts summed."""
    if not files:
        return {}
    names = set(files[0].columns)
    for f in files[1:]:
        names &= set(f.columns)
    out: dict[str, ColumnStats] = {}
    for col in sorted(names):
        idx = schema.get_field_index(col)
        if idx < 0:
            continue
        t = schema.field(idx).type
        lo = hi = None
        lo_c = hi_c = None
        nulls: int | None = 0
        try:
            for f in files:
                st = f.columns[col]
                if st.min is None or st.max is None:
                    raise ValueError("unknown bounds")
                a, b = from_json(st.min, t), from_json(st.max, t)
                if lo_c is None or a < lo_c:
                    lo, lo_c = st.min, a
                if hi_c is None or b > hi_c:
                    hi, hi_c = st.max, b
                nulls = None if (nulls is None or st.null_count is None) else nulls + st.null_count
        except (ValueError, TypeError):
            continue
        out[col] = ColumnStats(min=lo, max=hi, null_count=nulls)
    return out


def summarize(
    seg_id: str, path: str, files: Sequence[DataFile], schema: pa.Schema, version: int
) -> SegmentSummary:
    """The root's description of a segment holding ``files``.

    >>> s = summarize("a", "manifest/segments/x.json.gz", [], pa.schema([("id", pa.int64())]), 3)
    >>> (s.files, s.rows, s.created_version)
    (0, 0, 3)
    """
    return SegmentSummary(
        id=seg_id,
        path=path,
        files=len(files),
        rows=sum(f.rows for f in files),
        deleted_rows=sum(f.deleted_rows for f in files),
        data_bytes=sum(f.size for f in files),
        columns=_merge_stats(files, schema),
        created_version=version,
    )


@dataclass(slots=True)
class _Work:
    """One segment while a transform edits it (files loaded only when touched)."""

    id: str
    summary: SegmentSummary | None  # None: new (or from an inline base)
    files: list[DataFile] | None = None  # the overlay applied
    changed: bool = False  # rewritten as a new segment object
    dv_touched: bool = False  # some DV changed: overlay (or rewrite, if changed)


def _new_id() -> str:
    return uuid.uuid4().hex[:16]


class _Plan:
    """The segments of ``base`` being edited by one transform."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self.target = base.properties.segment_target_files
        self.overlay: dict[str, OverlayDV] = {o.path: o for o in base.dv_overlay}
        if base.segmented:
            self.work = [_Work(s.id, s) for s in base.segments]
        else:  # upgrade: cut the inline files into segments
            files = list(base.inline_files)
            self.work = [
                _Work(_new_id(), None, files[i : i + self.target], True)
                for i in range(0, len(files), self.target)
            ]

    def load(self, w: _Work) -> list[DataFile]:
        if w.files is None:
            assert w.summary is not None
            w.files = list(self.base.segment_files(w.summary))
        return w.files

    def load_many(self, ws: Sequence[_Work]) -> None:
        todo = [w for w in ws if w.files is None]
        if todo:
            summaries = [w.summary for w in todo]
            segs = self.base.segments_of(summaries)  # type: ignore[arg-type]
            for w, summ, seg in zip(todo, summaries, segs, strict=True):
                assert summ is not None
                w.files = list(self.base.segment_files(summ, seg))

    def find(self, paths: Iterable[str], *, exhaustive: bool = True) -> dict[str, _Work]:
        """The working segment holding each path (absent paths left out; see
        :meth:`~lethe.catalog.snapshot.Snapshot.locate` for ``exhaustive``)."""
        paths = set(paths)
        out: dict[str, _Work] = {}
        if self.base.segmented:
            where = self.base.locate(sorted(paths), exhaustive=exhaustive)
            by_id = {w.id: w for w in self.work}
            self.load_many([by_id[sid] for sid in {s.id for s in where.values()}])
            for p, summ in where.items():
                out[p] = by_id[summ.id]
        else:
            for w in self.work:
                for f in w.files or ():
                    if f.path in paths:
                        out[f.path] = w
        return out

    def finish(
        self,
    ) -> tuple[tuple[SegmentSummary, ...], dict[str, Segment], tuple[OverlayDV, ...]]:
        """Fold, split, merge and describe: the new root's segments, the new segment
        objects, and the new DV overlay."""
        self._fold_overflow()
        self._split()
        self._merge_small()
        version = self.base.version + 1
        schema = _schema(self.base.schema_b64)
        summaries: list[SegmentSummary] = []
        pending: dict[str, Segment] = {}
        overlay: list[OverlayDV] = []
        for w in self.work:
            if not w.changed:
                assert w.summary is not None
                overlay.extend(self._overlay_for(w))
                if w.dv_touched:
                    deleted = sum(f.deleted_rows for f in self.load(w))
                    summaries.append(w.summary.model_copy(update={"deleted_rows": deleted}))
                else:
                    summaries.append(w.summary)
                continue
            files = w.files or []
            if not files:
                continue  # an emptied segment disappears
            path = segment_key(version, w.id)
            pending[path] = Segment(table_uuid=self.base.table_uuid, id=w.id, files=tuple(files))
            summaries.append(summarize(w.id, path, files, schema, version))
        return tuple(summaries), pending, tuple(sorted(overlay, key=lambda o: o.path))

    def _overlay_for(self, w: _Work) -> list[OverlayDV]:
        """The overlay entries an unchanged segment needs: its files whose DV differs from
        the segment object's entry."""
        if not w.dv_touched:
            return [o for o in self.overlay.values() if o.segment == w.id]
        assert w.summary is not None
        stored = {f.path: f.dv for f in self.base.segment(w.summary).files}
        return [
            OverlayDV(path=f.path, segment=w.id, dv=f.dv)
            for f in self.load(w)
            if f.dv is not None and f.dv != stored.get(f.path)
        ]

    def _fold_overflow(self) -> None:
        """Rewrite the segments with the most overlaid files while the overlay is too big."""
        limit = self.base.properties.dv_overlay_max
        counts = {w.id: n for w in self.work if not w.changed and (n := len(self._overlay_for(w)))}
        total = sum(counts.values())
        if total <= limit:
            return
        by_id = {w.id: w for w in self.work}
        for sid, n in sorted(counts.items(), key=lambda kv: -kv[1]):
            if total <= limit:
                break
            w = by_id[sid]
            self.load(w)
            w.changed = True
            total -= n

    def _split(self) -> None:
        out: list[_Work] = []
        for w in self.work:
            if w.changed and w.files is not None and len(w.files) > self.target:
                files = w.files
                out.append(_Work(w.id, w.summary, files[: self.target], True))
                out.extend(
                    _Work(_new_id(), None, files[i : i + self.target], True)
                    for i in range(self.target, len(files), self.target)
                )
            else:
                out.append(w)
        self.work = out

    def _size(self, w: _Work) -> int:
        if w.files is not None:
            return len(w.files)
        return w.summary.files if w.summary is not None else 0

    def _merge_small(self) -> None:
        small = max(1, self.target // 4)
        i = 0
        while i < len(self.work):
            w = self.work[i]
            if not (w.changed and w.files is not None and 0 < len(w.files) < small):
                i += 1
                continue
            for j in (i + 1, i - 1):
                if (
                    0 <= j < len(self.work)
                    and self._size(w) + self._size(self.work[j]) <= self.target
                ):
                    other = self.work[j]
                    first, second = (w, other) if j > i else (other, w)
                    merged = [*self.load(first), *self.load(second)]
                    keep = first if self._size(first) >= self._size(second) else second
                    self.work[min(i, j)] = _Work(keep.id, keep.summary, merged, True)
                    del self.work[max(i, j)]
                    break
            i += 1


def _successor(
    base: Snapshot,
    plan: _Plan,
    *,
    operation: Operation,
    now: datetime | None = None,
    touched: tuple[int, int] | None = None,
    extra: Sequence[RequestRecord] = (),
    erasures: Sequence[ErasureRecord] | None = None,
) -> Snapshot:
    """Snapshot N+1 of ``base`` with ``plan``'s segments; ``touched``: the ``(rows, files)``
    the operation's request (if it names one) is recorded with."""
    now = now or datetime.now(UTC)
    requests = list(base.requests)
    if touched is not None and operation.request_id_hash is not None:
        rows, files = touched
        requests.append(
            RequestRecord(
                id_hash=operation.request_id_hash,
                version=base.version + 1,
                kind=operation.kind,
                committed_at=now,
                rows=rows,
                files_touched=files,
            )
        )
    requests.extend(
        r.model_copy(update={"version": base.version + 1, "committed_at": now}) for r in extra
    )
    props = base.properties
    horizon = now - timedelta(seconds=props.request_retention_seconds)
    requests = [r for r in requests if r.committed_at >= horizon]
    if len(requests) > props.request_log_max:
        requests = requests[len(requests) - props.request_log_max :]
    update: dict[str, Any] = {
        "version": base.version + 1,
        "previous": base.version,
        "commit_id": uuid.uuid4().hex,
        "created_at": now,
        "operation": operation,
        "requests": tuple(requests),
    }
    if erasures is not None:
        update["erasures"] = tuple(erasures)
    segments, pending, overlay = plan.finish()
    update.update(
        segments=segments,
        dv_overlay=overlay,
        inline_files=(),
        layout="segmented",
        format_version=EVOLVED_FORMAT_VERSION if base.manifest.evolved else FORMAT_VERSION,
    )
    return base.successor(base.manifest.model_copy(update=update), pending)


def upgrade(base: Snapshot, *, now: datetime | None = None) -> Snapshot:
    """Snapshot N+1 = N in format 2 (``lethe upgrade``; any commit on a v1 base does it too).
    A segmented base is returned as a no-op successor with its segments unchanged."""
    op = Operation(kind="upgrade", params={"from_format": base.format_version})
    return _successor(base, _Plan(base), operation=op, now=now)


def apply_properties(
    base: Snapshot,
    properties: TableProperties,
    operation: Operation,
    *,
    now: datetime | None = None,
) -> Snapshot:
    """Snapshot N+1 = N with its table properties replaced (files and segments unchanged)."""
    return _successor(base, _Plan(base), operation=operation, now=now).evolve(properties=properties)


def apply_append(
    base: Snapshot,
    new_files: Iterable[DataFile],
    operation: Operation,
    *,
    now: datetime | None = None,
) -> Snapshot:
    """Snapshot N+1 = N plus ``new_files``. Appends never conflict."""
    added = [f.model_copy(update={"added_version": base.version + 1}) for f in new_files]
    plan = _Plan(base)
    if added:
        # new files have fresh keys: check the segments they were seen in and the tail,
        # never the whole table
        _no_duplicates(added, set(plan.find((f.path for f in added), exhaustive=False)))
        tail = plan.work[-1] if plan.work else None
        if tail is not None:
            _no_duplicates(
                added,
                {f.path for f in plan.load(tail)} if plan._size(tail) < plan.target else set(),
            )
        if tail is not None and plan._size(tail) < plan.target:
            plan.load(tail).extend(added)
            tail.changed = True
        else:
            plan.work.append(_Work(_new_id(), None, added, True))
    touched = (sum(f.rows for f in added), len(added))
    return _successor(base, plan, operation=operation, now=now, touched=touched)


def _no_duplicates(added: Sequence[DataFile], existing: set[str]) -> None:
    dup = [f.path for f in added if f.path in existing]
    if dup:
        raise errors.CommitConflict(f"append adds files already in the table: {dup[:3]}")


def apply_dv_updates(
    base: Snapshot,
    updates: Mapping[str, DVRef],
    operation: Operation,
    *,
    now: datetime | None = None,
    requests: Sequence[RequestRecord] = (),
    erasures: Sequence[ErasureRecord] = (),
) -> Snapshot:
    """Snapshot N+1 with the DVs of some files replaced (each must already hold the union).

    Raises CommitConflict if a file named in ``updates`` is no longer live in ``base``.
    """
    new_erasures = None
    if erasures:
        v = base.version + 1  # a record spliced already (no targets) is spliced at this commit
        new = tuple(
            e.model_copy(
                update={
                    "deleted_version": v,
                    **({"spliced_version": v} if e.spliced_version == 0 else {}),
                }
            )
            for e in erasures
        )
        new_erasures = (*base.erasures, *new)
    plan = _Plan(base)
    _set_dvs(plan, updates, base.version, "this delete touches")
    touched = (operation.rows_deleted, len(updates))
    return _successor(
        base,
        plan,
        operation=operation,
        now=now,
        touched=touched,
        extra=requests,
        erasures=new_erasures,
    )


def _all_live(paths: Iterable[str], live: Iterable[str], version: int, what: str) -> None:
    missing = set(paths) - set(live)
    if missing:
        raise errors.CommitConflict(
            f"{len(missing)} file(s) {what} are no longer in version {version}"
        )


def _distinct(ws: Iterable[_Work]) -> list[_Work]:
    return list({id(w): w for w in ws}.values())


def _set_dvs(plan: _Plan, updates: Mapping[str, DVRef], version: int, what: str) -> None:
    where = plan.find(updates)
    _all_live(updates, where, version, what)
    for w in _distinct(where.values()):
        w.files = [
            f.model_copy(update={"dv": updates[f.path]}) if f.path in updates else f
            for f in plan.load(w)
        ]
        w.dv_touched = True


def apply_replace(
    base: Snapshot,
    removed: Iterable[str],
    added: Iterable[DataFile],
    operation: Operation,
    *,
    requests: Sequence[RequestRecord] = (),
    dv_updates: Mapping[str, DVRef] | None = None,
    erasures: Sequence[ErasureRecord] | None = None,
    places: Mapping[str, str] | None = None,
) -> Snapshot:
    """Snapshot N+1 with files ``removed`` swapped for ``added`` (splice, compaction).

    The caller has already mapped any concurrent DV onto the ``added`` files. ``dv_updates``
    sets the DVs of other live files in the same commit (compaction's coalesced containers);
    ``erasures`` replaces the erasure records. An added file goes into the segment of the
    removed file ``places`` names for it (a splice's source), else of the first removed file.
    """
    removed_list = list(dict.fromkeys(removed))
    removed_set = set(removed_list)
    new = [f.model_copy(update={"added_version": base.version + 1}) for f in added]
    plan = _Plan(base)
    where = plan.find(removed_set)
    _all_live(removed_set, where, base.version, "to replace")
    for w in _distinct(where.values()):
        w.files = [f for f in plan.load(w) if f.path not in removed_set]
        w.changed = True
    first = where[removed_list[0]] if removed_list else None
    for f in new:
        home = where.get((places or {}).get(f.path, ""), first)
        if home is None:
            home = _Work(_new_id(), None, [], True)
            plan.work.append(home)
            first = home
        assert home.files is not None
        home.files.append(f)
    if dv_updates:
        _set_dvs(plan, dv_updates, base.version, "to update")
    touched = (operation.rows_erased or operation.rows_deleted, len(removed_set))
    return _successor(
        base, plan, operation=operation, touched=touched, extra=requests, erasures=erasures
    )
