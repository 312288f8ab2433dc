"""``lethe append`` never drops a column, narrows a value or shows a traceback: it appends
everything exactly, or refuses with a SchemaMismatch naming every differing column (moto)."""

from __future__ import annotations

import io
import json
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import lethe
from lethe.cli import main


def _append(uri: str, src: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["-q", "append", uri, src])
    got = capsys.readouterr()
    return rc, got.out, got.err


def test_extra_column_and_wider_type_are_refused_listing_both(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 10))
    wide = events(10, 1).append_column("country", pa.array(["NL"]))
    wide = wide.set_column(2, "customer_id", pa.array([3_000_000_000], pa.int64()))
    src = tmp_path / "wide.parquet"
    pq.write_table(wide, src)
    rc, out, err = _append(table_uri, str(src), capsys)
    assert rc == 2 and out == ""
    assert err.startswith("lethe: SchemaMismatch:")
    assert "unknown columns ['country']" in err
    assert "column 'customer_id' is int64, the table has int32 (a narrowing)" in err
    assert "Traceback" not in err and "3000000000" not in err
    assert lethe.Table.open(table_uri).version == t.version  # nothing committed


def test_widening_is_cast_exactly(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = pa.schema([("id", pa.int64(), False), ("x", pa.float64()), ("s", pa.large_string())])
    lethe.Table.create(table_uri, schema, key="id")
    src = tmp_path / "narrow.parquet"
    pq.write_table(
        pa.table(
            {
                "id": pa.array([1, 2], pa.int32()),
                "x": pa.array([1.5, None], pa.float32()),
                "s": pa.array(["a", "b"]).dictionary_encode(),
            }
        ),
        src,
    )
    rc, out, err = _append(table_uri, str(src), capsys)
    assert (rc, err) == (0, "") and "appended 2 rows" in out
    got = lethe.Table.open(table_uri).scan().sort_by("id")
    assert got.schema.equals(schema) and got.to_pylist() == [
        {"id": 1, "x": 1.5, "s": "a"},
        {"id": 2, "x": None, "s": "b"},
    ]


def test_s3_prefix_of_mixed_schemas_lists_every_file(
    table_uri: str, bucket: str, s3: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")

    def put(key: str, tbl: pa.Table) -> None:
        buf = io.BytesIO()
        pq.write_table(tbl, buf)
        s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())

    put("raw/a/part-0.parquet", events(0, 5))
    big = events(5, 5).set_column(2, "customer_id", pa.array([3_000_000_000] * 5, pa.int64()))
    put("raw/a/part-1.parquet", big)
    put("raw/a/part-2.parquet", events(10, 5).drop_columns(["payload"]))
    s3.put_object(Bucket=bucket, Key="raw/a/_SUCCESS", Body=b"")
    rc, _, err = _append(table_uri, f"s3://{bucket}/raw/a/", capsys)
    assert rc == 2 and "Traceback" not in err and "ArrowInvalid" not in err
    assert "2 of 3 input files do not fit" in err
    assert "part-1.parquet: column 'customer_id' is int64" in err
    assert "part-2.parquet: missing columns ['payload']" in err
    assert lethe.Table.open(table_uri).version == t.version
    # the good file alone goes in, exactly
    rc, out, err = _append(table_uri, f"s3://{bucket}/raw/a/part-0.parquet", capsys)
    assert rc == 0 and "appended 5 rows" in out
    assert lethe.Table.open(table_uri).scan().sort_by("id").equals(events(0, 5))


def test_a_folder_of_csv_and_jsonl_goes_in_one_commit(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    d = tmp_path / "in"
    d.mkdir()
    pacsv.write_csv(events(0, 50), d / "a.csv")
    rows = events(50, 20).to_pylist()
    (d / "b.jsonl").write_text(
        "".join(json.dumps({**r, "event_time": r["event_time"].isoformat()}) + "\n" for r in rows)
    )
    (d / "_SUCCESS").write_text("")
    rc, out, err = _append(table_uri, str(d), capsys)
    assert (rc, err) == (0, "") and "appended 70 rows" in out
    t.refresh()
    assert t.version == 1 and t.scan().sort_by("id").equals(events(0, 70))


def test_csv_values_that_do_not_fit_are_counted_never_quoted(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    src = tmp_path / "bad.csv"
    src.write_text(
        "id,event_time,customer_id,payload\n"
        "1,2026-01-01T00:00:00Z,7,a\n"
        "2,2026-01-01T00:00:00Z,3000000000,b\n"
        "3,2026-01-01T00:00:00Z,secret-person@example.com,c\n"
        ",2026-01-01T00:00:00Z,8,d\n"
    )
    rc, _, err = _append(table_uri, str(src), capsys)
    assert rc == 2 and err.startswith("lethe: SchemaMismatch:")
    assert "column 'customer_id': values that do not convert to int32: 2 rows (rows 1, 2)" in err
    assert "column 'id': required but missing: 1 row (row 3)" in err
    assert "secret-person" not in err and "3000000000" not in err
    assert lethe.Table.open(table_uri).version == t.version


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_every_bad_column_of_a_row_is_listed(
    table_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    """Issue 36 item 6: a row with several values that do not fit lists every column, not only
    the first (values never quoted)."""
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    if fmt == "jsonl":
        src = tmp_path / "bad.jsonl"
        good = {"id": 1, "event_time": "2026-01-01T00:00:00Z", "customer_id": 7, "payload": "a"}
        bad = {"id": "x-secret", "event_time": "never", "customer_id": "y-secret", "zz": 1}
        src.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    else:
        src = tmp_path / "bad.csv"
        src.write_text(
            "id,event_time,customer_id,payload\n1,2026-01-01T00:00:00Z,7,a\n"
            "x-secret,never,y-secret,b\n"
        )
    rc, _, err = _append(table_uri, str(src), capsys)
    assert rc == 2 and err.startswith("lethe: SchemaMismatch:")
    where = "row 1"
    for col, to in (("id", "int64"), ("event_time", "timestamp"), ("customer_id", "int32")):
        assert f"column '{col}': values that do not convert to {to}" in err, err
    assert err.count(where) == (4 if fmt == "jsonl" else 3), err
    if fmt == "jsonl":
        assert "unknown column 'zz' (not in the table schema): 1 row (row 1)" in err
    assert "secret" not in err and "never" not in err
    assert lethe.Table.open(table_uri).version == t.version


# --- property: whatever file a user offers, all of it goes in exactly, or an error says why ----
TABLE = pa.schema(
    [
        ("id", pa.int64(), False),
        ("n", pa.int32()),
        ("x", pa.float64()),
        ("s", pa.string()),
    ]
)
COLUMN_TYPES: dict[str, list[pa.DataType]] = {
    "id": [pa.int64(), pa.int32(), pa.int8(), pa.string(), pa.float64()],
    "n": [pa.int32(), pa.int64(), pa.int16(), pa.uint32(), pa.string(), pa.null()],
    "x": [pa.float64(), pa.float32(), pa.int32(), pa.int64(), pa.string()],
    "s": [pa.string(), pa.large_string(), pa.int64(), pa.binary()],
    "extra": [pa.string(), pa.int64(), pa.null()],
}


def _values(t: pa.DataType, n: int) -> st.SearchStrategy[list[Any]]:
    if pa.types.is_null(t):
        return st.just([None] * n)
    if pa.types.is_integer(t):
        lo = 0 if pa.types.is_unsigned_integer(t) else -(1 << (t.bit_width - 1))
        hi = (1 << (t.bit_width - 1 if pa.types.is_signed_integer(t) else t.bit_width)) - 1
        edge = st.sampled_from([v for v in (lo, hi, 0, 1, 2**31, -(2**31) - 1) if lo <= v <= hi])
        return st.lists(st.one_of(edge, st.integers(lo, hi), st.none()), min_size=n, max_size=n)
    if pa.types.is_floating(t):
        f = st.floats(allow_nan=False, width=t.bit_width)
        return st.lists(st.one_of(f, st.none()), min_size=n, max_size=n)
    if pa.types.is_binary(t):
        return st.lists(st.one_of(st.binary(max_size=4), st.none()), min_size=n, max_size=n)
    txt = st.one_of(st.text(max_size=6), st.sampled_from(["7", "3000000000", "1.5", "x"]))
    return st.lists(st.one_of(txt, st.none()), min_size=n, max_size=n)


@st.composite
def offered(draw: st.DrawFn) -> tuple[pa.Table, str]:
    n = draw(st.integers(0, 6))
    others = [c for c in COLUMN_TYPES if c != "id"]
    names = draw(
        st.one_of(
            st.lists(st.sampled_from(others), max_size=4, unique=True),
            st.just(["n", "x", "s"]),  # every table column
        )
    )
    if draw(st.integers(0, 9)) < 8:  # mostly with the key, mostly fitting (as users' files are)
        names = ["id", *names]
    cols = {}
    for name in names or ["extra"]:
        t = draw(st.sampled_from(COLUMN_TYPES[name]))
        if name == "id" and pa.types.is_integer(t) and draw(st.booleans()):
            values: list[Any] = list(range(n))  # a valid key column
        else:
            values = draw(_values(t, n))
        cols[name] = pa.array(values, type=t)
    return pa.table(cols), draw(st.sampled_from(["parquet", "csv"]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (a != a and b != b)
    return bool(a == b)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=offered())
def test_append_is_exact_or_refused_never_a_traceback(
    bucket: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], data: tuple[pa.Table, str]
) -> None:
    tbl, fmt = data
    uri = f"s3://{bucket}/prop/{uuid.uuid4().hex[:8]}"
    t = lethe.Table.create(uri, TABLE, key="id")
    src = tmp_path / f"{uuid.uuid4().hex[:6]}.{fmt}"
    if fmt == "parquet":
        pq.write_table(tbl, src)
    else:
        if any(pa.types.is_binary(c.type) for c in tbl.columns):
            tbl = tbl.drop_columns([f.name for f in tbl.schema if pa.types.is_binary(f.type)])
            if not tbl.num_columns:
                return
        pacsv.write_csv(tbl, src)
    rc = main(["-q", "append", uri, str(src)])  # an exception here is the traceback a user sees
    got = capsys.readouterr()
    after = lethe.Table.open(uri)
    event("refused" if rc else "appended")
    if rc != 0:
        assert rc == 2 and got.err.startswith("lethe: ") and "Traceback" not in got.err
        assert after.version == t.version, "a refused append commits nothing"
        return
    # accepted: every offered column is a table column and every value arrived exactly
    assert set(tbl.column_names) <= set(TABLE.names)
    rows = after.scan().to_pylist()
    # what the file holds: Parquet as written; CSV as text (an unquoted empty field is null,
    # a quoted one the empty string; a one-column CSV's null row is an empty line, skipped)
    if fmt == "parquet":
        back = pq.read_table(src)
    else:
        back = pacsv.read_csv(
            src,
            convert_options=pacsv.ConvertOptions(
                column_types={c: pa.string() for c in tbl.column_names},
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    assert len(rows) == back.num_rows
    offered_rows = back.to_pylist()
    key = sorted(range(len(rows)), key=lambda i: rows[i]["id"])
    want = sorted(range(len(offered_rows)), key=lambda i: int(offered_rows[i]["id"]))
    for i, j in zip(key, want, strict=True):
        for name, v in offered_rows[j].items():
            w = rows[i][name]
            if v is None or w is None or fmt == "parquet" or isinstance(w, str):
                assert _same(w, v), (name, v, w)
            else:  # CSV text into a number column: the number that text spells
                assert _same(type(w)(v), w), (name, v, w)


def test_every_path_that_takes_data_names_every_differing_column(
    table_uri: str, bucket: str, s3: Any
) -> None:
    """The API and direct registration refuse the same file the CLI refuses, naming both."""
    from lethe.errors import SchemaMismatch
    from lethe.ingest import register_parquet

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    wide = events(0, 3).append_column("country", pa.array(["NL"] * 3))
    wide = wide.set_column(2, "customer_id", pa.array([1, 2, 3_000_000_000], pa.int64()))
    with pytest.raises(SchemaMismatch) as api:
        t.append(wide)
    buf = io.BytesIO()
    pq.write_table(wide, buf)
    s3.put_object(Bucket=bucket, Key="uploads/wide.parquet", Body=buf.getvalue())
    with pytest.raises(SchemaMismatch) as reg:
        register_parquet(t, "uploads/wide.parquet", bucket=bucket)
    for e in (api.value, reg.value):
        assert "country" in str(e) and "customer_id" in str(e)
    assert lethe.Table.open(table_uri).version == t.version == 0
