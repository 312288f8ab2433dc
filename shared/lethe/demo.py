"""``make demo``: the local end-to-end story on embedded defaults (moto's server on 127.0.0.1).

Run: ``python -m lethe.demo [--rows N]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from lethe.local.server import start_moto
from lethe.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)


def generate(start: int, n: int, *, customers: int = 10_000, seed: int = 7) -> pa.Table:
    """Synthetic events: ids ``start..start+n``, sorted by id."""
    rng = np.random.default_rng(seed + start)
    ids = np.arange(start, start + n, dtype=np.int64)
    words = np.array(["click", "view", "buy", "share", "login", "logout", "search", "rate"])
    payload = pa.compute.binary_join_element_wise(
        pa.array(words[rng.integers(0, len(words), n)]),
        pa.array(rng.integers(0, 1_000_000, n).astype(str)),
        ":",
    )
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(
                1_700_000_000_000_000 + ids * 37_000, pa.timestamp("us", tz="UTC")
            ),
            "customer_id": pa.array(rng.integers(0, customers, n).astype(np.int32)),
            "payload": payload,
        },
        schema=SCHEMA,
    )


class Story:
    """Prints numbered steps with timings."""

    def __init__(self) -> None:
        self.n = 0
        self.t0 = time.perf_counter()

    def step(self, title: str) -> None:
        self.n += 1
        print(f"\n[{self.n}] {title}  (t+{time.perf_counter() - self.t0:.1f}s)", flush=True)

    def say(self, msg: str) -> None:
        print(f"    {msg}", flush=True)

    def timed(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        t = time.perf_counter()
        r = fn()
        return r, time.perf_counter() - t


def run(rows: int = 1_000_000, *, batches: int = 4) -> dict[str, Any]:
    story = Story()
    results: dict[str, Any] = {}
    with start_moto() as aws:
        story.step(f"embedded S3: moto's server on {aws.endpoint}")
        s3 = aws.client("s3")
        s3.create_bucket(Bucket="lethe-demo")
        uri = "s3://lethe-demo/tables/events"
        t = Table.create(uri, SCHEMA, key="id", target_file_bytes=8 << 20, row_group_bytes=1 << 20)
        story.say(f"created {uri}: key=id, columns={SCHEMA.names}")

        story.step(f"append {rows:,} generated rows in {batches} commits")
        per = rows // batches
        for b in range(batches):
            n = per if b < batches - 1 else rows - per * (batches - 1)
            r, secs = story.timed(partial(_append, t, b * per, n))
            story.say(
                f"v{r.version}: +{r.rows_added:,} rows in {r.files_added} files, {secs:.2f}s; {r.io.describe()}"
            )
        m = t.manifest
        story.say(
            f"table: {len(m.files)} files, {sum(len(f.row_groups) for f in m.files)} row groups, "
            f"{sum(f.size for f in m.files):,} bytes"
        )

        story.step("scan: full, projected, filtered")
        before = t.io
        full, secs = story.timed(t.scan)
        story.say(f"full scan: {full.num_rows:,} rows in {secs:.2f}s; {(t.io - before).describe()}")
        before = t.io
        proj, secs = story.timed(lambda: t.scan(["id", "customer_id"], [("customer_id", "=", 42)]))
        story.say(f"customer 42: {proj.num_rows} rows in {secs:.2f}s; {(t.io - before).describe()}")
        results["rows"] = full.num_rows

        story.step("point lookups (warm snapshot: footers cached)")
        key = rows // 2 + 17
        t.lookup(key)  # warm the footer cache for this file
        before = t.io
        hit, secs = story.timed(lambda: t.lookup(key))
        d = t.io - before
        story.say(f"lookup id={key}: {hit.to_pylist()} in {secs * 1000:.1f} ms; {d.describe()}")
        results["lookup_gets"] = d.count("get")

        story.step("GDPR delete requests on SQS -> the delete-request Lambda (one batch)")
        results.update(_sqs_deletes(story, aws, t, uri, rows))

        story.step("time travel and history")
        old = Table.open(uri, version=1)
        story.say(
            f"version 1 has {old.scan(['id']).num_rows:,} rows; latest has {t.refresh().scan(['id']).num_rows:,}"
        )
        for h in t.history():
            story.say(
                f"v{h.version:<3} {h.operation:<8} +{h.rows_added:<9,} -{h.rows_deleted:<7,} live={h.live_rows:,} files={h.live_files}"
            )
        story.step("totals")
        story.say(f"all requests of this handle: {t.io.describe()}")
    return results


def _append(t: Table, start: int, n: int) -> Any:
    return t.append(generate(start, n))


def _sqs_deletes(story: Story, aws: Any, t: Table, uri: str, rows: int) -> dict[str, Any]:
    import json
    import os

    from lethe.local.events import LambdaContext, sqs_event

    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "lethe-delete-requests")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "Lethe")
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    from functions.delete_requests import handler as delete_handler

    sqs = aws.client("sqs")
    url = sqs.create_queue(QueueName="lethe-delete-requests")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    victims = [rows // 2 + 17, 12, rows - 1]
    customer = int(t.lookup(victims[0], ["customer_id"])["customer_id"][0].as_py())
    bodies: list[dict[str, Any]] = [
        {"request_id": "gdpr-0001", "filters": [["id", "=", victims[0]]]},
        {"request_id": "gdpr-0002", "filters": [["id", "in", victims[1:]]]},
        {"request_id": "gdpr-0003", "filters": [["customer_id", "=", customer]]},
        {"request_id": "gdpr-0001", "filters": [["id", "=", victims[0]]]},  # redelivered
    ]
    for b in bodies:
        msg = {**b, "table": uri, "mode": "logical", "requested_at": "2026-11-22T10:00:00Z"}
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(msg))
    sqs.send_message(QueueUrl=url, MessageBody='{"request_id": "broken", "table": ')
    msgs: list[dict[str, Any]] = []
    while len(msgs) < len(bodies) + 1:
        r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)
        msgs.extend(r.get("Messages", []))
    before_rows = t.refresh().scan(["id"]).num_rows
    customer_rows = t.scan(["id"], [("customer_id", "=", customer)]).num_rows
    story.say(
        f"{len(msgs)} messages on the queue: 3 requests + 1 redelivery + 1 malformed; "
        f"customer #{customer} has {customer_rows} rows"
    )
    resp, secs = story.timed(
        lambda: delete_handler.handler(sqs_event(msgs, queue_arn=arn), LambdaContext())
    )
    failed = len(resp["batchItemFailures"])
    t.refresh()
    after_rows = t.scan(["id"]).num_rows
    story.say(
        f"handler: {secs * 1000:.0f} ms, {failed} batch item failure(s) reported (-> DLQ after maxReceiveCount)"
    )
    story.say(
        f"one commit -> version {t.version}: {before_rows - after_rows} rows deleted, {before_rows:,} -> {after_rows:,}"
    )
    story.say(
        f"lookup id={victims[0]} now returns {t.lookup(victims[0]).num_rows} rows; customer #{customer}: {t.scan(['id'], [('customer_id', '=', customer)]).num_rows} rows"
    )
    f = next(f for f in t.manifest.files if f.dv is not None)
    assert f.dv is not None
    story.say(
        f"deletion vector of {f.path.rsplit('/', 1)[-1]}: {f.dv.cardinality} positions in {f.dv.container} ({f.dv.length} bytes)"
    )
    return {"deleted": before_rows - after_rows, "failed": failed}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=1_000_000)
    a = p.parse_args()
    run(a.rows)


if __name__ == "__main__":
    main()
