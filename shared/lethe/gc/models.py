"""Serialized forms of garbage collection: the run workspace documents and the report.

Everything GC writes under ``<table>/_gc/`` or hands between Step Functions states is a
frozen pydantic model defined here; the rest of :mod:`lethe.gc` holds the logic. Paths are
always table-relative (``data/2026/…/x.parquet``); documents carry no row values, only
paths, sizes, times, versions and request-id hashes.

Workspace layout (``<run id>`` is ``YYYYMMDDTHHMMSSZ-<8 hex>``)::

    _gc/<run id>/plan.json          PlanDocument: what the run marked and will delete
    _gc/<run id>/batch-0000.json    BatchDocument: <= 1,000 sweep candidates
    _gc/<run id>/sweep-0000.json    StepResult of that batch
    _gc/<run id>/expire.json        StepResult (manifests), abort.json, purge.json alike
    _gc/<run id>/report.json        GcReport (kept)
    _gc/<run id>/failure.json       FailureRecord of a failed workflow (kept)
    _gc/erasures/<id hash>.json     ErasureMarker: when an erasure became complete (kept)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from lethe.catalog.grace import format_duration
from lethe.catalog.manifest import ErasureRecord

__all__ = [
    "CATEGORIES",
    "BatchDocument",
    "BatchEntry",
    "Category",
    "CategoryStats",
    "ErasureHead",
    "ErasurePlan",
    "ErasureStatus",
    "FailureRecord",
    "GcReport",
    "PlanDocument",
    "PlanState",
    "RunHeader",
    "StepResult",
    "carried",
]

Category = Literal[
    "data",
    "tombstone",
    "staging",
    "segment",
    "iceberg",
    "workspace",
    "manifest",
    "upload",
    "version",
]
CATEGORIES: tuple[Category, ...] = get_args(Category)
Step = Literal["sweep", "expire", "abort", "purge"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CategoryStats(_Frozen):
    """How many objects (and bytes) of one category."""

    objects: int = 0
    bytes: int = 0

    def __add__(self, other: CategoryStats) -> CategoryStats:
        return CategoryStats(objects=self.objects + other.objects, bytes=self.bytes + other.bytes)


def carried(src: BaseModel, fields: Iterable[str]) -> dict[str, Any]:
    """``src``'s values of ``fields``: what a document made from another carries over."""
    return {f: getattr(src, f) for f in fields}


def add_stats(
    a: Mapping[Category, CategoryStats], b: Mapping[Category, CategoryStats]
) -> dict[Category, CategoryStats]:
    """Per-category sum of two count maps (categories in :data:`CATEGORIES` order)."""
    return {
        c: a.get(c, CategoryStats()) + b.get(c, CategoryStats())
        for c in CATEGORIES
        if c in a or c in b
    }


class BatchEntry(_Frozen):
    """One sweep candidate. ``erased_at`` is set for a file superseded by an erasure splice:
    its age is counted from the splice commit (against the erasure grace), not from upload."""

    path: str
    size: int = Field(ge=0)
    category: Category
    last_modified: datetime
    erased_at: datetime | None = None


class RunHeader(_Frozen):
    """What a run's plan and each of its batches both state: the run and what it marked."""

    kind: str
    table: str
    table_uuid: str
    run_id: str
    dry_run: bool
    marked_through: int
    grace_seconds: float = Field(ge=0)
    erasure_grace_seconds: float = Field(ge=0)


class BatchDocument(RunHeader):
    """``_gc/<run>/batch-NNNN.json``: at most 1,000 keys one Sweep invocation deletes."""

    kind: Literal["lethe.gc.batch"] = "lethe.gc.batch"
    index: int = Field(ge=0)
    entries: tuple[BatchEntry, ...]


class ErasureHead(_Frozen):
    """An erasure request as the plan found it: the first fields of its plan and its status."""

    id_hash: str
    state: Literal["pending", "spliced"]
    deleted_version: int
    spliced_version: int | None = None


class ErasurePlan(ErasureHead):
    """What must disappear before an erasure request is complete, as marked by the plan.

    ``blockers`` are the objects present at plan time that may hold the erased rows: the
    superseded files, and every unreferenced object under ``data/`` or ``_staging/`` written
    before the splice commit (an upload that never committed, a file replaced by a compaction).
    """

    spliced_at: datetime | None = None
    superseded: tuple[str, ...] = ()
    blockers: tuple[str, ...] = ()
    previously_completed_at: datetime | None = None
    previously_completed_run: str | None = None


class PlanDocument(RunHeader):
    """``_gc/<run>/plan.json``: the marks of one run, read by every later step."""

    kind: Literal["lethe.gc.plan"] = "lethe.gc.plan"
    created_at: datetime
    retention: str
    versioned: bool
    head_version: int
    oldest_kept_version: int
    kept_versions: int
    expire_below: int
    candidates: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    young: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    batches: tuple[str, ...] = ()
    truncated: bool = False
    erasures: tuple[ErasurePlan, ...] = ()
    # versions from before a splice kept through it (read through the lineage, issue 39)
    mapped_versions: tuple[int, ...] = Field(default=(), exclude_if=lambda v: not v)


class PlanState(_Frozen):
    """What the Plan step returns into the workflow state (``$.plan``): small by design."""

    table: str
    run_id: str
    dry_run: bool
    head_version: int
    oldest_kept_version: int
    candidates: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    batches: tuple[str, ...] = ()
    truncated: bool = False

    @classmethod
    def of(cls, plan: PlanDocument) -> PlanState:
        """The plan's fields the workflow carries."""
        return cls(**carried(plan, cls.model_fields))


class StepResult(_Frozen):
    """Outcome of one destructive step (or what it would do, in a dry run)."""

    kind: Literal["lethe.gc.step"] = "lethe.gc.step"
    step: Step
    run_id: str
    dry_run: bool
    deleted: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    keys: Mapping[Category, tuple[str, ...]] = Field(default_factory=dict)
    skipped: Mapping[str, int] = Field(default_factory=dict)
    failed: tuple[str, ...] = ()
    versions_remaining: Mapping[str, int] = Field(default_factory=dict)

    @classmethod
    def tally(
        cls,
        step: Step,
        run_id: str,
        dry_run: bool,
        done: Iterable[tuple[Category, str, int]],
        skipped: Mapping[str, int],
        failed: Iterable[str],
    ) -> StepResult:
        """The result of a step that deleted ``done`` (category, path, size each)."""
        deleted: dict[Category, CategoryStats] = {}
        keys: dict[Category, list[str]] = defaultdict(list)
        for cat, path, size in done:
            deleted[cat] = deleted.get(cat, CategoryStats()) + CategoryStats(objects=1, bytes=size)
            keys[cat].append(path)
        return cls(
            step=step,
            run_id=run_id,
            dry_run=dry_run,
            deleted={c: deleted[c] for c in CATEGORIES if c in deleted},
            keys={c: tuple(keys[c]) for c in CATEGORIES if c in keys},
            skipped=dict(skipped),
            failed=tuple(failed),
        )

    def summary(self) -> dict[str, Any]:
        """Counts only, for the workflow state."""
        return {
            "step": self.step,
            "dry_run": self.dry_run,
            "deleted": {c: s.model_dump() for c, s in self.deleted.items()},
            "skipped": dict(self.skipped),
            "failed": len(self.failed),
        }


class ErasureStatus(ErasureHead):
    """Whether every object (and old manifest) that held an erasure request's rows is gone."""

    complete: bool
    completed_at: datetime | None = None
    completed_run: str | None = None
    newly_complete: bool = False
    blocking: tuple[str, ...] = ()


class GcReport(_Frozen):
    """The result of a GC run (``_gc/<run>/report.json``); in a dry run, what it would do.

    ``deleted`` and ``keys`` hold what was deleted (or, with ``dry_run``, what would be);
    ``young`` counts unreferenced objects kept because they are younger than the grace period;
    ``erasures`` tells, per erasure request, whether its rows are physically gone and when
    that point was reached.
    """

    kind: Literal["lethe.gc.report"] = "lethe.gc.report"
    table: str
    run_id: str
    dry_run: bool
    started_at: datetime
    finished_at: datetime
    retention: str
    grace_seconds: float
    erasure_grace_seconds: float
    versioned: bool
    head_version: int
    oldest_kept_version: int
    kept_versions: int
    deleted: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    young: Mapping[Category, CategoryStats] = Field(default_factory=dict)
    keys: Mapping[Category, tuple[str, ...]] = Field(default_factory=dict)
    keys_truncated: bool = False
    failed: tuple[str, ...] = ()
    truncated: bool = False
    erasures: tuple[ErasureStatus, ...] = ()

    @property
    def complete_erasures(self) -> tuple[str, ...]:
        """Id hashes of the erasure requests whose rows are physically gone."""
        return tuple(e.id_hash for e in self.erasures if e.complete)

    @property
    def objects_deleted(self) -> int:
        return sum(s.objects for s in self.deleted.values())

    @property
    def bytes_deleted(self) -> int:
        return sum(s.bytes for s in self.deleted.values())

    def summary(self) -> dict[str, Any]:
        """A compact JSON-able summary (the Report step's output into the workflow state)."""
        newly = [e.id_hash for e in self.erasures if e.newly_complete]
        return {
            "run_id": self.run_id,
            "dry_run": self.dry_run,
            "head_version": self.head_version,
            "oldest_kept_version": self.oldest_kept_version,
            "deleted": {c: s.model_dump() for c, s in self.deleted.items()},
            "failed": len(self.failed),
            "truncated": self.truncated,
            "erasures_complete": len(self.complete_erasures),
            "erasures_incomplete": sum(1 for e in self.erasures if not e.complete),
            "erasures_newly_complete": newly[:50],
        }

    def describe(self) -> str:
        """Human-readable text for the command line."""
        verb = "would delete" if self.dry_run else "deleted"
        lines = [
            f"GC {'dry run ' if self.dry_run else ''}{self.run_id} of {self.table}: head v{self.head_version}, "
            f"kept {self.kept_versions} versions (v{self.oldest_kept_version}..), "
            f"retention {self.retention}, grace {format_duration(self.grace_seconds)}, "
            f"erasure grace {format_duration(self.erasure_grace_seconds)}"
        ]
        for c in CATEGORIES:
            s = self.deleted.get(c)
            y = self.young.get(c)
            if s is None and y is None:
                continue
            s = s or CategoryStats()
            extra = f" (kept {y.objects} younger than the grace period)" if y and y.objects else ""
            lines.append(f"  {c:<10} {verb} {s.objects:>7} objects {s.bytes:>14,} bytes{extra}")
        if self.failed:
            lines.append(f"  {len(self.failed)} deletions failed (the next run retries them)")
        if self.truncated:
            lines.append("  more candidates than one run handles: run GC again")
        for e in self.erasures:
            if e.complete:
                when = e.completed_at.isoformat(timespec="seconds") if e.completed_at else "?"
                state = "would be complete" if self.dry_run and e.newly_complete else "complete"
                lines.append(f"  erasure {e.id_hash}: {state} ({when})")
            else:
                lines.append(f"  erasure {e.id_hash}: not yet: {'; '.join(e.blocking)}")
        return "\n".join(lines)


class ErasureMarker(_Frozen):
    """``_gc/erasures/<id hash>.json``: written once, when GC first saw the erasure complete;
    it keeps the erasure's record, which then leaves the root (:func:`lethe.gc.actions.expire`)."""

    kind: Literal["lethe.gc.erasure"] = "lethe.gc.erasure"
    id_hash: str
    spliced_version: int
    completed_at: datetime
    run_id: str
    # the erasure record, superseded paths inline: the archive receipts read once GC's
    # expire step dropped the record from the root (None: a marker written before that)
    record: ErasureRecord | None = Field(default=None, exclude_if=lambda v: v is None)
    # the retained versions from before its splice that read through it (issue 39)
    mapped_versions: tuple[int, ...] = Field(default=(), exclude_if=lambda v: not v)


class FailureRecord(_Frozen):
    """``_gc/<run>/failure.json``: the error a workflow step failed with (from its Catch)."""

    kind: Literal["lethe.gc.failure"] = "lethe.gc.failure"
    run_id: str
    step: str
    error: str
    cause: str
    recorded_at: datetime
