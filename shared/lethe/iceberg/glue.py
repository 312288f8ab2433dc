"""Register the Iceberg view in the AWS Glue Data Catalog (Athena, EMR and Redshift
Spectrum find it by name).

A Glue table of type ICEBERG names one metadata file (``metadata_location``). :func:`register`
creates the table on the first call and then moves ``metadata_location`` forward only: a
metadata file of an older Lethe version than the one registered (a late or redelivered
event) leaves the table as it is. Concurrent updates are serialized by Glue's ``VersionId``.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from botocore.exceptions import ClientError

from lethe import errors
from lethe.iceberg.mapping import version_of_metadata

log = logging.getLogger(__name__)

__all__ = ["register"]

Outcome = Literal["created", "updated", "unchanged"]


def _code(e: ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _current(glue: Any, database: str, table: str) -> dict[str, Any] | None:
    """The Glue table, or None when there is none yet."""
    try:
        out: dict[str, Any] = glue.get_table(DatabaseName=database, Name=table)["Table"]
    except ClientError as e:
        if _code(e) == "EntityNotFoundException":
            return None
        raise
    return out


def _table_input(name: str, location: str, params: dict[str, str]) -> dict[str, Any]:
    return {
        "Name": name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": params,
        "StorageDescriptor": {"Location": location},
    }


def register(glue: Any, *, database: str, table: str, metadata_uri: str) -> Outcome:
    """Point Glue table ``database.table`` at ``metadata_uri`` (``s3://…/metadata/vN.metadata.json``),
    creating it if needed; never moves it back to an older version.

    Raises:
        InvalidRequest: ``metadata_uri`` is not a metadata file of the view.
        CommitConflict: Glue kept reporting concurrent modifications.
    """
    version = version_of_metadata(metadata_uri)
    if version is None or "/metadata/" not in metadata_uri:
        raise errors.InvalidRequest(f"{metadata_uri} is not a metadata/vN.metadata.json file")
    location = metadata_uri.rsplit("/metadata/", 1)[0]
    for _ in range(5):
        cur = _current(glue, database, table)
        params = dict((cur or {}).get("Parameters") or {})
        old = params.get("metadata_location")
        if old and (version_of_metadata(old) or -1) >= version:
            return "unchanged"
        params.update(table_type="ICEBERG", metadata_location=metadata_uri)
        if old:
            params["previous_metadata_location"] = old
        kw: dict[str, Any] = {}
        if cur is None:  # a writer that creates it first wins: read again
            write, lost = glue.create_table, "AlreadyExistsException"
        else:  # Glue's VersionId serializes updates
            write, lost = glue.update_table, "ConcurrentModificationException"
            kw = {"VersionId": cur["VersionId"]} if cur.get("VersionId") else {}
        try:
            write(DatabaseName=database, TableInput=_table_input(table, location, params), **kw)
        except ClientError as e:
            if _code(e) == lost:
                continue
            raise
        outcome: Outcome = "created" if cur is None else "updated"
        log.info("Glue table %s.%s %s to version %s", database, table, outcome, version)
        return outcome
    raise errors.CommitConflict(f"Glue table {database}.{table}: concurrent updates kept winning")
