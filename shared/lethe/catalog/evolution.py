"""Schema evolution from the caller's side: the :class:`SchemaUpdate` builder behind
``Table.update_schema()``, and conforming appended data to the table (``schema_mode``).

>>> with t.update_schema() as u:                              # doctest: +SKIP
...     u.add_column("country", pa.string())
...     u.widen_column("customer_id", pa.int64())
>>> t.append(new_shape, schema_mode="merge")                  # doctest: +SKIP

The rules are :func:`lethe.catalog.schemas.evolve`'s; the commit is
:class:`lethe.catalog.changes.UpdateSchema` through the one commit loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeAlias

import pyarrow as pa

from lethe import errors
from lethe.catalog.schemas import (
    Add,
    Drop,
    Evolution,
    MakeOptional,
    Rename,
    Widen,
    as_table_types,
    evolve,
    fits,
    is_widening,
    same_but_nullability,
    schema_diff,
)
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms.schema import aliases, past_names, pinned_columns

__all__ = [
    "MergePlan",
    "OneCommit",
    "SchemaMode",
    "SchemaUpdate",
    "check_create",
    "conform",
    "describe_changes",
    "merge_changes",
    "plan_merge",
    "renamed",
]

SchemaMode: TypeAlias = Literal["strict", "merge"]


class OneCommit:
    """Changes gathered, then committed once: :meth:`commit`, or leaving a ``with`` block
    without an error. Leaving it with an error commits nothing and closes the gatherer."""

    _done: bool

    def commit(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None and not self._done:
            self.commit()
        self._done = True


class SchemaUpdate(OneCommit):
    """Schema changes gathered, then committed once (:class:`OneCommit`). Each method returns
    the builder, so calls chain."""

    def __init__(self, commit: Callable[[tuple[Evolution, ...]], Any]) -> None:
        self._commit = commit
        self._changes: list[Evolution] = []
        self._done = False

    @property
    def changes(self) -> tuple[Evolution, ...]:
        return tuple(self._changes)

    def add_column(self, name: str, type: pa.DataType, *, default: Any = None) -> SchemaUpdate:
        """A nullable column; rows written before read as ``default`` (an initial default,
        written into no file) or null."""
        return self.extend([Add(name, type, default)])

    def drop_column(self, name: str) -> SchemaUpdate:
        return self.extend([Drop(name)])

    def rename_column(self, name: str, new_name: str) -> SchemaUpdate:
        """Renamed everywhere at once (files keep their ids; an index follows)."""
        return self.extend([Rename(name, new_name)])

    def extend(self, changes: Iterable[Evolution]) -> SchemaUpdate:
        """Changes given as values (:mod:`lethe.catalog.schemas`), e.g. from :func:`merge_changes`."""
        self._changes.extend(changes)
        return self

    def make_optional(self, name: str) -> SchemaUpdate:
        return self.extend([MakeOptional(name)])

    def widen_column(self, name: str, type: pa.DataType) -> SchemaUpdate:
        """int to a wider int, float32 to float64, a decimal's precision up, date32 to
        timestamp; old files read widened."""
        return self.extend([Widen(name, type)])

    def commit(self) -> Any:
        """Commit the gathered changes (once); a no-op change commits nothing."""
        if self._done:
            raise errors.InvalidRequest("this schema update was committed already")
        self._done = True
        return self._commit(tuple(self._changes))


def merge_changes(got: pa.Schema, table: pa.Schema) -> tuple[Evolution, ...]:
    """The evolutions that make ``table`` take data of schema ``got`` (union by name: new
    columns added, safe widening applied).

    Raises:
        SchemaMismatch: listing every column that no allowed evolution reconciles.
    """
    out: list[Evolution] = []
    bad: list[str] = []
    for f in got:
        i = table.get_field_index(f.name)
        if i < 0:
            out.append(Add(f.name, f.type))
            continue
        t = table.field(i).type
        if fits(f.type, t):
            continue
        if is_widening(t, f.type):
            out.append(Widen(f.name, f.type))
        else:
            bad.append(f"{f.name}: {f.type} (table has {t}; not a widening either way)")
    missing = [f.name for f in table if not f.nullable and got.get_field_index(f.name) < 0]
    if missing:
        bad.append(f"missing required columns {missing}")
    if bad:
        raise errors.SchemaMismatch("data cannot merge into the table schema: " + "; ".join(bad))
    return tuple(out)


def renamed(data: Any, alias: Mapping[str, str]) -> Any:
    """``data`` (a Schema, Table, RecordBatch or RecordBatchReader) with each column named
    by an earlier name of a table column (``alias``: old -> current) under its current name.

    Raises:
        SchemaMismatch: a column under both names.

    >>> renamed(pa.schema([("id", pa.int64()), ("payload", pa.string())]), {"payload": "body"})
    id: int64
    body: string
    """
    schema = data if isinstance(data, pa.Schema) else data.schema
    if not any(n in alias for n in schema.names):
        return data
    names = [alias.get(n, n) for n in schema.names]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise errors.SchemaMismatch(
            f"columns {twice} come twice, under an earlier and the current name (the earlier "
            "name is an alias of the column)"
        )
    new = pa.schema(
        [f.with_name(n) for f, n in zip(schema, names, strict=True)], metadata=schema.metadata
    )
    if isinstance(data, pa.Schema):
        return new
    if isinstance(data, pa.RecordBatchReader):
        return pa.RecordBatchReader.from_batches(new, (b.rename_columns(names) for b in data))
    return data.rename_columns(names)


@dataclass(frozen=True, slots=True)
class MergePlan:
    """What it takes a table to take inputs of some shapes (:func:`plan_merge`).

    ``changes``: the schema evolutions, in order; ``schema``: the table's current schema
    after them (field ids as the commit assigns them); ``shapes``: each input's schema under
    the table's names (an earlier name of a column is that column) and the table's types
    where they are the same (:func:`~lethe.catalog.schemas.as_table_types`); ``alias``:
    earlier names -> current names on the snapshot planned against."""

    changes: tuple[Evolution, ...]
    schema: pa.Schema
    shapes: tuple[pa.Schema, ...]
    alias: Mapping[str, str]


def plan_merge(
    inputs: pa.Schema | Sequence[pa.Schema],
    snapshot: Snapshot,
    *,
    labels: Sequence[str] | None = None,
) -> MergePlan:
    """The one fold of input schemas into schema changes (union by name: new columns added,
    narrower table types widened by the one promotion rule, anything else refused), planned
    against ``snapshot``: the snapshot the changes commit on, so a column renamed after a
    writer opened its handle is found under its new name (issue 35 item 10). Every caller
    that evolves a table for data (``append(schema_mode="merge")``, ``lethe append
    --evolve``, ``register_parquet``, the ingest job, adoption) plans here.

    Raises:
        SchemaMismatch: every input (named by ``labels``) that no allowed evolution
            reconciles, and why; nothing is planned.
    """
    schemas = [inputs] if isinstance(inputs, pa.Schema) else list(inputs)
    alias = aliases(snapshot)
    working, last = snapshot.arrow_schema(), snapshot.manifest.column_id_high
    rules = {
        "key": snapshot.key,
        "pinned": pinned_columns(snapshot),
        "indexed": [ix.column for ix in snapshot.indexes],
        "past_names": past_names(snapshot),
    }
    changes: list[Evolution] = []
    shapes: list[pa.Schema] = []
    problems: list[str] = []
    for i, s in enumerate(schemas):
        try:
            got = as_table_types(renamed(s, alias), working)
            mine = merge_changes(got, working)
            working, last, _ = evolve(working, last, mine, **rules)  # type: ignore[arg-type]
        except errors.InvalidRequest as e:  # SchemaMismatch, SchemaEvolutionError
            problems.append(f"{labels[i]}: {e}" if labels else str(e))
            shapes.append(s)
            continue
        changes.extend(mine)
        shapes.append(got)
    if len(problems) == 1 and len(schemas) == 1 and not labels:
        raise errors.SchemaMismatch(problems[0])
    if problems:
        raise errors.SchemaMismatch(
            f"{len(problems)} of {len(schemas)} inputs cannot merge into the table schema; "
            "nothing was changed:\n  " + "\n  ".join(problems)
        )
    return MergePlan(tuple(changes), working, tuple(shapes), alias)


def _fit(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` (a merged shape) as ``schema``: columns in order, narrower types widened,
    columns it lacks as nulls (an initial default is for rows written before its column)."""
    cols = []
    for f in schema:
        if f.name in t.column_names:
            c = t.column(f.name)
            cols.append(c if c.type.equals(f.type) else c.cast(f.type))
        else:
            cols.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def conform(
    data: Any, schema: pa.Schema, mode: SchemaMode = "strict"
) -> pa.Table | pa.RecordBatchReader:
    """``data`` as ``schema`` (the table's). ``strict``: names and types must match (order
    aside); ``merge``: the table was evolved by :func:`merge_changes` already, and ``data``
    is fitted to it (no column dropped, no value narrowed).

    Raises:
        SchemaMismatch: listing every differing column, or a required column with nulls.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        if mode == "merge":
            _evolved_for(data.schema, schema)
            data = _fit(data, schema)
        names = set(data.column_names)
        if names == set(schema.names) and data.column_names != schema.names:
            data = data.select(schema.names)
        if not data.schema.equals(schema, check_metadata=False):
            if not same_but_nullability(data.schema, schema):
                raise errors.SchemaMismatch(schema_diff(data.schema, schema))
            nulls = {
                f.name: data.column(f.name).null_count
                for f in schema
                if not f.nullable and data.column(f.name).null_count
            }
            if nulls:  # a nullable input goes into a required column only without nulls
                raise errors.SchemaMismatch(
                    "; ".join(f"column {n!r} holds {k} null(s)" for n, k in nulls.items())
                    + " where the table requires values (fill or drop those rows)"
                )
            data = pa.Table.from_arrays(data.columns, schema=schema)
        return data.replace_schema_metadata(schema.metadata)
    if isinstance(data, pa.RecordBatchReader):
        if mode == "merge" and not data.schema.equals(schema, check_metadata=False):
            _evolved_for(data.schema, schema)
            return _fitted_reader(data, schema)
        if not data.schema.equals(schema, check_metadata=False) and not same_but_nullability(
            data.schema, schema
        ):
            raise errors.SchemaMismatch(schema_diff(data.schema, schema))
        return data  # nulls in a required column: refused per batch by the writer
    raise errors.InvalidRequest(
        f"append takes a pyarrow Table, RecordBatch or RecordBatchReader, not {type(data).__name__}"
    )


def _evolved_for(got: pa.Schema, schema: pa.Schema) -> None:
    """Refuse data of schema ``got`` that ``schema`` does not take as it is (a column it
    lacks would be dropped, a type it does not fit narrowed): the table evolves first."""
    more = merge_changes(as_table_types(got, schema), schema)
    if more:
        raise errors.SchemaMismatch(
            f"data needs schema changes the table does not have ({describe_changes(more)}): "
            "plan them first (plan_merge); nothing is dropped or narrowed"
        )


def _fitted_reader(r: pa.RecordBatchReader, schema: pa.Schema) -> pa.RecordBatchReader:
    def batches() -> Any:
        for b in r:
            yield from _fit(pa.Table.from_batches([b]), schema).to_batches()

    return pa.RecordBatchReader.from_batches(schema, batches())


def describe_changes(changes: Sequence[Evolution]) -> dict[str, int]:
    """Counts of each kind of change (an operation's params: no column names)."""
    return dict(Counter(type(c).__name__.lower() for c in changes))


def check_create(
    schema: pa.Schema, key: str, sizes: tuple[int, int, int, int], iceberg_format_version: int
) -> None:
    """Refuse a ``Table.create`` whose schema, key or sizes cannot make a table."""
    target_file_bytes, row_group_bytes, segment_target_files, dv_overlay_max = sizes
    if not isinstance(schema, pa.Schema):
        raise errors.InvalidRequest("schema must be a pyarrow.Schema")
    if schema.get_field_index(key) < 0:
        raise errors.InvalidRequest(f"key column {key!r} is not in the schema {schema.names}")
    if len(set(schema.names)) != len(schema.names):
        raise errors.InvalidRequest("schema has duplicate column names")
    if target_file_bytes <= 0 or row_group_bytes <= 0:
        raise errors.InvalidRequest("target_file_bytes and row_group_bytes must be positive")
    if segment_target_files <= 0 or dv_overlay_max < 0:
        raise errors.InvalidRequest(
            "segment_target_files must be positive and dv_overlay_max not negative"
        )
    if iceberg_format_version not in (2, 3):
        raise errors.InvalidRequest("iceberg_format_version must be 2 or 3")
