"""S3 ObjectCreated on the upload prefix -> register a ready Parquet file, or start an ingest job.

With ``LETHE_ADOPT_IN_PLACE``, a Parquet upload is adopted in place instead
(:func:`lethe.adopt.one.adopt_object`: no copy, its Hive directories below the prefix as
partition values); so is every new Parquet object under one of ``LETHE_ADOPT_PREFIXES``
(adopted prefixes an external pipeline keeps writing to; the stack's ``lethe:adopt``). Thin by design: a Parquet upload up to ``LETHE_DIRECT_REGISTER_MAX_BYTES`` is registered with
:func:`lethe.ingest.register_parquet` (footer stats into the manifest, server-side copy into
``data/``, one commit); anything else (CSV, JSON lines, larger Parquet) becomes an EMR
Serverless run of ``spark_jobs/ingest.py`` through :func:`lethe.ingest.start_ingest_job`.
Both are idempotent on the upload's ``s3://bucket/key#etag``: a redelivered event registers
nothing twice and starts no second run.

An upload whose schema differs from the table's evolves the table (new columns, safe
widenings: ``schema_mode="merge"``, and ``--evolve`` for the job) only when the table property
``uploads_evolve`` is set (``lethe schema uploads URI evolve``); otherwise, and for any
difference no evolution reconciles, it is refused with a ``SchemaMismatch`` naming every
differing column (names and types, never values).

S3 invokes the function asynchronously. A record that cannot be handled (wrong schema, an
unsupported format) fails with its reason; the other records of the event are still handled,
then the invocation raises so that the event is retried and finally lands in the dead-letter
queue. Logs carry sizes, formats and the upload's hash, never object contents.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote_plus

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes import S3Event
from aws_lambda_powertools.utilities.data_classes.s3_event import S3EventRecord

from _observe import powertools
from _settings import IngestTriggerSettings as Settings
from _settings import SettingsError
from lethe import Table
from lethe.adopt.hive import is_data_object
from lethe.adopt.one import adopt_object
from lethe.catalog.manifest import request_hash
from lethe.ingest import (
    detect_format,
    register_parquet,
    start_ingest_job,
    upload_request_id,
)

__all__ = [
    "SETTINGS",
    "Outcome",
    "Settings",
    "SettingsError",
    "UploadFailed",
    "handler",
    "record_handler",
    "table",
]

logger, tracer, metrics = powertools()
SETTINGS = Settings.from_env()  # once, at cold start; SettingsError names what is wrong
EMR = boto3.client("emr-serverless")
_table: Table | None = None


def table() -> Table:
    """The table handle, opened on first use and reused while the container lives."""
    global _table
    if _table is None:
        _table = Table.open(SETTINGS.table_uri)
    return _table


@dataclass(frozen=True, slots=True)
class Outcome:
    action: Literal["registered", "adopted", "job_started", "ignored"]
    duplicate: bool
    upload: str  # hash of s3://bucket/key#etag (the manifest's request id hash)
    version: int | None = None
    rows: int = 0
    job_run_id: str | None = None


class UploadFailed(Exception):
    """One upload could not be ingested; the message says why."""


def record_handler(record: S3EventRecord) -> Outcome:
    """Register or hand off one uploaded object (raises to fail only this record)."""
    bucket = record.s3.bucket.name
    obj = record.s3.get_object
    key = unquote_plus(obj.key)
    rid = upload_request_id(bucket, key, obj.etag)
    upload = request_hash(rid)
    adopted_prefix = SETTINGS.adopted_prefix(bucket, key)
    if adopted_prefix is not None and not key.endswith("/"):
        return _adopt_external(record, bucket, key, adopted_prefix, upload)
    if not key.startswith(SETTINGS.incoming_prefix) or key.endswith("/"):
        return Outcome("ignored", False, upload)
    fmt = detect_format(key)
    if fmt is None:
        raise UploadFailed(
            "unsupported upload: name the object *.parquet, *.csv, *.json, *.jsonl or *.ndjson "
            "(CSV and JSON may be gzipped: *.csv.gz)"
        )
    t = table().refresh()  # the table property of now decides whether uploads evolve it
    evolve = t.manifest.properties.uploads_evolve
    if fmt == "parquet" and SETTINGS.adopt_in_place:  # in place, any size: only its footer
        a = adopt_object(
            t,
            bucket,
            key,
            etag=obj.etag,
            size=obj.size,
            prefix=SETTINGS.incoming_prefix,
            take_ownership=SETTINGS.adopt_ownership,
        )
        if not a.duplicate:
            metrics.add_metric("FilesAdopted", MetricUnit.Count, 1)
        return Outcome("adopted", a.duplicate, upload, a.version, a.rows)
    if fmt == "parquet" and obj.size <= SETTINGS.direct_register_max_bytes:
        r = register_parquet(
            t,
            key,
            bucket=bucket,
            etag=obj.etag,
            size=obj.size,
            schema_mode="merge" if evolve else "strict",
        )
        if not r.duplicate:
            metrics.add_metric("FilesRegistered", MetricUnit.Count, 1)
            metrics.add_metric("RowsRegistered", MetricUnit.Count, r.rows)
        return Outcome("registered", r.duplicate, upload, r.version, r.rows)
    run = start_ingest_job(
        EMR,
        SETTINGS.emr,
        table_uri=SETTINGS.table_uri,
        input_uri=f"s3://{bucket}/{key}",
        fmt=fmt,
        request_id=rid,
        evolve=evolve,
    )
    if not run.duplicate:
        metrics.add_metric("IngestJobsStarted", MetricUnit.Count, 1)
    return Outcome("job_started", run.duplicate, upload, job_run_id=run.job_run_id)


def _adopt_external(
    record: S3EventRecord, bucket: str, key: str, prefix: str, upload: str
) -> Outcome:
    """A new object under an adopted prefix (an external pipeline writes on): adopted in
    place, its Hive directories below the prefix as partition values; markers, hidden files
    and non-Parquet objects (``_SUCCESS``, ``_temporary/``) are ignored."""
    if not is_data_object(key[len(prefix) :]):
        return Outcome("ignored", False, upload)
    obj = record.s3.get_object
    a = adopt_object(
        table(),
        bucket,
        key,
        etag=obj.etag,
        size=obj.size,
        prefix=prefix,
        take_ownership=SETTINGS.adopt_ownership,
    )
    if not a.duplicate:
        metrics.add_metric("FilesAdopted", MetricUnit.Count, 1)
    return Outcome("adopted", a.duplicate, upload, a.version, a.rows)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    outcomes: list[Outcome] = []
    failures: list[str] = []
    for record in S3Event(event).records:
        size, fmt = record.s3.get_object.size, detect_format(record.s3.get_object.key)
        try:
            outcome = record_handler(record)
        except Exception as e:  # one record fails alone; the event is retried as a whole
            reason = f"{type(e).__name__}: {e}"
            failures.append(reason)
            logger.warning(
                "upload rejected", extra={"bytes": size, "format": fmt, "reason": reason}
            )
            continue
        outcomes.append(outcome)
        logger.info(
            "upload handled",
            extra={
                "action": outcome.action,
                "duplicate": outcome.duplicate,
                "upload": outcome.upload,
                "bytes": size,
                "format": fmt,
                "version": outcome.version,
                "job_run_id": outcome.job_run_id,
            },
        )
        if outcome.duplicate:
            metrics.add_metric("DuplicateEvents", MetricUnit.Count, 1)
    metrics.add_metric("UploadsFailed", MetricUnit.Count, len(failures))
    if failures:
        raise UploadFailed(
            f"{len(failures)} of {len(failures) + len(outcomes)} uploads failed: "
            + "; ".join(failures)
        )
    return {"uploads": [_as_dict(o) for o in outcomes]}


def _as_dict(o: Outcome) -> dict[str, Any]:
    return {
        "action": o.action,
        "duplicate": o.duplicate,
        "upload": o.upload,
        "version": o.version,
        "rows": o.rows,
        "job_run_id": o.job_run_id,
    }
