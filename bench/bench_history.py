"""History through erasures (issue 39): opening and scanning a version from before 10
erasures, against scanning it before them.

``LETHE_BENCH_HISTORY_FILES`` files x ``LETHE_BENCH_HISTORY_ROWS`` rows, 500 customers spread
over every file. Version ``v`` (after the appends) is opened and scanned from a fresh handle,
then 10 customers are erased one request each (every file spliced each time: the lineage
maps each of ``v``'s files through 10 splices), and ``v`` is opened and scanned again: before
GC (read through the lineage object) and after GC with a 30-day retention and erasure grace
0 (its root written anew, files mapped). Requests, bytes and client CPU on moto (DESIGN §8);
target: <= 1.1x of the scan before the erasures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

import lethe
from bench.common import mib, moto_process, new_bucket

SCHEMA = pa.schema(
    [("id", pa.int64(), False), ("customer_id", pa.int32()), ("payload", pa.string())]
)
TARGET = 1.1
ERASURES = 10


def _rows(k: int, n: int) -> pa.Table:
    ids = np.arange(k * n, (k + 1) * n, dtype=np.int64)
    return pa.table(
        {
            "id": ids,
            "customer_id": pa.array((ids % 500).astype(np.int32)),
            "payload": pa.array([f'{{"seq":{i},"pad":"{"x" * 80}"}}' for i in ids.tolist()]),
        },
        schema=SCHEMA,
    )


_CHILD = """
import json, resource, sys, boto3
import lethe, lethe.reading.rows, lethe.dv.lineage  # imports before the clock
uri, version, endpoint = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="testing", aws_secret_access_key="testing")
seen = {"requests": 0, "bytes": 0}
def heard(parsed=None, **_):
    seen["requests"] += 1
    if isinstance(parsed, dict):
        seen["bytes"] += int(parsed.get("ContentLength") or 0)
s3.meta.events.register("after-call.s3", heard)
r0 = resource.getrusage(resource.RUSAGE_SELF)
rows = lethe.Table.open(uri, version=version, s3=s3).scan().num_rows
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"rows": rows, "cpu": cpu, **seen}))
"""


def _scan(uri: str, version: int, endpoint: str) -> dict[str, float]:
    """Open and scan ``version`` in a fresh process (no cache of this one helps it):
    its requests, bytes received and CPU, best CPU of three runs."""
    runs = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, uri, str(version), endpoint],
            check=False,
            capture_output=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            text=True,
        )
        if out.returncode:
            raise RuntimeError(f"the scan process failed: {out.stderr[-2000:]}")
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return min(runs, key=lambda r: r["cpu"])


def run(files: int | None = None, rows: int | None = None) -> dict[str, Any]:
    files = files or int(os.environ.get("LETHE_BENCH_HISTORY_FILES", "24"))
    rows = rows or int(os.environ.get("LETHE_BENCH_HISTORY_ROWS", "10000"))
    with moto_process() as aws:
        s3 = aws.client("s3")
        uri = f"s3://{new_bucket(aws)}/history"
        t = lethe.Table.create(uri, SCHEMA, key="customer_id", s3=s3, gc_grace="1h")
        for k in range(files):
            t.append(_rows(k, rows))
        v = t.version
        before = _scan(uri, v, aws.endpoint)
        for c in range(ERASURES):
            t.erase([("customer_id", "=", c)], request_id=f"bench-erase-{c}")
        through = _scan(uri, v, aws.endpoint)
        from lethe.gc import collect

        collect(uri, retention="30d", erasure_grace=0, now=datetime.now(UTC) + timedelta(hours=2))
        mapped = _scan(uri, v, aws.endpoint)
    out = {"before": before, "lineage": through, "mapped": mapped}
    print(f"table: {files} files x {rows:,} rows; version v{v} scanned, then {ERASURES} erasures")
    for name in ("lineage", "mapped"):
        got = out[name]
        print(
            f"scan of v{v} after {ERASURES} erasures ({name}): {got['rows']:,} rows, "
            f"{got['requests']} requests ({got['requests'] / before['requests']:.2f}x), "
            f"{mib(got['bytes'])} ({got['bytes'] / before['bytes']:.2f}x), CPU "
            f"{got['cpu']:.3f} s ({got['cpu'] / before['cpu']:.2f}x); target <= {TARGET}x "
            f"of before: {before['requests']} requests, {mib(before['bytes'])}, "
            f"{before['cpu']:.3f} s"
        )
    return out
