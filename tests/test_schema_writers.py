"""The writer matrix of issue 27: Parquet files written by pyarrow, DuckDB, polars (and
Spark, in the slow test), with and without ``PARQUET:field_id``, under the old and the new
schema of one table, registered (``register_parquet(schema_mode="merge")``, ``lethe append
--evolve``), erased (row-group and page-level splices) and read back by every reader:
``t.scan()``/``lookup``, PyIceberg and polars through the Iceberg view, ``verify --deep``,
and the byte audit of the bucket after GC past the grace. Daft 0.7 refuses the view's files
without ids (it applies no name mapping yet): asserted as a refusal, never a misread.

DuckDB reads no Iceberg view here: its ``iceberg`` extension is not installed and cannot be
downloaded offline (``INSTALL iceberg`` fails to connect); it is a writer only.

Schema 0 is ``id`` int64, ``customer_id`` int32, ``payload`` string; schema 1 renames
``payload`` to ``body``; the merge of the first new-shape file adds ``country`` and widens
``customer_id`` to int64 (schema 2). A file without ids is read by name, through the name
mapping in the view: a file that still says ``payload`` is column 3 (``body``) by the
mapping's alias, as Iceberg's name mapping keeps every name a column had.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lethe
from devtools.audit import Needle, audit_bucket
from lethe import errors
from lethe.audit.verify import verify
from lethe.catalog.schemas import FIELD_ID, field_id
from lethe.gc import collect
from lethe.ingest.register import register_parquet
from tests.engines import iceberg_view

CUSTOMER = 4242  # the person erased: rows in files of every writer and both shapes
SCHEMA0 = pa.schema(
    [("id", pa.int64(), False), ("customer_id", pa.int32()), ("payload", pa.string())]
)
NEW = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int64()),
        ("body", pa.string()),
        ("country", pa.string()),
    ]
)
IDS = {"id": 1, "customer_id": 2, "payload": 3, "body": 3, "country": 4}
ROWS, GROUP = 30, 10  # rows per file, rows per row group (where the writer takes it)
# the customer's rows: two inside the first group (page-level), all of the last group
MINE = {2, 7, *range(20, 30)}

Row = dict[str, Any]


def shape_rows(n: int, *, new: bool, payload: str = "payload") -> tuple[pa.Table, list[Row]]:
    """File ``n``'s rows in the old (``new=False``) or the new shape, and the rows the
    table must read for them (current names and types)."""
    ids = list(range(n * 100, n * 100 + ROWS))
    cust = [CUSTOMER if i % 100 in MINE else (2**33 + i if new and i % 2 else i % 50) for i in ids]
    text = [f"secret-{i}" if c == CUSTOMER else f"w{n}-{i}" for i, c in zip(ids, cust, strict=True)]
    country = [("NL" if i % 3 else None) for i in ids] if new else [None] * ROWS
    if new:
        t = pa.table([ids, cust, text, country], schema=NEW.set(2, NEW.field(2).with_name(payload)))
    else:
        t = pa.table([ids, cust, text], schema=SCHEMA0)
    want = [
        {"id": i, "customer_id": c, "body": b, "country": k}
        for i, c, b, k in zip(ids, cust, text, country, strict=True)
    ]
    return t, want


def with_ids(t: pa.Table) -> pa.Table:
    """``t`` with the table's field ids in its schema (pyarrow writes them to the file)."""
    fields = [f.with_metadata({FIELD_ID: str(IDS[f.name]).encode()}) for f in t.schema]
    return t.cast(pa.schema(fields))


def write_pyarrow(t: pa.Table, path: Path, ids: bool) -> None:
    pq.write_table(
        with_ids(t) if ids else t,
        path,
        row_group_size=GROUP,
        data_page_size=32,
        write_batch_size=2,
        use_dictionary=False,
        write_page_index=True,  # small pages with an offset index: page-level splices
    )


def write_duckdb(t: pa.Table, path: Path, ids: bool) -> None:
    con = duckdb.connect()
    con.register("src", t)
    opts = "FORMAT parquet, ROW_GROUP_SIZE 10"
    if ids:
        opts += ", FIELD_IDS {" + ", ".join(f"{n}: {IDS[n]}" for n in t.column_names) + "}"
    con.execute(f"COPY (SELECT * FROM src ORDER BY id) TO '{path}' ({opts})")
    con.close()


def write_polars(t: pa.Table, path: Path, ids: bool) -> None:
    assert not ids  # polars writes no field ids
    df = pl.from_arrow(t)
    assert isinstance(df, pl.DataFrame)
    df.write_parquet(path, row_group_size=GROUP)


Writer = Callable[[pa.Table, Path, bool], None]
WRITERS: dict[str, Writer] = {"pyarrow": write_pyarrow, "duckdb": write_duckdb}
CASES: list[tuple[str, Writer, bool]] = [
    ("pyarrow+ids", write_pyarrow, True),
    ("pyarrow", write_pyarrow, False),
    ("duckdb+ids", write_duckdb, True),
    ("duckdb", write_duckdb, False),
    ("polars", write_polars, False),
]


def file_ids(path: Path) -> list[int | None]:
    return [field_id(f) for f in pq.read_schema(path)]


class Lake:
    """One table, its uploads and the rows it must read."""

    def __init__(self, uri: str, bucket: str, s3: Any, tmp: Path) -> None:
        self.uri, self.bucket, self.s3, self.tmp = uri, bucket, s3, tmp
        self.t = lethe.Table.create(uri, SCHEMA0, key="id", gc_grace="30m", row_group_bytes=1024)
        self.want: dict[int, Row] = {}
        self.n = 0

    def register(self, writer: Writer, ids: bool, table: pa.Table, want: list[Row]) -> int:
        """Write ``table`` with ``writer``, upload it, register it (merge); its schema id."""
        path = self.tmp / f"f{self.n}.parquet"
        writer(table, path, ids)
        assert (file_ids(path)[0] is not None) == ids
        key = f"incoming/f{self.n}.parquet"
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=path.read_bytes())
        r = register_parquet(self.t, key, schema_mode="merge")
        self.s3.delete_object(Bucket=self.bucket, Key=key)  # the upload is the sender's
        assert r.rows == ROWS and not r.duplicate
        self.t = lethe.Table.open(self.uri)
        self.want.update({w["id"]: w for w in want})
        sid = self.t.manifest.files[-1].schema_id or 0
        self.n += 1
        return sid

    def file(self, new: bool, payload: str = "payload") -> tuple[pa.Table, list[Row]]:
        return shape_rows(self.n, new=new, payload=payload)

    def cli_evolve(self, name: str, payload: str) -> None:
        """The new shape (``payload`` under that name) written by polars without ids and
        appended with ``lethe append --evolve``."""
        from lethe.cli import main

        new, want = self.file(new=True, payload=payload)
        write_polars(new, self.tmp / f"{name}.parquet", False)
        assert main(["append", self.uri, str(self.tmp / f"{name}.parquet"), "--evolve"]) == 0
        self.want.update({w["id"]: w for w in want})
        self.n += 1
        self.t = lethe.Table.open(self.uri)

    def rows(self) -> list[Row]:
        return [self.want[i] for i in sorted(self.want)]


def erase_and_check(lake: Lake, aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Erase the customer, read every reader, GC past the grace, audit the bucket."""
    from lethe.cli import main

    t = lake.t
    r = t.erase([("customer_id", "=", CUSTOMER)])
    assert r.complete and r.files_spliced == len(t.manifest.files)
    levels = {g.level for g in r.granularity}
    # pyarrow's files (small pages, offset index) splice page by page; the others (one page
    # a chunk, or no offset index) re-encode the edited row groups whole
    assert {"page", "row_group"} <= levels, sorted({(g.level, g.reasons) for g in r.granularity})
    t = lethe.Table.open(lake.uri)
    assert all(f.rows < ROWS for f in t.manifest.files)  # whole groups went too
    for i in [i for i, w in lake.want.items() if w["customer_id"] == CUSTOMER]:
        del lake.want[i]
    want = lake.rows()
    assert len(want) == lake.n * (ROWS - len(MINE))
    # Lethe's own reads: by id, widened, nulls for missing columns, renamed by id
    got = sorted(t.scan().to_pylist(), key=lambda r: r["id"])
    assert t.scan().column_names == ["id", "customer_id", "body", "country"]
    assert got == want
    assert t.scan(filters=[("customer_id", ">", 2**32)]).num_rows == sum(
        1 for w in want if w["customer_id"] > 2**32
    )
    assert sorted(t.scan(page_index=False).to_pylist(), key=lambda r: r["id"]) == want
    for n in range(lake.n):  # one key of every file, and a value of the renamed column
        (row,) = t.lookup(n * 100 + 1).to_pylist()
        assert row == lake.want[n * 100 + 1]
        assert t.scan(["id"], [("body", "=", f"w{n}-{n * 100 + 3}")]).column(0).to_pylist() == [
            n * 100 + 3
        ]
    assert verify(t, deep=True).ok
    # the Iceberg view, read by PyIceberg and polars (files without ids by the name mapping)
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    for fv in (3, 2):  # a view keeps one format: start over between them (Daft reads 2)
        listed = t.store.client.list_objects_v2(
            Bucket=t.store.bucket, Prefix=t.catalog.prefix + "/metadata/"
        )
        for o in listed.get("Contents", []):
            t.store.client.delete_object(Bucket=t.store.bucket, Key=o["Key"])
        view = iceberg_view(aws, t.publish_iceberg(format_version=fv))
        assert view.metadata.format_version == fv
        mapping = json.loads(view.metadata.properties["schema.name-mapping.default"])
        assert {e["field-id"]: e["names"] for e in mapping} == {
            1: ["id"],
            2: ["customer_id"],
            3: ["body", "payload"],  # the old name stays an alias of the column
            4: ["country"],
        }
        assert sorted(view.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == want, fv
        pol = pl.scan_iceberg(view).collect().to_arrow().to_pylist()
        assert sorted(pol, key=lambda r: r["id"]) == want, fv
    # Daft 0.7 applies no name mapping: it refuses the files without ids (never misreads)
    import daft
    from daft.exceptions import DaftCoreException

    with pytest.raises(DaftCoreException, match="carries no parquet field IDs"):
        daft.read_iceberg(
            iceberg_view(aws, t.publish_iceberg(format_version=2)), io_config=_daft_io(aws)
        ).to_arrow()
    # GC past the grace; then no object of the bucket holds the customer's values
    collect(
        lake.uri, retention="1v", erasure_grace="0s", now=datetime.now(UTC) + timedelta(hours=1)
    )
    audit = audit_bucket(
        lake.s3,
        lake.bucket,
        {"text": Needle((b"secret-",)), "customer": Needle.column("customer_id", CUSTOMER)},
    )
    assert audit.parquet_files >= lake.n and audit.pages > 0
    assert audit.found("text") == () and audit.found("customer") == ()
    assert main(["verify", lake.uri, "--deep"]) == 0


def _daft_io(aws: Any) -> Any:
    from daft.io import IOConfig, S3Config

    return IOConfig(
        s3=S3Config(
            endpoint_url=aws.endpoint,
            key_id="testing",
            access_key="testing",
            region_name="us-east-1",
        )
    )


def test_every_writer_with_and_without_ids_under_both_schemas_erased_and_read_back(
    aws: Any,
    table_uri: str,
    bucket: str,
    s3: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lethe.cli import main

    lake = Lake(table_uri, bucket, s3, tmp_path)
    # schema 0: every writer, with and without ids, and Lethe's own writer from the CLI
    for _, writer, ids in CASES:
        assert lake.register(writer, ids, *lake.file(new=False)) == 0
    old, want = lake.file(new=False)
    write_pyarrow(old, tmp_path / "cli-old.parquet", False)
    assert main(["append", table_uri, str(tmp_path / "cli-old.parquet")]) == 0
    lake.want.update({w["id"]: w for w in want})
    lake.n += 1
    # schema 1: payload renamed to body; the CLI's --evolve adds country, widens customer_id
    lake.t.update_schema().rename_column("payload", "body").commit()
    lake.cli_evolve("cli-new", payload="body")
    assert [(f.name, str(f.type), field_id(f)) for f in lake.t.schema] == [
        ("id", "int64", 1),
        ("customer_id", "int64", 2),
        ("body", "string", 3),
        ("country", "string", 4),
    ]
    current = lake.t.manifest.current_schema_id
    assert current == 2
    # the new shape from every writer, with and without ids: registered under schema 2
    for _, writer, ids in CASES:
        assert lake.register(writer, ids, *lake.file(new=True, payload="body")) == current
    # the old shape after the evolution, with and without ids: under schema 0, as written
    for _, writer, ids in CASES:
        assert lake.register(writer, ids, *lake.file(new=False)) == 0
    # a file without ids that still says payload: the old name is an alias of column 3
    sid = lake.register(write_pyarrow, False, *lake.file(new=True, payload="payload"))
    shape = dict(lake.t.schema_history)[sid]
    assert [(f.name, field_id(f)) for f in shape] == [
        ("id", 1),
        ("customer_id", 2),
        ("payload", 3),
        ("country", 4),
    ]
    assert len(lake.t.schema_history) == 4 and lake.t.manifest.current_schema_id == current
    # appended data under the old name: the alias too (Lethe rewrites it under the current
    # names, strict or merge); strict still refuses the rest of the difference, listed
    old, want = lake.file(new=False)
    with pytest.raises(errors.SchemaMismatch, match=r"missing columns \['country'\]"):
        lake.t.append(old)
    lake.t.append(old, schema_mode="merge")
    lake.want.update({w["id"]: w for w in want})
    lake.n += 1
    lake.cli_evolve("cli-alias", payload="payload")
    assert len(lake.t.schema_history) == 4  # nothing evolved for them
    capsys.readouterr()
    erase_and_check(lake, aws, monkeypatch)


def test_a_file_whose_ids_contradict_the_table_is_refused(
    table_uri: str, bucket: str, s3: Any, tmp_path: Path
) -> None:
    """A file carrying field ids is read by those ids in the Iceberg view: ids that name
    other columns of the table would be read wrong there, so such a file is refused."""
    lake = Lake(table_uri, bucket, s3, tmp_path)
    t, _ = lake.file(new=False)
    path = tmp_path / "bad.parquet"
    con = duckdb.connect()
    con.register("src", t)
    con.execute(
        f"COPY src TO '{path}' (FORMAT parquet, FIELD_IDS {{id: 1, customer_id: 3, payload: 2}})"
    )
    s3.put_object(Bucket=bucket, Key="incoming/bad.parquet", Body=path.read_bytes())
    for mode in ("strict", "merge"):
        with pytest.raises(errors.SchemaMismatch, match=r"field id.*customer_id.*payload"):
            register_parquet(lake.t, "incoming/bad.parquet", schema_mode=mode)  # type: ignore[arg-type]
    assert lethe.Table.open(table_uri).version == lake.t.version


def test_a_column_under_its_earlier_and_its_current_name_is_refused(
    table_uri: str, bucket: str, s3: Any, tmp_path: Path
) -> None:
    """``payload`` is an alias of ``body``: data holding both is ambiguous, refused on
    every merge path (register, append), nothing changed."""
    lake = Lake(table_uri, bucket, s3, tmp_path)
    lake.t.update_schema().rename_column("payload", "body").commit()
    t, _ = lake.file(new=False)
    both = t.append_column("body", t.column("payload"))
    path = tmp_path / "both.parquet"
    write_pyarrow(both, path, False)
    s3.put_object(Bucket=bucket, Key="incoming/both.parquet", Body=path.read_bytes())
    v = lethe.Table.open(table_uri).version
    with pytest.raises(errors.SchemaMismatch, match=r"\['body'\] come twice"):
        register_parquet(lake.t, "incoming/both.parquet", schema_mode="merge")
    with pytest.raises(errors.SchemaMismatch, match=r"\['body'\] come twice"):
        lake.t.append(both, schema_mode="merge")
    assert lethe.Table.open(table_uri).version == v


def test_the_ingest_job_refuses_an_earlier_column_name_before_reading(
    table_uri: str, bucket: str, s3: Any, tmp_path: Path
) -> None:
    """The Spark ingest job reads its inputs by the current names: a Parquet input under an
    earlier name of a renamed column is refused from its footer (with or without
    ``--evolve``), naming both names, before the table changes."""
    from lethe.ingest.inputs import InputObject
    from lethe.ingest.shapes import evolve_for_inputs

    lake = Lake(table_uri, bucket, s3, tmp_path)
    lake.t.update_schema().rename_column("payload", "body").commit()
    t, _ = lake.file(new=False)
    path = tmp_path / "old.parquet"
    write_pyarrow(t, path, False)
    put = s3.put_object(Bucket=bucket, Key="raw/old.parquet", Body=path.read_bytes())
    obj = InputObject(bucket, "raw/old.parquet", path.stat().st_size, put["ETag"], "parquet")
    v = lethe.Table.open(table_uri).version
    for evolve in (False, True):
        with pytest.raises(errors.SchemaMismatch, match="'payload' is the earlier name of 'body'"):
            evolve_for_inputs(lake.t, [obj], evolve_=evolve)
    assert lethe.Table.open(table_uri).version == v


@pytest.fixture(scope="module")
def spark(aws: Any) -> Iterator[Any]:
    """A local SparkSession started after moto's server (it inherits the endpoint)."""
    from spark_jobs._session import build_session

    session = build_session(
        "lethe-writers",
        master="local[1]",
        conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
    )
    try:
        yield session
    finally:
        session.stop()


def spark_writer(spark: Any) -> Writer:
    """Spark writes the rows (no field ids) as one Parquet part file at ``path``."""
    from pyspark.sql import types as T

    kinds = {"int64": T.LongType(), "int32": T.IntegerType(), "string": T.StringType()}

    def write(t: pa.Table, path: Path, ids: bool) -> None:
        assert not ids  # Spark writes no field ids
        schema = T.StructType(
            [T.StructField(f.name, kinds[str(f.type)], f.nullable) for f in t.schema]
        )
        rows = list(zip(*(c.to_pylist() for c in t.columns), strict=True))
        out = path.with_suffix(".spark")
        spark.createDataFrame(rows, schema).coalesce(1).write.mode("overwrite").parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        part.rename(path)

    return write


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <socket.socket.*raddr=\('127.0.0.1':"
    ":pytest.PytestUnraisableExceptionWarning"
)
def test_spark_files_under_both_schemas_erased_and_read_back(
    aws: Any,
    spark: Any,
    table_uri: str,
    bucket: str,
    s3: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark's files (no ids) of the old shape, the new shape and the old shape again after
    the evolution, next to a pyarrow file (page-level splices), erased and read back."""
    write = spark_writer(spark)
    lake = Lake(table_uri, bucket, s3, tmp_path)
    assert lake.register(write, False, *lake.file(new=False)) == 0
    assert lake.register(write_pyarrow, False, *lake.file(new=False)) == 0
    lake.t.update_schema().rename_column("payload", "body").commit()
    sid = lake.register(write, False, *lake.file(new=True, payload="body"))  # adds, widens
    assert sid == lake.t.manifest.current_schema_id == 2
    assert lake.t.schema.field("customer_id").type == pa.int64()
    assert lake.register(write, False, *lake.file(new=False)) == 0
    assert lake.register(write, False, *lake.file(new=True, payload="payload")) == 3
    erase_and_check(lake, aws, monkeypatch)
