"""S3 ObjectCreated of ``<table>/metadata/vN.metadata.json`` -> move the Glue table forward.

Thin by design: every published Iceberg metadata file of the table (whoever published it: a
committer with the table's ``iceberg_view`` property, ``lethe iceberg publish``, a Spark job)
is handed to :func:`lethe.iceberg.glue.register`, which creates the Glue table of type
ICEBERG or moves its ``metadata_location`` forward (never back). S3 invokes the function
asynchronously; a failure is retried, then lands in the dead-letter queue. It reads no
object: the event's key is all it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_plus

import boto3
from aws_lambda_powertools import Logger, Tracer
from aws_lambda_powertools.utilities.data_classes import S3Event

from _settings import IcebergGlueSettings as Settings
from _settings import SettingsError
from lethe.iceberg.glue import register
from lethe.iceberg.mapping import version_of_metadata

__all__ = ["SETTINGS", "Settings", "SettingsError", "handle", "handler"]

logger = Logger()
tracer = Tracer()


SETTINGS = Settings.from_env()  # once, at cold start; SettingsError names what is wrong
_glue: Any = None


def glue_client() -> Any:
    global _glue
    if _glue is None:
        _glue = boto3.client("glue")
    return _glue


def handle(event: Mapping[str, Any], settings: Settings, glue: Any) -> list[str]:
    """Register every metadata file the event names; returns the outcomes."""
    out: list[str] = []
    for rec in S3Event(dict(event)).records:
        key = unquote_plus(rec.s3.get_object.key)
        if version_of_metadata(key) is None:
            continue
        uri = f"s3://{rec.s3.bucket.name}/{key}"
        outcome = register(glue, database=settings.database, table=settings.table, metadata_uri=uri)
        logger.info("glue table", extra={"outcome": outcome, "version": version_of_metadata(key)})
        out.append(outcome)
    return out


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return {"outcomes": handle(event, SETTINGS, glue_client())}
