"""The snapshot summary of the Iceberg view: Iceberg's operation and totals (counts only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from lethe.catalog.snapshot import Snapshot
from lethe.iceberg.mapping import ListEntry

__all__ = ["snapshot_summary"]

_OPERATIONS: Mapping[str, str] = {
    "create": "append",
    "append": "append",
    "register": "append",
    "delete": "delete",
    "erase": "overwrite",
    "purge": "overwrite",
    "compact": "replace",
    "upgrade": "replace",
    "gc": "replace",
    "retention": "delete",  # files dropped and rows hidden, nothing added
    "properties": "replace",
    "adopt": "append",  # files adopted in place (lethe.adopt)
}


def snapshot_summary(
    m: Snapshot, entries: Iterable[ListEntry], *, delete_files: int, position_deletes: int
) -> dict[str, str]:
    """The snapshot summary: Iceberg's operation and totals, and the Lethe version and
    operation kind (counts only: never a value)."""
    data = [e for e in entries if e.content == "data"]
    return {
        "operation": _OPERATIONS.get(m.operation.kind, "overwrite"),
        "lethe.version": str(m.version),
        "lethe.operation": m.operation.kind,
        "total-data-files": str(sum(e.added_files + e.existing_files for e in data)),
        "total-records": str(sum(e.rows for e in data)),
        "total-delete-files": str(delete_files),
        "total-position-deletes": str(position_deletes),
        "total-equality-deletes": "0",
        "total-files-size": str(sum(s.data_bytes for s in m.segments)),
    }
