"""A lake of three tables, one person forgotten everywhere (issue 29), beside Find and Forget.

Three tables over PEOPLE people and MONTHS months, written in time order (one file per time
slice, so one person's rows sit in many files): ``orders`` (~1 row per person per month),
``events`` (~EVENTS_PER_MONTH per person per month), ``tickets`` (~0.1 per person per month),
each with a ``customer_id`` mapped to the subject ``customer`` in one :class:`lethe.Lake`.
With ``LETHE_BENCH_LK_LAYOUT=clustered`` (the default) each table is created with
``cluster_by=customer_id`` and monthly windows and laid out by ``Table.compact`` first, as
issue 26 lays tables out; ``time`` keeps the time-ordered files.

Then, on the same objects, with one meter (a botocore hook on the one client: bytes up and
down, requests; moto runs in its own process so client CPU is ours):

* **Find and Forget's method** (awslabs/amazon-s3-find-and-forget): *find* reads the mapped
  column of every object (each footer, then each row group's ``customer_id`` chunk, what its
  Athena query reads); *forget* GETs every whole object holding a match, drops the rows row
  group by row group and PUTs the whole object back as its task writes it (pyarrow's
  defaults: Snappy; here to a scratch key, so the table stays as it was);
* **Lethe**: ``lake.forget_batch`` (recorded in the lake, one delete commit per table: the
  rows hidden at once), then the erasure window's run ``lake.splice_due`` (each file spliced
  once for every request of the window).

For 1 subject and for SUBJECTS subjects (default 1,000) in one window. It prints the
figures, a rough dollar estimate at 10 TB, and the issue's targets, each "met" or "not met".
Scale: ``LETHE_BENCH_LK_PEOPLE`` (1,000), ``LETHE_BENCH_LK_MONTHS`` (1),
``LETHE_BENCH_LK_EVENTS`` (100 events per person per month), ``LETHE_BENCH_LK_SLICES``
(40 event files per month), ``LETHE_BENCH_LK_SUBJECTS`` (1% of the people, as 1,000 of the
issue's 100,000), ``LETHE_BENCH_LK_PER_FILE`` (at most 1,000 subjects per clustered file; 0: files cut by
size alone, issue 26's default),
``LETHE_BENCH_LK_PAYLOAD`` (1,000 bytes of hex text a row), ``LETHE_BENCH_LK_ROW_GROUP_KIB``
(256). The defaults make a ~50 MiB events file per window (a minute or two on moto): a splice
must still send parts of >= 5 MiB (S3's multipart minimum), so files much larger than that
are where it beats a whole-object rewrite; the issue's 10 TB scale is not reachable here.
The issue's own lake (100,000 people, 100 events each, >= 500 files written, laid out by
size as issue 26 does; ~450 MiB, about 13 minutes on moto)::

    LETHE_BENCH_LK_PEOPLE=100000 LETHE_BENCH_LK_EVENTS=100 LETHE_BENCH_LK_PAYLOAD=64 \
    LETHE_BENCH_LK_SLICES=500 LETHE_BENCH_LK_PER_FILE=0 python -m bench bench_lake
"""

from __future__ import annotations

import io
import os
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import body_size, measure, mib, moto_process, new_bucket
from bench.floor import Floor, file_floor
from lethe.lake import ForgetRequest, Lake
from lethe.storage.store import make_s3_client
from lethe.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int64()),
        ("payload", pa.string()),
    ]
)
MONTH_US = 30 * 86_400 * 1_000_000
T0 = 1_767_225_600_000_000  # 2026-01-01
SEED = 29
# public prices (us-east-1): S3 GET $0.0004/1k, PUT $0.005/1k; Lambda $0.0000166667/GB-s at
# 1,769 MB (one vCPU); Find and Forget's own cost overview: $75.69 per run over 10 TB
GET_PRICE, PUT_PRICE, LAMBDA_GBS, LAMBDA_GB = 0.0004 / 1000, 0.005 / 1000, 0.0000166667, 1.769
FAF_DOCUMENTED_10TB = 75.69
TEN_TB = 10 * (1 << 40)


def _env(name: str, default: int) -> int:
    return int(os.environ.get(f"LETHE_BENCH_LK_{name}", default))


@dataclass(frozen=True, slots=True)
class Scale:
    people: int = field(default_factory=lambda: _env("PEOPLE", 1_000))
    months: int = field(default_factory=lambda: _env("MONTHS", 1))
    events: int = field(default_factory=lambda: _env("EVENTS", 100))
    slices: int = field(default_factory=lambda: _env("SLICES", 40))
    subjects: int = field(default_factory=lambda: _env("SUBJECTS", 0))  # 0: 1% of people
    per_file: int = field(default_factory=lambda: _env("PER_FILE", 1_000))
    payload: int = field(default_factory=lambda: _env("PAYLOAD", 1_000))
    row_group: int = field(default_factory=lambda: _env("ROW_GROUP_KIB", 256) << 10)
    layout: str = field(
        default_factory=lambda: os.environ.get("LETHE_BENCH_LK_LAYOUT", "clustered")
    )

    def tables(self) -> dict[str, tuple[float, int]]:
        """name -> (rows per person per month, files per month)."""
        return {
            "orders": (1.0, max(1, self.slices // 20)),
            "events": (float(self.events), self.slices),
            "tickets": (0.1, 1),
        }


# --- one meter -------------------------------------------------------------------------------
@dataclass(slots=True)
class Meter:
    up: int = 0
    down: int = 0
    gets: int = 0
    puts: int = 0
    other: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)  # bytes moved per kind of key
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def moved(self) -> int:
        return self.up + self.down

    @property
    def requests(self) -> int:
        return self.gets + self.puts + self.other

    by_req: dict[str, int] = field(default_factory=dict)  # requests per kind of key

    def add(self, key: str, n: int, op: str = "") -> None:
        """Count ``n`` bytes (and one request) under the key's kind: the operation (GET,
        ranged GET, PUT, part) and the key's prefix within its table (``data``, ``index``,
        ``_lethe``...)."""
        parts = key.split("/")
        kind = parts[2] if parts[0] == "tables" and len(parts) > 3 else parts[0]
        kind = f"{op} {kind}" if op else kind
        self.by_kind[kind] = self.by_kind.get(kind, 0) + n
        self.by_req[kind] = self.by_req.get(kind, 0) + 1

    def kinds(self) -> str:
        top = sorted(self.by_kind.items(), key=lambda kv: -kv[1])
        return ", ".join(f"{k} {mib(v)} / {self.by_req.get(k, 0)}" for k, v in top if v)


@contextmanager
def metered(client: Any) -> Iterator[Meter]:
    m = Meter()
    uid = uuid.uuid4().hex

    def key(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["bench_key"] = str(params.get("Key", ""))
        context["bench_ranged"] = bool(params.get("Range"))

    def before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        name = model.name
        with m.lock:
            if name in ("PutObject", "UploadPart"):
                n = body_size(params.get("body"))
                m.puts += 1
                m.up += n
                m.add(context.get("bench_key", ""), n, "PUT" if name == "PutObject" else "PART")
            elif name == "GetObject":
                m.gets += 1
            else:
                m.other += 1

    def got(http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if getattr(http_response, "status_code", 0) in (200, 206):
            n = int(parsed.get("ContentLength", 0) or 0)
            with m.lock:
                m.down += n
                op = "GET range" if context.get("bench_ranged") else "GET"
                m.add(context.get("bench_key", ""), n, op)

    ev = client.meta.events
    ev.register("before-parameter-build.s3", key, unique_id=f"{uid}-k")
    ev.register("before-call.s3", before, unique_id=f"{uid}-b")
    ev.register("after-call.s3.GetObject", got, unique_id=f"{uid}-g")
    try:
        yield m
    finally:
        ev.unregister("before-parameter-build.s3", unique_id=f"{uid}-k")
        ev.unregister("before-call.s3", unique_id=f"{uid}-b")
        ev.unregister("after-call.s3.GetObject", unique_id=f"{uid}-g")


# --- the lake --------------------------------------------------------------------------------
def _rows(rng: np.random.Generator, n: int, s: Scale, month: int, start: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    ts = T0 + month * MONTH_US + np.sort(rng.integers(0, MONTH_US, n))
    cust = rng.integers(0, s.people, n).astype(np.int64)
    noise = rng.integers(0, 16, (n, s.payload), dtype=np.uint8)
    text = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)[noise]  # poorly compressible
    offsets = np.arange(0, (n + 1) * s.payload, s.payload, dtype=np.int32)
    payload = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text.tobytes()))
    return pa.table(
        {
            "id": ids,
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "customer_id": cust,
            "payload": payload,
        },
        schema=SCHEMA,
    )


def build(client: Any, bucket: str, s: Scale) -> tuple[Lake, dict[str, Table]]:
    rng = np.random.default_rng(SEED)
    lake = Lake.create(f"s3://{bucket}/_lethe", s3=client)
    tables: dict[str, Table] = {}
    for name, (per_month, files) in s.tables().items():
        clustered = s.layout == "clustered"
        t = Table.create(
            f"s3://{bucket}/tables/{name}",
            SCHEMA,
            key="id",
            s3=client,
            gc_grace="1h",
            row_group_bytes=s.row_group,
            cluster_by=("customer_id",) if clustered else None,
            cluster_window=("ts", "30d") if clustered else None,
            cluster_file_subjects=(s.per_file or None) if clustered else None,
        )
        start = 0
        for month in range(s.months):
            n = round(per_month * s.people)
            for f in range(files):
                part = n // files + (1 if f < n % files else 0)
                if part:
                    t.append(_rows(rng, part, s, month, start))
                    start += part
        if clustered:
            t.compact()
        lake.map_subject("customer", table=t.uri, column="customer_id")
        tables[name] = Table.open(t.uri, s3=client)
    return lake, tables


# --- Find and Forget's method ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Figures:
    bytes_moved: int
    requests: int
    cpu: float
    wall: float
    objects_rewritten: int
    commits: int = 0  # max per table (Lethe)
    table_bytes: int = 0
    kinds: str = ""  # bytes moved per kind of key


def _chunk_ranges(body: bytes, column: str) -> list[tuple[int, int]]:
    md = pq.ParquetFile(io.BytesIO(body)).metadata
    out = []
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        for c in range(rg.num_columns):
            col = rg.column(c)
            if col.path_in_schema == column:
                start = col.dictionary_page_offset or col.data_page_offset
                out.append((start, start + col.total_compressed_size))
    return out


def find_and_forget(
    client: Any, bucket: str, tables: dict[str, Table], victims: set[int]
) -> Figures:
    """Find: per object, the footer and the ``customer_id`` chunks; forget: GET, drop, PUT
    the whole object of every object holding a victim (to a scratch key)."""
    keys = [(t.key_of(f.path), f.size) for t in tables.values() for f in t.manifest.files]
    # each object's chunk ranges come from its footer (whose GET is metered below); the
    # membership test decodes the column locally from an unmetered copy of the same bytes
    ranges = {key: _chunk_ranges(_cached(bucket, key), "customer_id") for key, _ in keys}
    wanted = pa.array(sorted(victims), pa.int64())

    def run() -> int:
        rewritten = 0
        for key, size in keys:
            tail = client.get_object(Bucket=bucket, Key=key, Range="bytes=-8")["Body"].read()
            flen = int.from_bytes(tail[:4], "little")
            footer = f"bytes={size - 8 - flen}-{size - 9}"
            client.get_object(Bucket=bucket, Key=key, Range=footer)["Body"].read()
            for a, b in ranges[key]:
                client.get_object(Bucket=bucket, Key=key, Range=f"bytes={a}-{b - 1}")["Body"].read()
            col = pq.read_table(io.BytesIO(_cached(bucket, key)), columns=["customer_id"])
            if not pc.any(pc.is_in(col.column(0), wanted)).as_py():
                continue
            whole = client.get_object(Bucket=bucket, Key=key)["Body"].read()
            client.put_object(
                Bucket=bucket, Key=f"faf-scratch/{key}", Body=_faf_rewrite(whole, wanted)
            )
            rewritten += 1
        return rewritten

    with metered(client) as m:
        r = measure(run)
    total = sum(size for _, size in keys)
    return Figures(m.moved, m.requests, r.cpu, r.wall, r.result, table_bytes=total, kinds=m.kinds())


def _faf_rewrite(whole: bytes, wanted: pa.Array) -> bytes:
    """The object without the victims' rows, as Find and Forget's Fargate task writes it
    (backend/ecs_tasks/delete_files/parquet_handler.py): each row group read, filtered and
    written in turn by a ``pyarrow.parquet.ParquetWriter`` with its defaults (Snappy: its
    docs/LIMITS.md says "Compression on Write: Snappy"). ``LETHE_BENCH_LK_FAF_CODEC=source``
    keeps the source's codec instead (a kinder Find and Forget, for comparison)."""
    pf = pq.ParquetFile(io.BytesIO(whole))
    schema = pf.schema_arrow.remove_metadata()
    kw: dict[str, Any] = {}
    if os.environ.get("LETHE_BENCH_LK_FAF_CODEC") == "source":
        kw["compression"] = pf.metadata.row_group(0).column(0).compression.lower()
    out = pa.BufferOutputStream()
    with pq.ParquetWriter(out, schema, **kw) as w:
        for i in range(pf.num_row_groups):
            rg = pf.read_row_group(i)
            w.write_table(rg.filter(pc.invert(pc.is_in(rg.column("customer_id"), wanted))))
    return bytes(out.getvalue())


_BODIES: dict[str, bytes] = {}


def _cached(bucket: str, key: str) -> bytes:
    """The object's bytes for the local membership test (outside the meter's count: the
    find's column bytes were metered by the ranged GETs above)."""
    if key not in _BODIES:
        _BODIES[key] = _unmetered_get(bucket, key)
    return _BODIES[key]


_PLAIN: list[Any] = []


def _unmetered_get(bucket: str, key: str) -> bytes:
    if not _PLAIN:
        _PLAIN.append(make_s3_client())
    return bytes(_PLAIN[0].get_object(Bucket=bucket, Key=key)["Body"].read())


def lethe_forget(
    client: Any, lake: Lake, tables: dict[str, Table], victims: list[int], tag: str
) -> Figures:
    before = {n: Table.open(t.uri, s3=client).version for n, t in tables.items()}
    reqs = [ForgetRequest("customer", [v], f"{tag}-{v}", "erase") for v in victims]
    closed = datetime.now(UTC) + lake.erasure_window + timedelta(seconds=1)

    def forget() -> tuple[list[Any], Any]:
        # hidden at once (one delete commit per table), then the window run splices each
        # file once for every request of the window (as the schedule would when it closes);
        # a lake handle opened cold (as a fresh Lambda would: every table's manifest and
        # segments read under the meter), kept for the window run
        cold = Lake.open(lake.uri, s3=client)
        return cold.forget_batch(reqs), cold.splice_due(now=closed)

    with metered(client) as m:
        r = measure(forget)
    results, window = r.result
    assert all(x.complete for x in results), "every request committed in every table"
    assert window.complete, "the window run spliced every file"
    commits = max(Table.open(t.uri, s3=client).version - before[n] for n, t in tables.items())
    return Figures(
        m.moved,
        m.requests,
        r.cpu,
        r.wall,
        window.files_spliced,
        commits=commits,
        kinds=m.kinds(),
    )


def floor_of(bucket: str, tables: dict[str, Table], victims: list[int]) -> Floor:
    """The physical floor (bench/floor.py) of taking ``victims``' rows out of every file that
    holds one (from unmetered copies of the objects)."""
    wanted = pa.array(sorted(victims), pa.int64())
    total = Floor()
    for t in tables.values():
        for f in t.manifest.files:
            body = _cached(bucket, t.key_of(f.path))
            col = pq.read_table(io.BytesIO(body), columns=["customer_id"]).column(0)
            removed = pc.is_in(col, wanted).to_numpy(zero_copy_only=False)
            total = total + file_floor(body, np.asarray(removed, dtype=bool))
    return total


# --- report ----------------------------------------------------------------------------------
def dollars(f: Figures, table_bytes: int, gets: float = 0.5) -> float:
    """Rough cost at 10 TB: requests (half GETs, half PUTs unless told) and client CPU as
    Lambda time, both scaled by 10 TB / the bench's table bytes."""
    k = TEN_TB / max(1, table_bytes)
    req = f.requests * k * (gets * GET_PRICE + (1 - gets) * PUT_PRICE)
    return req + f.cpu * k * LAMBDA_GB * LAMBDA_GBS


def run(scale: Scale | None = None) -> dict[str, Any]:
    s = scale or Scale()
    out: dict[str, Any] = {}
    with moto_process() as aws:
        client = make_s3_client()
        bucket = new_bucket(aws)
        built = measure(lambda: build(client, bucket, s))
        lake, tables = built.result
        files = sum(t.manifest.file_count for t in tables.values())
        table_bytes = sum(f.size for t in tables.values() for f in t.manifest.files)
        print(
            f"lake: {files} files, {mib(table_bytes)} in 3 tables "
            f"({', '.join(f'{n} {t.manifest.file_count}' for n, t in tables.items())}), "
            f"{s.people:,} people, {s.months} months, layout {s.layout} "
            f"(built in {built.wall:.0f} s)"
        )
        rng = np.random.default_rng(SEED + 1)
        people = rng.permutation(s.people)
        n = s.subjects or max(1, s.people // 100)
        cases = {
            "1 subject": [int(people[0])],
            f"{n:,} subjects": people[1 : 1 + n].tolist(),
        }
        print(
            f"{'case':<16} {'method':<16} {'bytes moved':>14} {'requests':>9} {'client CPU':>10} "
            f"{'objects rewritten':>17} {'commits/table':>13} {'$ at 10 TB':>10}"
        )
        for case, victims in cases.items():
            faf = find_and_forget(client, bucket, tables, set(victims))
            lt = lethe_forget(client, lake, tables, victims, case.split()[0])
            fl = floor_of(bucket, tables, victims)
            out[case] = {"faf": faf, "lethe": lt, "floor": fl}
            for name, f in (("Find and Forget", faf), ("Lethe", lt)):
                print(
                    f"{case:<16} {name:<16} {mib(f.bytes_moved):>14} {f.requests:>9,} "
                    f"{f.cpu:>9.2f}s {f.objects_rewritten:>17,} "
                    f"{(f.commits if name == 'Lethe' else '-'):>13} "
                    f"{dollars(f, table_bytes):>10.2f}"
                )
            print(
                f"{case:<16} {'floor':<16} {mib(fl.moved):>14} {fl.requests:>9,} "
                f"{fl.cpu:>9.2f}s {fl.files:>17,}   (Lethe/floor: bytes "
                f"{lt.bytes_moved / max(1, fl.moved):.2f}x, requests "
                f"{lt.requests / max(1, fl.requests):.2f}x, CPU {lt.cpu / max(1e-9, fl.cpu):.1f}x)"
            )
        for case, both in out.items():
            print(f"  {case}, Lethe's bytes by kind of key: {both['lethe'].kinds}")
        print(f"(Find and Forget's own overview: ${FAF_DOCUMENTED_10TB} a run over 10 TB)")
        one, many = out["1 subject"], out[f"{n:,} subjects"]
        r1 = one["faf"].bytes_moved / max(1, one["lethe"].bytes_moved)
        rn = many["faf"].bytes_moved / max(1, many["lethe"].bytes_moved)
        rows = [
            ("1 subject: Find and Forget bytes / Lethe bytes", f"{r1:,.1f}x", ">= 20x", r1 >= 20),
            (f"{n:,} subjects: same ratio", f"{rn:,.1f}x", ">= 2x", rn >= 2),
            (
                f"{n:,} subjects: commits per table",
                str(many["lethe"].commits),
                "<= 3",
                many["lethe"].commits <= 3,
            ),
            (
                "never more bytes than Find and Forget",
                f"{max(1 / r1, 1 / rn):.3f}x",
                "<= 1x",
                r1 >= 1 and rn >= 1,
            ),
        ]
        lt, faf, fl = many["lethe"], many["faf"], many["floor"]
        over_floor = min(o["lethe"].bytes_moved / max(1, o["floor"].moved) for o in (one, many))
        cpu_x = lt.cpu / max(1e-9, faf.cpu)
        usd_x = dollars(lt, table_bytes) / max(1e-9, dollars(faf, table_bytes))
        rows += [  # issue 37 item 5 (its scale: 100,000 people, 1,000 subjects)
            (
                f"{n:,} subjects: Lethe bytes / floor",
                f"{lt.bytes_moved / max(1, fl.moved):.2f}x",
                "<= 1.05x",
                lt.bytes_moved <= 1.05 * fl.moved,
            ),
            (f"{n:,} subjects: client CPU / Find and Forget", f"{cpu_x:.2f}x", "<= 1x", cpu_x <= 1),
            (
                f"{n:,} subjects: dollars / Find and Forget",
                f"{usd_x:.2f}x",
                "<= 0.8x",
                usd_x <= 0.8,
            ),
            (
                "the floor is one (Lethe bytes / floor)",
                f"{over_floor:.2f}x",
                ">= 1x",
                over_floor >= 1,
            ),
        ]
        print("\ntarget                                           now        target   verdict")
        for what, now, target, ok in rows:
            print(f"{what:<48} {now:>10} {target:>9}   {'met' if ok else 'NOT MET'}")
        out["targets"] = rows
    return out


if __name__ == "__main__":
    run()
