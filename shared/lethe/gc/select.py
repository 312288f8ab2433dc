"""What a GC run may delete, decided from a listing and the marks (pure: no I/O).

An unmarked object older than the grace period is a candidate. A file superseded by an
erasure splice (``ErasureRecord.superseded``) was committed once, so no uncommitted writer
can still claim it: its age counts from the splice commit, against the (shorter) erasure
grace. An unmarked segment object (or superseded list of an erasure record) written for
version ``V <= marked_through`` goes at once:
manifest ``vV`` already exists, so the writer of that segment either landed ``vV`` (and the
segment is referenced by it, or ``vV`` expired) or lost the race for ``vV`` and will never
reference it; a segment for a version beyond waits for the grace like any other upload. An Iceberg-view
manifest made from a released segment goes at once too (no retained version lists it).
Manifests older than the oldest kept one expire. Workspace files of finished runs (or
of runs abandoned for :data:`~lethe.gc.policy.WORKSPACE_GRACE`) go too. For every erasure
request, the plan records what may still hold its rows (:class:`~lethe.gc.models.ErasurePlan`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lethe.catalog.manifest import ErasureRecord
from lethe.gc.areas import (
    KEPT_WORKSPACE_FILES,
    MARKERS,
    RUN_ID,
    category,
    holds_values,
    manifest_version,
    released,
)
from lethe.gc.models import (
    CATEGORIES,
    BatchEntry,
    Category,
    CategoryStats,
    ErasureHead,
    ErasurePlan,
    carried,
)
from lethe.gc.policy import BATCH_KEYS, WORKSPACE_GRACE, is_old

__all__ = ["Listed", "Marks", "Selection", "batches", "candidates", "expiring", "select"]


@dataclass(frozen=True, slots=True)
class Listed:
    """One listed object."""

    path: str  # table-relative
    size: int
    last_modified: datetime | None


@dataclass(frozen=True, slots=True)
class Marks:
    """What the kept manifests reference."""

    table_uuid: str
    head_version: int
    marked_through: int  # newest version read (> head when a landed commit awaits its head)
    kept: tuple[int, ...]  # versions, newest first (head chain only)
    created_at: Mapping[int, datetime]
    referenced: frozenset[str]
    erasures: tuple[ErasureRecord, ...]
    gc_grace: timedelta = timedelta(0)  # the table's grace property (lethe.catalog.grace)
    # objects only versions cut off by an erasure referenced (lethe.gc.marking.mark), and the
    # time of the splice commit that cut them off: they go with the erasure
    released: frozenset[str] = frozenset()
    cut_at: datetime | None = None
    # versions kept through an erasure (issue 39): their roots as GC writes them anew
    mapped: Mapping[int, Any] = field(default_factory=dict)

    @property
    def oldest_kept(self) -> int:
        return min(self.kept)


@dataclass(frozen=True, slots=True)
class Selection:
    """The sweep candidates (sorted by path), the unreferenced objects kept because they are
    young, the first version that does not expire, and what each erasure still waits for."""

    sweep: tuple[BatchEntry, ...]
    young: Mapping[Category, CategoryStats]
    expire_below: int
    erasures: tuple[ErasurePlan, ...]


def select(
    listing: Sequence[Listed],
    marks: Marks,
    *,
    grace: timedelta,
    erasure_grace: timedelta,
    now: datetime,
    run_id: str,
) -> Selection:
    """Decide what the run ``run_id`` deletes, from a listing taken *before* ``marks``."""
    completed, finished = _workspace_state(listing)
    erased_at, spliced_at = _splice_times(marks)
    sweep: list[BatchEntry] = []
    young: dict[Category, CategoryStats] = {}
    unreferenced_values: list[Listed] = []
    present: set[str] = set()
    for o in listing:
        cat = category(o.path)
        present.add(o.path)
        if cat is None or cat == "manifest":
            continue
        if cat == "workspace":
            if _kept_workspace_file(o.path, run_id):
                continue
            entry = _workspace_entry(o, cat, finished=finished, now=now)
        elif o.path in marks.referenced:
            continue
        else:
            if holds_values(o.path):  # a segment's entries' stats may name erased values
                unreferenced_values.append(o)
            if o.last_modified is not None and released(
                o.path, cat, marks.referenced, marks.marked_through
            ):
                entry = _entry(o, cat)
            else:
                entry = _unreferenced_entry(
                    o, cat, erased_at.get(o.path), grace=grace, erasure_grace=erasure_grace, now=now
                )
        if entry is None:
            young[cat] = young.get(cat, CategoryStats()) + CategoryStats(objects=1, bytes=o.size)
        else:
            sweep.append(entry)
    plans = _erasure_plans(marks, completed, spliced_at, present, unreferenced_values)
    sweep.sort(key=lambda b: b.path)
    return Selection(tuple(sweep), young, marks.oldest_kept, plans)


def _workspace_state(listing: Sequence[Listed]) -> tuple[dict[str, datetime | None], set[str]]:
    """Completed erasures (markers) and finished runs, from the workspace listing."""
    completed: dict[str, datetime | None] = {}
    finished: set[str] = set()
    for o in listing:
        if o.path.startswith(MARKERS) and o.path.endswith(".json"):
            completed[o.path[len(MARKERS) : -len(".json")]] = o.last_modified
        parts = o.path.split("/")
        if len(parts) == 3 and parts[0] == "_gc" and parts[2] in KEPT_WORKSPACE_FILES:
            finished.add(parts[1])
    return completed, finished


def _splice_times(marks: Marks) -> tuple[dict[str, datetime], dict[str, datetime | None]]:
    """Superseded files of spliced erasures: age from the splice commit. If that manifest has
    expired, the oldest kept manifest is younger than it: a safe lower bound of the age.
    Objects only the versions an erasure cut off referenced (``marks.released``) age from
    the splice commit that cut them off (they were committed once, like superseded files).
    Returns (superseded path -> its erasure time, erasure id hash -> splice commit time)."""
    erased_at: dict[str, datetime] = {}
    spliced_at: dict[str, datetime | None] = {}
    for e in marks.erasures:
        if e.state != "spliced" or e.spliced_version is None:
            continue
        at = marks.created_at.get(e.spliced_version)
        spliced_at[e.id_hash] = at
        for p in e.superseded:
            erased_at.setdefault(p, at or marks.created_at[marks.oldest_kept])
    if marks.cut_at is not None:
        for p in marks.released:
            erased_at.setdefault(p, marks.cut_at)
    return erased_at, spliced_at


def _kept_workspace_file(path: str, run_id: str) -> bool:
    """Not this cleanup's business: no run's file, this run's own, or a run's record."""
    parts = path.split("/")
    if len(parts) != 3 or not RUN_ID.match(parts[1]) or parts[1] == run_id:
        return True
    return parts[2] in KEPT_WORKSPACE_FILES


def _workspace_entry(
    o: Listed, cat: Category, *, finished: set[str], now: datetime
) -> BatchEntry | None:
    """A file of another run: swept once that run finished or was abandoned (None: young)."""
    run = o.path.split("/")[1]
    if o.last_modified is not None and (
        run in finished or is_old(o.last_modified, now, WORKSPACE_GRACE)
    ):
        return _entry(o, cat)
    return None


def _entry(o: Listed, cat: Category, erased_at: datetime | None = None) -> BatchEntry:
    assert o.last_modified is not None
    return BatchEntry(
        path=o.path, size=o.size, category=cat, last_modified=o.last_modified, erased_at=erased_at
    )


def _unreferenced_entry(
    o: Listed,
    cat: Category,
    erased_at: datetime | None,
    *,
    grace: timedelta,
    erasure_grace: timedelta,
    now: datetime,
) -> BatchEntry | None:
    """An object no kept manifest references, if it is old enough to go (None: young)."""
    if o.last_modified is None:
        return None
    if erased_at is not None:
        # committed once, so no writer can claim it: only the erasure grace applies
        if not is_old(erased_at, now, erasure_grace, s3_time=False):
            return None
        return _entry(o, cat, erased_at)
    return _entry(o, cat) if is_old(o.last_modified, now, grace) else None


def _erasure_plans(
    marks: Marks,
    completed: Mapping[str, datetime | None],
    spliced_at: Mapping[str, datetime | None],
    present: set[str],
    unreferenced_values: Sequence[Listed],
) -> tuple[ErasurePlan, ...]:
    plans: list[ErasurePlan] = []
    for e in sorted(marks.erasures, key=lambda r: (r.deleted_version, r.id_hash)):
        done_at = completed.get(e.id_hash)
        blockers: tuple[str, ...] = ()
        at = spliced_at.get(e.id_hash)
        if e.state == "spliced" and done_at is None:
            # Everything that may still hold the rows: the superseded files, and any
            # unreferenced object that was written before the splice commit.
            found = {p for p in e.superseded if p in present}
            found.update(
                o.path
                for o in unreferenced_values
                if at is None or (o.last_modified is not None and o.last_modified <= at)
            )
            blockers = tuple(sorted(found))
        plans.append(
            ErasurePlan(
                **carried(e, ErasureHead.model_fields),
                spliced_at=at,
                superseded=e.superseded,
                blockers=blockers,
                previously_completed_at=done_at,
            )
        )
    return tuple(plans)


def batches(
    sweep: Sequence[BatchEntry], *, batch_keys: int, max_batches: int | None
) -> tuple[list[Sequence[BatchEntry]], bool]:
    """The candidates in batches of at most ``batch_keys`` (<= 1,000) keys, at most
    ``max_batches`` of them; and whether some candidates were left for the next run."""
    size = max(1, min(batch_keys, BATCH_KEYS))
    chunks = [sweep[i : i + size] for i in range(0, len(sweep), size)]
    truncated = max_batches is not None and len(chunks) > max_batches
    if max_batches is not None:
        chunks = chunks[:max_batches]
    return chunks, truncated


def expiring(listing: Sequence[Listed], expire_below: int) -> list[Listed]:
    """The listed manifests older than ``expire_below``."""
    return [o for o in listing if (v := manifest_version(o.path)) is not None and v < expire_below]


def candidates(
    chunks: Sequence[Sequence[BatchEntry]], expired: Sequence[Listed]
) -> dict[Category, CategoryStats]:
    """Per category, what the batches and the expiring manifests hold."""
    counts: dict[Category, CategoryStats] = {}
    for chunk in chunks:
        for b in chunk:
            counts[b.category] = counts.get(b.category, CategoryStats()) + CategoryStats(
                objects=1, bytes=b.size
            )
    if expired:
        counts["manifest"] = CategoryStats(objects=len(expired), bytes=sum(o.size for o in expired))
    return {c: counts[c] for c in CATEGORIES if c in counts}
