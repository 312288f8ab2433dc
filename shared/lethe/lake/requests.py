"""Delete-request messages (the JSON body of SQS messages) and their batch processing.

The message is a frozen pydantic model, validated from its JSON text (or a decoded object);
the work of a batch — grouping by table, validating filters against each table's schema, one
commit per table — lives here so that handlers stay thin. Nothing here logs keys of people:
request ids are hashed, filters are summarized as counts.

Two shapes share the queue: a table-level request (``table`` and ``filters``) and a lake
request (``subject`` and ``values``: :class:`LakeRequestMessage`), which goes to
:meth:`lethe.Lake.forget_batch` when the caller has a lake (the delete function's
``LETHE_LAKE_URI``) and fails with a reason otherwise.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
)

from lethe import errors
from lethe.catalog.manifest import request_hash
from lethe.erasure.deletes import DeleteRequest, DeleteResult
from lethe.lake import ForgetRequest, Lake, LakeRequestResult
from lethe.lake.results import reasons
from lethe.reading.filters import normalize
from lethe.storage.store import parse_s3_uri

log = logging.getLogger(__name__)

__all__ = [
    "DeleteRequestMessage",
    "LakeRequestMessage",
    "MessageOutcome",
    "parse_any",
    "parse_message",
    "process_delete_messages",
    "sqs_sent_timestamp",
]


class DeleteRequestMessage(BaseModel):
    """``{"request_id", "table", "filters", "mode", "requested_at"?}`` — one delete request.

    ``requested_at`` is optional: a message without it is dated by the queue (SQS's
    ``SentTimestamp``, see :func:`process_delete_messages`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(min_length=1, max_length=256)
    table: str
    filters: list[Any] = Field(min_length=1)
    mode: Literal["logical", "erase"] = "logical"
    requested_at: datetime | None = None

    @field_validator("table")
    @classmethod
    def _uri(cls, v: str) -> str:
        try:
            parse_s3_uri(v)
        except errors.InvalidRequest as e:  # the reason, without the sender's string
            raise ValueError("table must look like s3://bucket/prefix") from e
        return v

    @field_validator("filters")
    @classmethod
    def _dnf_shape(cls, v: list[Any]) -> list[Any]:
        clauses = v if v and isinstance(v[0], list) and v[0] and isinstance(v[0][0], list) else [v]
        for c in clauses:
            if not isinstance(c, list) or not c:
                raise ValueError("each OR-clause must be a non-empty list of [column, op, value]")
            for p in c:
                if not (
                    isinstance(p, list)
                    and len(p) == 3
                    and isinstance(p[0], str)
                    and isinstance(p[1], str)
                ):
                    raise ValueError("a predicate is [column, op, value]")
        return v

    @property
    def id_hash(self) -> str:
        return request_hash(self.request_id)


def parse_message(
    body: str | bytes | dict[str, Any], *, sent_at: datetime | None = None
) -> DeleteRequestMessage:
    """Validate one message body; any problem is an :class:`InvalidRequest` with the reason.

    ``sent_at`` (the queue's send time) dates a message that carries no ``requested_at``.

    >>> m = parse_message('{"request_id": "r-1", "table": "s3://b/t", "filters": [["id", "=", 1]]}',
    ...                   sent_at=sqs_sent_timestamp("1764150000000"))
    >>> m.requested_at.isoformat()
    '2025-11-26T09:40:00+00:00'
    """
    event = body.decode() if isinstance(body, bytes) else body
    return _validated(DeleteRequestMessage, event, "delete request", sent_at)


def _validated(model: type[_Msg], event: Any, what: str, sent_at: datetime | None) -> _Msg:
    """``event`` (JSON text, or decoded) as a ``model`` message, dated ``sent_at`` when it
    carries no ``requested_at``; a validation error is an InvalidRequest naming ``what``."""
    try:
        if isinstance(event, str):
            msg = model.model_validate_json(event)
        else:
            msg = model.model_validate(event)
    except ValidationError as e:
        raise _invalid(e, model, what) from None
    if msg.requested_at is None and sent_at is not None:
        msg = msg.model_copy(update={"requested_at": sent_at})
    return msg


class LakeRequestMessage(BaseModel):
    """``{"request_id", "subject", "values", "mode", "requested_at"?}`` — forget ``values``
    of subject kind ``subject`` in every table of the lake that maps it. ``mode`` defaults to
    ``"erase"`` (as :meth:`lethe.Lake.forget`); ``requested_at`` to the queue's send time.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    request_id: str = Field(min_length=1, max_length=256)
    subject: str = Field(min_length=1, max_length=128)
    values: list[StrictInt | StrictStr | StrictFloat] = Field(min_length=1, max_length=10_000)
    mode: Literal["logical", "erase"] = "erase"
    requested_at: datetime | None = None

    @property
    def id_hash(self) -> str:
        return request_hash(self.request_id)


def _invalid(e: ValidationError, model: type[BaseModel], what: str) -> errors.InvalidRequest:
    first = e.errors()[0]
    # a location names our fields only: an unknown key is the sender's string, not echoed;
    # a name after a list index is pydantic's tag of a union's branch (values.0.int): dropped
    parts: list[str] = []
    for i, p in enumerate(first["loc"]):
        if isinstance(p, int) or p in model.model_fields:
            parts.append(str(p))
        elif not (i and isinstance(first["loc"][i - 1], int)):
            parts.append("<extra>")
    where = ".".join(parts)
    if first["type"] == "json_invalid":
        return errors.InvalidRequest(f"message body is not valid JSON: {first['msg']}")
    return errors.InvalidRequest(f"invalid {what} ({where or 'body'}): {first['msg']}")


_Msg = TypeVar("_Msg", DeleteRequestMessage, LakeRequestMessage)

#: the largest body a message may have (SQS's own maximum message size, 1 MiB)
MAX_BODY_BYTES = 1 << 20


def _text(body: Any) -> Any:
    """``body`` as text (bytes decoded), refused with the reason when it is too large or
    not UTF-8; a decoded object passes as it is."""
    if not isinstance(body, bytes | str):
        return body
    if len(body) > MAX_BODY_BYTES:
        unit = "bytes" if isinstance(body, bytes) else "characters"
        raise errors.InvalidRequest(f"message body is over {MAX_BODY_BYTES:,} {unit}")
    try:
        if isinstance(body, bytes):
            return body.decode()
        body.encode()  # a lone surrogate: what invalid UTF-8 decodes to
    except UnicodeError:
        raise errors.InvalidRequest("message body is not valid UTF-8") from None
    return body


def _decode(text: str) -> Any:
    """The JSON document ``text`` holds; any problem (bad JSON, nesting too deep for the
    parser, a number too long to convert) is an :class:`InvalidRequest` with the reason."""
    try:
        decoded = json.loads(text)
    except json.JSONDecodeError as e:
        raise errors.InvalidRequest(f"message body is not valid JSON: {e.msg}") from None
    except RecursionError:
        raise errors.InvalidRequest("message body is JSON nested too deeply") from None
    except ValueError:  # e.g. an integer past the interpreter's digit limit
        raise errors.InvalidRequest("message body holds a number too long to read") from None
    try:
        _check_text(decoded)  # a lone surrogate escape ("\\ud800"): no UTF-8 for it
    except (RecursionError, ValueError):
        raise errors.InvalidRequest("message body holds text that is not valid UTF-8") from None
    return decoded


def _check_text(doc: Any) -> None:
    """Raise ValueError when a string of ``doc`` (keys included) cannot be UTF-8."""
    stack = [doc]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            x.encode()
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def parse_any(
    body: str | bytes | dict[str, Any], *, sent_at: datetime | None = None
) -> DeleteRequestMessage | LakeRequestMessage:
    """A table-level message (:func:`parse_message`), or a lake message when the body names
    a ``subject`` and no ``table``; any problem is an :class:`InvalidRequest` with the reason.

    >>> parse_any('{"request_id": "r-1", "subject": "customer", "values": [42]}').mode
    'erase'
    """
    event = _text(body)
    decoded = _decode(event) if isinstance(event, str) else event
    if not (isinstance(decoded, dict) and "subject" in decoded and "table" not in decoded):
        return parse_message(event, sent_at=sent_at)
    return _validated(LakeRequestMessage, event, "lake request", sent_at)


def sqs_sent_timestamp(value: str | int | None) -> datetime | None:
    """SQS's ``SentTimestamp`` attribute (epoch milliseconds, as a string) as a UTC datetime.

    >>> sqs_sent_timestamp("0").isoformat()
    '1970-01-01T00:00:00+00:00'
    >>> sqs_sent_timestamp(None) is None
    True
    """
    if value is None or value == "":
        return None
    try:
        return datetime.fromtimestamp(int(value) / 1000, tz=UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


@dataclass(frozen=True, slots=True)
class MessageOutcome:
    """What happened to one message: ``error`` set means report it as a batch item failure."""

    message_id: str
    error: str | None = None
    result: DeleteResult | None = None
    table: str | None = None
    mode: str | None = None
    retryable: bool = False
    lake: LakeRequestResult | None = None  # a lake request's outcome (every table)

    @property
    def ok(self) -> bool:
        return self.error is None


def process_delete_messages(
    messages: Sequence[tuple[str, str | bytes | dict[str, Any]]],
    *,
    sent_at: Mapping[str, datetime | None] | None = None,
    open_table: Callable[[str], Any],
    on_committed: Callable[[Any, list[DeleteRequestMessage], Any], None] | None = None,
    lake: Callable[[], Lake] | None = None,
    on_lake_committed: Callable[[list[LakeRequestResult]], None] | None = None,
) -> dict[str, MessageOutcome]:
    """Process one batch: parse, group by table, one commit per table; lake messages go to
    ``lake`` in one :meth:`~lethe.Lake.forget_batch` (splices left to the caller).

    Args:
        messages: ``(message_id, body)`` pairs.
        sent_at: when the queue received each message (by message id): the ``requested_at``
            of a message that does not carry one.
        open_table: opens a table by URI (lets callers inject clients).
        on_committed: called per table after its commit with (table, messages, batch result);
            used to enqueue splices for ``mode="erase"`` requests.
        lake: opens the lake that lake messages go to, called only when the batch holds one
            (None: they fail, not retryable).
        on_lake_committed: called with the lake results (to enqueue their splices).
    """
    out: dict[str, MessageOutcome] = {}
    groups: dict[str, list[tuple[str, DeleteRequestMessage]]] = defaultdict(list)
    lake_items: list[tuple[str, LakeRequestMessage]] = []
    for mid, body in messages:
        try:
            msg = parse_any(body, sent_at=(sent_at or {}).get(mid))
        except errors.InvalidRequest as e:
            out[mid] = MessageOutcome(mid, error=str(e))
            continue
        except Exception as e:  # one message, however malformed, fails alone (issue 35)
            out[mid] = MessageOutcome(mid, error=f"unreadable message ({type(e).__name__})")
            continue
        if isinstance(msg, LakeRequestMessage):
            lake_items.append((mid, msg))
        else:
            groups[msg.table].append((mid, msg))
    if lake_items:
        out.update(_process_lake(lake_items, lake, on_lake_committed))
    for uri, items in groups.items():
        out.update(_process_table(uri, items, open_table, on_committed))
    return out


def _process_lake(
    items: Sequence[tuple[str, LakeRequestMessage]],
    open_lake: Callable[[], Lake] | None,
    on_committed: Callable[[list[LakeRequestResult]], None] | None,
) -> dict[str, MessageOutcome]:
    """The lake messages of a batch: one ``forget_batch`` (one commit per table); a request
    some table could not commit yet fails retryably (its redelivery finishes it)."""
    if open_lake is None:
        why = "a lake request (subject, values), but this function has no lake (LETHE_LAKE_URI)"
        return {mid: MessageOutcome(mid, error=why, mode=m.mode) for mid, m in items}
    reqs = [
        ForgetRequest(m.subject, m.values, m.request_id, m.mode, m.requested_at) for _, m in items
    ]
    try:
        lake = open_lake()
        results = lake.forget_batch(reqs, splice=False)
    except errors.LetheError as e:
        why = f"{type(e).__name__} on the lake registry"
        return {
            mid: MessageOutcome(mid, error=why, mode=m.mode, retryable=True) for mid, m in items
        }
    if on_committed is not None:
        on_committed(results)
    out: dict[str, MessageOutcome] = {}
    for (mid, m), r in zip(items, results, strict=True):
        failed = [t for t in r.tables if t.state != "committed"]
        error, retryable = r.error, False
        if error is None and failed:
            error = (
                f"{len(failed)} of {len(r.tables)} lake table(s) did not commit ({reasons(failed)})"
            )
            retryable = True
        out[mid] = MessageOutcome(mid, error=error, mode=m.mode, retryable=retryable, lake=r)
    log.info(
        "lake %s: %d requests, %d rows deleted, %d failed",
        lake.uri,
        len(items),
        sum(r.rows_deleted for r in results),
        sum(1 for o in out.values() if not o.ok),
    )
    return out


def _process_table(
    uri: str,
    items: Sequence[tuple[str, DeleteRequestMessage]],
    open_table: Callable[[str], Any],
    on_committed: Callable[[Any, list[DeleteRequestMessage], Any], None] | None,
) -> dict[str, MessageOutcome]:
    """The table-level messages of a batch for one table: one commit."""

    def failed(
        items: Sequence[tuple[str, DeleteRequestMessage]], why: str, retry: bool
    ) -> dict[str, MessageOutcome]:
        return {
            mid: MessageOutcome(mid, error=why, table=uri, mode=m.mode, retryable=retry)
            for mid, m in items
        }

    try:
        table = open_table(uri)
    except errors.TableNotFound:  # the URI is the sender's string: not repeated in the reason
        return failed(items, "no Lethe table at the message's table URI", False)
    except errors.LetheError as e:  # e.g. access denied; its text would name the URI
        return failed(items, f"{type(e).__name__} opening the table", True)
    out: dict[str, MessageOutcome] = {}
    valid: list[tuple[str, DeleteRequestMessage]] = []
    schema = table.schema
    for mid, m in items:
        why = _filters_refused(m, schema)
        if why is None:
            valid.append((mid, m))
        else:
            out[mid] = MessageOutcome(mid, error=why, table=uri, mode=m.mode)
    if not valid:
        return out
    # Redeliveries (same id and body, in the log or twice in this batch) commit once;
    # an id reused for another body fails that message (delete_batch decides both).
    reqs = [DeleteRequest(m.filters, m.request_id, erase=m.mode == "erase") for _, m in valid]
    try:
        res = table.delete_batch(reqs)
    except errors.LetheError as e:
        return {**out, **failed(valid, f"{type(e).__name__}: {e}", True)}
    log.info(
        "table %s: %s requests, %s rows deleted, version %s, %s attempts",
        uri,
        len(reqs),
        res.rows_deleted,
        res.version,
        res.attempts,
    )
    if on_committed is not None:
        on_committed(table, [m for _, m in valid], res)
    for (mid, m), r in zip(valid, res.results, strict=True):
        out[mid] = MessageOutcome(mid, error=r.error, result=r, table=uri, mode=m.mode)
    return out


def _filters_refused(m: DeleteRequestMessage, schema: Any) -> str | None:
    """Why ``m``'s filters cannot apply to a table of ``schema`` (None: they can)."""
    try:
        normalize(m.filters, schema)
    except errors.InvalidRequest as e:
        return str(e)
    except Exception as e:  # a filter no rule foresaw fails its own message only
        return f"filters cannot be read against the table ({type(e).__name__})"
    return None
