"""Splice vs. full rewrite: erase 1 row of a ~256 MiB file with 16 MiB row groups.

Reports bytes downloaded / uploaded / copied server-side, client CPU seconds and wall time
for both, in one run, with moto's server in its own process (so client CPU is ours). Target
(DESIGN §8): bytes moved <= 1.1 x (row group + index region + footer) (+ up to 5 MiB when a
neighbour range is under the part minimum); client CPU >= 5x less than the rewrite.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import measure, mib, moto_process, new_bucket
from lethe.parquet.footer import index_region, parse_tail
from lethe.table import Table
from lethe.writer import WriteOptions, write_files

SCHEMA = pa.schema([("id", pa.int64(), False), ("name", pa.string()), ("blob", pa.binary())])


def data(start: int, n: int, width: int = 1000) -> pa.Table:
    rng = np.random.default_rng(start)
    raw = rng.integers(0, 256, n * width, dtype=np.uint8).tobytes()
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
    blob = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(raw)])
    ids = np.arange(start, start + n, dtype=np.int64)
    names = pc.binary_join_element_wise("name-", pa.array(ids).cast(pa.string()), "")
    return pa.table({"id": ids, "name": names, "blob": blob}, schema=SCHEMA)


def batches(total_rows: int, step: int = 16_384) -> pa.RecordBatchReader:
    def gen():  # type: ignore[no-untyped-def]
        for s in range(0, total_rows, step):
            yield from data(s, min(step, total_rows - s)).to_batches()

    return pa.RecordBatchReader.from_batches(SCHEMA, gen())


def full_rewrite(t: Table, victim: int) -> dict[str, int]:
    """What a rewrite-based engine does: download, filter, re-encode, upload the whole file."""
    f = t.manifest.files[0]
    store = t.store.child()
    body = store.get(t.key_of(f.path), etag=f.etag).body
    tbl = pq.read_table(pa.BufferReader(body))
    kept = tbl.filter(pc.not_equal(tbl["id"], victim))
    opts = WriteOptions(key="id", target_file_bytes=1 << 40, row_group_bytes=16 << 20)
    write_files(
        store,
        t.catalog.prefix,
        pa.RecordBatchReader.from_batches(SCHEMA, kept.to_batches()),
        SCHEMA,
        opts,
    )
    s = store.stats.snapshot()
    return {"down": s.bytes_downloaded, "up": s.bytes_uploaded, "copied": s.bytes_copied}


def run(size_mib: int | None = None) -> dict[str, float]:
    size_mib = size_mib or int(os.environ.get("LETHE_BENCH_SPLICE_MIB", "256"))
    rows = size_mib * 1024  # ~1 KiB per row
    out: dict[str, float] = {}
    with moto_process() as aws:
        uri = f"s3://{new_bucket(aws)}/blobs"
        t = Table.create(
            uri, SCHEMA, key="id", target_file_bytes=(size_mib + 64) << 20, row_group_bytes=16 << 20
        )
        t.append(batches(rows))
        [f] = t.manifest.files
        tail = t.store.get(t.key_of(f.path), suffix=min(f.size, 1 << 20)).body
        ft = parse_tail(tail, f.size)
        region = index_region(ft)
        region_bytes = region.length if region else 0
        rg_len = max(rg.length for rg in f.row_groups)
        print(
            f"file: {mib(f.size)}, {len(f.row_groups)} row groups (largest {mib(rg_len)}), "
            f"index region {region_bytes:,} B, footer {ft.length:,} B"
        )
        victim = rows // 2 + 3
        rw = measure(lambda: full_rewrite(Table.open(uri), victim))
        sp = measure(lambda: Table.open(uri).erase([("id", "=", victim)]))
        r = sp.result
        moved = r.bytes_downloaded + r.bytes_uploaded
        bound = 1.1 * (rg_len + region_bytes + ft.length)
        print(
            f"{'':<14}{'downloaded':>14}{'uploaded':>14}{'copied (S3)':>14}{'client CPU':>12}{'wall':>9}"
        )
        print(
            f"{'full rewrite':<14}{mib(rw.result['down']):>14}{mib(rw.result['up']):>14}{mib(rw.result['copied']):>14}{rw.cpu:>11.2f}s{rw.wall:>8.2f}s"
        )
        print(
            f"{'splice':<14}{mib(r.bytes_downloaded):>14}{mib(r.bytes_uploaded):>14}{mib(r.bytes_copied):>14}{sp.cpu:>11.2f}s{sp.wall:>8.2f}s"
        )
        print(
            f"splice moved {mib(moved)} over the wire vs bound 1.1 x (row group + index + footer) = {mib(bound)} "
            f"(+5 MiB allowance) -> {'OK' if moved <= bound + (5 << 20) else 'OVER'}; "
            f"client CPU {rw.cpu / max(sp.cpu, 1e-9):.1f}x less than the rewrite (target >= 5x); "
            f"requests: {r.io.describe()}"
        )
        out = {
            "moved": moved,
            "bound": bound,
            "cpu_ratio": rw.cpu / max(sp.cpu, 1e-9),
            "splice_wall": sp.wall,
            "rewrite_wall": rw.wall,
        }
    return out


if __name__ == "__main__":
    run()
