"""The manifest format: immutable snapshots, their segments, and the mutable head.

Nothing here does I/O. A manifest is a frozen pydantic model; the entries it lists (files,
segments, index runs) are in :mod:`lethe.catalog.entries`, and named here too.
:func:`decode_manifest` turns any bad input into :class:`~lethe.errors.CorruptManifest`. The pure commit transforms that
build manifest N+1 from N live in :mod:`lethe.catalog.transforms`. See ``docs/format.md``.

Two layouts:

* format 1, ``layout: "inline"``: the manifest lists every live file (``files``). Read only;
  the next commit upgrades the table.
* format 2, ``layout: "segmented"``: the manifest (the *root*) lists immutable **segments**
  (``manifest/segments/…json.gz``, each a bounded group of file entries with their DV
  references) with a :class:`SegmentSummary` each, enough to prune without opening it.
  The models never load a segment: :class:`lethe.catalog.snapshot.Snapshot` pairs a manifest with
  the reader of its segments (and the segments a commit built that are not stored yet).
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lethe import errors
from lethe.catalog.entries import (
    SEGMENT_FORMAT,
    ColumnIndex,
    ColumnStats,
    DataFile,
    DVRef,
    Frozen,
    IndexOrigin,
    IndexPiece,
    IndexRun,
    OverlayDV,
    RowGroupInfo,
    Segment,
    SegmentSummary,
)
from lethe.catalog.schemas import max_id, with_ids
from lethe.catalog.values import JsonScalar
from lethe.storage.layout import manifest_key, segment_key

__all__ = [  # the entries (lethe.catalog.entries) too: the format's names, in one place
    "EVOLVED_FORMAT_VERSION",
    "FORMAT",
    "FORMAT_VERSION",
    "LINEAGE_FORMAT_VERSION",
    "SEGMENT_FORMAT",
    "ColumnIndex",
    "ColumnStats",
    "DVRef",
    "DataFile",
    "Head",
    "IndexOrigin",
    "IndexPiece",
    "IndexRun",
    "LedgerRef",
    "LineageRef",
    "Manifest",
    "Operation",
    "OverlayDV",
    "RequestRecord",
    "RowGroupInfo",
    "SchemaVersion",
    "Segment",
    "SegmentSummary",
    "SupersededList",
    "TableProperties",
    "decode_head",
    "decode_manifest",
    "decode_segment",
    "decode_superseded",
    "encode_head",
    "encode_manifest",
    "encode_segment",
    "encode_superseded",
    "initial_manifest",
    "manifest_key",
    "request_hash",
    "segment_key",
]

FORMAT: Final = "lethe.manifest"  # on the bucket: not the module's name (issue 38)
#: What Lethe wrote between the re-layering and its fix: read as :data:`FORMAT`.
RELAYOUT_FORMAT: Final = "lethe.catalog.manifest"
FORMAT_VERSION: Final = 2  # what this Lethe writes for a table whose schema never changed
EVOLVED_FORMAT_VERSION: Final = 3  # ... and for one with a schema history (field ids, schemas)
LINEAGE_FORMAT_VERSION: Final = 4  # ... and for one whose splices recorded a lineage (issue 39)
READABLE_VERSIONS: Final = (1, 2, 3, 4)


class Operation(Frozen):
    """What a commit did: counts and hashes only, never personal data."""

    kind: Literal[
        "create",
        "append",
        "delete",
        "erase",
        "purge",
        "compact",
        "register",
        "gc",
        "upgrade",
        "index",
        "retention",
        "properties",
        "schema",
        "adopt",
    ]
    request_id_hash: str | None = None
    rows_added: int = 0
    rows_deleted: int = 0
    rows_erased: int = 0
    files_added: int = 0
    files_removed: int = 0
    files_touched: int = 0
    params: Mapping[str, JsonScalar] = Field(default_factory=dict)


class RequestRecord(Frozen):
    """A committed request id (hashed), kept for idempotent redelivery."""

    id_hash: str
    version: int
    kind: str
    committed_at: datetime
    rows: int = 0
    files_touched: int = 0
    body_hash: str | None = None  # what the request asked (filters, mode), hashed; None: not known


class ErasureTarget(Frozen):
    """Row groups of one data file that still hold (logically deleted) rows to erase, and
    ``positions``, the erased positions of the file (base64 portable Roaring): the splice
    removes those, and rows a plain delete hid stay (issue 39). Empty: unknown (a target
    moved by a compaction or a partial splice, or written before issue 39); the splice then
    removes every hidden row of the groups."""

    path: str
    row_groups: tuple[int, ...]
    positions: str = Field(default="", exclude_if=lambda v: not v)


class ErasureRecord(Frozen):
    """An erase request: its rows are hidden by a DV at ``deleted_version``; splices then
    remove them physically (``pending`` → ``spliced``); GC reports completion once every
    superseded object (and old manifest naming the rows) is gone.

    The superseded objects are ``superseded`` (inline: what manifests before
    ``superseded_refs`` existed wrote; read, never grown) followed by the paths of each
    :class:`SupersededList` object of ``superseded_refs`` (one per commit that added some,
    so the root stays small): :meth:`lethe.catalog.snapshot.Snapshot.superseded_of` reads them all."""

    id_hash: str
    deleted_version: int
    state: Literal["pending", "spliced"] = "pending"
    targets: tuple[ErasureTarget, ...] = ()
    spliced_version: int | None = None
    superseded: tuple[str, ...] = Field(default=(), exclude_if=lambda v: not v)
    superseded_refs: tuple[str, ...] = Field(default=(), exclude_if=lambda v: not v)

    @classmethod
    def erased_before(cls, id_hash: str) -> ErasureRecord:
        """The record of an erase request no live row matched (issue 35 new1): the rows it
        names may have left the live files earlier (a splice, a purge, a compaction, a TTL
        sweep) and still be in the objects GC has not deleted. Spliced at its own commit
        (no targets), so GC cuts the versions before it and completes it only once every
        object from before it is gone, like any erasure's."""
        return cls(id_hash=id_hash, deleted_version=0, state="spliced", spliced_version=0)


class SupersededList(Frozen):
    """One immutable object of superseded paths
    (``manifest/erasures/vNNNNNNNN-<id hash or "several">-<uuid>.json.gz``): what the commit
    of ``version`` added to the superseded objects of its erasures.

    Format 1 holds one erasure's (``id_hash``, ``paths``); format 2 (a commit that
    superseded objects for several erasures, as a window's splice of 1,000 requests does)
    holds them all in ``by_erasure`` (id hash -> paths), one object per commit instead of one
    per erasure. A commit for one erasure still writes format 1, which older readers read."""

    format: Literal["lethe.superseded"] = "lethe.superseded"
    format_version: Literal[1, 2] = 1
    table_uuid: str
    id_hash: str = Field(default="", exclude_if=lambda v: not v)
    version: int = Field(ge=0)
    paths: tuple[str, ...] = Field(default=(), exclude_if=lambda v: not v)
    by_erasure: dict[str, tuple[str, ...]] = Field(default_factory=dict, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _one_shape(self) -> SupersededList:
        if self.format_version == 1 and (not self.id_hash or self.by_erasure):
            raise ValueError("format 1 names one erasure (id_hash, paths), no by_erasure")
        if self.format_version == 2 and (self.id_hash or self.paths or not self.by_erasure):
            raise ValueError("format 2 holds by_erasure only")
        return self

    @classmethod
    def of(
        cls, table_uuid: str, version: int, added: Mapping[str, Sequence[str]]
    ) -> SupersededList:
        """The list of one commit: format 1 for one erasure, format 2 for several."""
        if len(added) == 1:
            ((id_hash, paths),) = added.items()
            return cls(table_uuid=table_uuid, id_hash=id_hash, version=version, paths=tuple(paths))
        return cls(
            format_version=2,
            table_uuid=table_uuid,
            version=version,
            by_erasure={h: tuple(p) for h, p in added.items()},
        )

    def paths_of(self, id_hash: str) -> tuple[str, ...]:
        """The paths this list holds for erasure ``id_hash``."""
        if self.format_version == 1:
            return self.paths if self.id_hash == id_hash else ()
        return self.by_erasure.get(id_hash, ())


class TableProperties(Frozen):
    key: str
    target_file_bytes: int = Field(default=256 << 20, gt=0)
    row_group_bytes: int = Field(default=16 << 20, gt=0)
    request_retention_seconds: int = Field(default=7 * 24 * 3600, ge=0)
    request_log_max: int = Field(default=5000, ge=0)
    # GC keeps unreferenced objects this long; writers commit within it (lethe.catalog.grace)
    gc_grace_seconds: float = Field(default=7 * 86400.0, gt=0)
    # format 2: file entries per segment (a commit rewrites at most a few segments)
    segment_target_files: int = Field(default=1000, gt=0)
    # format 2: DV changes the root may carry before they are folded into their segments
    dv_overlay_max: int = Field(default=256, ge=0)
    # the Iceberg view (lethe.iceberg): committers publish it after each commit when set
    iceberg_view: bool = False
    iceberg_format_version: Literal[2, 3] = 3
    # a layout for forgetting (lethe.maintenance.clustering): compaction sorts each window by these
    cluster_by: tuple[str, ...] = Field(default=(), exclude_if=lambda v: not v)
    cluster_time_column: str | None = Field(default=None, exclude_if=lambda v: v is None)
    cluster_window_seconds: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)
    # at most this many subjects per clustered file (None: cut by target_file_bytes only)
    cluster_file_subjects: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)
    # row TTL (lethe.erasure.retention): rows whose timestamp/date ``retention_column`` is older than
    # ``retention_seconds`` are erased by the sweep; unset on tables without it (not written)
    retention_column: str | None = Field(default=None, exclude_if=lambda v: v is None)
    retention_seconds: int | None = Field(default=None, gt=0, exclude_if=lambda v: v is None)
    # the upload trigger (and the ingest job it starts) may evolve the schema to take an
    # upload of another shape (schema_mode="merge"); unset: such uploads are refused
    uploads_evolve: bool = Field(default=False, exclude_if=lambda v: not v)


class SchemaVersion(Frozen):
    """One schema of the table's history: an Arrow schema (base64 IPC) whose every field
    carries its id (``PARQUET:field_id``, see :mod:`lethe.catalog.schemas`)."""

    schema_id: int = Field(ge=0)
    schema_b64: str


class LedgerRef(Frozen):
    """One adoption ledger object (:mod:`lethe.erasure.ownership`): every object one ``adopt`` commit
    took (data files, and a source's history and metadata), by path and ETag."""

    path: str  # table-relative: manifest/adopted/vNNNNNNNN-<uuid>.json.gz
    objects: int = Field(ge=0)


class LineageRef(Frozen):
    """The table's lineage object (:mod:`lethe.catalog.lineage`, docs/format.md §6b): where
    the rows of every file a splice replaced went, so that versions from before the splice
    read through it. ``newest``: the newest splice commit it records (a version at or after
    it needs none of it); ``entries``: how many files it maps."""

    path: str  # table-relative: manifest/segments/lineage-<uuid>.json.gz
    newest: int = Field(ge=0)
    entries: int = Field(ge=0)


class Manifest(Frozen):
    """One immutable table snapshot (``manifest/vNNNNNNNN.json``); see the module docstring."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    format: Literal["lethe.manifest"] = FORMAT
    format_version: Literal[1, 2, 3, 4] = FORMAT_VERSION
    layout: Literal["inline", "segmented"] = "segmented"
    table_uuid: str
    version: int = Field(ge=0)
    previous: int | None = None
    commit_id: str = ""
    created_at: datetime
    operation: Operation
    schema_b64: str
    properties: TableProperties
    inline_files: tuple[DataFile, ...] = Field(default=(), alias="files")
    segments: tuple[SegmentSummary, ...] = ()
    dv_overlay: tuple[OverlayDV, ...] = ()
    requests: tuple[RequestRecord, ...] = ()
    erasures: tuple[ErasureRecord, ...] = ()
    indexes: tuple[ColumnIndex, ...] = ()
    # every object the table ever adopted (lethe.erasure.ownership), superseded ones included
    adopted: tuple[LedgerRef, ...] = Field(default=(), exclude_if=lambda v: not v)
    # schema history (lethe.catalog.schemas): absent on tables whose schema never changed, whose
    # one schema is 0 (``schema_b64``, ids assigned in schema order)
    schemas: tuple[SchemaVersion, ...] = Field(default=(), exclude_if=lambda v: not v)
    current_schema_id: int = Field(default=0, ge=0, exclude_if=lambda v: v == 0)
    last_column_id: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # the splices' lineage (issue 39): absent until a splice records one (then format 4)
    lineage: LineageRef | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _infer_layout(cls, data: Any) -> Any:
        """A manifest given ``files`` (and no layout) is format 1, inline."""
        if (
            isinstance(data, dict)
            and "layout" not in data
            and (data.get("files") or data.get("inline_files"))
        ):
            data = {**data, "layout": "inline", "format_version": 1}
        return data

    @model_validator(mode="after")
    def _check_layout(self) -> Manifest:
        inline = self.layout == "inline"
        if inline != (self.format_version == 1):
            raise ValueError(f"layout {self.layout!r} is not format {self.format_version}")
        if inline and self.segments:
            raise ValueError("an inline manifest lists files, not segments")
        if not inline and self.inline_files:
            raise ValueError("a segmented manifest lists segments, not files")
        if inline and self.dv_overlay:
            raise ValueError("an inline manifest has no DV overlay")
        if self.format_version == FORMAT_VERSION and self.evolved:
            raise ValueError(
                f"a manifest with a schema history is format {EVOLVED_FORMAT_VERSION}, "
                f"not {self.format_version}"
            )
        return self

    @property
    def evolved(self) -> bool:
        """Whether the table has a schema history (then it is format 3: an older Lethe,
        which would read files by name, refuses it by its version)."""
        return bool(self.schemas) or self.last_column_id is not None

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> Manifest:
        """pydantic's copy, refusing unknown field names (``files`` is not a field: build
        manifests with :mod:`lethe.catalog.transforms`)."""
        unknown = set(update or ()) - set(type(self).model_fields)
        if unknown:
            raise TypeError(f"Manifest has no field(s) {sorted(unknown)}")
        return super().model_copy(update=update, deep=deep)

    @property
    def key(self) -> str:
        return self.properties.key

    @property
    def segmented(self) -> bool:
        return self.layout == "segmented"

    def arrow_schema(self) -> pa.Schema:
        """The current schema, every field with its id."""
        return _with_ids_of(self.schema_b64)

    def schema_history(self) -> list[tuple[int, pa.Schema]]:
        """Every schema of the table, oldest first, by id (each field with its id)."""
        if not self.schemas:
            return [(0, self.arrow_schema())]
        return [(s.schema_id, _with_ids_of(s.schema_b64)) for s in self.schemas]

    def schema_of(self, f: DataFile) -> pa.Schema:
        """The schema ``f`` was written under."""
        sid = f.schema_id or 0
        for i, s in self.schema_history():
            if i == sid:
                return s
        raise errors.CorruptManifest(f"{f.path} names schema {sid}, which the table lacks")

    @property
    def column_id_high(self) -> int:
        """The highest column id ever assigned (``last_column_id``, or the schema's)."""
        if self.last_column_id is not None:
            return self.last_column_id
        return max(max_id(s) for _, s in self.schema_history())

    @property
    def file_count(self) -> int:
        if not self.segmented:
            return len(self.inline_files)
        return sum(s.files for s in self.segments)

    @property
    def total_rows(self) -> int:
        """Live rows (physical rows minus deleted ones)."""
        if not self.segmented:
            return sum(f.live_rows for f in self.inline_files)
        return sum(s.live_rows for s in self.segments)

    def index(self, column: str) -> ColumnIndex | None:
        """The declared index on ``column``, or None."""
        return next((ix for ix in self.indexes if ix.column == column), None)

    def find_request(self, id_hash: str) -> RequestRecord | None:
        return next((r for r in self.requests if r.id_hash == id_hash), None)


class Head(Frozen):
    """The mutable ``_latest_manifest`` object: which manifest is current."""

    format: Literal["lethe.head"] = "lethe.head"
    format_version: Literal[1] = 1
    version: int = Field(ge=0)
    manifest: str
    table_uuid: str


# --- codec ---------------------------------------------------------------------------------
def schema_to_b64(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


@functools.lru_cache(maxsize=64)
def _with_ids_of(b64: str) -> pa.Schema:
    return with_ids(schema_from_b64(b64))


def schema_from_b64(s: str) -> pa.Schema:
    try:
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(s)))
    except Exception as e:
        raise errors.CorruptManifest(f"manifest schema is not a valid Arrow schema: {e}") from e


def encode_manifest(m: Manifest) -> bytes:
    """The root's JSON (a segmented manifest's segments are separate objects). A table
    without indexes writes no ``indexes`` field, so readers that predate them still read it;
    a table with a schema history is written as format 3 (:data:`EVOLVED_FORMAT_VERSION`),
    one without as format 2, so unevolved tables stay readable by a Lethe that predates it;
    one with a lineage (:class:`LineageRef`) or erasure targets with positions as format 4."""
    if m.segmented and m.evolved and m.format_version < EVOLVED_FORMAT_VERSION:
        m = m.model_copy(update={"format_version": EVOLVED_FORMAT_VERSION})
    positions = any(t.positions for e in m.erasures for t in e.targets)
    if m.segmented and (m.lineage is not None or positions):  # an older Lethe refuses it
        m = m.model_copy(update={"format_version": LINEAGE_FORMAT_VERSION})
    drop = {"inline_files"} if m.segmented else {"segments"}
    if not m.indexes:
        drop.add("indexes")
    return m.model_dump_json(by_alias=True, exclude=drop).encode()


M = TypeVar("M", bound=BaseModel)
G = TypeVar("G", Segment, SupersededList)


def _gzip_json(obj: Segment | SupersededList) -> bytes:
    """A segment or superseded-list object: gzip (no timestamp) of its JSON."""
    return gzip.compress(obj.model_dump_json().encode(), compresslevel=6, mtime=0)


encode_segment = encode_superseded = _gzip_json


def _decode_gz(model: type[G], raw: bytes, where: str, table_uuid: str | None) -> G:
    """Parse and validate a gzipped object of ``model``; anything wrong is CorruptManifest."""
    try:
        obj = _load_json(gzip.decompress(raw), where)
    except (OSError, EOFError) as e:
        raise errors.CorruptManifest(f"{where} is not gzip ({len(raw)} bytes): {e}") from e
    if model is Segment and obj.get("format") != SEGMENT_FORMAT:
        raise errors.CorruptManifest(
            f"{where} is not a Lethe segment (format={obj.get('format')!r})"
        )
    if model is Segment and obj.get("format_version") != 1:
        raise errors.CorruptManifest(
            f"{where} has segment format version {obj.get('format_version')!r}; this Lethe "
            "reads version 1. Upgrade Lethe to read it."
        )
    out = _validate(model, obj, where)
    if table_uuid is not None and out.table_uuid != table_uuid:
        raise errors.CorruptManifest(f"{where} belongs to another table")
    return out


def decode_segment(raw: bytes, *, where: str = "segment", table_uuid: str | None = None) -> Segment:
    """Parse and validate a segment object; anything wrong is a :class:`CorruptManifest`."""
    return _decode_gz(Segment, raw, where, table_uuid)


def decode_superseded(
    raw: bytes, *, where: str = "superseded list", table_uuid: str | None = None
) -> SupersededList:
    """Parse and validate a superseded-list object; anything wrong is CorruptManifest."""
    return _decode_gz(SupersededList, raw, where, table_uuid)


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
    if obj.get("format") not in (FORMAT, RELAYOUT_FORMAT):
        raise errors.CorruptManifest(
            f"{where} is not a Lethe manifest (format={obj.get('format')!r})"
        )
    obj["format"] = FORMAT  # the next version of the table is written with the one name
    fv = obj.get("format_version")
    if isinstance(fv, int) and not isinstance(fv, bool) and fv > max(READABLE_VERSIONS):
        raise errors.UnsupportedFormat(
            f"{where}: manifest format version {fv} is newer than this Lethe reads "
            f"(max {max(READABLE_VERSIONS)}): upgrade Lethe"
        )
    if fv not in READABLE_VERSIONS:
        raise errors.CorruptManifest(
            f"{where} has manifest format version {fv!r}; this Lethe reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}. Upgrade Lethe to read it."
        )
    m = _validate(Manifest, obj, where)
    schema_from_b64(m.schema_b64)
    return m


def encode_head(h: Head) -> bytes:
    return h.model_dump_json().encode()


def decode_head(raw: bytes, *, where: str = "_latest_manifest") -> Head:
    return _validate(Head, _load_json(raw, where), where)


def _validate(model: type[M], obj: dict[str, Any], where: str) -> M:
    try:
        return model.model_validate(obj)
    except ValidationError as e:
        raise errors.CorruptManifest(f"{where} fails validation: {_summarize(e)}") from e


def _summarize(e: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors()[:5]]
    more = f" (+{e.error_count() - 5} more)" if e.error_count() > 5 else ""
    return "; ".join(parts) + more


def request_hash(request_id: str) -> str:
    """Stable hash of a request id (request ids are never stored in clear)."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]


def initial_manifest(
    *,
    table_uuid: str,
    schema: pa.Schema,
    properties: TableProperties,
    now: datetime | None = None,
) -> Manifest:
    """Version 0 of a new table (format 2, segmented)."""
    return Manifest(
        format_version=2,
        layout="segmented",
        table_uuid=table_uuid,
        commit_id=uuid.uuid4().hex,
        version=0,
        previous=None,
        created_at=now or datetime.now(UTC),
        operation=Operation(kind="create"),
        schema_b64=schema_to_b64(schema),
        properties=properties,
    )
