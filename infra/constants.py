"""Names, prefixes, handler entry points and fixed platform choices of the Lethe stack.

Everything another module would otherwise spell out as a string literal lives here, so that
the stack, the tests, the layer build and the docs agree. This module is plain Python (no CDK
import): ``layers/build.py`` reads the Lambda platform from it without starting jsii.

Values an operator may change per deployment (table prefix, encryption, schedule, …) are
*context* values; their keys and defaults are in :data:`CONTEXT_DEFAULTS` and parsed by
``infra/config.py``.
"""

from __future__ import annotations

from typing import Final

# --------------------------------------------------------------------------------------------
# Stack
# --------------------------------------------------------------------------------------------
STACK_ID: Final = "LetheStack"
STACK_DESCRIPTION: Final = (
    "Lethe: Parquet tables on S3 that can forget (deletion vectors, row-group splices, GC)"
)
SERVICE: Final = "lethe"

# --------------------------------------------------------------------------------------------
# Lambda platform
# --------------------------------------------------------------------------------------------
# arm64 (Graviton2): ~20% lower price per GB-second than x86_64 at equal or better speed for
# this workload (Arrow decode/encode, zlib/zstd, CRC), and every runtime dependency ships
# aarch64 manylinux wheels, so the layer is assembled from wheels without Docker.
LAMBDA_ARCHITECTURE: Final = "arm64"
# Python 3.12, not 3.11: Lambda's python3.11 runtime runs on Amazon Linux 2 (glibc 2.26),
# and the locked pyarrow (26.x) ships only manylinux_2_28 aarch64 wheels (libarrow.so needs
# GLIBC_2.28); pyarrow 20 was the last with a manylinux2014 aarch64 wheel. python3.12+ runs
# on Amazon Linux 2023 (glibc 2.34). The code targets 3.11 (EMR Serverless 8.0's Python,
# ruff's target-version) and runs unchanged on 3.12. Change both values together: the layer
# build derives its wheel platform from them and checks every shared object against the glibc.
LAMBDA_PYTHON_VERSION: Final = "3.12"
LAMBDA_GLIBC_VERSION: Final = "2.34"
LAMBDA_WHEEL_PLATFORM: Final = "aarch64-manylinux_2_34"  # uv --python-platform
LAMBDA_EXTENSION_SUFFIX: Final = ".cpython-312-aarch64-linux-gnu.so"
# Lambda's quota for a function's code plus all its layers, unzipped (bytes).
LAMBDA_UNZIPPED_LIMIT_BYTES: Final = 262_144_000

# --------------------------------------------------------------------------------------------
# Repository paths (relative to the repository root, where cdk.json lives)
# --------------------------------------------------------------------------------------------
FUNCTIONS_DIR: Final = "functions"
SPARK_JOBS_DIR: Final = "spark_jobs"
LAYER_BUILD_DIR: Final = "layers/build"
# Two layers, each directory holding python/ only (the layer zip's root): the locked
# third-party dependencies (rebuilt when uv.lock changes) and the lethe library (rebuilt in
# a second when shared/lethe changes, so a code change uploads kilobytes, not 70 MB).
# The stack's assets are the zips (reproducible, so unchanged inputs keep their asset hash);
# the directories are kept for inspection and for the import test.
LAYER_DEPS_DIR: Final = "layers/build/deps"
LAYER_LIB_DIR: Final = "layers/build/lethe"
LAYER_DEPS_ZIP: Final = "layers/build/deps.zip"
LAYER_LIB_ZIP: Final = "layers/build/lethe.zip"
LAYER_REPORT_FILE: Final = "layers/build/report.json"
ASSET_EXCLUDES: Final = ("**/__pycache__", "**/*.pyc", "**/tests", "**/.pytest_cache")

# --------------------------------------------------------------------------------------------
# Object layout (DESIGN.md §1), relative to the table prefix: spelled once, in lethe.storage.layout
# --------------------------------------------------------------------------------------------
from lethe.storage.layout import DATA_PREFIX as DATA_PREFIX  # noqa: E402
from lethe.storage.layout import ERASURE_PREFIX as ERASURE_PREFIX  # noqa: E402
from lethe.storage.layout import HEAD_KEY as HEAD_KEY  # noqa: E402
from lethe.storage.layout import INDEX_PREFIX as INDEX_PREFIX  # noqa: E402
from lethe.storage.layout import MANIFEST_PREFIX as MANIFEST_PREFIX  # noqa: E402
from lethe.storage.layout import METADATA_PREFIX as METADATA_PREFIX  # noqa: E402
from lethe.storage.layout import OWNER_MARKER_PREFIX as OWNER_MARKER_PREFIX  # noqa: E402
from lethe.storage.layout import SEGMENT_PREFIX as SEGMENT_PREFIX  # noqa: E402
from lethe.storage.layout import STAGING_PREFIX as STAGING_PREFIX  # noqa: E402
from lethe.storage.layout import TOMBSTONE_PREFIX as TOMBSTONE_PREFIX  # noqa: E402

GC_PREFIX: Final = "_gc/"  # GC run workspace: batch lists, per-step results, reports
# Relative to the bucket root: uploads that the ingest trigger registers or hands to EMR.
INCOMING_PREFIX: Final = "incoming/"
# In the artifacts bucket.
ARTIFACTS_SPARK_JOBS_PREFIX: Final = "spark_jobs/"
ARTIFACTS_JOB_ARCHIVE_KEY: Final = "lethe-pyspark.tar.gz"  # uploaded by the deploy step
INGEST_JOB_FILE: Final = "ingest.py"
# The Iceberg view in the Glue Data Catalog: database name (the table is named after the
# table prefix's last part, see infra/constructs/iceberg.py).
GLUE_DATABASE: Final = "lethe"

# --------------------------------------------------------------------------------------------
# Handler entry points (module path under functions/ + attribute)
# --------------------------------------------------------------------------------------------
DELETE_HANDLER: Final = "delete_requests.handler.handler"
SPLICE_HANDLER: Final = "splice.handler.handler"
INGEST_HANDLER: Final = "ingest_trigger.handler.handler"
ICEBERG_GLUE_HANDLER: Final = "iceberg_glue.handler.handler"
# NOTE: a top-level package named ``gc`` cannot be imported: the interpreter's built-in ``gc``
# module always wins (``import gc_steps.handler`` -> "'gc' is not a package"), in Lambda as in tests.
# tests/infra/test_infra_units.py flags it; renaming the package is this one line.
GC_MODULE: Final = "gc_steps.handler"
GC_RETENTION_HANDLER: Final = f"{GC_MODULE}.retention"
GC_PLAN_HANDLER: Final = f"{GC_MODULE}.plan"
GC_SWEEP_HANDLER: Final = f"{GC_MODULE}.sweep"
GC_EXPIRE_HANDLER: Final = f"{GC_MODULE}.expire"
GC_ABORT_HANDLER: Final = f"{GC_MODULE}.abort"
GC_PURGE_HANDLER: Final = f"{GC_MODULE}.purge"
GC_REPORT_HANDLER: Final = f"{GC_MODULE}.report"
GC_RECORD_FAILURE_HANDLER: Final = f"{GC_MODULE}.record_failure"
ALL_HANDLERS: Final = (
    DELETE_HANDLER,
    SPLICE_HANDLER,
    INGEST_HANDLER,
    ICEBERG_GLUE_HANDLER,
    GC_RETENTION_HANDLER,
    GC_PLAN_HANDLER,
    GC_SWEEP_HANDLER,
    GC_EXPIRE_HANDLER,
    GC_ABORT_HANDLER,
    GC_PURGE_HANDLER,
    GC_REPORT_HANDLER,
    GC_RECORD_FAILURE_HANDLER,
)

# --------------------------------------------------------------------------------------------
# Environment variable names read by the handlers
# --------------------------------------------------------------------------------------------
ENV_TABLE_URI: Final = "LETHE_TABLE_URI"
ENV_SPLICE_QUEUE_URL: Final = "LETHE_SPLICE_QUEUE_URL"
ENV_SPLICE_MAX_BYTES: Final = "LETHE_SPLICE_MAX_BYTES"
ENV_DIRECT_REGISTER_MAX_BYTES: Final = "LETHE_DIRECT_REGISTER_MAX_BYTES"
ENV_INCOMING_PREFIX: Final = "LETHE_INCOMING_PREFIX"
ENV_EMR_APPLICATION_ID: Final = "LETHE_EMR_APPLICATION_ID"
ENV_EMR_JOB_ROLE_ARN: Final = "LETHE_EMR_JOB_ROLE_ARN"
ENV_EMR_ENTRY_POINT: Final = "LETHE_EMR_ENTRY_POINT"
ENV_EMR_JOB_ARCHIVE: Final = "LETHE_EMR_JOB_ARCHIVE"
ENV_GLUE_DATABASE: Final = "LETHE_GLUE_DATABASE"
ENV_GLUE_TABLE: Final = "LETHE_GLUE_TABLE"
ENV_GC_RETENTION: Final = "LETHE_GC_RETENTION"
ENV_GC_GRACE: Final = "LETHE_GC_GRACE"
ENV_GC_VERSIONED_BUCKET: Final = "LETHE_GC_VERSIONED_BUCKET"
ENV_LAKE_URI: Final = "LETHE_LAKE_URI"
ENV_ADOPT_IN_PLACE: Final = "LETHE_ADOPT_IN_PLACE"  # Parquet uploads adopted, not copied
ENV_ADOPT_OWNERSHIP: Final = "LETHE_ADOPT_OWNERSHIP"  # adopted originals owned (GC deletes)
ENV_ADOPT_PREFIXES: Final = "LETHE_ADOPT_PREFIXES"  # s3://b/p,...: adopted prefixes written on
POWERTOOLS_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
POWERTOOLS_LOG_LEVEL: Final = "POWERTOOLS_LOG_LEVEL"
POWERTOOLS_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
METRICS_NAMESPACE: Final = "Lethe"

# --------------------------------------------------------------------------------------------
# Event sources and queues
# --------------------------------------------------------------------------------------------
DELETE_BATCH_SIZE: Final = 100
DELETE_MAX_BATCHING_WINDOW_SECONDS: Final = 5
SPLICE_BATCH_SIZE: Final = 1
MAX_RECEIVE_COUNT: Final = 5
# AWS guidance for SQS-triggered functions: visibility timeout >= 6 x function timeout
# (+ the batching window), so retries of a throttled or slow batch never run concurrently.
VISIBILITY_TIMEOUT_FACTOR: Final = 6
QUEUE_RETENTION_DAYS: Final = 14  # SQS maximum; a delete request must not silently expire
MULTIPART_ABORT_DAYS: Final = 7

# Function timeouts (seconds) and memory (MiB). Memory also buys CPU on Lambda.
DELETE_TIMEOUT_SECONDS: Final = 120
DELETE_MEMORY_MB: Final = 1769  # one full vCPU
SPLICE_TIMEOUT_SECONDS: Final = 900
SPLICE_MEMORY_MB: Final = 3008
INGEST_TIMEOUT_SECONDS: Final = 300
INGEST_MEMORY_MB: Final = 1769
ICEBERG_GLUE_TIMEOUT_SECONDS: Final = 30
ICEBERG_GLUE_MEMORY_MB: Final = 256
GC_TIMEOUT_SECONDS: Final = 900
GC_MEMORY_MB: Final = 1024

# --------------------------------------------------------------------------------------------
# EMR Serverless
# --------------------------------------------------------------------------------------------
EMR_RELEASE_LABEL: Final = "emr-spark-8.0.0"  # Spark 4.0, Python 3.11
EMR_APPLICATION_TYPE: Final = "SPARK"
EMR_ARCHITECTURE: Final = "ARM64"
EMR_SERVICE_PRINCIPAL: Final = "emr-serverless.amazonaws.com"

# --------------------------------------------------------------------------------------------
# GC workflow
# --------------------------------------------------------------------------------------------
# State names, and where each state leaves its output ($.<key>): spelled once, in
# lethe.gc.workflow (its record_failure tells the failed state from them).
from lethe.gc import workflow as _gc_workflow  # noqa: E402

GC_STATES: Final = _gc_workflow.STATES  # .plan == "Plan", .sweep_batches, ... .failed
GC_RESULTS: Final = _gc_workflow.RESULTS  # .plan == "plan": the Plan state's output at $.plan

GC_STATE_MACHINE_TIMEOUT_HOURS: Final = 6
# Errors a Lambda task retries with exponential backoff (the Lambda service's transient
# failures and a task heartbeat/timeout); anything else goes to record_failure then Fail.
GC_RETRY_ERRORS: Final = (
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    "States.Timeout",
)
GC_RETRY_INTERVAL_SECONDS: Final = 2
GC_RETRY_BACKOFF_RATE: Final = 2.0
GC_RETRY_MAX_ATTEMPTS: Final = 6

# --------------------------------------------------------------------------------------------
# The lake (one stack per lake): what its functions may touch, spelled once in lethe.lake
# --------------------------------------------------------------------------------------------
from lethe.lake.model import ARCHIVE_PREFIX as LAKE_ARCHIVE_PREFIX  # noqa: E402, F401
from lethe.lake.model import LAKE_KEY as LAKE_KEY  # noqa: E402
from lethe.lake.model import VALUES_PREFIX as LAKE_VALUES_PREFIX  # noqa: E402, F401
from lethe.lake.window import WINDOW_EVENT as LAKE_WINDOW_EVENT  # noqa: E402, F401

# Where a lake table's functions write (the lake's own objects are LAKE_*): data files,
# deletion vectors, index pieces, manifests and the head; never another prefix.
LAKE_TABLE_WRITES: Final = (DATA_PREFIX, MANIFEST_PREFIX, TOMBSTONE_PREFIX, INDEX_PREFIX)
# The lake's pending requests feed the ErasureOverdue alarm through these metrics.
from lethe.lake.window import OLDEST_METRIC as LAKE_OLDEST_METRIC  # noqa: E402, F401
from lethe.lake.window import PENDING_METRIC as LAKE_PENDING_METRIC  # noqa: E402, F401

# --------------------------------------------------------------------------------------------
# Context keys (cdk.json "context" or `-c key=value`) and their defaults
# --------------------------------------------------------------------------------------------
CTX_TABLE_PREFIX: Final = "lethe:tablePrefix"
CTX_ENCRYPTION: Final = "lethe:encryption"  # "s3" (SSE-S3 / SQS-managed) or "kms" (one CMK)
CTX_VERSIONED: Final = "lethe:versioned"
CTX_NONCURRENT_VERSION_DAYS: Final = "lethe:noncurrentVersionDays"
CTX_ACCESS_LOGS: Final = "lethe:accessLogs"
CTX_ACCESS_LOG_DAYS: Final = "lethe:accessLogRetentionDays"
CTX_INCOMING_EXPIRATION_DAYS: Final = "lethe:incomingExpirationDays"
CTX_LOG_LEVEL: Final = "lethe:logLevel"
CTX_LOG_RETENTION_DAYS: Final = "lethe:logRetentionDays"
CTX_SPLICE_CONCURRENCY: Final = "lethe:spliceConcurrency"
CTX_SPLICE_MAX_BYTES: Final = "lethe:spliceMaxBytes"
CTX_DIRECT_REGISTER_MAX_BYTES: Final = "lethe:directRegisterMaxBytes"
CTX_GC_SCHEDULE: Final = "lethe:gcSchedule"
CTX_GC_RETENTION: Final = "lethe:gcRetention"
CTX_GC_GRACE: Final = "lethe:gcGrace"
CTX_GC_DRY_RUN: Final = "lethe:gcDryRun"
CTX_GC_MAP_CONCURRENCY: Final = "lethe:gcMapConcurrency"
CTX_EMR_MAX_VCPU: Final = "lethe:emrMaxVcpu"
CTX_EMR_IDLE_MINUTES: Final = "lethe:emrIdleTimeoutMinutes"
CTX_ALARM_EMAIL: Final = "lethe:alarmEmail"
CTX_ERASURE_ALARM_DAYS: Final = "lethe:erasureAlarmDays"  # oldest pending erasure alarm
# One stack per lake: {"uri": "s3://b/_lethe", "tables": ["s3://b/tables/orders", ...],
# "adopted": ["s3://b/raw/orders", ...]} (a JSON object, or its text with -c); "" : none
CTX_LAKE: Final = "lethe:lake"
CTX_ERASURE_WINDOW_SCHEDULE: Final = "lethe:erasureWindowSchedule"  # the lake's window runs
# Adopted data in place (issue 28): {"prefixes": ["s3://b/raw/events", ...], "inPlace": true,
# "ownership": true} (a JSON object, or its text with -c); "" : none
CTX_ADOPT: Final = "lethe:adopt"

CONTEXT_DEFAULTS: Final[dict[str, object]] = {
    CTX_TABLE_PREFIX: "tables/main",
    CTX_ENCRYPTION: "s3",
    CTX_VERSIONED: False,
    CTX_NONCURRENT_VERSION_DAYS: 1,
    CTX_ACCESS_LOGS: True,
    CTX_ACCESS_LOG_DAYS: 90,
    CTX_INCOMING_EXPIRATION_DAYS: 7,
    CTX_LOG_LEVEL: "INFO",
    CTX_LOG_RETENTION_DAYS: 30,
    CTX_SPLICE_CONCURRENCY: 2,
    CTX_SPLICE_MAX_BYTES: 1024 * 1024 * 1024,  # bytes moved per invocation, copies included
    CTX_DIRECT_REGISTER_MAX_BYTES: 1024 * 1024 * 1024,
    CTX_GC_SCHEDULE: "rate(1 day)",
    CTX_GC_RETENTION: "30d",
    CTX_GC_GRACE: "7d",
    CTX_GC_DRY_RUN: False,
    CTX_GC_MAP_CONCURRENCY: 8,
    CTX_EMR_MAX_VCPU: 32,
    CTX_EMR_IDLE_MINUTES: 15,
    CTX_ALARM_EMAIL: "",
    CTX_ERASURE_ALARM_DAYS: 25,
    CTX_LAKE: "",
    CTX_ERASURE_WINDOW_SCHEDULE: "rate(1 hour)",
    CTX_ADOPT: "",
}
