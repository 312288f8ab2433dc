"""The lake registry document (``lake.json``) and its changes, as pure functions over values.

The document lists the lake's tables, the subject mappings (subject kind -> table column)
and the requests: each request by its id *hash*, with a salted hash of what it asks (kind,
mode, values), the count of values, when it was requested and recorded, and one
:class:`TableState` per (table, part) it must be applied to. The values themselves are never
in this document (see :mod:`lethe.lake.core` for where they wait until every table committed).

Every function here returns a new document (or the same one when there is nothing to do), so
the compare-and-swap loop (:func:`lethe.catalog.commit.update_object`) can apply it again on a newer
document after a lost race.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lethe import errors
from lethe.catalog.manifest import request_hash

__all__ = [
    "DEFAULT_WINDOW_SECONDS",
    "LakeArchive",
    "LakeDoc",
    "LakeRequest",
    "LakeTable",
    "SubjectMap",
    "TableState",
    "add_table",
    "archive",
    "archive_key",
    "body_hash",
    "cancel",
    "decode",
    "encode",
    "map_subject",
    "mark_committed",
    "record",
    "set_window",
    "table_request_id",
    "window_end",
]

Mode = Literal["erase", "logical"]
FORMAT = 1
#: Erasure window (seconds): requests are hidden at once and each file is spliced once per
#: window for all the requests in it. One day: well inside the 30-day GDPR deadline.
DEFAULT_WINDOW_SECONDS = 86400
LAKE_KEY = "lake.json"  # the registry, lake-relative
VALUES_PREFIX = "requests/"  # the values of pending requests (deleted once applied)
ARCHIVE_PREFIX = "archive/"  # immutable archive objects of finished requests


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LakeTable(_Frozen):
    uri: str
    added_at: datetime


class SubjectMap(_Frozen):
    """One identifier of a subject kind: the column of a table that holds it."""

    kind: str
    table: str
    column: str
    mapped_at: datetime


class TableState(_Frozen):
    """What one request asks of one table. ``part`` 0 is the table's first part of the
    request; a column mapped later, after part 0 committed, adds part 1, 2, ... (each is
    its own table-level request: ``table_request_id``). ``id_hash`` is the table-level
    request's hash (what the table's receipts are looked up by), known once committed."""

    table: str
    part: int = 0
    columns: tuple[str, ...]
    id_hash: str | None = None
    state: Literal["pending", "committed", "cancelled"] = "pending"
    version: int | None = None
    rows: int | None = None
    committed_at: datetime | None = None


class LakeRequest(_Frozen):
    """One forget request, without its values (``values`` is their count)."""

    id_hash: str
    body_hash: str
    kind: str
    mode: Mode
    values: int
    requested_at: datetime
    recorded_at: datetime
    values_object: str  # lake-relative key of the object holding the values while pending
    tables: tuple[TableState, ...] = ()
    #: set by :func:`cancel`: its pending parts were dropped, for the reason given
    cancelled_at: datetime | None = None
    cancel_reason: str | None = None

    @property
    def pending(self) -> tuple[TableState, ...]:
        return tuple(t for t in self.tables if t.state == "pending")


class LakeDoc(_Frozen):
    format: int = FORMAT
    lake_uuid: str
    created_at: datetime
    tables: tuple[LakeTable, ...] = ()
    subjects: tuple[SubjectMap, ...] = ()
    requests: tuple[LakeRequest, ...] = Field(default=())
    #: splices of erase requests wait for the end of their window (0: spliced at once)
    erasure_window_seconds: int = Field(default=DEFAULT_WINDOW_SECONDS, ge=0)
    #: how many archive objects hold finished requests (``archive/a00000000.json`` ...):
    #: the document keeps a count, not a list, so it stays flat however many requests came
    archived: int = Field(default=0, ge=0)

    def request(self, id_hash: str) -> LakeRequest | None:
        return next((r for r in self.requests if r.id_hash == id_hash), None)

    def table(self, uri: str) -> LakeTable | None:
        return next((t for t in self.tables if t.uri == uri), None)

    def columns(self, kind: str) -> dict[str, tuple[str, ...]]:
        """Table -> the columns mapped to ``kind`` there (tables in registry order)."""
        out: dict[str, tuple[str, ...]] = {}
        for s in self.subjects:
            if s.kind == kind:
                out[s.table] = (*out.get(s.table, ()), s.column)
        return out


class LakeArchive(_Frozen):
    """One immutable archive object: finished requests moved out of ``lake.json``."""

    format: int = FORMAT
    lake_uuid: str
    number: int
    archived_at: datetime
    requests: tuple[LakeRequest, ...]


def archive_key(number: int) -> str:
    """The lake-relative key of archive object ``number``.

    >>> archive_key(3)
    'archive/a00000003.json'
    """
    return f"{ARCHIVE_PREFIX}a{number:08d}.json"


def window_end(at: datetime, seconds: int) -> datetime:
    """The end of the erasure window holding ``at`` (windows aligned on the epoch, so every
    request of one window is due at the same instant; ``seconds`` 0: ``at`` itself).

    >>> from datetime import UTC, datetime
    >>> window_end(datetime(2026, 1, 2, 15, 0, tzinfo=UTC), 86400).isoformat()
    '2026-01-03T00:00:00+00:00'
    """
    if seconds <= 0:
        return at
    ts = int(at.timestamp())
    return datetime.fromtimestamp((ts // seconds + 1) * seconds, tz=at.tzinfo)


def set_window(doc: LakeDoc, seconds: int) -> LakeDoc:
    if seconds < 0:
        raise errors.InvalidRequest("an erasure window is a duration >= 0")
    return doc.model_copy(update={"erasure_window_seconds": seconds})


def archive(doc: LakeDoc, number: int, id_hashes: Sequence[str]) -> LakeDoc:
    """Drop the requests ``id_hashes`` (written to archive object ``number``) from the
    document; a no-op unless ``number`` is the next archive (another call archived it)."""
    if doc.archived != number:
        return doc
    gone = set(id_hashes)
    kept = tuple(r for r in doc.requests if r.id_hash not in gone)
    return doc.model_copy(update={"requests": kept, "archived": number + 1})


def encode(doc: LakeDoc) -> bytes:
    return doc.model_dump_json().encode()  # compact: it is read and rewritten by every change


def decode(body: bytes, *, where: str) -> LakeDoc:
    try:
        raw = json.loads(body)
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise errors.CorruptManifest(f"{where}: not a lake registry of format {FORMAT}")
        return LakeDoc.model_validate(raw)
    except (ValueError, ValidationError) as e:
        reason = str(e).splitlines()[0][:200]
        raise errors.CorruptManifest(f"{where}: not a lake registry ({reason})") from None


def canonical_values(values: Sequence[Any]) -> list[Any]:
    """The distinct values in a stable order (JSON scalars only: str, int, float, bool)."""
    out: dict[str, Any] = {}
    for v in values:
        if v is None or not isinstance(v, str | int | float | bool):
            raise errors.InvalidRequest(
                "subject values must be strings or numbers (JSON scalars), "
                f"got a {type(v).__name__}"
            )
        out.setdefault(json.dumps(v, sort_keys=True), v)
    return [out[k] for k in sorted(out)]


def body_hash(request_id: str, kind: str, mode: str, values: Sequence[Any]) -> str:
    """What a request asks, hashed together with its id: the stored hash cannot be matched
    against guessed values without the id itself."""
    text = json.dumps(canonical_values(values), sort_keys=True)
    return request_hash(f"{request_id}\x00{kind}\x00{mode}\x00{text}")


def table_request_id(request_id: str, part: int) -> str:
    """The table-level request id of part ``part`` of a lake request (part 0: the id)."""
    return request_id if part == 0 else f"{request_id}#lake-part-{part}"


def add_table(doc: LakeDoc, uri: str, now: datetime) -> LakeDoc:
    if doc.table(uri) is not None:
        return doc
    return doc.model_copy(update={"tables": (*doc.tables, LakeTable(uri=uri, added_at=now))})


def map_subject(doc: LakeDoc, kind: str, table: str, column: str, now: datetime) -> LakeDoc:
    """Map ``kind`` to ``table.column`` and extend every pending request of ``kind`` to it:
    a pending part of that table gains the column; otherwise the request gains a new part
    for the table."""
    doc = add_table(doc, table, now)
    if any(s.kind == kind and s.table == table and s.column == column for s in doc.subjects):
        return doc
    mapping = SubjectMap(kind=kind, table=table, column=column, mapped_at=now)
    requests = []
    for r in doc.requests:
        if r.kind != kind or not r.pending:
            requests.append(r)
            continue
        mine = [t for t in r.tables if t.table == table]
        open_part = next((t for t in mine if t.state == "pending"), None)
        if open_part is not None:
            grown = open_part.model_copy(update={"columns": (*open_part.columns, column)})
            tables = tuple(grown if t is open_part else t for t in r.tables)
        else:
            part = len(mine)
            new = TableState(table=table, part=part, columns=(column,))
            tables = (*r.tables, new)
        requests.append(r.model_copy(update={"tables": tables}))
    return doc.model_copy(
        update={"subjects": (*doc.subjects, mapping), "requests": tuple(requests)}
    )


def record(doc: LakeDoc, req: LakeRequest) -> LakeDoc:
    """Add ``req`` unless its id is there already (then it must ask the same thing)."""
    old = doc.request(req.id_hash)
    if old is not None:
        if old.body_hash != req.body_hash:
            raise errors.RequestIdConflict(
                "request id already names a different lake request (other subject kind, "
                "mode or values); a request id identifies one request: use a new id"
            )
        return doc
    return doc.model_copy(update={"requests": (*doc.requests, req)})


def mark_committed(
    doc: LakeDoc,
    id_hash: str,
    done: dict[tuple[str, int], tuple[int | None, int, str]],
    now: datetime,
) -> LakeDoc:
    """Mark the parts ``done`` ((table, part) -> (version, rows, table-level id hash)) of
    request ``id_hash`` committed; a part committed already keeps its first record."""
    r = doc.request(id_hash)
    if r is None:
        return doc
    tables = []
    changed = False
    for t in r.tables:
        got = done.get((t.table, t.part))
        if got is not None and t.state == "pending":
            changed = True
            t = t.model_copy(
                update={
                    "state": "committed",
                    "version": got[0],
                    "rows": got[1],
                    "id_hash": got[2],
                    "committed_at": now,
                }
            )
        tables.append(t)
    if not changed:
        return doc
    new = r.model_copy(update={"tables": tuple(tables)})
    return doc.model_copy(update={"requests": tuple(new if x is r else x for x in doc.requests)})


def cancel(doc: LakeDoc, id_hash: str, reason: str, now: datetime) -> LakeDoc:
    """Cancel request ``id_hash``: its pending parts become ``cancelled`` (never applied);
    parts committed already stay as they are. A no-op when it is cancelled already or has
    no pending part (it finished: nothing left to cancel)."""
    r = doc.request(id_hash)
    if r is None or r.cancelled_at is not None or not r.pending:
        return doc
    tables = tuple(
        t.model_copy(update={"state": "cancelled"}) if t.state == "pending" else t for t in r.tables
    )
    new = r.model_copy(update={"tables": tables, "cancelled_at": now, "cancel_reason": reason})
    return doc.model_copy(update={"requests": tuple(new if x is r else x for x in doc.requests)})
