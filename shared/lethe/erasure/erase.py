"""Hard erasure: the row-group splice on S3, its commit, and ``Table.erase``.

An erase is a delete (the rows vanish from every new snapshot at once, with a DV) followed
by splices that remove them physically: for each affected file, the row groups holding
deleted rows are fetched (pinned ranged GETs), decoded, stripped of every deleted row and
re-encoded; the new object is assembled to a *new key* by a multipart upload that copies the
unchanged ranges server-side (``UploadPartCopy`` pinned with ``CopySourceIfMatch``) and
uploads only the new bytes, the rebuilt index region and footer last (one file:
:mod:`lethe.erasure.splice_file`; its I/O: :mod:`lethe.erasure.splice_io`). The files of one erasure are spliced a few at a time and committed together: each replaces
its source in the manifest with its DV rebased; a delete that landed on a source meanwhile
is mapped onto the new file. The pure parts live in :mod:`lethe.parquet`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lethe import errors
from lethe.catalog.changes import SetDVs, SplicedFile, SpliceFiles
from lethe.catalog.commit import Prepared
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile, ErasureRecord, Operation, RequestRecord, request_hash
from lethe.catalog.snapshot import Snapshot
from lethe.dv import lineage
from lethe.dv import store as dvstore
from lethe.dv.blob import rebase_positions
from lethe.dv.remap import targets_of
from lethe.erasure.deletes import DeleteRequest, delete_batch
from lethe.erasure.erased import edited_groups, erased_positions, pending_paths, pending_targets
from lethe.erasure.ownership import check_erasable, check_owned
from lethe.erasure.splice_file import SpliceResult, splice_file
from lethe.erasure.upkeep import spliced_rows
from lethe.index.erase import scrub_rows
from lethe.parquet.costs import DEFAULT_MODEL, CostModel
from lethe.parquet.fates import FileGranularity, merged
from lethe.progress import Progress, Tracker, track
from lethe.storage.counters import IOCounters

log = logging.getLogger(__name__)

__all__ = [
    "EraseResult",
    "FileGranularity",
    "SpliceResult",
    "erase",
    "process_erasure",
    "process_erasures",
    "splice_file",
]

SPLICE_WORKERS = 4  # files spliced at once by one erase or purge call
SPLICE_BATCH_FILES = 256  # spliced files committed together (one commit)


@dataclass(frozen=True, slots=True)
class EraseResult:
    """Outcome of :meth:`lethe.Table.erase`: the logical delete plus the splices.

    ``bytes_copied`` were copied server-side (never left S3); ``bytes_uploaded`` and
    ``bytes_downloaded`` crossed the wire; ``source_bytes`` is the size of the spliced files;
    ``granularity`` says, per spliced file, whether its row groups were rewritten page by
    page or whole, and why they fell back.
    """

    version: int | None
    rows_deleted: int
    files_touched: int
    rows_erased: int = 0
    files_spliced: int = 0
    files_removed: int = 0
    bytes_copied: int = 0
    bytes_uploaded: int = 0
    bytes_downloaded: int = 0
    source_bytes: int = 0
    duplicate: bool = False
    complete: bool = True
    io: IOCounters = field(default_factory=IOCounters)
    granularity: tuple[FileGranularity, ...] = ()
    #: the last snapshot this call committed (None: none), for the caller's handle to adopt
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @property
    def fallbacks(self) -> dict[str, int]:
        """How often each fallback reason occurred (issue 37 item 2; never a value)."""
        return merged(self.granularity)


# --- commit ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _SpliceChange:
    """Replace each ``s.old`` by ``s.new``, in one commit: ``prepare`` maps every position
    deleted so far (including deletes that landed during the splices) onto the new files,
    where removed rows vanish and later ones shift down, and writes those DVs in one
    container; the update is :class:`~lethe.catalog.changes.SpliceFiles`. A source another commit
    replaced meanwhile (a compaction moved its erasure targets) is left out and its spliced
    object removed; when every source was replaced the commit is refused. The spliced
    objects are the caller's (``owned``): removed if the commit does not land."""

    ctx: TableContext
    splices: tuple[SpliceResult, ...]
    what: str = "splice"

    @property
    def owned(self) -> tuple[str, ...]:
        return tuple(s.new.path for s in self.splices if s.new is not None)

    def prepare(self, base: Snapshot) -> Prepared[tuple[SpliceResult, ...]]:
        store, prefix = self.ctx.store, self.ctx.prefix
        cur = base.files_at([s.old.path for s in self.splices])
        live = tuple(s for s in self.splices if s.old.path in cur)
        gone = [s.new.path for s in self.splices if s.old.path not in cur and s.new is not None]
        if not live:
            raise errors.CommitConflict(
                f"{len(self.splices)} spliced file(s) were replaced by another commit during "
                "the splice; retry the erase"
            )
        if gone:  # never referenced: removed now (the loop removes the rest on failure)
            log.info("%d spliced file(s) were replaced meanwhile; left out", len(gone))
            store.delete_many([self.ctx.key_of(p) for p in gone])
        now = dvstore.load_many(store, prefix, {s.old.path: cur[s.old.path].dv for s in live})
        rebased = {
            s.new.path: rebase_positions(now[s.old.path], s.removed)
            for s in live
            if s.new is not None
        }
        rebased = {p: bm for p, bm in rebased.items() if len(bm)}
        refs = dvstore.write_dvs(store, prefix, rebased) if rebased else {}
        lin = lineage.record(store, prefix, base, [(s.old.path, s.new, s.removed) for s in live])
        found, values = spliced_rows(live)  # the values the splices read: no file read again
        pieces, piece_keys = scrub_rows(store, prefix, base, found, values=values)
        files = tuple(
            SplicedFile(
                s.old.path,
                cur[s.old.path].dv,
                s.new.model_copy(update={"dv": refs.get(s.new.path)}) if s.new else None,
                s.fates,
                frozenset(g.index for g in s.fates if g.edited),
            )
            for s in live
        )
        op = Operation(
            kind="erase",
            rows_erased=sum(len(s.removed) for s in live),
            files_removed=len(files),
            files_added=sum(1 for f in files if f.new is not None),
            files_touched=len(files),
            params={
                "row_groups_spliced": sum(len(f.spliced) for f in files),
                "index_pieces_scrubbed": len(pieces),
            },
        )
        stamps = [s.written_at for s in live if s.written_at is not None]
        written = sorted({r.container for r in refs.values() if r.container} | {lin.path})
        return Prepared(
            SpliceFiles(files, op, lin, base.manifest.lineage, pieces),
            live,
            written=(*written, *piece_keys),
            written_at=min(stamps) if stamps else None,
        )


def commit_splices(
    ctx: TableContext, splices: Sequence[SpliceResult]
) -> tuple[Snapshot, tuple[SpliceResult, ...]]:
    """Replace each spliced file's source by it in one commit, with its DV rebased;
    concurrent deletes on the sources are mapped onto the new files (through the catalog's
    one commit loop: bounded, jittered; a DV container is written anew only when a source's
    DV changed). Returns the snapshot and the splices it committed (a source another commit
    replaced meanwhile is left out).

    Raises CommitConflict (the spliced objects and this call's containers removed: the
    commit provably did not land) if no source is live any more, contention outlasts the
    bound, or the GC grace rule refuses the commit.
    """
    outcome = ctx.catalog.commit_change(_SpliceChange(ctx, tuple(splices)))
    if outcome.manifest is None:  # pragma: no cover - a splice always changes the table
        raise errors.CommitConflict("the splices committed nothing")
    return outcome.manifest, outcome.detail


def commit_splice(ctx: TableContext, s: SpliceResult) -> Snapshot:
    """:func:`commit_splices` of one splice."""
    return commit_splices(ctx, [s])[0]


# --- erase -----------------------------------------------------------------------------------
def process_erasure(
    ctx: TableContext,
    id_hash: str,
    *,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    task: str = "erase",
) -> tuple[bool, list[SpliceResult]]:
    """Splice the pending targets of one erasure, at most ``max_bytes`` of row groups
    (at least one group per call): :data:`SPLICE_WORKERS` files at a time, each pass over
    the pending files committed at once. Returns ``(complete, splices)``. ``progress`` hears
    of each file spliced as ``task``, out of the files pending at the start."""
    complete, splices, _ = _process(ctx, id_hash, max_bytes, progress, task)
    return complete, splices


def process_erasures(
    ctx: TableContext,
    id_hashes: Collection[str],
    *,
    max_bytes: int | None = None,
    progress: Progress | None = None,
    task: str = "erase",
    model: CostModel = DEFAULT_MODEL,
) -> tuple[bool, list[SpliceResult]]:
    """:func:`process_erasure` of several erasures at once (a batch of requests): each pass
    splices the pending files of any of them, so a file they share is spliced once and the
    commits are those of the files, not of the requests. ``model`` prices each file's
    splice plan (:mod:`lethe.parquet.costs`)."""
    if not id_hashes:
        return True, []
    ids = frozenset(id_hashes)
    complete, splices, _ = _process(ctx, ids, max_bytes, progress, task, model)
    return complete, splices


def _process(
    ctx: TableContext,
    id_hash: str | Collection[str],
    max_bytes: int | None,
    progress: Progress | None,
    task: str,
    model: CostModel = DEFAULT_MODEL,
) -> tuple[bool, list[SpliceResult], Snapshot | None]:
    """:func:`process_erasure`, with the snapshot the last splice committed (None: none)."""
    m, _ = ctx.catalog.current()
    pending = len(pending_paths(m, id_hash))
    with track(progress, task, total=pending, unit="files") as tracker:
        return _splice_pending(ctx, m, id_hash, max_bytes, tracker, model)


def _splice_pending(
    ctx: TableContext,
    m: Snapshot,
    id_hash: str | Collection[str],
    max_bytes: int | None,
    tracker: Tracker,
    model: CostModel = DEFAULT_MODEL,
) -> tuple[bool, list[SpliceResult], Snapshot | None]:
    """The loop of :func:`process_erasure` from the latest manifest ``m``: each pass splices
    the pending files of the erasure (at most :data:`SPLICE_BATCH_FILES`, within the
    budget) :data:`SPLICE_WORKERS` at a time, and commits them together."""
    done: list[SpliceResult] = []
    last: Snapshot | None = None
    budget = max_bytes
    while True:
        if done:
            m, _ = ctx.catalog.current()
        work = _batch(m, id_hash, budget)
        if not work:
            return True, done, last
        if budget is not None:
            budget -= sum(f.row_groups[g].length for f, groups in work for g in groups)
        spliced, failure = splice_all(TableContext(ctx.catalog, m), work, model)
        if spliced:
            last, committed = commit_splices(ctx, spliced)
            done.extend(committed)
            tracker.advance(len(committed))
        if failure is not None:  # what did splice is committed; the rest stays pending
            raise failure
        if budget is not None and budget <= 0:
            m, _ = ctx.catalog.current()
            return not pending_targets(m, id_hash), done, last


def _batch(
    m: Snapshot, id_hash: str | Collection[str], budget: int | None
) -> list[tuple[DataFile, list[int]]]:
    """The files of one pass and their row groups: every pending erasure on a file rides
    along (one splice per file); within ``budget`` bytes of row groups, at least one."""
    paths = pending_paths(m, id_hash)[:SPLICE_BATCH_FILES]
    live = m.files_at(paths)
    missing = [p for p in paths if p not in live]
    if missing:
        raise errors.CommitConflict(
            f"{len(missing)} erasure target(s) are not live in version {m.version}"
        )
    groups = edited_groups(m, paths)
    work: list[tuple[DataFile, list[int]]] = []
    left = budget
    for p in paths:
        f, chosen = live[p], list[int]()
        for g in groups.get(p, []):
            size = f.row_groups[g].length
            if left is not None and (chosen or work) and size > left:
                break
            if left is not None and size > left:  # the first group: spliced, and said so
                log.warning(
                    "erasure %s: a row group of %d bytes is over the splice budget of %d "
                    "bytes; splicing it whole in this call",
                    id_hash[:12] if isinstance(id_hash, str) else f"of {len(id_hash)}",
                    size,
                    left,
                )
            chosen.append(g)
            if left is not None:
                left -= size
        if chosen:
            work.append((f, chosen))
        if left is not None and (left <= 0 or len(chosen) < len(groups.get(p, []))):
            break
    return work


def splice_all(
    ctx: TableContext, work: Sequence[tuple[DataFile, list[int]]], model: CostModel = DEFAULT_MODEL
) -> tuple[list[SpliceResult], BaseException | None]:
    """Splice each file of ``work`` (:data:`SPLICE_WORKERS` at a time); the splices that
    succeeded, and the first failure (a failed splice leaves nothing behind)."""
    out: list[SpliceResult] = []
    failure: BaseException | None = None
    try:  # the erased rows only: rows a plain delete hid stay, under the new DV (issue 39)
        dvs = erased_positions(ctx, [f for f, _ in work])
    except Exception as e:
        return [], e
    if len(work) == 1:
        f, groups = work[0]
        try:
            return [splice_file(ctx, f, groups, dv=dvs[f.path], model=model)], None
        except Exception as e:
            return [], e
    with ThreadPoolExecutor(max_workers=min(SPLICE_WORKERS, len(work))) as pool:
        futures = [
            pool.submit(splice_file, ctx, f, groups, dv=dvs[f.path], model=model)
            for f, groups in work
        ]
        for fut in futures:
            try:
                out.append(fut.result())
            except Exception as e:
                failure = failure or e
    return out, failure


def erase(
    ctx: TableContext,
    filters: Any,
    *,
    request_id: str | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> EraseResult:
    """Delete the matching rows, then splice them out of every file that held them
    (``progress`` hears of each file spliced, task ``"erase"``)."""
    t0 = time.perf_counter()
    io0 = ctx.store.stats.snapshot()
    rid = request_id or f"erase-{uuid.uuid4().hex}"
    check_erasable(ctx.snapshot, filters)
    res = delete_batch(ctx, [DeleteRequest(filters, rid, erase=True)], kind="erase")
    one = res.results[0]
    if one.error is not None:
        raise errors.RequestIdConflict(one.error)
    h = request_hash(rid)
    complete, splices, last = _process(ctx, h, max_bytes, progress, "erase")
    io = ctx.store.stats.snapshot() - io0
    log.info(
        "erase on %s: %s rows, %s splices in %.2fs",
        ctx.uri,
        one.rows_deleted,
        len(splices),
        time.perf_counter() - t0,
    )
    return _result(
        last.version if last is not None else one.version,
        one.rows_deleted,
        one.files_touched,
        splices,
        duplicate=one.duplicate,
        complete=complete,
        io=io,
        snapshot=last or res.snapshot,
    )


def _result(
    version: int | None,
    rows_deleted: int,
    files_touched: int,
    splices: Sequence[SpliceResult],
    *,
    duplicate: bool,
    complete: bool,
    io: IOCounters,
    snapshot: Snapshot | None,
) -> EraseResult:
    return EraseResult(
        version=version,
        rows_deleted=rows_deleted,
        files_touched=files_touched,
        rows_erased=sum(len(s.removed) for s in splices),
        files_spliced=sum(1 for s in splices if s.new is not None),
        files_removed=sum(1 for s in splices if s.new is None),
        bytes_copied=sum(s.bytes_copied for s in splices),
        bytes_uploaded=sum(s.bytes_uploaded for s in splices),
        bytes_downloaded=sum(s.bytes_downloaded for s in splices),
        source_bytes=sum(s.old.size for s in splices),
        duplicate=duplicate,
        complete=complete,
        io=io,
        granularity=tuple(s.granularity for s in splices),
        snapshot=snapshot,
    )


@dataclass(frozen=True, slots=True)
class _Recorded:
    """What preparing a purge record found: the version of this request's record when an
    earlier call committed it (``duplicate``), else None."""

    version: int | None
    duplicate: bool


@dataclass(frozen=True, slots=True)
class _PurgeRecord:
    """The erasure record of a purge as a change: ``prepare`` finds every row group holding a
    hidden row (or the record an earlier call with this id committed). The index entries of
    the hidden rows are scrubbed by the splices' commits, from the values the splices read
    (issue 37 item 3: no data file read twice); the old pieces join ``superseded`` there."""

    ctx: TableContext
    id_hash: str
    what: str = "purge"
    owned: tuple[str, ...] = ()

    def prepare(self, base: Snapshot) -> Prepared[_Recorded]:
        h = self.id_hash
        rec = base.find_request(h)
        if rec is not None:
            return Prepared(None, _Recorded(rec.version, duplicate=True))
        store, prefix = self.ctx.store, self.ctx.prefix
        hidden = {f.path: dvstore.load(store, prefix, f.dv) for f in base.files if f.dv is not None}
        hidden = {p: bm for p, bm in hidden.items() if len(bm)}
        check_owned(base.files_at(sorted(hidden)).values(), "purge")
        targets = targets_of(base, hidden)
        if not targets:
            return Prepared(None, _Recorded(None, duplicate=False))
        record = RequestRecord(
            id_hash=h,
            version=0,
            kind="purge",
            committed_at=datetime.now(UTC),
            rows=sum(len(bm) for bm in hidden.values()),
            files_touched=len(targets),
        )
        erasure = ErasureRecord(id_hash=h, deleted_version=0, targets=targets)
        op = Operation(
            kind="purge",
            files_touched=len(targets),
            request_id_hash=h,
            params={"hidden_rows": record.rows},
        )
        update = SetDVs({}, {}, op, (record,), (erasure,))
        return Prepared(update, _Recorded(None, duplicate=False))


def record_purge(
    ctx: TableContext, request_id: str
) -> tuple[str, int | None, bool, Snapshot | None]:
    """Commit an erasure record naming every row group that holds a row a DV hides.

    Idempotent by ``request_id``: a second call finds the first one's record. Returns
    ``(request hash, version of the record or None when nothing is hidden, duplicate, the
    snapshot committed or None)``.
    """
    h = request_hash(request_id)
    outcome = ctx.catalog.commit_change(_PurgeRecord(ctx, h))
    if outcome.manifest is not None:
        return h, outcome.manifest.version, False, outcome.manifest
    return h, outcome.detail.version, outcome.detail.duplicate, None


def purge(
    ctx: TableContext,
    *,
    request_id: str | None = None,
    max_bytes: int | None = None,
    progress: Progress | None = None,
) -> EraseResult:
    """Physically remove every row a DV hides (REORG ... APPLY (PURGE)): one erasure record
    over every row group holding hidden rows, then bounded splices (``max_bytes`` per call;
    call again with the same ``request_id`` to go on, or let the splice worker do it).
    ``progress`` hears of each file spliced (task ``"purge"``)."""
    t0 = time.perf_counter()
    io0 = ctx.store.stats.snapshot()
    rid = request_id or f"purge-{uuid.uuid4().hex}"
    h, version, duplicate, recorded = record_purge(ctx, rid)
    splices: list[SpliceResult] = []
    complete, last = True, None
    if version is not None:
        complete, splices, last = _process(ctx, h, max_bytes, progress, "purge")
    log.info(
        "purge on %s: %s rows erased, %s splices, complete=%s in %.2fs",
        ctx.uri,
        sum(len(s.removed) for s in splices),
        len(splices),
        complete,
        time.perf_counter() - t0,
    )
    return _result(
        last.version if last is not None else version,
        0,
        0,
        splices,
        duplicate=duplicate,
        complete=complete,
        io=ctx.store.stats.snapshot() - io0,
        snapshot=last or recorded,
    )
