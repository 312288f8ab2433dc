"""Splice work items: how erase requests reach the bounded splice worker.

A committed erase request leaves an :class:`~lethe.catalog.manifest.ErasureRecord` (state
``pending``) in the manifest naming the row groups that hold its (already invisible) rows.
The delete handler then puts one small message per erasure on the splice queue:
``{"table": uri, "erasure": <request hash>}`` — no keys, no filters. The worker cuts the
erasure's pending files into groups within its byte budget and puts one job per group back
on the queue (``"files"``: the group's data-file paths), so that several invocations splice
the erasure at once (:mod:`lethe.erasure.groups`); a group's job splices and commits its
files, and re-enqueues itself for what its budget left over.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lethe import errors
from lethe.catalog.manifest import request_hash

log = logging.getLogger(__name__)

__all__ = ["SpliceJob", "enqueue_erasures", "send_jobs"]


class SpliceJob(BaseModel):
    """Body of a splice-queue message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    table: str
    erasure: str = Field(min_length=8, max_length=64)
    attempt: int = 0
    #: one group's data files (table-relative paths); empty: cut the erasure into groups
    files: tuple[str, ...] = Field(default=(), max_length=256)
    #: the manifest version the groups were cut from (a group adopts files added after it)
    planned: int | None = None


def send_jobs(jobs: Sequence[SpliceJob], *, queue_url: str, sqs: Any | None = None) -> int:
    """Send jobs in batches of 10 (SendMessageBatch). Returns the number sent."""
    if not jobs:
        return 0
    if sqs is None:
        import boto3

        sqs = boto3.client("sqs")
    sent = 0
    for i in range(0, len(jobs), 10):
        chunk = jobs[i : i + 10]
        r = sqs.send_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(n), "MessageBody": j.model_dump_json()} for n, j in enumerate(chunk)
            ],
        )
        if r.get("Failed"):
            raise errors.QueueError(
                f"splice queue rejected {len(r['Failed'])} messages: {json.dumps(r['Failed'])[:200]}"
            )
        sent += len(chunk)
    return sent


def enqueue_erasures(
    table: Any, messages: Sequence[Any], *, queue_url: str | None, sqs: Any | None = None
) -> list[SpliceJob]:
    """Splice jobs for the erase requests among ``messages`` that this commit recorded."""
    hashes = {request_hash(m.request_id) for m in messages if getattr(m, "mode", None) == "erase"}
    pending = {e.id_hash for e in table.manifest.erasures if e.state == "pending"}
    jobs = [SpliceJob(table=table.uri, erasure=h) for h in sorted(hashes & pending)]
    if jobs and queue_url:
        send_jobs(jobs, queue_url=queue_url, sqs=sqs)
        log.info("enqueued %s splice jobs for %s", len(jobs), table.uri)
    elif jobs:
        log.info("%s erasures pending on %s (no splice queue configured)", len(jobs), table.uri)
    return jobs
