"""Other engines on a Lethe table (issue 40): Spark's ``format("lethe")``, DuckDB and Polars
over ``Table.to_arrow_reader``, each next to the engine reading the same Parquet files itself.

One table of ``LETHE_BENCH_ENGINES_ROWS`` rows (default 1.6M, the peer bench's size) with 1% of
its rows deleted by deletion vectors, on moto in its own process. Lines:

* **Spark read**: ``spark.read.format("lethe").load(uri)`` aggregated, against
  ``spark.read.parquet`` of the same files (downloaded to local disk first) with the deleted
  ids removed by an anti join. CPU is this process plus every process under it (the JVM and
  its Python workers), read from ``/proc``; target <= 1.2x.
* **Spark append**: ``df.write.format("lethe")`` of ``LETHE_BENCH_ENGINES_APPEND`` rows (default
  1M) against ``Table.append`` of the same rows; target CPU <= 1.2x, one commit.
* **DuckDB**: ``count(*)`` and a ``group by`` over ``to_arrow_reader`` against DuckDB's own
  ``read_parquet`` of the downloaded files (no deletes); target <= 1.1x the time.

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


def run(rows: int | None = None, append_rows: int | None = None) -> dict[str, Any]:
    """Run the three lines; returns their numbers."""
    import duckdb

    rows = rows or int(os.environ.get("LETHE_BENCH_ENGINES_ROWS", "1600000"))
    append_rows = append_rows or int(os.environ.get("LETHE_BENCH_ENGINES_APPEND", "1000000"))
    out: dict[str, Any] = {"rows": rows}
    local = Path(tempfile.mkdtemp(prefix="lethe-bench-engines-"))
    try:
        with moto_process() as aws:
            uri = f"s3://{new_bucket(aws)}/events"
            t = Table.create(uri, SCHEMA, key="id", row_group_bytes=16 << 20)
            t.append(generate(0, rows))
            gone = np.random.default_rng(5).choice(rows, size=rows // 100, replace=False)
            t.delete([("id", "in", sorted(int(x) for x in gone))], request_id="bench-1pct")
            t = Table.open(uri)
            files = _download(t, local)
            live = t.scan(["id"]).num_rows
            out["live_rows"] = live

            # DuckDB over the stream vs its own reader of the files
            def lethe_duck() -> Any:
                reader = t.to_arrow_reader(["customer_id"])  # noqa: F841 - read by DuckDB
                return duckdb.sql("select customer_id, count(*) from reader group by 1").fetchall()

            def plain_duck() -> Any:
                return duckdb.sql(
                    f"select customer_id, count(*) from read_parquet({files!r}) group by 1"
                ).fetchall()

            got, lw, lc = _timed(lethe_duck)
            base, bw, bc = _timed(plain_duck)
            assert sum(n for _, n in got) == live and sum(n for _, n in base) == rows
            _line("DuckDB group by (1% deleted)", (lw, lc), (bw, bc), "<= 1.1x time")
            out["duckdb"] = {"lethe": (lw, lc), "plain": (bw, bc)}
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
    lethe.spark.register(spark)
    spark.read.parquet(files[0]).count()  # start the workers once
    deleted = spark.createDataFrame([(int(x),) for x in gone], "id long")

    def lethe_read() -> int:
        df = spark.read.format("lethe").load(uri)
        return int(df.groupBy("customer_id").count().agg({"count": "sum"}).collect()[0][0])

    def plain_read() -> int:
        df = spark.read.parquet(*files).join(deleted, "id", "left_anti")
        return int(df.groupBy("customer_id").count().agg({"count": "sum"}).collect()[0][0])

    n, lw, lc = _timed(lethe_read)
    m, bw, bc = _timed(plain_read)
    assert n == m == t.scan(["id"]).num_rows
    _line("Spark read (1% deleted)", (lw, lc), (bw, bc), "<= 1.2x")

    data = generate(10_000_000, append_rows)
    target = f"{uri}-append"
    Table.create(target, SCHEMA, key="id", row_group_bytes=16 << 20)
    own = f"{uri}-own"
    Table.create(own, SCHEMA, key="id", row_group_bytes=16 << 20)
    pq_path = local / "append.parquet"
    import pyarrow.parquet as pq

    pq.write_table(data, pq_path)
    df = spark.read.parquet(str(pq_path)).repartition(4)
    df.cache().count()

    def spark_append() -> None:
        df.write.format("lethe").mode("append").option("request_id", "bench").save(target)

    _, aw, ac = _timed(spark_append)
    _, ow, oc = _timed(lambda: Table.open(own).append(data))
    assert Table.open(target).scan(["id"]).num_rows == append_rows
    _line(f"Spark append {append_rows:,} rows", (aw, ac), (ow, oc), "<= 1.2x (vs Table.append)")
    spark.stop()
    return {"spark_read": {"lethe": (lw, lc), "plain": (bw, bc)}, "spark_append": (ac, oc)}
