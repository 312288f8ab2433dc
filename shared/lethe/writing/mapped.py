"""Statistics of a file whose columns are named otherwise than the table's (an adopted
Delta file with column mapping, an Iceberg file written before a rename, or a splice of
one): :func:`lethe.writing.writer.describe` under the file's own names, kept under the table's."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.catalog.manifest import ColumnStats, RowGroupInfo
from lethe.catalog.schemas import Projection
from lethe.writing.writer import describe

__all__ = ["describe_named", "physical_of"]


def physical_of(schema: pa.Schema, file_schema: pa.Schema) -> dict[str, str]:
    """The table's name -> the file's name of each column the file names otherwise
    (found by field id or alias: :meth:`lethe.catalog.schemas.Projection.within`)."""
    p = Projection(schema, {f.name: f for f in schema}).within(file_schema)
    out = {}
    for n in schema.names:
        c = p.file_column(n)
        if c is not None and c != n:
            out[n] = c
    return out


def describe_named(
    md: pq.FileMetaData,
    schema: pa.Schema,
    key: str,
    *,
    mapped: bool = False,
    physical: Mapping[str, str] | None = None,
) -> tuple[tuple[RowGroupInfo, ...], dict[str, ColumnStats]]:
    """``describe(md, schema, key)``, the file's columns found under their own names
    (``physical``, or resolved from the footer when ``mapped``), stats keyed by the
    table's names."""
    phys = dict(physical or {})
    if mapped and physical is None:
        phys = physical_of(schema, md.schema.to_arrow_schema())
    if not phys:
        return describe(md, schema, key)
    named = pa.schema([f.with_name(phys.get(f.name, f.name)) for f in schema])
    groups, cols = describe(md, named, phys.get(key, key))
    back = {v: k for k, v in phys.items()}
    return groups, {back.get(c, c): st for c, st in cols.items()}
