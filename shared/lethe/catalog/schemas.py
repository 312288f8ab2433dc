"""Field ids, schema evolution rules and the projection of a file to a schema (pure).

Every column, nested ones included, has a stable id in its Arrow field metadata
(``PARQUET:field_id``, which pyarrow's Parquet writer writes into the file). A table created
before ids existed reads as ids assigned in schema order, Iceberg's way (a struct's fields
first, then each field's children; a list's element; a map's key then value). The rules of
:func:`evolve` are Iceberg's (https://iceberg.apache.org/spec/#schema-evolution): columns are
added (nullable, or with an initial default written into no file), dropped, renamed, made
optional, or widened (int to long, float to double, a decimal's precision, date to
timestamp); ids never change and are never reused.

A file written under schema ``S`` is read as schema ``T`` by :func:`projection`: each column
of ``T`` is found in ``S`` by id (renamed, widened, or missing: its initial default or null).

>>> s = with_ids(pa.schema([("id", pa.int64(), False), ("n", pa.int32())]))
>>> [field_id(f) for f in s], max_id(s)
([1, 2], 2)
>>> new, last, renames = evolve(s, 2, [Widen("n", pa.int64()), Add("c", pa.string())], key="id")
>>> [(f.name, str(f.type), field_id(f)) for f in new], last
([('id', 'int64', 1), ('n', 'int64', 2), ('c', 'string', 3)], 3)
>>> p = projection(s, new)
>>> p.apply(pa.table({"id": [1], "n": pa.array([7], pa.int32())})).to_pylist()
[{'id': 1, 'n': 7, 'c': None}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pyarrow as pa

from lethe import errors
from lethe.catalog.values import JsonScalar, from_json, to_json

__all__ = [
    "ALIASES",
    "DEFAULT",
    "FIELD_ID",
    "Add",
    "Drop",
    "Evolution",
    "MakeOptional",
    "Projection",
    "Rename",
    "Widen",
    "aliases",
    "as_table_types",
    "evolve",
    "field_id",
    "file_field",
    "fits",
    "has_ids",
    "initial_default",
    "is_widening",
    "max_id",
    "projection",
    "same_type",
    "v3_promotions",
    "widen_comparable",
    "with_ids",
]

FIELD_ID = b"PARQUET:field_id"
#: JSON list of the other names a column has inside adopted files (Delta column mapping's
#: physical names, an Iceberg column's names before a rename): Iceberg's name mapping, used
#: for files that carry no field ids. Absent when unused.
ALIASES = b"lethe.names"
DEFAULT = (
    b"lethe.initial_default"  # canonical JSON (lethe.catalog.values) of a column's initial default
)

WIDENINGS = "int to a wider int, float32 to float64, a decimal's precision up, date32 to timestamp"


# --- ids -------------------------------------------------------------------------------------
def field_id(f: pa.Field) -> int | None:
    """The field's id, or None when it has none."""
    raw = (f.metadata or {}).get(FIELD_ID)
    return int(raw) if raw is not None else None


def aliases(f: pa.Field) -> tuple[str, ...]:
    """The other names ``f`` has inside adopted files (:data:`ALIASES`)."""
    raw = (f.metadata or {}).get(ALIASES)
    return tuple(json.loads(raw)) if raw else ()


def _ids_agree(file_schema: pa.Schema, target: Iterable[pa.Field]) -> bool:
    """Whether ``file_schema`` carries field ids that are the target's: some column has
    one, and none that shares a name with a target column has another id."""
    if not any(field_id(f) is not None for f in file_schema):
        return False
    want = {f.name: field_id(f) for f in target}
    return all(want.get(f.name) in (None, field_id(f)) for f in file_schema if f.name in want)


def file_field(target: pa.Field, file_schema: pa.Schema, by_id: bool) -> pa.Field | None:
    """The column of ``file_schema`` holding ``target``: by field id when ``by_id`` (the
    file's ids are the table's), else by its name or one of its :func:`aliases` (None:
    the file lacks it).

    >>> t = pa.field("a", pa.int64(), metadata={FIELD_ID: b"3", ALIASES: b'["col-9"]'})
    >>> file_field(t, pa.schema([pa.field("col-9", pa.int64())]), False).name
    'col-9'
    >>> old = pa.field("old", pa.int64(), metadata={FIELD_ID: b"3"})
    >>> file_field(t, pa.schema([old]), _ids_agree(pa.schema([old]), [t])).name
    'old'
    """
    if by_id:
        fid = field_id(target)
        return next((f for f in file_schema if field_id(f) == fid), None)
    for n in (target.name, *aliases(target)):
        i = file_schema.get_field_index(n)
        if i >= 0:
            return file_schema.field(i)
    return None


def _with_id(f: pa.Field, fid: int) -> pa.Field:
    return f.with_metadata({**(f.metadata or {}), FIELD_ID: str(fid).encode()})


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return []


def _rebuild(t: pa.DataType, kids: list[pa.Field]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct(kids)
    if pa.types.is_large_list(t):
        return pa.large_list(kids[0])
    if pa.types.is_list(t):
        return pa.list_(kids[0])
    return pa.map_(kids[0], kids[1], keys_sorted=t.keys_sorted)


@dataclass(slots=True)
class _Ids:
    last: int

    def take(self, existing: int | None) -> int:
        if existing is not None:
            return existing
        self.last += 1
        return self.last


def _fill(fields: Sequence[pa.Field], ids: _Ids) -> list[pa.Field]:
    """``fields`` with ids (a level's fields first, then each one's children)."""
    got = [ids.take(field_id(f)) for f in fields]
    out = []
    for f, fid in zip(fields, got, strict=True):
        kids = _children(f.type)
        t = _rebuild(f.type, _fill(kids, ids)) if kids else f.type
        out.append(_with_id(f.with_type(t), fid))
    return out


def _all_fields(fields: Iterable[pa.Field]) -> Iterable[pa.Field]:
    for f in fields:
        yield f
        yield from _all_fields(_children(f.type))


def max_id(schema: pa.Schema) -> int:
    """The highest field id in ``schema`` (0: none)."""
    return max((field_id(f) or 0 for f in _all_fields(schema)), default=0)


def has_ids(schema: pa.Schema) -> bool:
    """Whether every field of ``schema``, nested ones included, has an id."""
    return all(field_id(f) is not None for f in _all_fields(schema))


def with_ids(schema: pa.Schema, last: int | None = None) -> pa.Schema:
    """``schema`` with an id on every field: existing ids kept, fresh ones after
    ``last`` (default: the highest id present) in schema order."""
    if has_ids(schema):
        return schema
    ids = _Ids(max_id(schema) if last is None else max(last, max_id(schema)))
    return pa.schema(_fill(list(schema), ids), metadata=schema.metadata)


def initial_default(f: pa.Field) -> Any:
    """The column's initial default (Python value), or None."""
    raw = (f.metadata or {}).get(DEFAULT)
    if raw is None:
        return None
    return json_value(json.loads(raw), f.type)


def json_value(v: JsonScalar, t: pa.DataType) -> Any:
    """The Python value of a canonical JSON value (:mod:`lethe.catalog.values`) of type ``t``.

    >>> json_value(20454, pa.date32())
    datetime.date(2026, 1, 1)
    """
    return pa.scalar(_decode_default(v, t), type=t).as_py()


def _decode_default(v: JsonScalar, t: pa.DataType) -> Any:
    if v is None:
        return None
    if pa.types.is_date32(t):
        return pa.scalar(int(v), pa.int32()).cast(t).as_py()
    if pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return pa.scalar(int(v), pa.int64()).cast(t).as_py()
    return from_json(v, t)


# --- evolution -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Column:
    name: str


@dataclass(frozen=True, slots=True)
class Add(_Column):
    """A new nullable column (``default``: its initial default, read for older rows)."""

    type: pa.DataType
    default: Any = None


@dataclass(frozen=True, slots=True)
class Drop(_Column):
    """The column dropped (its id is never reused)."""


@dataclass(frozen=True, slots=True)
class Rename(_Column):
    new_name: str


@dataclass(frozen=True, slots=True)
class MakeOptional(_Column):
    """The column made nullable."""


@dataclass(frozen=True, slots=True)
class Widen(_Column):
    type: pa.DataType


Evolution: TypeAlias = Add | Drop | Rename | MakeOptional | Widen


def is_widening(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether ``old`` values read as ``new`` exactly (Iceberg's type promotions)."""
    if pa.types.is_signed_integer(old) and pa.types.is_signed_integer(new):
        return bool(new.bit_width > old.bit_width)
    if pa.types.is_float32(old) and pa.types.is_float64(new):
        return True
    if pa.types.is_decimal128(old) and pa.types.is_decimal128(new):
        return bool(new.scale == old.scale and new.precision > old.precision)
    if pa.types.is_date32(old) and pa.types.is_timestamp(new):
        return new.unit in ("us", "ns")
    return False


_EQUIVALENT = (
    (pa.string(), pa.large_string()),
    (pa.binary(), pa.large_binary()),
)
_UTC = {"UTC", "Etc/UTC", "+00:00", "Z"}
_UNITS = {"s": 0, "ms": 1, "us": 2, "ns": 3}


def same_type(a: pa.DataType, b: pa.DataType) -> bool:
    """The same type for Lethe's purposes: equal, ``string``/``large_string`` (and binary), or
    zoned timestamps of one unit whose zones both spell UTC.

    >>> same_type(pa.string(), pa.large_string()), same_type(pa.int32(), pa.int64())
    (True, False)
    """
    if a.equals(b):
        return True
    for x, y in _EQUIVALENT:
        if (a.equals(x) and b.equals(y)) or (a.equals(y) and b.equals(x)):
            return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.unit == b.unit:
        return (a.tz is None and b.tz is None) or (a.tz in _UTC and b.tz in _UTC)
    return False


def fits(got: pa.DataType, want: pa.DataType) -> bool:
    """Whether values of type ``got`` (data offered to a table) are values of the table's
    type ``want`` exactly: the one promotion rule (:func:`is_widening`, Iceberg's) applied to
    data, after what only changes a value's representation: :func:`same_type`, a dictionary
    of a fitting type, an all-null column, a coarser timestamp unit. Nothing else: an int
    is not a float (cast it before offering it), an unsigned int is not a signed one.

    >>> fits(pa.int32(), pa.int64()), fits(pa.int64(), pa.int32()), fits(pa.int32(), pa.float64())
    (True, False, False)
    >>> fits(pa.dictionary(pa.int32(), pa.large_string()), pa.string())
    True
    """
    if same_type(got, want) or pa.types.is_null(got):
        return True
    if pa.types.is_dictionary(got):
        return fits(got.value_type, want)
    if pa.types.is_timestamp(got) and pa.types.is_timestamp(want):
        zones_agree = (got.tz is None) == (want.tz is None)
        return zones_agree and _UNITS[got.unit] <= _UNITS[want.unit]
    return is_widening(got, want)


def as_table_types(file_schema: pa.Schema, schema: pa.Schema) -> pa.Schema:
    """``file_schema`` with each type Lethe treats as the table's (:func:`same_type`)
    replaced by the table's, and a column the table lacks of a large string or binary type
    as ``string``/``binary`` (what a merge adds; polars writes large types).

    >>> got = pa.schema([("s", pa.large_string()), ("new", pa.large_string())])
    >>> as_table_types(got, pa.schema([("s", pa.string())])).types
    [DataType(string), DataType(string)]
    """
    out = []
    for f in file_schema:
        i = schema.get_field_index(f.name)
        if i < 0:
            t = next((x for x, y in _EQUIVALENT if f.type.equals(y)), None)
        else:
            t = schema.field(i).type if same_type(f.type, schema.field(i).type) else None
        out.append(f.with_type(t) if t is not None else f)
    return pa.schema(out, metadata=file_schema.metadata)


V3_PROMOTION_RULE = (
    "date -> timestamp is a type promotion of Iceberg format 3 only; a format-2 Iceberg view "
    "cannot publish it (set iceberg_format_version=3, or add a timestamp column instead)"
)


def v3_promotions(history: Iterable[pa.Schema], current: pa.Schema) -> list[str]:
    """Top-level columns of ``current`` that are a timestamp where a schema of ``history``
    had the same field id as a date (a promotion Iceberg allows from format 3 only)."""
    dates = {field_id(f) for s in history for f in s if pa.types.is_date(f.type)}
    return [
        f.name for f in current if pa.types.is_timestamp(f.type) and field_id(f) in dates - {None}
    ]


def _refuse(column: str, rule: str) -> errors.SchemaEvolutionError:
    return errors.SchemaEvolutionError(f"column {column!r}: {rule}")


def _added(c: Add) -> pa.Field:
    """The field of a new column (no id yet), its initial default in its metadata."""
    f = pa.field(c.name, c.type, nullable=True)
    if c.default is None:
        return f
    try:
        js = to_json(pa.scalar(c.default, type=c.type))
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise _refuse(c.name, f"initial default {c.default!r} is not a {c.type}") from e
    return f.with_metadata({DEFAULT: json.dumps(js).encode()})


def evolve(
    schema: pa.Schema,
    last_id: int,
    changes: Iterable[Evolution],
    *,
    key: str,
    pinned: Mapping[str, str] | None = None,
    indexed: Iterable[str] = (),
    past_names: Mapping[str, int] | None = None,
) -> tuple[pa.Schema, int, dict[str, str]]:
    """``schema`` (with ids) after ``changes``, the new last column id, and the renames
    (old name -> new name); a :class:`~lethe.errors.SchemaEvolutionError` names the column
    and the rule a change breaks. ``pinned``: columns a table property names -> the
    property (not dropped, renamed nor widened); ``indexed``: columns an index uses (renamed
    and widened with the index, not dropped); ``past_names``: names the history gave its
    columns -> id, which no other column may take (file statistics are kept by name)."""
    fields = {f.name: f for f in schema}
    ev = _Evolving(fields, _Ids(last_id), key, pinned or {}, set(indexed), past_names or {})
    for c in changes:
        ev.apply(c)
    new = pa.schema(list(ev.fields.values()), metadata=schema.metadata)
    return new, max(ev.ids.last, last_id), ev.renames


@dataclass(slots=True)
class _Evolving:
    """The state of one :func:`evolve`: the columns by name, the rules, the renames so far."""

    fields: dict[str, pa.Field]
    ids: _Ids
    key: str
    pinned: Mapping[str, str]
    ixed: set[str]
    past: Mapping[str, int]
    renames: dict[str, str] = field(default_factory=dict)

    def existing(self, name: str) -> pa.Field:
        if name not in self.fields:
            raise _refuse(name, f"no such column (columns are {list(self.fields)})")
        return self.fields[name]

    def free(self, name: str, own: int | None = None) -> None:
        if not name or "." in name:
            raise _refuse(name, "a column is named without dots (nested columns do not evolve)")
        if name in self.fields:
            raise _refuse(name, "a column of that name exists")
        fid = self.past.get(name)
        if fid is not None and fid != own:
            raise _refuse(name, f"the name was column id {fid} of an earlier schema")

    def unpinned(self, name: str, what: str) -> None:
        if name == self.key:
            raise _refuse(name, f"the key column cannot be {what}")
        if name in self.pinned:
            raise _refuse(name, f"table property {self.pinned[name]} names it: it cannot be {what}")
        if name in self.ixed and what not in ("renamed", "widened"):
            raise _refuse(name, f"an index uses it: it cannot be {what} (drop the index first)")

    def apply(self, c: Evolution) -> None:
        if isinstance(c, Add):
            self.free(c.name)
            self.fields[c.name] = _fill([_added(c)], self.ids)[0]
            return
        f = self.existing(c.name)
        if isinstance(c, Drop):
            self.unpinned(c.name, "dropped")
            del self.fields[c.name]
        elif isinstance(c, Rename):
            self.rename(f, c.new_name)
        elif isinstance(c, MakeOptional):
            if c.name == self.key:
                raise _refuse(c.name, "the key column cannot be optional")
            self.fields[c.name] = f.with_nullable(True)
        elif not f.type.equals(c.type):
            self.unpinned(c.name, "widened")
            if not is_widening(f.type, c.type):
                raise _refuse(
                    c.name, f"{f.type} -> {c.type} is not a widening (allowed: {WIDENINGS})"
                )
            self.fields[c.name] = f.with_type(c.type)

    def rename(self, f: pa.Field, new: str) -> None:
        old = f.name
        self.unpinned(old, "renamed")
        self.free(new, field_id(f))
        self.fields = {(new if n == old else n): g for n, g in self.fields.items()}
        self.fields[new] = f.with_name(new)
        origin = next((o for o, n in self.renames.items() if n == old), old)
        self.renames[origin] = new
        self.ixed = {new if n == old else n for n in self.ixed}


# --- projection ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Projection:
    """How a file written under one schema reads as another: for each target column, the
    file's column (name and type) holding it, or None (missing: its default or null);
    ``constants``: columns that hold one value in the whole file (an adopted file's
    partition values, not in the file)."""

    target: pa.Schema
    sources: Mapping[str, pa.Field | None]
    constants: Mapping[str, Any] = field(default_factory=dict)

    @property
    def identity(self) -> bool:
        return not self.constants and all(
            s is not None and s.name == n and s.type.equals(self.target.field(n).type)
            for n, s in self.sources.items()
        )

    def file_column(self, name: str) -> str | None:
        """The file's name of target column ``name`` (None: not in the file)."""
        s = self.sources.get(name)
        return s.name if s is not None else None

    def file_type(self, name: str) -> pa.DataType | None:
        s = self.sources.get(name)
        return s.type if s is not None else None

    def within(self, file_schema: pa.Schema) -> Projection:
        """This projection for an adopted file of schema ``file_schema``: each column found
        in it by field id when the file's ids are the table's, else by name or alias
        (:func:`file_field`); the columns it does not hold (a union schema's) read as
        missing."""
        kept = [s for s in self.sources.values() if s is not None]
        by_id = _ids_agree(file_schema, kept)
        held = {
            n: None if s is None else file_field(s, file_schema, by_id)
            for n, s in self.sources.items()
        }
        return Projection(self.target, held, self.constants)

    def file_columns(self, names: Iterable[str]) -> list[str]:
        return [c for c in (self.file_column(n) for n in names) if c is not None]

    def apply(self, t: pa.Table, names: Sequence[str] | None = None) -> pa.Table:
        """``t`` (columns of the file) as target columns ``names`` (default: all)."""
        out = []
        want = list(names) if names is not None else self.target.names
        for n in want:
            tf = self.target.field(n)
            src = self.sources.get(n)
            if n in self.constants or src is None or src.name not in t.column_names:
                d = self.constants[n] if n in self.constants else initial_default(tf)
                out.append(
                    pa.nulls(t.num_rows, tf.type)
                    if d is None
                    else pa.array([d] * t.num_rows, tf.type)
                )
            else:
                col = t.column(src.name)
                out.append(col if col.type.equals(tf.type) else col.cast(tf.type))
        return pa.Table.from_arrays(out, schema=pa.schema([self.target.field(n) for n in want]))


def projection(file_schema: pa.Schema, target: pa.Schema) -> Projection:
    """Target columns found in ``file_schema`` by field id (both with ids)."""
    by_id = {field_id(f): f for f in file_schema}
    return Projection(target, {f.name: by_id.get(field_id(f)) for f in target})


def widen_comparable(v: Any, old: pa.DataType, new: pa.DataType) -> Any:
    """A comparable value (:mod:`lethe.catalog.values`) of type ``old`` as one of ``new`` (dates
    are days, timestamps units since the epoch)."""
    if v is None or not (pa.types.is_date32(old) and pa.types.is_timestamp(new)):
        return v
    per_day = {"s": 86400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}
    return int(v) * per_day[new.unit]


def same_but_nullability(got: pa.Schema, want: pa.Schema) -> bool:
    """Whether ``got`` differs from ``want`` at most by top-level nullability (the nulls
    themselves are checked against the data: :func:`lethe.writing.writer._nullable_into_required`)."""
    return got.names == want.names and all(
        g.type.equals(w.type) for g, w in zip(got, want, strict=True)
    )


def schema_diff(got: pa.Schema, want: pa.Schema) -> str:
    """What keeps data of schema ``got`` from being written as ``want``, for an error message."""
    g = {f.name: f for f in got}
    w = {f.name: f for f in want}
    missing = [n for n in w if n not in g]
    extra = [n for n in g if n not in w]
    changed = [
        f"{n}: {g[n].type} (table has {w[n].type})"
        for n in w
        if n in g and not g[n].type.equals(w[n].type)
    ]
    parts = []
    if missing:
        parts.append(f"missing columns {missing}")
    if extra:
        parts.append(f"unknown columns {extra}")
    if changed:
        parts.append("type mismatch " + "; ".join(changed))
    if not parts and got.names != want.names:
        parts.append(f"column order {got.names} differs from {want.names}")
    required = [n for n in w if n in g and not g[n].nullable and w[n].nullable]
    if not parts and required:
        parts.append(f"nested field nullability or metadata differs in {required}")
    return "data does not match the table schema: " + (", ".join(parts) or "field metadata differs")
