"""One receipt per lake request: the request as the registry holds it, plus each table's own
receipt (:mod:`lethe.audit.receipts`: hidden, spliced files, GC completion), reconstructed from
storage. Counts, versions, paths and hashes only: never a value, never the raw request id.

The request's values object (:mod:`lethe.lake.values`) is a copy of the person's values: a
receipt lists it, present or gone as a listing of every version shows, and a request is
neither ``complete`` nor done while it is present. The registry's row count of a part is
not trusted over the table: a part it records with 0 rows whose table holds an erasure or
rows for the request is told by the table's own receipt.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from lethe.audit.evidence import Evidence, gather
from lethe.audit.receipts import ErasureReceipt, receipt
from lethe.catalog.manifest import ErasureRecord
from lethe.catalog.snapshot import Snapshot
from lethe.lake.model import LakeRequest, TableState

__all__ = ["LakeCopy", "LakeReceipt", "LakeTableReceipt", "lake_receipts"]

LakeState = Literal["recorded", "hidden", "erasing", "removed", "complete", "cancelled"]
_RANK: dict[str, int] = {"erasing": 2, "removed": 3, "complete": 4}
_NAMES: dict[int, LakeState] = {1: "hidden", 2: "erasing", 3: "removed", 4: "complete"}
#: the fields a receipt copies from its request as the registry holds it
_OF_REQUEST: set[str] = set(
    [
        "id_hash",
        "kind",
        "mode",
        "values",
        "requested_at",
        "recorded_at",
        "cancelled_at",
        "cancel_reason",
    ]
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LakeTableReceipt(_Frozen):
    """One table's part of a lake request."""

    table: str
    part: int
    columns: tuple[str, ...]
    state: str  # "pending" (not committed yet), "nothing to forget", or the table's state
    rows: int | None = None
    version: int | None = None  # the commit that hid the rows
    files_spliced: int = 0
    gc_run: str | None = None  # the GC run that completed the erasure
    done: bool = False
    receipt: ErasureReceipt | None = None


class LakeCopy(_Frozen):
    """A copy of the request's values the lake itself kept (its values object)."""

    path: str  # s3://bucket/<lake prefix>/requests/<uuid>.json
    kind: Literal["values"] = "values"
    present: bool  # a version of it is listed (every version counts, delete markers not)


class LakeReceipt(_Frozen):
    """What became of one lake request, in every table it covered."""

    lake: str
    id_hash: str
    kind: str
    mode: str
    values: int
    requested_at: datetime
    recorded_at: datetime
    state: LakeState
    done: bool
    tables: tuple[LakeTableReceipt, ...]
    copies: tuple[LakeCopy, ...] = ()
    cancelled_at: datetime | None = None
    cancel_reason: str | None = None

    def age_days(self, now: datetime | None = None) -> float:
        now = now or datetime.now(UTC)
        return (now - self.requested_at).total_seconds() / 86400

    def describe(self) -> str:
        """Human-readable text for the command line."""
        lines = [
            f"lake request {self.id_hash} ({self.mode} of {self.values} {self.kind} "
            f"value(s), requested {self.requested_at.isoformat(timespec='seconds')}): "
            f"{self.state}{' (done)' if self.done else ''}"
        ]
        for t in self.tables:
            part = f" part {t.part}" if t.part else ""
            extra = [
                f"{t.rows} row(s)" if t.rows is not None else "",
                f"v{t.version}" if t.version is not None else "",
            ]
            if t.files_spliced:
                extra.append(f"{t.files_spliced} file(s) spliced")
            if t.gc_run:
                extra.append(f"GC run {t.gc_run}")
            detail = ", ".join(x for x in extra if x)
            lines.append(
                f"  {t.table}{part} [{', '.join(t.columns)}]: {t.state}"
                + (f" ({detail})" if detail else "")
            )
        for c in self.copies:
            lines.append(f"  {c.kind} object {c.path}: {'present' if c.present else 'gone'}")
        if self.cancelled_at is not None:
            when = self.cancelled_at.isoformat(timespec="seconds")
            lines.append(f"  cancelled {when}: {self.cancel_reason}")
        return "\n".join(lines)


def _table(mode: str, part: TableState, ev: Evidence | None) -> LakeTableReceipt:
    base: dict[str, Any] = {"table": part.table, "part": part.part, "columns": part.columns}
    if part.state == "cancelled":
        return LakeTableReceipt(state="cancelled", done=True, **base)
    if part.state == "pending" or part.id_hash is None or ev is None:
        return LakeTableReceipt(state="pending", **base)
    r = receipt(ev, part.id_hash)
    if part.rows == 0 and not r.erasure and not r.rows:
        return LakeTableReceipt(
            state="nothing to forget", rows=0, version=part.version, done=True, **base
        )
    done = r.state == "complete" if mode == "erase" else True
    return LakeTableReceipt(
        state=r.state,
        rows=r.rows if r.rows is not None else part.rows,
        version=r.hidden_version if r.hidden_version is not None else part.version,
        files_spliced=len(r.splices),
        gc_run=r.completed_run,
        done=done,
        receipt=r,
        **base,
    )


def _state(
    req: LakeRequest, tables: Sequence[LakeTableReceipt], copies: Sequence[LakeCopy]
) -> LakeState:
    if req.cancelled_at is not None:
        return "cancelled"
    if any(t.state == "pending" for t in tables):
        return "recorded"
    if req.mode != "erase":
        return "hidden"
    ranks = [_RANK.get(t.state, 1) for t in tables if t.state != "nothing to forget"]
    if any(c.present for c in copies):  # the person's values are still in the lake
        ranks.append(_RANK["removed"])
    return _NAMES[min(ranks)] if ranks else "complete"


PREFETCH_WORKERS = 16


def _prefetch(ev: Evidence, wanted: Collection[str]) -> None:
    """Load the superseded lists of the erasure records of ``wanted`` (id hashes) at once,
    :data:`PREFETCH_WORKERS` at a time: one receipt per request would otherwise GET them one
    by one (the catalog caches them, so the receipts then read them from memory)."""
    jobs: dict[tuple[str, ...], tuple[Snapshot, ErasureRecord]] = {}
    for m in ev.chain:
        for e in m.erasures:
            if e.id_hash in wanted and e.superseded_refs and e.superseded_refs not in jobs:
                jobs[e.superseded_refs] = (m, e)
    if len(jobs) > 1:
        with ThreadPoolExecutor(PREFETCH_WORKERS) as pool:
            list(pool.map(lambda job: job[0].superseded_of(job[1]), jobs.values()))


def lake_receipts(
    requests: Sequence[LakeRequest],
    open_table: Callable[[str], Any],
    *,
    lake: str = "",
    present: Collection[str],
) -> list[LakeReceipt]:
    """The receipts of ``requests``; each table's storage is read once for all of them.
    ``present``: the lake-relative keys of values objects a listing of every version found
    (:func:`lethe.lake.values.present`)."""
    evidence: dict[str, Evidence] = {}
    wanted: dict[str, set[str]] = {}
    for req in requests:
        for p in req.tables:
            if p.state == "committed" and p.id_hash is not None:
                wanted.setdefault(p.table, set()).add(p.id_hash)

    def ev(uri: str) -> Evidence:
        if uri not in evidence:
            evidence[uri] = gather(open_table(uri).catalog)
            _prefetch(evidence[uri], wanted.get(uri, set()))
        return evidence[uri]

    out = []
    for req in requests:
        tables = tuple(
            _table(req.mode, p, ev(p.table) if p.state == "committed" else None) for p in req.tables
        )
        copies = (
            (LakeCopy(path=f"{lake}/{req.values_object}", present=req.values_object in present),)
            if req.values_object
            else ()
        )
        out.append(
            LakeReceipt(
                lake=lake,
                state=_state(req, tables, copies),
                done=all(t.done for t in tables) and not any(c.present for c in copies),
                tables=tables,
                copies=copies,
                **req.model_dump(include=_OF_REQUEST),
            )
        )
    return out
