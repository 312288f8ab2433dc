"""Secondary indexes (issue 14): delete one customer (11-19 rows scattered over the table) by
an indexed column vs the unindexed path, at two table sizes. Target: <= 1 MiB read and
independent of table size (DESIGN §8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from bench.common import measure, moto_process, new_bucket
from devtools.demo import SCHEMA, generate
from lethe.table import Table

TARGET_DOWN = 1 << 20


def _one_size(bucket: str, rows: int) -> dict[str, object]:
    uri = f"s3://{bucket}/events-{rows}"
    customers = max(1, rows // 16)  # ~16 rows per customer, as in the peer bench
    t = Table.create(uri, SCHEMA, key="id", target_file_bytes=256 << 20, row_group_bytes=16 << 20)
    t.append(generate(0, rows, customers=customers))
    files = t.manifest.files
    groups = sum(len(f.row_groups) for f in files)
    print(
        f"table: {rows:,} rows, {len(files)} file(s), {groups} row groups, {customers:,} customers"
    )
    out: dict[str, object] = {}
    reader = Table.open(uri)
    cases: dict[str, tuple[Table, Callable[[], Any]]] = {
        "unindexed": (t, lambda: t.delete([("customer_id", "=", 4242)])),
        "backfill": (t, lambda: t.create_index("customer_id")),
        "indexed": (t, lambda: t.delete([("customer_id", "=", 4343)])),
        "indexed lookup": (
            reader,
            lambda: reader.refresh().scan(filters=[("customer_id", "=", 4444)]),
        ),
    }
    for name, (who, fn) in cases.items():
        before = who.io
        m = measure(fn)
        d = who.io - before
        r = m.result
        hit = r.num_rows if isinstance(r, pa.Table) else getattr(r, "rows_deleted", 0)
        print(
            f"  {name:<15}{hit:>6} rows{d.count('get'):>6} GETs{d.puts:>5} PUTs"
            f"{d.bytes_downloaded:>14,} B down{d.bytes_uploaded:>14,} B up{m.wall:>8.3f} s"
        )
        out[name] = {"gets": d.count("get"), "down": d.bytes_downloaded, "up": d.bytes_uploaded}
    (ix,) = t.manifest.indexes
    pieces = [p for r in ix.runs for p in r.pieces]
    print(
        f"  index: {len(pieces)} piece(s), {sum(p.size for p in pieces):,} B, "
        f"{sum(p.entries for p in pieces):,} entries"
    )
    return out


def run(sizes: tuple[int, ...] = (400_000, 1_600_000)) -> dict[str, object]:
    out: dict[str, object] = {}
    with moto_process() as aws:
        bucket = new_bucket(aws)
        for rows in sizes:
            out[str(rows)] = _one_size(bucket, rows)
    print(
        "delete one customer by an indexed column: bytes down vs target <= 1 MiB, size-independent"
    )
    for rows, r in out.items():
        idx = r["indexed"]["down"]  # type: ignore[index]
        plain = r["unindexed"]["down"]  # type: ignore[index]
        ok = "ok" if idx <= TARGET_DOWN else "MISSED"
        print(f"  {int(rows):>10,} rows: indexed {idx:>10,} B  unindexed {plain:>12,} B  [{ok}]")
    return out


if __name__ == "__main__":
    run()
