"""The Spark session of Lethe's jobs, locally and on EMR Serverless.

* Under ``spark-submit`` (EMR Serverless, or ``spark-submit --master local[*]``) the session is
  the one spark-submit configured; nothing is overridden.
* From plain ``python spark_jobs/ingest.py ...`` (or the demo, or tests) a local session is
  built: ``local[*]``, UI off, few shuffle partitions, a driver JVM tuned for start-up
  (``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC`` halves it), the Python workers running this
  interpreter (so they have pyarrow and lethe) and ``AWS_ENDPOINT_URL`` (plus, for a local
  endpoint such as moto, the credentials) passed to the executors.

All S3 I/O goes through ``lethe`` (boto3): no hadoop-aws, no ``s3a://``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["LOCAL_JAVA_OPTIONS", "build_session", "own_session", "uses_local_master"]

LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
_PASS_ENV = ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION")
_LOCAL_CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def _under_spark_submit() -> bool:
    return "PYSPARK_GATEWAY_PORT" in os.environ


def uses_local_master(master: str | None) -> bool:
    return master is None or master.startswith("local")


def build_session(
    app_name: str = "lethe",
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """The active SparkSession, or a new one configured for Lethe's jobs (see module doc).

    Args:
        app_name: Spark application name.
        master: Master URL when not launched by spark-submit (default ``local[*]``).
        conf: Extra Spark configuration (applied last).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = {"spark.sql.session.timeZone": "UTC"}
    if _under_spark_submit():
        from pyspark import SparkConf

        if uses_local_master(SparkConf().get("spark.master", None)):  # spark-submit --master local
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    else:
        master = master or "local[*]"
        builder = builder.master(master)
        settings |= {
            "spark.driver.extraJavaOptions": LOCAL_JAVA_OPTIONS,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": str(max(2, 2 * (os.cpu_count() or 2))),
        }
        if uses_local_master(master):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    passed = list(_PASS_ENV)
    if os.environ.get("AWS_ENDPOINT_URL"):  # a local endpoint (moto, MinIO): its test keys
        passed += _LOCAL_CREDENTIALS
    for name in passed:
        value = os.environ.get(name)
        if value:
            settings[f"spark.executorEnv.{name}"] = value
    settings |= dict(conf or {})
    for k, v in settings.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@contextmanager
def own_session() -> Iterator[None]:
    """On leaving the block, stop the Spark session the block started, if it started one: a
    session active before it (a test's, a caller's, spark-submit's) is left running."""
    from pyspark.sql import SparkSession

    had_session = SparkSession.getActiveSession() is not None
    try:
        yield
    finally:
        active = SparkSession.getActiveSession()
        if active is not None and not had_session:
            active.stop()
