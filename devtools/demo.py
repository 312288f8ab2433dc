"""``make demo``: the whole story, event-driven, on the local runtime (moto on 127.0.0.1).

Run: ``python -m devtools.demo [--rows N]``. The CDK stack's template is run by
:mod:`devtools.local.runtime`: the same queues (with their DLQs), the same Lambda handlers fed
real SQS and S3 events, EMR Serverless job runs executed with local Spark, and the GC state
machine on moto's Step Functions interpreter. The story:

1. the stack, created from its template;
2. a table, and 1M generated rows appended by a producer through the library;
3. uploads to ``incoming/``: a ready Parquet file is registered by the ingest trigger; CSV and
   JSON lines start EMR Serverless job runs (local Spark) that validate, reject and append;
4. scans and point lookups, with request and byte counts;
5. GDPR delete requests on SQS: logical deletes, an erase, a redelivery and a malformed
   message. The delete Lambda commits one batch (rows invisible at once); the erase becomes
   splice jobs for the bounded splice worker; the malformed message is retried until it lands
   in the dead-letter queue;
6. compaction (a Spark job run) of a file with many deleted rows;
7. history and time travel; GC by the state machine; an audit that reads every object in the
   bucket (every Parquet page decompressed) looking for the erased rows' keys and payloads;
   the lake: orders, events and tickets, one person in all three, one request, the window
   run, GC, one receipt;
8. the erase request's receipt (received, hidden, spliced, complete; by its hash) and the
   table report, one self-contained HTML page (its path is printed);
9. the closing audit: every object version of every bucket the story wrote (adopted originals,
   index pieces, lake values objects included) searched for every value a finished request
   forgot; counts printed, and the demo fails if one is found.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from devtools.audit import Audit, Needle, audit_bucket, audit_forgotten
from devtools.datagen import SCHEMA, generate
from devtools.demo_adopt import adopt_story
from devtools.demo_lake import lake_story
from devtools.demo_layout import layout_for_forgetting, row_ttl
from devtools.local.runtime import LocalRuntime, LocalSettings
from lethe import errors
from lethe.catalog.manifest import DataFile, request_hash
from lethe.process import run_main
from lethe.table import Table

# The demo table's GC grace: short, so GC can show its work within the story; long enough for
# the story's slowest writer (a Spark job) to commit within it (lethe.catalog.grace).
DEMO_GC_GRACE = "10s"
ERASE_REQUEST = "gdpr-0004"  # the erase request of step 5; its receipt ends the demo
REPORT_NAME = "lethe-demo-report.html"

__all__ = ["Demo", "Sizes", "main", "run"]

DELETE = "delete_requests.handler.handler"
SPLICE = "splice.handler.handler"
TRIGGER = "ingest_trigger.handler.handler"
MB = 1 << 20


# --- narration -----------------------------------------------------------------------------------
class Story:
    """Prints numbered steps with timings."""

    def __init__(self, out: Callable[[str], None] | None = None) -> None:
        self.n = 0
        self.t0 = time.perf_counter()
        self.out = out or (lambda s: print(s, flush=True))
        self.timings: list[tuple[str, float]] = []
        self._step_t = self.t0

    def step(self, title: str) -> None:
        now = time.perf_counter()
        if self.n:
            self.timings[-1] = (self.timings[-1][0], now - self._step_t)
        self.n += 1
        self._step_t = now
        self.timings.append((title, 0.0))
        self.out(f"\n[{self.n}] {title}  (t+{now - self.t0:.1f}s)")

    def say(self, msg: str) -> None:
        self.out(f"    {msg}")

    def event(self, msg: str) -> None:
        """A line of the runtime's own progress output."""
        self.out(f"      | {msg}")

    def finish(self) -> None:
        if self.timings:
            self.timings[-1] = (self.timings[-1][0], time.perf_counter() - self._step_t)

    def timed(self, fn: Callable[[], Any]) -> tuple[Any, float]:
        t = time.perf_counter()
        r = fn()
        return r, time.perf_counter() - t


def _mb(n: float) -> str:
    return f"{n / MB:,.2f} MiB"


@dataclass(frozen=True, slots=True)
class Sizes:
    """How much data the story moves (the default is ``make demo``'s)."""

    rows: int = 1_500_000  # appended by the producer, in ``appends`` commits (one file each)
    appends: int = 3
    parquet_rows: int = 100_000  # uploaded as a ready Parquet file
    csv_rows: int = 30_000  # uploaded as CSV (+1 bad row)
    json_rows: int = 20_000  # uploaded as JSON lines (+1 bad line)
    customers: int = 10_000
    target_file_bytes: int = 16 * MB  # ~10 MB files: unchanged ranges >= 5 MiB are copied
    row_group_bytes: int = 1 * MB
    splice_max_bytes: int = 1 * MB  # the template's 256 MiB would splice everything at once

    @classmethod
    def small(cls) -> Sizes:
        """A few seconds' worth, with the same shape (several files, several row groups)."""
        return cls(
            rows=24_000,
            appends=2,
            parquet_rows=3_000,
            csv_rows=1_500,
            json_rows=1_000,
            customers=200,
            target_file_bytes=160 << 10,
            row_group_bytes=32 << 10,
            splice_max_bytes=32 << 10,
        )


@dataclass
class Results:
    """The numbers of a run (also what the end-to-end test checks)."""

    values: dict[str, Any] = field(default_factory=dict)

    def __setitem__(self, k: str, v: Any) -> None:
        self.values[k] = v

    def __getitem__(self, k: str) -> Any:
        return self.values[k]


class Demo:
    """The story's steps, in order, on a running :class:`LocalRuntime`."""

    def __init__(self, rt: LocalRuntime, sizes: Sizes, story: Story | None = None) -> None:
        self.rt = rt
        self.sizes = sizes
        self.story = story or Story()
        self.uri = rt.table_uri
        self.bucket = rt.bucket
        self.s3 = rt.aws.client("s3")
        self.sqs = rt.aws.client("sqs")
        self.emr = rt.aws.client("emr-serverless")
        self.results = Results()
        n = sizes.rows
        # erased rows (spread over the producer's files) and a control row that stays
        self.victims = [int(n * f) + 7 for f in (0.2718, 0.5772, 0.9141)]
        self.control = int(n * 0.1414) + 3
        self.payloads = {k: self._secret("erase-me", k) for k in self.victims}
        self.payloads[self.control] = self._secret("keep-me", self.control)
        self.table: Table | None = None

    @staticmethod
    def _secret(kind: str, key: int) -> str:
        return f"{kind}-{hashlib.sha256(f'{kind}/{key}'.encode()).hexdigest()[:24]}"

    @property
    def t(self) -> Table:
        assert self.table is not None, "create the table first"
        return self.table

    def needles(self) -> dict[str, Needle]:
        out = {f"erased id={k}": Needle.row(k, self.payloads[k]) for k in self.victims}
        out[f"control id={self.control}"] = Needle.row(self.control, self.payloads[self.control])
        return out

    # ---------------------------------------------------------------- 1. the table
    def create_and_append(self) -> None:
        s, st = self.sizes, self.story
        st.step(f"a table at {self.uri}; a producer appends {s.rows:,} rows in {s.appends} commits")
        self.table = Table.create(
            self.uri,
            SCHEMA,
            key="id",
            target_file_bytes=s.target_file_bytes,
            row_group_bytes=s.row_group_bytes,
            gc_grace=DEMO_GC_GRACE,
            iceberg_view=True,  # every commit publishes the Iceberg view (metadata/)
        )
        per = s.rows // s.appends
        for b in range(s.appends):
            n = per if b < s.appends - 1 else s.rows - per * (s.appends - 1)
            data = generate(b * per, n, customers=s.customers, payloads=self.payloads)
            r, secs = st.timed(partial(self.t.append, data))
            st.say(
                f"v{r.version}: +{r.rows_added:,} rows in {r.files_added} files, {secs:.2f}s; "
                f"{r.io.describe()}"
            )
        m = self.t.manifest
        st.say(
            f"table: {len(m.files)} files, {sum(len(f.row_groups) for f in m.files)} row groups, "
            f"{sum(f.size for f in m.files):,} bytes"
        )
        self.results["appended_files"] = len(m.files)

    # ---------------------------------------------------------------- 2. uploads
    def upload(self) -> None:
        s, st, rt = self.sizes, self.story, self.rt
        st.step(f"uploads to s3://{self.bucket}/{rt.incoming_prefix} -> S3 events -> ingest")
        base = s.rows
        before = self.t.refresh().scan(["id"]).num_rows
        prefix = f"{rt.incoming_prefix}2026-11-22/"
        # a ready Parquet file, as a well-behaved producer writes it
        pq_data = generate(base, s.parquet_rows, customers=s.customers, seed=11)
        buf = io.BytesIO()
        pq.write_table(pq_data, buf, row_group_size=max(1, s.parquet_rows // 4), compression="zstd")
        # CSV and JSON lines, each with one row that does not fit the schema
        start = base + s.parquet_rows
        csv_data = generate(start, s.csv_rows, customers=s.customers, seed=12)
        csv = _csv(csv_data) + b"not-a-number,2026-11-22T10:00:00Z,7,bad row\n"
        start += s.csv_rows
        json_data = generate(start, s.json_rows, customers=s.customers, seed=13)
        jsonl = _jsonl(json_data) + b'{"id": 1, "event_time": "yesterday-ish"\n'
        uploads = [
            (f"{prefix}events-0001.parquet", buf.getvalue(), "ready Parquet"),
            (f"{prefix}events-0002.csv", csv, "CSV"),
            (f"{prefix}events-0003.jsonl", jsonl, "JSON lines"),
        ]
        for key, body, what in uploads:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
            st.say(f"PUT {key}: {what}, {len(body):,} bytes")
        pumped = rt.pump_until_idle(timeout=1800)
        after = self.t.refresh().scan(["id"]).num_rows
        jobs = [(j.id, _basename(j.entry_point), j.state, j.seconds) for j in pumped.jobs]
        st.say(
            f"ingest trigger: {rt.function(TRIGGER).invocations} invocations; EMR Serverless job "
            f"runs: {', '.join(f'{i} {n} {state} ({sec:.0f}s)' for i, n, state, sec in jobs)}"
        )
        for h in reversed(self.t.history()[: 1 + len(uploads)]):
            if h.operation in ("register", "append") and h.version > s.appends:
                st.say(f"v{h.version:<3} {h.operation:<8} +{h.rows_added:,} rows")
        rejects = self._rejects()
        st.say(
            f"table rows {before:,} -> {after:,} (+{after - before:,} of "
            f"{s.parquet_rows + s.csv_rows + s.json_rows:,} good rows uploaded); "
            f"{len(rejects)} rejected rows kept with their reasons under _staging/rejects/:"
        )
        for r in rejects:
            st.say(f"    {r.get('source', '').rsplit('/', 1)[-1]}: {str(r.get('reason'))[:90]}")
        self.results["ingested_rows"] = after - before
        self.results["rejected_rows"] = len(rejects)
        self.results["job_states"] = [j.state for j in pumped.jobs]

    def _rejects(self) -> list[dict[str, Any]]:
        prefix = self.uri.split("/", 3)[3] + "/_staging/rejects/"
        out: list[dict[str, Any]] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            for o in page.get("Contents", []):
                body = self.s3.get_object(Bucket=self.bucket, Key=o["Key"])["Body"].read()
                out.extend(json.loads(line) for line in body.decode().splitlines() if line)
        return out

    # ---------------------------------------------------------------- 3. reads
    def scans_and_lookups(self) -> None:
        st, t = self.story, Table.open(self.uri)  # a fresh handle: nothing cached yet
        st.step("scans and point lookups (a fresh handle)")
        before = t.io
        full, secs = st.timed(t.scan)
        st.say(f"full scan: {full.num_rows:,} rows in {secs:.2f}s; {(t.io - before).describe()}")
        before = t.io
        proj, secs = st.timed(lambda: t.scan(["id", "customer_id"], [("customer_id", "=", 42)]))
        st.say(f"customer 42: {proj.num_rows} rows in {secs:.2f}s; {(t.io - before).describe()}")
        key = self.sizes.rows // 2 + 17
        t.lookup(key)  # warm the footer cache of this file
        before = t.io
        hit, secs = st.timed(lambda: t.lookup(key))
        d = t.io - before
        st.say(f"lookup id={key} (warm): {hit.to_pylist()} in {secs * 1000:.1f} ms; {d.describe()}")
        self.results["rows"] = full.num_rows
        self.results["lookup_gets"] = d.count("get")

    # ---------------------------------------------------------------- 4. delete requests
    def delete_requests(self) -> None:
        st, rt, t = self.story, self.rt, self.t.refresh()
        st.step("GDPR requests on SQS -> the delete Lambda -> splice jobs -> the splice worker")
        n = self.sizes.rows
        k1 = n // 2 + 17
        customer = int(t.lookup(k1, ["customer_id"])["customer_id"][0].as_py())
        customer_rows = t.scan(["id"], [("customer_id", "=", customer)]).num_rows
        held = {f.path: f.size for f in t.manifest.files}
        bodies: list[dict[str, Any]] = [
            {"request_id": "gdpr-0001", "filters": [["id", "=", k1]]},
            {"request_id": "gdpr-0002", "filters": [["id", "in", [12, n - 1]]]},
            {"request_id": "gdpr-0003", "filters": [["customer_id", "=", customer]]},
            {"request_id": ERASE_REQUEST, "filters": [["id", "in", self.victims]], "mode": "erase"},
            {"request_id": "gdpr-0001", "filters": [["id", "=", k1]]},  # redelivered
        ]
        url = rt.outputs["DeleteQueueUrl"]
        for b in bodies:
            msg = {"mode": "logical", **b, "table": self.uri, "requested_at": "2026-11-22T10:00Z"}
            self.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(msg))
        self.sqs.send_message(QueueUrl=url, MessageBody='{"request_id": "gdpr-broken", "table": ')
        st.say(
            f"sent 6 messages: 3 logical deletes (1 key, 2 keys, customer #{customer} with "
            f"{customer_rows} rows), 1 erase of {len(self.victims)} keys, 1 redelivery, 1 malformed"
        )
        before_rows = t.scan(["id"]).num_rows
        v0 = t.version
        rt.pump(only=[DELETE])  # the first batch only: deletes are visible before any splice
        t.refresh()
        after_rows = t.scan(["id"]).num_rows
        gone = [k for k in [k1, *self.victims] if t.lookup(k).num_rows == 0]
        st.say(
            f"one commit, v{v0} -> v{t.version}: {before_rows - after_rows:,} rows invisible at "
            f"once; lookups of {len(gone)}/{1 + len(self.victims)} deleted keys return nothing"
        )
        erasure = next(e for e in t.manifest.erasures if e.id_hash == request_hash(ERASE_REQUEST))
        targets = {tt.path for tt in erasure.targets}
        st.say(
            f"erase {ERASE_REQUEST}: pending, {sum(len(tt.row_groups) for tt in erasure.targets)} row "
            f"groups in {len(targets)} files; splice queue: {rt.queue_depth('SpliceQueueUrl')}"
        )
        self.results["deleted_at_once"] = before_rows - after_rows
        self.results["invisible_at_once"] = len(gone) == 1 + len(self.victims)

        splice = rt.function(SPLICE)
        calls0 = splice.invocations
        pumped = rt.pump_until_idle(timeout=600)
        t.refresh()
        erasure = next(e for e in t.manifest.erasures if e.id_hash == request_hash(ERASE_REQUEST))
        m = splice.metrics
        size = sum(held[p] for p in targets)
        st.say(
            f"splice worker (LETHE_SPLICE_MAX_BYTES={self.sizes.splice_max_bytes:,}): "
            f"{splice.invocations - calls0} invocations, erasure {erasure.state} at "
            f"v{erasure.spliced_version}; {int(m.get('RowsErased', 0))} deleted rows physically "
            "removed from the spliced row groups"
        )
        copied = m.get("BytesCopied", 0)
        st.say(
            f"spliced {len(targets)} files of {_mb(size)}: {_mb(copied)} copied "
            f"server-side, {_mb(m.get('BytesUploaded', 0))} uploaded, "
            f"{_mb(m.get('BytesDownloaded', 0))} downloaded (a rewrite moves {_mb(size)} each way)"
        )
        if not copied:
            st.say(
                "nothing copied server-side: S3 copies a range only as a multipart part of at "
                "least 5 MiB (but the last), and these files' unchanged ranges are smaller, so "
                "they are sent again; files of tens of MiB (make demo's default sizes) are "
                "mostly copied (docs/format.md, the splice)"
            )
        dlq = rt.peek("DeleteDeadLetterQueueUrl")
        dead = [d for d in dlq if d["Body"].startswith('{"request_id": "gdpr-broken"')]
        received = rt.queue("DeleteQueueUrl").max_receive
        st.say(
            f"malformed message: failed {received} receives, now in the dead-letter queue "
            f"({len(dead)} message, body {dead[0]['Body'][:40]!r}...)"
            if dead
            else "malformed message: NOT in the dead-letter queue"
        )
        self.results["erasure_state"] = erasure.state
        self.results["splice_bytes"] = dict(m)
        self.results["spliced_file_bytes"] = size
        self.results["dead_letters"] = len(dead)
        self.results["batch_failures"] = pumped.failed

    # ---------------------------------------------------------------- 5. compaction
    def compaction(self) -> None:
        st, rt, t = self.story, self.rt, self.t.refresh()
        st.step("compaction (an EMR Serverless job run, local Spark) of a DV-heavy file")
        probe = int(self.sizes.rows * 0.66)
        f = _file_of(t.manifest.files, probe)
        cut = int(self.sizes.customers * 0.4)
        url = rt.outputs["DeleteQueueUrl"]
        body = {
            "request_id": "gdpr-0005",
            "table": self.uri,
            "mode": "logical",
            "filters": [
                ["id", ">=", f.row_groups[0].key_min],
                ["id", "<=", f.row_groups[-1].key_max],
                ["customer_id", "<", cut],
                ["id", "!=", self.control],
            ],
            "requested_at": "2026-11-22T11:00Z",
        }
        self.sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
        rt.pump_until_idle(timeout=600)
        f = t.refresh().manifest.file(f.path) or f
        st.say(
            f"delete request gdpr-0005 (customers < {cut} in one file's key range): "
            f"{f.path.rsplit('/', 1)[-1]} has {f.deleted_rows:,} of {f.rows:,} rows deleted "
            f"({f.deleted_rows / f.rows:.0%}), {f.size:,} bytes"
        )
        artifacts = rt.outputs["ArtifactsBucketName"]
        run = self.emr.start_job_run(
            applicationId=rt.outputs["EmrApplicationId"],
            executionRoleArn=rt.outputs["EmrJobRoleArn"],
            clientToken=f"compact-{t.version}",
            name="lethe-compact",
            jobDriver={
                "sparkSubmit": {
                    "entryPoint": f"s3://{artifacts}/spark_jobs/compact.py",
                    "entryPointArguments": [
                        "--table",
                        self.uri,
                        "--min-deleted-fraction",
                        "0.3",
                        "--small-file-fraction",
                        "0",
                    ],
                }
            },
        )
        st.say(f"StartJobRun spark_jobs/compact.py --min-deleted-fraction 0.3: {run['jobRunId']}")
        before_files = len(t.manifest.files)
        rt.pump_until_idle(timeout=1800)
        t.refresh()
        job = rt.job_runs[-1]
        replaced = t.manifest.file(f.path) is None
        new = [g for g in t.manifest.files if g.added_version == t.version]
        st.say(
            f"job run {job.id}: {job.state} in {job.seconds:.1f}s; the file "
            + (
                f"was rewritten: {f.rows:,} rows / {f.size:,} bytes with a DV -> "
                f"{sum(g.rows for g in new):,} rows / {sum(g.size for g in new):,} bytes in "
                f"{len(new)} file(s) without one; files {before_files} -> {len(t.manifest.files)}"
                if replaced
                else "was NOT rewritten"
            )
        )
        self.results["compaction_state"] = job.state
        self.results["compacted"] = replaced
        self.results["compacted_bytes"] = (f.size, sum(g.size for g in new))
        self.results["compacted_rows"] = (f.rows - f.deleted_rows, sum(g.rows for g in new))

    def layout(self) -> None:
        s = self.sizes
        figures = layout_for_forgetting(
            self.story,
            self.s3,
            appends=8,
            rows=min(20_000, max(1_000, s.rows // 20)),  # 8 x 20k rows: 1.6 h, one day
            customers=max(50, s.customers // 20),
        )
        figures |= row_ttl(
            self.story, self.s3, days=10, rows=min(5_000, s.rows // 10), customers=s.customers
        )
        for k, v in figures.items():
            self.results[k] = v

    def lake(self) -> None:
        s = self.sizes
        figures = lake_story(
            self.story, self.s3, rows=min(4_000, max(400, s.rows // 100)), customers=50
        )
        for k, v in figures.items():
            self.results[k] = v

    def adopt(self) -> None:
        figures = adopt_story(self.story, self.s3, rows=2_000, customers=50)
        for k, v in figures.items():
            self.results[k] = v

    # ---------------------------------------------------------------- 6. history, audit, GC
    def history(self) -> None:
        st, t = self.story, self.t.refresh()
        st.step("history and time travel")
        old = Table.open(self.uri, version=1)
        st.say(
            f"version 1 has {old.scan(['id']).num_rows:,} rows; "
            f"latest (v{t.version}) has {t.scan(['id']).num_rows:,}"
        )
        for h in t.history():
            st.say(
                f"v{h.version:<3} {h.operation:<9} +{h.rows_added:<9,} -{h.rows_deleted:<7,} "
                f"erased {h.rows_erased:<6,} live={h.live_rows:,} files={h.live_files}"
            )

    def iceberg_view(self) -> None:
        """PyIceberg (not Lethe) reads the view the committers published."""
        from pyiceberg.table import StaticTable

        st, t = self.story, self.t.refresh()
        st.step("the Iceberg view: PyIceberg reads the table, deletes applied, no data copied")
        uri, secs = st.timed(t.publish_iceberg)  # idempotent: committers published already
        endpoint = self.s3.meta.endpoint_url
        view = StaticTable.from_metadata(
            uri,
            properties={
                "s3.endpoint": endpoint,
                "s3.access-key-id": "testing",
                "s3.secret-access-key": "testing",
                "s3.region": "us-east-1",
            },
        )
        rows = view.scan(selected_fields=("id",)).to_arrow().num_rows
        mine = t.scan(["id"]).num_rows
        gone = view.scan(row_filter=f"id == {self.victims[0]}").to_arrow().num_rows
        paths = {f.file.file_path for f in view.scan().plan_files()}
        ours = {f"s3://{self.bucket}/{t.key_of(f.path)}" for f in t.manifest.files}
        st.say(
            f"{uri.rsplit('/', 1)[-1]} (publish {secs:.2f}s): PyIceberg scans {rows:,} rows, "
            f"Lethe {mine:,}; an erased id: {gone} rows; data files are Lethe's own: "
            f"{paths == ours}"
        )
        self.results["iceberg_rows"] = (rows, mine, gone, paths == ours)

    def audit(self, when: str) -> Audit:
        st = self.story
        st.step(f"audit {when}: every object of the bucket, every Parquet page decompressed")
        t0 = time.perf_counter()
        a = audit_bucket(self.s3, self.bucket, self.needles())
        secs = time.perf_counter() - t0
        st.say(
            f"read {a.objects} objects ({a.bytes:,} bytes; {a.parquet_files} Parquet files, "
            f"{a.pages:,} pages) in {secs:.1f}s, looking for each row's int64 key bytes, its "
            "key as decimal text, and its unique payload"
        )
        for label in self.needles():
            found = a.found(label)
            where = ", ".join(sorted({how for k, how in a.hits[label]}) if found else [])
            st.say(
                f"{label}: "
                + (f"found in {len(found)} object(s) ({where})" if found else "found nowhere")
            )
            for k in found[:4]:
                st.say(f"    {k}")
        return a

    def closing_audit(self) -> None:
        """Every object version of every bucket the story wrote (the main table's, the
        lake's, the adoption's: data files, adopted originals under ``raw/``, index pieces,
        segments, manifests, the Iceberg view, lake values objects), searched for every value
        a finished request forgot. Prints counts only; raises when a value is found."""
        st, r = self.story, self.results
        st.step("closing audit: every object version of every bucket, for every forgotten value")
        erased = {k: v for k, v in self.needles().items() if k.startswith("erased")}
        wanted = {
            self.bucket: erased,
            r["lake_bucket"]: r["lake_needles"],
            r["adopt_bucket"]: r["adopt_needles"],
        }
        audits, found = audit_forgotten(self.s3, wanted)
        kinds: dict[str, int] = {}
        for bucket, a in audits.items():
            st.say(f"{bucket}: {len(wanted[bucket])} forgotten subject(s); {a.describe()}")
            for kind, n in a.kinds.items():
                kinds[kind] = kinds.get(kind, 0) + n
        covered = (
            "parquet outside a table (adopted originals, uploads)",
            "index pieces",
            "lake values",
        )
        st.say(
            "kinds searched: "
            + ", ".join(f"{k} {kinds.get(k, 0)}" for k in covered)
            + " (lake values objects are deleted when their request finishes: 0 is the goal)"
        )
        self.results["closing_audit_kinds"] = kinds
        self.results["closing_audit_found"] = found
        if found:
            where = "; ".join(f"{k} in {len(v)} object(s)" for k, v in found.items())
            raise errors.LetheError(f"closing audit: a forgotten value is still stored: {where}")
        st.say("no forgotten value in any object version of any bucket")

    def _wait_for_grace(self) -> None:
        """GC keeps unreferenced data younger than the table's grace (its writers may still
        commit it; lethe.catalog.grace): wait until what this story left unreferenced is older."""
        from datetime import UTC, datetime

        from lethe.catalog.grace import round_up
        from lethe.gc.marking import references

        refs = references(self.t.refresh().manifest)
        newest = [
            round_up(o.last_modified)
            for prefix in ("data/", "_staging/")
            for o in self.t.store.list(self.t.key_of(prefix))
            if o.last_modified is not None and o.key[len(self.t.key_of("")) :] not in refs
        ]
        if not newest:
            return
        grace = self.t.manifest.properties.gc_grace_seconds
        wait = (max(newest) - datetime.now(UTC)).total_seconds() + grace
        if wait > 0:
            self.story.say(f"waiting {wait:.1f}s until the unreferenced data is past the grace")
            time.sleep(wait)

    def gc(self) -> None:
        st, rt = self.story, self.rt
        st.step("GC: the Step Functions workflow (moto's interpreter) over the GC Lambdas")
        st.say(
            f"locally: retention 1 version, the table's grace {DEMO_GC_GRACE} (the template's "
            "schedule says rate(1 day), retention 30d, grace 7d)"
        )
        self._wait_for_grace()

        def table_objects() -> set[str]:
            return {
                o.key
                for prefix in ("data/", "tombstone/", "manifest/")
                for o in self.t.store.list(self.t.key_of(prefix))
            }

        objects_before = table_objects()
        dry = rt.run_gc(dry_run=True, retention="1v", grace=DEMO_GC_GRACE, erasure_grace="0s")
        st.say(f"dry run first: execution {dry.execution.status}; its report:")
        if dry.report is not None:
            for line in dry.report.describe().splitlines():
                st.say("  " + line)
        objects_after = table_objects()
        st.say(
            f"the dry run deleted nothing: {len(objects_before)} data/tombstone/manifest objects "
            f"before, {len(objects_after)} after, the same ones: {objects_before == objects_after}"
        )
        self.results["gc_dry_report"] = dry.report
        run = rt.run_gc(retention="1v", grace=DEMO_GC_GRACE, erasure_grace="0s")
        st.say(f"execution {run.execution.status}: {' -> '.join(run.execution.states)}")
        if run.report is not None:
            for line in run.report.describe().splitlines():
                st.say(line)
        self.results["gc_status"] = run.execution.status
        self.results["gc_report"] = run.report
        try:
            Table.open(self.uri, version=1)
            st.say("version 1 is still readable")
            self.results["v1_gone"] = False
        except errors.SnapshotNotFound as e:
            st.say(f"time travel to v1 now fails: {e}")
            self.results["v1_gone"] = True

    def receipt_and_report(self, report_path: Path) -> None:
        """The erase request's receipt (hashes only) and the table report, as HTML."""
        from lethe.audit.html import render
        from lethe.audit.report import table_report

        st = self.story
        st.step("the erase request's receipt, and the table report")
        receipt = self.t.refresh().erasure_status(ERASE_REQUEST, audit_values=self.victims)
        for line in receipt.describe().splitlines():
            st.say(line)
        report = table_report(self.t.catalog)
        report_path.write_text(render(report), encoding="utf-8")
        st.say(f"table report written to {report_path.resolve()}")
        self.results["receipt"] = receipt
        self.results["report_path"] = report_path

    def totals(self) -> None:
        st, rt = self.story, self.rt
        st.step("totals")
        for f in rt.functions.values():
            if f.invocations:
                st.say(
                    f"{f.handler:<34} {f.invocations:>3} invocations, {f.failures} failed "
                    f"(log: {f.sink.path})"
                )
        for j in rt.job_runs:
            st.say(f"EMR Serverless job run {j.id} {_basename(j.entry_point):<11} {j.state}")
        st.say(f"GC executions: {', '.join(g.execution.status for g in rt.gc_runs)}")
        st.say(f"the demo's own table handle (appends, checks): {self.t.io.describe()}")
        st.finish()
        st.say(
            "step timings: "
            + ", ".join(f"[{i + 1}] {secs:.1f}s" for i, (_, secs) in enumerate(st.timings))
        )
        st.say("what next:")
        st.say(
            "  .venv/bin/python -m devtools.local.runtime   # the same stack, served until Ctrl-C"
        )
        st.say(
            "  export AWS_ENDPOINT_URL=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=testing "
            "AWS_SECRET_ACCESS_KEY=testing"
        )
        st.say(
            "  lethe history s3://BUCKET/tables/main; lethe erasures s3://BUCKET/tables/main "
            "(the bucket: the runtime prints it)"
        )


def _basename(uri: str) -> str:
    return uri.rsplit("/", 1)[-1]


def _file_of(files: Iterable[DataFile], key: int) -> DataFile:
    for f in files:
        lo, hi = f.row_groups[0].key_min, f.row_groups[-1].key_max
        if isinstance(lo, int) and isinstance(hi, int) and lo <= key <= hi:
            return f
    raise LookupError(f"no file holds id {key}")


def _csv(t: pa.Table) -> bytes:
    import pyarrow.csv as pcsv

    buf = io.BytesIO()
    out = t.set_column(1, "event_time", pc.strftime(t.column("event_time"), "%Y-%m-%dT%H:%M:%SZ"))
    pcsv.write_csv(out, buf)
    return buf.getvalue()


def _jsonl(t: pa.Table) -> bytes:
    times = pc.strftime(t.column("event_time"), "%Y-%m-%dT%H:%M:%SZ").to_pylist()
    lines = [
        json.dumps({"id": i, "event_time": ts, "customer_id": c, "payload": p})
        for i, ts, c, p in zip(
            t.column("id").to_pylist(),
            times,
            t.column("customer_id").to_pylist(),
            t.column("payload").to_pylist(),
            strict=True,
        )
    ]
    return ("\n".join(lines) + "\n").encode()


def start_runtime(
    sizes: Sizes,
    *,
    template: Any = None,
    aws: Any = None,
    echo: Callable[[str], None] | None = None,
) -> LocalRuntime:
    """The local runtime as the demo runs it: its own moto (unless ``aws``), stable names,
    and the splice budget of ``sizes``."""
    settings = LocalSettings(
        env_overrides={"LETHE_SPLICE_MAX_BYTES": str(sizes.splice_max_bytes)},
        name_suffix="" if aws is None else None,
    )
    return LocalRuntime.start(template=template, aws=aws, settings=settings, echo=echo)


def run(
    sizes: Sizes | None = None,
    *,
    template: Any = None,
    aws: Any = None,
    report_path: Path | None = None,
) -> dict[str, Any]:
    """The whole story; returns its numbers."""
    sizes = sizes or Sizes()
    story = Story()
    log = logging.getLogger("lethe")  # the library's warnings go to a file, not the story
    handler = logging.FileHandler(Path(tempfile.gettempdir()) / "lethe-demo.log", mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.propagate = False
    story.say(
        f"library log (warnings such as a row group over the splice budget): {handler.baseFilename}"
    )
    story.step("the stack's template on the local runtime (moto on 127.0.0.1, in this process)")
    rt, secs = story.timed(
        lambda: start_runtime(sizes, template=template, aws=aws, echo=story.event)
    )
    try:
        story.say(f"created in {secs:.1f}s:")
        for line in rt.describe():
            story.say(line)
        demo = Demo(rt, sizes, story)
        demo.create_and_append()
        demo.upload()
        demo.scans_and_lookups()
        demo.delete_requests()
        demo.compaction()
        demo.layout()
        demo.lake()
        demo.adopt()
        demo.history()
        demo.iceberg_view()
        before = demo.audit("before GC")
        demo.gc()
        after = demo.audit("after GC")
        demo.receipt_and_report(report_path or Path(tempfile.gettempdir()) / REPORT_NAME)
        demo.closing_audit()
        demo.totals()
        demo.results["audit_before"] = before
        demo.results["audit_after"] = after
        return demo.results.values
    finally:
        rt.stop()
        log.removeHandler(handler)
        log.propagate = True
        handler.close()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m devtools.demo", description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_500_000, help="rows the producer appends")
    p.add_argument("--small", action="store_true", help="the end-to-end test's sizes")
    p.add_argument("--template", default=None, help="a synthesized *.template.json to use")
    p.add_argument(
        "--report",
        type=Path,
        default=None,
        help=f"where to write the HTML report (default: $TMPDIR/{REPORT_NAME})",
    )
    a = p.parse_args(argv)
    sizes = Sizes.small() if a.small else Sizes(rows=a.rows)
    run(sizes, template=a.template, report_path=a.report)


if __name__ == "__main__":
    run_main(main)
