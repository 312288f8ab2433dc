"""Adoption in place (issue 28): adopting N existing Parquet files, and erasing one person
from the adopted Hive table against the same layout written by Lethe.

Targets: adopting reads only the footers (bytes downloaded <= 1.1 x the footers' size),
writes no data byte, commits in <= 20 commits at 10,000 files (1,000 files per commit);
erasing one person from the adopted table moves no more bytes than from the Lethe-written
one. ``python -m bench bench_adopt`` (``LETHE_BENCH_ADOPT_FILES=10000`` for the issue's
scale; default 1,000).
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import measure, moto_process, new_bucket
from lethe.storage.store import S3Store
from lethe.table import Table


def _rows(start: int, n: int, customers: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "customer_id": pa.array((ids * 7919 % customers).astype(np.int32)),
            "payload": pa.array([f"payload-{i:012d}" for i in ids.tolist()]),
        }
    )


def _parquet(t: pa.Table, **kw: Any) -> bytes:
    buf = io.BytesIO()
    pq.write_table(t, buf, **kw)
    return buf.getvalue()


def _footer(body: bytes) -> int:
    return int.from_bytes(body[-8:-4], "little") + 8


def _lake(s3: Any, bucket: str, prefix: str, files: int, rows: int, **kw: Any) -> int:
    """``files`` Parquet objects under ``prefix/dt=.../``; the sum of their footers' sizes."""

    def one(i: int) -> int:
        body = _parquet(_rows(i * rows, rows, 1000), **kw)
        key = f"{prefix}/dt=2026-{1 + i // 28 % 12:02d}-{1 + i % 28:02d}/part-{i:05d}.parquet"
        s3.put_object(Bucket=bucket, Key=key, Body=body)
        return _footer(body)

    with ThreadPoolExecutor(16) as pool:
        return sum(pool.map(one, range(files)))


def _adopt(aws: Any, files: int) -> dict[str, Any]:
    s3 = aws.client("s3")
    bucket = new_bucket(aws)
    footers = _lake(s3, bucket, "raw/events", files, 100)
    store = S3Store(bucket, client=s3)
    uri = f"s3://{bucket}/tables/events"
    m = measure(
        lambda: Table.adopt(
            uri, f"s3://{bucket}/raw/events/", key="id", s3=store.client, batch_files=1000
        )
    )
    t = m.result
    io_ = t.store.stats.snapshot()
    data = sum(o.size for o in store.list("tables/events/data/"))
    commits = sum(1 for h in t.history() if h.operation == "adopt")
    return {
        "files": files,
        "down": io_.bytes_downloaded,
        "footers": footers,
        "data_written": data + io_.bytes_copied,
        "commits": commits,
        "requests": io_.total_requests,
        "wall": m.wall,
    }


def _erase_pair(aws: Any) -> dict[str, Any]:
    """The same 12 daily files (20,000 rows each) adopted as written by pyarrow (no page
    index), adopted then rewritten (--rewrite-unready), and written by Lethe; erase one
    customer from each."""
    s3 = aws.client("s3")
    out: dict[str, Any] = {}
    for mode in ("adopted", "adopted+rewrite", "lethe"):
        bucket = new_bucket(aws)
        uri = f"s3://{bucket}/tables/events"
        if mode == "lethe":
            t = Table.create(uri, _rows(0, 1, 1000).schema, key="id", s3=s3)
            for i in range(12):
                t.append(_rows(i * 20_000, 20_000, 1000))
        else:
            _lake(s3, bucket, "raw/events", 12, 20_000)
            got = Table.adopt(uri, f"s3://{bucket}/raw/events/", key="id", s3=s3)
            assert isinstance(got, Table)
            t = got
            if mode == "adopted+rewrite":
                from lethe.adopt.rewrite import rewrite_unready

                rewrite_unready(t)
        r = t.erase([("customer_id", "=", 42)])
        out[mode] = {
            "rows": r.rows_deleted,
            "moved": r.bytes_uploaded + r.bytes_copied,
            "down": r.bytes_downloaded,
            "source": r.source_bytes,
        }
    return out


def run() -> dict[str, Any]:
    files = int(os.environ.get("LETHE_BENCH_ADOPT_FILES", "1000"))
    with moto_process() as aws:
        a = _adopt(aws, files)
        ratio = a["down"] / a["footers"]
        print(f"adopt {files:,} Parquet files (Hive dt=, 100 rows each), in place:")
        print(
            f"  bytes downloaded {a['down']:,} vs footers {a['footers']:,}: {ratio:.3f}x "
            "(target <= 1.1x)"
        )
        print(f"  data bytes written {a['data_written']:,} (target 0)")
        print(
            f"  requests {a['requests']:,} ({a['requests'] / files:.2f} per file: one suffix GET "
            "each once a footer was seen, the listing, the commits)"
        )
        print(f"  commits {a['commits']} (target <= 20 at 10,000 files)")
        print(f"  wall {a['wall']:.1f}s (issue: <= 30 s for 1,000 files on this machine)")
        e = _erase_pair(aws)
        print("erase one customer, 12 daily files x 20,000 rows (bytes uploaded + copied):")
        for mode, r in e.items():
            print(
                f"  {mode:<16} {r['rows']:>4} rows  moved {r['moved']:>10,}  "
                f"downloaded {r['down']:>10,}  of {r['source']:>10,} source bytes"
            )
        print(
            "  target: adopted moves no more than lethe "
            f"(adopted {e['adopted']['moved'] / max(1, e['lethe']['moved']):.2f}x, "
            f"adopted+rewrite {e['adopted+rewrite']['moved'] / max(1, e['lethe']['moved']):.2f}x)"
        )
    return {"adopt": a, "erase": e}
