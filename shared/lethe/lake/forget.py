"""Forget requests across the lake's tables (steps 1-5 of :mod:`lethe.lake.core`): checked,
recorded in the registry, their values stored, one ``delete_batch`` per table, the parts
marked committed, and (mode erase) the splices run at once when asked.

The functions take a :class:`~lethe.lake.window.LakeContext` (``Lake.context``), not the
``Lake``: :meth:`lethe.Lake.forget_batch` and :meth:`lethe.Lake.resume_requests` call
:func:`forget_batch` and :func:`resume`.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

import lethe.lake.model as model
import lethe.lake.values as stored
from lethe import errors
from lethe.catalog.manifest import request_hash
from lethe.erasure.deletes import DeleteRequest
from lethe.lake.asks import CONFLICT, Asked, ForgetRequest, check, subject_filters
from lethe.lake.model import LakeDoc, LakeRequest, TableState
from lethe.lake.results import LakeRequestResult, LakeResumeResult, LakeTableResult, reasons
from lethe.lake.window import LakeContext, splice_tables
from lethe.parquet.costs import DEFAULT_MODEL
from lethe.progress import Progress, track

log = logging.getLogger(__name__)

__all__ = ["forget_batch", "resume", "splice_now"]

#: id hash -> (raw request id, canonical values): what a commit on the tables needs
Raw = dict[str, tuple[str, tuple[Any, ...]]]
#: id hash -> its parts' results
Outcome = dict[str, list[LakeTableResult]]


def splice_now(splice: bool | None, doc: LakeDoc) -> bool:
    """Whether a call splices at once: asked to, or left to the default (None) on a lake
    whose erasure window is 0 (no window run waits for them)."""
    return bool(splice) or (splice is None and doc.erasure_window_seconds == 0)


def _refused(a: Asked, why: str) -> LakeRequestResult:
    return LakeRequestResult(a.id_hash, a.req.kind, a.req.mode, len(a.values), error=why)


def forget_batch(
    lake: LakeContext,
    requests: Sequence[ForgetRequest],
    *,
    splice: bool | None,
    max_bytes: int | None,
    progress: Progress | None,
) -> list[LakeRequestResult]:
    """:meth:`lethe.Lake.forget_batch`: recorded in one registry update, one commit per
    table, one registry update marking the parts committed."""
    doc = lake.refresh()
    asked: list[Asked | LakeRequestResult] = []
    first: dict[str, str] = {}  # id hash -> body hash of its first request in the batch
    schemas: dict[str, Any] = {}  # table -> its schema, read once for this call
    for req in requests:
        a = _validate(lake, doc, req, schemas)
        if isinstance(a, Asked) and first.setdefault(a.id_hash, a.body_hash) != a.body_hash:
            a = _refused(a, CONFLICT)
        asked.append(a)
    fresh = [a for a in asked if isinstance(a, Asked) and doc.request(a.id_hash) is None]
    mine: list[Asked] = []  # the requests this call recorded: it writes their values
    if fresh:
        rel = f"{model.VALUES_PREFIX}{uuid.uuid4().hex}.json"
        doc = _record(lake, fresh, rel)  # named first, then written: none is anonymous
        mine = [a for a in fresh if (rec := doc.request(a.id_hash)) and rec.values_object == rel]
        _store_values(lake, mine, rel)
    for i, a in enumerate(asked):
        rec = doc.request(a.id_hash) if isinstance(a, Asked) else None
        if isinstance(a, Asked) and (rec is None or rec.body_hash != a.body_hash):
            asked[i] = _refused(a, CONFLICT)  # another request took this id meanwhile
    raw = {a.id_hash: a for a in asked if isinstance(a, Asked)}
    outcome = _apply(lake, doc, {h: (a.req.request_id, a.values) for h, a in raw.items()}, progress)
    if splice_now(splice, doc):
        erase = {h for h, a in raw.items() if a.req.mode == "erase"}
        outcome = _splice(lake, outcome, erase, max_bytes, progress)
    if mine:  # a twin may have finished a request before this call's PUT
        stored.drop(
            lake.store, lake.prefix, stored.finished(lake.refresh(), [a.id_hash for a in mine])
        )
    return [_result(a, outcome) for a in asked]


def resume(lake: LakeContext, *, splice: bool | None, max_bytes: int | None) -> LakeResumeResult:
    """:meth:`lethe.Lake.resume_requests` before its sweep of the values objects
    (``values_deleted`` is 0 here)."""
    doc = lake.refresh()
    todo: Raw = {}
    failed: list[str] = []
    for r in (r for r in doc.requests if r.pending):
        got = stored.load(lake.store, lake.prefix, r.values_object, r.id_hash, r.body_hash)
        if got is None:
            failed.append(
                f"request {r.id_hash[:12]}: its values are not stored (a call was killed "
                "before storing them): send the request again, or cancel it"
            )
        else:
            todo[r.id_hash] = got
    if todo:
        outcome = _apply(lake, doc, todo)
        for h, parts in outcome.items():
            bad = [p for p in parts if p.state == "failed"]
            if bad:
                failed.append(
                    f"request {h[:12]}: {len(bad)} table(s) failed again ({reasons(bad)}); "
                    "fix the table(s) and resume, or cancel it (lethe lake cancel)"
                )
        if splice_now(splice, doc):
            erase = {r.id_hash for r in doc.requests if r.id_hash in todo and r.mode == "erase"}
            _splice(lake, outcome, erase, max_bytes)
    for why in failed:
        log.warning("lake %s: %s", lake.uri, why)
    return LakeResumeResult(len(todo), tuple(failed))


def _validate(
    lake: LakeContext, doc: LakeDoc, r: ForgetRequest, schemas: dict[str, pa.Schema | None]
) -> Asked | LakeRequestResult:
    def schema(uri: str) -> pa.Schema | None:
        if uri not in schemas:
            try:
                schemas[uri] = lake.open_table(uri).schema
            except errors.LetheError as e:  # checked when the request is applied there
                log.warning("lake %s: %s not checked (%s)", lake.uri, uri, type(e).__name__)
                schemas[uri] = None
        return schemas[uri]

    got = check(doc, r, schema)
    if isinstance(got, Asked):
        return got
    h = request_hash(r.request_id) if r.request_id else ""
    count = len(r.values) if isinstance(r.values, Sequence) else 0
    return LakeRequestResult(h, r.kind, r.mode, count, error=got)


def _store_values(lake: LakeContext, mine: Sequence[Asked], rel: str) -> None:
    """PUT the values of the requests this call recorded (they name ``rel``)."""
    if mine:
        stored.put(
            lake.store,
            lake.prefix,
            rel,
            {
                a.id_hash: {
                    "request_id": a.req.request_id,
                    "body_hash": a.body_hash,
                    "values": list(a.values),
                }
                for a in mine
            },
        )


def _record(lake: LakeContext, fresh: Sequence[Asked], values_object: str) -> LakeDoc:
    now = datetime.now(UTC)

    def change(doc: LakeDoc) -> LakeDoc:
        for a in fresh:
            if doc.request(a.id_hash) is not None:
                continue  # recorded meanwhile (a twin, or a redelivery racing us)
            parts = tuple(
                TableState(table=t, columns=cols) for t, cols in doc.columns(a.req.kind).items()
            )
            req = LakeRequest(
                id_hash=a.id_hash,
                body_hash=a.body_hash,
                kind=a.req.kind,
                mode=a.req.mode,
                values=len(a.values),
                requested_at=a.req.requested_at or now,
                recorded_at=now,
                values_object=values_object,
                tables=parts,
            )
            doc = model.record(doc, req)
        return doc

    doc = lake.update(change)
    log.info("lake %s: recorded %d request(s)", lake.uri, len(fresh))
    return doc


def _apply(lake: LakeContext, doc: LakeDoc, raw: Raw, progress: Progress | None = None) -> Outcome:
    """Commit every pending part of the requests ``raw``: one ``delete_batch`` per table,
    then one registry update."""
    work: dict[str, list[tuple[LakeRequest, TableState]]] = defaultdict(list)
    out: Outcome = {h: [] for h in raw}
    for r in (r for h in raw if (r := doc.request(h)) is not None):
        for part in r.tables:
            if part.state == "pending":
                work[part.table].append((r, part))
            elif part.state == "committed":
                out[r.id_hash].append(_duplicate(part))
    done: dict[str, dict[tuple[str, int], tuple[int | None, int, str]]] = defaultdict(dict)
    tracker = track(progress, "forget", total=len(work), unit="tables")
    for uri, items in work.items():
        results = _commit_table(lake, uri, items, raw)
        tracker.advance()
        for (r, part), res in zip(items, results, strict=True):
            out[r.id_hash].append(res)
            if res.state == "committed" and res.id_hash is not None:
                rows = res.rows if res.rows is not None else res.rows_deleted
                done[r.id_hash][(part.table, part.part)] = (res.version, rows, res.id_hash)
    if done:
        now = datetime.now(UTC)

        def change(d: LakeDoc) -> LakeDoc:
            for h, parts in done.items():
                d = model.mark_committed(d, h, parts, now)
            return d

        doc = lake.update(change)
        finished = [h for h in done if (r := doc.request(h)) is not None and not r.pending]
        stored.drop(lake.store, lake.prefix, stored.finished(doc, finished))
    tracker.finish()
    return out


def _duplicate(p: TableState) -> LakeTableResult:
    """A part an earlier run committed (its rows: that run's count; none hidden now)."""
    return LakeTableResult(
        p.table, p.part, p.id_hash, "committed", p.version, duplicate=True, rows=p.rows
    )


def _commit_table(
    lake: LakeContext, uri: str, items: Sequence[tuple[LakeRequest, TableState]], raw: Raw
) -> list[LakeTableResult]:
    """One commit on table ``uri`` for the parts ``items``."""
    ids = [model.table_request_id(raw[r.id_hash][0], p.part) for r, p in items]
    reqs = [
        DeleteRequest(subject_filters(p.columns, raw[r.id_hash][1]), rid, erase=r.mode == "erase")
        for (r, p), rid in zip(items, ids, strict=True)
    ]
    try:
        res = lake.open_table(uri).delete_batch(reqs)
    except errors.LetheError as e:
        why = f"{type(e).__name__} on the table"
        log.warning("lake %s: %d part(s) on %s failed: %s", lake.uri, len(items), uri, why)
        return [LakeTableResult(uri, p.part, None, "failed", error=why) for _, p in items]
    log.info(
        "lake %s: %s committed %d part(s), %d rows, version %s",
        lake.uri,
        uri,
        len(items),
        res.rows_deleted,
        res.version,
    )
    return [
        LakeTableResult(
            uri,
            p.part,
            request_hash(rid),
            "failed" if one.error else "committed",
            version=one.version,
            rows_deleted=0 if one.duplicate else one.rows_deleted,
            duplicate=one.duplicate,
            rows=None if one.error else one.rows_deleted,  # a duplicate's: the earlier count
            error=one.error,
        )
        for (_, p), rid, one in zip(items, ids, res.results, strict=True)
    ]


def _splice(
    lake: LakeContext,
    outcome: Outcome,
    erase: set[str],
    max_bytes: int | None,
    progress: Progress | None = None,
) -> Outcome:
    """Run the pending splices of the committed parts of the erase requests ``erase``:
    per table, all of them at once (a file several requests share is spliced once; the
    commits are those of the files, :data:`lethe.erasure.erase.SPLICE_BATCH_FILES` a commit).
    Returns ``outcome`` with each such part's table-wide splice figures."""
    hashes: dict[str, list[str]] = defaultdict(list)
    for h, parts in outcome.items():
        for p in parts:
            if h in erase and p.state == "committed" and p.id_hash is not None:
                hashes[p.table].append(p.id_hash)
    runs = splice_tables(lake, hashes, max_bytes=max_bytes, model=DEFAULT_MODEL, progress=progress)
    done = {r.table: r for r in runs}

    def spliced(h: str, p: LakeTableResult) -> LakeTableResult:
        run = done.get(p.table)
        if h not in erase or run is None or p.state != "committed":
            return p
        return dataclasses.replace(
            p,
            spliced=run.complete,
            files_spliced=run.files_spliced,
            version=run.version or p.version,
        )

    return {h: [spliced(h, p) for p in parts] for h, parts in outcome.items()}


def _result(a: Asked | LakeRequestResult, outcome: Outcome) -> LakeRequestResult:
    if isinstance(a, LakeRequestResult):
        return a
    parts = outcome.get(a.id_hash, [])
    return LakeRequestResult(
        id_hash=a.id_hash,
        kind=a.req.kind,
        mode=a.req.mode,
        values=len(a.values),
        tables=tuple(parts),
        duplicate=bool(parts) and all(p.duplicate for p in parts),
    )
