"""The GC workflow: its Lambda steps called directly, and the synthesized state machine run
end to end on moto's Step Functions interpreter (Map, Retry and Catch included)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any, TypeVar

import pytest
from conftest import EVENTS, events
from test_gc import (
    GRACE,
    QUICK,
    erase,
    listing,
    past_quick_grace,
    put,
    referenced,
    table_with_history,
    versioned_bucket,
    versions_of,
)

import lethe
from devtools.local.events import LambdaContext
from devtools.local.server import LocalAws
from devtools.local.stepfunctions import (
    LocalLambdas,
    LocalStateMachine,
    check_moto_hook,
    environment,
    lambda_importable,
    load_handler,
    states_of,
    synthesize_template,
)
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.manifest import manifest_key
from lethe.storage.store import parse_s3_uri

STEPS = ("retention", "plan", "sweep", "expire", "abort", "purge", "report", "record_failure")
HANDLERS = tuple(f"gc_steps.handler.{s}" for s in STEPS)
_T = TypeVar("_T")


def on_the_stack(test: _T) -> _T:
    """A test that runs the synthesized stack's state machine: the CDK (slow), one xdist group."""
    marked: _T = pytest.mark.cdk(pytest.mark.slow(pytest.mark.xdist_group("cdk")(test)))
    return marked


def base_env(**extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "POWERTOOLS_SERVICE_NAME": "lethe-gc",
        "POWERTOOLS_METRICS_NAMESPACE": "Lethe",
        "POWERTOOLS_TRACE_DISABLED": "true",
        **extra,
    }


class Steps:
    """Each step loaded as its own function (own module, own settings), called under its env."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        with environment(env):
            self.fns = {s: load_handler(f"gc_steps.handler.{s}") for s in STEPS}

    def __call__(self, step: str, event: dict[str, Any]) -> Any:
        with environment(self.env):
            return self.fns[step](event, LambdaContext(function_name=f"gc-{step}"))


# --- the steps, called as the workflow would ------------------------------------------------


def test_steps_in_workflow_order(table_uri: str, s3: Any) -> None:
    t = table_with_history(table_uri, gc_grace=QUICK)
    h, old, spliced = erase(t, 42, "erase-42")
    for i in range(3):
        put(s3, table_uri, f"data/2026/01/01/00/orphan-{i}.parquet")
    past_quick_grace()
    run = Steps(
        base_env(
            LETHE_TABLE_URI=table_uri,
            LETHE_GC_RETENTION="1v",
            LETHE_GC_GRACE=QUICK,
            LETHE_GC_ERASURE_GRACE="0s",
            LETHE_GC_VERSIONED_BUCKET="false",
        )
    )
    plan = run("plan", {"dry_run": False})
    assert plan["table"] == table_uri and plan["head_version"] == t.version
    assert len(json.dumps(plan)) < 4096 and len(plan["batches"]) == 1
    for batch in plan["batches"]:
        out = run("sweep", {"run_id": plan["run_id"], "dry_run": False, "batch_key": batch})
        assert out["deleted"]["data"]["objects"] == 3 + 2  # orphans, replaced, superseded
        again = run("sweep", {"run_id": plan["run_id"], "dry_run": False, "batch_key": batch})
        assert again["deleted"]["data"]["objects"] == 5  # idempotent: deleting again is a no-op
    state = {"run_id": plan["run_id"], "dry_run": False}
    assert run("expire", state)["deleted"]["manifest"]["objects"] == spliced
    assert run("abort", state)["deleted"] == {}
    assert run("purge", state)["skipped"] == {"not_versioned": 1}
    summary = run("report", state)
    assert summary["erasures_newly_complete"] == [h] and summary["erasures_complete"] == 1
    files = listing(s3, table_uri)
    assert old not in files and f"_gc/erasures/{h}.json" in files
    report = json.loads(
        s3.get_object(
            Bucket=parse_s3_uri(table_uri)[0],
            Key=f"{parse_s3_uri(table_uri)[1]}/_gc/{plan['run_id']}/report.json",
        )["Body"].read()
    )
    assert report["kind"] == "lethe.gc.report" and report["erasures"][0]["complete"]
    assert verify(lethe.Table.open(table_uri)).ok
    with pytest.raises(errors.SnapshotNotFound, match=f"oldest available version is {spliced}"):
        lethe.Table.open(table_uri, version=spliced - 1)


def test_event_overrides_and_named_errors(table_uri: str, s3: Any) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=QUICK).append(events(0, 10))
    put(s3, table_uri, "data/orphan.parquet")
    past_quick_grace()
    run = Steps(base_env(LETHE_TABLE_URI="s3://elsewhere/none"))  # the event names the table
    plan = run("plan", {"dry_run": True, "table": table_uri, "grace": QUICK})
    assert plan["candidates"]["data"]["objects"] == 1 and plan["dry_run"]
    out = run("sweep", {"batch_key": plan["batches"][0], "dry_run": False})
    assert out["dry_run"] and "data/orphan.parquet" in listing(
        s3, table_uri
    )  # the plan's mode wins
    with pytest.raises(errors.InvalidRequest):
        run("sweep", {"dry_run": False})
    with pytest.raises(lethe.gc.GcRunNotFound):
        run("expire", {"run_id": "20260101T000000Z-00000000", "table": table_uri})
    bad = plan["batches"][0].replace("batch-0000", "batch-0099")
    with pytest.raises(lethe.gc.GcRunNotFound):
        run("sweep", {"batch_key": bad})
    with (
        environment(base_env(LETHE_GC_GRACE="soon")),
        pytest.raises(errors.InvalidRequest, match="LETHE_GC_GRACE"),
    ):
        load_handler("gc_steps.handler.plan")  # settings fail loudly at cold start


def test_sweep_spares_files_committed_after_the_plan(table_uri: str, s3: Any) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=QUICK)
    t.append(events(0, 10))
    files = t.write_data_files(events(10, 10))
    past_quick_grace()
    run = Steps(base_env(LETHE_TABLE_URI=table_uri, LETHE_GC_GRACE=QUICK))
    plan = run("plan", {"dry_run": False})
    with pytest.raises(errors.GraceExpired):  # an honest writer this late refuses ...
        t.commit_files(files)
    # ... one whose clock wrongly says its files are fresh lands between Plan and Sweep, and
    # the sweep's own re-check still spares them
    t.commit_files(files, written_at=time.time())
    out = run("sweep", {"batch_key": plan["batches"][0], "run_id": plan["run_id"]})
    assert out["skipped"] == {"referenced": 1} and out["deleted"] == {}
    assert files[0].path in listing(s3, table_uri)
    assert lethe.Table.open(table_uri).scan().num_rows == 20


def test_sweep_refuses_a_replaced_table(table_uri: str, s3: Any) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=QUICK).append(events(0, 10))
    put(s3, table_uri, "data/orphan.parquet")
    past_quick_grace()
    run = Steps(base_env(LETHE_TABLE_URI=table_uri, LETHE_GC_GRACE=QUICK))
    plan = run("plan", {"dry_run": False})
    bucket, prefix = parse_s3_uri(table_uri)
    for k in listing(s3, table_uri) - {p for p in listing(s3, table_uri) if p.startswith("_gc/")}:
        s3.delete_object(Bucket=bucket, Key=f"{prefix}/{k}")
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    put(s3, table_uri, "data/orphan.parquet")
    with pytest.raises(lethe.gc.GcConflict):
        run("sweep", {"batch_key": plan["batches"][0]})
    assert "data/orphan.parquet" in listing(s3, table_uri)


def test_record_failure_infers_the_step(table_uri: str, s3: Any) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
    run = Steps(base_env(LETHE_TABLE_URI=table_uri))
    rid = "20260101T000000Z-0123abcd"
    cases = [
        ({"dry_run": False}, "Retention"),
        ({"dry_run": False, "row_retention": {"swept": False}}, "Plan"),
        ({"dry_run": False, "plan": {"run_id": rid, "table": table_uri}}, "SweepBatches"),
        ({"run_id": rid, "dry_run": False}, "Expire"),
        ({"run_id": rid, "dry_run": False, "expire": {}, "abort": {}}, "Purge"),
    ]
    bucket, prefix = parse_s3_uri(table_uri)
    for state, step in cases:
        err = {"Error": "GcConflict", "Cause": json.dumps({"errorMessage": "x" * 50_000})}
        out = run("record_failure", {**state, "error": err})
        key = out["recorded"].split(f"s3://{bucket}/", 1)[1]
        rec = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        assert (rec["step"], rec["error"]) == (step, "GcConflict")
        assert len(rec["cause"]) <= 32_000 and key.startswith(f"{prefix}/_gc/")


# --- local runner plumbing ------------------------------------------------------------------


def test_moto_lambda_hook_canary(aws: LocalAws) -> None:
    """Fails loudly if moto moves ``LambdaFunction._invoke_lambda`` (a private internal)."""
    check_moto_hook()
    lam = aws.client("lambda")
    iam = aws.client("iam")
    role = iam.create_role(
        RoleName=f"canary-{uuid.uuid4().hex[:8]}",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("index.py", "")
    name = f"canary-{uuid.uuid4().hex[:8]}"
    arn = lam.create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=role,
        Handler="index.handler",
        Code={"ZipFile": buf.getvalue()},
    )["FunctionArn"]
    seen: list[tuple[Any, str | None]] = []

    def handler(event: Any, context: Any) -> Any:
        seen.append((event, os.environ.get("CANARY")))
        if event.get("fail"):
            raise KeyError("boom")
        return {"echo": event["x"]}

    from moto.awslambda.models import LambdaFunction

    moto_invoke = LambdaFunction.__dict__["_invoke_lambda"]
    routes = LocalLambdas()
    routes.register(arn, name=name, handler="x.handler", env=base_env(CANARY="1"), fn=handler)
    other = LocalLambdas()  # a second runner, closed first: ours keeps routing
    other.register(
        "arn:aws:lambda:us-east-1:123456789012:function:none",
        name="none",
        handler="x.y",
        env={},
        fn=handler,
    )
    routes.install()
    other.install()
    try:
        other.uninstall()
        r = lam.invoke(FunctionName=name, Payload=json.dumps({"x": 7}))
        assert json.loads(r["Payload"].read()) == {"echo": 7} and "FunctionError" not in r
        r = lam.invoke(FunctionName=name, Payload=json.dumps({"fail": True}))
        assert r["FunctionError"] and json.loads(r["Payload"].read())["errorType"] == "KeyError"
    finally:
        routes.uninstall()
    assert seen == [({"x": 7}, "1"), ({"fail": True}, "1")] and "CANARY" not in os.environ
    assert LambdaFunction.__dict__["_invoke_lambda"] is moto_invoke  # unhooked when unused


def test_environment_swap_is_exclusive() -> None:
    os.environ.pop("LETHE_ONLY_A", None)
    with environment({**os.environ, "LETHE_ONLY_A": "a"}):
        assert os.environ["LETHE_ONLY_A"] == "a"
        with environment({"LETHE_ONLY_B": "b"}):
            assert dict(os.environ) == {"LETHE_ONLY_B": "b"}
        assert os.environ["LETHE_ONLY_A"] == "a"
    assert "LETHE_ONLY_A" not in os.environ


def test_gc_handlers_import_as_lambda_imports_them() -> None:
    from infra import constants as c

    err = lambda_importable(c.GC_PLAN_HANDLER)
    assert err is None, err


def test_other_handlers_import_as_lambda_imports_them() -> None:
    # the same check passes for a package whose name is not a built-in module
    assert lambda_importable("delete_requests.handler.handler") is None


# --- the synthesized state machine on moto's interpreter ------------------------------------


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return synthesize_template()


@pytest.fixture
def machine(template: dict[str, Any], aws: LocalAws) -> Iterator[Any]:
    made: list[LocalStateMachine] = []

    def make(uri: str, **env: str) -> LocalStateMachine:
        sm = LocalStateMachine.from_template(
            template,
            aws=aws,
            environment={
                "LETHE_TABLE_URI": uri,
                "POWERTOOLS_METRICS_NAMESPACE": "Lethe",
                **env,
            },
        )
        made.append(sm)
        return sm

    yield make
    for sm in made:
        sm.close()


@on_the_stack
def test_state_machine_end_to_end_versioned(machine: Any, s3: Any) -> None:
    bucket = versioned_bucket(s3)
    uri = f"s3://{bucket}/tables/main"
    t = table_with_history(uri, gc_grace=QUICK)
    h, old, spliced = erase(t, 120, "erase-120")
    for i in range(5):
        put(s3, uri, f"data/2026/01/01/00/o-{i:04d}.parquet")
    stale = s3.create_multipart_upload(Bucket=bucket, Key="tables/main/data/stale.parquet")
    past_quick_grace()
    sm = machine(
        uri,
        LETHE_GC_RETENTION="1v",
        LETHE_GC_GRACE=QUICK,
        LETHE_GC_ERASURE_GRACE="0s",
        LETHE_GC_VERSIONED_BUCKET="true",
    )
    assert set(states_of(sm.definition)) >= {"Plan", "SweepBatches", "Sweep", "Report"}
    # 5 orphans, the replaced and the superseded file, the DV containers and the segment
    # objects the head no longer references: in batches of 2
    head = lethe.Table.open(uri).version
    garbage = {
        p for p in listing(s3, uri) if p.startswith(("data/", "tombstone/", "manifest/segments/"))
    } - referenced(uri, [head])
    old_segments = [p for p in garbage if p.startswith("manifest/segments/")]
    assert old_segments and len(garbage) >= 9 + len(old_segments)
    sweeps = (len(garbage) + 1) // 2
    run = sm.run({"dry_run": False, "batch_keys": 2}, name=f"gc-{uuid.uuid4().hex[:8]}")
    assert run.ok, (run.error, run.cause)
    assert run.states.count("Sweep") == sweeps
    assert [s for s in run.states if s != "Sweep"] == [
        "Retention",
        "Plan",
        "SweepBatches",
        "Compact",
        "Expire",
        "Abort",
        "Purge",
        "Report",
        "Done",
    ]
    assert sm.invocations("gc_steps.handler.sweep") == sweeps
    out = run.output
    assert out["report"]["erasures_newly_complete"] == [h]
    assert out["expire"]["deleted"]["manifest"]["objects"] == spliced
    assert out["abort"]["deleted"]["upload"]["objects"] == 1
    assert out["purge"]["deleted"]["version"]["objects"] >= 2 * spliced + 2
    files = listing(s3, uri)
    assert not [p for p in files if p.startswith("data/2026/01/01/00/o-")]
    assert not set(old_segments) & set(files)
    assert old not in files and versions_of(s3, bucket, f"tables/main/{old}") == []
    assert versions_of(s3, bucket, f"tables/main/{manifest_key(0)}") == []
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert stale["UploadId"] not in {u["UploadId"] for u in uploads}
    assert verify(lethe.Table.open(uri)).ok
    assert lethe.Table.open(uri).lookup(120).num_rows == 0
    with pytest.raises(errors.SnapshotNotFound, match=f"oldest available version is {spliced}"):
        lethe.Table.open(uri, version=1)


@on_the_stack
def test_state_machine_dry_run_deletes_nothing(machine: Any, table_uri: str, s3: Any) -> None:
    table_with_history(table_uri, gc_grace=QUICK)
    put(s3, table_uri, "data/orphan.parquet")
    past_quick_grace()
    before = listing(s3, table_uri)
    sm = machine(table_uri, LETHE_GC_RETENTION="1v", LETHE_GC_GRACE=QUICK)
    run = sm.run({"dry_run": True}, name=f"gc-dry-{uuid.uuid4().hex[:8]}")
    assert run.ok, (run.error, run.cause)
    after = listing(s3, table_uri)
    assert {p for p in after if not p.startswith("_gc/")} == before
    assert (
        run.output["report"]["dry_run"]
        and run.output["expire"]["deleted"]["manifest"]["objects"] == 4
    )
    # the Compact state dropped $.plan; the report counts what would go
    assert run.output["report"]["deleted"]["data"]["objects"] == 2  # orphan + replaced file


@on_the_stack
def test_state_machine_catches_a_failed_step_and_records_it(
    template: dict[str, Any], aws: LocalAws, table_uri: str, s3: Any
) -> None:
    """A real GcConflict: the table is replaced between Plan and Sweep."""
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=QUICK).append(events(0, 10))
    put(s3, table_uri, "data/orphan.parquet")
    past_quick_grace()
    bucket, prefix = parse_s3_uri(table_uri)
    real: list[Any] = []

    def plan_then_replace(event: Any, context: Any) -> Any:
        if not real:
            real.append(load_handler("gc_steps.handler.plan"))  # in this function's environment
        out = real[0](event, context)
        for k in listing(s3, table_uri):
            if not k.startswith("_gc/"):
                s3.delete_object(Bucket=bucket, Key=f"{prefix}/{k}")
        lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE)
        return out

    sm = LocalStateMachine.from_template(
        template,
        aws=aws,
        environment={"LETHE_TABLE_URI": table_uri, "LETHE_GC_GRACE": QUICK},
        handlers={"gc_steps.handler.plan": plan_then_replace},
    )
    try:
        run = sm.run({"dry_run": False}, name=f"gc-fail-{uuid.uuid4().hex[:8]}")
    finally:
        sm.close()
    assert run.status == "FAILED" and run.error == "LetheGcFailed"
    assert run.states[-2:] == ("RecordFailure", "Failed") and "Expire" not in run.states
    (failure,) = [k for k in listing(s3, table_uri) if k.endswith("/failure.json")]
    rec = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/{failure}")["Body"].read())
    assert rec["error"] == "GcConflict" and rec["step"] == "SweepBatches"
    assert "replaced" in rec["cause"]


@on_the_stack
def test_state_machine_retries_lambda_throttling(machine: Any, table_uri: str, s3: Any) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE).append(events(0, 10))
    sm = machine(table_uri)
    sm.inject_failure("gc_steps.handler.expire", "Lambda.TooManyRequestsException", "Rate exceeded")
    run = sm.run({"dry_run": False}, name=f"gc-retry-{uuid.uuid4().hex[:8]}")
    assert run.ok, (run.error, run.cause)
    assert sm.invocations("gc_steps.handler.expire") == 2
    failed = [e for e in run.history if e["type"] == "LambdaFunctionFailed"]
    assert len(failed) == 1
    assert (
        failed[0]["lambdaFunctionFailedEventDetails"]["error"] == "Lambda.TooManyRequestsException"
    )


@on_the_stack
def test_state_machine_sweeps_expired_rows_before_the_plan(
    machine: Any, table_uri: str, s3: Any
) -> None:
    """A table with a row retention and old rows: the Retention state erases them (two files
    dropped whole, one spliced) and the same execution's Plan/Sweep collects what they left."""
    t = lethe.Table.create(
        table_uri, EVENTS, key="id", gc_grace=QUICK, row_group_bytes=1024
    )  # events(i): event_time = T0 + i seconds
    for k in range(4):
        t.append(events(k * 100, 100))
    old = {f.path for f in t.manifest.files}
    t0 = events(0, 1).column("event_time")[0].as_py().timestamp()
    # rows older than ~T0 + 250 s (now) have expired: files 0 and 1 wholly, file 2 in part
    keep = int(time.time() - t0) - 250
    t.set_retention("event_time", f"{keep}s")
    past_quick_grace()
    sm = machine(
        table_uri,
        LETHE_GC_RETENTION="1v",
        LETHE_GC_GRACE=QUICK,
        LETHE_GC_ERASURE_GRACE="0s",
    )
    run = sm.run({"dry_run": False}, name=f"gc-ttl-{uuid.uuid4().hex[:8]}")
    assert run.ok, (run.error, run.cause)
    assert (
        run.states[:2] == ("Retention", "Plan")
        and sm.invocations("gc_steps.handler.retention") == 1
    )
    swept = run.output["row_retention"]
    cutoff = datetime.fromisoformat(swept["cutoff"]).timestamp() - t0
    assert 250 <= cutoff < 300  # the straddling file is file 2
    assert (swept["files_dropped"], swept["files_spliced"]) == (2, 1) and swept["complete"]
    expected = [i for i in range(400) if i >= cutoff]
    assert swept["rows_expired"] == 400 - len(expected)
    t = lethe.Table.open(table_uri)
    assert sorted(t.scan(columns=["id"]).column("id").to_pylist()) == expected
    live = {f.path for f in t.manifest.files}
    assert len(old - live) == 3 and len(live - old) == 1  # 2 dropped, 1 replaced by its splice
    files = listing(s3, table_uri)
    assert not (old - live) & files  # GC in the same execution removed what the sweep left
    assert run.output["report"]["erasures_newly_complete"] == [swept["request_hash"]]
    assert t.erasure_status(swept["request_id"]).state == "complete"  # the sweep's receipt
    assert verify(t).ok


@on_the_stack
def test_state_machine_records_a_failed_retention_sweep(
    template: dict[str, Any], aws: LocalAws, table_uri: str, s3: Any
) -> None:
    lethe.Table.create(table_uri, EVENTS, key="id", gc_grace=GRACE).append(events(0, 10))

    def fails(event: Any, context: Any) -> Any:
        raise errors.StoreError("S3 answered 503 for every request")

    sm = LocalStateMachine.from_template(
        template,
        aws=aws,
        environment={"LETHE_TABLE_URI": table_uri},
        handlers={"gc_steps.handler.retention": fails},
    )
    try:
        run = sm.run({"dry_run": False}, name=f"gc-ttl-fail-{uuid.uuid4().hex[:8]}")
    finally:
        sm.close()
    assert run.status == "FAILED" and "Plan" not in run.states
    assert run.states[-2:] == ("RecordFailure", "Failed")
    bucket, prefix = parse_s3_uri(table_uri)
    (failure,) = [k for k in listing(s3, table_uri) if k.endswith("/failure.json")]
    rec = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}/{failure}")["Body"].read())
    assert (rec["step"], rec["error"]) == ("Retention", "StoreError")
