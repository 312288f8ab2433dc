"""Compaction: rewrite files with many deleted rows, bin small files, coalesce DV containers.

DESIGN §5. Three steps, of which only the middle one is distributed (Spark on EMR, or a plain
loop for small tables):

1. :func:`plan_compaction` (pure, :mod:`lethe.maintenance.compaction_plan`): files with many
   deleted rows and small files, binned by key into groups of about ``target_file_bytes``;
   untouched files whose DVs are spread over many containers are listed for coalescing.
2. :func:`run_rewrite_task` (:mod:`lethe.maintenance.rewrite`): one group's live rows (DVs
   applied) are read in file and row order and written with the lethe writer. The rewrite is
   **order-preserving**: row ``p`` of source ``s`` lands at ``offset(s) + p - |dv(s) ∩ [0, p)|``
   of the group's output.
3. :func:`commit_compaction` (here): one CAS commit replaces the sources by the outputs
   (:func:`~lethe.catalog.manifest.apply_replace`). A delete that landed on a source after the
   plan was made is *mapped* onto the outputs through that position map (:func:`map_deletes`,
   in the pure :mod:`lethe.dv.remap`) and written as their DVs — never lost. Pending erasures
   that named a source are satisfied (the rows are physically gone) or moved to the outputs.
   The coalesced DVs of untouched files are copied blob for blob into the same new container.

Example:
    >>> import lethe                                                   # doctest: +SKIP
    >>> from lethe.maintenance.compaction import CompactionOptions                 # doctest: +SKIP
    >>> t = lethe.Table.open("s3://bucket/events")                     # doctest: +SKIP
    >>> print(t.compact(CompactionOptions(min_deleted_fraction=0.2)).describe())  # doctest: +SKIP
    version 9: 3 groups, 5 files -> 3 files, 1,200,000 rows rewritten, ...
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from pyroaring import BitMap64

from lethe import errors
from lethe.catalog.changes import ReplaceFiles
from lethe.catalog.commit import CommitOutcome, Prepared
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import DataFile, DVRef, ErasureTarget, IndexRun, Operation
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore
from lethe.dv.blob import encode_dv
from lethe.dv.remap import map_deletes, mapped_positions, row_groups_of, split_positions
from lethe.index.erase import scrub_rows
from lethe.index.runs import catch_up, runs_for_files
from lethe.maintenance.clustering_io import output_positions
from lethe.maintenance.compaction_plan import (
    CompactionGroup,
    CompactionOptions,
    CompactionPlan,
    plan_compaction,
)
from lethe.maintenance.rewrite import RewriteTask, rewrite_tasks, run_rewrite_task
from lethe.progress import Progress, track
from lethe.storage.counters import IOCounters
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = [
    "CompactionGroup",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionResult",
    "RewriteTask",
    "commit_compaction",
    "compact",
    "map_deletes",
    "plan_compaction",
    "rewrite_tasks",
    "run_rewrite_task",
]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What a compaction did (``version`` None: nothing committed)."""

    version: int | None
    dry_run: bool
    plan: CompactionPlan
    groups_committed: int = 0
    groups_skipped: int = 0
    files_removed: int = 0
    files_added: int = 0
    rows_rewritten: int = 0
    deleted_rows_purged: int = 0
    concurrent_deletes_mapped: int = 0
    dvs_coalesced: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    attempts: int = 0
    seconds: float = 0.0
    io: IOCounters = field(default_factory=IOCounters)
    #: the snapshot this compaction committed (None: none), for the caller's handle to adopt
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        if self.dry_run:
            return self.plan.describe()
        if self.version is None:
            return f"nothing committed ({self.groups_skipped} groups skipped)"
        return (
            f"version {self.version}: {self.groups_committed} groups, {self.files_removed} files "
            f"-> {self.files_added} files ({self.bytes_before:,} B -> {self.bytes_after:,} B), "
            f"{self.rows_rewritten:,} rows rewritten, {self.deleted_rows_purged:,} deleted rows "
            f"purged, {self.concurrent_deletes_mapped:,} concurrent deletes mapped, "
            f"{self.dvs_coalesced} DVs coalesced, {self.groups_skipped} groups skipped "
            f"({self.attempts} attempts, {self.seconds:.1f} s)"
        )


#: What the compaction preparation that landed committed: its counts, by result field.
_Committed = dict[str, int]


@dataclass(frozen=True, slots=True)
class _CompactionChange:
    """A compaction commit as a change: ``prepare`` drops groups whose sources are gone,
    maps deletes that reached a source since the plan onto the outputs and writes them with
    the coalesced DVs in one container; the update is :class:`~lethe.catalog.changes.ReplaceFiles`.
    Outputs of groups that do not commit are removed by the loop (``owned``) or when
    skipped (``skipped`` collects them across attempts; the DV caches span attempts too).
    ``runs`` and ``caught_up`` are the index runs written before the commit (see
    :func:`commit_compaction`)."""

    ctx: TableContext
    plan: CompactionPlan
    outputs: Mapping[int, Sequence[DataFile]]
    written_at: float | None
    runs: Mapping[str, IndexRun]
    caught_up: Mapping[str, IndexRun]
    owned: tuple[str, ...]
    what: str = "compaction"
    skipped: set[int] = field(default_factory=set)
    _bitmaps: dict[DVRef, BitMap64] = field(default_factory=dict)
    _raw: dict[DVRef, bytes] = field(default_factory=dict)

    def _bitmap(self, ref: DVRef | None) -> BitMap64:
        if ref is None:
            return BitMap64()
        if ref not in self._bitmaps:
            self._bitmaps[ref] = dvstore.load(self.ctx.store, self.ctx.prefix, ref)
        return self._bitmaps[ref]

    def _map(
        self, live: Sequence[CompactionGroup], dv_now: Mapping[str, DVRef | None]
    ) -> tuple[list[tuple[str, bytes, int]], dict[str, list[ErasureTarget]], int]:
        """Deletes that reached a source since the plan, as DV blobs of the outputs; the
        erasure targets they move; how many positions were mapped."""
        mapped: list[tuple[str, bytes, int]] = []
        moved: dict[str, list[ErasureTarget]] = {}
        n_mapped = 0
        for g in live:
            outs = list(self.outputs.get(g.index, ()))
            if all(dv_now[f.path] == f.dv for f in g.files):
                continue
            rows = [o.rows for o in outs]
            per_source = mapped_positions(
                [(f.rows, self._bitmap(f.dv), self._bitmap(dv_now[f.path])) for f in g.files],
                rows,
            )
            if g.cluster and self.plan.cluster is not None:  # through the cluster order
                ctx, spec = self.ctx, self.plan.cluster
                schema, key = ctx.snapshot.arrow_schema(), ctx.snapshot.key
                at = output_positions(ctx.store, ctx.prefix, g.files, schema, key, spec)
                per_source = [np.sort(at[p.astype(np.int64)]).astype(np.uint64) for p in per_source]
            for o, bm in zip(outs, split_positions(np.concatenate(per_source), rows), strict=True):
                if bm:
                    mapped.append((o.path, encode_dv(bm), len(bm)))
                    n_mapped += len(bm)
            for f, pos in zip(g.files, per_source, strict=True):  # for pending erasures
                if pos.size:
                    moved[f.path] = [
                        ErasureTarget(path=o.path, row_groups=row_groups_of(o, bm))
                        for o, bm in zip(outs, split_positions(pos, rows), strict=True)
                        if bm
                    ]
        return mapped, moved, n_mapped

    def _coalesce(self, base: Snapshot) -> tuple[list[tuple[str, bytes, int]], dict[str, DVRef]]:
        """The DV blobs of the plan's untouched files still as planned, copied as they are
        (none unless they come from two containers or more), and their old references."""
        coalesce: list[tuple[str, bytes, int]] = []
        coalesce_from: dict[str, DVRef] = {}
        for f in self.plan.coalesce:
            cur = base.file(f.path)
            if cur is None or cur.dv is None or cur.dv != f.dv or f.dv.container is None:
                continue
            if f.dv not in self._raw:
                self._raw[f.dv] = dvstore.blob_bytes(self.ctx.store, self.ctx.prefix, f.dv)
            coalesce.append((f.path, self._raw[f.dv], f.dv.cardinality))
            coalesce_from[f.path] = f.dv
        if len({r.container for r in coalesce_from.values()}) < 2:
            return [], {}
        return coalesce, coalesce_from

    def prepare(self, base: Snapshot) -> Prepared[_Committed | None]:
        live = self._live_groups(base)
        dv_now = {f.path: base.file(f.path).dv for g in live for f in g.files}  # type: ignore[union-attr]
        mapped, moved, n_mapped = self._map(live, dv_now)
        coalesce, coalesce_from = self._coalesce(base)
        if not live and not coalesce:
            return Prepared(None, None)
        container_at = time.time()
        ctx = self.ctx
        blobs = mapped + coalesce
        refs = dvstore.write_container(ctx.store, ctx.prefix, blobs) if blobs else {}
        sources = [f for g in live for f in g.files]  # one exit: their index entries go
        pieces, piece_keys = scrub_rows(ctx.store, ctx.prefix, base, {}, dropped=sources)
        update, stats = self._replacement(live, dv_now, refs, moved, n_mapped, coalesce_from)
        update = replace(update, pieces=pieces) if pieces else update
        done = {
            **{("groups_committed" if k == "groups" else k): n for k, n in stats.items()},
            "bytes_before": sum(f.size for g in live for f in g.files),
            "bytes_after": sum(o.size for o in update.added),
            "files_removed": len(update.removed),
            "files_added": len(update.added),
        }
        return Prepared(
            update,
            done,
            written=(*sorted({r.container for r in refs.values() if r.container}), *piece_keys),
            written_at=container_at if self.written_at is None else self.written_at,
            renewable=self.written_at is None,  # only a container of ours: write it anew
        )

    def _live_groups(self, base: Snapshot) -> list[CompactionGroup]:
        """The groups whose sources are all still live in ``base``; the outputs of the others
        (written for groups that cannot commit: never referenced) are deleted."""
        ctx, plan, outputs = self.ctx, self.plan, self.outputs
        live = [
            g
            for g in plan.groups
            if g.index not in self.skipped and all(base.file(f.path) is not None for f in g.files)
        ]
        gone = {g.index for g in plan.groups} - {g.index for g in live} - self.skipped
        if gone:  # written for groups that cannot commit: never referenced, safe to delete
            self.skipped.update(gone)
            ctx.store.delete_many([ctx.key_of(o.path) for i in gone for o in outputs.get(i, ())])
        return live

    def _replacement(
        self,
        live: Sequence[CompactionGroup],
        dv_now: Mapping[str, DVRef | None],
        refs: Mapping[str, DVRef],
        moved: Mapping[str, Sequence[ErasureTarget]],
        n_mapped: int,
        coalesce_from: Mapping[str, DVRef],
    ) -> tuple[ReplaceFiles, dict[str, int]]:
        """The commit of the live groups (pure), and its counts."""
        plan = self.plan
        added = [
            o.model_copy(update={"dv": refs.get(o.path)})
            for g in live
            for o in self.outputs.get(g.index, ())
        ]
        removed = [f.path for g in live for f in g.files]
        stats = {
            "groups": len(live),
            "rows_rewritten": sum(o.rows for o in added),
            "deleted_rows_purged": sum(f.deleted_rows for g in live for f in g.files),
            "concurrent_deletes_mapped": n_mapped,
            "dvs_coalesced": len(coalesce_from),
        }
        op = Operation(
            kind="compact",
            files_added=len(added),
            files_removed=len(removed),
            files_touched=len(coalesce_from),
            params={
                **stats,
                "base_version": plan.base_version,
                "min_deleted_fraction": plan.options.min_deleted_fraction,
            },
        )
        update = ReplaceFiles(
            removed=tuple(removed),
            dv_seen={p: dv_now[p] for p in removed},
            added=tuple(added),
            operation=op,
            coalesced={p: refs[p] for p in coalesce_from},
            coalesced_from=coalesce_from,
            moved=moved,
            plan_version=plan.base_version,
            runs=self.runs,
            caught_up=self.caught_up,
        )
        return update, stats


def commit_compaction(
    ctx: TableContext,
    plan: CompactionPlan,
    outputs: Mapping[int, Sequence[DataFile]],
    *,
    written_at: float | None = None,
) -> CompactionResult:
    """Commit a compaction's outputs by CAS, mapping concurrent deletes onto them.

    Every attempt starts from the latest version: groups whose sources are all still live are
    committed, others (a source was replaced meanwhile, e.g. by a splice) are skipped and their
    outputs deleted. Deletes that reached a source since the plan are mapped onto the outputs
    (:func:`map_deletes`) and written, with the coalesced DVs, in one new container. If a
    source's DV changes between that work and the CAS, the attempt is redone. When the commit
    provably did not land (:class:`~lethe.errors.CommitConflict`,
    :class:`~lethe.errors.GraceExpired`), the outputs are removed.

    Args:
        ctx: The table, on the snapshot the plan was made from.
        plan: The plan the outputs were written for.
        outputs: Output files per group index (fully deleted groups: none).
        written_at: ``time.time()`` before the first output was uploaded (default: read
            from the outputs' ``LastModified``); past the table's GC grace rule the commit
            is refused with :class:`~lethe.errors.GraceExpired`.
    """
    t0 = time.perf_counter()
    io0 = ctx.store.stats.snapshot()
    all_outputs = [o for r in outputs.values() for o in r]
    if written_at is None and all_outputs:
        written_at = ctx.written_at(all_outputs)
    # the outputs' index runs, written once (entries of files that do not commit are
    # ignored by readers: they are not live); files no index covers yet (spliced ones) are
    # indexed by compaction too
    store, prefix, m = ctx.store, ctx.prefix, ctx.snapshot
    runs, pieces = runs_for_files(store, prefix, m, all_outputs)
    sources = {f.path for g in plan.groups for f in g.files}
    caught_up, more = catch_up(store, prefix, m, exclude=sources)
    owned = (*(o.path for o in all_outputs), *pieces, *more)
    change = _CompactionChange(ctx, plan, outputs, written_at, runs, caught_up, owned)
    outcome = ctx.catalog.commit_change(change)
    return dataclasses.replace(
        _result(plan, outcome, skipped=len(change.skipped)),
        seconds=time.perf_counter() - t0,
        io=ctx.store.stats.snapshot() - io0,
        snapshot=outcome.manifest,
    )


def _result(
    plan: CompactionPlan, outcome: CommitOutcome[_Committed | None], *, skipped: int
) -> CompactionResult:
    """What a commit's outcome did (pure; the caller adds time and I/O)."""
    m, done = outcome.manifest, outcome.detail
    counts: Mapping[str, Any] = done if m is not None and done is not None else {}
    version = m.version if counts and m is not None else None
    return CompactionResult(
        version, False, plan, groups_skipped=skipped, attempts=outcome.attempts, **counts
    )


RunTasks = Callable[[Sequence[RewriteTask]], Sequence[Sequence[DataFile]]]


def _run_locally(store: S3Store, progress: Progress | None = None) -> RunTasks:
    def run(tasks: Sequence[RewriteTask]) -> list[list[DataFile]]:
        with track(progress, "compact", total=len(tasks), unit="groups") as tracker:
            rewrite = tracker.each(functools.partial(run_rewrite_task, store=store))
            return [rewrite(t) for t in tasks]

    return run


def compact(
    ctx: TableContext,
    options: CompactionOptions | None = None,
    *,
    dry_run: bool = False,
    run_tasks: RunTasks | None = None,
    progress: Progress | None = None,
) -> CompactionResult:
    """Plan, rewrite and commit one compaction of the table's latest version
    (``Table.compact``; the result's ``snapshot`` is the version it committed).

    Args:
        ctx: The table (its latest version is read first).
        options: What to rewrite.
        dry_run: Only plan (``result.describe()`` prints the plan).
        run_tasks: Runs the rewrite tasks and returns each task's output files, in task order
            (default: one after the other in this process; the Spark job distributes them).
            The commit follows its return; what commits meanwhile is rebased onto.
        progress: Hears of each group rewritten in this process (task ``"compact"``).
    """
    t0 = time.perf_counter()
    io0 = ctx.store.stats.snapshot()
    ctx = ctx.latest()
    plan = plan_compaction(ctx.snapshot, options, table_uri=ctx.uri)
    if dry_run or plan.empty:
        return CompactionResult(None, dry_run, plan, seconds=time.perf_counter() - t0)
    tasks = rewrite_tasks(plan, ctx.snapshot)
    written_at = time.time()  # before any output is uploaded: the GC grace clock
    results = list((run_tasks or _run_locally(ctx.store, progress))(tasks)) if tasks else []
    if len(results) != len(tasks):
        raise errors.InvalidRequest(
            f"run_tasks returned {len(results)} results for {len(tasks)} tasks"
        )
    outputs: dict[int, Sequence[DataFile]] = {
        t.group: list(r) for t, r in zip(tasks, results, strict=True)
    }
    res = commit_compaction(ctx, plan, outputs, written_at=written_at)
    return dataclasses.replace(
        res, seconds=time.perf_counter() - t0, io=ctx.store.stats.snapshot() - io0
    )
