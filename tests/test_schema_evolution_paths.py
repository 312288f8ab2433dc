"""Schema evolution on every write path (issue 27): ``register_parquet(schema_mode=...)``,
the CLI's ``lethe append --evolve``, and the engines that read the Iceberg view."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_schema_evolution import SCHEMA, by_id, evolve, rows

import lethe
from lethe import errors
from lethe.catalog.schemas import field_id
from lethe.ingest.register import register_parquet
from tests.engines import iceberg_view


def _put(s3: Any, bucket: str, key: str, t: pa.Table) -> None:
    buf = pa.BufferOutputStream()
    pq.write_table(t, buf)
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue().to_pybytes())


def _new_shape(start: int, n: int) -> pa.Table:
    """The upstream's new shape: ``customer_id`` int64 (values past int32), ``country`` added."""
    t = rows(start, n)
    t = t.set_column(1, "customer_id", pa.array([2**40 + i for i in range(n)], pa.int64()))
    return t.append_column("country", pa.array(["NL"] * n))


def test_register_strict_lists_every_difference_and_changes_nothing(
    table_uri: str, bucket: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    _put(s3, bucket, "incoming/new.parquet", _new_shape(0, 3))
    v = t.version
    with pytest.raises(errors.SchemaMismatch, match=r"country.*customer_id|customer_id.*country"):
        register_parquet(t, "incoming/new.parquet")
    assert lethe.Table.open(table_uri).version == v


def test_register_merge_adds_widens_and_registers_under_the_matching_schema(
    table_uri: str, bucket: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    _put(s3, bucket, "incoming/old.parquet", rows(0, 4))
    register_parquet(t, "incoming/old.parquet", schema_mode="merge")  # fits: nothing evolves
    assert len(t.schema_history) == 1
    _put(s3, bucket, "incoming/new.parquet", _new_shape(4, 3))
    r = register_parquet(t, "incoming/new.parquet", schema_mode="merge")
    assert r.rows == 3 and not r.duplicate
    t = lethe.Table.open(table_uri)
    assert t.schema.field("customer_id").type == pa.int64()
    assert field_id(t.schema.field("country")) == 8
    assert [f.schema_id or 0 for f in t.manifest.files] == [0, 1]
    # an old-shape file after the evolution goes under schema 0, as written
    _put(s3, bucket, "incoming/old2.parquet", rows(7, 2))
    register_parquet(t, "incoming/old2.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri)
    assert len(t.schema_history) == 2 and sorted(f.schema_id or 0 for f in t.manifest.files) == [
        0,
        0,
        1,
    ]
    got = by_id(t.scan(["id", "customer_id", "country"]))
    assert [r["customer_id"] for r in got] == [i % 7 for i in range(4)] + [
        2**40 + i for i in range(3)
    ] + [7 % 7, 8 % 7]
    assert [r["country"] for r in got] == [None] * 4 + ["NL"] * 3 + [None] * 2
    # pruning decodes each file's own statistics
    assert t.scan(filters=[("customer_id", ">", 2**31)]).column("id").to_pylist() == [4, 5, 6]
    assert sorted(t.scan(filters=[("customer_id", "=", 1)]).column("id").to_pylist()) == [1, 8]


def test_register_merge_records_the_shape_of_a_narrower_subset_file(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """A file with some of the columns, one of them narrower than the table's, matches no
    schema: its shape is recorded (never current) and it reads widened, the rest null."""
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.update_schema().widen_column("amount", pa.float64()).commit()
    part = rows(0, 3).select(["id", "customer_id", "amount"])
    assert part.schema.field("amount").type == pa.float32()
    _put(s3, bucket, "incoming/part.parquet", part)
    register_parquet(t, "incoming/part.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri)
    assert t.manifest.current_schema_id == 1
    sid, shape = t.schema_history[-1]
    assert sid == 2 and [(f.name, str(f.type), field_id(f)) for f in shape] == [
        ("id", "int64", 1),
        ("customer_id", "int32", 2),
        ("amount", "float", 3),
    ]
    assert [f.schema_id for f in t.manifest.files] == [2]
    got = by_id(t.scan())
    assert got[1] == {
        "id": 1,
        "customer_id": 1,
        "amount": 0.5,
        "payload": None,
        "legacy": None,
        "day": None,
        "price": None,
    }
    assert t.scan(filters=[("amount", ">=", 1.0)]).column("id").to_pylist() == [2]
    # a second file of that shape reuses the recorded schema; erase reaches it
    _put(s3, bucket, "incoming/part2.parquet", rows(3, 2).select(["id", "customer_id", "amount"]))
    register_parquet(t, "incoming/part2.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri)
    assert [sid for sid, _ in t.schema_history] == [0, 1, 2]
    t.erase([("id", "in", [1, 4])])
    assert sorted(lethe.Table.open(table_uri).scan().column("id").to_pylist()) == [0, 2, 3]
    from lethe.audit.verify import verify

    assert verify(lethe.Table.open(table_uri), deep=True).ok


def test_register_merge_refuses_what_cannot_merge_listing_every_column(
    table_uri: str, bucket: str, s3: Any
) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    bad = rows(0, 2).set_column(2, "amount", pa.array(["x", "y"]))
    bad = bad.set_column(3, "payload", pa.array([1, 2]))
    _put(s3, bucket, "incoming/bad.parquet", bad.append_column("country", pa.array(["a", "b"])))
    with pytest.raises(errors.SchemaMismatch, match=r"amount.*payload"):
        register_parquet(t, "incoming/bad.parquet", schema_mode="merge")
    _put(s3, bucket, "incoming/nokey.parquet", rows(0, 2).drop_columns(["id"]))
    with pytest.raises(errors.SchemaMismatch, match=r"missing required columns \['id'\]"):
        register_parquet(t, "incoming/nokey.parquet", schema_mode="merge")
    nullable_key = pa.table(
        {"id": pa.array([1, None], pa.int64()), "country": ["NL", "DE"]},
    )
    _put(s3, bucket, "incoming/nullkey.parquet", nullable_key)
    with pytest.raises(errors.SchemaMismatch, match=r"'id' is required"):
        register_parquet(t, "incoming/nullkey.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri)
    assert len(t.schema_history) == 1 and "country" not in t.schema.names  # nothing evolved


def _published(capsys: pytest.CaptureFixture[str]) -> str:
    out = capsys.readouterr().out
    return next(w for w in out.split() if w.startswith("s3://") and w.endswith(".json"))


def test_the_done_when_scenario_from_the_cli(
    aws: Any, table_uri: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27's scenario end to end from the CLI: add ``country``, widen ``customer_id``,
    ``lethe append --evolve`` the new shape, erase a person whose rows are in old- and
    new-shape files, read the view with PyIceberg at both snapshots."""
    from lethe.cli import main

    lethe.Table.create(table_uri, SCHEMA, key="id")
    old, new = tmp_path / "old.parquet", tmp_path / "new.parquet"
    pq.write_table(rows(0, 21), old)  # customer 3: ids 3, 10, 17
    shape = rows(21, 7).set_column(
        1, "customer_id", pa.array([3, 2**40, 3, 5, 6, 2**33, 1], pa.int64())
    )
    pq.write_table(shape.append_column("country", pa.array(["NL", "DE"] * 3 + [None])), new)
    assert main(["append", table_uri, str(old)]) == 0
    assert main(["iceberg", "publish", table_uri]) == 0
    v_old, uri_old = lethe.Table.open(table_uri).version, _published(capsys)
    assert main(["schema", "add", table_uri, "country", "string"]) == 0
    assert main(["schema", "widen", table_uri, "customer_id", "int64"]) == 0
    assert main(["append", table_uri, str(new), "--evolve"]) == 0
    t = lethe.Table.open(table_uri)
    assert [sid for sid, _ in t.schema_history] == [0, 1, 2]  # --evolve had nothing to add
    assert {f.schema_id or 0 for f in t.manifest.files} == {0, 2}
    capsys.readouterr()
    assert main(["erase", table_uri, "--where", "customer_id = 3", "-q"]) == 0
    t = lethe.Table.open(table_uri)
    gone = {3, 10, 17, 21, 23}
    want = by_id(t.scan())
    assert [r["id"] for r in want] == [i for i in range(28) if i not in gone]
    assert t.scan(filters=[("customer_id", "=", 3)]).num_rows == 0
    assert main(["verify", table_uri, "--deep"]) == 0
    capsys.readouterr()
    assert main(["iceberg", "publish", table_uri]) == 0
    view = iceberg_view(aws, _published(capsys))
    got = sorted(view.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == want and got[-1]["country"] is None
    assert {r["id"]: r["customer_id"] for r in got}[22] == 2**40
    # the snapshot before the evolution: its own schema. The view's old snapshot names the
    # original files until GC maps that version (docs/format.md §6b); Lethe's time travel
    # reads it through the splice, minus the erased person (issue 39)
    before = view.scan(snapshot_id=v_old).to_arrow()
    assert before.column_names == SCHEMA.names
    assert before.num_rows == 21
    mapped = by_id(lethe.Table.open(table_uri, version=v_old).scan())
    assert [r for r in by_id(before) if r["id"] not in gone] == mapped
    assert [r["id"] for r in mapped] == [i for i in range(21) if i not in gone]
    assert iceberg_view(aws, uri_old).metadata.current_schema_id == 0
    # no row of the erased person is left in any data file of the table
    assert lethe.Table.open(table_uri).scan(filters=[("id", "in", sorted(gone))]).num_rows == 0


@pytest.mark.parametrize("where", ["local", "s3"])
def test_lethe_append_never_drops_a_column_or_narrows_a_value(
    table_uri: str,
    bucket: str,
    s3: Any,
    tmp_path: Any,
    where: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The old silent path: ``lethe append`` of a file with a column the table lacks and
    int64 values past int32 exited 0, dropped the column and cast the values down. Each
    difference alone, and both, are now refused with every column named, nothing written."""
    from lethe.cli import main

    lethe.Table.create(table_uri, SCHEMA, key="id")
    wide = rows(0, 3).set_column(1, "customer_id", pa.array([1, 2**31, 2**40], pa.int64()))
    extra = rows(0, 3).append_column("country", pa.array(["NL", "DE", None]))
    for name, data, words in (
        ("wide", wide, ["customer_id"]),
        ("extra", extra, ["country"]),
        (
            "both",
            wide.append_column("country", pa.array(["a", "b", "c"])),
            ["customer_id", "country"],
        ),
    ):
        if where == "local":
            src = str(tmp_path / f"{name}.parquet")
            pq.write_table(data, src)
        else:
            _put(s3, bucket, f"raw/{name}.parquet", data)
            src = f"s3://{bucket}/raw/{name}.parquet"
        capsys.readouterr()
        assert main(["append", table_uri, src]) == 2, name
        err = capsys.readouterr().err
        assert all(w in err for w in words), err
        t = lethe.Table.open(table_uri)
        assert t.version == 0 and t.scan().num_rows == 0 and t.schema.names == SCHEMA.names


def _evolved_view_table(table_uri: str, *, widen_day: bool, delete: bool = True) -> lethe.Table:
    """Old-shape rows, then add/rename/drop/widen, new-shape rows, a delete (a deletion
    vector; ``delete=False``: none) and erases (splices)."""
    t = lethe.Table.create(table_uri, SCHEMA, key="id", row_group_bytes=256)
    t.append(rows(0, 30))
    with t.update_schema() as u:
        evolve(u)
        u.widen_column("price", pa.decimal128(14, 2))
        if widen_day:
            u.widen_column("day", pa.timestamp("us"))
    new = _new_shape(30, 6).rename_columns(
        [*SCHEMA.names[:3], "body", *SCHEMA.names[4:], "country"]
    )
    new = new.drop_columns(["legacy"]).set_column(2, "amount", pa.array([1e300] * 6))
    t.append(new, schema_mode="merge")
    if delete:
        t.delete([("id", "in", [5, 31])])  # deletion vectors: position deletes in format 2
    t.erase([("customer_id", "=", 3)])  # spliced old-shape files
    t.erase([("id", "=", 33)])  # a spliced new-shape file
    return lethe.Table.open(table_uri)


ENGINES = ("pyiceberg", "polars", "daft")


def _engine_rows(engine: str, aws: Any, metadata_uri: str) -> list[dict[str, Any]]:
    view = iceberg_view(aws, metadata_uri)
    if engine == "pyiceberg":
        got = view.scan().to_arrow()
    elif engine == "polars":
        got = pl.scan_iceberg(view).collect().to_arrow()
    else:
        import daft
        from daft.io import IOConfig, S3Config

        io = IOConfig(
            s3=S3Config(
                endpoint_url=aws.endpoint,
                key_id="testing",
                access_key="testing",
                region_name="us-east-1",
            )
        )
        got = daft.read_iceberg(view, io_config=io).to_arrow()
    return sorted(got.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_reads_the_evolved_format_2_view_exactly(
    aws: Any, table_uri: str, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files carry field ids, so Daft, polars and PyIceberg read the format-2 view (position
    deletes, no Puffin DVs) after add, rename, drop, int/float/decimal widening, a delete and
    erases to exactly Lethe's rows, types widened and names as the current schema has them."""
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")  # no polars_iceberg plugin here
    t = _evolved_view_table(table_uri, widen_day=False)
    want = by_id(t.scan())
    assert len(want) == 36 - 2 - 4 - 1 and want[-1]["customer_id"] == 2**40 + 5
    uri = t.publish_iceberg(format_version=2)
    got = _engine_rows(engine, aws, uri)
    assert got == want
    assert list(got[0]) == t.schema.names


DATE_PROMOTION = {
    "pyiceberg": "pyiceberg 0.12 does not promote date to timestamp: "
    "ArrowProjectionVisitor._cast_if_needed (io/pyarrow.py) reads values.type.tz of the "
    "file's date32 column when the read type is timestamp (AttributeError)",
    "polars": "polars 2.1's Iceberg reader refuses the promotion: 'failed to resolve Iceberg "
    "column mapping: data type mismatch for column day: incoming: Date != target: "
    "Datetime(us)'",
}
DATE_PROMOTION_RAISES: dict[str, type[BaseException]] = {
    "pyiceberg": AttributeError,
    "polars": pl.exceptions.SchemaError,
}


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(
            e,
            marks=pytest.mark.xfail(
                strict=True, reason=DATE_PROMOTION[e], raises=DATE_PROMOTION_RAISES[e]
            ),
        )
        if e in DATE_PROMOTION
        else e
        for e in ENGINES
    ],
)
def test_every_engine_reads_a_date_widened_to_timestamp_in_a_format_3_view(
    aws: Any, table_uri: str, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """date -> timestamp is a promotion of Iceberg v3's spec, so it is published in a
    format-3 view only. No delete (Daft reads no Puffin DVs; erases splice): Daft reads it
    exactly, the others fail as :data:`DATE_PROMOTION` says (Lethe's own reads widen it)."""
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    t = _evolved_view_table(table_uri, widen_day=True, delete=False)
    assert not any(f.dv for f in t.manifest.files)
    uri = t.publish_iceberg(format_version=3)
    got = _engine_rows(engine, aws, uri)
    assert got == by_id(t.scan())
    assert {type(r["day"]) for r in got} == {dt.datetime}


RULE = r"column 'day': date -> timestamp is a type promotion of Iceberg format 3 only"


def test_a_format_2_view_refuses_a_date_widened_to_timestamp(table_uri: str) -> None:
    """Iceberg allows date -> timestamp from spec v3 only: a table publishing a format-2
    view refuses the widening (update_schema and merge appends alike), a table without that
    view accepts it, and then neither the switch to a format-2 view nor a format-2 publish
    goes through; each refusal names the column and the rule and changes nothing."""
    v2 = lethe.Table.create(table_uri, SCHEMA, key="id", iceberg_format_version=2)
    v2.set_properties(iceberg_view=True)
    v2.append(rows(0, 4))
    v = v2.version
    with pytest.raises(errors.SchemaEvolutionError, match=RULE + r".*format-2 view"):
        v2.update_schema().widen_column("day", pa.timestamp("us")).commit()
    wide_day = rows(4, 2).set_column(
        5, "day", pa.array([dt.datetime(2024, 5, 1, 12)] * 2, pa.timestamp("us"))
    )
    with pytest.raises(errors.SchemaEvolutionError, match=RULE):
        v2.append(wide_day, schema_mode="merge")
    v2 = lethe.Table.open(table_uri)
    assert v2.version == v and v2.schema.field("day").type == pa.date32()
    v2.update_schema().widen_column("customer_id", pa.int64()).commit()  # other rules hold

    other = table_uri + "-v3"
    t = lethe.Table.create(other, SCHEMA, key="id", iceberg_view=True)  # format 3
    t.append(rows(0, 4))
    t.update_schema().widen_column("day", pa.timestamp("us")).commit()
    t.append(wide_day, schema_mode="merge")
    assert t.publish_iceberg().endswith(".metadata.json")
    v = t.version
    with pytest.raises(errors.IcebergUnsupported, match=RULE):
        t.set_properties(iceberg_format_version=2)
    with pytest.raises(errors.IcebergUnsupported, match=RULE + r".*publish the view in format 3"):
        t.publish_iceberg(format_version=2)
    t = lethe.Table.open(other)
    assert t.version == v and t.manifest.properties.iceberg_format_version == 3
    t.set_properties(iceberg_view=False, iceberg_format_version=2)  # no view: nothing to refuse
    with pytest.raises(errors.IcebergUnsupported, match=RULE):
        t.set_properties(iceberg_view=True)


def test_a_format_2_view_refuses_a_registered_date_file_under_a_timestamp_column(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """A registered file keeps its date column (its shape is recorded, read widened): that
    too is a date -> timestamp promotion, refused while the table publishes a v2 view."""
    schema = SCHEMA.set(5, pa.field("day", pa.timestamp("us")))
    t = lethe.Table.create(table_uri, schema, key="id", iceberg_view=True, iceberg_format_version=2)
    _put(s3, bucket, "incoming/dates.parquet", rows(0, 3).select(["id", "day"]))
    with pytest.raises(errors.SchemaEvolutionError, match=RULE):
        register_parquet(t, "incoming/dates.parquet", schema_mode="merge")
    t = lethe.Table.open(table_uri)
    assert t.version == 0 and len(t.schema_history) == 1
    t.set_properties(iceberg_format_version=3)
    register_parquet(t, "incoming/dates.parquet", schema_mode="merge")
    got = lethe.Table.open(table_uri).scan(["id", "day"]).to_pylist()
    assert got[1] == {"id": 1, "day": dt.datetime(2024, 1, 2)}


def test_a_table_that_holds_the_widening_under_a_v2_view_already_keeps_working(
    table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table that switched to a format-2 view before the rule existed (simulated: the
    check skipped for that one commit) still takes other changes; only its v2 publish is
    refused, naming the column and the rule, and a v3 publish works."""
    import lethe.catalog.changes

    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 3))
    t.update_schema().widen_column("day", pa.timestamp("us")).commit()
    with monkeypatch.context() as m:
        m.setattr(lethe.catalog.changes, "check_view_promotions", lambda *a: None)
        t.set_properties(iceberg_view=True, iceberg_format_version=2)
    t = lethe.Table.open(table_uri)  # the after-commit publish failed, the commit stands
    assert t.manifest.properties.iceberg_format_version == 2
    t.set_properties(request_log_max=50)
    t.update_schema().add_column("country", pa.string()).commit()
    day = pa.array([None, None], pa.timestamp("us"))
    t.append(rows(3, 2).set_column(5, "day", day), schema_mode="merge")
    with pytest.raises(errors.IcebergUnsupported, match=RULE):
        t.publish_iceberg()
    assert t.publish_iceberg(format_version=3).endswith(".metadata.json")
