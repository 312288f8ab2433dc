"""Issue 38 item 4: one transaction. ``with t.transaction() as tx:`` groups changes into one
commit through the one loop; a merge append, a registration with its schema change and an
adoption batch with its new columns are each one version; a transaction that raises
commits (and leaves) nothing; a concurrent commit is rebased onto or fails cleanly."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.catalog.evolution import SchemaUpdate
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import Staged

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int32()),
        ("note", pa.string()),
    ]
)


def _rows(start: int, n: int, **extra: list[Any]) -> pa.Table:
    t = pa.table(
        {
            "id": list(range(start, start + n)),
            "customer_id": pa.array([i % 7 for i in range(start, start + n)], pa.int32()),
            "note": [f"n{i}" for i in range(start, start + n)],
        }
    )
    for name, values in extra.items():
        t = t.append_column(name, pa.array(values))
    return t


def _table(uri: str, s3: Any) -> lethe.Table:
    t = lethe.Table.create(uri, SCHEMA, key="id", s3=s3)
    t.append(_rows(0, 3).cast(SCHEMA))
    return t


def _data_objects(s3: Any, uri: str) -> set[str]:
    bucket, prefix = uri[5:].split("/", 1)
    got = s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/data/").get("Contents", [])
    return {o["Key"][len(prefix) + 1 :] for o in got}


def _live(t: lethe.Table) -> set[str]:
    return {f.path for f in lethe.Table.open(t.uri).manifest.files}


def test_a_merge_append_is_one_version(table_uri: str, s3: Any) -> None:
    """Issue 38 item 4: ``append(schema_mode="merge")`` took a schema commit, then the
    append's (two versions; a reader between them saw the new column with no rows)."""
    t = _table(table_uri, s3)
    v = t.version
    wide = _rows(3, 2, country=["NL", "DE"])
    wide = wide.set_column(1, "customer_id", wide.column("customer_id").cast(pa.int64()))
    r = t.append(wide, schema_mode="merge")
    assert (r.version, r.rows_added, r.files_added, r.committed) == (v + 1, 2, 1, True)
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.version == v + 1 and fresh.schema.field("customer_id").type == pa.int64()
    op = fresh.manifest.operation
    assert (op.kind, op.rows_added, op.params["steps"], op.params["schema_add"]) == (
        "append",
        2,
        2,
        1,
    )
    assert [r["country"] for r in fresh.scan().sort_by("id").to_pylist()] == [None] * 3 + [
        "NL",
        "DE",
    ]
    # the files are written under the schema the same commit made
    (new,) = [f for f in fresh.manifest.files if f.added_version == v + 1]
    assert new.schema_id == fresh.manifest.current_schema_id


def test_a_transaction_commits_schema_rows_and_properties_as_one_version(
    table_uri: str, s3: Any
) -> None:
    t = _table(table_uri, s3)
    v = t.version
    with t.transaction() as tx:
        tx.update_schema().add_column("country", pa.string()).rename_column("note", "memo")
        tx.append(_rows(3, 2, country=["NL", "DE"]).rename_columns(
            ["id", "customer_id", "memo", "country"]
        ).cast(pa.schema([("id", pa.int64()), ("customer_id", pa.int32()),
                          ("memo", pa.string()), ("country", pa.string())])))  # fmt: skip
        tx.append(_rows(5, 1, country=["PT"]), schema_mode="merge")  # "note": memo's alias
        tx.set_properties(uploads_evolve=True)
    assert tx.result.version == v + 1 and tx.result.rows_added == 3 and t.version == v + 1
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.version == v + 1 and fresh.manifest.properties.uploads_evolve
    got = fresh.scan().sort_by("id").to_pylist()
    assert [(r["memo"], r["country"]) for r in got] == [
        ("n0", None),
        ("n1", None),
        ("n2", None),
        ("n3", "NL"),
        ("n4", "DE"),
        ("n5", "PT"),
    ]


def test_a_transaction_that_raises_commits_nothing_and_leaves_nothing(
    table_uri: str, s3: Any
) -> None:
    t = _table(table_uri, s3)
    v, objects = t.version, _data_objects(s3, table_uri)
    with pytest.raises(RuntimeError, match="changed my mind"), t.transaction() as tx:
        tx.update_schema().add_column("country", pa.string())
        tx.append(_rows(3, 2, country=["NL", "DE"]), schema_mode="merge")
        raise RuntimeError("changed my mind")
    assert lethe.Table.open(table_uri, s3=s3).version == v == t.version
    assert _data_objects(s3, table_uri) == objects  # nothing was written
    with pytest.raises(errors.InvalidRequest, match="committed already"):
        tx.append(_rows(9, 1))


def test_a_schema_update_left_with_an_error_commits_nothing_and_closes() -> None:
    """Issue 38 item 4: a schema update keeps the transaction's rule (one ``OneCommit``): a
    ``with`` block that raises commits nothing, and the update cannot be committed later."""
    committed: list[Any] = []
    update = SchemaUpdate(committed.append)
    with pytest.raises(RuntimeError, match="changed my mind"), update:
        update.add_column("country", pa.string())
        raise RuntimeError("changed my mind")
    with pytest.raises(errors.InvalidRequest, match="committed already"):
        update.commit()
    assert committed == []


def test_a_transaction_refuses_what_it_cannot_do_honestly(table_uri: str, s3: Any) -> None:
    t = _table(table_uri, s3)
    with t.transaction() as tx:
        with pytest.raises(errors.InvalidRequest, match="does not delete"):
            tx.delete([("id", "=", 1)])
        with pytest.raises(errors.InvalidRequest, match="schema_mode"):
            tx.append(_rows(3, 1), schema_mode="overwrite")  # type: ignore[arg-type]
    # an empty transaction commits nothing
    assert tx.result.committed is False and lethe.Table.open(table_uri).version == t.version


def test_a_failing_step_commits_nothing_and_removes_what_was_written(
    table_uri: str, s3: Any
) -> None:
    """A later step's refusal (here a merge that no evolution reconciles) after an earlier
    append wrote its files: no version, and those files are removed."""
    t = _table(table_uri, s3)
    v, objects = t.version, _data_objects(s3, table_uri)
    bad = _rows(9, 1).set_column(2, "note", pa.array([5]))
    tx = t.transaction()
    tx.append(_rows(3, 2).cast(SCHEMA))
    tx.append(bad, schema_mode="merge")
    with pytest.raises(errors.SchemaMismatch, match="note"):
        tx.commit()
    assert lethe.Table.open(table_uri).version == v
    assert _data_objects(s3, table_uri) == objects


def _racer(other: lethe.Table, change: Any) -> tuple[Any, list[int]]:
    """A step that commits ``change`` through another handle the first time it is prepared
    (a concurrent writer landing between this preparation and its CAS)."""
    seen: list[int] = []

    def step(snap: Snapshot, evolved: bool) -> Staged:
        if not seen:
            change(other)
        seen.append(snap.version)
        return Staged(None)

    return step, seen


def test_a_concurrent_rename_rebases_a_merge_append(table_uri: str, s3: Any) -> None:
    """The merge is planned on the snapshot it commits on: a rename that lands while the
    transaction prepares makes the loop prepare it again (files written anew under the new
    schema, the first preparation's removed); "note" lands in "memo"."""
    t = _table(table_uri, s3)
    step, seen = _racer(
        lethe.Table.open(table_uri, s3=s3),
        lambda o: o.update_schema().rename_column("note", "memo").commit(),
    )
    tx = t.transaction()
    tx.stage(step)
    tx.append(_rows(3, 1, extra=["x"]), schema_mode="merge")
    r = tx.commit()
    assert seen == [1, 2] and r.version == 3 and r.attempts == 2
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.schema.names == ["id", "customer_id", "memo", "extra"]
    (got,) = [x for x in fresh.scan().to_pylist() if x["id"] == 3]
    assert (got["memo"], got["extra"]) == ("n3", "x")
    assert _data_objects(s3, table_uri) == _live(fresh)  # the first preparation's files: gone


def test_a_concurrent_rename_fails_a_streamed_merge_append_cleanly(table_uri: str, s3: Any) -> None:
    """A stream cannot be read twice: the transaction fails with CommitConflict, commits
    nothing and leaves no file behind."""
    t = _table(table_uri, s3)
    step, _ = _racer(
        lethe.Table.open(table_uri, s3=s3),
        lambda o: o.update_schema().rename_column("note", "memo").commit(),
    )
    data = _rows(3, 1, extra=["x"])
    tx = t.transaction()
    tx.stage(step)
    tx.append(
        pa.RecordBatchReader.from_batches(data.schema, data.to_batches()), schema_mode="merge"
    )
    with pytest.raises(errors.CommitConflict, match="stream is read once"):
        tx.commit()
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.version == 2 and "extra" not in fresh.schema.names  # only the rename
    assert _data_objects(s3, table_uri) == _live(fresh)


def test_a_concurrent_append_is_rebased_onto_without_a_rewrite(table_uri: str, s3: Any) -> None:
    """Another writer's append does not change the schema: the prepared files commit on the
    newer base as they are (one preparation)."""
    t = _table(table_uri, s3)
    step, seen = _racer(lethe.Table.open(table_uri, s3=s3), lambda o: o.append(_rows(10, 2)))
    tx = t.transaction()
    tx.stage(step)
    tx.append(_rows(3, 1, extra=["x"]), schema_mode="merge")
    r = tx.commit()
    assert seen == [1] and r.version == 3
    assert lethe.Table.open(table_uri).scan().num_rows == 3 + 2 + 1


def test_register_merge_is_one_version(table_uri: str, bucket: str, s3: Any) -> None:
    """Issue 38 item 4: ``register_parquet(schema_mode="merge")`` of a file with a new
    column took a schema commit, then the registration's."""
    from lethe.ingest.register import register_parquet

    t = _table(table_uri, s3)
    v = t.version
    buf = pa.BufferOutputStream()
    pq.write_table(_rows(3, 2, country=["NL", "DE"]), buf)
    s3.put_object(Bucket=bucket, Key="incoming/a.parquet", Body=buf.getvalue().to_pybytes())
    r = register_parquet(t, "incoming/a.parquet", schema_mode="merge")
    assert r.version == v + 1 and not r.duplicate and r.rows == 2
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.version == v + 1 and fresh.manifest.operation.kind == "register"
    assert sorted(fresh.scan().column("country").to_pylist(), key=str) == [
        "DE",
        "NL",
        None,
        None,
        None,
    ]
    again = register_parquet(t, "incoming/a.parquet", schema_mode="merge")
    assert again.duplicate and lethe.Table.open(table_uri).version == v + 1


def test_cli_append_evolve_of_two_shapes_is_one_version(
    table_uri: str, s3: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lethe.cli import main

    t = _table(table_uri, s3)
    pq.write_table(_rows(3, 2, country=["NL", "DE"]), tmp_path / "a.parquet")
    pq.write_table(_rows(5, 1, channel=["web"]), tmp_path / "b.parquet")
    assert main(["-q", "append", table_uri, str(tmp_path), "--evolve"]) == 0
    assert f"-> version {t.version + 1} " in capsys.readouterr().out
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.version == t.version + 1 and fresh.scan().num_rows == 6
    assert fresh.schema.names[-2:] == ["country", "channel"]


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.sampled_from(["append", "merge", "add", "props", "empty"]), min_size=1, max_size=4
    ),
    fail=st.booleans(),
)
def test_a_transaction_is_one_version_or_none(
    bucket: str, s3: Any, steps: list[str], fail: bool
) -> None:
    """Whatever steps a transaction takes: it adds exactly one version when one of them
    changes the table (none when it raises or none does), and the rows read back are the
    rows appended."""
    uri = f"s3://{bucket}/tx/{uuid.uuid4().hex[:8]}"
    t = _table(uri, s3)
    v, n = t.version, 3
    changed, added = False, 0
    try:
        with t.transaction() as tx:
            for i, s in enumerate(steps):
                start = 100 * (i + 1)
                if s == "append":  # merge: the columns added before it read as null
                    tx.append(_rows(start, 2).cast(SCHEMA), schema_mode="merge")
                elif s == "merge":
                    tx.append(_rows(start, 2, **{f"c{i}": ["a", "b"]}), schema_mode="merge")
                elif s == "add":
                    tx.update_schema().add_column(f"d{i}", pa.string())
                elif s == "props":
                    tx.set_properties(uploads_evolve=True)
                else:
                    tx.append(_rows(start, 0).cast(SCHEMA), schema_mode="merge")
                added += 2 if s in ("append", "merge") else 0
                changed = changed or s != "empty"
            if fail:
                raise KeyError("abort")
    except KeyError:
        pass
    fresh = lethe.Table.open(uri, s3=s3)
    landed = changed and not fail
    assert fresh.version == v + (1 if landed else 0)
    assert fresh.scan().num_rows == n + (added if landed else 0)


def test_library_transactions_take_a_context_and_leave_the_handle(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """Issue 38 items 2+4 together: a registration with its schema change is one version
    when given a table's context too (the transaction is made at the catalog level,
    ``lethe.index.commits.transaction``, not through ``Table.transaction()``), and it moves
    no handle; a library transaction adds written files and steps, never data."""
    from lethe.index.commits import transaction
    from lethe.ingest.register import register_parquet

    t = _table(table_uri, s3)
    v = t.version
    buf = pa.BufferOutputStream()
    pq.write_table(_rows(3, 2, country=["NL", "DE"]), buf)
    s3.put_object(Bucket=bucket, Key="incoming/c.parquet", Body=buf.getvalue().to_pybytes())
    r = register_parquet(t.context, "incoming/c.parquet", schema_mode="merge")
    assert (r.version, r.rows, t.version) == (v + 1, 2, v)  # the handle stays where it was
    fresh = lethe.Table.open(table_uri, s3=s3)
    assert fresh.manifest.operation.kind == "register" and "country" in fresh.schema.names
    with pytest.raises(errors.InvalidRequest, match=r"lethe\.Table\.transaction"):
        transaction(t.context, "append").append(_rows(5, 1))
    assert lethe.Table.open(table_uri, s3=s3).version == v + 1
