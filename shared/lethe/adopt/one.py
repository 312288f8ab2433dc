"""Adopting one new object in place, as an upload trigger does for a prefix other writers keep
landing files under (an external pipeline writes on; Lethe registers each file where it is,
no copy): its Hive partition values from its key below the prefix, typed by the table's
schema; its footer checked against the table; one ``adopt`` commit, idempotent by path and
ETag."""

from __future__ import annotations

from dataclasses import dataclass

from lethe import errors
from lethe.adopt.batch import commit_batch
from lethe.adopt.footers import read_footers
from lethe.adopt.hive import hive_values, typed_value
from lethe.adopt.source import SourceFile
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.schemas import same_type
from lethe.erasure.ownership import was_adopted

__all__ = ["AdoptedObject", "adopt_object"]


@dataclass(frozen=True, slots=True)
class AdoptedObject:
    """What :func:`adopt_object` did: ``duplicate`` when the same object version was adopted
    before (nothing committed; ``rows`` 0 when the table has superseded it since: an erased
    original is never adopted again), ``version`` the table version holding it."""

    uri: str
    version: int
    duplicate: bool
    rows: int


def adopt_object(
    target: TableContext | HasContext,
    bucket: str,
    key: str,
    *,
    etag: str,
    size: int,
    prefix: str,
    take_ownership: bool = True,
) -> AdoptedObject:
    """Adopt ``s3://bucket/key`` (under the Hive layout rooted at ``prefix``) into the latest
    version of ``target`` (a :class:`~lethe.Table` or its context: a long-lived handle, the
    trigger's, is not moved; the result names the version).

    Raises:
        SchemaMismatch: a column the table does not have or types differently, a partition
            directory the table has no column for, or the key column missing.
        InvalidRequest: the path was adopted before under another ETag.
    """
    uri = f"s3://{bucket}/{key}"
    etag = etag if etag.startswith('"') else f'"{etag}"'
    table = context_of(target).latest()  # index runs are made on the latest
    had = table.snapshot.files_at([uri]).get(uri)
    if had is not None:
        if had.etag != etag:
            raise errors.InvalidRequest(
                f"{uri} was adopted under another ETag: objects are never overwritten in place"
            )
        return AdoptedObject(uri, table.snapshot.version, True, had.rows)
    if was_adopted(table.store, table.prefix, table.snapshot, uri, etag):
        return AdoptedObject(uri, table.snapshot.version, True, 0)  # superseded: never again
    schema = table.schema
    part = {}
    for k, raw in hive_values(prefix, key).items():
        i = schema.get_field_index(k)
        if i < 0:
            raise errors.SchemaMismatch(f"{uri}: partition directory {k!r} is not a table column")
        part[k] = typed_value(raw, schema.field(i).type, k, uri)
    (ft,) = read_footers(table.store, [SourceFile(uri, size, etag, part)])
    problems = [
        f"column {f.name!r}"
        + (
            " is not in the table"
            if i < 0
            else f" is {f.type}, the table has {schema.field(i).type}"
        )
        for f in ft.schema
        if (i := schema.get_field_index(f.name)) < 0 or not same_type(f.type, schema.field(i).type)
    ]
    if table.key not in ft.schema.names:
        problems.append(f"the key column {table.key!r} is missing")
    if problems:
        raise errors.SchemaMismatch(f"{uri} does not fit the table: " + "; ".join(problems))
    table = commit_batch(table, [ft], fmt="parquet", own=take_ownership)
    return AdoptedObject(uri, table.snapshot.version, False, ft.metadata.num_rows)
