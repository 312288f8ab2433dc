"""Point lookups: whole row groups (before page-level reads) vs pages through the page index.

The peer-bench layout: 1.6M rows in one ~256 MiB file of 16 MiB row groups with ~1 MiB
pages (pyarrow's defaults: 1 MiB data pages, at most 20,000 rows a page). Lookups of random
keys on a warm snapshot (footer and page index cached), moto's server in its own process (so
client CPU is ours). Targets (DESIGN §8): <= 2 MiB downloaded, <= 3 GETs, wall below the
row-group read's. Requests, bytes and client CPU are judged on moto; wall on s3rver, to which
the table is copied (moto reads the whole object for every ranged GET, so there two small GETs
cost more than one 16 MiB GET; s3rver, like S3, streams the range). ``LETHE_BENCH_S3RVER=0``
skips s3rver.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from bench.common import Unavailable, measure, mib, moto_process, new_bucket, s3rver_copy
from lethe.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int32()),
        ("payload", pa.string()),
    ]
)
_ALPHABET = np.frombuffer(
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8
)


def data(start: int, n: int, width: int = 200) -> pa.Table:
    """Rows ``start..start+n``: ~160 bytes each once compressed (random base64 payloads)."""
    rng = np.random.default_rng(start)
    ids = np.arange(start, start + n, dtype=np.int64)
    raw = _ALPHABET[rng.integers(0, 64, n * width)].tobytes()
    offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32))
    payload = pa.Array.from_buffers(pa.string(), n, [None, offsets.buffers()[1], pa.py_buffer(raw)])
    return pa.table(
        {
            "id": ids,
            "event_time": pa.array(1_700_000_000_000_000 + ids * 1000, SCHEMA.field(1).type),
            "customer_id": pa.array(rng.integers(0, 100_000, n).astype(np.int32)),
            "payload": payload,
        },
        schema=SCHEMA,
    )


def batches(rows: int, step: int = 65_536) -> pa.RecordBatchReader:
    def gen() -> Iterator[pa.RecordBatch]:
        for s in range(0, rows, step):
            yield from data(s, min(step, rows - s)).to_batches()

    return pa.RecordBatchReader.from_batches(SCHEMA, gen())


def _lookups(t: Table, keys: list[int], page_index: bool) -> dict[str, float]:
    downs, gets, walls, cpus = [], [], [], []
    for k in keys:
        before = t.io
        m = measure(lambda k=k: t.lookup(k, page_index=page_index))
        d = t.io - before
        assert m.result.num_rows == 1 and m.result["id"][0].as_py() == k
        downs.append(d.bytes_downloaded)
        gets.append(d.count("get"))
        walls.append(m.wall)
        cpus.append(m.cpu)
    return {
        "down": statistics.median(downs),
        "down_max": max(downs),
        "gets": statistics.median(gets),
        "gets_max": max(gets),
        "wall": statistics.median(walls),
        "cpu": statistics.median(cpus),
    }


def _table(rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"{'read':<12}{'downloaded':>22}{'GETs':>10}{'wall':>10}{'client CPU':>12}")
    for name, r in rows:
        print(
            f"{name:<12}{mib(r['down']):>12} [{mib(r['down_max'])}]"
            f"{r['gets']:>5.0f} [{r['gets_max']:.0f}]{r['wall']:>9.3f}s{r['cpu']:>11.3f}s"
        )


def _both(t: Table, keys: list[int]) -> dict[str, dict[str, float]]:
    """Row-group and page-level lookups of ``keys`` on ``t`` (warmed first)."""
    t.lookup(keys[0])  # warm: footer and page index of the file cached
    out = {name: _lookups(t, keys, pi) for name, pi in (("row group", False), ("page level", True))}
    _table(list(out.items()))
    return out


def run(
    rows: int | None = None, n_keys: int = 15, *, s3rver: bool | None = None
) -> dict[str, dict[str, float]]:
    """Lookups on moto (requests, bytes, client CPU) and, unless ``s3rver`` is False (or
    ``LETHE_BENCH_S3RVER=0``), the same lookups on s3rver (wall)."""
    rows = rows or int(os.environ.get("LETHE_BENCH_LOOKUP_ROWS", "1600000"))
    if s3rver is None:
        s3rver = os.environ.get("LETHE_BENCH_S3RVER", "1") != "0"
    out: dict[str, dict[str, float]] = {}
    with moto_process() as aws:
        bucket = new_bucket(aws)
        uri = f"s3://{bucket}/lookups"
        t = Table.create(
            uri, SCHEMA, key="id", target_file_bytes=320 << 20, row_group_bytes=16 << 20
        )
        t.append(batches(rows))
        f = t.manifest.files[0]
        print(
            f"table: {rows:,} rows, {len(t.manifest.files)} file(s) of {mib(f.size)}, "
            f"{len(f.row_groups)} row groups (largest {mib(max(g.length for g in f.row_groups))})"
        )
        keys = np.random.default_rng(3).choice(rows, n_keys, replace=False).tolist()
        t = Table.open(uri)
        print(
            f"lookup of 1 key on a warm snapshot, median of {n_keys} random keys (max in "
            f"brackets), moto"
        )
        out |= _both(t, keys)
        rg, pg = out["row group"], out["page level"]
        # stock moto reads the whole object for every ranged GET: time a 1-byte GET of it
        key = t.key_of(f.path)
        fixed = statistics.median(
            measure(lambda: t.store.get(key, etag=f.etag, start=0, end=1)).wall for _ in range(5)
        )
        print(
            f"moto reads the whole object for every ranged GET: {fixed:.3f}s a GET (timed with a "
            f"1-byte GET), so about {rg['gets'] * fixed:.2f}s of the row-group read's wall and "
            f"{pg['gets'] * fixed:.2f}s of the page-level read's: on moto, judge by requests, "
            f"bytes and client CPU"
        )
        wall_on = "moto"
        if s3rver:
            try:
                with s3rver_copy(aws, bucket, "lookups/") as rv:
                    print("the same lookups on s3rver (a ranged GET streams the range, as on S3)")
                    on = _both(Table.open(uri, s3=rv), keys)
                out |= {f"{k} (s3rver)": v for k, v in on.items()}
                wall_on = "s3rver"
            except Unavailable as e:
                print(f"(no s3rver: {e}; walls below are moto's)")
        wrg = out.get("row group (s3rver)", rg)["wall"]
        wpg = out.get("page level (s3rver)", pg)["wall"]
        ok_down = pg["down_max"] <= 2 << 20
        ok_gets = pg["gets_max"] <= 3
        ok_wall = wpg < wrg
        print(
            f"targets: <= 2 MiB down -> {'OK' if ok_down else 'OVER'} ({mib(pg['down_max'])} max); "
            f"<= 3 GETs -> {'OK' if ok_gets else 'OVER'} ({pg['gets_max']:.0f} max); "
            f"wall below the row-group read ({wall_on}) -> {'OK' if ok_wall else 'SLOWER'} "
            f"({wpg / max(wrg, 1e-9):.2f}x its wall; on moto "
            f"{pg['wall'] / max(rg['wall'], 1e-9):.2f}x); "
            f"{rg['down'] / max(pg['down'], 1):.1f}x fewer bytes, "
            f"{rg['cpu'] / max(pg['cpu'], 1e-9):.1f}x less client CPU"
        )
    return out


if __name__ == "__main__":
    run()
