"""Where GC looks in a table, and what a table-relative path is to it (pure).

GC sweeps ``data/``, ``tombstone/``, ``_staging/``, the manifest segments
(``manifest/segments/``), the index pieces (``index/``) and the erasure records' superseded
lists (``manifest/erasures/``; both category ``segment``) and the
Iceberg view's objects (``metadata/``), expires manifests (``manifest/vN.json``) and keeps
its own run workspaces under ``_gc/`` (see :mod:`lethe.gc.models` for their layout).

>>> category("data/2026/11/22/16/ab.parquet"), category("_latest_manifest")
('data', None)
>>> category("manifest/segments/v00000003-ab-cd.json.gz"), category("manifest/v00000003.json")
('segment', 'manifest')
>>> category("manifest/erasures/v00000003-ab-cd.json.gz")
'segment'
>>> segment_version("manifest/erasures/v00000007-0123456789abcdef-0123456789ab.json.gz")
7
>>> manifest_version("manifest/v00000124.json")
124
>>> segment_version("manifest/segments/v00000124-0123456789abcdef-0123456789ab.json.gz")
124
>>> bool(RUN_ID.match(new_run_id()))
True
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Mapping
from datetime import UTC, datetime

from lethe.gc.models import Category
from lethe.iceberg.mapping import stem_of_manifest
from lethe.storage.layout import ERASURE_PREFIX, INDEX_PREFIX, METADATA_PREFIX, SEGMENT_PREFIX

__all__ = [
    "KEPT_WORKSPACE_FILES",
    "MANIFESTS",
    "MARKERS",
    "RUN_ID",
    "SWEPT",
    "VALUE_PREFIXES",
    "WORKSPACE",
    "category",
    "holds_values",
    "manifest_version",
    "new_run_id",
    "released",
    "released_segment",
    "released_view_manifest",
    "segment_version",
]

WORKSPACE = "_gc/"
MARKERS = "_gc/erasures/"
MANIFESTS = "manifest/"
SWEPT: Mapping[str, Category] = {
    "data/": "data",
    "tombstone/": "tombstone",
    "_staging/": "staging",
    SEGMENT_PREFIX: "segment",
    INDEX_PREFIX: "segment",  # index pieces are swept (and reported) like segments
    ERASURE_PREFIX: "segment",  # so are erasure records' superseded lists
    METADATA_PREFIX: "iceberg",
}
#: Prefixes whose objects may hold row values (what an erasure must see gone): data files,
#: staged uploads, and segments (their entries' statistics may name a value).
VALUE_PREFIXES = ("data/", "_staging/", SEGMENT_PREFIX, INDEX_PREFIX)
KEPT_WORKSPACE_FILES = frozenset({"report.json", "failure.json"})
_MANIFEST_RE = re.compile(r"^manifest/v(\d+)\.json$")
_SEGMENT_RE = re.compile(r"^manifest/(?:segments|erasures)/v(\d+)-")
#: A run id, as :func:`new_run_id` makes them.
RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")


def new_run_id(now: datetime | None = None) -> str:
    """A sortable, unique run id: ``YYYYMMDDTHHMMSSZ-<8 hex>``."""
    now = now or datetime.now(UTC)
    return f"{now.astimezone(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"


def category(path: str) -> Category | None:
    """The GC category of a table-relative path (None: GC never touches it); an adopted
    file's absolute ``s3://`` path is data."""
    if path.startswith("s3://"):
        return "data"
    for prefix, cat in SWEPT.items():
        if path.startswith(prefix):
            return cat
    if path.startswith(WORKSPACE):
        return "workspace"
    if path.startswith(MANIFESTS):
        return "manifest"
    return None


def manifest_version(path: str) -> int | None:
    """The version of a table-relative manifest path (None: not a manifest)."""
    m = _MANIFEST_RE.match(path)
    return int(m.group(1)) if m else None


def segment_version(path: str) -> int | None:
    """The version whose commit wrote a segment object or a superseded list (None:
    neither)."""
    m = _SEGMENT_RE.match(path)
    return int(m.group(1)) if m else None


def released_segment(path: str, marked_through: int) -> bool:
    """Whether an unmarked segment object can go regardless of its age: it was written for a
    version ``<= marked_through``, which exists, so no writer can still reference it (the
    reasoning is in :mod:`lethe.gc.select`)."""
    v = segment_version(path)
    return v is not None and v <= marked_through


def released_view_manifest(path: str, referenced: Collection[str], marked_through: int) -> bool:
    """Whether an unmarked Iceberg-view manifest can go regardless of its age: it was made
    from a segment object that no retained manifest references and that is released
    (:func:`released_segment`), so no publisher of a retained version can list it."""
    stem = stem_of_manifest(path)
    if stem is None:
        return False
    segment = f"{SEGMENT_PREFIX}{stem[1]}.json.gz"
    return segment not in referenced and released_segment(segment, marked_through)


def released(path: str, cat: Category | None, referenced: Collection[str], through: int) -> bool:
    """Whether an unmarked object can go regardless of its age: a released segment
    (:func:`released_segment`) or an Iceberg-view manifest made from one
    (:func:`released_view_manifest`)."""
    if cat == "segment":
        return released_segment(path, through)
    return cat == "iceberg" and released_view_manifest(path, referenced, through)


def holds_values(path: str) -> bool:
    """Whether an object may hold row values (statistics included): data files, staged
    uploads, segments, index pieces, the Iceberg view's data manifests (key bounds), and any
    object outside the table prefix GC handles (an adopted original, or a source's history
    and metadata: absolute ``s3://`` paths)."""
    if path.startswith(VALUE_PREFIXES) or path.startswith("s3://"):
        return True
    stem = stem_of_manifest(path) if path.startswith(METADATA_PREFIX) else None
    return stem is not None and stem[0] == "data"
