"""Schema evolution (issue 27): the cost of an ``add_column`` commit as the table grows, and
a scan over files of three schemas against the same scan over files of one.

Targets: an ``add_column`` commit uploads O(1) bytes (the root alone, whatever the number of
files) and reads or writes no data file, at 100k files; a scan over files of 3 schemas costs
within 5% (client CPU) of the same scan over files of one schema.

The large tables are bench_scale's (synthetic entries committed through the public path).
``python -m bench bench_schema`` (``LETHE_BENCH_SCHEMA_FILES=1000,10000`` picks sizes).
"""

from __future__ import annotations

import os
import statistics

import pyarrow as pa

from bench.bench_scale import build, size
from bench.common import measure, moto_process, new_bucket
from lethe.table import Table

FILES = 30
ROWS = 20_000


def _rows(start: int, n: int, *, wide: bool = False, body: str = "payload") -> pa.Table:
    ids = pa.array(range(start, start + n), pa.int64())
    cust = pa.array([i % 977 for i in range(start, start + n)], pa.int64() if wide else pa.int32())
    text = pa.array([f"payload-{i}" for i in range(start, start + n)])
    return pa.table({"id": ids, "customer_id": cust, body: text})


def _schema_commit(aws: object, files: int) -> dict[str, object]:
    bucket = new_bucket(aws)  # type: ignore[arg-type]
    uri = f"s3://{bucket}/s{files}"
    build(uri, files)
    t = Table.open(uri)
    before = t.io
    m = measure(lambda: t.update_schema().add_column("country", pa.string()).commit())
    d = t.io - before
    root = len(t.store.get(t.catalog.key(f"manifest/v{t.version:08d}.json")).body)
    return {
        "files": files,
        "up": d.bytes_uploaded,
        "puts": d.puts,
        "gets": d.count("get"),
        "root": root,
        "wall": m.wall,
    }


def _scan_tables(aws: object) -> tuple[Table, Table]:
    bucket = new_bucket(aws)  # type: ignore[arg-type]
    one = Table.create(f"s3://{bucket}/one", _rows(0, 1).schema, key="id")
    three = Table.create(f"s3://{bucket}/three", _rows(0, 1).schema, key="id")
    third = FILES // 3
    for i in range(FILES):
        one.append(_rows(i * ROWS, ROWS))
    for i in range(third):
        three.append(_rows(i * ROWS, ROWS))
    three.update_schema().widen_column("customer_id", pa.int64()).add_column(
        "c", pa.string()
    ).commit()
    for i in range(third, 2 * third):
        three.append(_rows(i * ROWS, ROWS, wide=True), schema_mode="merge")
    three.update_schema().rename_column("payload", "body").commit()
    for i in range(2 * third, FILES):
        three.append(_rows(i * ROWS, ROWS, wide=True, body="body"), schema_mode="merge")
    return Table.open(one.uri), Table.open(three.uri)


def run() -> dict[str, object]:
    sizes = [
        int(x) for x in os.environ.get("LETHE_BENCH_SCHEMA_FILES", "1000,10000,100000").split(",")
    ]
    runs = int(os.environ.get("LETHE_BENCH_SCHEMA_RUNS", "9"))
    out: dict[str, object] = {}
    with moto_process() as aws:
        print(
            f"{'add_column commit':<20}{'PUTs':>6}{'GETs':>6}{'uploaded':>12}{'root':>12}{'wall':>9}"
        )
        for n in sizes:
            r = _schema_commit(aws, n)
            out[f"commit_{n}"] = r
            print(
                f"{n:>10,} files     {r['puts']:>6}{r['gets']:>6}{size(int(r['up'])):>12}"  # type: ignore[call-overload]
                f"{size(int(r['root'])):>12}{r['wall']:>8.3f}s"  # type: ignore[call-overload]
            )
        print("target: uploads the root alone (O(1) in data files), no data file read or written")
        one, three = _scan_tables(aws)
        cols = {"one": ["id", "customer_id", "payload"], "three": ["id", "customer_id", "body"]}
        cpu: dict[str, list[float]] = {"one": [], "three": []}
        for t, k in ((one, "one"), (three, "three")):  # warm the footers
            t.scan(cols[k])
        for _ in range(runs):  # interleaved
            for t, k in ((one, "one"), (three, "three")):
                cpu[k].append(measure(lambda t=t, k=k: t.scan(cols[k])).cpu)
        a, b = statistics.median(cpu["one"]), statistics.median(cpu["three"])
        print(
            f"scan of {FILES * ROWS:,} rows in {FILES} files, client CPU (median of {runs}): "
            f"1 schema {a:.3f}s, 3 schemas {b:.3f}s, ratio {b / a:.3f} (target <= 1.05)"
        )
        out["scan_ratio"] = b / a
    return out
