"""The entries a manifest lists: data files (row groups, column statistics, their DV),
the segments that group them (format 2), and the declared indexes' runs. Pure models, no
I/O; :mod:`lethe.catalog.manifest` holds the root that lists them and the codec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from lethe.catalog.values import JsonScalar

__all__ = [
    "SEGMENT_FORMAT",
    "ColumnIndex",
    "ColumnStats",
    "DVRef",
    "DataFile",
    "Frozen",
    "IndexOrigin",
    "IndexPiece",
    "IndexRun",
    "OverlayDV",
    "RowGroupInfo",
    "Segment",
    "SegmentSummary",
]

SEGMENT_FORMAT: Final = "lethe.segment"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ColumnStats(Frozen):
    """Min/max (canonical JSON form, see :mod:`lethe.catalog.values`) and null count of a column."""

    min: JsonScalar = None
    max: JsonScalar = None
    null_count: int | None = None


class RowGroupInfo(Frozen):
    """One row group: rows, byte range ``[offset, offset+length)`` and key-column stats."""

    rows: int = Field(ge=0)
    offset: int = Field(ge=4)
    length: int = Field(ge=0)
    key_min: JsonScalar = None
    key_max: JsonScalar = None


class DVRef(Frozen):
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


class IndexOrigin(Frozen):
    """Where a spliced file's index entries are (docs/format.md §3c): the file the splices
    started from (``path``, ``added_version``), and ``removed``, the positions of that file
    the splices removed (a portable Roaring bitmap, base64). Position ``p`` of the origin is
    row ``p - rank(removed, p)`` of the spliced file unless ``p`` is in ``removed``."""

    path: str
    added_version: int = Field(ge=0)
    removed: str = ""


class DataFile(Frozen):
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
    index_origin: IndexOrigin | None = Field(default=None, exclude_if=lambda v: v is None)
    # the sort order its rows are in (lethe.maintenance.clustering.SORT_ORDER_ID: a clustering rewrite)
    sort_order_id: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # the schema it was written under (None: schema 0, what files before schema ids were)
    schema_id: int | None = Field(default=None, exclude_if=lambda v: v is None)
    # adopted in place (lethe.adopt): partition column -> value, columns not in the file
    partition: Mapping[str, JsonScalar] = Field(default_factory=dict, exclude_if=lambda v: not v)
    # adopted in place: whether Lethe owns the external object (may splice it away and
    # delete it); None: a file Lethe wrote
    owned: bool | None = Field(default=None, exclude_if=lambda v: v is None)
    # its columns are named as in an adopted file whose names differ from the table's (Delta
    # column mapping, an Iceberg rename; a splice keeps them): read by field id or alias
    mapped: bool | None = Field(default=None, exclude_if=lambda v: v is None)

    @property
    def file_names(self) -> bool:
        """Whether readers must resolve its columns against its own schema
        (:meth:`lethe.catalog.schemas.Projection.within`): adopted, or spliced from a mapped file."""
        return self.owned is not None or bool(self.mapped)

    @property
    def index_version(self) -> int:
        """The added version the index covers this file by (its origin's, if spliced)."""
        return self.index_origin.added_version if self.index_origin else self.added_version

    @property
    def deleted_rows(self) -> int:
        return self.dv.cardinality if self.dv else 0

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows


class SegmentSummary(Frozen):
    """A segment as the root lists it: where it is and what it holds, to prune without
    opening it. ``id`` is stable across rewrites of the segment (a delete that changes a
    DV writes the segment anew under a new ``path`` with the same ``id``); ``columns``
    holds the min/max/null count of a column over all its files when every file has them
    (the key column included)."""

    id: str
    path: str
    files: int = Field(ge=0)
    rows: int = Field(ge=0)
    deleted_rows: int = Field(ge=0)
    data_bytes: int = Field(ge=0)
    columns: Mapping[str, ColumnStats] = Field(default_factory=dict)
    created_version: int = Field(ge=0)

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows


class OverlayDV(Frozen):
    """A DV newer than the one in its file's segment entry (format 2): a delete changes
    only the root (and its DV container), not the segment; readers apply the overlay."""

    path: str
    segment: str  # id of the segment holding the file
    dv: DVRef


class Segment(Frozen):
    """One immutable segment object: a bounded group of file entries."""

    format: Literal["lethe.segment"] = SEGMENT_FORMAT
    format_version: Literal[1] = 1
    table_uuid: str
    id: str
    files: tuple[DataFile, ...]


class IndexPiece(Frozen):
    """One immutable index object (``index/<column>/<uuid>.parquet``): entries
    ``(value, file, pos)`` of one run sorted by value, within ``[min, max]`` (canonical JSON
    form); ``etag`` pins every read of it."""

    path: str
    size: int = Field(ge=0)
    etag: str
    entries: int = Field(ge=0)
    min: JsonScalar = None
    max: JsonScalar = None


class IndexRun(Frozen):
    """A sorted run of an index: pieces with disjoint, increasing value ranges. It covers
    every file live in this snapshot whose ``added_version`` lies in one of ``covers``
    (inclusive version ranges); other files are not indexed by it."""

    id: str
    covers: tuple[tuple[int, int], ...]
    pieces: tuple[IndexPiece, ...] = ()

    @property
    def entries(self) -> int:
        return sum(p.entries for p in self.pieces)

    def covers_version(self, v: int) -> bool:
        return any(lo <= v <= hi for lo, hi in self.covers)


class ColumnIndex(Frozen):
    """A declared secondary index on one column (see :mod:`lethe.index.core`)."""

    column: str
    created_version: int = Field(ge=0)
    runs: tuple[IndexRun, ...] = ()

    def covers(self, f: DataFile) -> bool:
        """Whether a live file's rows are in this index (else readers scan it)."""
        return any(r.covers_version(f.index_version) for r in self.runs)
