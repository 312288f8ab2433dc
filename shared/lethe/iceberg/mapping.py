"""The Iceberg view, pure part: Lethe snapshot values -> Apache Iceberg metadata values.

Nothing here does I/O (the publisher, :mod:`lethe.iceberg.publish`, reads and writes). The
mapping (docs/format.md §10):

* **ids**: Iceberg snapshot id = sequence number = Lethe version; a data file's data sequence
  number is its ``added_version``; field ids are assigned in schema order (top-level columns
  ``1..n``, then nested ones, :mod:`lethe.iceberg.types`), published with a name mapping
  because Lethe's Parquet files carry no field ids.
* **manifests**: one data manifest per Lethe segment object, a pure function of that
  immutable object (so a later publish reuses it by name); the DVs of a segment's files go
  into a separate delete manifest named by the segment and a digest of its DV overlay, so a
  delete that changes only the root's overlay rewrites only the delete manifest of the
  touched segment. Every entry carries explicit snapshot id and sequence numbers.
* **bounds**: lower/upper bounds only for the key column, from the segment's own statistics
  (a data manifest exposes no value its segment object does not, and is garbage exactly when
  the segment object is: see :mod:`lethe.iceberg.refs`); null counts for every column.
* **deletes**: format 3 references Lethe's Puffin ``deletion-vector-v1`` blobs in place
  (``referenced_data_file``, ``content_offset``, ``content_size_in_bytes``); format 2 lists
  position-delete Parquet files written from them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile as IcebergDataFile
from pyiceberg.manifest import (
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.types import LongType, NestedField, PrimitiveType

from lethe import errors
from lethe.catalog.manifest import DataFile, DVRef, SegmentSummary
from lethe.catalog.snapshot import Snapshot
from lethe.iceberg.partitioning import ViewSpec, partition_record, specs_json, view_spec
from lethe.iceberg.sorting import sort_orders
from lethe.iceberg.types import (
    FormatVersion,
    IcebergSchema,
    bound_bytes,
    schema_json,
)
from lethe.storage.layout import METADATA_PREFIX

__all__ = [
    "HINT_KEY",
    "ListEntry",
    "SegmentUnit",
    "View",
    "assign_row_ids",
    "check_format",
    "data_manifest_entries",
    "data_manifest_key",
    "delete_manifest_key",
    "dv_entry",
    "manifest_list_key",
    "metadata_key",
    "new_metadata",
    "position_delete_entry",
    "position_delete_key",
    "segment_stem",
    "segment_units",
    "stem_of_manifest",
    "version_of_metadata",
]

HINT_KEY: Final = f"{METADATA_PREFIX}version-hint.text"
POS_PATH_ID: Final = 2147483546  # file_path of position deletes (reserved field id)
POS_POS_ID: Final = 2147483545  # pos of position deletes
LAST_PARTITION_ID: Final = 999  # an unpartitioned table's (no partition field yet)
_DATA_TAG, _DELETE_TAG = "lethe-d-", "lethe-x-"


# --- object names -----------------------------------------------------------------------------
def metadata_key(version: int) -> str:
    """``metadata/v<N>.metadata.json`` for Lethe version ``N`` (Hadoop-table naming).

    >>> metadata_key(7)
    'metadata/v7.metadata.json'
    """
    return f"{METADATA_PREFIX}v{version}.metadata.json"


def version_of_metadata(rel: str) -> int | None:
    """The Lethe version a metadata file name stands for, or None.

    >>> version_of_metadata("metadata/v12.metadata.json"), version_of_metadata("metadata/x.avro")
    (12, None)
    """
    name = rel.rsplit("/", 1)[-1]
    if not (name.startswith("v") and name.endswith(".metadata.json")):
        return None
    digits = name[1 : -len(".metadata.json")]
    return int(digits) if digits.isdigit() else None


def segment_stem(segment_path: str) -> str:
    """The unique part of a segment object's name (``v00000012-<id>-<rand>``).

    >>> segment_stem("manifest/segments/v00000012-ab-cd.json.gz")
    'v00000012-ab-cd'
    """
    name = segment_path.rsplit("/", 1)[-1]
    return name.removesuffix(".gz").removesuffix(".json")


def data_manifest_key(segment_path: str) -> str:
    """The data manifest derived from one segment object (a pure function of it)."""
    return f"{METADATA_PREFIX}{_DATA_TAG}{segment_stem(segment_path)}.avro"


def delete_manifest_key(segment_path: str, dv_digest: str) -> str:
    """The delete manifest of one segment object's DVs (overlay applied)."""
    return f"{METADATA_PREFIX}{_DELETE_TAG}{segment_stem(segment_path)}-{dv_digest}.avro"


def stem_of_manifest(rel: str) -> tuple[Literal["data", "deletes"], str] | None:
    """Which segment object (stem) a manifest of ours was derived from, and its kind.

    >>> stem_of_manifest(data_manifest_key("manifest/segments/v00000003-aa-bb.json.gz"))
    ('data', 'v00000003-aa-bb')
    >>> stem_of_manifest(delete_manifest_key("manifest/segments/v00000003-aa-bb.json.gz", "0f" * 6))
    ('deletes', 'v00000003-aa-bb')
    """
    name = rel.rsplit("/", 1)[-1].removesuffix(".avro")
    name = re.sub(r"\.spec\d+$", "", name)  # a spec companion (partitioning.spec_manifest_key)
    if name.startswith(_DATA_TAG):
        return "data", name[len(_DATA_TAG) :]
    if name.startswith(_DELETE_TAG):
        return "deletes", name[len(_DELETE_TAG) :].rsplit("-", 1)[0]
    return None


def manifest_list_key(version: int) -> str:
    """A new manifest list for the snapshot of ``version`` (unique per publish attempt)."""
    return f"{METADATA_PREFIX}snap-{version}-{uuid.uuid4().hex}.avro"


def position_delete_key(data_path: str, dv: DVRef) -> str:
    """The format-2 position-delete file written from one DV (named by the DV's identity)."""
    ident = f"{data_path}\0{dv.container}\0{dv.offset}\0{dv.length}\0{dv.crc32}"
    return f"{METADATA_PREFIX}lethe-p-{hashlib.sha256(ident.encode()).hexdigest()[:32]}.parquet"


# --- bounds -----------------------------------------------------------------------------------
def _key_range(f: DataFile, key: str) -> tuple[Any, Any] | None:
    st = f.columns.get(key)
    if st is not None and st.min is not None and st.max is not None:
        return st.min, st.max
    groups = [g for g in f.row_groups if g.rows]
    if groups and all(g.key_min is not None and g.key_max is not None for g in groups):
        try:
            return min(g.key_min for g in groups), max(g.key_max for g in groups)  # type: ignore[type-var]
        except TypeError:
            return None
    return None


# --- manifest entries -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SegmentUnit:
    """One segment object of the snapshot and the digest of its DVs (None: no deletes)."""

    summary: SegmentSummary
    dv_digest: str | None

    @property
    def data_key(self) -> str:
        return data_manifest_key(self.summary.path)

    @property
    def delete_key(self) -> str | None:
        if self.dv_digest is None:
            return None
        return delete_manifest_key(self.summary.path, self.dv_digest)


def segment_units(m: Snapshot) -> list[SegmentUnit]:
    """The snapshot's segments, each with a digest of the DVs its overlay changes.

    Raises:
        IcebergUnsupported: ``m`` is a format-1 manifest (upgrade the table first).
    """
    if not m.segmented:
        raise errors.IcebergUnsupported(
            f"version {m.version} is a format-1 manifest; the Iceberg view needs format 2: "
            "run `lethe upgrade` (or commit anything) first"
        )
    out = []
    for s in m.segments:
        if s.deleted_rows == 0:
            out.append(SegmentUnit(s, None))
            continue
        ov = sorted(
            (p, d.container or "", d.offset, d.length, d.crc32, d.cardinality)
            for p, d in m.overlay_of(s.id).items()
        )
        digest = hashlib.sha256(json.dumps(ov).encode()).hexdigest()[:16]
        out.append(SegmentUnit(s, digest))
    return out


def _uri(location: str, rel: str) -> str:
    return rel if rel.startswith("s3://") else f"{location}/{rel}"  # adopted files: in place


@dataclass(frozen=True, slots=True)
class View:
    """Where and how a table's Iceberg view is published: its location (the table URI), its
    format version, the current schema, and how many snapshots its metadata keeps."""

    location: str
    format_version: FormatVersion
    schema: IcebergSchema
    max_snapshots: int = 100


def data_manifest_entries(
    files: Sequence[DataFile],
    *,
    summary: SegmentSummary,
    view: View,
    key: str,
    spec: ViewSpec | None = None,
    bounded: Sequence[str] = (),
) -> list[ManifestEntry]:
    """The entries of the data manifest of one segment object (pure in the segment).

    Bounds are written for the key and for the columns ``bounded`` (the partition columns of
    files in spec 0, which hold them: readers prune those files on their exact bounds).

    Status ADDED for files the segment's commit added (``added_version ==
    created_version``), EXISTING for the others; snapshot id and both sequence numbers
    are the file's ``added_version``, written explicitly; ``first_row_id`` is left to
    inheritance (format 3).
    """
    fv, schema = view.format_version, view.schema.schema
    top = {f.name: f.field_id for f in schema.fields}
    key_field, bounds = schema.find_field(key), [schema.find_field(c) for c in bounded]
    out = []
    for f in files:
        lower, upper = _bounds(f, key_field, bounds)
        nulls = {
            top[c]: st.null_count
            for c, st in f.columns.items()
            if c in top and st.null_count is not None
        }
        df = IcebergDataFile.from_args(
            _table_format_version=fv,
            content=DataFileContent.DATA,
            file_path=_uri(view.location, f.path),
            file_format=FileFormat.PARQUET,
            partition=partition_record(f, spec),
            record_count=f.rows,
            file_size_in_bytes=f.size,
            null_value_counts=nulls or None,
            lower_bounds=lower or None,
            upper_bounds=upper or None,
            split_offsets=[g.offset for g in f.row_groups] or None,
            sort_order_id=f.sort_order_id,
        )
        added = f.added_version == summary.created_version
        status = ManifestEntryStatus.ADDED if added else ManifestEntryStatus.EXISTING
        out.append(_entry(df, f.added_version, fv, status))
    return out


def _bounds(
    f: DataFile, key: NestedField, bounded: Sequence[NestedField]
) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """``f``'s lower and upper bounds by field id: the key's range, and the exact min/max of
    the columns ``bounded``."""
    lower: dict[int, bytes] = {}
    upper: dict[int, bytes] = {}
    rng = _key_range(f, key.name) if isinstance(key.field_type, PrimitiveType) else None
    if rng is not None:
        lo, hi = bound_bytes(key.field_type, rng[0]), bound_bytes(key.field_type, rng[1])
        if lo is not None and hi is not None:
            lower[key.field_id], upper[key.field_id] = lo, hi
    for c in bounded:
        _column_bounds(f, c, lower, upper)
    return lower, upper


def _column_bounds(
    f: DataFile, field: NestedField, lower: dict[int, bytes], upper: dict[int, bytes]
) -> None:
    """Add ``f``'s exact min/max of a primitive column (when its statistics have both)."""
    st = f.columns.get(field.name)
    if st is None or not isinstance(field.field_type, PrimitiveType):
        return
    lo, hi = bound_bytes(field.field_type, st.min), bound_bytes(field.field_type, st.max)
    if lo is not None and hi is not None:
        lower[field.field_id], upper[field.field_id] = lo, hi


def _path_bounds(data_uri: str) -> dict[int, bytes]:
    return {POS_PATH_ID: data_uri.encode()}


def dv_entry(
    f: DataFile,
    *,
    location: str,
    container_size: int,
    sequence_number: int,
    spec: ViewSpec | None = None,
) -> ManifestEntry:
    """A format-3 delete-manifest entry that references ``f``'s DV blob in place."""
    dv = f.dv
    if dv is None:  # pragma: no cover - callers pass files with DVs
        raise ValueError("file has no DV")
    if dv.container is None:
        raise errors.IcebergUnsupported(
            f"{f.path} has an inline DV: the Iceberg view references DV blobs in their Puffin "
            "containers and inline DVs have none"
        )
    data_uri = _uri(location, f.path)
    df = IcebergDataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=_uri(location, dv.container),
        file_format=FileFormat.PUFFIN,
        partition=partition_record(f, spec),
        record_count=dv.cardinality,
        file_size_in_bytes=container_size,
        lower_bounds=_path_bounds(data_uri),
        upper_bounds=_path_bounds(data_uri),
        referenced_data_file=data_uri,
        content_offset=dv.offset,
        content_size_in_bytes=dv.length,
    )
    return _entry(df, sequence_number, 3)


def position_delete_entry(
    f: DataFile,
    *,
    location: str,
    path: str,
    size: int,
    positions: tuple[int, int],
    sequence_number: int,
    spec: ViewSpec | None = None,
) -> ManifestEntry:
    """A format-2 delete-manifest entry for the position-delete file written from ``f``'s DV
    (``positions``: its first and last deleted position)."""
    data_uri = _uri(location, f.path)
    dv = f.dv
    pos_min, pos_max = positions
    df = IcebergDataFile.from_args(
        _table_format_version=2,
        content=DataFileContent.POSITION_DELETES,
        file_path=_uri(location, path),
        file_format=FileFormat.PARQUET,
        partition=partition_record(f, spec),
        record_count=dv.cardinality if dv else 0,
        file_size_in_bytes=size,
        lower_bounds={**_path_bounds(data_uri), POS_POS_ID: to_bytes(LongType(), pos_min)},
        upper_bounds={**_path_bounds(data_uri), POS_POS_ID: to_bytes(LongType(), pos_max)},
    )
    return _entry(df, sequence_number, 2)


def _entry(
    df: IcebergDataFile,
    seq: int,
    fv: FormatVersion,
    status: ManifestEntryStatus = ManifestEntryStatus.ADDED,
) -> ManifestEntry:
    """A manifest entry of ``df`` with its snapshot id and both sequence numbers ``seq``."""
    seqs = dict.fromkeys(("snapshot_id", "sequence_number", "file_sequence_number"), seq)
    return ManifestEntry.from_args(_table_format_version=fv, status=status, data_file=df, **seqs)


# --- manifest list ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ListEntry:
    """One manifest as a manifest list names it (our own record of it, before row ids)."""

    path: str  # table-relative
    length: int
    content: Literal["data", "deletes"]
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    added_files: int
    existing_files: int
    added_rows: int
    existing_rows: int
    first_row_id: int | None = None
    spec_id: int = 0  # the partition spec of its entries (lethe.iceberg.partitioning)

    @classmethod
    def of(
        cls,
        path: str,
        length: int,
        entries: Sequence[ManifestEntry],
        *,
        content: Literal["data", "deletes"],
        snapshot_id: int,
        spec_id: int = 0,
    ) -> ListEntry:
        seqs = [e.sequence_number for e in entries if e.sequence_number is not None]
        added = [e for e in entries if e.status == ManifestEntryStatus.ADDED]
        existing = [e for e in entries if e.status == ManifestEntryStatus.EXISTING]
        return cls(
            path=path,
            length=length,
            content=content,
            sequence_number=snapshot_id,
            min_sequence_number=min(seqs, default=snapshot_id),
            added_snapshot_id=snapshot_id,
            added_files=len(added),
            existing_files=len(existing),
            added_rows=sum(e.data_file.record_count for e in added),
            existing_rows=sum(e.data_file.record_count for e in existing),
            spec_id=spec_id,
        )

    @classmethod
    def from_manifest_file(cls, mf: ManifestFile, location: str) -> ListEntry:
        """Back from a manifest list read from storage (``first_row_id`` at position 15 in
        format 3; None in format 2)."""
        path = mf.manifest_path
        prefix = location + "/"
        first = mf._data[15] if len(mf._data) > 15 else None
        return cls(
            path=path[len(prefix) :] if path.startswith(prefix) else path,
            length=mf.manifest_length,
            content="data" if mf.content == ManifestContent.DATA else "deletes",
            sequence_number=mf.sequence_number,
            min_sequence_number=mf.min_sequence_number,
            added_snapshot_id=mf.added_snapshot_id or 0,
            added_files=mf.added_files_count or 0,
            existing_files=mf.existing_files_count or 0,
            added_rows=mf.added_rows_count or 0,
            existing_rows=mf.existing_rows_count or 0,
            first_row_id=first,
            spec_id=mf.partition_spec_id or 0,
        )

    @property
    def rows(self) -> int:
        return self.added_rows + self.existing_rows

    def manifest_file(self, location: str, format_version: FormatVersion) -> ManifestFile:
        args: dict[str, Any] = {}
        if format_version >= 3:
            args["first_row_id"] = self.first_row_id
        return ManifestFile.from_args(
            _table_format_version=format_version,
            manifest_path=_uri(location, self.path),
            manifest_length=self.length,
            partition_spec_id=self.spec_id,
            content=ManifestContent.DATA if self.content == "data" else ManifestContent.DELETES,
            sequence_number=self.sequence_number,
            min_sequence_number=self.min_sequence_number,
            added_snapshot_id=self.added_snapshot_id,
            added_files_count=self.added_files,
            existing_files_count=self.existing_files,
            deleted_files_count=0,
            added_rows_count=self.added_rows,
            existing_rows_count=self.existing_rows,
            deleted_rows_count=0,
            partitions=[],
            key_metadata=None,
            **args,
        )


def assign_row_ids(entries: Sequence[ListEntry], next_row_id: int) -> tuple[list[ListEntry], int]:
    """Format-3 row lineage: data manifests without a ``first_row_id`` get one, in order,
    from ``next_row_id``, each advancing by all its rows (its files inherit from it);
    existing assignments are kept. Returns the entries and the rows assigned (the
    snapshot's ``added-rows``).

    >>> e = ListEntry("a", 1, "data", 1, 1, 1, 1, 0, 10, 5)
    >>> out, added = assign_row_ids([e, dataclasses.replace(e, first_row_id=3)], 100)
    >>> [x.first_row_id for x in out], added
    ([100, 3], 15)
    """
    out = []
    added = 0
    for e in entries:
        if e.content == "data" and e.first_row_id is None:
            e = dataclasses.replace(e, first_row_id=next_row_id + added)
            added += e.rows
        out.append(e)
    return out, added


# --- table metadata ---------------------------------------------------------------------------
def _ms(m: Snapshot) -> int:
    return int(m.created_at.timestamp() * 1000)


def check_format(base: Mapping[str, Any] | None, view: View) -> None:
    """Refuse to publish a view in another format version than its ``base``'s.

    Raises:
        InvalidRequest: naming both formats and the ways on.
    """
    got = base.get("format-version") if base is not None else view.format_version
    if got != view.format_version:
        raise errors.InvalidRequest(
            f"the Iceberg view at {view.location} is format {got}; it cannot become format "
            f"{view.format_version} (publish with format_version={got}, or delete "
            f"{METADATA_PREFIX} to start over)"
        )


def new_metadata(
    base: Mapping[str, Any] | None,
    *,
    m: Snapshot,
    view: View,
    manifest_list: str,
    summary: Mapping[str, str],
    added_rows: int,
    base_uri: str | None,
    drop_snapshots: Iterable[int] = (),
) -> dict[str, Any]:
    """Table metadata for Lethe version ``m.version``, as a successor of ``base`` (the
    view's newest metadata, or None for a first publish).

    The new snapshot's parent is the base's current snapshot; snapshots in
    ``drop_snapshots`` (their Lethe manifests expired) and beyond the newest
    ``view.max_snapshots`` are left out, with their log entries. Row lineage (format 3): the
    snapshot starts at the base's ``next-row-id`` and adds ``added_rows``.

    Long: one literal per spec section (table, schema, snapshot, logs, refs) reads best whole.
    """
    check_format(base, view)
    v, location, format_version, schema = m.version, view.location, view.format_version, view.schema
    max_snapshots = view.max_snapshots
    prev_snaps: list[dict[str, Any]] = list(base.get("snapshots", [])) if base else []
    parent = base.get("current-snapshot-id") if base else None
    ts = _ms(m)
    if prev_snaps:
        ts = max(ts, max(int(s["timestamp-ms"]) for s in prev_snaps))
    next_row_id = int(base.get("next-row-id", 0) or 0) if base else 0
    snap: dict[str, Any] = {
        "snapshot-id": v,
        "sequence-number": v,
        "timestamp-ms": ts,
        "manifest-list": _uri(location, manifest_list),
        "summary": dict(summary),
        "schema-id": 0,
    }
    if parent is not None and parent >= 0:
        snap["parent-snapshot-id"] = parent
    if format_version >= 3:
        snap["first-row-id"] = next_row_id
        snap["added-rows"] = added_rows
    dropped = set(drop_snapshots)
    kept = [s for s in prev_snaps if s["snapshot-id"] not in dropped and s["snapshot-id"] != v]
    kept = [*kept[-(max_snapshots - 1) :], snap] if max_snapshots > 1 else [snap]
    kept_ids = {s["snapshot-id"] for s in kept}
    snap_log = [
        e for e in (base.get("snapshot-log", []) if base else []) if e["snapshot-id"] in kept_ids
    ]
    snap_log.append({"timestamp-ms": ts, "snapshot-id": v})
    meta_log = list(base.get("metadata-log", [])) if base else []
    if base_uri is not None and base is not None:
        meta_log.append({"timestamp-ms": int(base["last-updated-ms"]), "metadata-file": base_uri})
    meta_log = meta_log[-max_snapshots:]
    last_seq = max(v, int(base.get("last-sequence-number", 0)) if base else 0)
    out: dict[str, Any] = {
        "format-version": format_version,
        "table-uuid": str(uuid.UUID(hex=m.table_uuid)),
        "location": location,
        "last-sequence-number": last_seq,
        "last-updated-ms": max(ts, int(base["last-updated-ms"]) if base else 0),
        "last-column-id": schema.last_column_id,
        "current-schema-id": 0,
        "schemas": [schema_json(schema)],
        **specs_json(view_spec(m.arrow_schema(), schema.schema)),
        **sort_orders(m.properties, {n: schema.field_id(n) for n in m.properties.cluster_by}),
        "properties": {
            "schema.name-mapping.default": schema.name_mapping,
            "lethe.table-uuid": m.table_uuid,
            "lethe.key": m.key,
        },
        "current-snapshot-id": v,
        "refs": {"main": {"snapshot-id": v, "type": "branch"}},
        "snapshots": kept,
        "snapshot-log": snap_log,
        "metadata-log": meta_log,
        "statistics": [],
        "partition-statistics": [],
    }
    if format_version >= 3:
        out["next-row-id"] = next_row_id + added_rows
    return out
