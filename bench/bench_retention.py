"""Row TTL (issue 26): a retention sweep on a time-ordered table.

``LETHE_BENCH_TTL_FILES`` files x ``LETHE_BENCH_TTL_ROWS`` rows appended in time order (one
file per hour of events, a JSON-like payload), retention 30 days, the sweep run at a time
where the oldest quarter of the files is wholly past the retention and one file straddles
the cutoff. Prints the figure of the issue ("files fully past retention dropped with 0 data
bytes moved") and the splice of the straddling file against a copy-on-write of it (read the
whole file, write it anew: its size down plus the rewritten size up).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

import lethe
from bench.common import measure, mib, moto_process, new_bucket

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)


def _hour(k: int, rows: int, rng: np.random.Generator) -> pa.Table:
    """File ``k``: ``rows`` events spread over hour ``k`` after :data:`T0`, in time order."""
    start = int(T0.timestamp() * 1e6) + k * 3_600_000_000
    times = start + np.sort(rng.integers(0, 3_600_000_000, rows))
    ids = np.arange(k * rows, (k + 1) * rows, dtype=np.int64)
    cust = rng.zipf(1.7, rows) % 20_000
    payload = [
        f'{{"event":"view","customer":{c},"seq":{i},"pad":"{"x" * 150}"}}'
        for c, i in zip(cust.tolist(), ids.tolist(), strict=True)
    ]
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
            "customer_id": pa.array(cust.astype(np.int32)),
            "payload": pa.array(payload),
        },
        schema=SCHEMA,
    )


def _data_requests(s3: Any) -> list[str]:
    """A list that hears of every request naming a data file (``/data/`` keys)."""
    seen: list[str] = []

    def before(model: Any, params: dict[str, Any], **_: Any) -> None:
        if "/data/" in str(params.get("Key", "")) or "/data/" in str(params.get("CopySource", "")):
            seen.append(model.name)

    s3.meta.events.register("before-call.s3", before, unique_id="bench-ttl-data")
    return seen


def run() -> dict[str, float]:
    files = int(os.environ.get("LETHE_BENCH_TTL_FILES", "32"))
    rows = int(os.environ.get("LETHE_BENCH_TTL_ROWS", "20000"))
    rng = np.random.default_rng(26)
    with moto_process() as aws:
        bucket = new_bucket(aws)
        s3 = aws.client("s3")
        t = lethe.Table.create(
            f"s3://{bucket}/ttl", SCHEMA, key="id", s3=s3, row_group_bytes=1 << 20,
            retention=("event_time", "30d"),
        )  # fmt: skip
        for k in range(files):
            t.append(_hour(k, rows, rng))
        table_bytes = sum(f.size for f in t.manifest.files)
        gone = files // 4  # hours 0..gone-1 wholly expired; then hour `gone` straddles
        straddler = next(f for f in t.manifest.files if f.columns["id"].min == gone * rows)
        data = _data_requests(s3)
        v0 = t.version
        drop = measure(lambda: t.sweep_retention(now=T0 + timedelta(days=30, hours=gone)))
        d = drop.result
        drop_requests = len(data)
        data.clear()
        half = measure(
            lambda: t.sweep_retention(now=T0 + timedelta(days=30, hours=gone, minutes=30))
        )
        h = half.result
        new = next(
            f
            for f in t.manifest.files
            if f.columns["id"].min > gone * rows and f.columns["id"].max < (gone + 1) * rows
        )
    cow = straddler.size + new.size  # read the whole file, write the kept rows anew
    print(f"table: {files} files x {rows:,} rows, {mib(table_bytes)}; retention 30d")
    print(
        f"TTL: files fully past retention dropped: {d.files_dropped} file(s) of {mib(d.bytes_dropped)} "
        f"in {t.version - v0 - len(h.versions)} commit(s); data requests {drop_requests}, "
        f"data bytes moved = {d.data_bytes_moved} (target 0)  "
        f"[{'ok' if d.data_bytes_moved == 0 and drop_requests == 0 else 'MISSED'}]"
    )
    read = h.data_bytes_moved - h.splice_bytes
    print(
        f"TTL: straddling file spliced: {h.files_spliced} file of {mib(straddler.size)}, "
        f"{h.rows_expired:,} row(s) erased; splice {mib(h.splice_bytes)} + column read "
        f"{mib(read)} vs copy-on-write {mib(cow)}: {h.data_bytes_moved / cow:.2f}x "
        f"(target <= 1.0x)  [{'ok' if h.data_bytes_moved <= cow else 'MISSED'}]"
    )
    print(
        f"sweeps: drop {drop.wall:.2f} s wall / {drop.cpu:.2f} s CPU, "
        f"{d.io.total_requests} requests; splice {half.wall:.2f} s / {half.cpu:.2f} s, "
        f"{h.io.total_requests} requests, {len(h.versions)} commit(s)"
    )
    return {
        "drop_moved": float(d.data_bytes_moved),
        "drop_data_requests": float(drop_requests),
        "files_dropped": float(d.files_dropped),
        "splice_moved": float(h.data_bytes_moved),
        "cow_bytes": float(cow),
    }


if __name__ == "__main__":
    run()
