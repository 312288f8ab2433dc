"""What an update needs of its base: typed requirements, checked in one place (:func:`unmet`)
by the catalog's loop before it applies the update (PyIceberg's ``TableRequirement``).

>>> import pyarrow as pa
>>> from lethe.catalog.manifest import TableProperties, initial_manifest
>>> from lethe.catalog.snapshot import Snapshot
>>> base = Snapshot(initial_manifest(table_uuid="t", schema=pa.schema([("id", pa.int64())]),
...                                  properties=TableProperties(key="id")))
>>> unmet(base, [FileHasDV("data/a.parquet", None)])
'data/a.parquet is no longer live'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

from lethe.catalog.manifest import DVRef, LineageRef
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import piece_paths

__all__ = [
    "FileHasDV",
    "FileLive",
    "LineageIs",
    "PiecesPresent",
    "RequestAbsent",
    "Requirement",
    "SchemaIs",
    "unmet",
]


@dataclass(frozen=True, slots=True)
class FileLive:
    """The file at ``path`` is live (whatever its DV)."""

    path: str


@dataclass(frozen=True, slots=True)
class FileHasDV:
    """The file at ``path`` is live with exactly the DV ``dv`` (None: no DV): what a
    preparation read positions from, or unioned a new DV with."""

    path: str
    dv: DVRef | None


@dataclass(frozen=True, slots=True)
class RequestAbsent:
    """No request with this id hash is in the base's log (a redelivered twin did not land
    meanwhile; if it did, preparing again reads its result)."""

    id_hash: str


@dataclass(frozen=True, slots=True)
class PiecesPresent:
    """The index pieces a preparation rewrote are all still referenced (no other commit
    rewrote one of them meanwhile)."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class LineageIs:
    """The base's lineage is ``ref`` (None: none): a preparation extended it (issue 39)."""

    ref: LineageRef | None


@dataclass(frozen=True, slots=True)
class SchemaIs:
    """The base's current schema is ``schema_id`` and its history's newest is ``last_id``:
    what a preparation that wrote files under a schema it is about to commit planned on (a
    concurrent schema commit would give that schema another id)."""

    schema_id: int
    last_id: int

    @staticmethod
    def of(base: Snapshot) -> SchemaIs:
        ids = [sid for sid, _ in base.schema_history()]
        return SchemaIs(base.current_schema_id, max(ids, default=0))


Requirement: TypeAlias = FileLive | FileHasDV | RequestAbsent | PiecesPresent | SchemaIs | LineageIs


def unmet(base: Snapshot, requirements: Iterable[Requirement]) -> str | None:
    """Why ``base`` fails the first requirement it fails, or None when it meets them all.

    File requirements are checked together: one lookup of the segments holding them."""
    reqs = list(requirements)
    paths = [r.path for r in reqs if isinstance(r, FileLive | FileHasDV)]
    live = base.files_at(paths) if paths else {}
    pieces: set[str] | None = None
    for r in reqs:
        if isinstance(r, FileLive | FileHasDV):
            f = live.get(r.path)
            if f is None:
                return f"{r.path} is no longer live"
            if isinstance(r, FileHasDV) and f.dv != r.dv:
                return f"the DV of {r.path} changed"
        elif isinstance(r, RequestAbsent):
            if base.find_request(r.id_hash) is not None:
                return "a request with the same id landed"
        elif isinstance(r, LineageIs):
            if base.manifest.lineage != r.ref:
                return "another splice extended the lineage"
        elif isinstance(r, SchemaIs):
            if SchemaIs.of(base) != r:
                return "the schema changed (another commit evolved it)"
        else:
            pieces = piece_paths(base) if pieces is None else pieces
            if any(p not in pieces for p in r.paths):
                return "an index piece it rewrote was rewritten"
    return None
