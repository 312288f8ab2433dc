"""Secondary indexes (issue 14): delete one customer (11-19 rows scattered over the table) by
an indexed column vs the unindexed path, at two table sizes. Target: <= 1 MiB read and
independent of table size (DESIGN §8). Also: an erase by key (the index scrubbed through the
erased rows' values), a delete after it (the spliced file answered through its index origin:
index cost, not a column scan), and the overhead of maintaining the index on append."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from bench.common import measure, moto_process, new_bucket
from devtools.datagen import SCHEMA, generate
from lethe.erasure.deletes import DeleteRequest
from lethe.table import Table

TARGET_DOWN = 1 << 20
APPEND_REPEAT = 12


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
        "batch of 1000": (
            t,
            lambda: t.delete_batch(
                [DeleteRequest([("customer_id", "=", c)]) for c in range(10_000, 11_000)]
            ),
        ),
        "erase by key": (t, lambda: t.erase([("id", "=", rows // 2)], request_id="bench")),
        "after erase": (t, lambda: t.delete([("customer_id", "=", 4646)])),
    }
    sizes: dict[str, int] = {}
    for name, (who, fn) in cases.items():
        if name == "erase by key":
            sizes = {p.path: p.size for ix in t.manifest.indexes for r in ix.runs for p in r.pieces}
        before = who.io
        m = measure(fn)
        d = who.io - before
        r = m.result
        hit = r.num_rows if isinstance(r, pa.Table) else getattr(r, "rows_deleted", 0)
        if name == "after erase":  # every live file is answered through the index
            (ix,) = t.manifest.indexes
            assert all(ix.covers(f) for f in t.manifest.files)
        print(
            f"  {name:<15}{hit:>6} rows{d.count('get'):>6} GETs{d.puts:>5} PUTs"
            f"{d.bytes_downloaded:>14,} B down{d.bytes_uploaded:>14,} B up{m.wall:>8.3f} s"
        )
        out[name] = {"gets": d.count("get"), "down": d.bytes_downloaded, "up": d.bytes_uploaded}
        if name == "erase by key":  # the index's share: pieces read whole and rewritten
            old = [sizes[p] for e in t.manifest.erasures for p in e.superseded if p in sizes]
            print(f"    of which the index scrub: {len(old)} piece(s) of {sum(old):,} B each way")
    out["append"] = _append_overhead(bucket, rows)
    (ix,) = t.manifest.indexes
    pieces = [p for r in ix.runs for p in r.pieces]
    print(
        f"  index: {len(pieces)} piece(s), {sum(p.size for p in pieces):,} B, "
        f"{sum(p.entries for p in pieces):,} entries"
    )
    return out


def _append_overhead(bucket: str, rows: int) -> dict[str, float]:
    """Client CPU and bytes of :data:`APPEND_REPEAT` appends of the same batch (a tenth of
    the table, at least 100k rows) to an indexed and to a plain table (target: <= 15% more),
    for the demo's narrow rows (~12 encoded bytes) and for the peer bench's rows (~160
    bytes: ``bench_readwrite``'s widened events). An entry costs the same few bytes either
    way, so the share depends on the row width. Two figures: the median append (an append
    that only writes its run) and the mean (amortized: every few appends also merge the
    smallest runs, the LSM step that keeps a probe to a few runs)."""
    from bench.bench_readwrite import data as wide

    n, base = max(100_000, rows // 10), min(rows, 200_000)
    shapes: dict[str, Callable[[int, int], pa.Table]] = {
        "narrow": lambda start, k: generate(start, k, customers=max(1, rows // 16)),
        "peer width": lambda start, k: _shifted(wide(k, seed=start), start),
    }
    out: dict[str, float] = {}
    for shape, make in shapes.items():
        batch = make(base, n)
        got: dict[str, tuple[float, float, float]] = {}
        for kind, indexes in (("plain", ()), ("indexed", ("customer_id",))):
            uri = f"s3://{bucket}/append-{kind}-{shape.replace(' ', '-')}-{rows}"
            t = Table.create(
                uri, batch.schema, key="id", indexes=indexes, target_file_bytes=256 << 20
            )
            t.append(make(0, base))
            cpus, moved = [], 0
            for _ in range(APPEND_REPEAT):
                before = t.io
                cpus.append(measure(lambda t=t, b=batch: t.append(b)).cpu)  # type: ignore[misc]
                d = t.io - before
                moved += d.bytes_uploaded + d.bytes_downloaded
            got[kind] = (statistics.median(cpus), statistics.fmean(cpus), moved / APPEND_REPEAT)
        (pm, pa_, pb), (im, ia, ib) = got["plain"], got["indexed"]
        cpu_med, cpu_mean, io = im / pm - 1, ia / pa_ - 1, ib / pb - 1
        print(
            f"  append {n:,} {shape} rows, {APPEND_REPEAT} times: CPU median {pm:.3f} s plain, "
            f"{im:.3f} s indexed (+{cpu_med:.1%}); mean with merges {pa_:.3f} -> {ia:.3f} s "
            f"(+{cpu_mean:.1%}); bytes an append {pb:,.0f} -> {ib:,.0f} (+{io:.1%}); "
            "target <= +15%"
        )
        key = shape.replace(" ", "_")
        out |= {
            f"{key}_cpu_overhead_median": cpu_med,
            f"{key}_cpu_overhead_mean": cpu_mean,
            f"{key}_bytes_overhead": io,
        }
    return out


def _shifted(t: pa.Table, start: int) -> pa.Table:
    """``t`` with ids from ``start`` (the widened events all start at 0)."""
    ids = pa.array(range(start, start + t.num_rows), pa.int64())
    return t.set_column(t.schema.get_field_index("id"), t.schema.field("id"), ids)


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
        after = r["after erase"]["down"]  # type: ignore[index]
        ok = "ok" if max(idx, after) <= TARGET_DOWN else "MISSED"
        print(
            f"  {int(rows):>10,} rows: indexed {idx:>10,} B  after an erase {after:>10,} B  "
            f"unindexed {plain:>12,} B  [{ok}]"
        )
    return out


if __name__ == "__main__":
    run()
