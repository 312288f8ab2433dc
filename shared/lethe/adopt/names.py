"""Adopted files that name columns otherwise than the table (pure): Delta column mapping
(files name columns by ``physicalName``, e.g. ``col-5f…``) and Iceberg tables with renamed
columns (files keep the old names, with ``PARQUET:field_id``).

At adoption each footer is read under the table's names (:func:`logical`): a column by its
field id when the source gives the table's ids and the file carries them, else by the
source's physical name. The table schema keeps each column's other names as
:data:`~lethe.catalog.schemas.ALIASES` (:func:`with_aliases`, Iceberg's name mapping: what a file
without ids is read by), and every read of an adopted file resolves its columns with
:meth:`lethe.catalog.schemas.Projection.within` (by id when the file's ids are the table's, else by
name or alias). Statistics are stored under the table's names (:func:`describe_file`).

>>> import pyarrow as pa
>>> from lethe.catalog.schemas import FIELD_ID
>>> s = pa.schema([pa.field("a", pa.int64(), metadata={FIELD_ID: b"1"})])
>>> [f.metadata[ALIASES] for f in with_aliases(s, {"a": {"col-1"}})]
[b'["col-1"]']
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence

import pyarrow as pa

from lethe import errors
from lethe.adopt.footers import Footer
from lethe.adopt.source import SourceListing
from lethe.catalog.manifest import ColumnStats, RowGroupInfo
from lethe.catalog.schemas import ALIASES, Projection, aliases, field_id
from lethe.writing.mapped import describe_named

__all__ = ["check_readable", "describe_file", "logical", "physical_names", "with_aliases"]


def logical(footers: Iterable[Footer], listing: SourceListing) -> list[Footer]:
    """``footers`` under the table's column names (see the module docstring); a footer
    whose names are the table's is returned as it is."""
    named = {field_id(f): f.name for f in listing.schema or () if field_id(f) is not None}
    by_physical = {p: named[i] for i, p in listing.physical_names.items() if i in named}
    if not named and not by_physical:
        return list(footers)
    out = []
    for ft in footers:
        ren = {}
        for f in ft.schema:
            fid = field_id(f)
            name = named.get(fid) if fid is not None else None
            name = name or by_physical.get(f.name)
            if name is not None and name != f.name:
                ren[f.name] = name
        if ren:
            schema = pa.schema(
                [f.with_name(ren.get(f.name, f.name)) for f in ft.schema],
                metadata=ft.schema.metadata,
            )
            ft = dataclasses.replace(ft, schema=schema, physical={v: k for k, v in ren.items()})
        out.append(ft)
    return out


def physical_names(footers: Iterable[Footer]) -> dict[str, set[str]]:
    """The table's column name -> the other names files give it."""
    out: dict[str, set[str]] = {}
    for ft in footers:
        for name, phys in ft.physical.items():
            out.setdefault(name, set()).add(phys)
    return out


def with_aliases(schema: pa.Schema, names: Mapping[str, set[str]]) -> pa.Schema:
    """``schema`` with each column's other names (:data:`~lethe.catalog.schemas.ALIASES`) added;
    a column without any keeps its metadata as it was (an old manifest re-encodes
    byte-identical)."""
    fields = []
    for f in schema:
        extra = sorted(names.get(f.name, set()) - {f.name, *aliases(f)})
        if extra:
            all_names = json.dumps([*aliases(f), *extra]).encode()
            f = f.with_metadata({**(f.metadata or {}), ALIASES: all_names})
        fields.append(f)
    return pa.schema(fields, metadata=schema.metadata)


def check_readable(footers: Sequence[Footer], schema: pa.Schema) -> None:
    """Refuse files whose columns the table's readers would not find under ``schema``
    (their ids are not the table's and the table has no alias for their names).

    Raises:
        InvalidRequest: naming the files and columns.
    """
    problems = []
    for ft in footers:
        if not ft.physical:
            continue
        p = Projection(schema, {f.name: f for f in schema}).within(ft.file_schema)
        for name, phys in ft.physical.items():
            if name in schema.names and p.file_column(name) != phys:
                problems.append(f"{ft.source.uri} names column {name!r} {phys!r}")
    if problems:
        raise errors.InvalidRequest(
            "adopted files name columns otherwise than the table and carry no field ids the "
            "table has; adopt them into a new table (which records their names): "
            + "; ".join(problems[:5])
        )


def describe_file(
    ft: Footer, schema: pa.Schema, key: str
) -> tuple[tuple[RowGroupInfo, ...], dict[str, ColumnStats]]:
    """:func:`lethe.writing.writer.describe` of an adopted file, its statistics under the table's
    names (the footer's columns are the file's own names)."""
    return describe_named(ft.metadata, schema, key, physical=ft.physical)
