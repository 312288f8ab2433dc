"""Reading a source's objects through :mod:`lethe.storage.store`, in whatever bucket they live.

An Iceberg or Delta table, or a Glue table's partitions, may name objects in several buckets;
:class:`SourceObjects` keeps one counted :class:`~lethe.storage.store.S3Store` per bucket, all sharing
the caller's client and counters, so that every byte a source reader reads is counted and its
errors are translated in one place.

>>> s3_uri("s3a://lake/raw/x.parquet")
's3://lake/raw/x.parquet'
>>> split_uri("s3://lake/raw/x.parquet")
('lake', 'raw/x.parquet')
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from lethe import errors
from lethe.storage.store import GetResult, ObjectInfo, S3Store

__all__ = ["SourceObjects", "s3_uri", "split_uri"]

_SCHEMES = ("s3://", "s3a://", "s3n://")
_WORKERS = 16
_A = TypeVar("_A")
_B = TypeVar("_B")


def s3_uri(uri: str, *, what: str = "object") -> str:
    """``uri`` as ``s3://bucket/key`` (Hadoop's ``s3a://``/``s3n://`` name the same object).

    Raises:
        UnsupportedSource: the URI is not on S3 (a local path, ``gs://``, ``abfss://``...).
    """
    for scheme in _SCHEMES:
        if uri.startswith(scheme):
            rest = uri[len(scheme) :]
            if rest.split("/", 1)[0]:
                return "s3://" + rest
    raise errors.UnsupportedSource(f"{what} {uri!r} is not an s3:// URI; only S3 can be adopted")


def split_uri(uri: str) -> tuple[str, str]:
    """``(bucket, key)`` of an ``s3://`` URI."""
    rest = s3_uri(uri).removeprefix("s3://")
    bucket, _, key = rest.partition("/")
    return bucket, key


class SourceObjects:
    """Counted reads of objects in any bucket, through stores sharing ``store``'s client and
    counters."""

    def __init__(self, store: S3Store) -> None:
        self.store = store
        self._stores: dict[str, S3Store] = {store.bucket: store}
        self._lock = threading.Lock()

    def at(self, bucket: str) -> S3Store:
        """The store of ``bucket`` (same client, same counters)."""
        with self._lock:
            if bucket not in self._stores:
                self._stores[bucket] = S3Store(
                    bucket, client=self.store.client, stats=self.store.stats
                )
            return self._stores[bucket]

    def map(self, fn: Callable[[_A], _B], items: Sequence[_A]) -> list[_B]:
        """``[fn(x) for x in items]``, up to 16 at a time (each ``fn`` does its own requests);
        the first error is raised."""
        if len(items) <= 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(_WORKERS, len(items))) as pool:
            return list(pool.map(fn, items))

    def get(self, uri: str, *, start: int | None = None, end: int | None = None) -> GetResult:
        """GET the object at ``uri`` (or its bytes ``[start, end)``)."""
        bucket, key = split_uri(uri)
        return self.at(bucket).get(key, start=start, end=end)

    def read(self, uri: str) -> bytes:
        return self.get(uri).body

    def head(self, uri: str) -> ObjectInfo:
        bucket, key = split_uri(uri)
        return self.at(bucket).head(key)

    def exists(self, uri: str) -> bool:
        bucket, key = split_uri(uri)
        return self.at(bucket).exists(key)

    def list(self, prefix_uri: str) -> list[ObjectInfo]:
        """Every object under ``prefix_uri`` (keys are bucket-relative)."""
        bucket, prefix = split_uri(prefix_uri)
        return list(self.at(bucket).list(prefix))
