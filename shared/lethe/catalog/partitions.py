"""Partition values of files adopted in place: kept per file in the manifest
(``DataFile.partition``), never in the file; the file's column stats say min = max = the
value, so pruning on a partition column works as on any other column.

>>> partition_stats({"dt": 20454, "region": None}, 10)
{'dt': ColumnStats(min=20454, max=20454, null_count=0)}
"""

from __future__ import annotations

from collections.abc import Mapping

from lethe.catalog.manifest import ColumnStats
from lethe.catalog.values import JsonScalar

__all__ = ["PARTITION_META", "partition_stats"]

PARTITION_META = b"lethe.partition"
"""Arrow field metadata marking a table column as a partition of files adopted in place (the
Iceberg view's identity spec, :mod:`lethe.iceberg.partitioning`)."""


def partition_stats(partition: Mapping[str, JsonScalar], rows: int) -> dict[str, ColumnStats]:
    """File-level stats of constant partition columns (a null value: none, never pruned on)."""
    del rows  # a non-null constant has no nulls whatever the row count
    return {
        n: ColumnStats(min=v, max=v, null_count=0) for n, v in partition.items() if v is not None
    }
