"""What ``Table.create`` is told about a new table, as one value: :class:`TableSpec`.

The façade keeps its keywords (DESIGN §9) and groups them here once; each keyword is
checked by the module that owns its rule (sizes and key by
:func:`~lethe.catalog.evolution.check_create`, indexes, clustering and retention by theirs),
and the spec becomes the table's :class:`~lethe.catalog.manifest.TableProperties`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from lethe import errors
from lethe.catalog.grace import parse_duration
from lethe.catalog.manifest import TableProperties

__all__ = ["TableSpec"]

_AS_IS = (
    "key",
    "target_file_bytes",
    "row_group_bytes",
    "segment_target_files",
    "dv_overlay_max",
    "iceberg_view",
    "iceberg_format_version",
)
"""The fields a spec hands to :class:`~lethe.catalog.manifest.TableProperties` unchanged."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    """The table-describing keywords of :meth:`lethe.Table.create`, unchecked (see there)."""

    key: str = "id"
    target_file_bytes: int = 256 << 20
    row_group_bytes: int = 16 << 20
    gc_grace: str | timedelta | float = "7d"
    segment_target_files: int = 1000
    dv_overlay_max: int = 256
    iceberg_view: bool = False
    iceberg_format_version: Literal[2, 3] = 3
    indexes: tuple[str, ...] = ()
    cluster_by: Sequence[str] | str | None = None
    cluster_window: str | tuple[str, str] | None = None
    cluster_file_subjects: int | None = None
    retention: tuple[str, str | timedelta | float] | None = None

    @property
    def sizes(self) -> tuple[int, int, int, int]:
        """File, row group, segment and DV overlay sizes (they must be positive)."""
        return (
            self.target_file_bytes,
            self.row_group_bytes,
            self.segment_target_files,
            self.dv_overlay_max,
        )

    def properties(
        self, clustering: Mapping[str, object], retention: tuple[str | None, int | None]
    ) -> TableProperties:
        """The table's properties: this spec with its clustering and retention as their
        owners checked them (:func:`lethe.maintenance.clustering.cluster_properties`,
        :func:`lethe.erasure.retention.check_retention`) and the GC grace in seconds.

        Raises:
            InvalidRequest: ``gc_grace`` is not a positive duration.
        """
        grace = parse_duration(self.gc_grace).total_seconds()
        if grace <= 0:
            raise errors.InvalidRequest("gc_grace must be positive")
        same: dict[str, Any] = {f: getattr(self, f) for f in _AS_IS}
        return TableProperties(
            **same,
            gc_grace_seconds=grace,
            **clustering,  # type: ignore[arg-type]
            retention_column=retention[0],
            retention_seconds=retention[1],
        )
