"""Filters in pyarrow's DNF convention: validation, expressions, and stats-based pruning.

A filter is a list of ``(column, op, value)`` tuples (ANDed), or a list of such lists (ORed);
ops are ``= == != < <= > >= in not in``. The same form is the JSON of SQS delete requests
(tuples arrive as lists). :func:`normalize` validates against a schema and returns a
:class:`Dnf`; :meth:`Dnf.may_match` decides from min/max statistics whether a file or row
group can hold a matching row.

>>> import pyarrow as pa
>>> dnf = normalize([("id", "in", [3, 1])], pa.schema([("id", pa.int64())]))
>>> dnf.may_match(lambda col: (5, 9, 0))
False
"""

from __future__ import annotations

import bisect
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lethe import errors
from lethe.catalog.values import NotExact, exact, exact_scalar, is_orderable

__all__ = ["Dnf", "Predicate", "StatsLookup", "normalize"]

OPS = {"=", "==", "!=", "<", "<=", ">", ">=", "in", "not in"}

# column -> (min, max, null_count) in comparable form, or None when unknown
StatsLookup = Callable[[str], tuple[Any, Any, int | None] | None]


@dataclass(frozen=True, slots=True)
class Predicate:
    column: str
    op: str
    value: Any  # raw user value (for expressions)
    cmp: Any  # comparable form; for in/not in a sorted tuple (None entries removed)
    has_null: bool = False  # for in / not in with a None member

    def expression(self) -> pc.Expression:
        f = pc.field(self.column)
        op = "=" if self.op == "==" else self.op
        if op == "in":
            return f.isin(self.value)
        if op == "not in":
            return ~f.isin(self.value)  # pyarrow's own semantics for "not in"
        v = self.value
        return {"=": f == v, "!=": f != v, "<": f < v, "<=": f <= v, ">": f > v, ">=": f >= v}[op]

    def may_match(self, stats: tuple[Any, Any, int | None] | None) -> bool:
        if stats is None:
            return True
        lo, hi, _nulls = stats
        if lo is None or hi is None:
            return True  # all-null group or unknown bounds: cannot prune safely
        op = self.op
        v = self.cmp
        try:
            if op in ("=", "=="):
                return bool(lo <= v <= hi)
            if op == "!=":
                return not (lo == hi == v)
            if op == "<":
                return bool(lo < v)
            if op == "<=":
                return bool(lo <= v)
            if op == ">":
                return bool(hi > v)
            if op == ">=":
                return bool(hi >= v)
            if op == "in":  # with a None member, null rows match: prune only without nulls
                if self.has_null and _nulls != 0:
                    return True
                i = bisect.bisect_left(v, lo)
                return i < len(v) and v[i] <= hi
            if op == "not in":  # null rows satisfy pyarrow's "not in": prune only without nulls
                return not (lo == hi and lo in v and _nulls == 0)
        except TypeError:
            return True
        return True


@dataclass(frozen=True, slots=True)
class Dnf:
    """A validated filter: OR of ANDs of predicates."""

    clauses: tuple[tuple[Predicate, ...], ...]

    def fingerprint(self) -> str:
        """A stable hash of what this filter selects (columns, ops, exact values), so that a
        request id can be checked against the body it was first committed with.

        >>> s = pa.schema([("id", pa.int64())])
        >>> normalize([("id", "==", 3.0)], s).fingerprint() == normalize([("id", "=", 3)], s).fingerprint()
        True
        """
        canon = [
            [[p.column, "=" if p.op == "==" else p.op, repr(p.cmp), p.has_null] for p in clause]
            for clause in self.clauses
        ]
        return hashlib.sha256(json.dumps(canon).encode()).hexdigest()[:32]

    @property
    def columns(self) -> list[str]:
        seen: dict[str, None] = {}
        for c in self.clauses:
            for p in c:
                seen.setdefault(p.column, None)
        return list(seen)

    def expression(self) -> pc.Expression:
        out: pc.Expression | None = None
        for clause in self.clauses:
            e: pc.Expression | None = None
            for p in clause:
                e = p.expression() if e is None else (e & p.expression())
            assert e is not None
            out = e if out is None else (out | e)
        assert out is not None
        return out

    def may_match(self, lookup: StatsLookup) -> bool:
        return any(all(p.may_match(lookup(p.column)) for p in clause) for clause in self.clauses)

    def key_values(self, key: str) -> list[Any] | None:
        """If every clause pins ``key`` by ``=``/``in``, the comparable values; else None."""
        vals: list[Any] = []
        for clause in self.clauses:
            found = None
            for p in clause:
                if p.column == key and p.op in ("=", "==", "in"):
                    found = [p.cmp] if p.op != "in" else list(p.cmp)
                    break
            if found is None:
                return None
            vals.extend(found)
        return vals


def _field_type(schema: pa.Schema, name: str) -> pa.DataType:
    idx = schema.get_field_index(name)
    if idx < 0:  # never echo the name: a swapped predicate puts a person's key here
        raise errors.InvalidRequest(
            f"filter names a column that is not in the table; columns are {schema.names}"
        )
    return schema.field(idx).type


def _predicate(raw: Any, schema: pa.Schema) -> Predicate:
    if not isinstance(raw, list | tuple) or len(raw) != 3:
        raise errors.InvalidRequest(
            "a filter predicate is [column, op, value]"
            + (f", got a list of {len(raw)} items" if isinstance(raw, list | tuple) else "")
        )
    col, op, value = raw
    if not isinstance(col, str):
        raise errors.InvalidRequest("filter column must be a string (a column name)")
    if not isinstance(op, str) or op not in OPS:
        raise errors.InvalidRequest(f"unknown filter op; use one of {sorted(OPS)}")
    t = _field_type(schema, col)
    if not is_orderable(t) and op not in ("=", "==", "!=", "in", "not in"):
        raise errors.InvalidRequest(f"column {col!r} of type {t} cannot be compared with {op}")
    try:
        if op in ("in", "not in"):
            if isinstance(value, str | bytes) or not isinstance(
                value, list | tuple | set | frozenset
            ):
                raise errors.InvalidRequest(
                    f"'{op}' needs a list of values for column {col!r}: write it as "
                    f'--where "{col} {op} [1, 2]" on the command line, or '
                    f'["{col}", "{op}", [1, 2]] in a filter (one value: [1])'
                )
            if not value:
                raise errors.InvalidRequest(f"'{op}' on column {col!r} has an empty list")
            values = list(value)
            exact_vals = [exact(v, t) for v in values if v is not None]
            has_null = len(exact_vals) != len(values)
            arr = pa.array(
                [exact_scalar(v, t) for v in exact_vals] + ([None] if has_null else []), type=t
            )
            return Predicate(col, op, arr, tuple(sorted(set(exact_vals))), has_null)
        if value is None:
            raise errors.InvalidRequest(
                f"filter on {col!r} compares with null; null never matches '{op}'"
            )
        cmp_val = exact(value, t)
        return Predicate(col, op, exact_scalar(cmp_val, t), cmp_val)
    except NotExact as e:
        # never echo the value: filters of delete requests carry keys of people
        raise errors.InvalidRequest(f"filter value for column {col!r} ({op}) {e}") from e


def normalize(filters: Any, schema: pa.Schema) -> Dnf:
    """Validate ``filters`` (DNF list form) against ``schema``; raise InvalidRequest if bad."""
    if isinstance(filters, Dnf):
        return filters
    if not isinstance(filters, list | tuple) or not filters:
        raise errors.InvalidRequest(
            "filters must be a non-empty list of (column, op, value) tuples, or a list of such lists"
        )
    first = filters[0]
    clauses_raw: Sequence[Any]
    if isinstance(first, list | tuple) and first and isinstance(first[0], list | tuple):
        clauses_raw = filters
    else:
        clauses_raw = [filters]
    clauses: list[tuple[Predicate, ...]] = []
    for c in clauses_raw:
        if not isinstance(c, list | tuple) or not c:
            raise errors.InvalidRequest("each OR-clause must be a non-empty list of predicates")
        clauses.append(tuple(_predicate(p, schema) for p in c))
    return Dnf(tuple(clauses))
