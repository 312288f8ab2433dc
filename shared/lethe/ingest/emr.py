"""The EMR Serverless hand-off: one ingest job run per upload, one adoption job run per table
and source, each at most once."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lethe.ingest.inputs import Format


# --- EMR Serverless hand-off -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EmrJobSettings:
    """Where and how ingest job runs start (from the trigger's environment)."""

    application_id: str
    execution_role_arn: str
    entry_point: str
    archive: str | None = None
    archive_alias: str = "lethe_env"
    extra_spark_parameters: str = ""
    lookback: timedelta = timedelta(days=1)

    def spark_submit_parameters(self) -> str:
        """``--conf`` flags that put the job archive (``lethe`` + dependencies, built by
        ``spark_jobs/package.sh``) on the driver's and executors' ``PYTHONPATH``."""
        parts: list[str] = []
        if self.archive:
            a = self.archive_alias
            parts += [
                f"--conf spark.archives={self.archive}#{a}",
                f"--conf spark.emr-serverless.driverEnv.PYTHONPATH=./{a}",
                f"--conf spark.executorEnv.PYTHONPATH=./{a}",
            ]
        if self.extra_spark_parameters:
            parts.append(self.extra_spark_parameters)
        return " ".join(parts)


@dataclass(frozen=True, slots=True)
class JobRunStarted:
    """A requested ingest job run (``duplicate``: an earlier run for the same upload exists)."""

    job_run_id: str
    name: str
    duplicate: bool


def start_ingest_job(
    emr: Any,
    settings: EmrJobSettings,
    *,
    table_uri: str,
    input_uri: str,
    fmt: Format | None,
    request_id: str,
    evolve: bool = False,
    now: datetime | None = None,
) -> JobRunStarted:
    """Start an EMR Serverless run of ``spark_jobs/ingest.py`` for one upload, at most once.

    The run's name and ``clientToken`` derive from ``request_id`` (the upload's
    ``s3://bucket/key#etag``): EMR Serverless answers a repeated token with the same run, and a
    run of that name already listed within ``settings.lookback`` (not failed or cancelled) is
    returned instead of starting another. The job itself commits with the same request id, so
    even two runs land at most once.

    Args:
        emr: A boto3 ``emr-serverless`` client.
        settings: Application, role, entry point and archive.
        table_uri: The table.
        input_uri: The object (or prefix) to ingest.
        fmt: Its format, or None to let the job tell by name.
        request_id: The idempotency id.
        evolve: Pass ``--evolve``: the job may evolve the table's schema to take input of
            another shape (new columns, widenings); without it, such input is refused.
    """
    args = ["--table", table_uri, "--input", input_uri, "--request-id", request_id]
    if fmt is not None:
        args += ["--format", fmt]
    if evolve:
        args.append("--evolve")
    return _start_once(emr, settings, "lethe-ingest", request_id, args, now)


@dataclass(frozen=True, slots=True)
class AdoptJobOptions:
    """What else an adoption job run does, and in what sizes.

    Attributes:
        indexes: Columns to index in the same pass.
        partition_types: ``COLUMN=TYPE`` of Hive partition columns (``dt=date``).
        batch_files: Files per commit.
        tasks: Spark tasks reading footers.
    """

    indexes: Sequence[str] = ()
    partition_types: Sequence[str] = ()
    batch_files: int = 1000
    tasks: int = 64


def start_adopt_job(
    emr: Any,
    settings: EmrJobSettings,
    *,
    table_uri: str,
    source: str,
    key: str | None = None,
    take_ownership: bool = True,
    options: AdoptJobOptions = AdoptJobOptions(),
    now: datetime | None = None,
) -> JobRunStarted:
    """Start an EMR Serverless run of ``spark_jobs/adopt.py`` (adopt ``source`` in place into
    ``table_uri`` at lake scale: footers read in executors, one commit per
    ``options.batch_files``), at most once per table, source and options (as
    :func:`start_ingest_job`; the job itself is idempotent by path and ETag, so a second run
    after a failure resumes).

    Args:
        emr: A boto3 ``emr-serverless`` client.
        settings: Application, job role, archive; ``entry_point``: the ``adopt.py`` URI
            (``s3://<artifacts>/spark_jobs/adopt.py``, stack output ``JobArchiveUri``'s
            bucket).
        table_uri: The table (created when missing: ``key`` required).
        source: A Hive-partitioned prefix, an Iceberg ``metadata.json``, a Delta table or
            ``glue://db/table``.
        key: The erasure key column.
        take_ownership: False: a read-only adoption (``erase`` refuses).
        options: Indexes, partition types, batch and task sizes.
    """
    args = ["--table", table_uri, "--source", source, "--batch-files", str(options.batch_files)]
    args += ["--tasks", str(options.tasks)]
    if key is not None:
        args += ["--key", key]
    for column in options.indexes:
        args += ["--index", column]
    for item in options.partition_types:
        args += ["--partition-type", item]
    if not take_ownership:
        args.append("--no-ownership")
    return _start_once(emr, settings, "lethe-adopt", "\x00".join(args), args, now)


def _start_once(
    emr: Any,
    settings: EmrJobSettings,
    kind: str,
    request_id: str,
    args: list[str],
    now: datetime | None,
) -> JobRunStarted:
    """One run named ``<kind>-<hash of request_id>``: an earlier live run of that name is
    returned; the ``clientToken`` makes EMR answer a repeated start with the same run."""
    digest = hashlib.sha256(request_id.encode()).hexdigest()
    name = f"{kind}-{digest[:24]}"
    now = now or datetime.now(UTC)
    kw: dict[str, Any] = {
        "applicationId": settings.application_id,
        "createdAtAfter": now - settings.lookback,
    }
    while True:
        page = emr.list_job_runs(**kw)
        for run in page.get("jobRuns", []):
            if run.get("name") == name and run.get("state") not in ("FAILED", "CANCELLED"):
                return JobRunStarted(str(run["id"]), name, True)
        token = page.get("nextToken")
        if not token:
            break
        kw["nextToken"] = token
    driver: dict[str, Any] = {"entryPoint": settings.entry_point, "entryPointArguments": args}
    params = settings.spark_submit_parameters()
    if params:
        driver["sparkSubmitParameters"] = params
    r = emr.start_job_run(
        applicationId=settings.application_id,
        clientToken=digest[:64],
        executionRoleArn=settings.execution_role_arn,
        name=name,
        jobDriver={"sparkSubmit": driver},
    )
    return JobRunStarted(str(r["jobRunId"]), name, False)
