"""End to end: the demo's story on the local runtime (the synthesized stack on moto, the real
handlers fed real SQS and S3 events, EMR job runs on local Spark, the GC state machine on
moto's interpreter), with smaller data, checking each step's effect.

The fast tests at the top pin the runtime's own rules: the template reader, Lambda's
partial-batch semantics, per-function environments, metrics from the handlers' output.
"""

from __future__ import annotations

import io
import json
import os
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from devtools.audit import Needle, audit_bucket, audit_forgotten
from devtools.demo import Demo, Sizes, Story, start_runtime
from devtools.local.events import sqs_event
from devtools.local.runtime import (
    Invocation,
    LocalFunction,
    LocalRuntime,
    Physical,
    Sink,
    StackTemplate,
    _SqsSource,
    load_template,
)
from devtools.local.server import LocalAws
from devtools.local.stepfunctions import LocalRunError
from lethe.catalog.manifest import request_hash


# --- the runtime's rules (fast) ----------------------------------------------------------------
def test_template_reader_resolves_intrinsics_to_local_values() -> None:
    t = StackTemplate({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}, "T": {"Type": "X::Y"}}})
    t.physical["Q"] = Physical("http://q/1/name", {"Arn": "arn:aws:sqs:us-east-1:1:name"})
    assert t.resolve({"Ref": "Q"}) == "http://q/1/name"
    assert t.resolve({"Fn::GetAtt": ["Q", "Arn"]}) == "arn:aws:sqs:us-east-1:1:name"
    assert t.resolve({"Fn::GetAtt": "Q.Arn"}) == "arn:aws:sqs:us-east-1:1:name"
    assert t.resolve({"Fn::Join": ["", ["s3://", {"Ref": "Q"}, "/x"]]}) == "s3://http://q/1/name/x"
    assert t.resolve({"Fn::Sub": "${AWS::Region}:${Q.Arn}:${!Literal}"}) == (
        "us-east-1:arn:aws:sqs:us-east-1:1:name:${Literal}"
    )
    assert t.resolve({"Fn::Sub": ["a-${V}", {"V": {"Ref": "AWS::AccountId"}}]}) == "a-123456789012"
    assert t.resolve({"Fn::Select": [1, {"Fn::Split": [":", "a:b:c"]}]}) == "b"
    assert t.resolve({"k": {"Ref": "AWS::NoValue"}, "l": [1, {"Ref": "AWS::NoValue"}]}) == {
        "l": [1]
    }
    with pytest.raises(LocalRunError, match=r"T \(X::Y\) has no local counterpart"):
        t.resolve({"Ref": "T"})
    with pytest.raises(LocalRunError, match="Fn::If"):
        t.resolve({"Fn::If": ["c", 1, 2]})
    assert t.try_resolve({"Fn::GetAtt": ["Q", "Nope"]})[1] == "no local value for Fn::GetAtt Q.Nope"


def _msgs(n: int) -> list[dict[str, Any]]:
    return [
        {"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": "{}", "MD5OfBody": "x"}
        for i in range(n)
    ]


def test_partial_batch_failures_follow_lambdas_rules() -> None:
    src = _SqsSource("Q", "F", 10, True, 0, None)
    msgs = _msgs(3)

    def failed(ok: bool, result: Any, source: _SqsSource = src) -> set[str]:
        return LocalRuntime._failed_ids(source, msgs, Invocation(ok, result, None, 0.0))

    assert failed(True, {"batchItemFailures": []}) == set()
    assert failed(True, None) == set()
    assert failed(True, {"batchItemFailures": [{"itemIdentifier": "m1"}]}) == {"m1"}
    every = {"m0", "m1", "m2"}
    assert failed(False, None) == every  # an unhandled error fails the batch
    assert failed(True, {"batchItemFailures": [{"itemIdentifier": "zz"}]}) == every
    assert failed(True, {"batchItemFailures": [{"itemIdentifier": ""}]}) == every
    assert failed(True, "not an object") == every
    plain = _SqsSource("Q", "F", 10, False, 0, None)  # without ReportBatchItemFailures
    assert failed(True, {"batchItemFailures": [{"itemIdentifier": "m1"}]}, plain) == set()


def test_functions_sharing_a_module_keep_their_own_settings(tmp_path: Path) -> None:
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "__init__.py").write_text("")
    (tmp_path / "probe" / "handler.py").write_text(
        textwrap.dedent(
            """
            import os
            AT_IMPORT = os.environ["PROBE_SETTING"]   # read once, at cold start

            def handler(event, context):
                print('{"_aws": {"CloudWatchMetrics": [{"Metrics": [{"Name": "Calls"}]}]},'
                      ' "Calls": 1}')
                return {"import": AT_IMPORT, "now": os.environ.get("PROBE_SETTING"),
                        "only_b": os.environ.get("ONLY_B"), "name": context.function_name,
                        "event": event}
            """
        )
    )
    made = {
        name: LocalFunction(
            logical_id=f"Fn{name}",
            name=f"fn-{name}",
            handler="probe.handler.handler",
            environment=env,
            base_env={"BASE": "1"},
            timeout=3,
            memory=128,
            log_dir=tmp_path / "logs",
            code_root=tmp_path,
        )
        for name, env in {
            "a": {"PROBE_SETTING": "a"},
            "b": {"PROBE_SETTING": "b", "ONLY_B": "yes"},
        }.items()
    }
    before = dict(os.environ)
    outs = [made[n].invoke({"n": i}) for i, n in enumerate("abab")]
    assert [o.ok for o in outs] == [True] * 4
    assert [(o.result["import"], o.result["now"], o.result["only_b"]) for o in outs] == [
        ("a", "a", None),
        ("b", "b", "yes"),
        ("a", "a", None),
        ("b", "b", "yes"),
    ]
    assert outs[1].result["name"] == "fn-b" and outs[2].result["event"] == {"n": 2}
    assert dict(os.environ) == before  # nothing leaks into the process
    assert made["a"].metrics == {"Calls": 2.0} and made["b"].invocations == 2
    assert '"Calls": 1' in made["a"].sink.path.read_text()


def test_an_unhandled_exception_fails_the_invocation_and_is_logged(tmp_path: Path) -> None:
    (tmp_path / "boom.py").write_text("def handler(event, context):\n    raise ValueError('no')\n")
    fn = LocalFunction(
        logical_id="Boom",
        name="boom",
        handler="boom.handler",
        environment={},
        base_env={},
        timeout=3,
        memory=128,
        log_dir=tmp_path / "logs",
        code_root=tmp_path,
    )
    inv = fn.invoke(sqs_event(_msgs(1), queue_arn="arn:aws:sqs:us-east-1:1:q"))
    assert not inv.ok and inv.error == "ValueError: no" and fn.failures == 1
    assert fn.sink.problems == ["unhandled exception: ValueError: no"]


def test_sink_sums_embedded_metrics(tmp_path: Path) -> None:
    sink = Sink(tmp_path / "f.log")
    emf = {"_aws": {"CloudWatchMetrics": [{"Metrics": [{"Name": "A"}, {"Name": "B"}]}]}}
    sink.write(json.dumps({**emf, "A": 2, "B": [1, 2.5]}) + "\n" + json.dumps({**emf, "A": 3}))
    assert sink.metrics == {"A": 2.0, "B": 3.5}  # the unterminated line waits for its newline
    sink.write("\n")
    assert sink.metrics["A"] == 5.0


# --- the story -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CDK app synthesized in-process (placeholder layers), into a private cache."""
    return load_template(cache_dir=tmp_path_factory.mktemp("template-cache"))


@pytest.fixture
def runtime(aws: LocalAws, template: dict[str, Any]) -> Iterator[LocalRuntime]:
    lines: list[str] = []
    rt = start_runtime(Sizes.small(), template=template, aws=aws, echo=lines.append)
    rt.lines = lines  # type: ignore[attr-defined]
    try:
        yield rt
    finally:
        rt.stop()


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.cdk
@pytest.mark.xdist_group("spark")
@pytest.mark.filterwarnings(
    # pyspark 4.0's _load_from_socket never closes its local socket to the JVM
    r"ignore:Exception ignored in. <socket.socket.*raddr=\('127.0.0.1':"
    "pytest.PytestUnraisableExceptionWarning"
)
def test_the_demo_story_end_to_end(runtime: LocalRuntime, aws: LocalAws, tmp_path: Path) -> None:
    rt, sizes = runtime, Sizes.small()
    report_path = tmp_path / "report.html"
    sqs, s3, emr = aws.client("sqs"), aws.client("s3"), aws.client("emr-serverless")
    demo = Demo(rt, sizes, Story(out=lambda _line: None))
    r = demo.results

    # the stack, from its template
    delete_q, dlq = rt.queue("DeleteQueueUrl"), rt.queue("DeleteDeadLetterQueueUrl")
    attrs = sqs.get_queue_attributes(QueueUrl=delete_q.url, AttributeNames=["All"])["Attributes"]
    assert json.loads(attrs["RedrivePolicy"]) == {
        "deadLetterTargetArn": dlq.arn,
        "maxReceiveCount": 5,
    }
    assert attrs["VisibilityTimeout"] == "1" and delete_q.template_visibility == 725
    delete_fn, splice_fn = (
        rt.function("delete_requests.handler.handler"),
        rt.function("splice.handler.handler"),
    )
    assert delete_fn.environment["LETHE_SPLICE_QUEUE_URL"] == rt.outputs["SpliceQueueUrl"]
    assert (
        delete_fn.environment["LETHE_TABLE_URI"] == rt.table_uri == f"s3://{rt.bucket}/tables/main"
    )
    assert "LETHE_SPLICE_MAX_BYTES" not in delete_fn.environment
    assert splice_fn.environment["LETHE_SPLICE_MAX_BYTES"] == str(sizes.splice_max_bytes)
    trigger = rt.function("ingest_trigger.handler.handler")
    emr_app = rt.outputs["EmrApplicationId"]
    assert trigger.environment["LETHE_EMR_APPLICATION_ID"] == emr_app
    assert s3.head_object(Bucket=rt.outputs["ArtifactsBucketName"], Key="spark_jobs/ingest.py")

    # 1. the producer's appends
    demo.create_and_append()
    assert demo.t.scan(["id"]).num_rows == sizes.rows and r["appended_files"] >= 2

    # 2. uploads -> S3 notifications -> ingest trigger -> registration / EMR job runs
    demo.upload()
    assert trigger.invocations == 3 and trigger.failures == 0
    assert r["ingested_rows"] == sizes.parquet_rows + sizes.csv_rows + sizes.json_rows
    assert r["rejected_rows"] == 2
    assert r["job_states"] == ["SUCCESS", "SUCCESS"]
    runs = emr.list_job_runs(applicationId=emr_app)["jobRuns"]
    assert sorted(j["state"] for j in runs) == ["SUCCESS", "SUCCESS"]  # written back to moto
    ops = [h.operation for h in demo.t.refresh().history()]
    assert ops.count("register") == 1 and ops.count("append") == sizes.appends + 2

    # 3. reads
    demo.scans_and_lookups()
    total = sizes.rows + r["ingested_rows"]
    assert r["rows"] == total

    # 4. GDPR requests: one commit hides them at once; the erase is spliced; the malformed
    #    message is retried to its dead-letter queue
    v_before = demo.t.refresh().version
    demo.delete_requests()
    assert r["invisible_at_once"] and r["deleted_at_once"] > len(demo.victims)
    t = demo.t.refresh()
    deletes = [h for h in t.history() if h.version > v_before and h.operation == "delete"]
    assert len(deletes) == 1  # one commit for the batch, the redelivery included
    assert r["erasure_state"] == "spliced"
    assert splice_fn.invocations >= 2  # bounded: one row group's bytes per invocation here
    m = r["splice_bytes"]
    assert m["RowsErased"] >= len(demo.victims) and m["BytesUploaded"] > 0
    assert m["BytesDownloaded"] < 2 * r["spliced_file_bytes"]
    assert r["dead_letters"] == 1 and r["batch_failures"] == 4  # receives 2..5 of 5
    dead = rt.peek("DeleteDeadLetterQueueUrl")
    assert [d["Body"] for d in dead] == ['{"request_id": "gdpr-broken", "table": ']
    assert int(dead[0]["Attributes"]["ApproximateReceiveCount"]) >= 5
    assert rt.queue_depth("DeleteQueueUrl") == {"visible": 0, "in_flight": 0, "delayed": 0}
    assert rt.queue_depth("SpliceDeadLetterQueueUrl")["visible"] == 0
    assert all(t.lookup(k).num_rows == 0 for k in demo.victims)
    assert t.lookup(demo.control)["payload"].to_pylist() == [demo.payloads[demo.control]]

    # 5. compaction of the DV-heavy file, as an EMR Serverless job run
    demo.compaction()
    assert r["compaction_state"] == "SUCCESS" and r["compacted"]
    before_bytes, after_bytes = r["compacted_bytes"]
    assert after_bytes < before_bytes
    live_before, rows_after = r["compacted_rows"]
    assert rows_after == live_before

    # 5b. a layout for forgetting: after the clustering compaction, one erase, one file
    demo.layout()
    assert r["layout_files_touched_before"] >= 4 and r["layout_files_after"] >= 5
    assert r["layout_files_touched_after"] == 1 and min(r["layout_rows_erased"]) > 0

    # 5c. the lake: one person in three tables, one request, one receipt, complete after GC
    demo.lake()
    assert r["lake_tables"] == 3 and r["lake_rows_hidden"] >= 3 and r["lake_files_spliced"] >= 3
    assert r["lake_done"] and r["lake_state"] == "complete" and r["lake_rows_left"] == 0
    assert r["lake_receipt"].count("GC run") == 3
    from devtools.demo_lake import REQUEST_ID

    assert request_hash(REQUEST_ID) in r["lake_receipt"] and REQUEST_ID not in r["lake_receipt"]
    # a TTL sweep: the days past retention dropped whole, the cut day spliced, a receipt
    assert r["ttl_files_dropped"] >= 1 and r["ttl_files_spliced"] == 1
    assert r["ttl_receipt_state"] == "removed" and r["ttl_rows_expired"] > 0

    # 5d. adopting the lake you have: in place, one person erased, the originals gone
    demo.adopt()
    assert r["adopt_files"] == 3 and r["adopt_copied"] == 0
    assert r["adopt_rows_erased"] > 0 and r["adopt_found_after"] == ()
    assert len(r["adopt_raw_left"]) == 3 - r["adopt_files_spliced"]

    # 6. the Iceberg view every committer published reads the same rows in PyIceberg
    demo.history()
    demo.iceberg_view()
    view_rows, lethe_rows, erased_rows, same_files = r["iceberg_rows"]
    assert view_rows == lethe_rows == demo.t.scan(["id"]).num_rows
    assert erased_rows == 0 and same_files

    # 7. the audit sees what is still there before GC ...
    before = demo.audit("before GC")
    assert all(before.found(f"erased id={k}") for k in demo.victims)  # superseded files

    # ... GC removes it, and says so per erasure request
    demo.gc()
    assert r["gc_status"] == "SUCCEEDED" and r["v1_gone"]
    report = r["gc_report"]
    (status,) = [e for e in report.erasures if e.id_hash == request_hash("gdpr-0004")]
    assert status.complete and status.completed_at is not None
    assert report.objects_deleted > 0 and report.deleted["data"].objects >= 2

    # ... and afterwards no erased key or payload is anywhere in the bucket
    after = demo.audit("after GC")
    for k in demo.victims:
        assert after.found(f"erased id={k}") == ()
    assert after.found(f"control id={demo.control}")  # the audit does see live rows
    again = audit_bucket(s3, rt.bucket, {"v": Needle.row(demo.victims[0], "no-such-payload")})
    assert again.objects == after.objects and again.found("v") == ()

    # 8. the receipt of the erase request, and the table report
    demo.receipt_and_report(report_path)
    receipt = r["receipt"]
    assert receipt.state == "complete" and receipt.id_hash == request_hash("gdpr-0004")
    assert receipt.completed_at == status.completed_at and receipt.splices
    assert receipt.hidden_version is not None and receipt.removed_version is not None
    assert receipt.audit is not None and receipt.audit.clean
    assert all(not e.present for e in receipt.evidence)
    assert "gdpr-0004" not in receipt.model_dump_json()
    page = report_path.read_text()
    assert r["report_path"] == report_path and 'id="chart-pending"' in page

    # 9. the closing audit: every object version of the three buckets, for every value a
    #    finished request forgot (issue 35): adopted originals, index pieces, lake values
    demo.closing_audit()
    assert r["closing_audit_found"] == {}
    kinds = r["closing_audit_kinds"]
    assert kinds["index pieces"] > 0 and kinds["data files"] > 0 and kinds["lake registry"] > 0

    demo.totals()
    # the malformed message alone, received 4 more times, is reported in batchItemFailures:
    # the invocations themselves never fail (an all-bad batch does not raise)
    assert delete_fn.failures == 0 and r["batch_failures"] == 4
    # every other function succeeded too: the Iceberg view's Glue registration needs the
    # template's Glue database, which the runtime creates
    glue_fn = rt.function("iceberg_glue.handler.handler")
    assert glue_fn.invocations > 0
    assert {n: f.failures for n, f in rt.functions.items() if f.failures} == {}
    assert "LETHE_TABLE_URI" not in os.environ  # handler environments never leak
    assert any("dead-letter queue" in line for line in rt.lines)  # type: ignore[attr-defined]


def test_the_audit_looks_inside_segments_and_the_iceberg_view(aws: LocalAws) -> None:
    """An erased key may hide in gzip manifest segments (file stats) and in the Avro data
    manifests of the Iceberg view (key bounds): the audit decompresses both."""
    import uuid

    import pyarrow as pa

    import lethe

    s3 = aws.client("s3")
    bucket = f"b-{uuid.uuid4().hex[:10]}"
    s3.create_bucket(Bucket=bucket)
    schema = pa.schema([("id", pa.int64(), False), ("payload", pa.string())])
    t = lethe.Table.create(f"s3://{bucket}/t", schema, key="id", iceberg_view=True)
    t.append(pa.table({"id": [977_531, 977_600], "payload": ["x-e9d1c0", "y-77aa"]}, schema=schema))
    a = audit_bucket(s3, bucket, {"k": Needle.row(977_531, "x-e9d1c0")})
    hits = set(a.found("k") and a.hits["k"])
    assert any(k.startswith("t/manifest/segments/") and how == "decimal text" for k, how in hits)
    assert any(k.startswith("t/metadata/") and how == "decompressed bytes" for k, how in hits)


def test_the_closing_audit_reads_adopted_originals_index_pieces_and_lake_values(
    aws: LocalAws,
) -> None:
    """issue 35: the demo's closing audit reads every object version of a bucket, wherever
    it lives: an original outside any table prefix, an index piece (decoded), a lake values
    object; it names what it found by bucket and subject number, never by value."""
    import pyarrow.parquet as pq

    s3 = aws.client("s3")
    bucket = f"closing-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})

    def parquet(t: pa.Table) -> bytes:
        buf = io.BytesIO()
        pq.write_table(t, buf)
        return buf.getvalue()

    person = 48_151_623
    s3.put_object(
        Bucket=bucket,
        Key="raw/ev/dt=2026-01-01/part-0.parquet",
        Body=parquet(pa.table({"customer_id": pa.array([person], pa.int32())})),
    )
    s3.delete_object(Bucket=bucket, Key="raw/ev/dt=2026-01-01/part-0.parquet")  # a version
    from lethe.index.pieces import index_dir

    piece = pa.table(
        {"value": pa.array([person], pa.int64()), "file": ["data/x"], "pos": pa.array([0])}
    )
    s3.put_object(Bucket=bucket, Key=f"t/{index_dir('customer_id')}p.parquet", Body=parquet(piece))
    s3.put_object(
        Bucket=bucket,
        Key="_lethe/requests/abc.json",
        Body=json.dumps({"h": {"values": [person]}}).encode(),
    )
    needle = {f"customer {person}": Needle((), (person,), (("customer_id", person),))}
    audits, found = audit_forgotten(s3, {bucket: needle})
    (where,) = found.values()
    keys = {k.split("?versionId=")[0] for k in where}  # a versioned bucket: every version
    assert keys >= {f"t/{index_dir('customer_id')}p.parquet", "_lethe/requests/abc.json"}
    assert any(k.startswith("raw/ev/") and "versionId" in k for k in where)
    assert str(person) not in " ".join(found)
    kinds = audits[bucket].kinds
    assert kinds["index pieces"] == kinds["lake values"] == 1
    assert kinds["parquet outside a table (adopted originals, uploads)"] == 1


@pytest.mark.slow
@pytest.mark.cdk
def test_the_gc_timer_skips_a_table_not_yet_created(
    aws: LocalAws, template: dict[str, Any], tmp_path: Path
) -> None:
    """Issue 36: the runtime's GC timer failed, dumping moto internals, every time it fired
    before the stack's table existed. It says so in one line and runs nothing."""
    from devtools.local.runtime import LocalSettings

    lines: list[str] = []
    settings = LocalSettings(gc_interval=0.001, log_dir=tmp_path)
    rt = LocalRuntime.start(template=template, aws=aws, settings=settings, echo=lines.append)
    try:
        assert not rt.table_exists()
        import time

        time.sleep(0.01)
        rt.pump()
        assert rt.gc.runs == []
        assert [x for x in lines if "GC timer" in x] == [
            f"GC timer: no table at {rt.table_uri} yet; skipped"
        ]
    finally:
        rt.stop()
