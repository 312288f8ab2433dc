"""Deletes: requests and bytes per delete (1 key, 1,000 keys, one customer) and the scan
overhead of a 1% DV on a 1M-row table (target <= 1.1x)."""

from __future__ import annotations

import os
import statistics

import numpy as np

from bench.common import measure, moto_process, new_bucket
from devtools.datagen import SCHEMA, generate
from lethe.table import Table


def run(rows: int = 1_000_000) -> dict[str, object]:
    out: dict[str, object] = {}
    with moto_process() as aws:
        bucket = new_bucket(aws)
        uri = f"s3://{bucket}/events"
        t = Table.create(uri, SCHEMA, key="id", target_file_bytes=8 << 20, row_group_bytes=1 << 20)
        t.append(generate(0, rows))
        clean = Table.open(uri)
        print(
            f"table: {rows:,} rows, {len(t.manifest.files)} files, {sum(len(f.row_groups) for f in t.manifest.files)} row groups"
        )
        t.scan(["id"], [("id", "=", 0)])  # warm
        cases = {
            "1 key": [("id", "=", rows // 3)],
            "1,000 keys": [
                (
                    "id",
                    "in",
                    sorted(np.random.default_rng(1).choice(rows, 1000, replace=False).tolist()),
                )
            ],
            "one customer": [("customer_id", "=", 4242)],
        }
        print(
            f"{'delete':<14}{'rows':>7}{'files':>6}{'PUTs':>6}{'GETs':>6}{'down':>14}{'up':>12}{'wall':>9}"
        )
        for name, f in cases.items():
            before = t.io
            m = measure(lambda f=f: t.delete(f))
            d = t.io - before
            r = m.result
            print(
                f"{name:<14}{r.rows_deleted:>7}{r.files_touched:>6}{d.puts:>6}{d.count('get'):>6}{d.bytes_downloaded:>14,}{d.bytes_uploaded:>12,}{m.wall:>8.3f}s"
            )
            out[name] = {
                "puts": d.puts,
                "gets": d.count("get"),
                "down": d.bytes_downloaded,
                "up": d.bytes_uploaded,
            }
        # 1% of rows deleted, spread uniformly
        t.delete([("id", "in", np.arange(0, rows, 100).tolist())])
        dirty = Table.open(uri)
        runs = int(os.environ.get("LETHE_BENCH_SCAN_RUNS", "15"))
        print(f"scan of {rows:,} rows: 1% deleted vs none ({runs} runs each, interleaved, median)")
        clean.scan()
        dirty.scan()
        base_runs, dv_runs = [], []
        for _ in range(runs):
            base_runs.append(measure(clean.scan))
            dv_runs.append(measure(dirty.scan))
        b = statistics.median(m.wall for m in base_runs)
        d = statistics.median(m.wall for m in dv_runs)
        bc = statistics.median(m.cpu for m in base_runs)
        dc = statistics.median(m.cpu for m in dv_runs)
        n = dirty.scan(["id"]).num_rows
        print(
            f"  no DVs: {b:.3f}s (cpu {bc:.3f}s)   1% DVs: {d:.3f}s (cpu {dc:.3f}s)   "
            f"ratio {d / b:.3f}x wall, {dc / bc:.3f}x client CPU (target <= 1.1x); rows {n:,}"
        )
        out["scan_cpu_ratio"] = dc / bc
        out["scan_ratio"] = d / b
    return out


if __name__ == "__main__":
    run()
