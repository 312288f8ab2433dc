"""Starting ``spark_jobs/adopt.py`` on EMR Serverless (moto's): ``lethe adopt
--emr-application`` and :func:`lethe.ingest.start_adopt_job` start one run per table, source
and options, with the job's arguments, and a repeated start finds the earlier run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lethe.cli import main
from lethe.ingest import EmrJobSettings, start_adopt_job

ROLE = "arn:aws:iam::123456789012:role/lethe-emr-job"
ENTRY = "s3://artifacts/spark_jobs/adopt.py"


@pytest.fixture
def app(aws: Any) -> str:
    emr = aws.client("emr-serverless")
    made = emr.create_application(name="lethe-spark", releaseLabel="emr-6.6.0", type="SPARK")
    return str(made["applicationId"])


def test_the_cli_starts_the_adoption_job_once(
    aws: Any, app: str, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "adopt",
        f"s3://{bucket}/tables/events",
        f"s3://{bucket}/raw/events/",
        "--key",
        "id",
        "--index",
        "customer_id",
        "--partition-type",
        "dt=date",
        "--emr-application",
        app,
        "--emr-role",
        ROLE,
        "--emr-entry-point",
        ENTRY,
        "--emr-archive",
        "s3://artifacts/lethe-pyspark.tar.gz",
        "--json",
    ]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert not first["duplicate"] and first["name"].startswith("lethe-adopt-")
    emr = aws.client("emr-serverless")
    run = emr.get_job_run(applicationId=app, jobRunId=first["job_run_id"])["jobRun"]
    driver = run["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == ENTRY and ROLE in json.dumps(run, default=str)
    args = driver["entryPointArguments"]
    assert args[:4] == ["--table", f"s3://{bucket}/tables/events", "--source", argv[2]]
    for flag, value in (
        ("--key", "id"),
        ("--index", "customer_id"),
        ("--partition-type", "dt=date"),
    ):
        assert args[args.index(flag) + 1] == value
    assert "--no-ownership" not in args
    assert (
        "spark.archives=s3://artifacts/lethe-pyspark.tar.gz#lethe_env"
        in driver["sparkSubmitParameters"]
    )
    assert main(argv) == 0  # again: the same run, none started
    again = json.loads(capsys.readouterr().out)
    assert again == {**first, "duplicate": True}
    assert len(emr.list_job_runs(applicationId=app)["jobRuns"]) == 1


def test_other_options_are_another_run_and_the_flags_are_checked(
    aws: Any, app: str, bucket: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = EmrJobSettings(app, ROLE, ENTRY)
    a = start_adopt_job(
        aws.client("emr-serverless"),
        settings,
        table_uri=f"s3://{bucket}/t",
        source=f"s3://{bucket}/raw/",
    )
    b = start_adopt_job(
        aws.client("emr-serverless"),
        settings,
        table_uri=f"s3://{bucket}/t",
        source=f"s3://{bucket}/raw/",
        take_ownership=False,
    )
    assert a.name != b.name and not b.duplicate
    bad = ["adopt", f"s3://{bucket}/t", f"s3://{bucket}/raw/", "--emr-application", app]
    assert main(bad) != 0
    assert "--emr-application needs --emr-role" in capsys.readouterr().err
