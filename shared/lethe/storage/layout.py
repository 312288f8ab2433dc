"""Where a table's objects live, relative to the table prefix (DESIGN §1).

The one place that spells the layout; the library, GC and the CDK app (``infra``) import it.

>>> manifest_key(124)
'manifest/v00000124.json'
>>> segment_key(124, "ab12").startswith("manifest/segments/v00000124-ab12-")
True
>>> erasure_key(124, "5f0c" * 8).startswith("manifest/erasures/v00000124-5f0c5f0c5f0c5f0c-")
True
>>> from datetime import datetime, UTC
>>> data_key(datetime(2026, 11, 24, 3, tzinfo=UTC)).startswith("data/2026/11/24/03/")
True
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Final

__all__ = [
    "DATA_PREFIX",
    "ERASURE_PREFIX",
    "HEAD_KEY",
    "INDEX_PREFIX",
    "MANIFEST_PREFIX",
    "METADATA_PREFIX",
    "OWNER_MARKER_PREFIX",
    "SEGMENT_PREFIX",
    "STAGING_PREFIX",
    "TOMBSTONE_PREFIX",
    "data_key",
    "erasure_key",
    "is_external",
    "is_manifest_key",
    "manifest_key",
    "object_key",
    "segment_key",
    "tombstone_key",
]

HEAD_KEY: Final = "_latest_manifest"  # the mutable head, changed only by conditional PUT
MANIFEST_PREFIX: Final = "manifest/"  # immutable snapshots vNNNNNNNN.json
SEGMENT_PREFIX: Final = "manifest/segments/"  # immutable segments of format-2 manifests
ERASURE_PREFIX: Final = "manifest/erasures/"  # immutable superseded lists of erasure records
DATA_PREFIX: Final = "data/"  # write-once Parquet data files
TOMBSTONE_PREFIX: Final = "tombstone/"  # write-once Puffin deletion-vector containers
INDEX_PREFIX: Final = "index/"  # write-once secondary-index pieces (lethe.index.core)
STAGING_PREFIX: Final = "_staging/"  # uploads not yet committed (e.g. ingest rejects)
METADATA_PREFIX: Final = "metadata/"  # the Iceberg view (lethe.iceberg): Iceberg metadata
#: per BUCKET, not per table: one ownership marker per adopted object (lethe.erasure.ownership)
OWNER_MARKER_PREFIX: Final = "_lethe/owners/"


def manifest_key(version: int) -> str:
    """Table-relative key of manifest ``version``."""
    return f"{MANIFEST_PREFIX}v{version:08d}.json"


def segment_key(version: int, segment_id: str) -> str:
    """A new object of segment ``segment_id``, written by the commit of ``version``:
    ``manifest/segments/vNNNNNNNN-<id>-<uuid>.json.gz``."""
    return f"{SEGMENT_PREFIX}v{version:08d}-{segment_id}-{uuid.uuid4().hex[:12]}.json.gz"


def erasure_key(version: int, id_hash: str) -> str:
    """A new superseded-list object of erasure ``id_hash`` (``several``: of several
    erasures), written by the commit of ``version``:
    ``manifest/erasures/vNNNNNNNN-<id hash[:16]>-<uuid>.json.gz``."""
    return f"{ERASURE_PREFIX}v{version:08d}-{id_hash[:16]}-{uuid.uuid4().hex[:12]}.json.gz"


def is_manifest_key(rel: str) -> bool:
    """Whether a table-relative key is a manifest root ``manifest/vN.json`` (not a segment).

    >>> is_manifest_key("manifest/v00000003.json"), is_manifest_key("manifest/segments/x.json.gz")
    (True, False)
    """
    return rel.startswith(MANIFEST_PREFIX + "v") and rel.endswith(".json")


def _hour_dir(prefix: str, now: datetime | None) -> str:
    return f"{prefix}{(now or datetime.now(UTC)):%Y/%m/%d/%H}/{uuid.uuid4().hex}"


def data_key(now: datetime | None = None) -> str:
    """A new data file: ``data/YYYY/MM/DD/HH/<uuid>.parquet``."""
    return _hour_dir(DATA_PREFIX, now) + ".parquet"


def tombstone_key(now: datetime | None = None) -> str:
    """A new DV container: ``tombstone/YYYY/MM/DD/HH/<uuid>.dv``."""
    return _hour_dir(TOMBSTONE_PREFIX, now) + ".dv"


def is_external(path: str) -> bool:
    """Whether a data file path is an absolute ``s3://`` URI (an adopted file in place).

    >>> is_external("s3://lake/raw/a.parquet"), is_external("data/2026/a.parquet")
    (True, False)
    """
    return path.startswith("s3://")


def object_key(prefix: str, path: str) -> str:
    """The store key of a table-relative ``path``; an absolute ``s3://`` path as it is
    (:meth:`lethe.storage.store.S3Store` reads those in their own bucket).

    >>> object_key("t/events", "data/a.parquet"), object_key("t/events", "s3://lake/raw/a.parquet")
    ('t/events/data/a.parquet', 's3://lake/raw/a.parquet')
    """
    if is_external(path):
        return path
    return f"{prefix}/{path}" if prefix else path
