"""Ingest: raw uploads (CSV, JSON lines, Parquet) into a table, and direct Parquet registration.

Two paths bring uploaded objects into a table (DESIGN §7):

* **Direct registration** (:func:`register_parquet`, used by the ingest-trigger Lambda): a ready
  Parquet object whose schema matches the table is described from its footer (one tail GET),
  copied server-side into ``data/`` (pinned to the uploaded ETag) and committed; the request
  id ``s3://bucket/key#etag`` in the manifest's request log makes a redelivered event a no-op.
* **The Spark ingest job** (``spark_jobs/ingest.py``) for everything else: executors read the
  raw objects with :func:`read_object`, which validates every row against the table schema with
  :func:`conform` — rows that do not fit are never dropped silently but come back as *rejects*
  (:data:`REJECT_SCHEMA`: source, row, line, reason, original record) — then the good rows are
  sorted by key and written with the lethe writer, and the driver commits once.

The EMR Serverless hand-off (:func:`start_ingest_job`) lives here too, so that the Lambda stays
a thin adapter. Modules: :mod:`.inputs` (formats, listing, request ids), :mod:`.conform`
(validation and rejects), :mod:`.readers` (CSV/JSON/Parquet from S3), :mod:`.staging` (the
Spark job's staged schema, sizing, report), :mod:`.register` (direct registration),
:mod:`.emr` (job runs).

Example:
    >>> import pyarrow as pa
    >>> schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    >>> raw = pa.table({"id": ["1", "x", None], "name": ["a", "b", "c"]})
    >>> out = conform(raw, schema, source="s3://b/in.csv")
    >>> out.good.to_pylist()
    [{'id': 1, 'name': 'a'}]
    >>> [(r["row"], r["reason"][:33]) for r in out.rejects.to_pylist()]
    [(1, "column 'id': cannot convert 'x' t"), (2, "column 'id': required but missing")]
"""

from __future__ import annotations

from lethe.ingest.conform import REJECT_SCHEMA, Conformed, conform
from lethe.ingest.emr import (
    AdoptJobOptions,
    EmrJobSettings,
    JobRunStarted,
    start_adopt_job,
    start_ingest_job,
)
from lethe.ingest.inputs import (
    Format,
    InputObject,
    detect_format,
    ingest_request_id,
    list_inputs,
    upload_request_id,
)
from lethe.ingest.readers import read_object
from lethe.ingest.register import RegisterResult, register_parquet
from lethe.ingest.shapes import check_file_schema
from lethe.ingest.staging import (
    STAGED_PREFIX,
    IngestReport,
    estimate_bytes_per_row,
    partitions_for,
    rejects_to_jsonl,
    stage,
    staged_schema,
)

__all__ = [
    "REJECT_SCHEMA",
    "STAGED_PREFIX",
    "AdoptJobOptions",
    "Conformed",
    "EmrJobSettings",
    "Format",
    "IngestReport",
    "InputObject",
    "JobRunStarted",
    "RegisterResult",
    "check_file_schema",
    "conform",
    "detect_format",
    "estimate_bytes_per_row",
    "ingest_request_id",
    "list_inputs",
    "partitions_for",
    "read_object",
    "register_parquet",
    "rejects_to_jsonl",
    "stage",
    "staged_schema",
    "start_adopt_job",
    "start_ingest_job",
    "upload_request_id",
]
