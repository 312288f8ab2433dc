"""What a table's storage says about its past: the retained manifest chain, GC's reports and
erasure markers, and the objects present now. Read once (:func:`gather`), then used by the
pure builders of erasure receipts (:mod:`lethe.audit.receipts`) and of the table report.

Nothing here holds a row value: manifests are read for their versions, times, operations,
request log and erasure records; GC documents hold paths, sizes, times and id hashes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.snapshot import Snapshot
from lethe.gc.areas import MANIFESTS, MARKERS, RUN_ID, VALUE_PREFIXES, WORKSPACE
from lethe.gc.marking import list_objects, list_versions, relative
from lethe.gc.models import ErasureMarker, GcReport
from lethe.gc.present import holdings
from lethe.gc.workspace import decode
from lethe.storage.layout import METADATA_PREFIX, is_external

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
    markers by id hash, and the paths of the objects present now: table-relative ones under
    the value areas, and the absolute ones (adopted files outside the prefix) that the head
    or an erasure names. ``remnants``: paths without a current object that still keep
    versions or delete markers (a versioned bucket), with how many; ``versioned``: whether
    the table's bucket keeps versions (then the listings were of every version)."""

    uri: str
    chain: tuple[Snapshot, ...]
    reports: tuple[GcReport, ...]
    markers: Mapping[str, ErasureMarker]
    present: frozenset[str]
    remnants: Mapping[str, int] = field(default_factory=dict)
    versioned: bool = False

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
        return next((m for m in self.chain if m.version == version), None)


def _chain(catalog: Catalog) -> tuple[Snapshot, ...]:
    m, _ = catalog.current()
    out = [m]
    while m.previous is not None:
        try:
            m = catalog.read_manifest(m.previous, fresh=True)  # GC may have mapped it
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


def _external(chain: Sequence[Snapshot], markers: Mapping[str, ErasureMarker]) -> set[str]:
    """Absolute paths (adopted files outside the table prefix) the head references or an
    erasure superseded: what the table's own listing cannot see."""
    head = chain[-1]
    out = {f.path for f in head.files if is_external(f.path)}
    records = [head.resolved(e) for e in head.erasures]
    records += [m.record for m in markers.values() if m.record is not None]
    out.update(p for r in records for p in r.superseded if is_external(p))
    return out


def _listed(catalog: Catalog, versioned: bool) -> tuple[set[str], dict[str, int]]:
    """The value areas' current objects; in a versioned bucket also the keys without one
    that keep versions or delete markers (with how many)."""
    prefixes = (*VALUE_PREFIXES, MANIFESTS, METADATA_PREFIX)
    if not versioned:
        return {o.path for o in list_objects(catalog, prefixes)}, {}
    present: set[str] = set()
    count: dict[str, int] = {}
    for v in list_versions(catalog, prefixes):
        rel = relative(catalog, v.key)
        count[rel] = count.get(rel, 0) + 1
        if v.is_latest and not v.is_delete_marker:
            present.add(rel)
    return present, {p: n for p, n in count.items() if p not in present}


def gather(catalog: Catalog) -> Evidence:
    """Read the manifest chain, GC's reports and markers, and list the table's objects
    (every version, in a versioned bucket) and the adopted ones outside its prefix."""
    chain = _chain(catalog)
    gc_keys = sorted(relative(catalog, o.key) for o in catalog.store.list(catalog.key(WORKSPACE)))
    reports, markers = _gc_documents(catalog, gc_keys)
    versioned = catalog.store.versioning() in ("Enabled", "Suspended")
    present, remnants = _listed(catalog, versioned)
    for p, held in holdings(catalog, _external(chain, markers), versioned=versioned).items():
        if held.present:
            present.add(p)
        elif held.versions:
            remnants[p] = held.versions
    log.debug("%s: %s manifests, %s GC reports", catalog.uri, len(chain), len(reports))
    return Evidence(
        uri=catalog.uri,
        chain=chain,
        reports=reports,
        markers=markers,
        present=frozenset(present),
        remnants=remnants,
        versioned=versioned,
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
