"""What :meth:`lethe.Table.history` lists: one entry per retained snapshot, newest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.snapshot import Snapshot

__all__ = ["SnapshotInfo", "snapshot_history"]


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """One entry of :meth:`Table.history` (newest first)."""

    version: int
    previous: int | None
    created_at: datetime
    operation: str
    rows_added: int
    rows_deleted: int
    rows_erased: int
    files_added: int
    files_removed: int
    live_rows: int
    live_files: int
    request_id_hash: str | None


def snapshot_history(catalog: Catalog, start: Snapshot) -> list[SnapshotInfo]:
    """Snapshot infos from ``start`` back to the oldest retained one."""
    out: list[SnapshotInfo] = []
    m: Snapshot | None = start
    while m is not None:
        op = m.operation
        out.append(
            SnapshotInfo(
                version=m.version,
                previous=m.previous,
                created_at=m.created_at,
                operation=op.kind,
                rows_added=op.rows_added,
                rows_deleted=op.rows_deleted,
                rows_erased=op.rows_erased,
                files_added=op.files_added,
                files_removed=op.files_removed,
                live_rows=m.total_rows,
                live_files=m.file_count,
                request_id_hash=op.request_id_hash,
            )
        )
        if m.previous is None:
            break
        try:
            m = catalog.read_manifest(m.previous)
        except errors.SnapshotNotFound:
            break
    return out
