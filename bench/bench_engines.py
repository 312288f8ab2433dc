"""Other engines on a Lethe table (issue 40): Spark's ``format("lethe")``, DuckDB and Polars
over ``Table.to_arrow_reader``, each next to the engine reading the same Parquet files itself.

One table of ``LETHE_BENCH_ENGINES_ROWS`` rows (default 200k; the issue's size is 1.6M) in 8
appends, each with its own customers, 1% of its rows deleted by deletion vectors and an index
on ``customer_id``, on moto in its own process. Lines:

* **DuckDB** ``count(*)`` and a ``group by`` over ``to_arrow_reader``, each equal to
  ``t.scan()``, against DuckDB's own ``read_parquet`` of the same files downloaded to local
  disk (no deletes); target <= 1.1x the (wall) time.
* **Spark read**: ``spark.read.format("lethe").load(uri)`` aggregated, against
  ``spark.read.parquet`` of the same local files with the deleted ids removed by an anti join.
  CPU is this process plus every process under it (the JVM and its Python workers), read from
  ``/proc``; target <= 1.2x; the better of two runs each. Then a ``filters`` equality on the indexed column: the files the
  read plans against the files the index names (target: the same).
* **Spark append**: ``df.write.format("lethe")`` of ``LETHE_BENCH_ENGINES_APPEND`` rows
  (default 100k; the issue's size is 1M) against ``Table.append`` of the same rows; target CPU
  <= 1.2x, one commit, files as ``Table.append`` sizes them (counts and sizes printed).

Numbers depend on the machine and on moto (DESIGN §8); nothing is asserted on time.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench.common import moto_process, new_bucket
from devtools.datagen import SCHEMA, generate
from lethe.table import Table


def tree_cpu() -> float:
    """CPU seconds of this process and every live process under it (children's finished
    children included, as the kernel accounts them)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    times: dict[int, float] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(d.name)] = int(fields[1])
        times[int(d.name)] = sum(int(x) for x in fields[11:15]) / tick
    me = os.getpid()
    total = 0.0
    for pid in times:
        p = pid
        while p not in (0, 1, me) and p in parent:
            p = parent[p]
        if p == me and pid != me:
            total += times[pid]
    r = resource.getrusage(resource.RUSAGE_SELF)
    return total + r.ru_utime + r.ru_stime


def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    c0, t0 = tree_cpu(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, tree_cpu() - c0


def _line(name: str, lethe: tuple[float, float], base: tuple[float, float], target: str) -> None:
    (lw, lc), (bw, bc) = lethe, base
    print(
        f"{name:<34} lethe {lw:6.2f}s wall {lc:6.2f}s cpu | baseline {bw:6.2f}s wall "
        f"{bc:6.2f}s cpu | cpu x{lc / bc if bc else float('nan'):.2f} (target {target})"
    )


def _download(t: Table, into: Path) -> list[str]:
    paths = []
    for i, f in enumerate(t.manifest.files):
        p = into / f"f{i}.parquet"
        p.write_bytes(t.store.get(t.key_of(f.path)).body)
        paths.append(str(p))
    return paths


def _line_wall(
    name: str, lethe: tuple[float, float], base: tuple[float, float], target: str
) -> None:
    (lw, lc), (bw, bc) = lethe, base
    print(
        f"{name:<34} lethe {lw:6.2f}s wall {lc:6.2f}s cpu | baseline {bw:6.2f}s wall "
        f"{bc:6.2f}s cpu | time x{lw / bw if bw else float('nan'):.2f} (target {target})"
    )


def _best(fn: Callable[[], Any], runs: int = 3) -> tuple[Any, float, float]:
    """The fastest of ``runs`` timed calls (the first warms caches)."""
    return min((_timed(fn) for _ in range(runs)), key=lambda r: r[1])


def _table(uri: str, rows: int) -> tuple[Table, Any]:
    """8 appends, customers of append ``i`` offset by ``i * 100_000``; 1% of the rows deleted
    (the deleted ids returned); an index on ``customer_id``."""
    import pyarrow.compute as pc

    t = Table.create(uri, SCHEMA, key="id", row_group_bytes=4 << 20, target_file_bytes=8 << 20)
    per = -(-rows // 8)
    for i in range(8):
        data = generate(i * per, min(per, rows - i * per))
        cid = pc.add(data["customer_id"], pa.scalar(i * 100_000, pa.int32()))
        t.append(data.set_column(data.schema.get_field_index("customer_id"), "customer_id", cid))
    gone = np.random.default_rng(5).choice(rows, size=rows // 100, replace=False)
    t.delete([("id", "in", sorted(int(x) for x in gone))], request_id="bench-1pct")
    t.create_index("customer_id")
    return Table.open(uri), gone


def _duckdb(t: Table, files: list[str]) -> dict[str, Any]:
    import duckdb

    want = t.scan(["customer_id"])
    counts = want.group_by("customer_id").aggregate([("customer_id", "count")])
    by = dict(
        zip(counts["customer_id"].to_pylist(), counts["customer_id_count"].to_pylist(), strict=True)
    )
    out: dict[str, Any] = {}
    for name, sql in (
        ("count(*)", "select count(*) from {src}"),
        ("group by", "select customer_id, count(*) from {src} group by 1"),
    ):

        def lethe_duck(sql: str = sql) -> Any:
            reader = t.to_arrow_reader(["customer_id"])  # noqa: F841 - read by DuckDB
            return duckdb.sql(sql.format(src="reader")).fetchall()

        def plain_duck(sql: str = sql) -> Any:
            return duckdb.sql(sql.format(src=f"read_parquet({files!r})")).fetchall()

        got, lw, lc = _best(lethe_duck)
        base, bw, bc = _best(plain_duck)
        if name == "count(*)":
            assert got[0][0] == want.num_rows
            assert base[0][0] == sum(f.rows for f in t.manifest.files)
        else:
            assert dict(got) == by
        _line_wall(f"DuckDB {name} (1% deleted)", (lw, lc), (bw, bc), "<= 1.1x time")
        out[name] = {"lethe": (lw, lc), "plain": (bw, bc)}
    return out


def run(rows: int | None = None, append_rows: int | None = None) -> dict[str, Any]:
    """Run the lines; returns their numbers."""
    rows = rows or int(os.environ.get("LETHE_BENCH_ENGINES_ROWS", "200000"))
    append_rows = append_rows or int(os.environ.get("LETHE_BENCH_ENGINES_APPEND", "100000"))
    out: dict[str, Any] = {"rows": rows}
    local = Path(tempfile.mkdtemp(prefix="lethe-bench-engines-"))
    try:
        with moto_process() as aws:
            uri = f"s3://{new_bucket(aws)}/events"
            t, gone = _table(uri, rows)
            files = _download(t, local)
            out["live_rows"] = t.scan(["id"]).num_rows
            print(
                f"rows: {rows:,} in {len(files)} files, {rows - out['live_rows']:,} deleted; "
                f"append {append_rows:,} (LETHE_BENCH_ENGINES_ROWS/_APPEND; issue: 1.6M/1M)"
            )
            out["duckdb"] = _duckdb(t, files)
            out |= _spark(uri, t, files, gone, append_rows, local)
    finally:
        shutil.rmtree(local, ignore_errors=True)
    return out


def _spark(
    uri: str, t: Table, files: list[str], gone: Any, append_rows: int, local: Path
) -> dict[str, Any]:
    import lethe.spark
    from spark_jobs._session import build_session

    spark = build_session("lethe-bench-engines", conf={"spark.sql.shuffle.partitions": "8"})
    try:
        lethe.spark.register(spark)
        spark.read.parquet(files[0]).count()  # start the workers once
        spark.read.format("lethe").option("columns", "id").load(uri).limit(1).collect()
        out = {"spark_read": _spark_read(spark, uri, t, files, gone)}
        out["spark_index"] = _spark_index(uri, t)
        out["spark_append"] = _spark_append(spark, uri, append_rows, local)
    finally:
        spark.stop()
    return out


def _spark_read(spark: Any, uri: str, t: Table, files: list[str], gone: Any) -> Any:
    deleted = spark.createDataFrame([(int(x),) for x in gone], "id long")

    def lethe_read() -> int:
        df = spark.read.format("lethe").load(uri)
        return int(df.groupBy("customer_id").count().agg({"count": "sum"}).collect()[0][0])

    def plain_read() -> int:
        df = spark.read.parquet(*files).join(deleted, "id", "left_anti")
        return int(df.groupBy("customer_id").count().agg({"count": "sum"}).collect()[0][0])

    n, lw, lc = _best(lethe_read, 2)  # the first run starts every Python worker
    m, bw, bc = _best(plain_read, 2)
    assert n == m == t.scan(["id"]).num_rows
    _line("Spark read (1% deleted)", (lw, lc), (bw, bc), "<= 1.2x")
    return {"lethe": (lw, lc), "plain": (bw, bc)}


def _spark_index(uri: str, t: Table) -> dict[str, int]:
    """The files ``format("lethe")`` plans for ``customer_id = X`` (indexed) against the
    files the index names."""
    from lethe.catalog.manifest import DataFile
    from lethe.index.core import index_plan
    from lethe.reading.filters import normalize
    from lethe.spark import LetheDataSource

    cid = int(t.scan(["customer_id"])["customer_id"][0].as_py())
    opts = {"path": uri, "filters": f"customer_id = {cid}"}
    src = LetheDataSource(opts)
    parts = src.reader(src.schema()).partitions()
    planned = {DataFile.model_validate_json(u[0]).path for p in parts for u in p.value}
    dnf = normalize([("customer_id", "=", cid)], t.schema)
    via = index_plan(t.store, t.catalog.prefix, t.manifest, dnf)
    assert via is not None, "the index serves no equality on customer_id"
    named = set(via[1])
    same = "yes" if planned == named else f"NO: {sorted(planned ^ named)[:3]}"
    print(
        f"{'Spark read customer_id = X (indexed)':<34} planned {len(planned)} of "
        f"{len(t.manifest.files)} files; index names {len(named)}; same files: {same} "
        f"(target: only the files the index names)"
    )
    return {"planned": len(planned), "named": len(named), "files": len(t.manifest.files)}


def _spark_append(spark: Any, uri: str, append_rows: int, local: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq

    data = generate(10_000_000, append_rows)
    target, own = f"{uri}-append", f"{uri}-own"
    for u in (target, own):
        Table.create(u, SCHEMA, key="id", row_group_bytes=4 << 20, target_file_bytes=8 << 20)
    pq_path = local / "append.parquet"
    pq.write_table(data, pq_path)
    df = spark.read.parquet(str(pq_path)).repartition(2)
    df.cache().count()
    warm = f"{uri}-warm"  # the writer's Python processes started once, as the read's were
    Table.create(warm, SCHEMA, key="id")
    df.limit(10).repartition(2).write.format("lethe").mode("append").save(warm)

    def spark_append() -> None:
        df.write.format("lethe").mode("append").option("request_id", "bench").save(target)

    _, aw, ac = _timed(spark_append)
    _, ow, oc = _timed(lambda: Table.open(own).append(data))
    a, o = Table.open(target), Table.open(own)
    assert a.scan(["id"]).num_rows == append_rows
    commits = sum(1 for h in a.history() if h.operation == "append")
    _line(f"Spark append {append_rows:,} rows", (aw, ac), (ow, oc), "<= 1.2x (vs Table.append)")
    sizes = [[f.size for f in x.manifest.files] for x in (a, o)]
    print(
        f"{'  ... commits, files':<34} {commits} commit (target 1); files: Spark "
        f"{len(sizes[0])} of avg {sum(sizes[0]) / len(sizes[0]) / (1 << 20):.1f} MiB, "
        f"Table.append {len(sizes[1])} of avg {sum(sizes[1]) / len(sizes[1]) / (1 << 20):.1f} MiB"
    )
    return {"cpu": (ac, oc), "wall": (aw, ow), "commits": commits, "files": sizes}
