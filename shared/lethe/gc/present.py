"""What the bucket holds of given objects, read from listings (never assumed): whether a key
has a current object, and how many versions and delete markers it keeps (a versioned bucket
keeps a deleted object's bytes in noncurrent versions).

Receipts and GC reports say an object is ``gone`` only from this: a listing (every version,
in a versioned bucket) that shows nothing left under its key. Paths are table-relative
(``data/…``) or absolute (``s3://bucket/raw/…``: an adopted original outside the table
prefix, in any bucket the client reaches); absolute keys are listed in their own bucket,
once per directory.

>>> Held(present=False, versions=2).gone, Held(present=True, versions=1).gone, Held(False).gone
(False, False, True)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lethe.catalog.commit import Catalog
from lethe.storage.store import S3Store, parse_s3_uri

__all__ = ["Held", "bucket_store", "holdings", "key_versions", "split"]


@dataclass(frozen=True, slots=True)
class Held:
    """What a listing showed of one key: a current object (``present``), and how many
    versions and delete markers it keeps (``versions``; a current object counts as one)."""

    present: bool
    versions: int = 0

    @property
    def gone(self) -> bool:
        """Nothing of the object is left: no current object, no version, no marker."""
        return not self.present and self.versions == 0


def split(catalog: Catalog, path: str) -> tuple[str, str]:
    """``(bucket, key)`` of a table-relative or absolute path."""
    key = catalog.key(path)
    return parse_s3_uri(key) if key.startswith("s3://") else (catalog.store.bucket, key)


def bucket_store(store: S3Store, bucket: str) -> S3Store:
    """``store`` itself for its bucket, else a store of ``bucket`` on the same client."""
    return (
        store if bucket == store.bucket else S3Store(bucket, client=store.client, stats=store.stats)
    )


def key_versions(
    store: S3Store, bucket: str, keys: Iterable[str], *, versioned: bool = True
) -> dict[str, list[S3Store.ObjectVersion]]:
    """Every version and delete marker of ``keys`` of ``bucket`` (one ListObjectVersions per
    directory; not ``versioned``: one ListObjectsV2, each current object as its one
    version). Keys with none are absent."""
    wanted = set(keys)
    by_dir: dict[str, set[str]] = defaultdict(set)
    for k in wanted:
        by_dir[k.rpartition("/")[0] + "/" if "/" in k else ""].add(k)
    s = bucket_store(store, bucket)
    out: dict[str, list[S3Store.ObjectVersion]] = defaultdict(list)
    for d in sorted(by_dir):
        if not versioned:
            for o in s.list(d):
                if o.key in wanted:
                    out[o.key].append(
                        S3Store.ObjectVersion(o.key, "null", True, False, o.size, o.last_modified)
                    )
            continue
        for v in s.list_object_versions(d):
            if v.key in wanted:
                out[v.key].append(v)
    return dict(out)


def holdings(catalog: Catalog, paths: Iterable[str], *, versioned: bool) -> Mapping[str, Held]:
    """What the bucket holds of each path (table-relative or absolute), from listings: a
    path no listing shows is gone. The table's bucket is listed by version when
    ``versioned``; another bucket (adopted originals elsewhere) always is, since its
    versioning is not the table's."""
    by_bucket: dict[str, dict[str, str]] = defaultdict(dict)
    for p in dict.fromkeys(paths):
        b, k = split(catalog, p)
        by_bucket[b][k] = p
    out: dict[str, Held] = {}
    for b, keys in by_bucket.items():
        every = versioned or b != catalog.store.bucket
        listed = key_versions(catalog.store, b, keys, versioned=every)
        for k, p in keys.items():
            vs = listed.get(k, [])
            current = any(v.is_latest and not v.is_delete_marker for v in vs)
            out[p] = Held(present=current, versions=len(vs))
    return out
