"""The manifest format: immutable snapshots, the mutable head, and pure commit transforms.

Nothing here does I/O. A manifest is a frozen pydantic model; :func:`decode_manifest` turns
any bad input into :class:`~lethe.errors.CorruptManifest`; the ``apply_*`` functions build
manifest N+1 from manifest N plus one change (they are what a commit rebases).
See ``docs/format.md`` for the field-by-field description.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lethe import errors
from lethe.layout import manifest_key
from lethe.values import JsonScalar

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ColumnStats",
    "DVRef",
    "DataFile",
    "Head",
    "Manifest",
    "Operation",
    "RequestRecord",
    "RowGroupInfo",
    "TableProperties",
    "apply_append",
    "apply_dv_updates",
    "apply_replace",
    "decode_head",
    "decode_manifest",
    "encode_head",
    "encode_manifest",
    "manifest_key",
    "request_hash",
]

FORMAT: Final = "lethe.manifest"
FORMAT_VERSION: Final = 1


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ColumnStats(_Frozen):
    """Min/max (canonical JSON form, see :mod:`lethe.values`) and null count of a column."""

    min: JsonScalar = None
    max: JsonScalar = None
    null_count: int | None = None


class RowGroupInfo(_Frozen):
    """One row group: rows, byte range ``[offset, offset+length)`` and key-column stats."""

    rows: int = Field(ge=0)
    offset: int = Field(ge=4)
    length: int = Field(ge=0)
    key_min: JsonScalar = None
    key_max: JsonScalar = None


class DVRef(_Frozen):
    """Where a data file's current deletion vector lives.

    ``container`` is a table-relative path of a Puffin object under ``tombstone/``, with the
    blob at ``[offset, offset+length)``; or ``inline`` holds the base64 blob itself.
    ``crc32`` is the CRC-32 stored in the blob (of magic + vector).
    """

    container: str | None = None
    offset: int = 0
    length: int = Field(ge=0)
    cardinality: int = Field(ge=0)
    crc32: int = Field(ge=0)
    inline: str | None = None


class DataFile(_Frozen):
    """A live data file of a snapshot (path relative to the table prefix)."""

    path: str
    size: int = Field(ge=0)
    etag: str
    rows: int = Field(ge=0)
    row_groups: tuple[RowGroupInfo, ...]
    columns: Mapping[str, ColumnStats] = Field(default_factory=dict)
    dv: DVRef | None = None
    added_version: int = Field(ge=0)
    sorted_by_key: bool = False

    @property
    def deleted_rows(self) -> int:
        return self.dv.cardinality if self.dv else 0

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows


class Operation(_Frozen):
    """What a commit did: counts and hashes only, never personal data."""

    kind: Literal["create", "append", "delete", "erase", "purge", "compact", "register", "gc"]
    request_id_hash: str | None = None
    rows_added: int = 0
    rows_deleted: int = 0
    rows_erased: int = 0
    files_added: int = 0
    files_removed: int = 0
    files_touched: int = 0
    params: Mapping[str, JsonScalar] = Field(default_factory=dict)


class RequestRecord(_Frozen):
    """A committed request id (hashed), kept for idempotent redelivery."""

    id_hash: str
    version: int
    kind: str
    committed_at: datetime
    rows: int = 0
    files_touched: int = 0
    body_hash: str | None = None  # what the request asked (filters, mode), hashed; None: not known


class ErasureTarget(_Frozen):
    """Row groups of one data file that still hold (logically deleted) rows to erase."""

    path: str
    row_groups: tuple[int, ...]


class ErasureRecord(_Frozen):
    """An erase request: its rows are hidden by a DV at ``deleted_version``; splices then
    remove them physically (``pending`` → ``spliced``); GC reports completion once every
    ``superseded`` object (and old manifest naming the rows) is gone."""

    id_hash: str
    deleted_version: int
    state: Literal["pending", "spliced"] = "pending"
    targets: tuple[ErasureTarget, ...] = ()
    spliced_version: int | None = None
    superseded: tuple[str, ...] = ()


class TableProperties(_Frozen):
    key: str
    target_file_bytes: int = Field(default=256 << 20, gt=0)
    row_group_bytes: int = Field(default=16 << 20, gt=0)
    request_retention_seconds: int = Field(default=7 * 24 * 3600, ge=0)
    request_log_max: int = Field(default=5000, ge=0)
    # GC keeps unreferenced objects this long; writers commit within it (lethe.grace)
    gc_grace_seconds: float = Field(default=7 * 86400.0, gt=0)


class Manifest(_Frozen):
    """One immutable table snapshot (``manifest/vNNNNNNNN.json``)."""

    format: Literal["lethe.manifest"] = FORMAT
    format_version: Literal[1] = FORMAT_VERSION
    layout: Literal["inline"] = "inline"
    table_uuid: str
    version: int = Field(ge=0)
    previous: int | None = None
    commit_id: str = ""
    created_at: datetime
    operation: Operation
    schema_b64: str
    properties: TableProperties
    files: tuple[DataFile, ...] = ()
    requests: tuple[RequestRecord, ...] = ()
    erasures: tuple[ErasureRecord, ...] = ()

    @property
    def key(self) -> str:
        return self.properties.key

    def arrow_schema(self) -> pa.Schema:
        return schema_from_b64(self.schema_b64)

    def file(self, path: str) -> DataFile | None:
        for f in self.files:
            if f.path == path:
                return f
        return None

    @property
    def total_rows(self) -> int:
        return sum(f.live_rows for f in self.files)

    def find_request(self, id_hash: str) -> RequestRecord | None:
        for r in self.requests:
            if r.id_hash == id_hash:
                return r
        return None


class Head(_Frozen):
    """The mutable ``_latest_manifest`` object: which manifest is current."""

    format: Literal["lethe.head"] = "lethe.head"
    format_version: Literal[1] = 1
    version: int = Field(ge=0)
    manifest: str
    table_uuid: str


# --- codec ---------------------------------------------------------------------------------
def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def schema_from_b64(s: str) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(s)))
    except Exception as e:
        raise errors.CorruptManifest(f"manifest schema is not a valid Arrow schema: {e}") from e


def encode_manifest(m: Manifest) -> bytes:
    return m.model_dump_json(exclude_defaults=False).encode()


def _load_json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise errors.CorruptManifest(
            f"{what} is not valid JSON ({len(raw)} bytes; truncated or overwritten?): {e.msg if hasattr(e, 'msg') else e}"
        ) from e
    if not isinstance(obj, dict):
        raise errors.CorruptManifest(f"{what} is not a JSON object")
    return obj


def decode_manifest(raw: bytes, *, where: str = "manifest") -> Manifest:
    """Parse and validate a manifest; anything wrong is a :class:`CorruptManifest`."""
    obj = _load_json(raw, where)
    if obj.get("format") != FORMAT:
        raise errors.CorruptManifest(
            f"{where} is not a Lethe manifest (format={obj.get('format')!r})"
        )
    fv = obj.get("format_version")
    if fv != FORMAT_VERSION:
        raise errors.CorruptManifest(
            f"{where} has manifest format version {fv!r}; this Lethe reads version {FORMAT_VERSION}. "
            "Upgrade Lethe to read it."
        )
    try:
        m = Manifest.model_validate(obj)
    except ValidationError as e:
        raise errors.CorruptManifest(f"{where} fails validation: {_summarize(e)}") from e
    schema_from_b64(m.schema_b64)
    return m


def encode_head(h: Head) -> bytes:
    return h.model_dump_json().encode()


def decode_head(raw: bytes, *, where: str = "_latest_manifest") -> Head:
    obj = _load_json(raw, where)
    try:
        return Head.model_validate(obj)
    except ValidationError as e:
        raise errors.CorruptManifest(f"{where} fails validation: {_summarize(e)}") from e


def _summarize(e: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:5]]
    more = f" (+{e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more


def request_hash(request_id: str) -> str:
    """Stable hash of a request id (request ids are never stored in clear)."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


# --- pure transforms -------------------------------------------------------------------------
def _successor(
    base: Manifest,
    *,
    files: Iterable[DataFile],
    operation: Operation,
    now: datetime,
    request: RequestRecord | None,
    extra: Sequence[RequestRecord] = (),
) -> Manifest:
    requests = list(base.requests)
    if request is not None:
        requests.append(request)
    requests.extend(
        r.model_copy(update={"version": base.version + 1, "committed_at": now}) for r in extra
    )
    props = base.properties
    horizon = now - timedelta(seconds=props.request_retention_seconds)
    requests = [r for r in requests if r.committed_at >= horizon]
    if len(requests) > props.request_log_max:
        requests = requests[len(requests) - props.request_log_max :]
    return base.model_copy(
        update={
            "version": base.version + 1,
            "previous": base.version,
            "commit_id": uuid.uuid4().hex,
            "created_at": now,
            "operation": operation,
            "files": tuple(files),
            "requests": tuple(requests),
        }
    )


def _record(
    operation: Operation, version: int, now: datetime, rows: int, files_touched: int
) -> RequestRecord | None:
    if operation.request_id_hash is None:
        return None
    return RequestRecord(
        id_hash=operation.request_id_hash,
        version=version,
        kind=operation.kind,
        committed_at=now,
        rows=rows,
        files_touched=files_touched,
    )


def apply_append(
    base: Manifest,
    new_files: Iterable[DataFile],
    operation: Operation,
    *,
    now: datetime | None = None,
) -> Manifest:
    """Manifest N+1 = N plus ``new_files``. Appends never conflict."""
    now = now or datetime.now(UTC)
    added = [f.model_copy(update={"added_version": base.version + 1}) for f in new_files]
    existing = {f.path for f in base.files}
    dup = [f.path for f in added if f.path in existing]
    if dup:
        raise errors.CommitConflict(f"append adds files already in the table: {dup[:3]}")
    rows = sum(f.rows for f in added)
    return _successor(
        base,
        files=(*base.files, *added),
        operation=operation,
        now=now,
        request=_record(operation, base.version + 1, now, rows, len(added)),
    )


def apply_dv_updates(
    base: Manifest,
    updates: Mapping[str, DVRef],
    operation: Operation,
    *,
    now: datetime | None = None,
    requests: Sequence[RequestRecord] = (),
    erasures: Sequence[ErasureRecord] = (),
) -> Manifest:
    """Manifest N+1 with the DVs of some files replaced (each must already hold the union).

    Raises CommitConflict if a file named in ``updates`` is no longer live in ``base``.
    """
    now = now or datetime.now(UTC)
    live = {f.path for f in base.files}
    missing = [p for p in updates if p not in live]
    if missing:
        raise errors.CommitConflict(
            f"{len(missing)} file(s) this delete touches are no longer in version {base.version}"
        )
    files = [
        f.model_copy(update={"dv": updates[f.path]}) if f.path in updates else f for f in base.files
    ]
    if erasures:
        new = tuple(e.model_copy(update={"deleted_version": base.version + 1}) for e in erasures)
        base = base.model_copy(update={"erasures": (*base.erasures, *new)})
    return _successor(
        base,
        files=files,
        operation=operation,
        now=now,
        request=_record(operation, base.version + 1, now, operation.rows_deleted, len(updates)),
        extra=requests,
    )


def apply_replace(
    base: Manifest,
    removed: Iterable[str],
    added: Iterable[DataFile],
    operation: Operation,
    *,
    now: datetime | None = None,
    requests: Sequence[RequestRecord] = (),
) -> Manifest:
    """Manifest N+1 with files ``removed`` swapped for ``added`` (splice, compaction).

    The caller has already mapped any concurrent DV onto the ``added`` files.
    """
    now = now or datetime.now(UTC)
    removed_set = set(removed)
    live = {f.path for f in base.files}
    missing = removed_set - live
    if missing:
        raise errors.CommitConflict(
            f"{len(missing)} file(s) to replace are no longer in version {base.version}"
        )
    new = [f.model_copy(update={"added_version": base.version + 1}) for f in added]
    files = [f for f in base.files if f.path not in removed_set] + new
    return _successor(
        base,
        files=files,
        operation=operation,
        now=now,
        request=_record(
            operation,
            base.version + 1,
            now,
            operation.rows_erased or operation.rows_deleted,
            len(removed_set),
        ),
        extra=requests,
    )


def initial_manifest(
    *, table_uuid: str, schema: pa.Schema, properties: TableProperties, now: datetime | None = None
) -> Manifest:
    return Manifest(
        table_uuid=table_uuid,
        commit_id=uuid.uuid4().hex,
        version=0,
        previous=None,
        created_at=now or datetime.now(UTC),
        operation=Operation(kind="create"),
        schema_b64=schema_to_b64(schema),
        properties=properties,
    )
