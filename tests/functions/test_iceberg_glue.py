"""The Glue registration of the Iceberg view, on moto's Glue: created once, moved forward
only, and the handler reads only the event's key."""

from __future__ import annotations

from typing import Any

import pytest

from functions.iceberg_glue.handler import Settings, SettingsError, handle
from lethe.iceberg.glue import register


def _event(bucket: str, *keys: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventSource": "aws:s3",
                "eventName": "ObjectCreated:Put",
                "s3": {"bucket": {"name": bucket}, "object": {"key": k, "size": 1}},
            }
            for k in keys
        ]
    }


def test_register_creates_then_moves_forward_only(aws: Any) -> None:
    glue = aws.client("glue")
    glue.create_database(DatabaseInput={"Name": "lethe_t1"})
    uri = "s3://b/tables/main/metadata/v{}.metadata.json"
    assert (
        register(glue, database="lethe_t1", table="main", metadata_uri=uri.format(3)) == "created"
    )
    assert (
        register(glue, database="lethe_t1", table="main", metadata_uri=uri.format(5)) == "updated"
    )
    assert (
        register(glue, database="lethe_t1", table="main", metadata_uri=uri.format(4)) == "unchanged"
    )
    t = glue.get_table(DatabaseName="lethe_t1", Name="main")["Table"]
    assert t["Parameters"]["table_type"] == "ICEBERG"
    assert t["Parameters"]["metadata_location"] == uri.format(5)
    assert t["Parameters"]["previous_metadata_location"] == uri.format(3)
    assert t["StorageDescriptor"]["Location"] == "s3://b/tables/main"


def test_handler_registers_metadata_files_and_ignores_the_rest(aws: Any) -> None:
    glue = aws.client("glue")
    glue.create_database(DatabaseInput={"Name": "lethe_t2"})
    s = Settings("lethe_t2", "main")
    ev = _event("b", "tables/main/metadata/snap-1-x.avro", "tables/main/metadata/v1.metadata.json")
    assert handle(ev, s, glue) == ["created"]
    assert handle(_event("b", "tables/main/metadata/v1.metadata.json"), s, glue) == ["unchanged"]
    with pytest.raises(SettingsError):
        Settings.from_env({})
