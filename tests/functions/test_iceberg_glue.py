"""The Glue registration of the Iceberg view, on moto's Glue: created once, moved forward
only, and the handler reads only the event's key."""

from __future__ import annotations

from typing import Any

import pytest

import _settings
from lethe.iceberg.glue import register


@pytest.fixture
def glue_handler(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The handler module, loaded (its cold start) with its environment set."""
    import importlib

    monkeypatch.setenv("LETHE_GLUE_DATABASE", "lethe_cold_start")
    monkeypatch.setenv("LETHE_GLUE_TABLE", "main")
    import functions.iceberg_glue.handler as h

    return importlib.reload(h)


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


class _Racer:
    """Moto's Glue client, with another writer registering ``first`` just before our
    ``create_table``."""

    def __init__(self, glue: Any, first: str) -> None:
        self.glue, self.first, self.creates = glue, first, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.glue, name)

    def create_table(self, **kw: Any) -> Any:
        self.creates += 1
        register(self.glue, database=kw["DatabaseName"], table="main", metadata_uri=self.first)
        return self.glue.create_table(**kw)


def test_a_lost_create_race_reads_again_and_moves_forward(aws: Any) -> None:
    """A writer that created the table first wins the create; ours reads it again and moves
    it forward (issue 38: Glue's create and update share one write step)."""
    glue = aws.client("glue")
    glue.create_database(DatabaseInput={"Name": "lethe_race"})
    uri = "s3://b/tables/main/metadata/v{}.metadata.json"
    racer = _Racer(glue, uri.format(2))
    got = register(racer, database="lethe_race", table="main", metadata_uri=uri.format(4))
    params = glue.get_table(DatabaseName="lethe_race", Name="main")["Table"]["Parameters"]
    assert (got, racer.creates) == ("updated", 1)
    assert params["metadata_location"] == uri.format(4)
    assert params["previous_metadata_location"] == uri.format(2)


def test_handler_registers_metadata_files_and_ignores_the_rest(aws: Any, glue_handler: Any) -> None:
    Settings, SettingsError, handle = (
        glue_handler.Settings,
        _settings.SettingsError,
        glue_handler.handle,
    )
    assert glue_handler.SETTINGS.database == "lethe_cold_start"
    glue = aws.client("glue")
    glue.create_database(DatabaseInput={"Name": "lethe_t2"})
    s = Settings.from_env({"LETHE_GLUE_DATABASE": "lethe_t2", "LETHE_GLUE_TABLE": "main"})
    ev = _event("b", "tables/main/metadata/snap-1-x.avro", "tables/main/metadata/v1.metadata.json")
    assert handle(ev, s, glue) == ["created"]
    assert handle(_event("b", "tables/main/metadata/v1.metadata.json"), s, glue) == ["unchanged"]
    with pytest.raises(SettingsError, match="LETHE_GLUE_DATABASE is required"):
        Settings.from_env({"LETHE_GLUE_TABLE": "main"})


def test_a_cold_start_without_its_environment_fails_naming_the_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    monkeypatch.delenv("LETHE_GLUE_DATABASE", raising=False)
    monkeypatch.delenv("LETHE_GLUE_TABLE", raising=False)
    with pytest.raises(_settings.SettingsError) as e:  # at first import, or at a reload
        import functions.iceberg_glue.handler as h

        importlib.reload(h)
    assert "LETHE_GLUE_DATABASE is required" in str(e.value)
    assert "LETHE_GLUE_TABLE is required" in str(e.value)
