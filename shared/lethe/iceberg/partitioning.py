"""The Iceberg view's partition spec for files adopted in place with partition values
(:mod:`lethe.adopt`): an identity spec over the table's partition columns (spec 1, fields
from 1000), each such file's values as its partition tuple, so Iceberg readers fill the
columns the files do not hold (PyIceberg projects identity partition values). Files written
by Lethe (their partition columns inside) stay in the unpartitioned spec 0. A manifest holds
one spec, so a segment mixing both kinds (an append to an adopted table, compaction output
next to adopted files) is published as one manifest per spec (:func:`split_by_spec`).

Why spec 0 for Lethe's files rather than the identity spec when a file holds one value of
each partition column: an identity partition value is a promise that every row holds it,
and engines (Iceberg Java) substitute it for the column without reading it; the spec-0
entry makes no such promise and its manifest entry carries the partition columns' exact
bounds instead, so readers prune such files on the same predicates (one rule for every
file Lethe writes, compacted ones spanning days included).

>>> import pyarrow as pa
>>> from pyiceberg.schema import Schema
>>> from pyiceberg.types import DateType, LongType, NestedField
>>> s = Schema(NestedField(1, "id", LongType(), False), NestedField(2, "dt", DateType(), False))
>>> a = pa.schema([("id", pa.int64()), pa.field("dt", pa.date32(), metadata={PARTITION_META: b"identity"})])
>>> spec = view_spec(a, s)
>>> spec.names, specs_json(spec)["partition-specs"][1]["fields"][0]["source-id"]
(('dt',), 2)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import NestedField, StructType

from lethe import errors
from lethe.catalog.manifest import DataFile
from lethe.catalog.partitions import PARTITION_META

__all__ = [
    "PARTITION_META",
    "ViewSpec",
    "partition_columns",
    "partition_record",
    "spec_manifest_key",
    "spec_of",
    "specs_json",
    "split_by_spec",
    "view_spec",
]

SPEC_ID = 1
FIRST_FIELD_ID = 1000


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """The identity spec: the partition columns, their Iceberg partition struct and JSON."""

    names: tuple[str, ...]
    struct: StructType
    fields: tuple[dict[str, Any], ...]
    spec_id: int = SPEC_ID


def partition_columns(arrow: pa.Schema) -> tuple[str, ...]:
    """The table's columns marked as partitions of adopted files."""
    return tuple(f.name for f in arrow if PARTITION_META in (f.metadata or {}))


def view_spec(arrow: pa.Schema, schema: Schema) -> ViewSpec | None:
    """The identity spec of ``arrow``'s partition columns (None: it has none)."""
    names = partition_columns(arrow)
    if not names:
        return None
    fields, struct = [], []
    for i, n in enumerate(names):
        src = schema.find_field(n)
        fid = FIRST_FIELD_ID + i
        fields.append(
            {"source-id": src.field_id, "field-id": fid, "name": n, "transform": "identity"}
        )
        struct.append(NestedField(fid, n, src.field_type, required=False))
    return ViewSpec(names, StructType(*struct), tuple(fields))


def specs_json(spec: ViewSpec | None) -> dict[str, Any]:
    """The metadata's ``partition-specs``, ``default-spec-id`` and ``last-partition-id``
    (spec 0 stays, empty; the identity spec is the default when there is one)."""
    specs: list[dict[str, Any]] = [{"spec-id": 0, "fields": []}]
    if spec is None:
        return {
            "default-spec-id": 0,
            "partition-specs": specs,
            "last-partition-id": FIRST_FIELD_ID - 1,
        }
    specs.append({"spec-id": spec.spec_id, "fields": list(spec.fields)})
    return {
        "default-spec-id": spec.spec_id,
        "partition-specs": specs,
        "last-partition-id": FIRST_FIELD_ID + len(spec.names) - 1,
    }


def spec_of(files: Iterable[DataFile], spec: ViewSpec | None) -> ViewSpec | None:
    """The spec of a manifest over ``files``: the identity spec when each has partition
    values for all its columns, None (spec 0) when none has any.

    Raises:
        IcebergUnsupported: files of both kinds in one segment, or partition values the
            table's spec does not cover (the view would read those columns as null).
    """
    kinds = {tuple(sorted(f.partition)) for f in files}
    if kinds <= {()}:
        return None
    if spec is not None and kinds == {tuple(sorted(spec.names))}:
        return spec
    raise errors.IcebergUnsupported(
        "a manifest segment mixes files adopted with partition values and files holding "
        "their partition columns (or the table does not mark its partition columns): the "
        "Iceberg view cannot express it (its partition columns would read as null); read "
        "the table with Lethe"
    )


def split_by_spec(
    files: Iterable[DataFile], spec: ViewSpec | None
) -> list[tuple[ViewSpec | None, list[DataFile]]]:
    """``files`` grouped by the spec their manifest entries belong to, spec 0 (files holding
    their partition columns) first, order kept within a group; no empty group (an empty
    ``files`` gives one empty spec-0 group).

    Raises:
        IcebergUnsupported: a file's partition values do not match the table's partition
            columns (the view would read those columns as null).
    """
    plain: list[DataFile] = []
    adopted: list[DataFile] = []
    for f in files:
        (adopted if f.partition else plain).append(f)
    if adopted:
        spec_of(adopted, spec)  # refuses values the spec does not cover
    out: list[tuple[ViewSpec | None, list[DataFile]]] = []
    if plain or not adopted:
        out.append((None, plain))
    if adopted:
        out.append((spec, adopted))
    return out


def spec_manifest_key(key: str, spec_id: int) -> str:
    """The companion of manifest ``key`` holding the same segment's entries of partition
    spec ``spec_id`` (a segment mixing specs is one manifest per spec; the first spec's
    manifest keeps the plain key, so a segment of one spec is named as it always was).

    >>> spec_manifest_key("metadata/lethe-d-v00000003-aa-bb.avro", 1)
    'metadata/lethe-d-v00000003-aa-bb.spec1.avro'
    """
    return f"{key.removesuffix('.avro')}.spec{spec_id}.avro"


def partition_record(f: DataFile, spec: ViewSpec | None) -> Record:
    """``f``'s partition tuple under ``spec`` (canonical JSON values are Iceberg's own:
    dates as days, timestamps as microseconds)."""
    if spec is None:
        return Record()
    return Record(*(f.partition.get(n) for n in spec.names))
