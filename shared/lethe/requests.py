"""Delete-request messages (the JSON body of SQS messages) and their batch processing.

The message is a frozen pydantic model, validated from its JSON text (or a decoded object);
the work of a batch — grouping by table, validating filters against each table's schema, one
commit per table — lives here so that handlers stay thin. Nothing here logs keys of people:
request ids are hashed, filters are summarized as counts.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lethe import errors
from lethe.deletes import DeleteRequest, DeleteResult
from lethe.filters import normalize
from lethe.manifest import request_hash
from lethe.store import parse_s3_uri

log = logging.getLogger(__name__)

__all__ = [
    "DeleteRequestMessage",
    "MessageOutcome",
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
    try:
        event: Any = body.decode() if isinstance(body, bytes) else body
        if isinstance(event, str):
            msg = DeleteRequestMessage.model_validate_json(event)
        else:
            msg = DeleteRequestMessage.model_validate(event)
    except ValidationError as e:
        first = e.errors()[0]
        # a location names our fields only: an unknown key is the sender's string, not echoed
        where = ".".join(
            str(p) if isinstance(p, int) or p in DeleteRequestMessage.model_fields else "<extra>"
            for p in first["loc"]
        )
        where = where or "body"
        if first["type"] == "json_invalid":
            raise errors.InvalidRequest(f"message body is not valid JSON: {first['msg']}") from None
        raise errors.InvalidRequest(f"invalid delete request ({where}): {first['msg']}") from None
    if msg.requested_at is None and sent_at is not None:
        msg = msg.model_copy(update={"requested_at": sent_at})
    return msg


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

    @property
    def ok(self) -> bool:
        return self.error is None


def process_delete_messages(
    messages: Sequence[tuple[str, str | bytes | dict[str, Any]]],
    *,
    sent_at: Mapping[str, datetime | None] | None = None,
    open_table: Callable[[str], Any],
    on_committed: Callable[[Any, list[DeleteRequestMessage], Any], None] | None = None,
) -> dict[str, MessageOutcome]:
    """Process one batch: parse, group by table, one commit per table.

    Args:
        messages: ``(message_id, body)`` pairs.
        sent_at: when the queue received each message (by message id): the ``requested_at``
            of a message that does not carry one.
        open_table: opens a table by URI (lets callers inject clients).
        on_committed: called per table after its commit with (table, messages, batch result);
            used to enqueue splices for ``mode="erase"`` requests.
    """
    out: dict[str, MessageOutcome] = {}
    groups: dict[str, list[tuple[str, DeleteRequestMessage]]] = defaultdict(list)
    for mid, body in messages:
        try:
            msg = parse_message(body, sent_at=(sent_at or {}).get(mid))
        except errors.InvalidRequest as e:
            out[mid] = MessageOutcome(mid, error=str(e))
            continue
        groups[msg.table].append((mid, msg))
    for uri, items in groups.items():
        try:
            table = open_table(uri)
        except errors.TableNotFound:
            for mid, m in items:  # the URI is the sender's string: not repeated in the reason
                out[mid] = MessageOutcome(
                    mid, error="no Lethe table at the message's table URI", table=uri, mode=m.mode
                )
            continue
        except errors.LetheError as e:  # e.g. access denied; its text would name the URI
            for mid, m in items:
                out[mid] = MessageOutcome(
                    mid,
                    error=f"{type(e).__name__} opening the table",
                    table=uri,
                    mode=m.mode,
                    retryable=True,
                )
            continue
        valid: list[tuple[str, DeleteRequestMessage]] = []
        schema = table.schema
        for mid, m in items:
            try:
                normalize(m.filters, schema)
            except errors.InvalidRequest as e:
                out[mid] = MessageOutcome(mid, error=str(e), table=uri, mode=m.mode)
                continue
            valid.append((mid, m))
        if not valid:
            continue
        # Redeliveries (same id and body, in the log or twice in this batch) commit once;
        # an id reused for another body fails that message (delete_batch decides both).
        reqs = [DeleteRequest(m.filters, m.request_id, erase=m.mode == "erase") for _, m in valid]
        try:
            res = table.delete_batch(reqs)
        except errors.LetheError as e:
            for mid, m in valid:
                out[mid] = MessageOutcome(
                    mid, error=f"{type(e).__name__}: {e}", table=uri, mode=m.mode, retryable=True
                )
            continue
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
