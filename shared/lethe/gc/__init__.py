"""Garbage collection (DESIGN §6): mark, expire, sweep, abort, purge, report.

One run, whether from :func:`collect` (the CLI) or the Step Functions workflow (one Lambda
per step, see ``functions/gc_steps/handler.py``), does the same thing with the same functions:

1. **list** ``data/``, ``tombstone/``, ``_staging/``, ``_gc/`` and ``manifest/`` (keys,
   sizes, LastModified);
2. **mark**, after listing: re-read the head, read any landed successor whose head update is
   still pending, and walk ``previous`` from the head over the retention window (by age
   and/or version count; the head is always kept). Every data file and DV container those
   manifests reference is marked. Listing *before* marking is what makes a commit that lands
   during GC safe: its files are either marked, or younger than the grace period;
   An erasure whose splice commit is older than the erasure grace makes what it superseded
   go whatever the retention: the versions from before it are written anew through the
   lineage (issue 39, :mod:`lethe.gc.history`), or cut off where they cannot be;
3. **select**: an unmarked object older than the grace period is a candidate. A file
   superseded by an erasure splice (``ErasureRecord.superseded``), or referenced only by
   versions an erasure cut off, was committed once, so no uncommitted writer can still
   claim it: its age counts from the splice commit, against the (shorter) erasure grace.
   Manifests older than the oldest kept one expire. Workspace files of finished runs (or of
   runs abandoned for :data:`WORKSPACE_GRACE`) go too;
4. **expire** those manifests; **sweep** the candidates in batches of at most 1,000 keys
   (one DeleteObjects each), every batch re-reading the head right before its delete and
   sparing anything a newer manifest references; **abort** multipart uploads older than the
   grace period (and idle as long); **purge**, in a versioned bucket, every version and
   delete marker that may hold an incomplete erasure's rows (:mod:`lethe.gc.purge`: every
   value area, and the adopted originals outside the prefix); **report**, per erasure
   request, whether every object and old manifest that held its rows is gone (read from
   listings: :mod:`lethe.gc.present`; every version, in a versioned bucket), and since when.

Everything is idempotent: deleting a deleted key succeeds, and a re-run recomputes the same
end state, so an interrupted run is resumed by running again. Nothing younger than the grace
period and nothing a kept manifest references is ever deleted; a grace shorter than the
table's ``gc_grace`` is refused.

The modules, each depending only on those above it:

==================  =========================================================================
``models``          the frozen pydantic documents of a run (workspace files, report, payloads)
``areas``           the table's GC areas, run ids and path categories (pure)
``policy``          retention, grace periods and a run's options (pure)
``select``          what a run may delete, from a listing and the marks (pure: no I/O)
``marking``         list the areas, walk the retained chain, collect references
``workspace``       where a run keeps its documents (S3 or memory)
``present``         what a listing shows of given objects (every version, absolute paths too)
``actions``         plan, sweep, expire, abort: the steps that change the bucket
``purge``           versioned buckets: every version that may hold an erasure's rows
``report``          combine the results; per erasure request, complete or not
``run``             :func:`collect`: a whole run in this process (the retention sweep first)
``workflow``        the Step Functions steps and the state machine's state names
==================  =========================================================================

The command ``lethe gc`` is :mod:`lethe.cli.gc`; GC's errors (:class:`GcError`,
:class:`GcConflict`, :class:`GcRunNotFound`) are in :mod:`lethe.errors`.

Example:
    >>> from lethe.gc import collect                                     # doctest: +SKIP
    >>> report = collect("s3://bucket/people", retention="30d", dry_run=True)  # doctest: +SKIP
    >>> print(report.describe())                                         # doctest: +SKIP
    >>> collect("s3://bucket/people", retention="30d,100v", grace="7d").complete_erasures  # doctest: +SKIP
    ('5f0c…',)
"""

from __future__ import annotations

from lethe.catalog.grace import parse_duration
from lethe.errors import GcConflict, GcError, GcRunNotFound
from lethe.gc.areas import (
    KEPT_WORKSPACE_FILES,
    MANIFESTS,
    MARKERS,
    SWEPT,
    VALUE_PREFIXES,
    WORKSPACE,
    new_run_id,
)
from lethe.gc.marking import mark, newly_referenced
from lethe.gc.models import (
    CATEGORIES,
    BatchDocument,
    BatchEntry,
    Category,
    CategoryStats,
    ErasureMarker,
    ErasurePlan,
    ErasureStatus,
    FailureRecord,
    GcReport,
    PlanDocument,
    PlanState,
    StepResult,
    add_stats,
)
from lethe.gc.policy import (
    BATCH_KEYS,
    DEFAULT_ERASURE_GRACE,
    DEFAULT_GRACE,
    DEFAULT_RETENTION,
    MAX_BATCHES,
    WORKSPACE_GRACE,
    Retention,
    Tuning,
)
from lethe.gc.report import REPORT_KEY_LIMIT
from lethe.gc.run import collect
from lethe.gc.select import Marks
from lethe.gc.workflow import (
    MAX_CAUSE_CHARS,
    abort_step,
    expire_step,
    plan_step,
    purge_step,
    record_failure,
    report_step,
    retention_step,
    sweep_step,
)
from lethe.gc.workspace import MemoryWorkspace, S3Workspace, Workspace

__all__ = [
    "BATCH_KEYS",
    "CATEGORIES",
    "DEFAULT_ERASURE_GRACE",
    "DEFAULT_GRACE",
    "DEFAULT_RETENTION",
    "KEPT_WORKSPACE_FILES",
    "MANIFESTS",
    "MARKERS",
    "MAX_BATCHES",
    "MAX_CAUSE_CHARS",
    "REPORT_KEY_LIMIT",
    "SWEPT",
    "VALUE_PREFIXES",
    "WORKSPACE",
    "WORKSPACE_GRACE",
    "BatchDocument",
    "BatchEntry",
    "Category",
    "CategoryStats",
    "ErasureMarker",
    "ErasurePlan",
    "ErasureStatus",
    "FailureRecord",
    "GcConflict",
    "GcError",
    "GcReport",
    "GcRunNotFound",
    "Marks",
    "MemoryWorkspace",
    "PlanDocument",
    "PlanState",
    "Retention",
    "S3Workspace",
    "StepResult",
    "Tuning",
    "Workspace",
    "abort_step",
    "add_stats",
    "collect",
    "expire_step",
    "mark",
    "new_run_id",
    "newly_referenced",
    "parse_duration",
    "plan_step",
    "purge_step",
    "record_failure",
    "report_step",
    "retention_step",
    "sweep_step",
]
