"""The Iceberg view's sort orders (spec: "Sort Orders"): order 0 (unsorted) always, and for
a table with ``cluster_by`` order :data:`~lethe.maintenance.clustering.SORT_ORDER_ID`, the subject
columns ascending with nulls last, which is how every file a clustering compaction wrote is
sorted (each such file holds one time window, so the window needs no field of its own).
Data files carry ``sort_order_id`` as Lethe recorded it."""

from __future__ import annotations

from typing import Any

from lethe.catalog.manifest import TableProperties
from lethe.maintenance.clustering import SORT_ORDER_ID

__all__ = ["sort_orders"]


def sort_orders(props: TableProperties, field_ids: dict[str, int]) -> dict[str, Any]:
    """The ``default-sort-order-id`` and ``sort-orders`` fields of the table metadata.

    Example:
        >>> sort_orders(TableProperties(key="id", cluster_by=("c",)), {"id": 1, "c": 2})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'default-sort-order-id': 1, 'sort-orders': [{'order-id': 0, 'fields': []},
         {'order-id': 1, 'fields': [{'transform': 'identity', 'source-id': 2,
          'direction': 'asc', 'null-order': 'nulls-last'}]}]}
    """
    unsorted: dict[str, Any] = {"order-id": 0, "fields": []}
    if not props.cluster_by:
        return {"default-sort-order-id": 0, "sort-orders": [unsorted]}
    fields = [
        {
            "transform": "identity",
            "source-id": field_ids[c],
            "direction": "asc",
            "null-order": "nulls-last",
        }
        for c in props.cluster_by
    ]
    return {
        "default-sort-order-id": SORT_ORDER_ID,
        "sort-orders": [unsorted, {"order-id": SORT_ORDER_ID, "fields": fields}],
    }
