"""Making and changing a table at the catalog level, for the façade and the library alike:
:func:`create_table` (version 0 of a new table; :meth:`lethe.Table.create` and adoption make
tables with it, so nothing below the façade needs the :class:`~lethe.Table` class) and
:func:`evolve_schema` (one schema commit of evolution changes)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from lethe.catalog.changes import UpdateSchema
from lethe.catalog.commit import Catalog, CommitOutcome, Direct
from lethe.catalog.evolution import check_create, describe_changes
from lethe.catalog.manifest import ColumnIndex, Operation, TableProperties, initial_manifest
from lethe.catalog.schemas import Evolution
from lethe.catalog.snapshot import Snapshot

__all__ = ["create_table", "evolve_schema"]


def create_table(
    catalog: Catalog,
    schema: pa.Schema,
    properties: TableProperties,
    *,
    indexes: Sequence[ColumnIndex] = (),
) -> Snapshot:
    """Create an empty table in ``catalog`` (a new table uuid) with ``properties`` and the
    declared ``indexes``; returns version 0.

    Raises:
        TableExists: a table already lives there.
        InvalidRequest: the key is not a column, or the schema or sizes cannot make a table.
    """
    p = properties
    sizes = (p.target_file_bytes, p.row_group_bytes, p.segment_target_files, p.dv_overlay_max)
    check_create(schema, p.key, sizes, p.iceberg_format_version)
    m0 = initial_manifest(table_uuid=uuid.uuid4().hex, schema=schema, properties=p)
    if indexes:
        m0 = m0.model_copy(update={"indexes": tuple(indexes)})
    return catalog.create(m0)


def evolve_schema(catalog: Catalog, changes: tuple[Evolution, ...]) -> CommitOutcome[Any]:
    """One ``schema`` commit of ``changes`` on the latest version (:mod:`lethe.catalog.evolution`)."""
    op = Operation(kind="schema", params=describe_changes(changes))
    return catalog.commit_change(Direct(UpdateSchema(changes, op)))
