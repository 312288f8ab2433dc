"""Deletes in constant time: locate matching row positions, write one DV container, CAS.

A delete prunes files and row groups by manifest statistics, reads only the filter columns'
chunks of candidate row groups (pinned ranged GETs), computes the matching positions minus
those already deleted, unions them with each file's current DV and commits with at most
three PUTs: the Puffin container, the manifest, the head. Several requests (one SQS batch)
commit together. A request id already in the manifest's request log returns the earlier
result and commits nothing. Concurrent deletes on the same file merge on rebase.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from lethe.catalog.changes import SetDVs
from lethe.catalog.commit import Prepared
from lethe.catalog.context import TableContext
from lethe.catalog.manifest import (
    ErasureRecord,
    ErasureTarget,
    Operation,
    RequestRecord,
    request_hash,
)
from lethe.catalog.snapshot import Snapshot
from lethe.dv import store as dvstore
from lethe.dv.remap import targets_of
from lethe.index.core import IndexPlan, index_plans, row_groups_of
from lethe.reading.filters import Dnf, normalize
from lethe.reading.reader import FileHandle, iter_row_groups
from lethe.reading.scan import DVCache, candidate_files, plan_files, reader_of
from lethe.storage.counters import IOCounters
from lethe.storage.layout import DATA_PREFIX, object_key

log = logging.getLogger(__name__)

__all__ = ["BatchDeleteResult", "DeleteRequest", "DeleteResult", "delete_batch", "locate"]


@dataclass(frozen=True, slots=True)
class DeleteRequest:
    """One delete: DNF filters and an optional idempotency id."""

    filters: Any
    request_id: str | None = None
    erase: bool = False  # the rows must also be physically erased (splice follows)


@dataclass(frozen=True, slots=True)
class DeleteResult:
    """Outcome of :meth:`lethe.Table.delete`.

    ``version`` is None when nothing matched (nothing was committed). ``duplicate`` is True
    when the request id had already been committed: the earlier result is returned.
    """

    version: int | None
    rows_deleted: int
    files_touched: int
    duplicate: bool = False
    attempts: int = 0
    io: IOCounters = field(default_factory=IOCounters)
    row_groups: tuple[ErasureTarget, ...] = ()  # where the rows were (no values): splice targets
    error: str | None = None  # set when this request was refused (its id names another request)


@dataclass(frozen=True, slots=True)
class BatchDeleteResult:
    version: int | None
    results: tuple[DeleteResult, ...]
    attempts: int
    seconds: float
    io: IOCounters = field(default_factory=IOCounters)
    #: the snapshot this batch committed (None: nothing), for the caller's handle to adopt
    snapshot: Snapshot | None = field(default=None, repr=False, compare=False)

    @property
    def rows_deleted(self) -> int:
        return sum(r.rows_deleted for r in self.results if not r.duplicate)


_CONFLICT = (
    "request id already names a different request (other filters or mode); "
    "a request id identifies one request: use a new id"
)


def _body_hash(request_id: str | None, dnf: Dnf, erase: bool) -> str | None:
    """What a request asks (its filter's fingerprint and its mode), hashed together with its
    id: the stored hash cannot be matched against guessed keys without the id itself."""
    if request_id is None:
        return None
    mode = "erase" if erase else "delete"
    return request_hash(f"{request_id}\x00{dnf.fingerprint()}\x00{mode}")


def _sort_requests(
    hashes: Sequence[str | None], bodies: Sequence[str | None], base: Snapshot
) -> tuple[dict[int, RequestRecord], dict[int, int], set[int], list[int]]:
    """Split a batch against the request log of ``base`` and within itself.

    Returns the requests committed earlier (index -> record), in-batch twins (index -> index
    of the first request with that id and body), conflicts (an id already naming another
    body, in the log or earlier in the batch), and the indexes to execute now.
    """
    done: dict[int, RequestRecord] = {}
    twins: dict[int, int] = {}
    conflicts: set[int] = set()
    live: list[int] = []
    first: dict[str, int] = {}
    for i, h in enumerate(hashes):
        if h is None:
            live.append(i)
            continue
        rec = base.find_request(h)
        if rec is not None:
            if rec.body_hash is not None and rec.body_hash != bodies[i]:
                conflicts.add(i)
            else:
                done[i] = rec
        elif h in first:
            if bodies[first[h]] != bodies[i]:
                conflicts.add(i)
            else:
                twins[i] = first[h]
        else:
            first[h] = i
            live.append(i)
    return done, twins, conflicts, live


def locate(
    ctx: TableContext,
    base: Snapshot,
    dnfs: Sequence[Dnf],
    *,
    only_paths: set[str] | None = None,
    physical: Sequence[bool] | None = None,
    dvs: DVCache | None = None,
) -> list[dict[str, BitMap64]]:
    """Per request, per file: positions of rows matching that request in ``base``.

    Live rows only, except for requests flagged in ``physical``: those get every row still
    physically in a live file, hidden by a DV or not (what an erasure must remove). One
    combined read serves every request: the union of their candidate row groups and filter
    columns is fetched once.
    """
    phys = list(physical) if physical is not None else [False] * len(dnfs)
    out: list[dict[str, BitMap64]] = [{} for _ in dnfs]
    dvs = dvs if dvs is not None else DVCache(ctx.store, ctx.prefix)
    wanted = _wanted(ctx, base, dnfs, phys, out, dvs, only_paths)
    if only_paths is not None:
        for found in out:
            for p in [p for p in found if p not in only_paths]:
                del found[p]
    if not wanted:
        return out
    dvs.prefetch({h.file.path: h.file for h, _ in wanted.values()}.values())
    cols = list(dict.fromkeys(c for d in dnfs for c in d.columns))
    exprs = [d.expression() for d in dnfs]
    pairs = [(h, rg) for (_, rg), (h, _) in sorted(wanted.items(), key=lambda kv: kv[0])]
    for h, rg, t in iter_row_groups(pairs, cols, read=reader_of(base, cols)):
        first = wanted[(h.file.path, rg)][1]
        keep = dvs.keep_mask(h.file, first, t.num_rows)
        every = t.append_column(
            "__pos", pa.array(np.arange(first, first + t.num_rows, dtype=np.uint64))
        )
        live = every.filter(keep) if keep is not None else every
        for i, e in enumerate(exprs):
            hit = (every if phys[i] else live).filter(e)
            if hit.num_rows:
                bm = out[i].setdefault(h.file.path, BitMap64())
                bm.update(hit.column("__pos").to_numpy())
    return out


def _wanted(
    ctx: TableContext,
    base: Snapshot,
    dnfs: Sequence[Dnf],
    phys: Sequence[bool],
    out: list[dict[str, BitMap64]],
    dvs: DVCache,
    only_paths: set[str] | None,
) -> dict[tuple[str, int], tuple[FileHandle, int]]:
    """The row groups to read for every request ((path, group) -> handle, first row); an
    exact index's hits go straight into ``out`` (see :func:`_index_items`)."""
    store, prefix = ctx.store, ctx.prefix
    wanted: dict[tuple[str, int], tuple[FileHandle, int]] = {}
    plans = index_plans(store, prefix, base, dnfs, physical=phys)
    for i, (dnf, ph, ip) in enumerate(zip(dnfs, phys, plans, strict=True)):
        if ip is None:
            cands = candidate_files(base, dnf, physical=ph)
            if only_paths is not None:  # plan only those: no other file's footer is read
                cands = [f for f in cands if f.path in only_paths]
            items = plan_files(store, prefix, base, cands, dnf)
        else:
            unindexed = [f for f in ip.unindexed if only_paths is None or f.path in only_paths]
            items = plan_files(store, prefix, base, unindexed, dnf)
            items += _index_items(ip, store, prefix, out[i], dvs, ph)
        for h, rg, first in items:
            if only_paths is None or h.file.path in only_paths:
                wanted.setdefault((h.file.path, rg), (h, first))
    return wanted


def _index_items(
    ip: IndexPlan, store: Any, prefix: str, found: dict[str, BitMap64], dvs: DVCache, physical: bool
) -> list[tuple[FileHandle, int, int]]:
    """An index's answer for one request: an exact filter's hits go straight into ``found``
    (DV-deleted rows dropped unless ``physical``) without reading the data files; otherwise
    the row groups holding hits, to read and filter."""
    items: list[tuple[FileHandle, int, int]] = []
    for f in ip.indexed:
        bm = ip.hits.get(f.path)
        if not bm:
            continue
        if ip.exact:
            dv = dvs.bitmap(f)
            hit = bm if physical or dv is None else bm - dv
            if hit:
                found[f.path] = BitMap64(hit)
            continue
        h = FileHandle(store, object_key(prefix, f.path), f)
        items.extend((h, rg, first) for rg, first in row_groups_of(f, bm))
    return items


def older_copies(ctx: TableContext, base: Snapshot) -> bool:
    """Whether rows may still be held outside ``base``'s live files: by a data object under
    ``data/`` that is not live (superseded by a splice, a purge, a compaction or a TTL
    sweep, and kept until GC), by what an erasure not yet archived superseded, or by
    originals an adopted table replaced outside its prefix. One LIST of ``data/`` (none
    when the manifest already says so); a file being appended counts too (it is not live
    yet): the answer errs on the safe side."""
    if base.erasures or base.manifest.adopted:
        return True
    live = {f.path for f in base.files}
    start = len(object_key(ctx.prefix, ""))
    return any(
        o.key[start:] not in live for o in ctx.store.list(object_key(ctx.prefix, DATA_PREFIX))
    )


class _DVsOf:
    """The DVs of ``base``'s files, loaded on first use (once with the read that located the
    rows: the same :class:`~lethe.reading.scan.DVCache`)."""

    def __init__(self, dvs: DVCache, base: Snapshot) -> None:
        self.dvs, self.base = dvs, base

    def __call__(self, path: str) -> BitMap64:
        f = self.base.file(path)
        bm = self.dvs.bitmap(f) if f is not None else None
        return bm if bm is not None else BitMap64()


@dataclass(frozen=True, slots=True)
class _Located:
    """What one preparation of a delete batch found (the results are read from it)."""

    done: dict[int, RequestRecord]
    twins: dict[int, int]
    conflicts: set[int]
    per_req: dict[int, dict[str, BitMap64]]
    targets: dict[int, tuple[ErasureTarget, ...]]


@dataclass(frozen=True, slots=True)
class _DeleteChange:
    """A batch of delete requests as a commit: ``prepare`` locates the rows and writes one DV
    container with the unions; the update is :class:`~lethe.catalog.changes.SetDVs`."""

    ctx: TableContext
    requests: Sequence[DeleteRequest]
    dnfs: Sequence[Dnf]
    hashes: Sequence[str | None]
    bodies: Sequence[str | None]
    kind: str
    owned: tuple[str, ...] = ()

    @property
    def what(self) -> str:
        return self.kind

    def _erased_before(
        self, base: Snapshot, live: Sequence[int], targets: Mapping[int, Any]
    ) -> list[int]:
        """The erase requests no live row answers whose rows may have left the live files
        earlier (issue 35 new1): their copies wait for GC in older objects, and each gets
        an erasure record (:meth:`ErasureRecord.erased_before`) that ends with them."""
        r, h = self.requests, self.hashes
        unmatched = [i for i in live if r[i].erase and h[i] is not None and i not in targets]
        return unmatched if unmatched and older_copies(self.ctx, base) else []

    def prepare(self, base: Snapshot) -> Prepared[_Located]:
        ctx, requests, hashes = self.ctx, self.requests, self.hashes
        done, twins, conflicts, live = _sort_requests(hashes, self.bodies, base)
        # an erase finds every matching row still physically in a live file, hidden or not
        dvs = DVCache(ctx.store, ctx.prefix)
        erase = [requests[i].erase for i in live]
        located = locate(ctx, base, [self.dnfs[i] for i in live], physical=erase, dvs=dvs)
        physical = {i: found for i, found in zip(live, located, strict=True) if requests[i].erase}
        current_dv = _DVsOf(dvs, base)
        per_req, claimed = self._attribute(live, located, current_dv)
        targets = {
            i: targets_of(base, physical[i])
            for i in live
            if requests[i].erase and hashes[i] is not None and physical[i]
        }
        before = self._erased_before(base, live, targets)
        result = _Located(done, twins, conflicts, per_req, targets)
        if not claimed and not targets and not before:
            return Prepared(None, result)
        snap_dv = {p: base.file(p).dv for p in claimed}  # type: ignore[union-attr]
        written_at = time.time()  # before the container's PUT: the GC grace clock
        unions = {p: current_dv(p) | claimed[p] for p in claimed}
        refs = dvstore.write_dvs(ctx.store, ctx.prefix, unions) if unions else {}
        erasures = [
            ErasureRecord(
                id_hash=hashes[i],  # type: ignore[arg-type]
                deleted_version=0,
                targets=t,  # the splices' commit scrubs the index (issue 37 item 3)
            )
            for i, t in targets.items()
        ]
        erasures += [ErasureRecord.erased_before(hashes[i]) for i in before]  # type: ignore[arg-type]
        op = Operation(
            kind=self.kind,  # type: ignore[arg-type]
            rows_deleted=sum(len(b) for b in claimed.values()),
            files_touched=len(claimed),
            request_id_hash=None,
            params={"requests": len(live)},
        )
        records = self._records(live, per_req)
        update = SetDVs(refs, snap_dv, op, records, tuple(erasures))
        return Prepared(
            update,
            result,
            written=tuple(sorted({r.container for r in refs.values() if r.container})),
            written_at=written_at if refs else None,
            renewable=True,  # past the grace, a new container is cheap
        )

    def _attribute(
        self, live: Sequence[int], located: Sequence[dict[str, BitMap64]], current_dv: _DVsOf
    ) -> tuple[dict[int, dict[str, BitMap64]], dict[str, BitMap64]]:
        """Each newly deleted position, attributed to the first request that matched it (an
        erase's rows a DV already hides are not new): per request, and all claimed."""
        per_req: dict[int, dict[str, BitMap64]] = {}
        claimed: dict[str, BitMap64] = {}
        for i, found in zip(live, located, strict=True):
            mine: dict[str, BitMap64] = {}
            for path, bm in found.items():
                fresh = bm - claimed.get(path, BitMap64())
                if self.requests[i].erase:
                    fresh = fresh - current_dv(path)
                if fresh:
                    mine[path] = fresh
                    claimed.setdefault(path, BitMap64()).update(fresh)
            per_req[i] = mine
        return per_req, claimed

    def _records(
        self, live: Sequence[int], per_req: dict[int, dict[str, BitMap64]]
    ) -> tuple[RequestRecord, ...]:
        """The request log's records of the live requests that carry an id."""
        return tuple(
            RequestRecord(
                id_hash=h,
                version=0,
                kind="erase" if self.requests[i].erase else self.kind,
                committed_at=datetime.now(UTC),
                rows=sum(len(b) for b in per_req[i].values()),
                files_touched=len(per_req[i]),
                body_hash=self.bodies[i],
            )
            for i in live
            if (h := self.hashes[i]) is not None
        )


def delete_batch(
    ctx: TableContext, requests: Sequence[DeleteRequest], *, kind: str = "delete"
) -> BatchDeleteResult:
    """Delete the rows of several requests in one commit (see module docstring).

    A request whose id was committed earlier with the same body returns the earlier result
    (``duplicate``); so does a second request with the same id and body in this batch. A
    request whose id names a different body (in the log or earlier in the batch) is refused:
    its result carries ``error`` and nothing of it is committed.
    """
    t0 = time.perf_counter()
    io0 = ctx.store.stats.snapshot()
    schema = ctx.schema
    dnfs = [normalize(r.filters, schema) for r in requests]
    hashes = [request_hash(r.request_id) if r.request_id else None for r in requests]
    bodies = [_body_hash(r.request_id, d, r.erase) for d, r in zip(dnfs, requests, strict=True)]
    outcome = ctx.catalog.commit_change(_DeleteChange(ctx, requests, dnfs, hashes, bodies, kind))
    found = outcome.detail
    outcome_version = outcome.manifest.version if outcome.manifest is not None else None
    base = outcome.manifest or outcome.base
    results: list[DeleteResult] = []
    for i in range(len(requests)):
        rec = found.done.get(i)
        if i in found.conflicts:
            results.append(DeleteResult(None, 0, 0, error=_CONFLICT))
        elif rec is not None:
            results.append(DeleteResult(rec.version, rec.rows, rec.files_touched, duplicate=True))
        elif i in found.twins:
            first = results[found.twins[i]]
            results.append(replace(first, duplicate=True))
        elif outcome_version is None:
            results.append(DeleteResult(None, 0, 0))
        else:
            mine = found.per_req.get(i, {})
            results.append(
                DeleteResult(
                    outcome_version,
                    sum(len(b) for b in mine.values()),
                    len(mine),
                    row_groups=found.targets.get(i) or targets_of(base, mine),
                )
            )
    io = ctx.store.stats.snapshot() - io0
    return BatchDeleteResult(
        outcome_version,
        tuple(results),
        outcome.attempts,
        time.perf_counter() - t0,
        io,
        snapshot=outcome.manifest,
    )
