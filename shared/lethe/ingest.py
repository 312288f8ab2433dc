"""Ingest: raw uploads (CSV, JSON lines, Parquet) into a table, and direct Parquet registration.

Two paths bring uploaded objects into a table (DESIGN §7):

* **Direct registration** (:func:`register_parquet`, used by the ingest-trigger Lambda): a ready
  Parquet object whose schema matches the table is described from its footer (one tail GET),
  copied server-side into ``data/`` (pinned to the uploaded ETag) and committed; the request
  id ``s3://bucket/key#etag`` in the manifest's request log makes a redelivered event a no-op.
* **The Spark ingest job** (``spark_jobs/ingest.py``) for everything else: executors read the
  raw objects with :func:`read_object`, which validates every row against the table schema with
  :func:`conform` — rows that do not fit are never dropped silently but come back as *rejects*
  (:data:`REJECT_SCHEMA`: source, row, line, reason, original record) — then the good rows are
  sorted by key and written with the lethe writer, and the driver commits once.

The EMR Serverless hand-off (:func:`start_ingest_job`) lives here too, so that the Lambda stays
a thin adapter.

Example:
    >>> import pyarrow as pa
    >>> schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    >>> raw = pa.table({"id": ["1", "x", None], "name": ["a", "b", "c"]})
    >>> out = conform(raw, schema, source="s3://b/in.csv")
    >>> out.good.to_pylist()
    [{'id': 1, 'name': 'a'}]
    >>> [(r["row"], r["reason"][:33]) for r in out.rejects.to_pylist()]
    [(1, "column 'id': cannot convert 'x' t"), (2, "column 'id': required but missing")]
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.manifest import DataFile, request_hash
from lethe.reader import FileHandle
from lethe.store import S3Store, parse_s3_uri
from lethe.writer import WriteOptions, describe, new_data_path

if TYPE_CHECKING:  # pragma: no cover
    from lethe.table import Table

log = logging.getLogger(__name__)

__all__ = [
    "REJECT_SCHEMA",
    "Conformed",
    "EmrJobSettings",
    "Format",
    "IngestReport",
    "InputObject",
    "JobRunStarted",
    "RegisterResult",
    "check_file_schema",
    "conform",
    "detect_format",
    "estimate_bytes_per_row",
    "ingest_request_id",
    "list_inputs",
    "partitions_for",
    "read_object",
    "register_parquet",
    "rejects_to_jsonl",
    "stage",
    "staged_schema",
    "start_ingest_job",
    "upload_request_id",
]

Format = Literal["csv", "json", "parquet"]
FORMATS: tuple[Format, ...] = ("csv", "json", "parquet")

REJECT_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("row", pa.int64()),
        pa.field("line", pa.int64()),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("record", pa.string()),
    ]
)
"""One rejected row: its object, 0-based data row (when the row parsed), 1-based physical
line (CSV/JSON, when known), why it was rejected, and the original record (JSON or raw text)."""

CHUNK_BYTES = 8 << 20
_EXTENSIONS: dict[str, Format] = {
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}


# --- inputs ------------------------------------------------------------------------------------
def detect_format(key: str) -> Format | None:
    """The format an object name implies (``.csv``, ``.json``/``.jsonl``/``.ndjson``,
    ``.parquet``; CSV and JSON may end in ``.gz``), or None.

    >>> detect_format("incoming/2024/a.jsonl.gz"), detect_format("x.txt")
    ('json', None)
    """
    name = key.rsplit("/", 1)[-1].lower()
    if name.endswith(".gz"):
        name = name[:-3]
        fmt = _EXTENSIONS.get("." + name.rsplit(".", 1)[-1]) if "." in name else None
        return fmt if fmt in ("csv", "json") else None
    return _EXTENSIONS.get("." + name.rsplit(".", 1)[-1]) if "." in name else None


@dataclass(frozen=True, slots=True)
class InputObject:
    """One raw object to ingest, pinned to the ETag seen when it was listed."""

    bucket: str
    key: str
    size: int
    etag: str
    format: Format

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def compressed(self) -> bool:
        return self.key.lower().endswith(".gz")

    def to_json(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "key": self.key,
            "size": self.size,
            "etag": self.etag,
            "format": self.format,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> InputObject:
        return cls(d["bucket"], d["key"], int(d["size"]), d["etag"], d["format"])


def _ignored(key: str) -> bool:
    name = key.rsplit("/", 1)[-1]
    return not name or name.startswith(("_", "."))


def list_inputs(
    input_uri: str, *, fmt: Format | None = None, store: S3Store | None = None
) -> list[InputObject]:
    """The objects named by ``input_uri``: one object, or every object under a prefix.

    Zero-byte objects, "directory" markers and names starting with ``_`` or ``.`` (such as
    ``_SUCCESS``) are skipped. Without ``fmt`` the format comes from each name's extension.

    Raises:
        InvalidRequest: a bad URI, an unknown format, or an object whose format cannot be told
            from its name (pass ``fmt``).
    """
    if fmt is not None and fmt not in FORMATS:
        raise errors.InvalidRequest(f"format must be one of {FORMATS}, not {fmt!r}")
    bucket, prefix = parse_s3_uri(input_uri)
    store = store if store is not None and store.bucket == bucket else S3Store(bucket)
    found: list[tuple[str, int, str]] = []
    if prefix and not input_uri.endswith("/"):
        try:
            info = store.head(prefix)
            found.append((info.key, info.size, info.etag))
        except errors.NotFound:
            pass
    if not found:
        listing = prefix + "/" if prefix else ""
        found = [(o.key, o.size, o.etag) for o in store.list(listing)]
    out: list[InputObject] = []
    for key, size, etag in sorted(found):
        if size == 0 or key.endswith("/") or _ignored(key):
            continue
        f = fmt or detect_format(key)
        if f is None:
            raise errors.InvalidRequest(
                f"cannot tell the format of s3://{bucket}/{key} from its name; "
                "pass --format csv|json|parquet"
            )
        out.append(InputObject(bucket, key, size, etag, f))
    return out


def upload_request_id(bucket: str, key: str, etag: str) -> str:
    """The idempotency id of one uploaded object version: ``s3://bucket/key#etag``."""
    tag = etag.strip('"')
    return f"s3://{bucket}/{key}#{tag}"


def ingest_request_id(objects: Sequence[InputObject]) -> str:
    """A request id naming exactly this set of object versions (a re-run is a no-op).

    One object gives the same id as :func:`upload_request_id`, so an upload registered by the
    trigger and the same upload ingested by a job cannot both land.
    """
    if len(objects) == 1:
        o = objects[0]
        return upload_request_id(o.bucket, o.key, o.etag)
    h = hashlib.sha256()
    for o in sorted(objects, key=lambda o: (o.bucket, o.key)):
        h.update(upload_request_id(o.bucket, o.key, o.etag).encode() + b"\n")
    return f"ingest:{len(objects)}:{h.hexdigest()}"


# --- reading objects ---------------------------------------------------------------------------
class S3ObjectFile(io.RawIOBase):
    """A read-only, seekable file over one object version: ETag-pinned ranged GETs of
    ``chunk`` bytes (one window buffered), so a large upload is streamed, never loaded whole."""

    def __init__(
        self, store: S3Store, key: str, etag: str, size: int, *, chunk: int = CHUNK_BYTES
    ) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._etag = etag
        self._size = size
        self._chunk = chunk
        self._pos = 0
        self._buf = b""
        self._buf_start = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = self._size + offset
        return self._pos

    def _fetch(self, start: int, end: int) -> bytes:
        try:
            return self._store.get(self._key, etag=self._etag, start=start, end=end).body
        except errors.PreconditionFailed as e:
            raise errors.StaleSnapshot(
                f"s3://{self._store.bucket}/{self._key} changed while it was being ingested "
                f"(ETag {self._etag} no longer matches); upload a new object instead"
            ) from e

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        if self._pos >= self._size or not len(view):
            return 0
        off = self._pos - self._buf_start
        if not (0 <= off < len(self._buf)):
            end = min(self._size, self._pos + max(len(view), self._chunk))
            self._buf = self._fetch(self._pos, end)
            self._buf_start = self._pos
            off = 0
        n = min(len(view), len(self._buf) - off)
        view[:n] = self._buf[off : off + n]
        self._pos += n
        return n


def _open_stream(store: S3Store, obj: InputObject) -> io.BufferedIOBase:
    raw = io.BufferedReader(S3ObjectFile(store, obj.key, obj.etag, obj.size), CHUNK_BYTES)
    if obj.compressed:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


@dataclass(frozen=True, slots=True)
class Conformed:
    """Rows that fit the table schema (``good``, exactly that schema) and the rejected rest."""

    good: pa.Table
    rejects: pa.Table

    @property
    def rows(self) -> int:
        return int(self.good.num_rows + self.rejects.num_rows)


def _short(e: Exception) -> str:
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return msg if len(msg) <= 200 else msg[:197] + "..."


def _is_tz_timestamp(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) and t.tz is not None)


def _cast(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Safe cast; strings without a zone offset are read as UTC for zoned timestamp columns."""
    try:
        return pc.cast(arr, target, safe=True)
    except pa.ArrowInvalid:
        if _is_tz_timestamp(target) and (
            pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)
        ):
            naive = pc.cast(arr, pa.timestamp(target.unit), safe=True)
            return pc.cast(naive, target, safe=True)
        raise


_CONVERSION_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)


def _cast_slice(arr: pa.Array, target: pa.DataType, lo: int, hi: int) -> pa.Array:
    return _cast(arr.slice(lo, hi - lo), target)


def _arrow_value(arr: pa.Array, i: int) -> Any:
    return arr[i].as_py()


def _py_slice(values: list[Any], target: pa.DataType, lo: int, hi: int) -> pa.Array:
    return pa.array(values[lo:hi], type=target)


def _describe_value(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def _convert(
    n: int,
    target: pa.DataType,
    name: str,
    make: Callable[[int, int], pa.Array],
    value_at: Callable[[int], Any],
) -> tuple[pa.Array, dict[int, str]]:
    """``n`` values converted to ``target``; values that do not convert become null + a reason.

    ``make(lo, hi)`` converts the slice ``[lo, hi)``. The whole column is converted at once;
    only when that fails is the failing range bisected (vectorized halves), so clean data costs
    one conversion and dirty data O(bad x log n) conversions. ``value_at(i)`` is used only to
    describe a bad value in its reason.
    """
    bad: dict[int, str] = {}

    def why(i: int, e: Exception) -> str:
        return (
            f"column {name!r}: cannot convert {_describe_value(value_at(i))} to {target} "
            f"({_short(e)})"
        )

    def go(lo: int, hi: int) -> list[pa.Array]:
        try:
            return [make(lo, hi)]
        except _CONVERSION_ERRORS as e:
            if hi - lo == 1:
                bad[lo] = why(lo, e)
                return [pa.nulls(1, type=target)]
            if isinstance(e, pa.ArrowNotImplementedError):  # no conversion at all
                for i in range(lo, hi):
                    if value_at(i) is not None:
                        bad[i] = why(i, e)
                return [pa.nulls(hi - lo, type=target)]
            mid = (lo + hi) // 2
            return go(lo, mid) + go(mid, hi)

    if n == 0:
        return pa.array([], type=target), bad
    pieces = go(0, n)
    return (pieces[0] if len(pieces) == 1 else pa.concat_arrays(pieces)), bad


def conform(
    raw: pa.Table,
    schema: pa.Schema,
    *,
    source: str,
    first_row: int = 0,
    first_line: int | None = None,
    lines: Sequence[int | None] | None = None,
    records: Sequence[str] | None = None,
    pre_bad: Mapping[int, str] | None = None,
) -> Conformed:
    """Validate ``raw`` against ``schema``: convert every column, reject what does not fit.

    A row is rejected when a value does not convert to its column's type, when a required
    (non-nullable) column is null or missing, or when it has a value in a column the table does
    not have. Missing nullable columns are filled with nulls. Each reject carries the first
    reason found for it.

    Args:
        raw: The rows as read (any column types; CSV gives strings).
        schema: The table schema.
        source: The object URI, recorded with each reject.
        first_row: Data-row number of ``raw``'s first row within its object.
        first_line: Physical line of the first row when each row is one line (JSON lines).
        lines: Physical line of each row, when known (overrides ``first_line``).
        records: The original text of each row (JSON lines); otherwise rejects carry the raw
            row as JSON.
        pre_bad: Rows already known to be bad (index -> reason), e.g. unparsable JSON.
    """
    n = raw.num_rows
    bad: dict[int, str] = dict(pre_bad or {})
    cols: list[pa.Array] = []
    present = set(raw.column_names)
    for f in schema:
        if f.name not in present:
            if not f.nullable:
                for i in range(n):
                    bad.setdefault(i, f"column {f.name!r}: required but missing")
            cols.append(pa.nulls(n, type=f.type))
            continue
        arr = raw.column(f.name).combine_chunks()
        why: dict[int, str] = {}
        if arr.type.equals(f.type):
            conv = arr
        else:
            conv, why = _convert(
                n, f.type, f.name, partial(_cast_slice, arr, f.type), partial(_arrow_value, arr)
            )
        for i, r in why.items():
            bad.setdefault(i, r)
        if not f.nullable and conv.null_count:
            for i in pc.indices_nonzero(pc.is_null(conv)).to_pylist():
                bad.setdefault(i, f"column {f.name!r}: required but missing")
        cols.append(conv)
    for name in raw.column_names:
        if schema.get_field_index(name) >= 0:
            continue
        arr = raw.column(name)
        if arr.null_count < n:
            for i in pc.indices_nonzero(pc.is_valid(arr)).to_pylist():
                bad.setdefault(i, f"unknown column {name!r} (not in the table schema)")
    good = pa.Table.from_arrays(cols, schema=schema) if n else schema.empty_table()
    if not bad:
        return Conformed(good, REJECT_SCHEMA.empty_table())
    idx = sorted(bad)
    keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=pa.array(idx, pa.int64())))
    good = good.filter(keep)
    if records is not None:
        recs: list[str | None] = [records[i] for i in idx]
    else:
        rows = raw.take(pa.array(idx, pa.int64())).to_pylist()
        recs = [json.dumps(r, default=str, ensure_ascii=False) for r in rows]
    if lines is not None:
        line_of: list[int | None] = [lines[i] for i in idx]
    elif first_line is not None:
        line_of = [first_line + i for i in idx]
    else:
        line_of = [None] * len(idx)
    rejects = pa.table(
        {
            "source": pa.array([source] * len(idx), pa.string()),
            "row": pa.array([first_row + i for i in idx], pa.int64()),
            "line": pa.array(line_of, pa.int64()),
            "reason": pa.array([bad[i] for i in idx], pa.string()),
            "record": pa.array(recs, pa.string()),
        },
        schema=REJECT_SCHEMA,
    )
    return Conformed(good, rejects)


def _structural_rejects(source: str, items: Sequence[tuple[int | None, str, str]]) -> pa.Table:
    """Rejects for rows that could not even be split into fields (line, reason, text)."""
    return pa.table(
        {
            "source": pa.array([source] * len(items), pa.string()),
            "row": pa.nulls(len(items), pa.int64()),
            "line": pa.array([i[0] for i in items], pa.int64()),
            "reason": pa.array([i[1] for i in items], pa.string()),
            "record": pa.array([i[2] for i in items], pa.string()),
        },
        schema=REJECT_SCHEMA,
    )


def _read_csv(store: S3Store, obj: InputObject, schema: pa.Schema) -> Iterator[Conformed]:
    import pyarrow.csv as pcsv

    with _open_stream(store, obj) as s:
        head = s.read(1 << 20)
    text = head.decode("utf-8-sig", errors="replace")
    first = text.split("\n", 1)[0].rstrip("\r")
    names = next(csv.reader([first]), [])
    if not names or not any(n.strip() for n in names):
        yield Conformed(
            schema.empty_table(),
            _structural_rejects(obj.uri, [(1, "the CSV file has no header line", first)]),
        )
        return
    structural: list[tuple[int | None, str, str]] = []

    def on_invalid(row: Any) -> str:
        structural.append(
            (
                row.number,
                f"expected {row.expected_columns} fields, found {row.actual_columns}",
                row.text,
            )
        )
        return "skip"

    row_no = 0
    with _open_stream(store, obj) as s:
        reader = pcsv.open_csv(
            s,
            read_options=pcsv.ReadOptions(use_threads=False, block_size=CHUNK_BYTES),
            parse_options=pcsv.ParseOptions(invalid_row_handler=on_invalid),
            convert_options=pcsv.ConvertOptions(
                column_types={n: pa.string() for n in names},
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
        for batch in reader:
            out = conform(pa.Table.from_batches([batch]), schema, source=obj.uri, first_row=row_no)
            row_no += batch.num_rows
            if structural:
                out = Conformed(
                    out.good,
                    pa.concat_tables([_structural_rejects(obj.uri, structural), out.rejects]),
                )
                structural.clear()
            yield out
    if structural:
        yield Conformed(schema.empty_table(), _structural_rejects(obj.uri, structural))


def _json_read_schema(schema: pa.Schema) -> pa.Schema:
    """What pyarrow's JSON reader is asked to produce (JSON has no dates, decimals, bytes)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_integer(t):
            t = pa.int64()
        elif pa.types.is_floating(t):
            t = pa.float64()
        elif not (
            pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_boolean(t)
            or pa.types.is_nested(t)
        ):
            t = pa.string()
        fields.append(pa.field(f.name, t))
    return pa.schema(fields)


def _json_fast(chunk: bytes, read_schema: pa.Schema) -> pa.Table | None:
    import pyarrow.json as pj

    if chunk.startswith((b"\n", b"\r\n")) or b"\n\n" in chunk or b"\n\r\n" in chunk:
        return None  # blank lines: the fast reader skips them and line numbers would drift
    try:
        return pj.read_json(
            io.BytesIO(chunk),
            read_options=pj.ReadOptions(use_threads=False, block_size=len(chunk) + 1),
            parse_options=pj.ParseOptions(
                explicit_schema=read_schema, unexpected_field_behavior="infer"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def _json_slow(
    chunk: bytes,
    read_schema: pa.Schema,
    schema: pa.Schema,
    *,
    source: str,
    first_row: int,
    first_line: int,
) -> Conformed:
    """Line-by-line parse of a chunk the fast reader refused: every line gets its own verdict."""
    texts: list[str] = []
    line_nos: list[int | None] = []
    values: list[dict[str, Any]] = []
    pre_bad: dict[int, str] = {}
    for j, raw_line in enumerate(chunk.split(b"\n")):
        line = raw_line.rstrip(b"\r")
        if not line.strip():
            continue
        i = len(texts)
        text = line.decode("utf-8", errors="replace")
        texts.append(text)
        line_nos.append(first_line + j)
        try:
            obj = json.loads(line)
        except ValueError as e:
            pre_bad[i] = f"not valid JSON ({_short(e)})"
            values.append({})
            continue
        if not isinstance(obj, dict):
            pre_bad[i] = f"a JSON line must hold an object, not {type(obj).__name__}"
            values.append({})
            continue
        values.append(obj)
    names: dict[str, None] = dict.fromkeys(read_schema.names)
    for v in values:
        names.update(dict.fromkeys(v))
    arrays: list[pa.Array] = []
    for name in names:
        col = [v.get(name) for v in values]
        idx = read_schema.get_field_index(name)
        if idx < 0:  # unknown field: only its presence matters
            arrays.append(
                pa.array([None if x is None else json.dumps(x) for x in col], pa.string())
            )
            continue
        t = read_schema.field(idx).type
        arr, why = _convert(len(col), t, name, partial(_py_slice, col, t), col.__getitem__)
        for i, r in why.items():
            pre_bad.setdefault(i, r)
        arrays.append(arr)
    raw = pa.Table.from_arrays(arrays, names=list(names))
    return conform(
        raw,
        schema,
        source=source,
        first_row=first_row,
        lines=line_nos,
        records=texts,
        pre_bad=pre_bad,
    )


def _read_json(store: S3Store, obj: InputObject, schema: pa.Schema) -> Iterator[Conformed]:
    read_schema = _json_read_schema(schema)
    row_no = 0
    line_no = 1
    rest = b""
    with _open_stream(store, obj) as s:
        while True:
            data = s.read(CHUNK_BYTES)
            buf = rest + data
            if data:
                cut = buf.rfind(b"\n")
                if cut < 0:
                    rest = buf
                    continue
                chunk, rest = buf[: cut + 1], buf[cut + 1 :]
            else:
                chunk, rest = buf, b""
            if chunk.strip():
                body = chunk[:-1] if chunk.endswith(b"\n") else chunk
                raw = _json_fast(body, read_schema)
                if raw is not None:
                    out = conform(
                        raw,
                        schema,
                        source=obj.uri,
                        first_row=row_no,
                        first_line=line_no,
                        records=_LazyLines(body) if raw.num_rows else None,
                    )
                else:
                    out = _json_slow(
                        body,
                        read_schema,
                        schema,
                        source=obj.uri,
                        first_row=row_no,
                        first_line=line_no,
                    )
                row_no += out.rows
                yield out
            line_no += chunk.count(b"\n")
            if not data:
                return


class _LazyLines(Sequence[str]):
    """The lines of a chunk, split only if a reject needs its text."""

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._lines: list[bytes] | None = None

    def _get(self) -> list[bytes]:
        if self._lines is None:
            self._lines = self._body.split(b"\n")
        return self._lines

    def __len__(self) -> int:
        return len(self._get())

    def __getitem__(self, i: Any) -> Any:
        return self._get()[i].rstrip(b"\r").decode("utf-8", errors="replace")


def _read_parquet(store: S3Store, obj: InputObject, schema: pa.Schema) -> Iterator[Conformed]:
    f = S3ObjectFile(store, obj.key, obj.etag, obj.size)
    try:
        pf = pq.ParquetFile(pa.PythonFile(f, mode="r"))
    except pa.ArrowInvalid as e:
        raise errors.UnsupportedFile(
            f"{obj.uri} is not a readable Parquet file: {_short(e)}"
        ) from e
    row_no = 0
    for batch in pf.iter_batches(batch_size=64 * 1024, use_threads=False):
        out = conform(pa.Table.from_batches([batch]), schema, source=obj.uri, first_row=row_no)
        row_no += batch.num_rows
        yield out


def read_object(store: S3Store, obj: InputObject, schema: pa.Schema) -> Iterator[Conformed]:
    """Stream one raw object as validated chunks (good rows + rejects), in object order.

    ``store`` must be a store of ``obj.bucket``. CSV needs a header line; JSON is one object
    per line; Parquet columns are cast to the table's types. Memory stays around a few chunks
    of :data:`CHUNK_BYTES`.
    """
    if store.bucket != obj.bucket:
        raise errors.InvalidRequest(f"store of bucket {store.bucket!r} cannot read {obj.uri}")
    if obj.format == "csv":
        return _read_csv(store, obj, schema)
    if obj.format == "json":
        return _read_json(store, obj, schema)
    if obj.format == "parquet":
        return _read_parquet(store, obj, schema)
    raise errors.InvalidRequest(f"unsupported format {obj.format!r}")


STAGED_PREFIX = "_reject_"


def staged_schema(schema: pa.Schema) -> pa.Schema:
    """One schema for good rows and rejects together (what a distributed reader emits):
    the table's columns, all nullable, then ``_reject_<field>`` for each :data:`REJECT_SCHEMA`
    field. A row is a reject exactly when ``_reject_reason`` is not null."""
    return pa.schema(
        [pa.field(f.name, f.type) for f in schema]
        + [pa.field(STAGED_PREFIX + f.name, f.type) for f in REJECT_SCHEMA]
    )


def stage(c: Conformed, staged: pa.Schema) -> pa.Table:
    """``c`` in :func:`staged_schema` form: good rows, then rejects."""
    n_good, n_bad = c.good.num_rows, c.rejects.num_rows
    cols = []
    for f in staged:
        if f.name.startswith(STAGED_PREFIX) and f.name[len(STAGED_PREFIX) :] in REJECT_SCHEMA.names:
            bad = c.rejects.column(f.name[len(STAGED_PREFIX) :]).combine_chunks()
            cols.append(pa.concat_arrays([pa.nulls(n_good, f.type), bad.cast(f.type)]))
        else:
            good = c.good.column(f.name).combine_chunks()
            cols.append(pa.concat_arrays([good, pa.nulls(n_bad, f.type)]))
    return pa.Table.from_arrays(cols, schema=staged)


def rejects_to_jsonl(rejects: pa.Table) -> bytes:
    """Rejects as JSON lines (one object per rejected row)."""
    return b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in rejects.to_pylist())


# --- sizing ------------------------------------------------------------------------------------
def estimate_bytes_per_row(sample: pa.Table, opts: WriteOptions) -> float:
    """Encoded bytes per row of ``sample`` in Lethe's file layout (zstd, stats, page index,
    key bloom filter): what sizes the ingest job's output partitions."""
    if sample.num_rows == 0:
        return 1.0
    sink = pa.BufferOutputStream()
    w = pq.ParquetWriter(
        sink,
        sample.schema,
        compression=opts.compression,
        compression_level=opts.compression_level,
        write_statistics=True,
        write_page_index=True,
        bloom_filter_options={opts.key: {"ndv": max(1024, sample.num_rows), "fpp": opts.bloom_fpp}},
    )
    w.write_table(sample, row_group_size=sample.num_rows)
    w.close()
    return max(1e-3, float(sink.getvalue().size) / float(sample.num_rows))


def partitions_for(rows: int, bytes_per_row: float, target_file_bytes: int) -> int:
    """How many output partitions (one file each) make files of about ``target_file_bytes``.

    >>> partitions_for(1_000_000, 10.0, 2_000_000), partitions_for(10, 10.0, 2_000_000)
    (5, 1)
    """
    if rows <= 0:
        return 1
    return max(1, min(rows, round(rows * bytes_per_row / max(1, target_file_bytes))))


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one ingest run did (the Spark job's result)."""

    version: int | None
    duplicate: bool
    objects: int
    input_bytes: int
    rows_read: int
    rows_written: int
    rows_rejected: int
    files: int
    bytes_written: int
    rejects_uri: str | None
    rejects_objects: int
    request_id_hash: str
    seconds: float
    data_files: tuple[DataFile, ...] = ()

    def describe(self) -> str:
        if self.duplicate:
            return f"already ingested at version {self.version} (request {self.request_id_hash})"
        head = (
            f"version {self.version}: {self.rows_written:,} rows in {self.files} files "
            f"({self.bytes_written:,} B) from {self.objects} objects ({self.input_bytes:,} B)"
            if self.version is not None
            else f"nothing committed ({self.objects} objects, {self.rows_read:,} rows read)"
        )
        rej = (
            f"; {self.rows_rejected:,} rows rejected -> {self.rejects_uri}"
            if self.rows_rejected
            else "; no rejects"
        )
        return f"{head}{rej} in {self.seconds:.1f} s"


# --- direct registration -----------------------------------------------------------------------
_EQUIVALENT = (
    (pa.string(), pa.large_string()),
    (pa.binary(), pa.large_binary()),
)


def _same_type(a: pa.DataType, b: pa.DataType) -> bool:
    if a.equals(b):
        return True
    for x, y in _EQUIVALENT:
        if (a.equals(x) and b.equals(y)) or (a.equals(y) and b.equals(x)):
            return True
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(b) and a.unit == b.unit:
        utc = {"UTC", "Etc/UTC", "+00:00", "Z"}
        return (a.tz is None and b.tz is None) or (a.tz in utc and b.tz in utc)
    return False


def check_file_schema(file_schema: pa.Schema, md: pq.FileMetaData, schema: pa.Schema) -> None:
    """Refuse a Parquet file that does not match the table schema, saying exactly why.

    Columns may come in any order; ``string``/``large_string`` and ``binary``/``large_binary``
    are interchangeable and any UTC spelling of a zoned timestamp is accepted. A column the
    table requires may be nullable in the file only if the file's statistics prove it has no
    nulls.

    Raises:
        SchemaMismatch: missing or unknown columns, other types, or possible nulls.
    """
    problems: list[str] = []
    got = {f.name: f for f in file_schema}
    missing = [f.name for f in schema if f.name not in got]
    extra = [n for n in file_schema.names if schema.get_field_index(n) < 0]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unknown columns {extra}")
    for f in schema:
        g = got.get(f.name)
        if g is None:
            continue
        if not _same_type(g.type, f.type):
            hint = ""
            if (
                pa.types.is_timestamp(g.type)
                and g.type.unit == "ns"
                and pa.types.is_timestamp(f.type)
            ):
                hint = (
                    " (an INT96 or nanosecond timestamp: write microseconds, e.g. Spark's "
                    "spark.sql.parquet.outputTimestampType=TIMESTAMP_MICROS)"
                )
            problems.append(f"column {f.name!r} is {g.type}, the table has {f.type}{hint}")
            continue
        if not f.nullable and g.nullable and not _proven_non_null(md, f.name):
            problems.append(
                f"column {f.name!r} is required by the table but nullable in the file "
                "(and its statistics do not prove it has no nulls)"
            )
    if problems:
        raise errors.SchemaMismatch(
            "the Parquet file does not match the table schema: " + "; ".join(problems)
        )


def _proven_non_null(md: pq.FileMetaData, name: str) -> bool:
    leaf = next((i for i in range(md.num_columns) if md.schema.column(i).path == name), None)
    if leaf is None:
        return False
    for g in range(md.num_row_groups):
        st = md.row_group(g).column(leaf).statistics
        if st is None or not st.has_null_count or st.null_count:
            return False
    return True


def _declared_sorted(
    md: pq.FileMetaData, key: str, key_type: pa.DataType, groups: Sequence[Any]
) -> bool:
    leaf = next((i for i in range(md.num_columns) if md.schema.column(i).path == key), None)
    if leaf is None or md.num_row_groups == 0:
        return False
    for g in range(md.num_row_groups):
        sc = md.row_group(g).sorting_columns
        if not sc or sc[0].column_index != leaf or sc[0].descending:
            return False
    # groups must follow each other too (a per-group sort order says nothing across groups)
    from lethe.values import from_json

    prev = None
    for rg in groups:
        if rg.key_min is None or rg.key_max is None:
            return False
        lo = from_json(rg.key_min, key_type)
        if prev is not None and lo < prev:
            return False
        prev = from_json(rg.key_max, key_type)
    return True


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """Outcome of :func:`register_parquet`.

    ``duplicate`` is True when this object version had been registered before (``version`` is
    then the version that registered it); ``version`` is None when the file had no rows.
    """

    version: int | None
    duplicate: bool
    path: str | None
    rows: int
    bytes: int
    row_groups: int
    seconds: float = 0.0


def register_parquet(
    table: Table,
    key: str,
    *,
    bucket: str | None = None,
    etag: str | None = None,
    size: int | None = None,
    request_id: str | None = None,
) -> RegisterResult:
    """Register an uploaded Parquet object in ``table`` without rewriting it.

    Reads the footer (one ETag-pinned tail GET), checks the schema
    (:func:`check_file_schema`), copies the object server-side into ``data/`` (pinned with
    ``x-amz-copy-source-if-match``), describes it for the manifest (row groups, key and column
    stats) and commits. The request id (default :func:`upload_request_id`) is recorded in the
    manifest, so the same object version is registered once however often its event arrives.
    Files written by pyarrow, Spark, DuckDB or polars are accepted when their schema matches.

    Args:
        table: The table handle (moves to the new version).
        key: Object key of the upload.
        bucket: Its bucket (default: the table's bucket).
        etag: The ETag the event announced (default: HEAD the object).
        size: Its size (default: HEAD the object).
        request_id: Idempotency id (default ``s3://bucket/key#etag``).

    Raises:
        SchemaMismatch: the file does not fit the table (the table is not changed).
        UnsupportedFile: not Parquet, or encrypted.
        StaleSnapshot: the object changed after the event was sent.

    Example:
        >>> from lethe.ingest import register_parquet                 # doctest: +SKIP
        >>> register_parquet(table, "incoming/2024/batch-7.parquet")  # doctest: +SKIP
        RegisterResult(version=12, duplicate=False, path='data/...', rows=1000, ...)
    """
    t0 = time.perf_counter()
    bucket = bucket or table.store.bucket
    src = (
        table.store if bucket == table.store.bucket else S3Store(bucket, client=table.store.client)
    )
    if etag is None or size is None:
        info = src.head(key)
        etag, size = info.etag, info.size
    if not etag.startswith('"'):
        etag = f'"{etag}"'
    rid = request_id or upload_request_id(bucket, key, etag)
    rid_hash = request_hash(rid)
    table.refresh()
    earlier = table.manifest.find_request(rid_hash)
    if earlier is not None:
        log.info("upload already registered at version %s", earlier.version)
        return RegisterResult(
            earlier.version, True, None, earlier.rows, 0, 0, time.perf_counter() - t0
        )
    if size > 5 << 30:
        raise errors.InvalidRequest(
            f"s3://{bucket}/{key} is {size:,} bytes: too large to register by copy (5 GiB); "
            "ingest it with the Spark job"
        )
    stub = DataFile(path=key, size=size, etag=etag, rows=0, row_groups=(), added_version=0)
    footer = FileHandle(src, key, stub).footer()
    md = footer.metadata
    schema = table.schema
    try:
        file_schema = md.schema.to_arrow_schema()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.UnsupportedFile(
            f"s3://{bucket}/{key}: unreadable Parquet schema: {_short(e)}"
        ) from e
    check_file_schema(file_schema, md, schema)
    if md.num_rows == 0:
        return RegisterResult(None, False, None, 0, 0, 0, time.perf_counter() - t0)
    groups, cols = describe(md, schema, table.key)
    rel = new_data_path()
    dst = table.key_of(rel)
    if src is table.store:
        new_etag = table.store.copy(key, dst, src_etag=etag)
    else:
        new_etag = _copy_across(table.store, bucket, key, dst, etag)
    df = DataFile(
        path=rel,
        size=size,
        etag=new_etag,
        rows=md.num_rows,
        row_groups=groups,
        columns=cols,
        added_version=0,
        sorted_by_key=_declared_sorted(md, table.key, schema.field(table.key).type, groups),
    )
    res = table.commit_files(
        [df], kind="register", params={"bytes": size, "row_groups": len(groups)}, request_id=rid
    )
    if res.files_added == 0:  # a redelivered twin committed first: ours was never referenced
        table.store.delete_many([dst])
        return RegisterResult(res.version, True, None, md.num_rows, 0, 0, time.perf_counter() - t0)
    log.info(
        "registered %s rows in %s row groups at version %s", md.num_rows, len(groups), res.version
    )
    return RegisterResult(
        res.version, False, rel, md.num_rows, size, len(groups), time.perf_counter() - t0
    )


def _copy_across(dst_store: S3Store, src_bucket: str, src_key: str, dst_key: str, etag: str) -> str:
    from lethe.store import translate_error

    try:
        r = dst_store.client.copy_object(
            Bucket=dst_store.bucket,
            Key=dst_key,
            CopySource={"Bucket": src_bucket, "Key": src_key},
            CopySourceIfMatch=etag,
        )
    except Exception as e:
        dst_store.stats.record("copy")
        raise translate_error(e, f"COPY s3://{src_bucket}/{src_key} -> {dst_key}") from e
    dst_store.stats.record("copy")
    return str(r["CopyObjectResult"]["ETag"])


# --- EMR Serverless hand-off -------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class EmrJobSettings:
    """Where and how ingest job runs start (from the trigger's environment)."""

    application_id: str
    execution_role_arn: str
    entry_point: str
    archive: str | None = None
    archive_alias: str = "lethe_env"
    extra_spark_parameters: str = ""
    lookback: timedelta = timedelta(days=1)

    def spark_submit_parameters(self) -> str:
        """``--conf`` flags that put the job archive (``lethe`` + dependencies, built by
        ``spark_jobs/package.sh``) on the driver's and executors' ``PYTHONPATH``."""
        parts: list[str] = []
        if self.archive:
            a = self.archive_alias
            parts += [
                f"--conf spark.archives={self.archive}#{a}",
                f"--conf spark.emr-serverless.driverEnv.PYTHONPATH=./{a}",
                f"--conf spark.executorEnv.PYTHONPATH=./{a}",
            ]
        if self.extra_spark_parameters:
            parts.append(self.extra_spark_parameters)
        return " ".join(parts)


def _error_code(e: Exception) -> str | None:
    response = getattr(e, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return str(code) if code is not None else None


@dataclass(frozen=True, slots=True)
class JobRunStarted:
    """A requested ingest job run (``duplicate``: an earlier run for the same upload exists)."""

    job_run_id: str
    name: str
    duplicate: bool


def start_ingest_job(
    emr: Any,
    settings: EmrJobSettings,
    *,
    table_uri: str,
    input_uri: str,
    fmt: Format | None,
    request_id: str,
    now: datetime | None = None,
) -> JobRunStarted:
    """Start an EMR Serverless run of ``spark_jobs/ingest.py`` for one upload, at most once.

    The run's name and ``clientToken`` derive from ``request_id`` (the upload's
    ``s3://bucket/key#etag``): EMR Serverless answers a repeated token with the same run, and a
    run of that name already listed within ``settings.lookback`` (not failed or cancelled) is
    returned instead of starting another. The job itself commits with the same request id, so
    even two runs land at most once.

    Args:
        emr: A boto3 ``emr-serverless`` client.
        settings: Application, role, entry point and archive.
        table_uri: The table.
        input_uri: The object (or prefix) to ingest.
        fmt: Its format, or None to let the job tell by name.
        request_id: The idempotency id.
    """
    digest = hashlib.sha256(request_id.encode()).hexdigest()
    name = f"lethe-ingest-{digest[:24]}"
    now = now or datetime.now(UTC)
    kw: dict[str, Any] = {
        "applicationId": settings.application_id,
        "createdAtAfter": now - settings.lookback,
    }
    while True:
        try:
            page = emr.list_job_runs(**kw)
        except Exception as e:  # moto answers "no such application" until the first run
            if _error_code(e) != "ResourceNotFoundException":
                raise
            break
        for run in page.get("jobRuns", []):
            if run.get("name") == name and run.get("state") not in ("FAILED", "CANCELLED"):
                return JobRunStarted(str(run["id"]), name, True)
        token = page.get("nextToken")
        if not token:
            break
        kw["nextToken"] = token
    args = ["--table", table_uri, "--input", input_uri, "--request-id", request_id]
    if fmt is not None:
        args += ["--format", fmt]
    driver: dict[str, Any] = {"entryPoint": settings.entry_point, "entryPointArguments": args}
    params = settings.spark_submit_parameters()
    if params:
        driver["sparkSubmitParameters"] = params
    r = emr.start_job_run(
        applicationId=settings.application_id,
        clientToken=digest[:64],
        executionRoleArn=settings.execution_role_arn,
        name=name,
        jobDriver={"sparkSubmit": driver},
    )
    return JobRunStarted(str(r["jobRunId"]), name, False)
