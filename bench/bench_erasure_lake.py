"""Erasure on the layout people have (issue 26): a time-ordered event table of many files.

An event table as a new user writes it: FILES appends of ROWS rows each (one file per
time slice), ``customer_id`` drawn Zipf s=0.7 from CUSTOMERS customers, an index on
``customer_id``; one person's rows are spread over most files. On a fresh copy of the table
for each, it measures (public API only, moto in its own process so client CPU is ours):

1. erasing the median customer (by row count), 2. erasing the heaviest customer,
3. deleting 0.1% of the customers then ``purge()``, 4. deleting 1% then ``purge()``;

each against the baseline a rewrite-based engine pays, a copy-on-write of exactly the
touched files (GET, ``pq.read_table``, filter, ``pq.write_table`` in the table's codec,
PUT), measured the same way. Then the same table created with ``cluster_by=("customer_id",)``
and time windows, appended the same way and laid out by a clustering compaction
(``Table.compact``: each window's rows sorted by customer into the window's own file), with
the same operations measured again. It prints the figures, then issue 26's targets
next to them, each "met" or "not met" (speed is judged by bytes, requests, commits and
client CPU; wall times are printed, never judged).

Figures: files touched (files the operation replaced or removed) / total; bytes over the
wire (down + up) and copied server-side (the store's :class:`lethe.storage.store.IOCounters`);
requests; commits (version delta); metadata uploaded (PUT and part bodies to keys outside
``data/``, metered by a botocore hook on the client) vs the data bytes moved.

Scale: ``LETHE_BENCH_LAKE_FILES`` (256), ``LETHE_BENCH_LAKE_ROWS`` (20,000 per file),
``LETHE_BENCH_LAKE_CUSTOMERS`` (20,000); the clustered table's ``cluster_window`` is
``LETHE_BENCH_LAKE_WINDOW_HOURS`` (24: one day of ``event_time``, 24 appends) and its
``cluster_file_subjects`` ``LETHE_BENCH_LAKE_SUBJECTS`` (100 customers per file at most).
At the default scale it builds seven 256-file tables through ``append`` (most of its ~11
minutes on 2 shared cores); ``LETHE_BENCH_LAKE_FILES=128`` halves that.
"""

from __future__ import annotations

import gc
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import Moved, body_size, measure, mib, moto_process, new_bucket
from bench.floor import Floor, file_floor
from bench.upkeep import index_cpu
from devtools.local.server import LocalAws
from lethe.catalog.manifest import DataFile
from lethe.maintenance.clustering import ClusterSpec, file_windows
from lethe.storage.store import S3Store, make_s3_client
from lethe.table import Table

SCHEMA = pa.schema(
    [
        ("id", pa.int64(), False),
        ("event_time", pa.timestamp("us", tz="UTC")),
        ("customer_id", pa.int64()),
        ("payload", pa.string()),
    ]
)
ZIPF_S = 0.7
SEED = 26
CODEC = (
    "zstd"  # the library's default codec (lethe.writing.writer.WriteOptions); the CoW uses it too
)
T0_US = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
SLICE_US = 3_600_000_000  # one time slice (one append, one file) per hour

EVENT_TYPES = ["page_view", "add_to_cart", "checkout", "search", "login", "logout"]
SECTIONS = ["products", "category", "account", "cart", "help", "offers", "search"]
DEVICES = ["desktop", "mobile", "tablet"]
REFERRERS = ["https://www.google.com/", "https://news.example.org/", "direct", "email-campaign"]
AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64) Chrome/124.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4) Mobile",
    "Mozilla/5.0 (Macintosh; Mac OS X 14_4) Safari/605",
    "Mozilla/5.0 (X11; Linux x86_64) Firefox/125.0",
]


@dataclass(frozen=True, slots=True)
class Scale:
    files: int = 256
    rows: int = 20_000
    customers: int = 20_000
    window_hours: int = 24
    subjects: int = 100

    @classmethod
    def from_env(cls) -> Scale:
        files = int(os.environ.get("LETHE_BENCH_LAKE_FILES", "256"))
        return cls(
            files=files,
            rows=int(os.environ.get("LETHE_BENCH_LAKE_ROWS", "20000")),
            customers=int(os.environ.get("LETHE_BENCH_LAKE_CUSTOMERS", "20000")),
            window_hours=max(1, int(os.environ.get("LETHE_BENCH_LAKE_WINDOW_HOURS", "24"))),
            subjects=max(1, int(os.environ.get("LETHE_BENCH_LAKE_SUBJECTS", "100"))),
        )


# --- the data ----------------------------------------------------------------------------------
class Events:
    """The event rows, time slice by time slice, regenerated from fixed seeds on demand."""

    def __init__(self, scale: Scale) -> None:
        self.scale = scale
        ranks = np.arange(1, scale.customers + 1, dtype=np.float64)
        p = ranks**-ZIPF_S
        self.p = p / p.sum()
        # rank -> customer id: the heavy customers are not simply the smallest ids
        self.ids_by_rank = np.random.default_rng([SEED, 0]).permutation(scale.customers)

    def customers(self, i: int) -> np.ndarray:
        """The customer of each row of time slice ``i``."""
        rng = np.random.default_rng([SEED, 1, i])
        ranks = rng.choice(self.scale.customers, size=self.scale.rows, p=self.p)
        return self.ids_by_rank[ranks].astype(np.int64)

    def counts(self) -> np.ndarray:
        """Rows per customer id over the whole table."""
        c = np.zeros(self.scale.customers, dtype=np.int64)
        for i in range(self.scale.files):
            c += np.bincount(self.customers(i), minlength=self.scale.customers)
        return c

    def slice(self, i: int) -> pa.Table:
        """Time slice ``i``: ids and event times ascending, ~225 B JSON-like payloads."""
        n = self.scale.rows
        rng = np.random.default_rng([SEED, 2, i])
        ids = np.arange(i * n, (i + 1) * n, dtype=np.int64)
        times = T0_US + i * SLICE_US + np.sort(rng.integers(0, SLICE_US, n))

        def pick(values: list[str]) -> pa.Array:
            return pa.array(values).take(pa.array(rng.integers(0, len(values), n)))

        def num(lo: int, hi: int) -> pa.Array:
            return pc.cast(pa.array(rng.integers(lo, hi, n)), pa.string())

        amount = pc.cast(pa.array(np.round(rng.exponential(40.0, n), 2)), pa.string())
        parts: list[Any] = [
            '{"type":"', pick(EVENT_TYPES),
            '","session":"s-', num(10**15, 10**16),
            '","page":"/', pick(SECTIONS), "/", num(1, 200_000),
            '","referrer":"', pick(REFERRERS),
            '","device":"', pick(DEVICES),
            '","amount":', amount,
            ',"items":', num(1, 12),
            ',"ip":"10.', num(0, 256), ".", num(0, 256), ".", num(0, 256),
            '","ua":"', pick(AGENTS), '"}',
        ]  # fmt: skip
        payload = pc.binary_join_element_wise(*parts, "")
        return pa.table(
            {
                "id": ids,
                "event_time": pa.array(times, pa.timestamp("us", tz="UTC")),
                "customer_id": self.customers(i),
                "payload": payload,
            },
            schema=SCHEMA,
        )

    def chunks(self) -> Iterator[tuple[int, pa.Table]]:
        """``(time slice, rows of one append)`` in append order: one slice per append."""
        for i in range(self.scale.files):
            yield i, self.slice(i)


# --- metering ------------------------------------------------------------------------------------
@dataclass(slots=True)
class Meter:
    """Bytes uploaded and downloaded per kind of key under the table prefix, from botocore
    hooks on the client (``data`` vs the rest: manifests, segments, DVs, index pieces, head)."""

    prefix: str
    up: dict[str, int] = field(default_factory=dict)
    down: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kind(self, key: str) -> str | None:
        if not key.startswith(self.prefix + "/"):
            return None
        rel = key[len(self.prefix) + 1 :]
        return rel.split("/", 1)[0] if "/" in rel else rel

    def reset(self) -> None:
        with self.lock:
            self.up.clear()
            self.down.clear()

    def add(self, into: dict[str, int], key: str, n: int) -> None:
        k = self.kind(key)
        if k is not None and n:
            with self.lock:
                into[k] = into.get(k, 0) + n

    def data_moved(self) -> int:
        return self.up.get("data", 0) + self.down.get("data", 0)

    def metadata_up(self) -> int:
        return sum(v for k, v in self.up.items() if k != "data")

    def metadata_down(self) -> int:
        return sum(v for k, v in self.down.items() if k != "data")

    def total(self) -> int:
        return sum(self.up.values()) + sum(self.down.values())


@contextmanager
def metered(client: Any, meter: Meter) -> Iterator[Meter]:
    """Hook ``client``: uploads (PutObject, UploadPart bodies) and downloads (GetObject
    ContentLength) are added to ``meter`` by kind of key."""
    uid = uuid.uuid4().hex

    def upload(params: dict[str, Any], **_: Any) -> None:
        meter.add(meter.up, str(params.get("Key", "")), body_size(params.get("Body")))

    def get_key(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["lethe_bench_key"] = str(params.get("Key", ""))

    def got(http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if getattr(http_response, "status_code", 0) in (200, 206) and "Error" not in parsed:
            meter.add(
                meter.down, context.get("lethe_bench_key", ""), parsed.get("ContentLength", 0)
            )

    hooks: list[tuple[str, Callable[..., None]]] = [
        ("before-parameter-build.s3.PutObject", upload),
        ("before-parameter-build.s3.UploadPart", upload),
        ("before-parameter-build.s3.GetObject", get_key),
        ("after-call.s3.GetObject", got),
    ]
    events = client.meta.events
    for name, fn in hooks:
        events.register(name, fn, unique_id=f"{uid}-{name}")
    try:
        yield meter
    finally:
        for name, _fn in hooks:
            events.unregister(name, unique_id=f"{uid}-{name}")


# --- one table, one operation ------------------------------------------------------------------
@dataclass(slots=True)
class Built:
    table: Table
    bucket: str
    prefix: str
    customers_of: dict[str, np.ndarray]  # file path -> the customers it holds (sorted)
    window_of: dict[str, int]  # file path -> time window (time-ordered: its slice)

    @property
    def files(self) -> tuple[DataFile, ...]:
        return self.table.manifest.files

    @property
    def table_bytes(self) -> int:
        return sum(f.size for f in self.files)


def build(aws: LocalAws, client: Any, events: Events, clustered: bool) -> Built:
    """The table, time-ordered (one file per append), or clustered: created with
    ``cluster_by``, appended the same way, then laid out by a clustering compaction."""
    bucket = new_bucket(aws)
    prefix = "events"
    s = events.scale
    window = ("event_time", f"{s.window_hours}h") if clustered else None
    t = Table.create(
        f"s3://{bucket}/{prefix}",
        SCHEMA,
        key="id",
        s3=client,
        indexes=("customer_id",),
        cluster_by=("customer_id",) if clustered else None,
        cluster_window=window,
        cluster_file_subjects=s.subjects if clustered else None,
    )
    customers_of: dict[str, np.ndarray] = {}
    window_of: dict[str, int] = {}
    for w, rows in events.chunks():
        before = {f.path for f in t.manifest.files}
        t.append(rows)
        held = np.unique(rows.column("customer_id").to_numpy())
        for f in t.manifest.files:
            if f.path not in before:  # one file per append at these sizes
                customers_of[f.path] = held
                window_of[f.path] = w
    if clustered:
        CLUSTERING["last"] = measure(t.compact)
        spec = ClusterSpec.of(t.manifest.properties)
        assert spec is not None
        schema = t.manifest.arrow_schema()
        customers_of, window_of = {}, {}
        for f in t.manifest.files:
            body = t.store.get(t.key_of(f.path)).body
            col = pq.read_table(pa.BufferReader(body), columns=["customer_id"]).column(0)
            customers_of[f.path] = np.unique(col.to_numpy())
            w = file_windows(f, spec, schema)
            window_of[f.path] = -1 if w is None or w[0] != w[1] else w[0]
    return Built(t, bucket, prefix, customers_of, window_of)


CLUSTERING: dict[str, Any] = {}
"""The last clustering compaction's measurement (printed once)."""


def drop(client: Any, bucket: str) -> None:
    """Remove a table's bucket (moto keeps objects in memory)."""
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        for k in range(0, len(keys), 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": keys[k : k + 1000]})
    client.delete_bucket(Bucket=bucket)


@dataclass(frozen=True, slots=True)
class Cow(Moved):
    """The copy-on-write baseline of some files."""

    cpu: float = 0.0
    wall: float = 0.0


def copy_on_write(b: Built, files: Sequence[DataFile], victims: np.ndarray) -> Cow:
    """GET each file, read it, filter the victims' rows out, write it, PUT it (beside the
    table; nothing committed)."""
    store = S3Store(b.bucket, client=b.table.store.client)
    drop_set = pa.array(victims, pa.int64())

    def rewrite() -> None:
        for f in files:
            body = store.get(b.table.key_of(f.path), etag=f.etag).body
            tbl = pq.read_table(pa.BufferReader(body))
            kept = tbl.filter(pc.invert(pc.is_in(tbl["customer_id"], value_set=drop_set)))
            sink = pa.BufferOutputStream()
            pq.write_table(kept, sink, compression=CODEC)
            store.put(f"cow-baseline/{uuid.uuid4().hex}.parquet", sink.getvalue().to_pybytes())

    gc.collect()
    m = measure(rewrite)
    s = store.stats.snapshot()
    return Cow(len(files), s.bytes_downloaded, s.bytes_uploaded, m.cpu, m.wall)


def floor_of(b: Built, files: Sequence[DataFile], victims: np.ndarray) -> Floor:
    """The physical floor (bench/floor.py) of taking ``victims``' rows out of ``files``."""
    store = S3Store(b.bucket, client=b.table.store.client)
    total = Floor()
    for f in files:
        body = store.get(b.table.key_of(f.path), etag=f.etag).body
        col = pq.read_table(pa.BufferReader(body), columns=["customer_id"])["customer_id"]
        removed = np.isin(col.to_numpy(zero_copy_only=False), victims)
        total = total + file_floor(body, removed)
    return total


@dataclass(frozen=True, slots=True)
class Figures:
    name: str
    layout: str
    victims: int
    rows_erased: int
    files_total: int
    table_bytes: int
    touched: int
    touched_bytes: int
    max_per_window: int
    windows_touched: int
    down: int
    up: int
    copied: int
    requests: int
    commits: int
    commits_purge: int  # of the purge alone (0: an erase)
    metadata_up: int
    metadata_down: int
    data_moved: int
    metered: int  # every byte the hooks saw (a check on the store's counters)
    uploads_by_kind: dict[str, int]  # bytes uploaded per top-level key kind (data, manifest...)
    requests_by_op: dict[str, int]
    cpu: float
    wall: float
    cow: Cow | None
    floor: Floor | None = None
    index_bytes: int = 0  # up + down of keys under index/ (probes, piece GETs and PUTs)
    index_cpu: float = 0.0  # client CPU in the index steps (bench/upkeep.py)

    @property
    def moved(self) -> int:
        return self.down + self.up

    @property
    def pct_table(self) -> float:
        return 100.0 * self.moved / max(self.table_bytes, 1)

    @property
    def bytes_vs_cow(self) -> float:
        return self.moved / self.cow.moved if self.cow and self.cow.moved else float("nan")

    @property
    def cpu_vs_cow(self) -> float:
        return self.cpu / self.cow.cpu if self.cow and self.cow.cpu else float("nan")

    @property
    def copied_vs_touched(self) -> float:
        return self.copied / self.touched_bytes if self.touched_bytes else 0.0

    @property
    def index_share_bytes(self) -> float:
        return self.index_bytes / self.moved if self.moved else float("nan")

    @property
    def index_share_cpu(self) -> float:
        return self.index_cpu / self.cpu if self.cpu else float("nan")

    @property
    def metadata_share(self) -> float:
        return self.metadata_up / self.data_moved if self.data_moved else float("nan")


def operate(
    aws: LocalAws,
    client: Any,
    events: Events,
    *,
    name: str,
    clustered: bool,
    victims: np.ndarray,
    purge: bool,
    baseline: bool,
) -> Figures:
    """Build a fresh table, copy-on-write the files holding ``victims`` (the baseline), then
    erase them (or delete them and purge), and measure."""
    b = build(aws, client, events, clustered)
    t = b.table
    try:
        before = b.files
        hit = np.asarray(victims, dtype=np.int64)
        holding = [
            f for f in before if np.isin(b.customers_of.get(f.path, hit), hit).any()
        ]  # a file not mapped (never here) counts as holding them
        cow = copy_on_write(b, holding, hit) if baseline else None
        floor = floor_of(b, holding, hit) if baseline else None
        gc.collect()
        with metered(client, Meter(b.prefix)) as meter:
            io0, v0 = t.store.stats.snapshot(), t.version
            rid = f"bench-{name}-{uuid.uuid4().hex[:8]}"
            filt = [("customer_id", "in", [int(c) for c in hit])]
            v_purge = v0
            if purge:

                def op() -> int:
                    nonlocal v_purge
                    t.delete(filt, request_id=rid)
                    v_purge = t.version
                    return t.purge(request_id=f"{rid}-purge").rows_erased

            else:

                def op() -> int:
                    return t.erase(filt, request_id=rid).rows_erased

            with index_cpu() as upkeep:
                m = measure(op)
            io = t.store.stats.snapshot() - io0
        t.refresh()
        after = {f.path for f in t.manifest.files}
        gone = [f for f in before if f.path not in after]
        per_window: dict[int, int] = {}
        for f in gone:
            w = b.window_of.get(f.path, -1)
            per_window[w] = per_window.get(w, 0) + 1
        if {f.path for f in gone} != {f.path for f in holding}:
            print(
                f"  note ({name}): the library replaced {len(gone)} files, "
                f"{len(holding)} hold the rows (the CoW rewrote those)"
            )
        return Figures(
            name=name,
            layout="clustered" if clustered else "time-ordered",
            victims=len(hit),
            rows_erased=int(m.result),
            files_total=len(before),
            table_bytes=sum(f.size for f in before),
            touched=len(gone),
            touched_bytes=sum(f.size for f in gone),
            max_per_window=max(per_window.values(), default=0),
            windows_touched=len(per_window),
            down=io.bytes_downloaded,
            up=io.bytes_uploaded,
            copied=io.bytes_copied,
            requests=io.total_requests,
            commits=t.version - v0,
            commits_purge=t.version - v_purge if purge else 0,
            metadata_up=meter.metadata_up(),
            metadata_down=meter.metadata_down(),
            data_moved=meter.data_moved(),
            metered=meter.total(),
            uploads_by_kind=dict(sorted(meter.up.items())),
            requests_by_op=dict(io.requests),
            cpu=m.cpu,
            wall=m.wall,
            cow=cow,
            floor=floor,
            index_bytes=meter.up.get("index", 0) + meter.down.get("index", 0),
            index_cpu=upkeep.seconds,
        )
    finally:
        drop(client, b.bucket)


# --- printing ------------------------------------------------------------------------------------
def _over(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def print_floor(figs: Sequence[Figures]) -> None:
    """Each operation against its physical floor (bench/floor.py) and against the CoW."""
    rows = [
        [
            f.name,
            mib(fl.moved),
            _over(f.moved, fl.moved),
            _over(c.moved, fl.moved),
            f"{fl.cpu:.2f}s",
            _over(f.cpu, fl.cpu),
            _over(f.cpu, c.cpu),
            str(fl.requests),
            _over(f.requests, fl.requests),
        ]
        for f in figs
        if (fl := f.floor) is not None and (c := f.cow) is not None
    ]
    if rows:
        print("the physical floor (pages holding a removed row, S3's 5 MiB parts; bench/floor.py):")
        header = ["operation", "floor moved", "Lethe/floor", "CoW/floor", "floor CPU"]
        header += ["Lethe/floor CPU", "Lethe/CoW CPU", "floor requests", "Lethe/floor req"]
        print_table(header, rows)


def _x(v: float) -> str:
    return "n/a" if v != v else f"{v:.2f}x"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [max(len(r[k]) for r in [header, *rows]) for k in range(len(header))]
    print(_row(header, widths))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(_row(r, widths))


def print_details(figs: Sequence[Figures]) -> None:
    for f in figs:
        ops = ", ".join(f"{k}={v}" for k, v in sorted(f.requests_by_op.items()))
        ups = ", ".join(f"{k} {v / 1024:,.0f} KiB" for k, v in f.uploads_by_kind.items())
        print(f"  {f.name}: requests {ops}; uploaded {ups}")


def figures_rows(figs: Sequence[Figures]) -> list[list[str]]:
    rows = []
    for f in figs:
        commits = (
            f"{f.commits - f.commits_purge}+{f.commits_purge}"
            if f.commits_purge
            else str(f.commits)
        )
        rows.append(
            [
                f.name,
                f"{f.rows_erased:,}",
                f"{f.touched} / {f.files_total}",
                f"{mib(f.moved)} ({f.pct_table:.0f}%)",
                mib(f.copied),
                f"{f.requests:,}",
                commits,
                f"{mib(f.metadata_up)} ({100 * f.metadata_share:.1f}%)",
                f"{100 * f.index_share_bytes:.1f}% / {100 * f.index_share_cpu:.1f}%",
                f"{f.cpu:.2f}s",
                f"{f.wall:.2f}s",
                _x(f.bytes_vs_cow) if f.cow else "-",
                _x(f.cpu_vs_cow) if f.cow else "-",
            ]
        )
    return rows


HEADER = [
    "operation",
    "rows erased",
    "files touched",
    "moved (down+up, % table)",
    "copied (S3)",
    "requests",
    "commits",
    "metadata up (% data moved)",
    "index upkeep (% bytes / % CPU)",
    "client CPU",
    "wall",
    "bytes vs CoW",
    "CPU vs CoW",
]


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def targets(plain: Sequence[Figures], clustered: Sequence[Figures]) -> list[list[str]]:
    """Issue 26's targets next to the figures."""
    rows: list[list[str]] = []
    for f in plain:
        ok = f.bytes_vs_cow <= 1.0 and f.cpu_vs_cow <= 1.0 and f.copied_vs_touched <= 1.0
        rows.append(
            [
                f"time-ordered, {f.name}: <= 1.0x bytes and <= 1.0x client CPU of a CoW of "
                "the touched files; copied server-side <= 1x their size",
                f"{_x(f.bytes_vs_cow)} bytes, {_x(f.cpu_vs_cow)} CPU, "
                f"copied {_x(f.copied_vs_touched)}",
                _verdict(ok),
            ]
        )
    for f in plain:
        if not f.commits_purge:
            continue
        ok = f.commits_purge <= 3 and f.metadata_share <= 0.02
        rows.append(
            [
                f"time-ordered, purge of {f.touched} files ({f.name}): <= 3 commits, metadata "
                "uploaded <= 2% of the data bytes moved",
                f"{f.commits_purge} commits, {100 * f.metadata_share:.1f}% "
                f"({mib(f.metadata_up)} / {mib(f.data_moved)})",
                _verdict(ok),
            ]
        )
    rows += purge_targets(plain)
    limits = {
        "erase the median customer": 2.0,
        "delete 0.1%, purge": 15.0,
        "delete 1%, purge": 80.0,
    }
    for f in clustered:
        limit = limits.get(f.name, 100.0)
        if f.name == "erase the median customer":
            ok = f.max_per_window <= 1 and f.pct_table <= limit
            rows.append(
                [
                    "after clustering, erase the median customer: <= 1 file per "
                    f"time window and <= {limit:.0f}% of the table moved",
                    f"{f.touched} files in {f.windows_touched} windows (max "
                    f"{f.max_per_window} per window), {f.pct_table:.1f}%",
                    _verdict(ok),
                ]
            )
        else:
            rows.append(
                [
                    f"after clustering, {f.name}: <= {limit:.0f}% of the table moved",
                    f"{f.pct_table:.1f}% ({f.touched} / {f.files_total} files)",
                    _verdict(f.pct_table <= limit),
                ]
            )
    return rows


def purge_targets(plain: Sequence[Figures]) -> list[list[str]]:
    """Issue 37 item 3's targets: a purge reads each file once; its index upkeep (piece
    GETs and PUTs, probes) <= 3% of its bytes and <= 10% of its client CPU; the 1% purge
    <= 1.03x the bytes of a CoW, <= 3 commits."""
    rows: list[list[str]] = []
    for f in plain:
        if not f.commits_purge:
            continue
        ok = f.index_share_bytes <= 0.03 and f.index_share_cpu <= 0.10
        what = "index upkeep <= 3% of the bytes, <= 10% of the client CPU"
        now = (
            f"{100 * f.index_share_bytes:.1f}% ({mib(f.index_bytes)}), "
            f"{100 * f.index_share_cpu:.1f}% ({f.index_cpu:.2f}s)"
        )
        if f.name == "delete 1%, purge":
            ok = ok and f.bytes_vs_cow <= 1.03 and f.commits_purge <= 3
            what = f"bytes <= 1.03x CoW, <= 3 commits, {what}"
            now = f"{_x(f.bytes_vs_cow)} CoW, {f.commits_purge} commits, {now}"
        rows.append([f"issue 37 item 3, time-ordered, {f.name}: {what}", now, _verdict(ok)])
    return rows


# --- the bench -------------------------------------------------------------------------------------
def choose(events: Events) -> dict[str, np.ndarray]:
    """The victims of each operation (the same in both layouts)."""
    counts = events.counts()
    present = np.flatnonzero(counts)
    by_count = present[np.argsort(counts[present], kind="stable")]
    rng = np.random.default_rng([SEED, 3])
    n = events.scale.customers
    return {
        "erase the median customer": by_count[len(by_count) // 2 : len(by_count) // 2 + 1],
        "erase the heaviest customer": by_count[-1:],
        "delete 0.1%, purge": rng.choice(present, max(1, n // 1000), replace=False),
        "delete 1%, purge": rng.choice(present, max(1, n // 100), replace=False),
    }


def run(scale: Scale | None = None) -> dict[str, Any]:
    scale = scale or Scale.from_env()
    events = Events(scale)
    victims = choose(events)
    counts = events.counts()
    print(
        f"{scale.files} files x {scale.rows:,} rows, {scale.customers:,} customers Zipf "
        f"s={ZIPF_S}, index on customer_id; median customer "
        f"{int(counts[victims['erase the median customer'][0]]):,} rows, heaviest "
        f"{int(counts[victims['erase the heaviest customer'][0]]):,} rows; a fresh table per "
        "operation; baseline: copy-on-write (CoW) of the touched files"
    )
    with moto_process() as aws:
        client = make_s3_client()

        def each(clustered: bool, *, skip: str = "") -> list[Figures]:
            """Every operation but ``skip`` on a fresh table (time-ordered ones with the
            copy-on-write baseline)."""
            label = "clustered" if clustered else "time-ordered"
            out: list[Figures] = []
            for name, hit in victims.items():
                if name == skip:
                    continue
                out.append(
                    operate(
                        aws, client, events, name=name, clustered=clustered, victims=hit,
                        purge="purge" in name, baseline=not clustered,
                    )
                )  # fmt: skip
                print(f"  done: {label}, {name} ({out[-1].wall:.1f}s)", flush=True)
            return out

        plain = each(clustered=False)
        import lethe.erasure.erase as erase_mod

        seq_name = "delete 0.1%, purge"
        workers, erase_mod.SPLICE_WORKERS = erase_mod.SPLICE_WORKERS, 1
        try:  # the same purge, its files spliced one at a time (the wall target's baseline)
            sequential = operate(
                aws, client, events, name=seq_name, clustered=False, victims=victims[seq_name],
                purge=True, baseline=False,
            )  # fmt: skip
        finally:
            erase_mod.SPLICE_WORKERS = workers
        print(f"  done: time-ordered, {seq_name}, one splice at a time ({sequential.wall:.1f}s)")
        clustered = each(clustered=True, skip="erase the heaviest customer")
    table_bytes = plain[0].table_bytes
    print(f"\ntime-ordered table: {mib(table_bytes)} in {plain[0].files_total} files")
    print_table(HEADER, figures_rows(plain))
    print_details(plain)
    print(f"copy-on-write of the touched files (the baseline; pq.write_table, {CODEC}):")
    print_table(
        ["operation", "files", "moved (down+up)", "client CPU", "wall"],
        [
            [f.name, str(c.files), mib(c.moved), f"{c.cpu:.2f}s", f"{c.wall:.2f}s"]
            for f in plain
            if (c := f.cow) is not None
        ],
    )
    print_floor(plain)
    window_h = scale.window_hours
    c = CLUSTERING.get("last")
    print(
        f"\nafter clustering (cluster_by customer_id, windows of {window_h} h of event_time, "
        f"at most {scale.subjects} customers per file, "
        f"laid out by Table.compact): {mib(clustered[0].table_bytes)} in "
        f"{clustered[0].files_total} files"
    )
    if c is not None:
        r = c.result
        print(
            f"  the clustering compaction: {r.files_removed} -> {r.files_added} files, "
            f"{mib(r.io.bytes_downloaded + r.io.bytes_uploaded)} moved, client CPU "
            f"{c.cpu:.2f}s, wall {c.wall:.1f}s"
        )
    print_table(HEADER, figures_rows(clustered))
    print_details(clustered)
    print_floor(clustered)
    parallel = next(f for f in plain if f.name == seq_name)
    ratio = parallel.wall / sequential.wall if sequential.wall else 0.0
    wall_row = [
        f"time-ordered, {seq_name}: wall with {workers} splices at once (2 cores) <= 0.6x "
        "the sequential run",
        f"{ratio:.2f}x ({parallel.wall:.1f}s vs {sequential.wall:.1f}s one at a time)",
        _verdict(ratio <= 0.6),
    ]
    rows = [*targets(plain, clustered), wall_row]
    print("\nissue 26's and 37's targets (wall times are judged only against the same run):")
    print_table(["target", "now", "verdict"], rows)
    return {"plain": plain, "clustered": clustered, "targets": rows}


if __name__ == "__main__":
    run()
