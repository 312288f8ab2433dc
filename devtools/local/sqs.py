"""Event sources: the template's SQS queues and how events reach functions from them.

``AWS::SQS::Queue`` becomes a moto queue with its redrive policy; every queue the runtime
consumes gets a short visibility timeout, so that retries and the trip to the DLQ take
seconds. ``AWS::Lambda::EventSourceMapping`` (SQS) is polled here: ReceiveMessage up to the
batch size, one invocation with the real SQS event, then DeleteMessage of exactly the
messages not in ``batchItemFailures`` (:func:`failed_ids`, Lambda's rules). A mapping with a
``MaximumConcurrency`` takes up to that many batches per round and invokes them at once,
each in its own execution environment (:meth:`LocalFunction.invoke_many`).
``Custom::S3BucketNotifications`` to a function notify a local queue instead; each S3 event
is then delivered like an asynchronous invocation: retried ``MaximumRetryAttempts`` times,
then sent to the function's dead-letter queue.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from devtools.local.common import ACCOUNT, REGION, LocalRunError
from devtools.local.events import sqs_event
from devtools.local.functions import Invocation, LocalFunction, function_lid
from devtools.local.template import Parts, Physical, lid_of

__all__ = [
    "BatchOutcome",
    "EventSources",
    "Queue",
    "S3Source",
    "SqsSource",
    "brief",
    "concurrency",
    "failed_ids",
]

_QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "FifoQueue",
    "ContentBasedDeduplication",
)


@dataclass(frozen=True, slots=True)
class Queue:
    logical_id: str
    name: str
    url: str
    arn: str
    template_visibility: int | None
    dlq: str | None  # logical id
    max_receive: int | None


@dataclass(frozen=True, slots=True)
class SqsSource:
    queue: str  # logical id
    function: str
    batch_size: int
    report_failures: bool
    window: int
    max_concurrency: int | None


@dataclass(frozen=True, slots=True)
class S3Source:
    bucket: str
    function: str
    queue: str  # the local notification queue's logical id
    events: tuple[str, ...]
    prefix: str
    retries: int
    dead_letter: str | None  # queue logical id


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """One delivery of an event source: what went in, what failed."""

    source: str  # queue or bucket
    function: str  # logical id
    messages: int
    failed: int
    invocation: Invocation


def failed_ids(s: SqsSource, msgs: Sequence[Mapping[str, Any]], inv: Invocation) -> set[str]:
    """The messages Lambda would leave on the queue after this invocation."""
    ids = {str(m["MessageId"]) for m in msgs}
    if not inv.ok:
        return ids
    if not s.report_failures or inv.result is None:
        return set()
    if not isinstance(inv.result, dict):
        return ids  # an unparseable response fails the whole batch
    items = inv.result.get("batchItemFailures")
    if items is None:
        return set()
    failed: set[str] = set()
    for item in items:
        ident = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not ident or ident not in ids:
            return ids  # Lambda treats a bad identifier as a failure of the whole batch
        failed.add(str(ident))
    return failed


def concurrency(s: SqsSource) -> int:
    """How many invocations an event source mapping runs at once locally: its
    ``ScalingConfig.MaximumConcurrency`` (Lambda's bound on the concurrent invocations
    one SQS mapping makes), else 1 (one at a time, as the runtime always did)."""
    return max(1, int(s.max_concurrency or 1))


def brief(result: Any, limit: int = 200) -> str:
    """A handler's JSON result for one progress line: without null, false and empty values."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if x not in (None, False, "", [], {})}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    text = "ok" if result is None else json.dumps(strip(result), separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


class EventSources:
    """The template's queues, its SQS event source mappings and its S3 notifications.

    :meth:`create_queues` first (function environments reference the queues), then
    :meth:`wire` once the functions exist; :meth:`pump_sqs` / :meth:`pump_s3` deliver.

    Attributes:
        queues: logical id -> :class:`Queue` (the S3 notification queues included).
        sqs_sources, s3_sources: what feeds which function.
        outcomes: every delivery, in order.
        dlq_counts: messages seen in each dead-letter queue (logical id) so far.
        skipped: logical id -> why it has no local counterpart.
    """

    def __init__(self, parts: Parts, *, sqs: Any, visibility_timeout: int) -> None:
        self.template, self.names, self.echo = parts.template, parts.names, parts.echo
        self.visibility_timeout = visibility_timeout
        self.queues: dict[str, Queue] = {}
        self.sqs_sources: list[SqsSource] = []
        self.s3_sources: list[S3Source] = []
        self.outcomes: list[BatchOutcome] = []
        self.dlq_counts: dict[str, int] = {}
        self.skipped: dict[str, str] = {}
        self.functions: Mapping[str, LocalFunction] = {}
        self.buckets: Mapping[str, str] = {}
        self._sqs = sqs
        self._s3 = parts.s3

    # ------------------------------------------------------------------ creation
    def _new_queue(
        self,
        lid: str,
        name: str,
        *,
        attributes: Mapping[str, str],
        template_visibility: int | None,
        dlq: str | None = None,
        max_receive: int | None = None,
    ) -> Queue:
        url = self._sqs.create_queue(QueueName=name, Attributes=dict(attributes))["QueueUrl"]
        arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
        q = Queue(lid, name, url, arn, template_visibility, dlq, max_receive)
        self.queues[lid] = q
        self.template.physical[lid] = Physical(
            url, {"Arn": arn, "QueueName": name, "QueueUrl": url}
        )
        return q

    def create_queues(self) -> None:
        """Every ``AWS::SQS::Queue``, then the redrive policies (a DLQ by its local ARN)."""
        consumed = {
            lid_of(p.get("EventSourceArn"))
            for p in self.template.of_type("AWS::Lambda::EventSourceMapping").values()
        }
        redrives: dict[str, tuple[str, int]] = {}
        for lid, props in self.template.of_type("AWS::SQS::Queue").items():
            fifo = bool(props.get("FifoQueue"))
            name = props.get("QueueName") or self.names.of(lid, 75 if fifo else 80)
            if fifo and not name.endswith(".fifo"):
                name += ".fifo"
            attrs: dict[str, str] = {}
            for key in _QUEUE_ATTRIBUTES:
                if key in props:
                    v = props[key]
                    attrs[key] = str(v).lower() if isinstance(v, bool) else str(v)
            visibility = props.get("VisibilityTimeout")
            if lid in consumed:
                attrs["VisibilityTimeout"] = str(self.visibility_timeout)
            elif visibility is not None:
                attrs["VisibilityTimeout"] = str(visibility)
            redrive = props.get("RedrivePolicy")
            dlq_lid = lid_of(redrive.get("deadLetterTargetArn")) if redrive else None
            if redrive and dlq_lid:
                redrives[lid] = (dlq_lid, int(redrive["maxReceiveCount"]))
            self._new_queue(
                lid,
                name,
                attributes=attrs,
                template_visibility=None if visibility is None else int(visibility),
                dlq=dlq_lid,
                max_receive=redrives.get(lid, (None, None))[1],
            )
        for lid, (dlq_lid, count) in redrives.items():
            policy = {"deadLetterTargetArn": self.queues[dlq_lid].arn, "maxReceiveCount": count}
            self._sqs.set_queue_attributes(
                QueueUrl=self.queues[lid].url, Attributes={"RedrivePolicy": json.dumps(policy)}
            )

    def wire(self, functions: Mapping[str, LocalFunction], buckets: Mapping[str, str]) -> None:
        """Connect the queues and buckets (logical id -> name) to the functions."""
        self.functions = functions
        self.buckets = buckets
        self._wire_sqs_sources()
        self._wire_notifications()

    def _wire_sqs_sources(self) -> None:
        for lid, props in self.template.of_type("AWS::Lambda::EventSourceMapping").items():
            queue = lid_of(props.get("EventSourceArn"))
            fn = function_lid(props.get("FunctionName"), self.functions)
            if queue not in self.queues or fn not in self.functions:
                self.skipped[lid] = "event source mapping not from an SQS queue of the template"
                continue
            assert queue is not None and fn is not None
            if props.get("Enabled") is False:
                self.skipped[lid] = "disabled in the template"
                continue
            self.sqs_sources.append(
                SqsSource(
                    queue=queue,
                    function=fn,
                    batch_size=int(props.get("BatchSize", 10)),
                    report_failures="ReportBatchItemFailures"
                    in (props.get("FunctionResponseTypes") or []),
                    window=int(props.get("MaximumBatchingWindowInSeconds", 0)),
                    max_concurrency=(props.get("ScalingConfig") or {}).get("MaximumConcurrency"),
                )
            )
            self.template.physical[lid] = Physical(f"local-esm-{lid}")

    def _async_config(self, fn_lid: str) -> tuple[int, str | None]:
        """(MaximumRetryAttempts, dead-letter queue logical id) of a function."""
        retries = 2  # Lambda's default for asynchronous invocations
        for props in self.template.of_type("AWS::Lambda::EventInvokeConfig").values():
            if function_lid(props.get("FunctionName"), self.functions) == fn_lid:
                retries = int(props.get("MaximumRetryAttempts", retries))
                on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get(
                    "Destination"
                )
                if on_failure is not None and lid_of(on_failure) in self.queues:
                    return retries, lid_of(on_failure)
        props = self.template.resources[fn_lid].get("Properties") or {}
        target = (props.get("DeadLetterConfig") or {}).get("TargetArn")
        dlq = lid_of(target) if target is not None else None
        return retries, dlq if dlq in self.queues else None

    def _wire_notifications(self) -> None:
        for lid, props in self.template.of_type("Custom::S3BucketNotifications").items():
            bucket_lid = lid_of(props.get("BucketName"))
            if bucket_lid not in self.buckets:
                self.skipped[lid] = "notifications of a bucket outside the template"
                continue
            assert bucket_lid is not None
            config = props.get("NotificationConfiguration") or {}
            queue_configs: list[dict[str, Any]] = []
            for c in config.get("LambdaFunctionConfigurations", []):
                fn = function_lid(c.get("LambdaFunctionArn"), self.functions)
                if fn not in self.functions:
                    raise LocalRunError(f"{lid}: notifies a function without a local handler")
                assert fn is not None
                qlid = f"{fn}S3Events"
                q = self._new_queue(
                    qlid,
                    self.names.of(qlid, 80),
                    attributes={"VisibilityTimeout": str(self.visibility_timeout)},
                    template_visibility=None,
                )
                rules = (c.get("Filter") or {}).get("Key", {}).get("FilterRules", [])
                prefix = next((r["Value"] for r in rules if r["Name"].lower() == "prefix"), "")
                retries, dlq = self._async_config(fn)
                self.s3_sources.append(
                    S3Source(
                        bucket=bucket_lid,
                        function=fn,
                        queue=qlid,
                        events=tuple(c.get("Events", [])),
                        prefix=prefix,
                        retries=retries,
                        dead_letter=dlq,
                    )
                )
                local = {"QueueArn": q.arn, "Events": list(c.get("Events", []))}
                if c.get("Filter"):
                    local["Filter"] = c["Filter"]
                queue_configs.append(local)
            for c in config.get("QueueConfigurations", []):
                queue_configs.append(self.template.resolve(c))
            if config.get("TopicConfigurations"):
                self.skipped[f"{lid}.TopicConfigurations"] = "SNS notifications are not wired"
            self._s3.put_bucket_notification_configuration(
                Bucket=self.buckets[bucket_lid],
                NotificationConfiguration={"QueueConfigurations": queue_configs},
            )
            self.template.physical[lid] = Physical(f"local-notifications-{lid}")

    # ------------------------------------------------------------------ lookups
    def queue(self, key: str) -> Queue:
        """A queue by logical id, name, URL or ARN."""
        for q in self.queues.values():
            if key in (q.logical_id, q.name, q.url, q.arn):
                return q
        raise KeyError(f"no queue {key!r}")

    def depth(self, q: Queue) -> dict[str, int]:
        """Approximate visible / in-flight / delayed message counts of a queue."""
        a = self._sqs.get_queue_attributes(
            QueueUrl=q.url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return {
            "visible": int(a.get("ApproximateNumberOfMessages", 0)),
            "in_flight": int(a.get("ApproximateNumberOfMessagesNotVisible", 0)),
            "delayed": int(a.get("ApproximateNumberOfMessagesDelayed", 0)),
        }

    def peek(self, q: Queue, *, max_messages: int = 10) -> list[dict[str, Any]]:
        """Read messages of a queue (a DLQ, say) without consuming them: received, then made
        visible again at once."""
        r = self._sqs.receive_message(
            QueueUrl=q.url,
            MaxNumberOfMessages=max(1, min(10, max_messages)),
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
            VisibilityTimeout=0,
        )
        return list(r.get("Messages", []))

    def busy(self) -> list[str]:
        """The consumed queues still holding messages (visible, in flight or delayed)."""
        busy = []
        for lid in [s.queue for s in self.sqs_sources] + [n.queue for n in self.s3_sources]:
            d = self.depth(self.queues[lid])
            if any(d.values()):
                busy.append(f"{self.queues[lid].name} {d}")
        return busy

    def describe(self) -> list[str]:
        """One line per queue and per event source."""
        lines = []
        for q in self.queues.values():
            redrive = (
                f" -> DLQ {self.queues[q.dlq].name} after {q.max_receive} receives" if q.dlq else ""
            )
            vis = ""
            if any(s.queue == q.logical_id for s in self.sqs_sources) or any(
                s.queue == q.logical_id for s in self.s3_sources
            ):
                was = f"{q.template_visibility}s" if q.template_visibility is not None else "-"
                vis = f" visibility {self.visibility_timeout}s (template {was})"
            lines.append(f"queue    {q.name:<44}{vis}{redrive}")
        for s in self.sqs_sources:
            f = self.functions[s.function]
            lines.append(
                f"sqs      {self.queues[s.queue].name} -> {f.handler} "
                f"(batch {s.batch_size}, partial failures: {s.report_failures})"
            )
        for n in self.s3_sources:
            f = self.functions[n.function]
            dlq = f", then DLQ {self.queues[n.dead_letter].name}" if n.dead_letter else ""
            lines.append(
                f"s3       {self.buckets[n.bucket]}/{n.prefix}* {','.join(n.events)} -> "
                f"{self.queues[n.queue].name} -> {f.handler} (async: {n.retries} retries{dlq})"
            )
        return lines

    # ------------------------------------------------------------------ delivery
    def _receive(self, url: str, want: int) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while len(got) < want:
            r = self._sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=min(10, want - len(got)),
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=0,
            )
            batch = r.get("Messages", [])
            if not batch:
                break
            got.extend(batch)
        return got

    def _delete(self, url: str, messages: Sequence[Mapping[str, Any]]) -> None:
        for i in range(0, len(messages), 10):
            chunk = messages[i : i + 10]
            r = self._sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[
                    {"Id": str(n), "ReceiptHandle": m["ReceiptHandle"]} for n, m in enumerate(chunk)
                ],
            )
            if r.get("Failed"):
                raise LocalRunError(f"DeleteMessageBatch failed: {r['Failed']}")

    def pump_sqs(self, s: SqsSource) -> int:
        """One round of an event source mapping: up to its concurrency of batches, run at
        once (:func:`concurrency`); returns how many messages they held."""
        q = self.queues[s.queue]
        fn = self.functions[s.function]
        batches: list[list[dict[str, Any]]] = []
        for _ in range(concurrency(s)):
            msgs = self._receive(q.url, s.batch_size)
            if not msgs:
                break
            batches.append(msgs)
        if not batches:
            return 0
        problems = len(fn.sink.problems)
        events = [sqs_event(msgs, queue_arn=q.arn, region=REGION) for msgs in batches]
        invocations = fn.invoke_many(events)
        for msgs, inv in zip(batches, invocations, strict=True):
            self._settle(s, msgs, inv, problems)
        return sum(len(m) for m in batches)

    def _settle(
        self, s: SqsSource, msgs: Sequence[Mapping[str, Any]], inv: Invocation, problems: int
    ) -> None:
        """Delete what one invocation processed (Lambda's partial batch rules), record it."""
        q = self.queues[s.queue]
        fn = self.functions[s.function]
        failed = failed_ids(s, msgs, inv)
        self._delete(q.url, [m for m in msgs if m["MessageId"] not in failed])
        outcome = BatchOutcome(q.name, s.function, len(msgs), len(failed), inv)
        self.outcomes.append(outcome)
        self._timeout_note(fn, inv)
        text = f"sqs {q.name} -> {fn.handler}: batch of {len(msgs)}"
        if not failed:
            text += f", all done in {inv.seconds:.2f}s"
        else:
            counts = sorted(
                {
                    int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0))
                    for m in msgs
                    if m["MessageId"] in failed
                }
            )
            limit = f"/{q.max_receive}" if q.max_receive else ""
            new = fn.sink.problems[problems:]
            own = [p for p in new if not p.startswith("unhandled exception")]
            logged = "; ".join(dict.fromkeys((own or new)[:2]))
            why = logged or (inv.error or "").split("\n", 1)[0]
            text += (
                f", {len(msgs) - len(failed)} done, {len(failed)} failed "
                f"(receive {','.join(map(str, counts))}{limit}; back after "
                f"{self.visibility_timeout}s) in {inv.seconds:.2f}s"
                + (f": {why[:160]}" if why else "")
            )
        self.echo(text)

    def _timeout_note(self, fn: LocalFunction, inv: Invocation) -> None:
        if inv.seconds > fn.timeout:
            self.echo(
                f"note: {fn.handler} ran {inv.seconds:.0f}s, over its {fn.timeout}s timeout "
                "(AWS would have stopped it)"
            )

    def pump_s3(self, n: S3Source) -> int:
        """The S3 events waiting for one function, each delivered as an asynchronous
        invocation; returns how many were delivered."""
        q = self.queues[n.queue]
        fn = self.functions[n.function]
        msgs = self._receive(q.url, 10)
        delivered = 0
        for m in msgs:
            body = json.loads(m["Body"])
            if body.get("Event") == "s3:TestEvent":
                self._delete(q.url, [m])
                continue
            delivered += 1
            keys = [unquote_plus(r["s3"]["object"]["key"]) for r in body.get("Records", [])]
            attempts: list[Invocation] = []
            for _ in range(1 + n.retries):
                inv = fn.invoke(body)
                attempts.append(inv)
                self._timeout_note(fn, inv)
                if inv.ok:
                    break
            last = attempts[-1]
            what = f"s3 {self.buckets[n.bucket]}/{','.join(keys)} -> {fn.handler}"
            if last.ok:
                summary = brief(last.result)
                tries = f" (after {len(attempts) - 1} retries)" if len(attempts) > 1 else ""
                self.echo(f"{what}: {summary} in {last.seconds:.2f}s{tries}")
            else:
                dest = ""
                if n.dead_letter:
                    dlq = self.queues[n.dead_letter]
                    self._sqs.send_message(
                        QueueUrl=dlq.url,
                        MessageBody=json.dumps(body),
                        MessageAttributes={
                            "RequestID": {"DataType": "String", "StringValue": str(uuid.uuid4())},
                            "ErrorCode": {"DataType": "Number", "StringValue": "200"},
                            "ErrorMessage": {
                                "DataType": "String",
                                "StringValue": (last.error or "")[:256],
                            },
                        },
                    )
                    dest = f"; event sent to DLQ {dlq.name}"
                error = (last.error or "").split("\n", 1)[0][:200]
                self.echo(f"{what}: failed {len(attempts)} times: {error}{dest}")
            self._delete(q.url, [m])
        return delivered

    def watch_dead_letters(self) -> None:
        """Report messages newly arrived in a dead-letter queue."""
        for q in self.queues.values():
            if not any(q.logical_id == other.dlq for other in self.queues.values()) and not any(
                q.logical_id == n.dead_letter for n in self.s3_sources
            ):
                continue
            d = self.depth(q)
            n = d["visible"] + d["in_flight"] + d["delayed"]
            before = self.dlq_counts.get(q.logical_id, 0)
            if n > before:
                self.echo(f"dead-letter queue {q.name}: {n - before} new message(s), {n} in all")
            self.dlq_counts[q.logical_id] = n
