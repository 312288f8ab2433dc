"""Delete requests and splices: two SQS-driven functions and what they may touch.

* Delete handler (``delete_requests.handler.handler``): batches of up to 100 requests from the
  delete queue, one commit per batch where possible; partial batch failures. It reads the
  table and writes deletion vectors, manifests and the head (conditional PUTs); requests that
  demand erasure are forwarded to the splice queue. It may not delete anything.
* Splice worker (``splice.handler.handler``): an erasure's first job is cut into groups of
  files within ``LETHE_SPLICE_MAX_BYTES`` (bytes moved, copies and footers included), one job
  per group back on the queue, spliced by up to ``splice_concurrency`` invocations at once;
  a group's job re-enqueues what its budget left over (:mod:`lethe.erasure.groups`). It writes new
  data files by multipart upload and aborts its own failed uploads (DESIGN.md §4.5). Reserved concurrency (and the event source's
  maximum concurrency, equal to it so SQS never polls into throttles) keeps splices from
  stampeding one table's head. It may not delete anything either: replaced files go when GC
  finds them unreferenced.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_lambda_event_sources as sources
from constructs import Construct

from infra import constants as c
from infra.constructs.base import Foundation
from infra.constructs.queues import RequestQueues
from infra.constructs.runtime import LetheFunction

# committers also publish the table's Iceberg view when its iceberg_view property is set;
# an erase on an indexed table writes the scrubbed index pieces (lethe.index.erase)
COMMIT_KEYS = (
    c.TOMBSTONE_PREFIX + "*",
    c.INDEX_PREFIX + "*",
    c.MANIFEST_PREFIX + "*",
    c.HEAD_KEY,
    c.METADATA_PREFIX + "*",
)
DELETE_ABOUT = (
    "Applies batches of delete requests as deletion vectors (one commit "
    "per batch); forwards erasure requests to the splice queue."
)
SPLICE_ABOUT = (
    "Physically erases rows by splicing row groups of one data file into "
    "a new object (multipart upload with server-side copies), then commits."
)


class ErasureFunctions(Construct):
    """The delete handler and the splice worker, wired to their queues."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        base: Foundation,
        queues: RequestQueues,
    ) -> None:
        super().__init__(scope, construct_id)
        runtime, storage, config = base.runtime, base.storage, base.config
        splice_url = queues.splice.queue.queue_url
        self.delete_handler: LetheFunction = runtime.for_handler(
            self,
            "DeleteHandler",
            c.DELETE_HANDLER,
            DELETE_ABOUT,
            {c.ENV_TABLE_URI: storage.table_uri, c.ENV_SPLICE_QUEUE_URL: splice_url},
        )
        fn = self.delete_handler.function
        fn.add_event_source(
            sources.SqsEventSource(
                queues.delete.queue,
                batch_size=c.DELETE_BATCH_SIZE,
                max_batching_window=cdk.Duration.seconds(c.DELETE_MAX_BATCHING_WINDOW_SECONDS),
                report_batch_item_failures=True,
            )
        )
        storage.grant_table_read(fn)
        storage.grant_table_put(fn, *COMMIT_KEYS, sid="CommitDeletes")
        queues.splice.grant_send(fn)

        reserved = config.splice_concurrency or None
        env = {
            c.ENV_TABLE_URI: storage.table_uri,
            c.ENV_SPLICE_MAX_BYTES: str(config.splice_max_bytes),
            # the first job fans out to one job per group; a group re-enqueues its rest
            c.ENV_SPLICE_QUEUE_URL: splice_url,
        }
        self.splice_worker: LetheFunction = runtime.for_handler(
            self, "SpliceWorker", c.SPLICE_HANDLER, SPLICE_ABOUT, env, reserved_concurrency=reserved
        )
        fn = self.splice_worker.function
        fn.add_event_source(
            sources.SqsEventSource(
                queues.splice.queue,
                batch_size=c.SPLICE_BATCH_SIZE,
                max_concurrency=reserved,
                report_batch_item_failures=True,
            )
        )
        storage.grant_table_read(fn)
        storage.grant_table_put(fn, c.DATA_PREFIX + "*", *COMMIT_KEYS, sid="WriteSplices")
        storage.grant_multipart_cleanup(fn, c.DATA_PREFIX + "*")
        queues.splice.grant_send(fn)
