"""The table report (``lethe report``): files, versions, erasures and GC runs, as data.

:func:`build` is pure over :class:`lethe.audit.evidence.Evidence` (plus the head's file entries);
:func:`table_report` reads them. The HTML page with its charts is :mod:`lethe.audit.html`.
Like receipts, the report holds no row value and no raw request id: paths, counts, times,
id hashes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict

from lethe.audit.evidence import Evidence, gather
from lethe.audit.receipts import ErasureReceipt, known_requests, receipt
from lethe.catalog.commit import Catalog
from lethe.catalog.grace import DEFAULT_DEADLINE_DAYS
from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot

__all__ = [
    "DEFAULT_DEADLINE_DAYS",
    "DEFAULT_MIN_DELETED_FRACTION",
    "FileRow",
    "GcRunRow",
    "PendingRow",
    "TableReport",
    "VersionRow",
    "build",
    "table_report",
]

DEFAULT_MIN_DELETED_FRACTION = 0.2  # what spark_jobs/compact.py defaults to


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FileRow(_Frozen):
    path: str
    bytes: int
    live_rows: int
    deleted_rows: int
    compaction_candidate: bool


class VersionRow(_Frozen):
    version: int
    created_at: datetime
    operation: str
    live_rows: int
    files: int
    bytes: int
    attempts: int | None = None


class PendingRow(_Frozen):
    id_hash: str
    state: str
    age_days: float


class GcRunRow(_Frozen):
    run_id: str
    finished_at: datetime
    dry_run: bool
    objects: dict[str, int]
    bytes: int
    erasures_complete: int


class TableReport(_Frozen):
    """Everything the report page shows (``lethe report --json`` prints it)."""

    table: str
    generated_at: datetime
    head_version: int
    deadline_days: float
    min_deleted_fraction: float
    files: tuple[FileRow, ...]
    versions: tuple[VersionRow, ...]
    pending: tuple[PendingRow, ...]
    gc_runs: tuple[GcRunRow, ...]
    erasures: tuple[ErasureReceipt, ...]

    @property
    def overdue(self) -> tuple[PendingRow, ...]:
        return tuple(p for p in self.pending if p.age_days > self.deadline_days)


def _bytes(m: Snapshot) -> int:
    if m.segmented:
        return sum(s.data_bytes for s in m.segments)
    return sum(f.size for f in m.inline_files)


def _version(m: Snapshot) -> VersionRow:
    attempts = m.operation.params.get("attempts")
    return VersionRow(
        version=m.version,
        created_at=m.created_at,
        operation=m.operation.kind,
        live_rows=m.total_rows,
        files=m.file_count,
        bytes=_bytes(m),
        attempts=attempts if isinstance(attempts, int) else None,
    )


def _file(f: DataFile, min_fraction: float) -> FileRow:
    frac = f.deleted_rows / f.rows if f.rows else 0.0
    return FileRow(
        path=f.path,
        bytes=f.size,
        live_rows=f.live_rows,
        deleted_rows=f.deleted_rows,
        compaction_candidate=f.deleted_rows > 0 and frac >= min_fraction,
    )


def build(
    ev: Evidence,
    files: Sequence[DataFile],
    *,
    now: datetime,
    deadline_days: float = DEFAULT_DEADLINE_DAYS,
    min_deleted_fraction: float = DEFAULT_MIN_DELETED_FRACTION,
) -> TableReport:
    """The report from what was read (pure)."""
    receipts = [receipt(ev, h) for h in known_requests(ev)]
    erasures = tuple(r for r in receipts if r.erasure)
    pending = tuple(
        PendingRow(id_hash=r.id_hash, state=r.state, age_days=r.age_days(now) or 0.0)
        for r in erasures
        if not r.complete
    )
    runs = tuple(
        GcRunRow(
            run_id=r.run_id,
            finished_at=r.finished_at,
            dry_run=r.dry_run,
            objects={c: s.objects for c, s in r.deleted.items()},
            bytes=r.bytes_deleted,
            erasures_complete=sum(1 for e in r.erasures if e.newly_complete),
        )
        for r in ev.reports
    )
    return TableReport(
        table=ev.uri,
        generated_at=now,
        head_version=ev.head.version,
        deadline_days=deadline_days,
        min_deleted_fraction=min_deleted_fraction,
        files=tuple(_file(f, min_deleted_fraction) for f in files),
        versions=tuple(_version(m) for m in ev.chain),
        pending=pending,
        gc_runs=runs,
        erasures=erasures,
    )


def table_report(
    catalog: Catalog,
    *,
    now: datetime | None = None,
    deadline_days: float = DEFAULT_DEADLINE_DAYS,
    min_deleted_fraction: float = DEFAULT_MIN_DELETED_FRACTION,
) -> TableReport:
    """Read the table's history and GC documents and build its report.

    Example:
        >>> from lethe.table import Table                                    # doctest: +SKIP
        >>> r = table_report(Table.open("s3://bucket/people").catalog)      # doctest: +SKIP
        >>> [p.id_hash for p in r.overdue]                                   # doctest: +SKIP
        []
    """
    ev = gather(catalog)
    return build(
        ev,
        ev.head.files,
        now=now or datetime.now(UTC),
        deadline_days=deadline_days,
        min_deleted_fraction=min_deleted_fraction,
    )
