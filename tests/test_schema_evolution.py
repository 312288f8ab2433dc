"""Schema evolution with field ids (issue 27): ids in the manifest and in every file,
``Table.update_schema``, reads by id across schemas, ``append(schema_mode="merge")``."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.catalog.manifest import decode_manifest, encode_manifest
from lethe.catalog.schemas import FIELD_ID, field_id
from tests.engines import iceberg_view

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int32()),
        ("amount", pa.float32()),
        ("payload", pa.string()),
        ("legacy", pa.string()),
        ("day", pa.date32()),
        ("price", pa.decimal128(9, 2)),
    ]
)


def evolve(u: Any) -> None:
    """The common evolution: add ``country``, rename ``payload`` to ``body``, drop ``legacy``,
    widen ``customer_id`` to int64 and ``amount`` to float64."""
    u.add_column("country", pa.string())
    u.rename_column("payload", "body")
    u.drop_column("legacy")
    u.widen_column("customer_id", pa.int64())
    u.widen_column("amount", pa.float64())


def rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "customer_id": [i % 7 for i in ids],
            "amount": [float(i) / 2 for i in ids],
            "payload": [f"p{i}" for i in ids],
            "legacy": [f"l{i}" for i in ids],
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 30) for i in ids],
            "price": [decimal.Decimal(i) / 4 for i in ids],
        },
        schema=SCHEMA,
    )


def by_id(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_ids_are_assigned_in_schema_order_and_written_into_files(table_uri: str, s3: Any) -> None:
    nested = pa.schema(
        [
            ("id", pa.int64(), False),
            ("s", pa.struct([("a", pa.int32()), ("b", pa.list_(pa.string()))])),
            ("m", pa.map_(pa.string(), pa.int64())),
        ]
    )
    t = lethe.Table.create(table_uri, nested, key="id")
    ids = {f.name: field_id(f) for f in t.schema}
    assert ids == {"id": 1, "s": 2, "m": 3}
    s = t.schema.field("s").type
    assert [field_id(s.field(i)) for i in range(2)] == [4, 5]
    assert field_id(s.field(1).type.value_field) == 6
    m = t.schema.field("m").type
    assert (field_id(m.key_field), field_id(m.item_field)) == (7, 8)
    t.append(pa.table({"id": [1], "s": [{"a": 1, "b": ["x"]}], "m": [[("k", 2)]]}, schema=nested))
    f = t.manifest.files[0]
    bucket, prefix = table_uri[5:].split("/", 1)
    body = s3.get_object(Bucket=bucket, Key=f"{prefix}/{f.path}")["Body"].read()
    schema = pq.read_schema(pa.BufferReader(body))
    assert [field_id(x) for x in schema] == [1, 2, 3]
    pf = pq.ParquetFile(pa.BufferReader(body))
    assert "field_id=6" in str(pf.schema)  # the nested list element too


def test_an_unchanged_table_reencodes_byte_identical(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 10))
    raw = encode_manifest(t.manifest.manifest)
    assert b"schemas" not in raw and b"schema_id" not in raw and b"last_column_id" not in raw
    assert encode_manifest(decode_manifest(raw)) == raw


def test_an_evolved_manifest_is_format_3_and_an_unevolved_one_stays_2(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 5))
    assert json.loads(encode_manifest(t.manifest.manifest))["format_version"] == 2
    t.update_schema().add_column("country", pa.string()).commit()
    t.append(rows(5, 5), schema_mode="merge")  # later commits keep format 3
    for v in (t.version - 1, t.version):
        m = lethe.Table.open(table_uri, version=v).manifest
        raw = encode_manifest(m.manifest)
        assert json.loads(raw)["format_version"] == 3 and m.format_version == 3
        assert encode_manifest(decode_manifest(raw)) == raw
    # an evolved manifest labelled format 2 (what a Lethe reading 1 and 2 expects) is refused
    obj = json.loads(raw)
    with pytest.raises(errors.CorruptManifest, match="schema history is format 3"):
        decode_manifest(json.dumps({**obj, "format_version": 2}).encode())


def test_a_lethe_that_reads_up_to_format_2_refuses_an_evolved_table_by_version(
    table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a Lethe from before schema evolution does with an evolved table: refuse it as
    too new (it would read files by name), while an unevolved table stays readable to it."""
    from lethe.catalog import manifest

    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    plain = encode_manifest(t.manifest.manifest)
    t.update_schema().rename_column("payload", "body").commit()
    evolved = encode_manifest(lethe.Table.open(table_uri).manifest.manifest)
    monkeypatch.setattr(manifest, "READABLE_VERSIONS", (1, 2))
    assert decode_manifest(plain).format_version == 2
    with pytest.raises(errors.UnsupportedFormat, match=r"format version 3 is newer .*\(max 2\)"):
        decode_manifest(evolved)


@pytest.mark.parametrize("version", [5, 17])  # 4: the lineage (issue 39)
def test_a_manifest_of_a_future_format_asks_for_a_newer_lethe(table_uri: str, version: int) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    obj = json.loads(encode_manifest(t.manifest.manifest))
    raw = json.dumps({**obj, "format_version": version, "something_new": 1}).encode()
    with pytest.raises(
        errors.UnsupportedFormat,
        match=rf"format version {version} is newer than this Lethe reads \(max 4\): upgrade Lethe",
    ):
        decode_manifest(raw)


def test_update_schema_adds_drops_renames_widens_in_one_commit(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 20))
    v = t.version
    with t.update_schema() as u:
        u.add_column("country", pa.string())
        u.add_column("tier", pa.int32(), default=3)
        u.widen_column("customer_id", pa.int64())
        u.widen_column("amount", pa.float64())
        u.widen_column("day", pa.timestamp("us"))
        u.widen_column("price", pa.decimal128(12, 2))
        u.rename_column("payload", "body")
        u.drop_column("legacy")
    assert t.version == v + 1
    assert t.manifest.operation.kind == "schema"
    hist = t.schema_history
    assert [sid for sid, _ in hist] == [0, 1]
    assert t.manifest.manifest.current_schema_id == 1
    assert t.manifest.manifest.last_column_id == 9
    assert {f.name: field_id(f) for f in t.schema} == {
        "id": 1,
        "customer_id": 2,
        "amount": 3,
        "body": 4,
        "day": 6,
        "price": 7,
        "country": 8,
        "tier": 9,
    }
    new = pa.table(
        {
            "id": [100],
            "customer_id": [2**40],
            "amount": [1.5],
            "body": ["b"],
            "day": [dt.datetime(2024, 5, 1, 12)],
            "price": [decimal.Decimal("1234567.89")],
            "country": ["NL"],
            "tier": [1],
        },
        schema=t.schema,
    )
    t.append(new)
    got = by_id(lethe.Table.open(table_uri).scan())
    assert len(got) == 21
    assert got[0] == {
        "id": 0,
        "customer_id": 0,
        "amount": 0.0,
        "body": "p0",
        "day": dt.datetime(2024, 1, 1),
        "price": decimal.Decimal("0.00"),
        "country": None,
        "tier": 3,
    }
    assert got[-1]["customer_id"] == 2**40 and got[-1]["tier"] == 1
    # filters on renamed, widened and new columns, pruning by each file's own type
    t2 = lethe.Table.open(table_uri)
    assert [r["id"] for r in t2.scan(filters=[("body", "=", "p5")]).to_pylist()] == [5]
    assert t2.scan(filters=[("customer_id", ">", 2**31)]).column("id").to_pylist() == [100]
    assert sorted(
        t2.scan(filters=[("day", ">=", dt.datetime(2024, 1, 19))]).column("id").to_pylist()
    ) == [
        18,
        19,
        100,
    ]
    assert t2.scan(filters=[("tier", "=", 3)]).num_rows == 20
    assert t2.scan(filters=[("country", "=", "NL")]).column("id").to_pylist() == [100]
    # time travel reads an old snapshot with its own schema
    old = lethe.Table.open(table_uri, version=v)
    assert old.schema.names == SCHEMA.names
    assert old.scan().num_rows == 20 and old.scan().schema.field("customer_id").type == pa.int32()


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        (lambda u: u.widen_column("amount", pa.int64()), "not a widening"),
        (lambda u: u.widen_column("price", pa.decimal128(5, 2)), "not a widening"),
        (lambda u: u.widen_column("payload", pa.large_string()), "not a widening"),
        (lambda u: u.drop_column("id"), "key column"),
        (lambda u: u.widen_column("id", pa.float64()), "key column"),
        (lambda u: u.rename_column("id", "pk"), "key column"),
        (lambda u: u.add_column("payload", pa.string()), "exists"),
        (lambda u: u.rename_column("payload", "legacy"), "exists"),
        (lambda u: u.drop_column("nope"), "no such column"),
        (lambda u: u.drop_column("customer_id"), "drop the index first"),
        (lambda u: u.add_column("bad", pa.int32(), default="x"), "initial default"),
    ],
)
def test_refused_changes_name_the_column_and_rule(table_uri: str, change: Any, rule: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id", indexes=("customer_id",))
    v = t.version
    with pytest.raises(errors.SchemaEvolutionError, match=rule), t.update_schema() as u:
        change(u)
    assert issubclass(errors.SchemaEvolutionError, errors.InvalidRequest)
    assert lethe.Table.open(table_uri).version == v  # nothing committed


def test_a_dropped_name_is_not_reused(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.update_schema().drop_column("legacy").commit()
    with pytest.raises(errors.SchemaEvolutionError, match=r"'legacy'.*earlier schema"):
        t.update_schema().add_column("legacy", pa.int64()).commit()


def test_renaming_an_indexed_column_keeps_its_index(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id", indexes=("customer_id",))
    t.append(rows(0, 50))
    t.update_schema().rename_column("customer_id", "cust").commit()
    assert t.indexes == ("cust",)
    t.append(
        rows(50, 10)
        .rename_columns([*SCHEMA.names])
        .rename_columns(["id", "cust", "amount", "payload", "legacy", "day", "price"])
    )
    got = lethe.Table.open(table_uri).scan(filters=[("cust", "=", 3)])
    assert sorted(got.column("id").to_pylist()) == [i for i in range(60) if i % 7 == 3]


def test_append_with_an_old_schema_rebases_onto_an_update(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 5))
    stale = lethe.Table.open(table_uri)
    t.update_schema().add_column("country", pa.string()).rename_column("payload", "body").commit()
    stale.append(rows(5, 5))  # written under schema 0, committed after schema 1
    fresh = lethe.Table.open(table_uri)
    assert {f.schema_id or 0 for f in fresh.manifest.files} == {0}
    got = by_id(fresh.scan())
    assert [r["body"] for r in got] == [f"p{i}" for i in range(10)]
    assert all(r["country"] is None for r in got)


def test_merge_mode_evolves_and_strict_lists_every_difference(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 5))
    wide = rows(5, 3)
    wide = wide.set_column(1, "customer_id", wide.column("customer_id").cast(pa.int64()))
    wide = wide.append_column("country", pa.array(["NL", "DE", None]))
    with pytest.raises(errors.SchemaMismatch, match=r"unknown columns \['country'\].*customer_id"):
        t.append(wide)
    v = t.version
    t.append(wide, schema_mode="merge")
    assert t.version == v + 1  # issue 38 item 4: the schema change and the rows, one commit
    op = t.manifest.operation
    assert (op.kind, op.rows_added, op.params["schema_add"], op.params["schema_widen"]) == (
        "append",
        3,
        1,
        1,
    )
    assert t.schema.field("customer_id").type == pa.int64()
    got = by_id(lethe.Table.open(table_uri).scan())
    assert [r["country"] for r in got] == [None] * 5 + ["NL", "DE", None]
    # narrower data into a wider table is widened; other differences refused, all listed
    t.append(rows(8, 2), schema_mode="merge")
    assert lethe.Table.open(table_uri).scan().num_rows == 10
    bad = rows(10, 1).set_column(2, "amount", pa.array(["x"]))
    bad = bad.set_column(3, "payload", pa.array([1]))
    with pytest.raises(errors.SchemaMismatch, match=r"amount.*payload"):
        t.append(bad, schema_mode="merge")


def test_compaction_merges_files_of_every_schema(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 10))
    t.update_schema().widen_column("customer_id", pa.int64()).add_column("c", pa.string()).commit()
    t.append(rows(10, 10), schema_mode="merge")
    before = by_id(lethe.Table.open(table_uri).scan())
    t = lethe.Table.open(table_uri)
    t.compact()
    after = lethe.Table.open(table_uri)
    assert after.manifest.file_count == 1
    assert {f.schema_id for f in after.manifest.files} == {1}
    assert by_id(after.scan()) == before


def test_field_id_metadata_key() -> None:
    assert FIELD_ID == b"PARQUET:field_id"


# --- property: random evolutions interleaved with appends, read back as a model predicts ----
WIDER = {"int32": "int64", "float32": "float64", "date32": "timestamp"}
ARROW = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
    "date32": pa.date32(),
    "timestamp": pa.timestamp("us"),
}


def _value(kind: str, cid: int, key: int) -> Any:
    if (key + cid) % 5 == 0:
        return None
    n = key * 7 + cid
    if kind in ("int32", "int64"):
        return n
    if kind in ("float32", "float64"):
        return n / 4  # exact in float32
    if kind in ("date32", "timestamp"):
        d = dt.date(2024, 1, 1) + dt.timedelta(days=n % 400)
        return d if kind == "date32" else dt.datetime(d.year, d.month, d.day)
    return f"v{n}"


def _widened(v: Any, kind: str) -> Any:
    return dt.datetime(v.year, v.month, v.day) if kind == "timestamp" and type(v) is dt.date else v


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_evolutions_read_back_as_the_model_predicts(bucket: str, data: Any) -> None:
    uri = f"s3://{bucket}/prop/{uuid.uuid4().hex[:8]}"
    # the model: current columns (id -> [name, kind, default]) and rows (column id -> value)
    cols: dict[int, list[Any]] = {1: ["id", "int64", None], 2: ["a", "int32", None]}
    cols[3] = ["b", "float32", None]
    cols[4] = ["c", "date32", None]
    t = lethe.Table.create(
        uri,
        pa.schema(
            [("id", pa.int64(), False), ("a", pa.int32()), ("b", pa.float32()), ("c", pa.date32())]
        ),
        key="id",
    )
    rows_: list[dict[int, Any]] = []
    next_id, next_key, used = 5, 0, {"id", "a", "b", "c"}
    steps = data.draw(
        st.lists(
            st.sampled_from(
                ["append", "merge", "add", "drop", "rename", "widen", "delete", "erase", "compact"]
            ),
            min_size=2,
            max_size=7,
        )
    )
    before: list[dict[str, Any]] = []
    for step in steps:
        v0 = lethe.Table.open(uri).version
        others = [cid for cid in cols if cid != 1]
        if step in ("append", "merge"):
            n = data.draw(st.integers(1, 4))
            keys = list(range(next_key, next_key + n))
            next_key += n
            present = (
                list(cols)
                if step == "append"
                else [1, *data.draw(st.lists(st.sampled_from(others), unique=True))]
                if others
                else [1]
            )
            mine = [c for c in cols if c in present]
            table = pa.table(
                [
                    pa.array(
                        [k if c == 1 else _value(cols[c][1], c, k) for k in keys], ARROW[cols[c][1]]
                    )
                    for c in mine
                ],
                schema=pa.schema(
                    [pa.field(cols[c][0], ARROW[cols[c][1]], nullable=c != 1) for c in mine]
                ),
            )
            t.append(table, schema_mode="merge" if step == "merge" else "strict")
            rows_ += [  # a column of the schema the data lacks is null (no default)
                {
                    c: (k if c == 1 else _value(cols[c][1], c, k)) if c in present else None
                    for c in cols
                }
                for k in keys
            ]
        elif step == "add":
            kind = data.draw(st.sampled_from(["int32", "string", "float32"]))
            default = data.draw(st.sampled_from([None, 1])) if kind == "int32" else None
            name = f"n{next_id}"
            t.update_schema().add_column(name, ARROW[kind], default=default).commit()
            cols[next_id] = [name, kind, default]
            used.add(name)
            next_id += 1
        elif step == "drop" and others:
            cid = data.draw(st.sampled_from(others))
            t.update_schema().drop_column(cols.pop(cid)[0]).commit()
        elif step == "rename" and others:
            cid = data.draw(st.sampled_from(others))
            new = f"r{len(used)}_{cid}"
            t.update_schema().rename_column(cols[cid][0], new).commit()
            cols[cid][0] = new
            used.add(new)
        elif step == "widen":
            can = [c for c in others if cols[c][1] in WIDER]
            if can:
                cid = data.draw(st.sampled_from(can))
                cols[cid][1] = WIDER[cols[cid][1]]
                t.update_schema().widen_column(cols[cid][0], ARROW[cols[cid][1]]).commit()
        elif step in ("delete", "erase") and rows_:
            gone = data.draw(st.sampled_from([r[1] for r in rows_]))
            (t.delete if step == "delete" else t.erase)([("id", "=", gone)])
            rows_ = [r for r in rows_ if r[1] != gone]
        elif step == "compact":
            t.compact()
        if step in ("add", "drop", "rename", "widen") and lethe.Table.open(uri).version > v0:
            was = lethe.Table.open(uri, version=v0)  # time travel: as it was, its own schema
            assert by_id(was.scan()) == before
        t = lethe.Table.open(uri)
        before = by_id(t.scan())
    fresh = lethe.Table.open(uri)
    raw = encode_manifest(fresh.manifest.manifest)  # format 3 exactly when evolved
    evolved = len(fresh.schema_history) > 1
    # format 4 once a splice recorded a lineage (issue 39), else 3 exactly when evolved
    lineage = fresh.manifest.manifest.lineage is not None
    assert json.loads(raw)["format_version"] == (4 if lineage else 3 if evolved else 2)
    assert encode_manifest(decode_manifest(raw)) == raw
    assert fresh.schema.names == [v[0] for v in cols.values()]
    assert [field_id(f) for f in fresh.schema] == list(cols)
    want = [
        {v[0]: (_widened(r[c], v[1]) if c in r else v[2]) for c, v in cols.items()} for r in rows_
    ]
    assert by_id(fresh.scan()) == sorted(want, key=lambda r: r["id"])
    # filters on every evolved column prune by each file's own statistics, never wrongly
    for c, (name, kind, _) in cols.items():
        if c == 1 or kind == "string":
            continue
        seen = [r[name] for r in want if r[name] is not None]
        if not seen:
            continue
        pivot = data.draw(st.sampled_from(seen))
        got = fresh.scan(["id"], filters=[(name, ">=", pivot)]).column("id").to_pylist()
        assert sorted(got) == sorted(
            r["id"] for r in want if r[name] is not None and r[name] >= pivot
        )


def _small_groups(uri: str) -> lethe.Table:
    """A table whose files have row groups of a few rows (splices cut between them)."""
    return lethe.Table.create(uri, SCHEMA, key="id", row_group_bytes=256)


def test_erasing_a_row_of_an_old_file_keeps_that_files_schema(table_uri: str, s3: Any) -> None:
    t = _small_groups(table_uri)
    t.append(rows(0, 40))
    with t.update_schema() as u:
        u.add_column("country", pa.string())
        u.rename_column("payload", "body")
        u.widen_column("customer_id", pa.int64())
    new = rows(40, 10).rename_columns(
        ["id", "customer_id", "amount", "body", "legacy", "day", "price"]
    )
    new = new.append_column("country", pa.array(["NL"] * 10))
    t.append(new, schema_mode="merge")
    before = by_id(lethe.Table.open(table_uri).scan())
    r = t.erase([("id", "in", [3, 45])])
    assert r.rows_erased == 2 and r.files_spliced == 2
    after = lethe.Table.open(table_uri)
    assert by_id(after.scan()) == [x for x in before if x["id"] not in (3, 45)]
    bucket, prefix = table_uri[5:].split("/", 1)
    for f in after.manifest.files:  # each spliced file keeps its own schema and ids
        body = s3.get_object(Bucket=bucket, Key=f"{prefix}/{f.path}")["Body"].read()
        names = pq.read_schema(pa.BufferReader(body)).names
        assert names == (SCHEMA.names if (f.schema_id or 0) == 0 else after.schema.names)
        assert ids_of(pq.read_schema(pa.BufferReader(body))) == ids_of(after.manifest.schema_of(f))
    assert {f.schema_id or 0 for f in after.manifest.files} == {0, 1}
    assert after.scan(filters=[("body", "=", "p3")]).num_rows == 0
    assert after.scan(filters=[("body", "=", "p4")]).column("id").to_pylist() == [4]


def ids_of(schema: pa.Schema) -> list[int | None]:
    return [field_id(f) for f in schema]


def test_delete_and_lookup_by_a_renamed_column_reach_old_files(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id", indexes=("payload",))
    t.append(rows(0, 20))
    t.update_schema().rename_column("payload", "body").rename_column("amount", "amt").commit()
    t.delete([("body", "in", ["p1", "p2"])])
    t.delete([("amt", "=", 2.5)])  # row 5
    got = lethe.Table.open(table_uri)
    assert sorted(got.scan().column("id").to_pylist()) == [
        i for i in range(20) if i not in (1, 2, 5)
    ]
    assert got.scan(filters=[("body", "=", "p7")]).column("amt").to_pylist() == [3.5]
    assert got.lookup(7, ["body"]).to_pylist() == [{"body": "p7"}]


def test_an_index_declared_after_a_rename_covers_old_files(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 20))
    t.update_schema().rename_column("payload", "body").commit()
    t.create_index("body")
    got = lethe.Table.open(table_uri)
    assert got.scan(filters=[("body", "=", "p9")]).column("id").to_pylist() == [9]
    r = got.erase([("body", "=", "p9")])
    assert r.rows_deleted == 1 and r.rows_erased == 1
    assert sorted(lethe.Table.open(table_uri).scan().column("id").to_pylist()) == [
        i for i in range(20) if i != 9
    ]


def test_the_cli_refuses_a_new_shape_then_merges_it(
    table_uri: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's scenario: upstream adds ``country`` and widens ``customer_id`` to int64;
    ``lethe append`` refuses it (nothing dropped or narrowed), ``--schema-mode merge`` takes it."""
    from lethe.cli import main

    lethe.Table.create(table_uri, SCHEMA, key="id")
    old, new = tmp_path / "old.parquet", tmp_path / "new.parquet"
    pq.write_table(rows(0, 5), old)
    shape = rows(5, 2).set_column(1, "customer_id", pa.array([2**40, 7], pa.int64()))
    pq.write_table(shape.append_column("country", pa.array(["NL", None])), new)
    assert main(["append", table_uri, str(old)]) == 0
    capsys.readouterr()
    assert main(["append", table_uri, str(new)]) == 2
    err = capsys.readouterr().err
    assert "country" in err and "customer_id" in err
    assert lethe.Table.open(table_uri).scan().num_rows == 5  # nothing appended
    assert main(["append", table_uri, str(new), "--schema-mode", "merge"]) == 0
    t = lethe.Table.open(table_uri)
    assert t.schema.field("customer_id").type == pa.int64() and "country" in t.schema.names
    got = by_id(t.scan(["id", "customer_id", "country"]))
    assert got[-2:] == [
        {"id": 5, "customer_id": 2**40, "country": "NL"},
        {"id": 6, "customer_id": 7, "country": None},
    ]
    assert [r["country"] for r in got[:5]] == [None] * 5
    # the old shape still appends in merge mode (widened, country null)
    again = tmp_path / "again.parquet"
    pq.write_table(rows(10, 3), again)
    assert main(["append", table_uri, str(again), "--schema-mode", "merge"]) == 0
    assert (
        lethe.Table.open(table_uri).scan(filters=[("id", ">=", 10)]).column("country").null_count
        == 3
    )


def test_the_iceberg_view_follows_every_schema(aws: Any, table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 10))
    v1, uri1 = t.version, t.publish_iceberg()
    with t.update_schema() as u:
        evolve(u)
    new = rows(10, 3).rename_columns(
        ["id", "customer_id", "amount", "body", "legacy", "day", "price"]
    )
    new = new.drop_columns(["legacy"]).append_column("country", pa.array(["NL", None, "DE"]))
    t.append(new, schema_mode="merge")
    t.delete([("id", "=", 2)])
    uri2 = t.publish_iceberg()
    view = iceberg_view(aws, uri2)
    md = view.metadata
    assert md.current_schema_id == 1 and [s.schema_id for s in md.schemas] == [0, 1]
    assert {s.snapshot_id: s.schema_id for s in md.snapshots}[v1] == 0
    assert md.snapshots[-1].schema_id == 1
    assert [(f.field_id, f.name) for f in view.schema().fields] == [
        (1, "id"),
        (2, "customer_id"),
        (3, "amount"),
        (4, "body"),
        (6, "day"),
        (7, "price"),
        (8, "country"),
    ]
    got = sorted(view.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert got == by_id(lethe.Table.open(table_uri).scan())
    assert [r["country"] for r in got][-3:] == ["NL", None, "DE"] and len(got) == 12
    old = view.scan(snapshot_id=v1).to_arrow()
    assert old.column_names == SCHEMA.names and old.num_rows == 10
    assert iceberg_view(aws, uri1).metadata.current_schema_id == 0


def test_verify_deep_and_register_after_evolution(table_uri: str, s3: Any) -> None:
    from lethe.audit.verify import verify
    from lethe.ingest.register import register_parquet

    t = lethe.Table.create(table_uri, SCHEMA, key="id", indexes=("payload",), row_group_bytes=256)
    t.append(rows(0, 30))
    with t.update_schema() as u:
        u.rename_column("payload", "body")
        u.widen_column("day", pa.timestamp("us"))
        u.add_column("country", pa.string())
    # a foreign file (no field ids) in the new shape, registered under schema 1
    shape = rows(30, 4).rename_columns(
        ["id", "customer_id", "amount", "body", "legacy", "day", "price"]
    )
    shape = shape.set_column(5, "day", shape.column("day").cast(pa.timestamp("us")))
    shape = shape.append_column("country", pa.array(["NL"] * 4))
    buf = pa.BufferOutputStream()
    pq.write_table(shape, buf)
    bucket = table_uri[5:].split("/", 1)[0]
    s3.put_object(Bucket=bucket, Key="incoming/new.parquet", Body=buf.getvalue().to_pybytes())
    register_parquet(t, "incoming/new.parquet")
    t = lethe.Table.open(table_uri)
    assert {f.schema_id or 0 for f in t.manifest.files} == {0, 1}
    t.erase([("body", "in", ["p3", "p31"])])
    t = lethe.Table.open(table_uri)
    got = by_id(t.scan())
    assert [r["id"] for r in got] == [i for i in range(34) if i not in (3, 31)]
    assert [r["country"] for r in got if r["id"] >= 30] == ["NL"] * 3
    assert t.scan(filters=[("body", "=", "p32")]).column("id").to_pylist() == [32]
    report = verify(t, deep=True)
    assert report.ok, report.problems
    assert report.index_entries_checked == 32


def test_a_lookup_in_an_old_file_still_reads_pages(table_uri: str) -> None:
    """A filter whose columns a file holds as written keeps page-level reads after the
    schema evolved: the same requests and bytes as before the evolution."""
    big = pa.table(
        {
            "id": pa.array(range(200_000), pa.int64()),
            "customer_id": pa.array([i % 977 for i in range(200_000)], pa.int32()),
            "payload": [f"payload-{i:09d}" for i in range(200_000)],
        }
    )
    t = lethe.Table.create(table_uri, big.schema, key="id")
    t.append(big)

    def cost(t: lethe.Table) -> tuple[int, int, list[dict[str, Any]]]:
        t.lookup(1)  # the footer and page index cached
        before = t.io
        got = t.lookup(123_456).to_pylist()
        d = t.io - before
        return d.count("get"), d.bytes_downloaded, got

    gets, down, got = cost(lethe.Table.open(table_uri))
    with t.update_schema() as u:
        u.widen_column("customer_id", pa.int64())
        u.rename_column("payload", "body")
        u.add_column("country", pa.string())
    gets2, down2, got2 = cost(lethe.Table.open(table_uri))
    assert got2 == [
        {"id": 123_456, "customer_id": 123_456 % 977, "body": "payload-000123456", "country": None}
    ]
    assert got[0]["payload"] == got2[0]["body"]
    assert (gets2, down2) == (gets, down)
    assert down < 2 << 20  # pages, not the whole row group


def test_a_concurrent_schema_change_that_breaks_a_rule_is_refused(table_uri: str) -> None:
    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    t.append(rows(0, 5))
    stale = lethe.Table.open(table_uri)
    t.update_schema().drop_column("legacy").commit()
    with pytest.raises(errors.SchemaEvolutionError, match="'legacy': no such column"):
        stale.update_schema().rename_column("legacy", "old").commit()
    stale.update_schema().add_column("country", pa.string()).commit()  # rebased: both kept
    got = lethe.Table.open(table_uri)
    assert "legacy" not in got.schema.names and "country" in got.schema.names
    assert [sid for sid, _ in got.schema_history] == [0, 1, 2]


def test_files_without_ids_map_by_name_through_the_history(
    aws: Any, table_uri: str, s3: Any
) -> None:
    """Files another writer made without field ids (and Lethe's before ids existed) read
    by the names of the schema they were registered under, in Lethe and in the Iceberg view."""

    from lethe.ingest.register import register_parquet

    t = lethe.Table.create(table_uri, SCHEMA, key="id")
    buf = pa.BufferOutputStream()
    pq.write_table(rows(0, 6), buf)
    assert field_id(pq.read_schema(pa.BufferReader(buf.getvalue())).field("id")) is None
    bucket = table_uri[5:].split("/", 1)[0]
    s3.put_object(Bucket=bucket, Key="incoming/old.parquet", Body=buf.getvalue().to_pybytes())
    register_parquet(t, "incoming/old.parquet")
    t = lethe.Table.open(table_uri)
    with t.update_schema() as u:
        u.rename_column("payload", "body")
        u.widen_column("amount", pa.float64())
        u.drop_column("legacy")
    got = by_id(lethe.Table.open(table_uri).scan(["id", "amount", "body"]))
    assert got == [{"id": i, "amount": i / 2, "body": f"p{i}"} for i in range(6)]
    view = iceberg_view(aws, t.publish_iceberg())
    seen = sorted(
        view.scan(selected_fields=("id", "amount", "body")).to_arrow().to_pylist(),
        key=lambda r: r["id"],
    )
    assert seen == got


def test_the_schema_commands(table_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    from lethe.cli import main

    lethe.Table.create(table_uri, SCHEMA, key="id")
    assert main(["schema", "add", table_uri, "tier", "int32", "--default", "3"]) == 0
    assert main(["schema", "rename", table_uri, "payload", "body"]) == 0
    assert main(["schema", "widen", table_uri, "price", "decimal(12, 2)"]) == 0
    assert main(["schema", "drop", table_uri, "legacy"]) == 0
    assert main(["schema", "widen", table_uri, "amount", "int64"]) == 2
    assert "'amount': float -> int64 is not a widening" in capsys.readouterr().err
    assert main(["schema", "show", table_uri, "--history"]) == 0
    out = capsys.readouterr().out
    assert "schema 0 of" in out and "schema 4 (current)" in out
    assert "     4  body: string" in out and "tier: int32 default=3" in out
    assert "     7  price: decimal128(12, 2)" in out
    t = lethe.Table.open(table_uri)
    assert [sid for sid, _ in t.schema_history] == [0, 1, 2, 3, 4]
    assert "legacy" not in t.schema.names
