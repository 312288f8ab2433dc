"""Metadata at scale (issue 12): tables of 1k, 10k and 100k live files.

Per size and manifest format: bytes uploaded, PUTs and wall time of a 1-key delete and of a
one-file append, wall and bytes of ``Table.open`` and of open + lookup, and the CAS attempts
of 8 concurrent deleters. Targets at 100k files (format 2): a 1-key delete uploads <= 1 MiB;
delete, append and open + lookup within 2x of their 1k-file figure; open <= 0.2 s.

The live files are synthetic entries committed through the public commit path
(``Table.commit_files``), each with the stats of a real file and its own key range; only the
files the measured operations touch exist (a real one that holds the keys deleted and looked
up, and the appended one). Format 1 (one inline manifest, what Lethe wrote before segments;
Lethe now only reads it, and its next commit upgrades it) is measured up to 10k files for
comparison, reads only: the table is written as format 2, then its last manifest rewritten as
a format-1 writer committed it (``devtools.format1``). A format-1 commit rewrote the whole
inline root: at 100k files ~85 MiB per commit (the root size below is what each commit
uploaded).

``python -m bench bench_scale`` (add ``LETHE_BENCH_SCALE=1000,10000`` to pick sizes).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
import uuid
from dataclasses import dataclass

import pyarrow as pa

from bench.common import measure, mib, moto_process, new_bucket
from devtools.format1 import rewrite_as_format1
from lethe.catalog.manifest import ColumnStats, DataFile, RowGroupInfo
from lethe.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)
ROWS_PER_FILE = 1_000
CHUNK = 5_000  # synthetic entries per building commit


def size(n: int) -> str:
    return mib(n) if n >= 1 << 20 else f"{n / 1024:,.1f} KiB"


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": ids,
            "customer_id": [i % 977 for i in ids],
            "payload": [f"payload-{i}" for i in ids],
        },
        schema=SCHEMA,
    )


def _synthetic(real: DataFile, i: int) -> DataFile:
    """Entry ``i``: the real file's shape, its own path and key range."""
    lo, hi = i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE - 1
    cols = dict(real.columns)
    cols["id"] = ColumnStats(min=lo, max=hi, null_count=0)
    return real.model_copy(
        update={
            "path": f"data/2026/01/01/00/{uuid.UUID(int=i).hex}.parquet",
            "columns": cols,
            "row_groups": tuple(
                RowGroupInfo(rows=g.rows, offset=g.offset, length=g.length, key_min=lo, key_max=hi)
                for g in real.row_groups
            ),
        }
    )


@dataclass(frozen=True, slots=True)
class Row:
    layout: str
    files: int
    root_bytes: int
    open_wall: float
    open_down: int
    lookup_wall: float
    lookup_down: int
    # commits (None for format 1, which Lethe no longer writes)
    delete_up: int | None = None
    delete_puts: int | None = None
    delete_wall: float | None = None
    append_up: int | None = None
    append_wall: float | None = None
    cas_attempts: int | None = None


def build(uri: str, files: int) -> int:
    """A table of ``files`` live files; returns the first key of the real one (the last)."""
    t = Table.create(uri, SCHEMA, key="id", target_file_bytes=1 << 20, row_group_bytes=1 << 20)
    real_start = (files - 1) * ROWS_PER_FILE
    real = t.write_data_files(_rows(real_start, ROWS_PER_FILE))
    assert len(real) == 1
    for lo in range(0, files - 1, CHUNK):
        batch = [_synthetic(real[0], i) for i in range(lo, min(lo + CHUNK, files - 1))]
        t.commit_files(batch, written_at=time.time())
    t.commit_files(real, written_at=time.time())
    assert t.manifest.file_count == files
    return real_start


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


def measure_size(uri: str, files: int, layout: str, repeat: int = 3) -> Row:
    start = build(uri, files)
    if layout == "inline":
        rewrite_as_format1(Table.open(uri), [Table.open(uri).version])
    opens, lookups = [], []
    for _ in range(repeat):
        o = measure(lambda: Table.open(uri))
        opens.append(o.wall)
        open_down = o.result.io.bytes_downloaded

        def open_lookup(k: int) -> Table:
            h = Table.open(uri)
            assert h.lookup(k).num_rows == 1
            return h

        lk = measure(lambda: open_lookup(start + 17))
        lookups.append(lk.wall)
        lookup_down = lk.result.io.bytes_downloaded
    t = Table.open(uri)
    root_bytes = len(t.store.get(t.key_of(f"manifest/v{t.version:08d}.json")).body)
    reads = Row(layout, files, root_bytes, _median(opens), open_down, _median(lookups), lookup_down)
    if layout == "inline":
        return reads
    t.lookup(start)  # warm the footer, as a delete Lambda's previous request would
    deletes, appends = [], []
    for i in range(repeat):
        io1 = t.io
        dm = measure(lambda i=i: t.delete([("id", "=", start + 1 + i)]))
        d = t.io - io1
        assert dm.result.rows_deleted == 1
        deletes.append(dm.wall)
        new = t.write_data_files(_rows(10**9 + i * 1_000, 100))
        io2 = t.io
        am = measure(lambda new=new: t.commit_files(new, written_at=time.time()))
        a = t.io - io2
        appends.append(am.wall)
    attempts: list[int] = []
    lock = threading.Lock()

    def deleter(k: int) -> None:
        r = Table.open(uri).delete([("id", "=", k)])
        with lock:
            attempts.append(r.attempts)

    threads = [threading.Thread(target=deleter, args=(start + 100 + i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return dataclasses.replace(
        reads,
        delete_up=d.bytes_uploaded,
        delete_puts=d.puts,
        delete_wall=_median(deletes),
        append_up=a.bytes_uploaded,
        append_wall=_median(appends),
        cas_attempts=sum(attempts),
    )


def _commits(r: Row) -> str:
    if r.delete_up is None or r.append_up is None:
        return "commits: n/a (format 1 is read only; its next commit upgrades it)"
    return (
        f"delete 1 key: up {size(r.delete_up)} in {r.delete_puts} PUTs, {r.delete_wall:.3f}s; "
        f"append 1 file: up {size(r.append_up)}, {r.append_wall:.3f}s; "
        f"8 racing deleters: {r.cas_attempts} CAS attempts"
    )


def run() -> dict[str, object]:
    sizes = [int(x) for x in os.environ.get("LETHE_BENCH_SCALE", "1000,10000,100000").split(",")]
    rows: list[Row] = []
    with moto_process() as aws:
        bucket = new_bucket(aws)
        for layout in ("inline", "segmented"):
            for n in sizes:
                if layout == "inline" and n > 10_000:
                    continue
                r = measure_size(f"s3://{bucket}/scale-{layout}-{n}", n, layout)
                rows.append(r)
                print(
                    f"{layout:<9} {n:>7,} files: root {size(r.root_bytes)}; "
                    f"open {r.open_wall:.3f}s ({size(r.open_down)} down); open+lookup "
                    f"{r.lookup_wall:.3f}s ({size(r.lookup_down)} down); {_commits(r)}",
                    flush=True,
                )
    seg = {r.files: r for r in rows if r.layout == "segmented"}
    if 1_000 in seg and max(seg) >= 100_000:
        small, big = seg[1_000], seg[max(seg)]
        print(f"targets at {big.files:,} files (format 2):")
        checks = [
            ("1-key delete uploads", size(big.delete_up), "<= 1 MiB", big.delete_up <= 1 << 20),
            (
                "delete wall vs 1k",
                f"{big.delete_wall / small.delete_wall:.2f}x",
                "<= 2x",
                big.delete_wall <= 2 * small.delete_wall,
            ),
            (
                "append wall vs 1k",
                f"{big.append_wall / small.append_wall:.2f}x",
                "<= 2x",
                big.append_wall <= 2 * small.append_wall,
            ),
            (
                "open+lookup wall vs 1k",
                f"{big.lookup_wall / small.lookup_wall:.2f}x",
                "<= 2x",
                big.lookup_wall <= 2 * small.lookup_wall,
            ),
            ("open", f"{big.open_wall:.3f}s", "<= 0.2 s", big.open_wall <= 0.2),
        ]
        for name, got, target, ok in checks:
            print(f"  {name:<24} {got:>12}   target {target:<9} {'met' if ok else 'MISSED'}")
    return {f"{r.layout}-{r.files}": r for r in rows}


if __name__ == "__main__":
    from lethe.process import run_main

    run_main(run)
