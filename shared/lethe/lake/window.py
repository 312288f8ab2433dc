"""Erasure windows, the archive of finished requests, and the lake's erasure backlog.

* **Windows.** A lake request of mode erase is hidden at once (a deletion vector in every
  table); its splices wait for the end of its *erasure window* (``erasure_window_seconds`` of
  ``lake.json``, windows aligned on the epoch, one day by default). :func:`splice_due` (the
  scheduled run: ``lethe lake window``, the splice worker's EventBridge rule) splices, per
  table, every file of every request whose window has closed, all the requests of a file at
  once (:func:`lethe.erasure.erase.process_erasures`): a file that holds 500 of the window's people is
  spliced once. Each run is bounded (``max_bytes`` of row groups re-encoded); what is left
  waits for the next run.
* **Archive.** ``lake.json`` would otherwise keep every request forever: :func:`archive`
  moves finished requests (every table done: logical hidden, erase GC-complete) recorded
  longer ago than a retention into one immutable object ``archive/aNNNNNNNN.json`` (written
  create-only, then dropped from the document by compare-and-swap, which keeps only the count
  of archive objects), like a table's superseded erasure records under
  ``manifest/erasures/``. :func:`find_archived` reads them back for a receipt.
* **Backlog.** :func:`backlog`: how many lake requests are not done and the oldest one's
  age, for the ``ErasureOverdue`` alarm (counts and seconds only).

The functions take a :class:`LakeContext`: the lake's store and prefix, how to read and change
its registry and how to open one of its tables (:attr:`lethe.lake.core.Lake.context` makes it).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import lethe.lake.model as model
import lethe.lake.values as values
from lethe import errors
from lethe.catalog.manifest import manifest_key
from lethe.erasure.erase import process_erasures
from lethe.lake.model import LakeArchive, LakeDoc, LakeRequest
from lethe.lake.receipt import lake_receipts
from lethe.parquet.costs import CostModel
from lethe.progress import Progress, track
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = [
    "WINDOW_EVENT",
    "LakeBacklog",
    "LakeContext",
    "TableWindowRun",
    "WindowRun",
    "archive",
    "backlog",
    "splice_due",
]

#: How the window run prices a file's splice plan: by the bytes that cross the wire, the
#: window's bill. A server-side copy moves none (0.01 a byte), a request costs 32 KiB, and a
#: plan may build the new object in up to 32 temporary stages copying up to 8x the file
#: server-side (the defaults: 0.1, 128 KiB, 4 stages, 1.5x). Edits closer together than
#: S3's 5 MiB part minimum then cost their own bytes (a chain of stages, each ending with
#: one short segment as its last part) instead of parts padded with downloaded neighbours.
WINDOW_MODEL = CostModel(
    copy_weight=0.01, request_bytes=32 << 10, max_copy_ratio=8.0, max_stages=32
)
#: The event the scheduled rule sends the splice worker to run the window (and archive).
WINDOW_EVENT: dict[str, str] = {"lethe": "erasure-window"}
#: The metrics (Powertools EMF, namespace ``Lethe``) the lake's backlog is published as;
#: the ``ErasureOverdue`` alarm watches the oldest age. Counts and seconds only.
PENDING_METRIC = "PendingLakeRequests"
OLDEST_METRIC = "OldestPendingLakeRequestAge"
#: Finished requests stay in ``lake.json`` this long before :func:`archive` moves them.
ARCHIVE_AFTER = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class LakeContext:
    """What the window run, the archive and the receipts work with: the lake's ``store`` and
    ``prefix``; ``refresh()`` reads the registry, ``update(change)`` changes it by
    compare-and-swap, ``open_table(uri)`` opens one of its tables (a :class:`~lethe.Table`)."""

    store: S3Store
    prefix: str
    refresh: Callable[[], LakeDoc]
    update: Callable[[Callable[[LakeDoc], LakeDoc]], LakeDoc]
    open_table: Callable[[str], Any]

    @property
    def uri(self) -> str:
        return f"s3://{self.store.bucket}/{self.prefix}"

    def key(self, rel: str) -> str:
        """The absolute key of a lake-relative path."""
        return object_key(self.prefix, rel)


@dataclass(frozen=True, slots=True)
class TableWindowRun:
    """One table in a window run: its due erasures, files spliced, commits made."""

    table: str
    erasures: int
    files_spliced: int
    commits: int
    complete: bool
    error: str | None = None  # why this table failed (the run went on to the others)
    version: int | None = None  # the table's version after its splices (None: none ran)


@dataclass(frozen=True, slots=True)
class WindowRun:
    """What :func:`splice_due` did. ``complete``: nothing due is left unspliced (else the
    budget ran out; the next run continues)."""

    requests_due: int
    requests_waiting: int  # erase requests whose window has not closed yet
    tables: tuple[TableWindowRun, ...] = ()
    values_deleted: int = 0  # values objects no pending request needed, deleted by the run
    #: the end of each window still open, with how many erase requests wait for it (earliest
    #: first): when their splices run
    closes: tuple[tuple[datetime, int], ...] = ()

    @property
    def complete(self) -> bool:
        return all(t.complete for t in self.tables)

    @property
    def failed(self) -> tuple[TableWindowRun, ...]:
        """The tables that failed in this run (each with its reason)."""
        return tuple(t for t in self.tables if t.error is not None)

    @property
    def files_spliced(self) -> int:
        """Files spliced in every table (each file once for all the requests it held)."""
        return sum(t.files_spliced for t in self.tables)

    @property
    def commits(self) -> int:
        """Commits the splices made in every table."""
        return sum(t.commits for t in self.tables)


def due(r: LakeRequest, window_seconds: int, now: datetime) -> bool:
    """Whether erase request ``r``'s window has closed (its splices may run)."""
    return model.window_end(r.recorded_at, window_seconds) <= now


def splice_due(
    lake: LakeContext, *, now: datetime | None = None, max_bytes: int | None = None
) -> WindowRun:
    """Splice every file of the erase requests whose window closed by ``now``: per table,
    all of them in one :func:`~lethe.erasure.erase.process_erasures` (a file several requests share
    is spliced once), within ``max_bytes`` per table (None: no bound).

    Every committed part counts, whatever row count the registry holds for it (the table's
    erasure record says what is pending). A table's head lagging behind its newest manifest
    (a committer died between the two PUTs) is rolled forward first: a normal state, not a
    conflict. A table that fails is reported with its reason and the run goes on."""
    now = now or datetime.now(UTC)
    doc = lake.refresh()
    per_table: dict[str, list[str]] = defaultdict(list)
    n_due = 0
    closes: Counter[datetime] = Counter()
    for r in doc.requests:
        if r.mode != "erase":
            continue
        if not due(r, doc.erasure_window_seconds, now):
            closes[model.window_end(r.recorded_at, doc.erasure_window_seconds)] += 1
            continue
        n_due += 1
        for p in r.tables:
            if p.state == "committed" and p.id_hash is not None:
                per_table[p.table].append(p.id_hash)
    runs = splice_tables(lake, per_table, max_bytes=max_bytes)
    return WindowRun(n_due, closes.total(), tuple(runs), closes=tuple(sorted(closes.items())))


def splice_tables(
    lake: LakeContext,
    per_table: Mapping[str, Sequence[str]],
    *,
    max_bytes: int | None = None,
    model: CostModel = WINDOW_MODEL,
    progress: Progress | None = None,
) -> list[TableWindowRun]:
    """Splice the pending erasures of several tables (``per_table``: table URI -> erasure
    id hashes), per table all of them in one :func:`~lethe.erasure.erase.process_erasures`
    (a file several requests share is spliced once), within ``max_bytes`` per table. The one
    orchestration of a window run and of ``Lake.forget`` splicing at once (issue 38 item 5);
    a table that fails is reported with its reason and the others go on."""
    tracker = track(progress, "forget splices", total=len(per_table), unit="tables")
    runs = []
    for uri, ids in per_table.items():
        runs.append(_run_table(lake, uri, ids, max_bytes, model))
        tracker.advance()
    tracker.finish()
    return runs


def current_table(lake: LakeContext, uri: str) -> Any:
    """The table at ``uri`` at its newest landed version: a head lagging behind its newest
    manifest (a committer died between the two PUTs) is rolled forward first, one HEAD to
    find out (a normal state, not a conflict)."""
    t = lake.open_table(uri)
    if t.catalog.store.exists(t.catalog.key(manifest_key(t.version + 1))):
        t.catalog.roll_forward()
        t = lake.open_table(uri)
    return t


def _run_table(
    lake: LakeContext, uri: str, ids: Sequence[str], max_bytes: int | None, model: CostModel
) -> TableWindowRun:
    """One table: its head rolled forward, the erasures ``ids`` spliced."""
    try:
        t = current_table(lake, uri)
        before = t.version
        complete, splices = process_erasures(t.context, ids, max_bytes=max_bytes, model=model)
        version = t.refresh().version if splices else None
    except errors.LetheError as e:
        why = f"{type(e).__name__}: {str(e)[:300]}"
        log.error("lake %s: splices on %s failed (%s); the others go on", lake.uri, uri, why)
        return TableWindowRun(uri, len(ids), 0, 0, False, error=why)
    commits = version - before if version is not None else 0
    log.info(
        "lake %s: splices on %s: %d erasure(s), %d file(s) spliced in %d commit(s), complete=%s",
        lake.uri,
        uri,
        len(ids),
        len(splices),
        commits,
        complete,
    )
    return TableWindowRun(uri, len(ids), len(splices), commits, complete, version=version)


def archive(
    lake: LakeContext, *, older_than: timedelta = ARCHIVE_AFTER, now: datetime | None = None
) -> int:
    """Move the finished requests recorded more than ``older_than`` ago into the next
    archive object, and drop them from ``lake.json``. Returns how many moved (0: none, or
    another call is archiving). A crash between the PUT and the CAS leaves an archive object
    the next call adopts (its requests are dropped then), so nothing is kept twice."""
    now = now or datetime.now(UTC)
    doc = lake.refresh()
    number = doc.archived
    key = lake.key(model.archive_key(number))
    try:
        moved = _read_archive(lake, key).requests  # left by a crash, or a racing call's
    except errors.NotFound:
        old = [r for r in doc.requests if not r.pending and now - r.recorded_at > older_than]
        if not old:
            return 0
        present = values.present(lake.store, lake.prefix)
        receipts = lake_receipts(old, lake.open_table, lake=lake.uri, present=present)
        done = {x.id_hash for x in receipts if x.done}
        moved = tuple(r for r in old if r.id_hash in done)
        if not moved:
            return 0
        body = LakeArchive(
            lake_uuid=doc.lake_uuid, number=number, archived_at=now, requests=moved
        ).model_dump_json()
        try:
            lake.store.put(key, body.encode(), if_none_match=True)
        except errors.PreconditionFailed:
            return 0  # another call wrote this archive first; it drops its requests
    ids = [r.id_hash for r in moved]
    lake.update(lambda d: model.archive(d, number, ids))
    log.info("lake %s: archived %d finished request(s) (archive %d)", lake.uri, len(ids), number)
    return len(ids)


def _read_archive(lake: LakeContext, key: str) -> LakeArchive:
    body = lake.store.get(key).body
    try:
        return LakeArchive.model_validate_json(body)
    except ValueError:
        raise errors.CorruptManifest(
            f"s3://{lake.store.bucket}/{key}: not a lake archive"
        ) from None


def archived(lake: LakeContext, doc: LakeDoc) -> list[LakeRequest]:
    """Every archived request, oldest archive first."""
    out: list[LakeRequest] = []
    for n in range(doc.archived):
        out.extend(_read_archive(lake, lake.key(model.archive_key(n))).requests)
    return out


def find_archived(lake: LakeContext, doc: LakeDoc, id_hash: str) -> LakeRequest | None:
    """The archived request ``id_hash`` (newest archive first), or None."""
    for n in reversed(range(doc.archived)):
        a = _read_archive(lake, lake.key(model.archive_key(n)))
        hit = next((r for r in a.requests if r.id_hash == id_hash), None)
        if hit is not None:
            return hit
    return None


@dataclass(frozen=True, slots=True)
class LakeBacklog:
    """Lake requests not done (erase: not GC-complete in every table) and the oldest one's
    age in seconds (0 when none): what the ``ErasureOverdue`` alarm watches."""

    pending: int
    oldest_age_seconds: float


def backlog(receipts: Sequence[Any], now: datetime | None = None) -> LakeBacklog:
    """The backlog of the pending receipts ``receipts`` (``Lake.erasures(pending=True)``)."""
    now = now or datetime.now(UTC)
    ages = [(now - r.requested_at).total_seconds() for r in receipts]
    return LakeBacklog(len(ages), max(ages, default=0.0))
