"""The ingest-trigger Lambda with real S3 events from moto's server: direct registration,
EMR Serverless hand-off (moto's emr-serverless), redelivery, wrong schemas."""

from __future__ import annotations

import importlib
import io
import json
from collections.abc import Iterator
from types import ModuleType
from typing import Any
from urllib.parse import quote_plus

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from devtools.local.events import LambdaContext, s3_put_event

ROLE = "arn:aws:iam::123456789012:role/lethe-emr-job"
ENTRY = "s3://artifacts/spark_jobs/ingest.py"


@pytest.fixture
def app(aws: Any) -> str:
    """An EMR Serverless application in moto (which knows only a few release labels)."""
    emr = aws.client("emr-serverless")
    return str(
        emr.create_application(name="lethe-spark", releaseLabel="emr-6.6.0", type="SPARK")[
            "applicationId"
        ]
    )


@pytest.fixture
def trigger(table_uri: str, app: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-ingest")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")
    monkeypatch.setenv("LETHE_TABLE_URI", table_uri)
    monkeypatch.setenv("LETHE_INCOMING_PREFIX", "incoming/")
    monkeypatch.setenv("LETHE_DIRECT_REGISTER_MAX_BYTES", str(200_000))
    monkeypatch.setenv("LETHE_EMR_APPLICATION_ID", app)
    monkeypatch.setenv("LETHE_EMR_JOB_ROLE_ARN", ROLE)
    monkeypatch.setenv("LETHE_EMR_ENTRY_POINT", ENTRY)
    monkeypatch.setenv("LETHE_EMR_JOB_ARCHIVE", "s3://artifacts/lethe-pyspark.tar.gz")
    lethe.Table.create(table_uri, EVENTS, key="id")
    import functions.ingest_trigger.handler as h

    yield importlib.reload(h)  # settings are read at (re)load: a cold start per test


def upload(s3: Any, bucket: str, key: str, body: bytes) -> dict[str, Any]:
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    event = s3_put_event(bucket, key, size=len(body), etag=etag)
    event["Records"][0]["s3"]["object"]["key"] = quote_plus(key)  # as S3 sends it
    return event


def parquet_bytes(t: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    return buf.getvalue()


def job_runs(aws: Any, app: str) -> list[dict[str, Any]]:
    emr = aws.client("emr-serverless")
    try:
        emr.list_job_runs(applicationId=app)
    except emr.exceptions.ResourceNotFoundException:  # moto, before the first run
        return []
    return [
        emr.get_job_run(applicationId=app, jobRunId=r["id"])["jobRun"]
        for r in emr.list_job_runs(applicationId=app)["jobRuns"]
    ]


def test_parquet_upload_is_registered_once(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str, aws: Any, app: str
) -> None:
    event = upload(s3, bucket, "incoming/2026/11/day one.parquet", parquet_bytes(events(0, 1000)))
    out = trigger.handler(event, LambdaContext())
    (u,) = out["uploads"]
    assert (u["action"], u["duplicate"], u["version"], u["rows"]) == ("registered", False, 1, 1000)
    t = lethe.Table.open(table_uri)
    assert t.version == 1 and t.scan().equals(events(0, 1000))
    assert t.manifest.files[0].path.startswith("data/")
    # S3 delivers at least once: the same event again changes nothing
    again = trigger.handler(event, LambdaContext())["uploads"][0]
    assert (again["action"], again["duplicate"], again["version"]) == ("registered", True, 1)
    assert lethe.Table.open(table_uri).version == 1
    assert len(list(t.store.list(t.key_of("data/")))) == 1
    assert job_runs(aws, app) == []


def test_csv_and_large_parquet_start_one_emr_job_run_each(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str, aws: Any, app: str
) -> None:
    csv_event = upload(s3, bucket, "incoming/batch.csv", b"id,payload\n1,a\n")
    big = parquet_bytes(events(0, 60_000))
    assert len(big) > 200_000
    big_event = upload(s3, bucket, "incoming/big.parquet", big)
    first = trigger.handler(csv_event, LambdaContext())["uploads"][0]
    assert first["action"] == "job_started" and not first["duplicate"]
    assert trigger.handler(csv_event, LambdaContext())["uploads"][0] == {
        **first,
        "duplicate": True,
    }
    trigger.handler(big_event, LambdaContext())
    runs = job_runs(aws, app)
    assert len(runs) == 2
    by_format = {}
    for run in runs:
        assert run["executionRole"] == ROLE
        driver = run["jobDriver"]["sparkSubmit"]
        assert driver["entryPoint"] == ENTRY
        args = driver["entryPointArguments"]
        opts = dict(zip(args[::2], args[1::2], strict=True))
        assert opts["--table"] == table_uri
        assert opts["--request-id"].startswith(opts["--input"] + "#")
        assert (
            "spark.archives=s3://artifacts/lethe-pyspark.tar.gz#" in driver["sparkSubmitParameters"]
        )
        by_format[opts["--format"]] = opts["--input"]
    assert by_format == {
        "csv": f"s3://{bucket}/incoming/batch.csv",
        "parquet": f"s3://{bucket}/incoming/big.parquet",
    }
    assert first["job_run_id"] in {r["jobRunId"] for r in runs}
    assert lethe.Table.open(table_uri).version == 0  # the job commits, not the trigger


def test_wrong_schema_fails_the_record_with_the_reason_and_leaves_the_table(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str
) -> None:
    bad = events(0, 10).drop_columns(["payload"]).append_column("ssn", pa.array(["x"] * 10))
    bad_event = upload(s3, bucket, "incoming/bad.parquet", parquet_bytes(bad))
    good_event = upload(s3, bucket, "incoming/good.parquet", parquet_bytes(events(10, 5)))
    both = {"Records": bad_event["Records"] + good_event["Records"]}
    with pytest.raises(trigger.UploadFailed) as e:
        trigger.handler(both, LambdaContext())
    msg = str(e.value)
    assert msg.startswith("1 of 2 uploads failed: SchemaMismatch")
    assert "missing columns ['payload']" in msg and "unknown columns ['ssn']" in msg
    t = lethe.Table.open(table_uri)
    assert t.version == 1 and t.scan()["id"].to_pylist() == list(range(10, 15))
    with pytest.raises(trigger.UploadFailed, match="unsupported upload"):
        trigger.handler(upload(s3, bucket, "incoming/notes.txt", b"hi"), LambdaContext())
    assert lethe.Table.open(table_uri).version == 1


def test_uploads_outside_the_prefix_are_ignored(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str
) -> None:
    out = trigger.handler(upload(s3, bucket, "elsewhere/x.parquet", b"PAR1"), LambdaContext())
    assert out["uploads"][0]["action"] == "ignored"
    assert lethe.Table.open(table_uri).version == 0


def test_settings_fail_loudly_at_cold_start(trigger: ModuleType) -> None:
    with pytest.raises(trigger.SettingsError, match="LETHE_EMR_APPLICATION_ID"):
        trigger.Settings.from_env({"LETHE_TABLE_URI": "s3://b/t"})
    env = {
        "LETHE_TABLE_URI": "s3://b/t",
        "LETHE_EMR_APPLICATION_ID": "a",
        "LETHE_EMR_JOB_ROLE_ARN": ROLE,
        "LETHE_EMR_ENTRY_POINT": ENTRY,
        "LETHE_DIRECT_REGISTER_MAX_BYTES": "lots",
    }
    with pytest.raises(trigger.SettingsError, match="byte count"):
        trigger.Settings.from_env(env)
    ok = trigger.Settings.from_env({**env, "LETHE_DIRECT_REGISTER_MAX_BYTES": "10"})
    assert ok.direct_register_max_bytes == 10 and ok.emr.archive is None
    assert json.dumps(ok.emr.spark_submit_parameters()) == '""'


def _new_shape(start: int, n: int) -> pa.Table:
    """The upstream's new shape: ``customer_id`` int64 past int32, a ``country`` column."""
    t = events(start, n)
    wide = pa.array([2**40 + i for i in range(n)], pa.int64())
    return t.set_column(2, "customer_id", wide).append_column("country", pa.array(["NL"] * n))


def test_an_upload_of_a_new_shape_is_refused_unless_the_table_lets_uploads_evolve(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str, aws: Any, app: str
) -> None:
    from lethe.cli import main

    event = upload(s3, bucket, "incoming/new.parquet", parquet_bytes(_new_shape(0, 5)))
    with pytest.raises(trigger.UploadFailed) as e:
        trigger.handler(event, LambdaContext())
    msg = str(e.value)  # the reason names every differing column, never a value
    assert msg.startswith("1 of 1 uploads failed: SchemaMismatch")
    assert "country" in msg and "customer_id" in msg and "NL" not in msg and "1099511" not in msg
    assert lethe.Table.open(table_uri).version == 0
    # the table property, set the way other properties are (a properties commit, or the CLI)
    assert main(["schema", "uploads", table_uri, "evolve"]) == 0
    t = lethe.Table.open(table_uri)
    assert t.manifest.properties.uploads_evolve and t.manifest.operation.kind == "properties"
    (u,) = trigger.handler(event, LambdaContext())["uploads"]  # the redelivered event
    assert (u["action"], u["duplicate"], u["rows"]) == ("registered", False, 5)
    t = lethe.Table.open(table_uri)
    assert t.schema.field("customer_id").type == pa.int64() and "country" in t.schema.names
    assert by_key(t.scan(["id", "customer_id", "country"]))[-1] == {
        "id": 4,
        "customer_id": 2**40 + 4,
        "country": "NL",
    }
    # an old-shape upload after the evolution lands under the old schema, read widened
    old = upload(s3, bucket, "incoming/old.parquet", parquet_bytes(events(5, 3)))
    trigger.handler(old, LambdaContext())
    got = by_key(lethe.Table.open(table_uri).scan(["id", "customer_id", "country"]))
    assert got[5:] == [{"id": i, "customer_id": i % 100, "country": None} for i in (5, 6, 7)]
    # what no evolution reconciles is refused even so, the table unchanged
    v = lethe.Table.open(table_uri).version
    bad = events(8, 2).set_column(3, "payload", pa.array([1, 2]))
    with pytest.raises(trigger.UploadFailed, match=r"payload: int64 \(table has string"):
        trigger.handler(
            upload(s3, bucket, "incoming/bad.parquet", parquet_bytes(bad)), LambdaContext()
        )
    assert lethe.Table.open(table_uri).version == v
    # and back to strict: the new shape is refused again
    assert main(["schema", "uploads", table_uri, "strict"]) == 0
    with pytest.raises(trigger.UploadFailed, match="SchemaMismatch"):
        trigger.handler(
            upload(
                s3,
                bucket,
                "incoming/newer.parquet",
                parquet_bytes(_new_shape(20, 2).append_column("tier", pa.array([1, 2]))),
            ),
            LambdaContext(),
        )
    assert job_runs(aws, app) == []


def test_the_job_an_upload_starts_evolves_only_when_the_table_lets_it(
    trigger: ModuleType, s3: Any, bucket: str, table_uri: str, aws: Any, app: str
) -> None:
    trigger.handler(upload(s3, bucket, "incoming/a.csv", b"id,payload\n1,a\n"), LambdaContext())
    lethe.Table.open(table_uri).set_properties(uploads_evolve=True)
    trigger.handler(upload(s3, bucket, "incoming/b.csv", b"id,payload\n2,b\n"), LambdaContext())
    flags = {
        r["jobDriver"]["sparkSubmit"]["entryPointArguments"][3].rsplit("/", 1)[-1]: "--evolve"
        in r["jobDriver"]["sparkSubmit"]["entryPointArguments"]
        for r in job_runs(aws, app)
    }
    assert flags == {"a.csv": False, "b.csv": True}


def test_uploads_evolve_is_not_written_when_unset(table_uri: str) -> None:
    """Old manifests re-encode byte-identically: the default is not written."""
    from lethe.catalog.manifest import decode_manifest, encode_manifest

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    raw = encode_manifest(t.manifest.manifest)
    assert b"uploads_evolve" not in raw and encode_manifest(decode_manifest(raw)) == raw
    t.set_properties(uploads_evolve=True)
    assert b'"uploads_evolve":true' in encode_manifest(
        lethe.Table.open(table_uri).manifest.manifest
    )


def by_key(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_parquet_uploads_are_adopted_in_place_when_asked(
    table_uri: str, app: str, monkeypatch: pytest.MonkeyPatch, s3: Any, bucket: str
) -> None:
    """LETHE_ADOPT_IN_PLACE: an external pipeline keeps writing under the prefix; each file
    is adopted where it is (no copy), its Hive directory a partition value, once."""
    from devtools.local.events import s3_put_event as put_event

    for k, v in {
        "POWERTOOLS_SERVICE_NAME": "lethe-ingest",
        "POWERTOOLS_METRICS_NAMESPACE": "Lethe",
        "LETHE_TABLE_URI": table_uri,
        "LETHE_INCOMING_PREFIX": "raw/events/",
        "LETHE_EMR_APPLICATION_ID": app,
        "LETHE_EMR_JOB_ROLE_ARN": ROLE,
        "LETHE_EMR_ENTRY_POINT": ENTRY,
        "LETHE_ADOPT_IN_PLACE": "true",
    }.items():
        monkeypatch.setenv(k, v)
    lethe.Table.create(table_uri, EVENTS.append(pa.field("dt", pa.string())), key="id")
    import functions.ingest_trigger.handler as h

    trigger = importlib.reload(h)
    key = "raw/events/dt=2026-01-05/part-0.parquet"
    body = parquet_bytes(events(0, 100))
    etag = s3.put_object(Bucket=bucket, Key=key, Body=body)["ETag"]
    event = put_event(bucket, key, size=len(body), etag=etag)
    (u,) = trigger.handler(event, LambdaContext())["uploads"]
    assert (u["action"], u["duplicate"], u["rows"]) == ("adopted", False, 100)
    t = lethe.Table.open(table_uri)
    (f,) = t.manifest.files
    assert f.path == f"s3://{bucket}/{key}" and f.partition == {"dt": "2026-01-05"} and f.owned
    assert set(t.scan()["dt"].to_pylist()) == {"2026-01-05"}
    again = trigger.handler(event, LambdaContext())["uploads"][0]
    assert again["duplicate"] and lethe.Table.open(table_uri).version == t.version
    assert not s3.list_objects_v2(Bucket=bucket, Prefix=table_uri.split("/", 3)[3] + "/data/").get(
        "Contents"
    )


def test_objects_under_adopted_prefixes_are_adopted_in_place(
    table_uri: str, app: str, monkeypatch: pytest.MonkeyPatch, s3: Any, bucket: str
) -> None:
    """LETHE_ADOPT_PREFIXES (the stack's lethe:adopt): a new Parquet object under an adopted
    prefix is adopted where it is, its Hive directory below *that* prefix a partition value;
    markers under it are ignored, and uploads under incoming/ are still registered by copy."""
    for k, v in {
        "POWERTOOLS_SERVICE_NAME": "lethe-ingest",
        "POWERTOOLS_METRICS_NAMESPACE": "Lethe",
        "LETHE_TABLE_URI": table_uri,
        "LETHE_EMR_APPLICATION_ID": app,
        "LETHE_EMR_JOB_ROLE_ARN": ROLE,
        "LETHE_EMR_ENTRY_POINT": ENTRY,
        "LETHE_ADOPT_PREFIXES": f"s3://other-bucket/x, s3://{bucket}/raw/events",
        "LETHE_ADOPT_OWNERSHIP": "false",
    }.items():
        monkeypatch.setenv(k, v)
    lethe.Table.create(table_uri, EVENTS.append(pa.field("dt", pa.string())), key="id")
    import functions.ingest_trigger.handler as h

    trigger = importlib.reload(h)
    assert trigger.SETTINGS.adopt_prefixes == (("other-bucket", "x/"), (bucket, "raw/events/"))
    key = "raw/events/dt=2026-01-06/part-0.parquet"
    (u,) = trigger.handler(upload(s3, bucket, key, parquet_bytes(events(0, 50))), LambdaContext())[
        "uploads"
    ]
    assert (u["action"], u["duplicate"], u["rows"]) == ("adopted", False, 50)
    marker = upload(s3, bucket, "raw/events/dt=2026-01-06/_SUCCESS", b"")
    assert trigger.handler(marker, LambdaContext())["uploads"][0]["action"] == "ignored"
    elsewhere = upload(s3, bucket, "raw/eventsX/part-0.parquet", parquet_bytes(events(50, 5)))
    assert trigger.handler(elsewhere, LambdaContext())["uploads"][0]["action"] == "ignored"
    t = lethe.Table.open(table_uri)
    (f,) = t.manifest.files
    assert f.path == f"s3://{bucket}/{key}" and f.partition == {"dt": "2026-01-06"}
    assert f.owned is False  # LETHE_ADOPT_OWNERSHIP=false: a read-only adoption
    with_dt = events(100, 10).append_column("dt", pa.array(["2026-01-07"] * 10))
    copied = upload(s3, bucket, "incoming/u.parquet", parquet_bytes(with_dt))
    assert trigger.handler(copied, LambdaContext())["uploads"][0]["action"] == "registered"


def test_adopted_prefixes_must_be_prefixes(table_uri: str, app: str) -> None:
    from functions._settings import IngestTriggerSettings, SettingsError

    env = {
        "LETHE_TABLE_URI": table_uri,
        "LETHE_EMR_APPLICATION_ID": app,
        "LETHE_EMR_JOB_ROLE_ARN": ROLE,
        "LETHE_EMR_ENTRY_POINT": ENTRY,
    }
    with pytest.raises(SettingsError, match="LETHE_ADOPT_PREFIXES"):
        IngestTriggerSettings.from_env({**env, "LETHE_ADOPT_PREFIXES": "s3://bkt"})
    assert IngestTriggerSettings.from_env(env).adopt_prefixes == ()
