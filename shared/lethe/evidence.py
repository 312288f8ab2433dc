"""What a table's storage says about its past: the retained manifest chain, GC's reports and
erasure markers, and the objects present now. Read once (:func:`gather`), then used by the
pure builders of erasure receipts (:mod:`lethe.receipts`) and of the table report.

Nothing here holds a row value: manifests are read for their versions, times, operations,
request log and erasure records; GC documents hold paths, sizes, times and id hashes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from lethe import errors
from lethe.catalog import Catalog
from lethe.gc.areas import MANIFESTS, MARKERS, RUN_ID, VALUE_PREFIXES, WORKSPACE
from lethe.gc.marking import list_objects, relative
from lethe.gc.models import ErasureMarker, GcReport
from lethe.gc.workspace import decode
from lethe.layout import METADATA_PREFIX
from lethe.snapshot import Snapshot

log = logging.getLogger(__name__)

__all__ = ["Backlog", "Deletion", "Evidence", "erasure_backlog", "gather"]


@dataclass(frozen=True, slots=True)
class Deletion:
    """When (and by which GC run) an object was deleted."""

    at: datetime
    run_id: str


@dataclass(frozen=True, slots=True)
class Evidence:
    """A table's retained manifests (oldest first), its GC reports (oldest first), erasure
    markers by id hash, and the table-relative paths of the objects present now."""

    uri: str
    chain: tuple[Snapshot, ...]
    reports: tuple[GcReport, ...]
    markers: Mapping[str, ErasureMarker]
    present: frozenset[str]

    @property
    def head(self) -> Snapshot:
        return self.chain[-1]

    def deletions(self) -> dict[str, Deletion]:
        """Every path a (real) GC run deleted, with the first run that did."""
        out: dict[str, Deletion] = {}
        for r in self.reports:
            if r.dry_run:
                continue
            for keys in r.keys.values():
                for k in keys:
                    out.setdefault(k, Deletion(r.finished_at, r.run_id))
        return out

    def manifest(self, version: int) -> Snapshot | None:
        for m in self.chain:
            if m.version == version:
                return m
        return None


def _chain(catalog: Catalog) -> tuple[Snapshot, ...]:
    m, _ = catalog.current()
    out = [m]
    while m.previous is not None:
        try:
            m = catalog.read_manifest(m.previous)
        except errors.SnapshotNotFound:
            break
        out.append(m)
    return tuple(reversed(out))


def _gc_documents(
    catalog: Catalog, keys: Sequence[str]
) -> tuple[tuple[GcReport, ...], dict[str, ErasureMarker]]:
    reports: list[GcReport] = []
    markers: dict[str, ErasureMarker] = {}
    for path in keys:
        parts = path[len(WORKSPACE) :].split("/")
        if path.startswith(MARKERS) and path.endswith(".json"):
            raw = catalog.store.get(catalog.key(path)).body
            marker = decode(raw, ErasureMarker, path)
            markers[marker.id_hash] = marker
        elif len(parts) == 2 and RUN_ID.match(parts[0]) and parts[1] == "report.json":
            raw = catalog.store.get(catalog.key(path)).body
            reports.append(decode(raw, GcReport, path))
    reports.sort(key=lambda r: r.finished_at)
    return tuple(reports), markers


def gather(catalog: Catalog) -> Evidence:
    """Read the manifest chain, GC's reports and markers, and list the table's objects."""
    chain = _chain(catalog)
    gc_keys = sorted(relative(catalog, o.key) for o in catalog.store.list(catalog.key(WORKSPACE)))
    reports, markers = _gc_documents(catalog, gc_keys)
    listed = list_objects(catalog, (*VALUE_PREFIXES, MANIFESTS, METADATA_PREFIX))
    log.debug("%s: %s manifests, %s GC reports", catalog.uri, len(chain), len(reports))
    return Evidence(
        uri=catalog.uri,
        chain=chain,
        reports=reports,
        markers=markers,
        present=frozenset(o.path for o in listed),
    )


@dataclass(frozen=True, slots=True)
class Backlog:
    """Erasure requests GC has not completed yet, and the age of the oldest (seconds since
    its rows were hidden; 0 when none is pending)."""

    pending: int
    oldest_age_seconds: float


def erasure_backlog(catalog: Catalog, *, now: datetime | None = None) -> Backlog:
    """A cheap look at the erasure backlog (what the functions emit as metrics): the head's
    erasure records without a completion marker (one LIST of ``_gc/erasures/``); each
    one's age from its request log entry, else from the manifest that hid its rows."""
    now = now or datetime.now(UTC)
    head, _ = catalog.current()
    done = {
        relative(catalog, o.key)[len(MARKERS) :].removesuffix(".json")
        for o in catalog.store.list(catalog.key(MARKERS))
    }
    ages: list[float] = []
    for e in head.erasures:
        if e.id_hash in done:
            continue
        logged = head.find_request(e.id_hash)
        since = logged.committed_at if logged is not None else None
        if since is None:
            try:
                since = catalog.read_manifest(e.deleted_version).created_at
            except errors.SnapshotNotFound:
                since = head.created_at  # unknown: counted from now on, never overstated
        ages.append(max(0.0, (now - since).total_seconds()))
    return Backlog(pending=len(ages), oldest_age_seconds=max(ages, default=0.0))
