"""Readers of raw objects on S3 (CSV, JSON lines, Parquet), streamed in chunks and conformed to
the table schema."""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lethe import errors
from lethe.ingest.conform import (
    Conformed,
    Lines,
    add_reason,
    conform,
    convert_values,
    py_slice,
    short,
    structural_rejects,
)
from lethe.ingest.inputs import InputObject
from lethe.storage.store import S3Store

CHUNK_BYTES = 8 << 20


# --- reading objects ---------------------------------------------------------------------------
class S3ObjectFile(io.RawIOBase):
    """A read-only, seekable file over one object version: ETag-pinned ranged GETs of
    ``chunk`` bytes (one window buffered), so a large upload is streamed, never loaded whole."""

    def __init__(
        self, store: S3Store, key: str, etag: str, size: int, *, chunk: int = CHUNK_BYTES
    ) -> None:
        super().__init__()
        self._store, self._key, self._etag, self._size, self._chunk = store, key, etag, size, chunk
        self._pos = self._buf_start = 0
        self._buf = b""

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

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


def open_object(store: S3Store, obj: InputObject) -> io.BufferedIOBase:
    raw = io.BufferedReader(S3ObjectFile(store, obj.key, obj.etag, obj.size), CHUNK_BYTES)
    if obj.compressed:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


Opener = Callable[[], io.BufferedIOBase]
"""Opens the object's bytes (decompressed) from the start; called once or twice per object."""


def read_csv(
    open_stream: Opener, uri: str, schema: pa.Schema, *, alias: Mapping[str, str] | None = None
) -> Iterator[Conformed]:
    """Rows of a CSV file fitted to ``schema``; a header naming an earlier name of a renamed
    column (``alias``: old -> current) is read as that column."""
    import pyarrow.csv as pcsv

    with open_stream() as s:
        head = s.read(1 << 20)
    text = head.decode("utf-8-sig", errors="replace")
    first = text.split("\n", 1)[0].rstrip("\r")
    names = next(csv.reader([first]), [])
    if not names or not any(n.strip() for n in names):
        yield Conformed(
            schema.empty_table(),
            structural_rejects(uri, [(1, "the CSV file has no header line", first)]),
        )
        return
    structural: list[tuple[int | None, str, str]] = []

    def on_invalid(row: Any) -> str:
        why = f"expected {row.expected_columns} fields, found {row.actual_columns}"
        structural.append((row.number, why, row.text))
        return "skip"

    row_no = 0
    with open_stream() as s:
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
            raw = pa.Table.from_batches([batch])
            if alias:
                raw = raw.rename_columns([alias.get(n, n) for n in raw.column_names])
            out = conform(raw, schema, source=uri, first_row=row_no)
            row_no += batch.num_rows
            if structural:
                out = Conformed(
                    out.good,
                    pa.concat_tables([structural_rejects(uri, structural), out.rejects]),
                )
                structural.clear()
            yield out
    if structural:
        yield Conformed(schema.empty_table(), structural_rejects(uri, structural))


def _json_read_schema(schema: pa.Schema, alias: Mapping[str, str] | None = None) -> pa.Schema:
    """What pyarrow's JSON reader is asked to produce (JSON has no dates, decimals, bytes);
    an earlier name of a column (``alias``: old -> current) is read as that column."""
    fields = []
    olds = [(old, schema.field(new)) for old, new in (alias or {}).items() if new in schema.names]
    for f in [*schema, *(g.with_name(old) for old, g in olds)]:
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


def _aliased(raw: pa.Table, alias: Mapping[str, str]) -> tuple[pa.Table, dict[int, str]]:
    """``raw`` with each column under an earlier name (``alias``: old -> current) as that
    column, and the rows that give a column under both names (their reasons).

    >>> t, bad = _aliased(pa.table({"note": ["a", "b"], "memo": [None, "c"]}), {"note": "memo"})
    >>> t.column("memo").to_pylist(), bad
    (['a', 'c'], {1: "column 'memo' comes twice (as 'note' and 'memo')"})
    """
    bad: dict[int, str] = {}
    for old in [n for n in raw.column_names if n in alias]:
        new, col = alias[old], raw.column(old)
        at = raw.column_names.index(old)
        if new not in raw.column_names:
            raw = raw.rename_columns([new if n == old else n for n in raw.column_names])
            continue
        cur = raw.column(new)
        col = col if col.type.equals(cur.type) else col.cast(cur.type)  # both read as one type
        both = pc.and_(pc.is_valid(cur), pc.is_valid(col))
        for i in pc.indices_nonzero(both).to_pylist():
            add_reason(bad, i, f"column {new!r} comes twice (as {old!r} and {new!r})")
        raw = raw.set_column(raw.column_names.index(new), new, pc.coalesce(cur, col))
        raw = raw.remove_column(at)
    return raw, bad


def _json_slow(
    chunk: bytes, read_schema: pa.Schema, schema: pa.Schema, *, source: str, first_row: int,
    first_line: int, alias: Mapping[str, str],
) -> Conformed:  # fmt: skip
    """Line-by-line parse of a chunk the fast reader refused: every line gets its own verdict."""
    texts, line_nos, values, unparsed = _parse_lines(chunk, first_line)
    pre_bad: dict[int, str] = {}
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
        col_t = schema.field(name).type if name in schema.names else t  # the reason names it
        arr, why = convert_values(
            len(col), t, name, partial(py_slice, col, t), col.__getitem__, shown=col_t
        )
        for i, r in why.items():
            add_reason(pre_bad, i, r)
        arrays.append(arr)
    raw, twice = _aliased(pa.Table.from_arrays(arrays, names=list(names)), alias)
    for i, r in twice.items():
        add_reason(pre_bad, i, r)
    lines = Lines(each=line_nos, records=texts)
    return conform(raw, schema, source=source, first_row=first_row, lines=lines,
                   pre_bad=pre_bad, unparsed=unparsed)  # fmt: skip


def _parse_lines(
    chunk: bytes, first_line: int
) -> tuple[list[str], list[int | None], list[dict[str, Any]], dict[int, str]]:
    """The non-blank lines of ``chunk``: their text, physical line numbers and JSON objects
    (``{}`` for a line that is not one, with its reason in the last value)."""
    texts: list[str] = []
    line_nos: list[int | None] = []
    values: list[dict[str, Any]] = []
    unparsed: dict[int, str] = {}
    for j, raw_line in enumerate(chunk.split(b"\n")):
        line = raw_line.rstrip(b"\r")
        if not line.strip():
            continue
        i = len(texts)
        texts.append(line.decode("utf-8", errors="replace"))
        line_nos.append(first_line + j)
        try:
            obj = json.loads(line)
        except ValueError as e:
            unparsed[i] = f"not valid JSON ({short(e)})"
            obj = {}
        if not isinstance(obj, dict):
            unparsed[i] = f"a JSON line must hold an object, not {type(obj).__name__}"
            obj = {}
        values.append(obj)
    return texts, line_nos, values, unparsed


def read_json(
    open_stream: Opener, uri: str, schema: pa.Schema, *, alias: Mapping[str, str] | None = None
) -> Iterator[Conformed]:
    """Rows of a JSON-lines file fitted to ``schema``; a key naming an earlier name of a
    renamed column (``alias``: old -> current) is read as that column."""
    alias = alias or {}
    read_schema = _json_read_schema(schema, alias)
    row_no = 0
    line_no = 1
    rest = b""
    with open_stream() as s:
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
                    raw, twice = _aliased(raw, alias)
                    lines = Lines(first=line_no, records=_LazyLines(body) if raw.num_rows else None)
                    out = conform(raw, schema, source=uri, first_row=row_no, lines=lines,
                                  pre_bad=twice)  # fmt: skip
                else:
                    out = _json_slow(
                        body,
                        read_schema,
                        schema,
                        source=uri,
                        first_row=row_no,
                        first_line=line_no,
                        alias=alias,
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


def open_parquet(source: Any, uri: str) -> pq.ParquetFile:
    """A Parquet file over ``source`` (a path or a file object), or :class:`UnsupportedFile`."""
    try:
        return pq.ParquetFile(source if isinstance(source, str) else pa.PythonFile(source, "r"))
    except (pa.ArrowException, OSError) as e:
        raise errors.UnsupportedFile(f"{uri} is not a readable Parquet file: {short(e)}") from e


def _read_parquet(store: S3Store, obj: InputObject, schema: pa.Schema) -> Iterator[Conformed]:
    pf = open_parquet(S3ObjectFile(store, obj.key, obj.etag, obj.size), obj.uri)
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
        return read_csv(partial(open_object, store, obj), obj.uri, schema)
    if obj.format == "json":
        return read_json(partial(open_object, store, obj), obj.uri, schema)
    if obj.format == "parquet":
        return _read_parquet(store, obj, schema)
    raise errors.InvalidRequest(f"unsupported format {obj.format!r}")
