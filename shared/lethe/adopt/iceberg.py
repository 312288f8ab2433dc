"""The Iceberg source reader: an Iceberg table's current snapshot as a :class:`SourceListing`,
with its history and metadata (every other object of its ``metadata/`` and ``data/`` folders
and whatever its snapshots reference: :mod:`lethe.adopt.history`).

:func:`list_iceberg` reads ``metadata.json`` (a ``vN.metadata.json`` or ``NNNNN-uuid.metadata.json``
file, or a table location / ``metadata/`` prefix: ``version-hint.text`` names the newest when
present, else the highest-numbered metadata file wins), the current snapshot's manifest list
and manifests (PyIceberg's metadata model and Avro codec, through
:mod:`lethe.iceberg.avro`, so that format-3 fields such as ``content_offset`` are read: PyIceberg
0.12's own ``fetch_manifest_entry`` projects the format-2 schema and drops them), and the
deletes that apply to each live data file:

- **position delete files** (Parquet ``file_path``, ``pos``): a delete applies to a data file
  whose data sequence number is <= the delete file's;
- **deletion vectors** (format 3, Puffin ``deletion-vector-v1`` blobs at ``content_offset`` /
  ``content_size_in_bytes``, parsed by :mod:`lethe.dv.blob`), same sequence-number rule;
- **equality deletes** are refused (:class:`~lethe.errors.UnsupportedSource`) when one applies
  to a live data file (data sequence number strictly below its own): turning them into
  positions would mean reading every data file, and ignoring them would bring rows back.

Partition values: identity partitions give a file's value of the source column (canonical JSON
of :mod:`lethe.catalog.values`); the column is also in :attr:`SourceListing.schema`, since Iceberg
writers store it in the file too (files migrated into Iceberg may lack it, which is why the
value is listed). Other transforms (bucket, truncate, day, ...) are derived from columns that
are in the files, so they need no partition column and are not listed. A column is in
``partition_schema`` only when every live file's spec partitions it by identity.

>>> newest_metadata(["v1.metadata.json", "v12.metadata.json", "v3.metadata.json"])
'v12.metadata.json'
>>> newest_metadata(["00001-a.metadata.json", "00002-b.metadata.json", "snap-1.avro"])
'00002-b.metadata.json'
>>> applies(data_sequence=3, delete_sequence=3, equality=False), applies(3, 3, equality=True)
(True, False)
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.transforms import IdentityTransform

from lethe import errors
from lethe.adopt.history import history_objects
from lethe.adopt.objects import SourceObjects, s3_uri
from lethe.adopt.source import HistoryObject, SourceFile, SourceListing
from lethe.catalog.values import JsonScalar, to_json
from lethe.dv.blob import decode_dv
from lethe.iceberg.avro import decode_manifest, decode_manifest_list
from lethe.iceberg.types import arrow_schema
from lethe.storage.store import S3Store

__all__ = ["applies", "list_iceberg", "newest_metadata", "resolve_metadata"]

_V3_FIELDS = [f.name for f in DATA_FILE_TYPE[3].fields]
_VERSIONED = re.compile(r"^v?(\d+)(?:-[^/]*)?\.metadata\.json$")


def newest_metadata(names: Iterable[str]) -> str | None:
    """The metadata file name with the highest version among ``names`` (None: there is none)."""
    best: tuple[int, str] | None = None
    for n in names:
        m = _VERSIONED.match(n.rsplit("/", 1)[-1])
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), n)
    return best[1] if best else None


def applies(data_sequence: int, delete_sequence: int, *, equality: bool) -> bool:
    """Whether a delete file of ``delete_sequence`` applies to a data file of
    ``data_sequence`` (Iceberg spec, "Scan planning")."""
    return data_sequence < delete_sequence if equality else data_sequence <= delete_sequence


def resolve_metadata(objects: SourceObjects, uri: str) -> str:
    """The ``metadata.json`` URI that ``uri`` names (a metadata file, a table location or its
    ``metadata/`` prefix).

    Raises:
        NotFound: no metadata file there.
    """
    uri = s3_uri(uri, what="Iceberg metadata")
    if uri.endswith(".metadata.json"):
        return uri
    base = uri.rstrip("/")
    folder = base if base.endswith("/metadata") else f"{base}/metadata"
    try:
        hint = objects.read(f"{folder}/version-hint.text").decode().strip()
    except errors.NotFound:
        hint = ""
    if hint.isdigit():
        for name in (f"v{hint}.metadata.json", f"{int(hint):05d}.metadata.json"):
            if objects.exists(f"{folder}/{name}"):
                return f"{folder}/{name}"
    bucket = folder.removeprefix("s3://").split("/", 1)[0]
    names = [o.key for o in objects.list(f"{folder}/")]
    newest = newest_metadata(names)
    if newest is None:
        raise errors.NotFound(f"no Iceberg metadata file under {folder}/")
    return f"s3://{bucket}/{newest}"


@dataclass(frozen=True, slots=True)
class _Entry:
    """A live manifest entry with its inherited data sequence number."""

    content: DataFileContent
    path: str
    format: FileFormat
    sequence: int
    record_count: int
    size: int
    spec_id: int
    partition: tuple[object, ...]
    referenced: str | None = None
    offset: int | None = None
    length: int | None = None


def _entries(objects: SourceObjects, manifest_list: str) -> list[_Entry]:
    manifests = decode_manifest_list(objects.read(s3_uri(manifest_list, what="manifest list")))

    def read(mf: ManifestFile) -> list[_Entry]:
        entries = decode_manifest(objects.read(s3_uri(mf.manifest_path, what="manifest")))
        return [
            _entry(e, mf.sequence_number or 0, mf.partition_spec_id)
            for e in entries
            if e.status != ManifestEntryStatus.DELETED
        ]

    return [e for part in objects.map(read, manifests) for e in part]


def _entry(e: ManifestEntry, manifest_sequence: int, spec_id: int) -> _Entry:
    """Sequence numbers of ADDED entries may be null: they inherit the manifest's."""
    df = e.data_file
    seq = e.sequence_number
    if seq is None:
        seq = manifest_sequence
    # the format-3 fields (ids 143-145) by position: PyIceberg's DataFile has no accessors
    v3 = dict(zip(_V3_FIELDS, df._data, strict=False))
    ref = v3.get("referenced_data_file")
    return _Entry(
        content=DataFileContent(df.content or 0),
        path=s3_uri(df.file_path, what="Iceberg file"),
        format=FileFormat(str(df.file_format.value).upper()),
        sequence=seq,
        record_count=df.record_count,
        size=df.file_size_in_bytes,
        spec_id=spec_id,
        partition=tuple(df.partition._data) if df.partition is not None else (),
        referenced=s3_uri(str(ref), what="Iceberg file") if ref else None,
        offset=v3.get("content_offset"),
        length=v3.get("content_size_in_bytes"),
    )


def _identity_columns(meta: TableMetadata, schema: Schema) -> dict[int, list[tuple[int, str]]]:
    """spec id -> [(position in the partition tuple, source column name)] of its identity fields."""
    out: dict[int, list[tuple[int, str]]] = {}
    for sid, spec in meta.specs().items():
        cols = []
        for i, pf in enumerate(spec.fields):
            name = schema.find_column_name(pf.source_id)
            if isinstance(pf.transform, IdentityTransform) and name is not None and "." not in name:
                cols.append((i, name))
        out[sid] = cols
    return out


def _partition_json(value: object, t: pa.DataType, path: str, column: str) -> JsonScalar:
    try:
        return to_json(pa.scalar(value, t))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
        raise errors.UnsupportedSource(
            f"{path}: its partition value of {column!r} does not fit the column's type {t}: {e}"
        ) from e


def _refuse_equality(data: Sequence[_Entry], deletes: Sequence[_Entry]) -> None:
    for d in deletes:
        hit = [f.path for f in data if applies(f.sequence, d.sequence, equality=True)]
        if hit:
            raise errors.UnsupportedSource(
                f"Iceberg equality delete file {d.path} applies to {len(hit)} live data files "
                f"(e.g. {hit[0]}): equality deletes are not imported; compact the table (e.g. "
                "rewrite_data_files) so they become position deletes, then adopt it"
            )


def _position_deletes(
    objects: SourceObjects, d: _Entry, sequences: Mapping[str, int]
) -> dict[str, np.ndarray]:
    """The positions a Parquet position-delete file deletes, per data file it applies to."""
    t = pq.read_table(io.BytesIO(objects.read(d.path)), columns=["file_path", "pos"])
    out: dict[str, np.ndarray] = {}
    paths = pc.unique(t["file_path"]).to_pylist()
    for raw in paths:
        path = s3_uri(str(raw), what="Iceberg file")
        seq = sequences.get(path)
        if seq is None or not applies(seq, d.sequence, equality=False):
            continue
        mask = pc.equal(t["file_path"], raw)
        pos = t["pos"].filter(mask).to_numpy()
        out[path] = np.concatenate([out[path], pos]) if path in out else pos
    return out


def _deletion_vector(objects: SourceObjects, d: _Entry) -> np.ndarray:
    if d.offset is None or d.length is None or d.referenced is None:
        raise errors.UnsupportedSource(
            f"Iceberg deletion vector file {d.path} has no referenced_data_file / content_offset "
            "/ content_size_in_bytes; a format-3 DV entry must name its blob"
        )
    blob = objects.get(d.path, start=d.offset, end=d.offset + d.length).body
    bm = decode_dv(blob, expected_cardinality=d.record_count)
    return np.fromiter(bm, dtype=np.int64, count=len(bm))


def _deleted(
    objects: SourceObjects, data: Sequence[_Entry], deletes: Sequence[_Entry]
) -> dict[str, tuple[int, ...]]:
    sequences = {f.path: f.sequence for f in data}
    found: dict[str, list[np.ndarray]] = defaultdict(list)

    def read(d: _Entry) -> dict[str, np.ndarray]:
        if d.format == FileFormat.PUFFIN:
            seq = sequences.get(d.referenced or "")
            if seq is not None and applies(seq, d.sequence, equality=False):
                return {d.referenced or "": _deletion_vector(objects, d)}
            return {}
        if d.format == FileFormat.PARQUET:
            return _position_deletes(objects, d, sequences)
        raise errors.UnsupportedSource(
            f"Iceberg delete file {d.path} is {d.format.value}: only Parquet position deletes "
            "and Puffin deletion vectors are read"
        )

    for got in objects.map(read, deletes):
        for path, pos in got.items():
            found[path].append(pos)
    rows = {f.path: f.record_count for f in data}
    out = {}
    for path, parts in found.items():
        pos = np.unique(np.concatenate(parts))
        if len(pos) and (pos[0] < 0 or pos[-1] >= rows[path]):
            raise errors.UnsupportedSource(
                f"Iceberg deletes name row {int(pos[-1])} of {path}, which has {rows[path]} rows"
            )
        out[path] = tuple(int(p) for p in pos)
    return out


def _referenced(objects: SourceObjects, meta: TableMetadata) -> set[str]:
    """Every object the table's snapshots reference: manifest lists, manifests, and the data
    and delete files of every entry (deleted entries too: their files stay until expiry)."""
    lists = {s3_uri(s.manifest_list, what="manifest list") for s in meta.snapshots}
    manifests: set[str] = set()
    for got in objects.map(lambda u: decode_manifest_list(objects.read(u)), sorted(lists)):
        manifests.update(s3_uri(mf.manifest_path, what="manifest") for mf in got)

    def files(u: str) -> list[str]:
        try:
            entries = decode_manifest(objects.read(u))
        except errors.NotFound:
            return []
        return [s3_uri(e.data_file.file_path, what="Iceberg file") for e in entries]

    out = lists | manifests
    for got_files in objects.map(files, sorted(manifests)):
        out.update(got_files)
    return out


def _history(
    objects: SourceObjects, uri: str, meta: TableMetadata, live: Iterable[str]
) -> tuple[HistoryObject, ...]:
    """The table's history and metadata (:mod:`lethe.adopt.history`): its ``metadata/`` and
    ``data/`` folders and whatever its metadata references elsewhere."""
    loc = s3_uri(meta.location, what="Iceberg location").rstrip("/")
    walked = {uri, *(s3_uri(e.metadata_file) for e in meta.metadata_log)}
    walked |= _referenced(objects, meta)
    return history_objects(objects, [f"{loc}/metadata/", f"{loc}/data/"], live, walked)


def list_iceberg(store: S3Store, metadata_uri: str, *, history: bool = False) -> SourceListing:
    """The live data files of an Iceberg table's current snapshot, with the rows its position
    deletes and deletion vectors hide.

    Args:
        store: gives the client and counters (objects in any bucket are read through it).
        metadata_uri: a ``*.metadata.json`` file, or the table's location or ``metadata/``.
        history: also list the table's history and metadata (:attr:`SourceListing.history`:
            every snapshot's manifests are read, the ``metadata/`` and ``data/`` folders
            listed), as an adoption does.

    Raises:
        UnsupportedSource: an equality delete applies to a live file, a data file is not
            Parquet, a delete file is not Parquet/Puffin, a type has no Arrow equivalent.
        CorruptDeletionVector: a DV blob fails its checks.
        NotFound: no metadata file at ``metadata_uri``.
    """
    objects = SourceObjects(store)
    uri = resolve_metadata(objects, metadata_uri)
    meta = TableMetadataUtil.parse_raw(objects.read(uri).decode())
    schema = meta.schema()
    arrow = arrow_schema(schema, source=uri)
    order = {n: i for i, n in enumerate(arrow.names)}  # nested identifier fields go last
    key = tuple(
        sorted(schema.identifier_field_names(), key=lambda n: (order.get(n, len(order)), n))
    )
    snap = meta.current_snapshot()
    entries = _entries(objects, snap.manifest_list) if snap is not None else []
    data = [e for e in entries if e.content == DataFileContent.DATA]
    for f in data:
        if f.format != FileFormat.PARQUET:
            raise errors.UnsupportedSource(
                f"Iceberg data file {f.path} is {f.format.value}, not Parquet"
            )
    _refuse_equality(data, [e for e in entries if e.content == DataFileContent.EQUALITY_DELETES])
    deleted = _deleted(
        objects, data, [e for e in entries if e.content == DataFileContent.POSITION_DELETES]
    )
    identity = _identity_columns(meta, schema)
    common = (
        set.intersection(*(set(n for _, n in identity[f.spec_id]) for f in data)) if data else set()
    )
    part_fields = [arrow.field(n) for n in arrow.names if n in common]
    files = []
    for f in sorted(data, key=lambda e: e.path):
        values = {
            n: _partition_json(f.partition[i], arrow.field(n).type, f.path, n)
            for i, n in identity[f.spec_id]
            if n in common
        }
        files.append(SourceFile(f.path, f.size, None, values, deleted.get(f.path, ())))
    return SourceListing(
        "iceberg",
        uri,
        tuple(files),
        schema=arrow,
        partition_schema=pa.schema(part_fields) if part_fields else None,
        key=key,
        history=_history(objects, uri, meta, (f.uri for f in files)) if history else (),
    )
