"""What an operation on one table works with, instead of the public :class:`~lethe.Table`.

A :class:`TableContext` is the table's catalog (its store, prefix, retry policy and segment
cache) and the snapshot the caller's handle reads. Library operations (deletes, erasure,
compaction, reads) take one, commit through ``ctx.catalog`` and *return* the snapshot they
committed; they never move a caller's handle: the :class:`~lethe.Table` façade adopts what
they return.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from lethe.catalog.commit import Catalog, CommitOutcome
from lethe.catalog.manifest import DataFile
from lethe.catalog.snapshot import Snapshot
from lethe.storage.store import S3Store

__all__ = ["HasContext", "TableContext", "context_of"]


@dataclass(frozen=True, slots=True)
class TableContext:
    """One table's catalog and the snapshot an operation starts from (see the module)."""

    catalog: Catalog
    snapshot: Snapshot

    @property
    def store(self) -> S3Store:
        return self.catalog.store

    @property
    def prefix(self) -> str:
        return self.catalog.prefix

    @property
    def uri(self) -> str:
        return self.catalog.uri

    @property
    def schema(self) -> pa.Schema:
        return self.snapshot.arrow_schema()

    @property
    def key(self) -> str:
        return self.snapshot.key

    def key_of(self, rel: str) -> str:
        """The absolute key of a table-relative path."""
        return self.catalog.key(rel)

    def latest(self) -> TableContext:
        """This context on the latest committed snapshot."""
        return TableContext(self.catalog, self.catalog.current()[0])

    def at(self, outcome: CommitOutcome[Any]) -> TableContext:
        """This table at what ``outcome`` committed (at the base it found when it had nothing
        to do): how an operation moves on after a commit of its own."""
        return TableContext(self.catalog, outcome.manifest or outcome.base)

    def written_at(self, files: Sequence[DataFile]) -> float:
        """When the oldest of ``files`` was uploaded, by its ``LastModified`` (for callers
        that did not note their clock before uploading; the GC grace clock)."""
        if not files:
            return time.time()
        with ThreadPoolExecutor(max_workers=min(16, len(files))) as pool:
            infos = list(pool.map(lambda f: self.store.head(self.key_of(f.path)), files))
        known = [
            i.last_modified.replace(microsecond=0).timestamp() for i in infos if i.last_modified
        ]
        return min(known, default=time.time())


class HasContext(Protocol):
    """Anything that names its table's context (the :class:`~lethe.Table` façade does): a
    public entry point below the façade takes one without importing it."""

    @property
    def context(self) -> TableContext: ...


def context_of(target: TableContext | HasContext) -> TableContext:
    """``target`` itself, or the context it names."""
    return target if isinstance(target, TableContext) else target.context
