"""Row TTL as hard erasure: the retention sweep (docs/format.md §9b).

A table may declare a *row retention* (``Table.create(..., retention=("event_time", "400d"))``,
``Table.set_retention``): a timestamp or date column and a duration. A row expires once its
value is older than ``now - duration`` (the *cutoff*; a date counts from the end of its day;
a null never expires). :func:`sweep` erases expired rows, not just hides them:

1. **select** (pure over the manifest, :func:`plan_sweep`): a file whose column max (manifest
   stats) is below the cutoff, with no nulls, is dropped whole; a file whose min is at or
   past the cutoff is kept; the others (straddling the cutoff, or without stats) are read:
   only the retention column's chunks of their row groups that can hold expired rows,
   pinned to the ETag (:func:`lethe.erasure.deletes.locate`). A file found wholly expired is dropped
   too;
2. **commit** (one commit, :class:`~lethe.catalog.changes.ExpireRows`): the dropped files leave the
   table (0 data bytes moved: no data object is read, copied or written), the expired rows
   of straddling files are hidden by DVs, and the sweep's request and erasure records are
   opened: one erasure record per sweep, its receipt read like an erasure request's
   (:meth:`lethe.Table.erasure_status` with the sweep's ``request_id``);
3. **splice**: the row groups of straddling files holding expired rows are spliced by the
   erasure machinery (:func:`lethe.erasure.erase.process_erasure`: a few files at a time, committed
   together), so the rows are physically gone from the live files.

Older snapshots keep the dropped and spliced-away objects until GC expires them: the rows
are gone from storage at the latest ``retention + GC schedule interval + splice window``
after they expired (docs/deploy.md). Nothing logged or recorded holds a row value: counts,
paths, the cutoff and hashes only.

Example:
    >>> r = lethe.erasure.retention.sweep(t)                                # doctest: +SKIP
    >>> r.files_dropped, r.data_bytes_moved                         # doctest: +SKIP
    (12, 0)
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.changes import ExpireRows
from lethe.catalog.commit import Prepared
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.grace import format_duration, parse_duration
from lethe.catalog.manifest import (
    DataFile,
    ErasureRecord,
    Operation,
    RequestRecord,
    TableProperties,
    request_hash,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.values import from_json
from lethe.dv import lineage
from lethe.dv import store as dvstore
from lethe.dv.remap import group_rows, targets_of
from lethe.erasure.deletes import locate
from lethe.erasure.erase import SpliceResult, process_erasure
from lethe.index.erase import scrub_rows
from lethe.progress import Progress
from lethe.reading.filters import normalize
from lethe.reading.scan import DVCache
from lethe.storage.counters import IOCounters

log = logging.getLogger(__name__)

__all__ = [
    "RetentionPlan",
    "RetentionSweepResult",
    "RowRetention",
    "check_retention",
    "plan_sweep",
    "sweep",
]


# --- the property ----------------------------------------------------------------------------
def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t))


_BARE_RE = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


def check_retention(
    schema: pa.Schema, column: str, keep: str | timedelta | float
) -> tuple[str, int]:
    """``(column, seconds)`` of a row retention on ``schema``, validated.

    >>> check_retention(pa.schema([("t", pa.timestamp("us"))]), "t", "400d")
    ('t', 34560000)

    Raises:
        InvalidRequest: ``column`` is not a timestamp or date column of ``schema``, or
            ``keep`` is not a positive duration of whole seconds, or has no unit (``"400"``,
            ``400``: a timedelta or a number with ``s``, ``m``, ``h``, ``d`` or ``w``).
    """
    i = schema.get_field_index(column)
    if i < 0:
        raise errors.InvalidRequest(
            f"retention column {column!r} is not in the schema {schema.names}"
        )
    t = schema.field(i).type
    if not _is_time(t):
        raise errors.InvalidRequest(
            f"retention column {column!r} is {t}; it must be a timestamp or date column"
        )
    bare = isinstance(keep, int | float) and not isinstance(keep, bool)
    if bare or (isinstance(keep, str) and _BARE_RE.match(keep)):
        raise errors.InvalidRequest(
            f"retention {keep!r} has no unit: write it as '400d' (days), '12h', '30m', "
            "'45s' or '2w' (a bare number would be seconds: every row older than that "
            "would be erased)"
        )
    seconds = parse_duration(keep).total_seconds()
    if seconds < 1 or seconds != int(seconds):
        raise errors.InvalidRequest("retention must be a positive number of whole seconds")
    return column, int(seconds)


@dataclass(frozen=True, slots=True)
class RowRetention:
    """A table's row retention: rows whose ``column`` is older than ``seconds`` expire."""

    column: str
    seconds: int

    @classmethod
    def of(cls, props: TableProperties) -> RowRetention | None:
        """The retention the properties declare (None: the table keeps its rows)."""
        if props.retention_column is None or props.retention_seconds is None:
            return None
        return cls(props.retention_column, props.retention_seconds)

    def cutoff(self, now: datetime) -> datetime:
        """Rows older than this expire (whole seconds, UTC)."""
        if now.tzinfo is None:
            raise errors.InvalidRequest("now must be a time-zone aware datetime")
        return (now.astimezone(UTC) - timedelta(seconds=self.seconds)).replace(microsecond=0)

    def describe(self) -> str:
        return f"rows expire {format_duration(self.seconds)} after their {self.column!r}"


def cut_value(t: pa.DataType, cutoff: datetime) -> int:
    """The cutoff in the comparable form of column type ``t``
    (:func:`lethe.catalog.values.comparable`): a value below it has expired. A date expires once
    its whole day is past the cutoff.

    >>> cut_value(pa.timestamp("ms", tz="UTC"), datetime(1970, 1, 2, tzinfo=UTC))
    86400000
    >>> cut_value(pa.date32(), datetime(1970, 1, 3, 12, tzinfo=UTC))
    2
    """
    seconds = math.floor((cutoff - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
    if pa.types.is_timestamp(t):
        return seconds * {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
    days = (cutoff.date() - date(1970, 1, 1)).days
    return days if pa.types.is_date32(t) else days * 86_400_000


# --- selection (pure) ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """What the manifest alone says of each file: ``dropped`` (every row expired, by its
    stats), ``read`` (straddling the cutoff, or without stats: its column must be read),
    and ``kept`` files (no row expired)."""

    dropped: tuple[DataFile, ...]
    read: tuple[DataFile, ...]
    kept: int


def plan_sweep(files: Sequence[DataFile], column: str, t: pa.DataType, cut: int) -> RetentionPlan:
    """Sort ``files`` by their stats of ``column`` (type ``t``) against ``cut``
    (:func:`cut_value`): max below it and no null: dropped; min at or past it: kept; the
    rest are read."""
    dropped: list[DataFile] = []
    read: list[DataFile] = []
    kept = 0
    for f in files:
        s = f.columns.get(column)
        lo = from_json(s.min, t) if s is not None else None
        hi = from_json(s.max, t) if s is not None else None
        if s is not None and f.rows and s.null_count == f.rows:
            kept += 1  # every value null: nothing ever expires
        elif hi is not None and hi < cut and s is not None and s.null_count == 0:
            dropped.append(f)
        elif lo is not None and lo >= cut:
            kept += 1
        else:
            read.append(f)
    return RetentionPlan(tuple(dropped), tuple(read), kept)


# --- the sweep -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Selection:
    """What a sweep found in one base: the files to drop and, per straddling file, the
    positions of its expired rows still physically in it (hidden by a DV or not)."""

    dropped: tuple[DataFile, ...]
    expired: Mapping[str, BitMap64]
    kept: int
    read_io: IOCounters

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.dropped) + sum(len(b) for b in self.expired.values())


def _select(
    ctx: TableContext, base: Snapshot, keep: RowRetention, cutoff: datetime, dvs: DVCache
) -> _Selection:
    """The files of ``base`` to drop and the expired rows of the others (reads only the
    retention column of the files the manifest cannot decide)."""
    schema = base.arrow_schema()
    i = schema.get_field_index(keep.column)
    if i < 0:
        raise errors.InvalidRequest(f"retention column {keep.column!r} is no longer in the table")
    t = schema.field(i).type
    cut = cut_value(t, cutoff)
    plan = plan_sweep(base.files, keep.column, t, cut)
    io0 = ctx.store.stats.snapshot()
    found: dict[str, BitMap64] = {}
    if plan.read:
        dnf = normalize([(keep.column, "<", cut)], schema)
        only = {f.path for f in plan.read}
        found = locate(ctx, base, [dnf], only_paths=only, physical=[True], dvs=dvs)[0]
    read_io = ctx.store.stats.snapshot() - io0
    whole = {f.path for f in plan.read if (bm := found.get(f.path)) and len(bm) == f.rows}
    dropped = (*plan.dropped, *(f for f in plan.read if f.path in whole))
    expired = {p: bm for p, bm in found.items() if p not in whole and len(bm)}
    kept = plan.kept + sum(1 for f in plan.read if f.path not in found)
    return _Selection(dropped, expired, kept, read_io)


@dataclass(frozen=True, slots=True)
class _Found:
    """What the preparation that landed found (``duplicate``: a sweep with this request id
    committed earlier, at ``version``)."""

    selection: _Selection | None
    duplicate: bool = False
    version: int | None = None


@dataclass(frozen=True, slots=True)
class _ExpireChange:
    """The logical half of a sweep as a change: ``prepare`` selects on each base, writes the
    DV unions of the straddling files in one container and scrubs their index entries; the
    update is :class:`~lethe.catalog.changes.ExpireRows`."""

    ctx: TableContext
    keep: RowRetention
    cutoff: datetime
    id_hash: str
    what: str = "retention"
    owned: tuple[str, ...] = ()

    def prepare(self, base: Snapshot) -> Prepared[_Found]:
        rec = base.find_request(self.id_hash)
        if rec is not None:
            return Prepared(None, _Found(None, duplicate=True, version=rec.version))
        dvs = DVCache(self.ctx.store, self.ctx.prefix)
        sel = _select(self.ctx, base, self.keep, self.cutoff, dvs)
        if not sel.dropped and not sel.expired:
            return Prepared(None, _Found(sel))
        store, prefix = self.ctx.store, self.ctx.prefix
        current = {p: dvs.bitmap(base.file(p)) or BitMap64() for p in sel.expired}  # type: ignore[arg-type]
        unions = {p: current[p] | bm for p, bm in sel.expired.items() if bm - current[p]}
        written_at = time.time()  # before the container's PUT: the GC grace clock
        refs = dvstore.write_dvs(store, prefix, unions) if unions else {}
        targets = targets_of(base, sel.expired)
        # the splices remove every deleted row of the groups they edit: scrub those too
        gone = {
            t.path: sel.expired[t.path]
            | group_rows(base.file(t.path), current[t.path], t.row_groups)
            for t in targets
        }
        # one exit (lethe.exits): the dropped files' entries leave the index as well
        pieces, piece_keys = scrub_rows(store, prefix, base, gone, dropped=sel.dropped)
        # versions from before the sweep read the dropped files as gone (issue 39)
        lin = (
            lineage.record(store, prefix, base, [(f.path, None, BitMap64()) for f in sel.dropped])
            if sel.dropped
            else None
        )
        update = ExpireRows(
            dropped=tuple(f.path for f in sel.dropped),
            refs=refs,
            unioned_with={p: base.file(p).dv for p in unions},  # type: ignore[union-attr]
            operation=self._operation(sel, len(targets)),
            request=RequestRecord(
                id_hash=self.id_hash,
                version=0,
                kind="retention",
                committed_at=datetime.now(UTC),
                rows=sel.rows,
                files_touched=len(sel.dropped) + len(targets),
            ),
            erasure=ErasureRecord(
                id_hash=self.id_hash, deleted_version=0, targets=targets, superseded=tuple(pieces)
            ),
            pieces=pieces,
            lineage=lin,
            lineage_base=base.manifest.lineage,
        )
        mine = (lin.path,) if lin is not None else ()
        return Prepared(
            update,
            _Found(sel),
            written=(
                *sorted({r.container for r in refs.values() if r.container}),
                *piece_keys,
                *mine,
            ),
            written_at=written_at if refs or piece_keys or mine else None,
            renewable=True,
        )

    def _operation(self, sel: _Selection, splice: int) -> Operation:
        return Operation(
            kind="retention",
            rows_deleted=sel.rows,
            files_removed=len(sel.dropped),
            files_touched=len(sel.dropped) + splice,
            params={
                "cutoff": self.cutoff.isoformat(),
                "files_dropped": len(sel.dropped),
                "files_to_splice": splice,
            },
        )


@dataclass(frozen=True, slots=True)
class RetentionSweepResult:
    """What one retention sweep did (or, with ``dry_run``, would do).

    ``request_id`` names the sweep's receipt (:meth:`lethe.Table.erasure_status`);
    ``versions`` are the commits it made (the drop-and-hide commit, then the splices');
    ``data_bytes_moved`` counts data-file bytes read, uploaded and copied (the retention
    column read of straddling files, and the splices): dropping files moves none.
    """

    request_id: str
    cutoff: datetime
    dry_run: bool
    files_dropped: int
    files_spliced: int
    files_kept: int
    rows_expired: int
    bytes_dropped: int
    data_bytes_moved: int
    splice_bytes: int = 0
    splice_source_bytes: int = 0
    versions: tuple[int, ...] = ()
    duplicate: bool = False
    complete: bool = True
    io: IOCounters = field(default_factory=IOCounters)
    #: the last snapshot this sweep committed (None: none), for the caller's handle to adopt
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @property
    def request_hash(self) -> str:
        return request_hash(self.request_id)

    @property
    def recorded(self) -> bool:
        """Whether the sweep's request is in the table's log (a receipt can be read): it
        committed, or a sweep with its id did before. A dry run or a sweep that found
        nothing expired records nothing."""
        return not self.dry_run and bool(self.versions or self.duplicate)

    def describe(self) -> str:
        verb = "would drop" if self.dry_run else "dropped"
        if self.recorded:
            tail = f"receipt: request {self.request_hash}"
        elif self.dry_run:
            tail = "dry run: nothing committed"
        else:
            tail = "nothing expired: nothing committed"
        return (
            f"cutoff {self.cutoff.isoformat()}: {verb} {self.files_dropped} file(s) "
            f"({self.bytes_dropped:,} B, 0 data bytes moved), {self.rows_expired} row(s) "
            f"expired, {self.files_spliced} file(s) spliced ({self.splice_bytes:,} B moved); "
            f"data bytes moved {self.data_bytes_moved:,}; versions {list(self.versions)}; "
            f"{tail}"
        )


def sweep(
    target: TableContext | HasContext,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    request_id: str | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> RetentionSweepResult:
    """Erase the rows past the table's retention (see the module docstring) on the latest
    snapshot: drop wholly expired files in one metadata-only commit (with the expired rows
    of straddling files hidden by DVs), then splice those out. ``dry_run`` reads what it
    must to tell and commits nothing. ``request_id`` (default: derived from the cutoff)
    makes a sweep idempotent: a second sweep with it finds the first's record and only
    finishes its splices. ``max_bytes`` bounds the row-group bytes spliced in this call.

    Raises:
        InvalidRequest: the table declares no retention.
    """
    ctx, keep = _declared(target)
    cutoff = keep.cutoff(now or datetime.now(UTC))
    rid = request_id or f"retention-{keep.column}-{int(cutoff.timestamp())}"
    io0 = ctx.store.stats.snapshot()
    if dry_run:
        sel = _select(ctx, ctx.snapshot, keep, cutoff, DVCache(ctx.store, ctx.prefix))
        return _result(rid, cutoff, sel, (), io=ctx.store.stats.snapshot() - io0, dry_run=True)
    h = request_hash(rid)
    outcome = ctx.catalog.commit_change(_ExpireChange(ctx, keep, cutoff, h))
    found, last = outcome.detail, outcome.manifest
    versions = [last.version] if last is not None else []
    complete, splices = True, list[SpliceResult]()
    if last is not None or found.duplicate:
        complete, splices = process_erasure(
            ctx, h, max_bytes=max_bytes, progress=progress, task="retention"
        )
        if splices:
            last, _ = ctx.catalog.current()
            versions.append(last.version)
    r = _result(
        rid,
        cutoff,
        found.selection,
        splices,
        io=ctx.store.stats.snapshot() - io0,
        dry_run=False,
        versions=tuple(versions),
        duplicate=found.duplicate,
        complete=complete,
        snapshot=last,
    )
    log.info(
        "retention sweep on %s: %d file(s) dropped, %d spliced, %d row(s) expired, "
        "%d data bytes moved",
        ctx.uri,
        r.files_dropped,
        r.files_spliced,
        r.rows_expired,
        r.data_bytes_moved,
    )
    return r


def _declared(target: TableContext | HasContext) -> tuple[TableContext, RowRetention]:
    """The latest context of ``target`` and the row retention its table declares
    (InvalidRequest when it declares none)."""
    ctx = context_of(target).latest()
    keep = RowRetention.of(ctx.snapshot.properties)
    if keep is None:
        raise errors.InvalidRequest(
            f"{ctx.uri} declares no row retention; set one with Table.set_retention "
            "or `lethe retention set`"
        )
    return ctx, keep


def _result(
    rid: str,
    cutoff: datetime,
    sel: _Selection | None,
    splices: Sequence[SpliceResult],
    *,
    io: IOCounters,
    dry_run: bool,
    **more: Any,
) -> RetentionSweepResult:
    moved = sum(s.bytes_copied + s.bytes_uploaded + s.bytes_downloaded for s in splices)
    read = sel.read_io.bytes_downloaded if sel is not None else 0
    return RetentionSweepResult(
        request_id=rid,
        cutoff=cutoff,
        dry_run=dry_run,
        files_dropped=len(sel.dropped) if sel is not None else 0,
        files_spliced=len(splices) if not dry_run else len(sel.expired) if sel else 0,
        files_kept=sel.kept if sel is not None else 0,
        rows_expired=sel.rows if sel is not None else 0,
        bytes_dropped=sum(f.size for f in sel.dropped) if sel is not None else 0,
        data_bytes_moved=read + moved,
        splice_bytes=moved,
        splice_source_bytes=sum(s.old.size for s in splices),
        io=io,
        **more,
    )
