"""The functions' settings (functions/_settings.py): typed, frozen, one failure mode that names
every missing or invalid variable, read at cold start by each handler."""

from __future__ import annotations

import doctest
from datetime import timedelta

import pytest
from pydantic import ValidationError

import _settings
from _settings import (
    DeleteRequestsSettings,
    GcSettings,
    IngestTriggerSettings,
    SettingsError,
    SpliceSettings,
)
from devtools.local.stepfunctions import environment, load_handler
from lethe import errors

INGEST = {
    "LETHE_TABLE_URI": "s3://b/t",
    "LETHE_EMR_APPLICATION_ID": "app",
    "LETHE_EMR_JOB_ROLE_ARN": "arn:aws:iam::123456789012:role/job",
    "LETHE_EMR_ENTRY_POINT": "s3://artifacts/spark_jobs/ingest.py",
}


def test_defaults() -> None:
    assert DeleteRequestsSettings.from_env({}).splice_queue_url is None
    splice = SpliceSettings.from_env({})
    assert splice.max_bytes == 64 << 20 and splice.queue_url is None
    gc = GcSettings.from_env({})
    assert gc.table_uri is None and gc.versioned is None
    assert gc.grace == timedelta(days=7) and gc.erasure_grace == timedelta(hours=1)
    assert gc.retention.max_age == timedelta(days=30) and gc.retention.versions is None
    ingest = IngestTriggerSettings.from_env(INGEST)
    assert ingest.incoming_prefix == "incoming/"
    assert ingest.direct_register_max_bytes == 256 << 20
    assert ingest.emr.lookback == timedelta(hours=24) and ingest.emr.archive is None


def test_values_are_parsed_and_empty_means_unset() -> None:
    gc = GcSettings.from_env(
        {
            "LETHE_TABLE_URI": "s3://b/t",
            "LETHE_GC_RETENTION": "1000v,30d",
            "LETHE_GC_GRACE": "",
            "LETHE_GC_ERASURE_GRACE": "0s",
            "LETHE_GC_VERSIONED_BUCKET": " TRUE ",
        }
    )
    assert gc.table_uri == "s3://b/t" and gc.versioned is True
    assert gc.retention.versions == 1000 and gc.grace == timedelta(days=7)
    assert gc.erasure_grace == timedelta(0)
    assert GcSettings.from_env({"LETHE_GC_VERSIONED_BUCKET": "false"}).versioned is False
    ingest = IngestTriggerSettings.from_env(
        {
            **INGEST,
            "LETHE_EMR_ARCHIVE": "s3://a/old-name.tar.gz",  # the older name still works
            "LETHE_EMR_DEDUPE_HOURS": "2",
            "LETHE_EMR_SPARK_PARAMETERS": "--conf spark.executor.cores=2",
            "LETHE_INCOMING_PREFIX": "",
        }
    )
    assert ingest.emr.archive == "s3://a/old-name.tar.gz" and ingest.incoming_prefix == "incoming/"
    assert ingest.emr.lookback == timedelta(hours=2)
    assert ingest.emr.spark_submit_parameters().endswith("--conf spark.executor.cores=2")
    both = {**INGEST, "LETHE_EMR_JOB_ARCHIVE": "s3://a/new.tar.gz", "LETHE_EMR_ARCHIVE": "s3://x"}
    assert IngestTriggerSettings.from_env(both).emr.archive == "s3://a/new.tar.gz"


def test_every_problem_is_named_at_once() -> None:
    with pytest.raises(SettingsError) as e:
        IngestTriggerSettings.from_env(
            {
                "LETHE_TABLE_URI": "http://b/t",
                "LETHE_EMR_JOB_ROLE_ARN": "r",
                "LETHE_EMR_ENTRY_POINT": "ingest.py",
                "LETHE_DIRECT_REGISTER_MAX_BYTES": "-5",
                "LETHE_EMR_DEDUPE_HOURS": "a day",
            }
        )
    msg = str(e.value)
    assert msg.startswith("ingest trigger settings: ")
    for part in (
        "LETHE_TABLE_URI='http://b/t': must be an s3:// URI",
        "LETHE_EMR_APPLICATION_ID is required but not set",
        "LETHE_EMR_ENTRY_POINT='ingest.py': must be the s3:// URI of ingest.py",
        "LETHE_DIRECT_REGISTER_MAX_BYTES='-5': must be a byte count",
        "LETHE_EMR_DEDUPE_HOURS='a day': must be a number of hours",
    ):
        assert part in msg
    with pytest.raises(SettingsError, match=r"LETHE_SPLICE_MAX_BYTES='0': must be a positive"):
        SpliceSettings.from_env({"LETHE_SPLICE_MAX_BYTES": "0"})
    with pytest.raises(SettingsError) as e:
        GcSettings.from_env(
            {
                "LETHE_TABLE_URI": "bucket/t",
                "LETHE_GC_RETENTION": "forever",
                "LETHE_GC_VERSIONED_BUCKET": "maybe",
            }
        )
    msg = str(e.value)
    assert "LETHE_TABLE_URI='bucket/t': table URI must look like s3://bucket/prefix" in msg
    assert "LETHE_GC_RETENTION='forever': not a duration" in msg
    assert "LETHE_GC_VERSIONED_BUCKET='maybe': use true, false or auto" in msg
    assert isinstance(e.value, errors.InvalidRequest)  # Step Functions' Catch matches the name


def test_from_env_reads_the_process_environment_only_when_given_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in INGEST.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LETHE_SPLICE_MAX_BYTES", "4096")
    assert IngestTriggerSettings.from_env().table_uri == "s3://b/t"
    assert SpliceSettings.from_env().max_bytes == 4096
    assert SpliceSettings.from_env({}).max_bytes == 64 << 20  # a mapping replaces os.environ
    assert SpliceSettings().max_bytes == 64 << 20  # only from_env() reads the environment


def test_settings_are_frozen() -> None:
    s = SpliceSettings.from_env({})
    with pytest.raises(ValidationError):
        s.max_bytes = 1


@pytest.mark.parametrize(
    ("handler", "env", "variable"),
    [
        ("splice.handler.handler", {"LETHE_SPLICE_MAX_BYTES": "lots"}, "LETHE_SPLICE_MAX_BYTES"),
        ("gc_steps.handler.plan", {"LETHE_GC_GRACE": "soon"}, "LETHE_GC_GRACE"),
        ("ingest_trigger.handler.handler", {"LETHE_TABLE_URI": "s3://b/t"}, "LETHE_EMR_"),
    ],
)
def test_each_handler_fails_its_cold_start_naming_the_variable(
    handler: str, env: dict[str, str], variable: str
) -> None:
    base = {"AWS_DEFAULT_REGION": "us-east-1", "POWERTOOLS_TRACE_DISABLED": "true"}
    with environment({**base, **env}), pytest.raises(SettingsError, match=variable):
        load_handler(handler)


def test_docstring_example() -> None:
    result = doctest.testmod(_settings, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
