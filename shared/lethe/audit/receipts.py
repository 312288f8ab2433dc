"""Erasure receipts: what became of one delete or erase request, told from storage alone.

A receipt is reconstructed, never stored: from the request log and erasure records of the
retained manifests, the manifest chain (when the rows were hidden, which commit spliced
which file), GC's completion markers (``_gc/erasures/<id hash>.json``) and run reports
(``_gc/<run>/report.json``: what each run deleted, and when). A receipt names the request
by its id *hash* only, and holds no row value: paths, versions, times and counts.

The stages, in order: **received** (the request log holds it), **hidden** (a DV hides its
rows from version ``hidden_version`` on), **removed** (an erasure: every file that held the
rows was spliced; ``splices`` lists each), **complete** (GC removed every object and old
manifest that held the rows; the run and time are those of the marker). Once complete, GC's
expire step drops the record from the root; the marker keeps it (superseded paths inline) and
the receipt reads it from there when no retained manifest holds it any more.

Example:
    >>> t = lethe.Table.open("s3://bucket/people")                 # doctest: +SKIP
    >>> print(t.erasure_status("ticket-4711").describe())           # doctest: +SKIP
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from lethe.audit.evidence import Deletion, Evidence, gather
from lethe.catalog.commit import Catalog
from lethe.catalog.manifest import ErasureRecord, RequestRecord, request_hash
from lethe.catalog.snapshot import Snapshot
from lethe.gc.areas import manifest_version
from lethe.gc.marking import list_versions, relative
from lethe.gc.present import key_versions, split
from lethe.storage.layout import is_external

__all__ = [
    "AuditResult",
    "ErasureReceipt",
    "EvidenceObject",
    "SpliceEvent",
    "audit",
    "known_requests",
    "receipt",
    "request_receipt",
    "retention_receipts",
]

State = Literal["unknown", "received", "hidden", "erasing", "removed", "complete"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpliceEvent(_Frozen):
    """One file that held the rows, replaced by the splice commit ``version`` (``how``:
    ``spliced``), or dropped whole by the commit that opened the erasure (``dropped``: a
    retention sweep's file whose every row expired; no file replaced it)."""

    version: int
    at: datetime
    file: str
    how: Literal["spliced", "dropped"] = "spliced"


class EvidenceObject(_Frozen):
    """An object that held the rows (or statistics naming them) and whether it is gone:
    ``present`` (a current object), ``versions`` (versions and delete markers a versioned
    bucket still keeps of it once deleted: its bytes are still there); ``gone`` only when a
    listing of every version shows nothing left. Paths are table-relative, or absolute for
    an adopted file outside the table prefix."""

    path: str
    kind: Literal["data", "segment", "manifest", "other"]
    present: bool
    versions: int = 0
    deleted_at: datetime | None = None
    deleted_by_run: str | None = None

    @property
    def gone(self) -> bool:
        return not self.present and self.versions == 0

    def state(self) -> str:
        """``PRESENT``, ``deleted … (N old version(s) remain)`` or ``deleted``/``gone``."""
        if self.present:
            return "PRESENT"
        by = f"deleted {_t(self.deleted_at)} by GC {self.deleted_by_run}" if self.deleted_at else ""
        if self.versions:
            return f"{by or 'deleted'}, but {self.versions} old version(s) REMAIN"
        return by or "gone"


class AuditResult(_Frozen):
    """A look inside the table's current objects for caller-supplied key values (counts and
    paths only; the values are never kept)."""

    values: int
    objects_scanned: int
    bytes_scanned: int
    found_in: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.found_in


class ErasureReceipt(_Frozen):
    """What became of one request (see the module docstring); ``id_hash`` names it."""

    table: str
    id_hash: str
    state: State
    kind: str | None = None
    erasure: bool = False
    received_version: int | None = None
    received_at: datetime | None = None
    rows: int | None = None
    hidden_version: int | None = None
    hidden_at: datetime | None = None
    splices: tuple[SpliceEvent, ...] = ()
    pending_files: tuple[str, ...] = ()
    removed_version: int | None = None
    removed_at: datetime | None = None
    completed_at: datetime | None = None
    completed_run: str | None = None
    blocking: tuple[str, ...] = ()
    evidence: tuple[EvidenceObject, ...] = ()
    audit: AuditResult | None = None
    # retained versions from before the splice that read through it (issue 39)
    mapped_versions: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def age_days(self, now: datetime) -> float | None:
        """Days since the request was received (or hidden)."""
        since = self.received_at or self.hidden_at
        return None if since is None else (now - since).total_seconds() / 86400

    def describe(self) -> str:
        """Human-readable text for the command line."""
        lines = [f"request {self.id_hash} on {self.table}: {self.state}"]
        if self.received_at is not None:
            what = f"{self.kind or 'request'} of {self.rows} row(s)" if self.rows else "request"
            lines.append(f"  received   {_t(self.received_at)}  v{self.received_version}  {what}")
        if self.hidden_version is not None:
            lines.append(f"  hidden     {_t(self.hidden_at)}  v{self.hidden_version}  (DV)")
        if not self.erasure and self.hidden_version is not None:
            lines.append("  physically removed: not requested (a logical delete)")
        for s in self.splices:
            lines.append(f"  {s.how:<10} {_t(s.at)}  v{s.version}  {s.file}")
        if self.pending_files:
            lines.append(f"  still to splice: {', '.join(self.pending_files)}")
        if self.removed_version is not None:
            lines.append(f"  removed    {_t(self.removed_at)}  v{self.removed_version}")
        if self.completed_at is not None:
            lines.append(f"  complete   {_t(self.completed_at)}  GC run {self.completed_run}")
        if self.mapped_versions:
            vs = ", ".join(f"v{v}" for v in self.mapped_versions)
            lines.append(f"  history    {vs} kept, read without the rows")
        for b in self.blocking:
            lines.append(f"  not complete yet: {b}")
        for e in self.evidence:
            lines.append(f"  evidence   {e.kind:<8} {e.path}: {e.state()}")
        if self.audit is not None:
            a = self.audit
            verdict = "none found" if a.clean else f"FOUND in {', '.join(a.found_in)}"
            lines.append(
                f"  audit      {a.values} value(s) in {a.objects_scanned} objects "
                f"({a.bytes_scanned:,} bytes): {verdict}"
            )
        return "\n".join(lines)


def _t(at: datetime | None) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds") if at else "?"


def _kind(path: str) -> Literal["data", "segment", "manifest", "other"]:
    if path.startswith("data/") or is_external(path):
        return "data"  # an absolute path: an adopted file outside the table prefix
    if path.startswith("manifest/segments/"):
        return "segment"
    return "manifest" if manifest_version(path) is not None else "other"


def _find(
    ev: Evidence, id_hash: str
) -> tuple[RequestRecord | None, list[tuple[Snapshot, ErasureRecord]]]:
    """The request's log entry (newest manifest holding it) and its erasure record per
    manifest, oldest first."""
    request: RequestRecord | None = None
    records: list[tuple[Snapshot, ErasureRecord]] = []
    for m in ev.chain:
        request = m.find_request(id_hash) or request
        rec = next((e for e in m.erasures if e.id_hash == id_hash), None)
        if rec is not None:
            records.append((m, m.resolved(rec)))
    return request, records


def _splices(records: Sequence[tuple[Snapshot, ErasureRecord]]) -> list[SpliceEvent]:
    """Each data file that joined ``superseded``, at the commit where it did."""
    out: list[SpliceEvent] = []
    seen: set[str] = set()
    for m, rec in records:
        for p in rec.superseded:
            if p not in seen:
                seen.add(p)
                if _kind(p) == "data":
                    how: Literal["spliced", "dropped"] = (
                        "dropped" if m.version == rec.deleted_version else "spliced"
                    )
                    out.append(SpliceEvent(version=m.version, at=m.created_at, file=p, how=how))
    return out


def _evidence(ev: Evidence, rec: ErasureRecord) -> list[EvidenceObject]:
    """The superseded files and segments, and the manifests from before the splice (but
    those GC wrote anew with their files mapped, which name none of the rows: issue 39)."""
    gone = ev.deletions()
    paths = list(rec.superseded)
    if rec.spliced_version is not None:
        cut = rec.spliced_version
        mapped = {m.version for m in ev.chain if m.operation.params.get("mapped") is True}
        older = {
            p
            for p in (*ev.present, *ev.remnants, *gone)
            if (v := manifest_version(p) or cut) < cut and not (v in mapped and p in ev.present)
        }
        paths += sorted(older, key=lambda p: manifest_version(p) or 0)
    out = []
    for p in dict.fromkeys(paths):
        d: Deletion | None = gone.get(p)
        out.append(
            EvidenceObject(
                path=p,
                kind=_kind(p),
                present=p in ev.present,
                versions=ev.remnants.get(p, 0),
                deleted_at=d.at if d else None,
                deleted_by_run=d.run_id if d else None,
            )
        )
    return out


def _blocking(ev: Evidence, id_hash: str) -> tuple[str, ...]:
    """What the latest real GC run said still blocks completion."""
    for r in reversed(ev.reports):
        if r.dry_run:
            continue
        for s in r.erasures:
            if s.id_hash == id_hash and not s.complete:
                return (*s.blocking, f"(as of GC run {r.run_id})")
    return ()


def _hidden(
    ev: Evidence, request: RequestRecord | None, rec: ErasureRecord | None
) -> tuple[int | None, datetime | None]:
    version = rec.deleted_version if rec is not None else (request.version if request else None)
    if version is None:
        return None, None
    m = ev.manifest(version)
    return version, (m.created_at if m is not None else request.committed_at if request else None)


def receipt(
    ev: Evidence, id_hash: str, *, audit_result: AuditResult | None = None
) -> ErasureReceipt:
    """The receipt of request ``id_hash`` from what :func:`lethe.audit.evidence.gather` read."""
    request, records = _find(ev, id_hash)
    rec = records[-1][1] if records else None
    marker = ev.markers.get(id_hash)
    if rec is None and marker is not None and marker.record is not None:
        rec = marker.record  # complete, archived: the record left the root
    hidden_version, hidden_at = _hidden(ev, request, rec)
    base: dict[str, Any] = {
        "table": ev.uri,
        "id_hash": id_hash,
        "kind": request.kind if request else ("erase" if rec else None),
        "erasure": rec is not None,
        "received_version": request.version if request else hidden_version,
        "received_at": request.committed_at if request else hidden_at,
        "rows": request.rows if request else None,
        "hidden_version": hidden_version,
        "hidden_at": hidden_at,
        "audit": audit_result,
    }
    if rec is None:
        state: State = "unknown" if request is None else "hidden"
        if request is not None and request.rows == 0:
            state = "received"
        return ErasureReceipt(state=state, **base)
    removed = ev.manifest(rec.spliced_version) if rec.spliced_version is not None else None
    evidence = tuple(_evidence(ev, rec))
    state = "erasing" if rec.state == "pending" else "complete" if marker else "removed"
    blocking = () if marker else _blocking(ev, id_hash)
    left = [e for e in evidence if not e.gone]
    if state == "complete" and marker is not None and left:
        # a receipt states what the bucket shows, whatever a marker says
        state = "removed"
        blocking = (
            f"GC run {marker.run_id} marked it complete, but a listing shows {len(left)} "
            "object(s) that held the rows still in the bucket (see the evidence): each must be "
            "deleted, every version",
        )
    return ErasureReceipt(
        state=state,
        splices=tuple(_splices(records)),
        pending_files=tuple(t.path for t in rec.targets),
        removed_version=rec.spliced_version,
        removed_at=removed.created_at if removed else None,
        completed_at=marker.completed_at if marker and state == "complete" else None,
        completed_run=marker.run_id if marker and state == "complete" else None,
        mapped_versions=marker.mapped_versions if marker and state == "complete" else (),
        blocking=blocking,
        evidence=evidence,
        **base,
    )


def known_requests(ev: Evidence) -> list[str]:
    """Id hashes of every erasure record of the head, then of logged requests, oldest first,
    then of completed erasures whose record left the root (archived in their marker)."""
    head = ev.head
    archived = [h for h, m in sorted(ev.markers.items()) if m.record is not None]
    return list(
        dict.fromkeys(
            [e.id_hash for e in head.erasures] + [r.id_hash for r in head.requests] + archived
        )
    )


# --- the audit -------------------------------------------------------------------------------
def _scalars(doc: Any) -> Iterator[Any]:
    """Every scalar of a JSON document."""
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _scalars(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _scalars(v)
    else:
        yield doc


def _holds(path: str, body: bytes, key: str, wanted: set[Any]) -> bool:
    if body[:4] == b"PAR1" and body[-4:] == b"PAR1":
        f = pq.ParquetFile(io.BytesIO(body))
        if key not in f.schema_arrow.names:
            return False
        col = f.read(columns=[key]).column(key).to_pylist()
        return any(v in wanted for v in col)
    text = gzip.decompress(body) if path.endswith(".gz") else body
    try:
        doc = json.loads(text)
    except ValueError:
        return False
    return any(v in wanted for v in _scalars(doc) if not isinstance(v, bool))


def audit(
    catalog: Catalog,
    ev: Evidence,
    key: str,
    values: Sequence[Any],
    *,
    prefixes: Sequence[str] = ("data/", "manifest/"),
) -> AuditResult:
    """Look for ``values`` in every current object under ``prefixes`` and in the adopted
    files outside the table prefix that the head references or an erasure superseded (in a
    versioned bucket, in every old version of them too): Parquet files by their key column
    (decoded, DVs not applied: rows merely hidden count as found), JSON documents (gzip or
    not) by every scalar. Returns paths and counts, never the values."""
    wanted = set(values)
    found: list[str] = []
    scanned = size = 0
    chosen = [p for p in ev.present if p.startswith(tuple(prefixes)) or is_external(p)]
    for path, version in [
        *((p, None) for p in sorted(chosen)),
        *_old_versions(catalog, ev, prefixes),
    ]:
        body = catalog.store.get(catalog.key(path), version_id=version).body
        scanned, size = scanned + 1, size + len(body)
        if _holds(path, body, key, wanted):
            found.append(path if version is None else f"{path}?versionId={version}")
    return AuditResult(
        values=len(wanted), objects_scanned=scanned, bytes_scanned=size, found_in=tuple(found)
    )


def _old_versions(catalog: Catalog, ev: Evidence, prefixes: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, version id)`` of every noncurrent version under ``prefixes`` and of the
    adopted files the evidence names (none in an unversioned bucket)."""
    if not ev.versioned:
        return []
    out = [
        (relative(catalog, v.key), v.version_id)
        for v in list_versions(catalog, prefixes)
        if not v.is_latest and not v.is_delete_marker
    ]
    external = [p for p in (*ev.present, *ev.remnants) if is_external(p)]
    by_bucket: dict[str, dict[str, str]] = {}
    for p in external:
        b, k = split(catalog, p)
        by_bucket.setdefault(b, {})[k] = p
    for b, keys in by_bucket.items():
        for k, vs in key_versions(catalog.store, b, keys).items():
            out += [
                (keys[k], v.version_id) for v in vs if not v.is_latest and not v.is_delete_marker
            ]
    return sorted(out)


def request_receipt(
    catalog: Catalog, key: str, request_id: str, audit_values: Sequence[Any] | None = None
) -> ErasureReceipt:
    """The receipt of one request as the bucket shows it now (``Table.erasure_status``),
    with ``audit_values`` (values of the ``key`` column) looked for in the current objects."""
    ev = gather(catalog)
    found = audit(catalog, ev, key, list(audit_values)) if audit_values is not None else None
    return receipt(ev, request_hash(request_id), audit_result=found)


def retention_receipts(catalog: Catalog) -> list[ErasureReceipt]:
    """The receipt of every retention sweep the request log still holds, oldest first."""
    ev = gather(catalog)
    return [receipt(ev, r.id_hash) for r in ev.head.requests if r.kind == "retention"]
