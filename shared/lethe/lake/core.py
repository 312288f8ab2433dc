"""``lethe.Lake``: a registry of tables, subject mappings, and forget requests across them.

The registry is one object, ``<lake prefix>/lake.json``, changed only by compare-and-swap
(:func:`lethe.catalog.commit.update_object`: ``If-Match`` on its ETag, ``If-None-Match: *`` to
create it; a lost race re-applies the pure change of :mod:`lethe.lake.model` to the new
state). Tables may live in any bucket; each is opened with :meth:`lethe.Table.open`.

A forget request runs in this order, and any step may crash and be run again:

1. its values are checked against the type of every column the subject kind maps to (a
   value no column can hold is refused before anything is recorded);
2. the request is recorded in ``lake.json`` — id hash, a salted hash of what it asks, kind,
   mode, *count* of values, ``requested_at``, the key of its values object, and one pending
   part per mapped table; then its values are PUT to that key,
   ``<lake prefix>/requests/<uuid>.json`` (one object for the requests this call recorded,
   with their raw request ids, which every table-level request needs): the only place the
   lake keeps them (:mod:`lethe.lake.values`: a twin delivery writes none);
3. each table with pending parts commits them in one ``Table.delete_batch`` (one commit per
   table per batch; ``erase=True`` for mode erase), under the table-level request id, so
   the table's own request log makes a second run a no-op there;
4. one more CAS marks those parts committed, with each table's row count (a table that had
   committed the request before a crash reports it as a duplicate with its real count);
   when no part of a request is pending any more, its values object is deleted (every
   version, on a versioned bucket), by this call and by any later one that touches it
   (``resume`` and the window run sweep what a killed call left): from then on, erasure
   needs no values (the splices follow each table's erasure record);
5. mode erase: each table's pending splices run (``lethe.erasure.erase.process_erasure``), unless
   the caller leaves them to the splice queue (``splice=False``, the Lambda's way).

A request that cannot finish (a table that refuses it) is cancelled with :meth:`Lake.cancel`:
its pending parts are dropped, its values deleted, and its receipt says ``cancelled`` and
why. :meth:`Lake.resume_requests` says which requests failed again and why.

A table mapped while a request of that kind is pending gains a part in that request (in the
same CAS as the mapping) and :meth:`Lake.map_subject` applies it at once: the mapping never
skips a pending request. Requests that finished before the mapping are not re-applied (their
values are gone by design); ``map_subject`` returns how many there were, and each receipt
lists exactly the tables its request covered.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import lethe.lake.forget as forgetting
import lethe.lake.model as model
import lethe.lake.values as stored
import lethe.lake.window as windows
from lethe import errors
from lethe.catalog.commit import Catalog, RetryPolicy, update_object
from lethe.catalog.manifest import request_hash
from lethe.lake.asks import CONFLICT, ForgetRequest, misfit_column
from lethe.lake.model import LakeDoc, SubjectMap
from lethe.lake.receipt import LakeReceipt, lake_receipts
from lethe.lake.results import LakeRequestResult, LakeResumeResult, LakeTableResult, reasons
from lethe.progress import Progress
from lethe.storage.layout import object_key
from lethe.storage.store import S3Store, make_s3_client, parse_s3_uri
from lethe.table import Table

log = logging.getLogger(__name__)

__all__ = ["ForgetRequest", "Lake", "LakeRequestResult", "LakeResumeResult", "LakeTableResult"]

LAKE_KEY = model.LAKE_KEY
Mode = Literal["erase", "logical"]


def _now() -> datetime:
    return datetime.now(UTC)


def _table_uri(uri: str) -> str:
    bucket, prefix = parse_s3_uri(uri)
    return f"s3://{bucket}/{prefix}"


class Lake:
    """A registry of Lethe tables and the subjects they hold. Create with :meth:`create`
    or :meth:`open`.

    Example:
        >>> lake = lethe.Lake.create("s3://bucket/_lethe")              # doctest: +SKIP
        >>> lake.add_table("s3://bucket/tables/orders")                 # doctest: +SKIP
        >>> lake.map_subject("customer", table="s3://bucket/tables/orders",
        ...                  column="customer_id")                      # doctest: +SKIP
        >>> lake.forget("customer", [42], request_id="gdpr-42").complete  # doctest: +SKIP
        True
    """

    def __init__(
        self,
        store: S3Store,
        prefix: str,
        *,
        s3: Any | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self._s3 = s3
        self._retry = retry
        self._doc: LakeDoc | None = None
        self._catalogs: dict[str, Catalog] = {}  # per table uri: its segments read once

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def _at(cls, uri: str, s3: Any | None, retry: RetryPolicy | None) -> Lake:
        bucket, prefix = parse_s3_uri(uri)
        client = s3 if s3 is not None else make_s3_client()
        return cls(S3Store(bucket, client=client), prefix, s3=client, retry=retry)

    @classmethod
    def create(
        cls,
        uri: str,
        *,
        erasure_window: timedelta | None = None,
        s3: Any | None = None,
        retry: RetryPolicy | None = None,
    ) -> Lake:
        """Create an empty lake registry at ``uri`` (``s3://bucket/prefix``).
        ``erasure_window``: how long erase requests wait to be spliced together (default
        :data:`lethe.lake.model.DEFAULT_WINDOW_SECONDS`, one day; 0: spliced at once).

        Raises:
            LakeExists: a lake already lives there.
        """
        lake = cls._at(uri, s3, retry)
        doc = LakeDoc(lake_uuid=uuid.uuid4().hex, created_at=_now())
        if erasure_window is not None:
            doc = model.set_window(doc, int(erasure_window.total_seconds()))
        try:
            lake.store.put(lake._key(LAKE_KEY), model.encode(doc), if_none_match=True)
        except errors.PreconditionFailed as e:
            raise errors.LakeExists(f"a lake already exists at {lake.uri}") from e
        lake._doc = doc
        log.info("created lake %s", lake.uri)
        return lake

    @classmethod
    def open(cls, uri: str, *, s3: Any | None = None, retry: RetryPolicy | None = None) -> Lake:
        """Open the lake at ``uri``.

        Raises:
            LakeNotFound: no ``lake.json`` there.
        """
        lake = cls._at(uri, s3, retry)
        lake.refresh()
        return lake

    @property
    def uri(self) -> str:
        return f"s3://{self.store.bucket}/{self.prefix}"

    def __repr__(self) -> str:
        return f"Lake({self.uri!r})"

    def _key(self, rel: str) -> str:
        return object_key(self.prefix, rel)

    @property
    def context(self) -> windows.LakeContext:
        """What the window run, the archive and the receipts take (:mod:`lethe.lake.window`)."""
        return windows.LakeContext(
            self.store, self.prefix, self.refresh, self._update, self.open_table
        )

    # --- the registry ------------------------------------------------------------------------
    @property
    def doc(self) -> LakeDoc:
        """The registry as last read or written by this handle."""
        if self._doc is None:
            self.refresh()
        assert self._doc is not None
        return self._doc

    def refresh(self) -> LakeDoc:
        try:
            body = self.store.get(self._key(LAKE_KEY)).body
        except errors.NotFound as e:
            raise errors.LakeNotFound(
                f"no Lethe lake at {self.uri} (no {LAKE_KEY}); create it with Lake.create",
                uri=self.uri,
            ) from e
        self._doc = model.decode(body, where=f"{self.uri}/{LAKE_KEY}")
        return self._doc

    def _update(self, change: Callable[[LakeDoc], LakeDoc]) -> LakeDoc:
        """Apply ``change`` to the registry by compare-and-swap (again on a lost race)."""
        where = f"{self.uri}/{LAKE_KEY}"

        def apply(body: bytes | None) -> bytes | None:
            if body is None:
                raise errors.LakeNotFound(
                    f"no Lethe lake at {self.uri}; create it first", uri=self.uri
                )
            doc = model.decode(body, where=where)
            new = change(doc)
            return None if new == doc else model.encode(new)

        body, _ = update_object(self.store, self._key(LAKE_KEY), apply, retry=self._retry)
        assert body is not None
        self._doc = model.decode(body, where=where)
        return self._doc

    @property
    def erasure_window(self) -> timedelta:
        """How long erase requests wait for their splices (windows aligned on the epoch)."""
        return timedelta(seconds=self.doc.erasure_window_seconds)

    def set_erasure_window(self, window: timedelta) -> None:
        """Change the erasure window (applies to every request not spliced yet)."""
        self._update(lambda d: model.set_window(d, int(window.total_seconds())))

    def splice_due(
        self, *, now: datetime | None = None, max_bytes: int | None = None
    ) -> windows.WindowRun:
        """The scheduled window run: splice every file of the erase requests whose window
        has closed, each file once for all of them, ``max_bytes`` per table
        (:func:`lethe.lake.window.splice_due`; a table that fails is reported in the run,
        the others go on), then delete the values objects no pending request needs
        (:func:`lethe.lake.values.sweep`): the scheduled run is what removes those a killed
        call left."""
        run = windows.splice_due(self.context, now=now, max_bytes=max_bytes)
        return dataclasses.replace(run, values_deleted=self.sweep_values())

    def archive(self, *, older_than: timedelta = windows.ARCHIVE_AFTER) -> int:
        """Move finished requests older than ``older_than`` out of ``lake.json`` into an
        immutable archive object (:func:`lethe.lake.window.archive`); receipts still find
        them. Returns how many moved."""
        return windows.archive(self.context, older_than=older_than)

    def backlog(self) -> windows.LakeBacklog:
        """Requests not done and the oldest one's age (what the overdue alarm watches)."""
        return windows.backlog(self.erasures(pending=True))

    def tables(self) -> tuple[str, ...]:
        """The URIs of the lake's tables, in the order they were added."""
        return tuple(t.uri for t in self.refresh().tables)

    def subjects(self) -> tuple[SubjectMap, ...]:
        """Every mapping (subject kind -> table column)."""
        return self.refresh().subjects

    def open_table(self, uri: str) -> Table:
        """The latest snapshot of the table at ``uri``, as :meth:`lethe.Table.open` opens it,
        through one catalog per table for the life of this lake handle: its segments (which
        are immutable) are read once, not once per forget and again per window run."""
        cat = self._catalogs.get(uri)
        if cat is None:
            t = Table.open(uri, s3=self._s3)
            self._catalogs[uri] = t.catalog
            return t
        m, _ = cat.current()
        return Table(cat, m)

    def add_table(self, uri: str) -> str:
        """Register the table at ``uri`` (it must exist). Returns its normalized URI.

        Raises:
            TableNotFound: no table there.
        """
        uri = _table_uri(uri)
        self.open_table(uri)
        self._update(lambda d: model.add_table(d, uri, _now()))
        return uri

    def map_subject(self, kind: str, *, table: str, column: str) -> int:
        """Map subject ``kind`` to ``table``'s ``column`` (adding the table when new), and
        create the column's index when missing. Pending requests of ``kind`` are extended to
        the table in the same registry update and applied at once. Returns how many requests
        of ``kind`` had finished before this mapping (they are not applied to it).

        Raises:
            InvalidRequest: ``column`` is not a column of the table (or not indexable), or
                the values of a pending request of ``kind`` do not fit it.
        """
        if not kind:
            raise errors.InvalidRequest("a subject kind must be a non-empty name")
        uri = _table_uri(table)
        t = self.open_table(uri)
        if column not in t.schema.names:
            raise errors.InvalidRequest(f"{uri} has no column {column!r}")
        for r in (r for r in self.refresh().requests if r.kind == kind and r.pending):
            got = stored.load(self.store, self.prefix, r.values_object, r.id_hash, r.body_hash)
            why = misfit_column(got[1], uri, column, t.schema) if got else None
            if why is not None:  # the request would fail there forever
                raise errors.InvalidRequest(
                    f"pending request {r.id_hash[:12]} of {kind!r}: {why}; cancel it first "
                    "(lethe lake cancel) or map a column that can hold its values"
                )
        if column not in t.indexes:
            t.create_index(column)
        doc = self._update(lambda d: model.map_subject(d, kind, uri, column, _now()))
        pending = [r for r in doc.requests if r.kind == kind and r.pending]
        earlier = sum(1 for r in doc.requests if r.kind == kind and not r.pending)
        log.info(
            "lake %s: %s mapped to a column of %s; %d pending and %d earlier requests",
            self.uri,
            kind,
            uri,
            len(pending),
            earlier,
        )
        if pending:
            self.resume()
        return earlier

    # --- forgetting --------------------------------------------------------------------------
    def forget(
        self,
        kind: str,
        values: Sequence[Any],
        *,
        request_id: str,
        mode: Mode = "erase",
        requested_at: datetime | None = None,
        splice: bool | None = None,
        max_bytes: int | None = None,
        progress: Progress | None = None,
    ) -> LakeRequestResult:
        """Forget the subjects ``values`` of ``kind`` in every table that maps ``kind``.

        Recorded in the lake first, then committed in each table (see the module docstring);
        idempotent by ``request_id``: a second call finishes what is left and never applies
        anything twice. With mode ``"erase"``, the rows are then spliced out of every file
        that held them: at once with ``splice=True`` (``max_bytes`` bounds each table's
        splices in this call), by the window run (:meth:`splice_due`) with ``None`` (the
        default) when the lake has an erasure window (at once when it is 0), never here
        with ``False``. ``progress`` hears of each table committed (task ``"forget"``) and
        spliced (``"forget splices"``).

        Raises:
            InvalidRequest: no table maps ``kind``, or the values are not JSON scalars.
            RequestIdConflict: ``request_id`` names another request.
            RequestIncomplete: some table could not commit it now (run it again).
        """
        (r,) = self.forget_batch(
            [ForgetRequest(kind, values, request_id, mode, requested_at)],
            splice=splice,
            max_bytes=max_bytes,
            progress=progress,
        )
        if r.error is not None:
            if r.error == CONFLICT:
                raise errors.RequestIdConflict(r.error)
            raise errors.InvalidRequest(r.error)
        failed = [t for t in r.tables if t.state != "committed"]
        if failed:
            raise errors.RequestIncomplete(
                f"lake request {r.id_hash[:12]}: {len(failed)} of {len(r.tables)} table(s) "
                f"did not commit ({reasons(failed)}); run it again (or `lethe lake resume`) to finish, "
                "or cancel it (Lake.cancel, `lethe lake cancel`) if a table can never take it"
            )
        return r

    def forget_batch(
        self,
        requests: Sequence[ForgetRequest],
        *,
        splice: bool | None = None,
        max_bytes: int | None = None,
        progress: Progress | None = None,
    ) -> list[LakeRequestResult]:
        """Several requests (an SQS batch): recorded in one registry update, one commit per
        table, one registry update marking the parts committed. A result's ``error`` says why
        that request alone was refused; a part's ``error`` why a table did not commit."""
        return forgetting.forget_batch(
            self.context, requests, splice=splice, max_bytes=max_bytes, progress=progress
        )

    def resume(self, *, splice: bool | None = None, max_bytes: int | None = None) -> int:
        """Finish every pending request from its stored values (after a crash, or for a
        newly mapped table), and delete values objects no pending request needs
        (:meth:`sweep_values`). Returns how many requests had pending parts
        (:meth:`resume_requests` also says which failed again, and why)."""
        return self.resume_requests(splice=splice, max_bytes=max_bytes).requests

    def resume_requests(
        self, *, splice: bool | None = None, max_bytes: int | None = None
    ) -> LakeResumeResult:
        """:meth:`resume`, with the reason of every request that did not finish."""
        run = forgetting.resume(self.context, splice=splice, max_bytes=max_bytes)
        return dataclasses.replace(run, values_deleted=self.sweep_values())

    def cancel(self, request_id: str, *, reason: str) -> LakeReceipt:
        """Cancel the pending request ``request_id``: its parts not committed yet are never
        applied (committed ones stay: their rows are hidden, and erased by the window run);
        its values object is deleted. Its receipt says ``cancelled`` and ``reason`` (an
        operator's note: it must not name the person). Returns that receipt.

        Raises:
            InvalidRequest: no such request, no reason, or the request has no pending part
                (it finished: nothing to cancel).
        """
        reason = reason.strip()
        if not reason:
            raise errors.InvalidRequest("say why the request is cancelled (a reason)")
        if len(reason) > 500:
            raise errors.InvalidRequest("a cancel reason is at most 500 characters")
        h = request_hash(request_id)
        r = self.refresh().request(h)
        if r is None:
            raise errors.InvalidRequest("the lake holds no request with that id")
        if r.cancelled_at is None and not r.pending:
            raise errors.InvalidRequest(
                "the request has no pending part (it finished): nothing to cancel"
            )
        got = stored.load(self.store, self.prefix, r.values_object, r.id_hash, r.body_hash)
        if got is not None and any(
            re.search(rf"(?<!\w){re.escape(str(v))}(?!\w)", reason) for v in got[1]
        ):
            raise errors.InvalidRequest("a cancel reason must not name the person's values")
        doc = self._update(lambda d: model.cancel(d, h, reason, _now()))
        stored.drop(self.store, self.prefix, stored.finished(doc, [h]))
        log.info("lake %s: request %s cancelled", self.uri, h[:12])
        return self.erasure_status(request_id)

    def sweep_values(self, *, older_than: timedelta = stored.UNNAMED_AFTER) -> int:
        """Delete the values objects no pending request needs: at once those only finished
        or cancelled requests name (every version), those no request names once older than
        ``older_than`` (:func:`lethe.lake.values.sweep`). Returns how many were deleted."""
        return stored.sweep(self.store, self.prefix, self.refresh, older_than=older_than)

    # --- receipts ----------------------------------------------------------------------------
    def erasure_status(self, request_id: str) -> LakeReceipt:
        """The one receipt of a lake request: every table it covered, each table's receipt
        (hidden, spliced files, GC completion), counts and hashes only.

        Raises:
            InvalidRequest: the lake holds no request with that id.
        """
        h = request_hash(request_id)
        doc = self.refresh()
        r = doc.request(h) or windows.find_archived(self.context, doc, h)
        if r is None:
            raise errors.InvalidRequest("the lake holds no request with that id")
        present = stored.present(self.store, self.prefix)
        (out,) = lake_receipts([r], self.open_table, lake=self.uri, present=present)
        return out

    def erasures(
        self, *, pending: bool = False, older_than: timedelta | None = None
    ) -> list[LakeReceipt]:
        """Receipts of the lake's requests, oldest first: with ``pending``, only those not
        done (logical: hidden in every table; erase: GC-complete in every table); with
        ``older_than``, only those requested longer ago than that."""
        now = _now()
        doc = self.refresh()
        # archived requests are finished: read only when finished ones are asked for
        reqs = sorted(
            (*doc.requests, *(() if pending else windows.archived(self.context, doc))),
            key=lambda r: r.requested_at,
        )
        if older_than is not None:
            reqs = [r for r in reqs if now - r.requested_at > older_than]
        present = stored.present(self.store, self.prefix)
        out = lake_receipts(reqs, self.open_table, lake=self.uri, present=present)
        return [r for r in out if not r.done] if pending else out
