"""What ``lethe append`` reads: a local file or folder, an S3 object or prefix, each file fitted
to the table schema or the whole append refused (nothing is committed).

Parquet files are *typed*: their footers are checked against the table first, every file at
once, so one :class:`~lethe.errors.SchemaMismatch` lists every file and column that does not
fit (an unknown column, a missing one, a narrowing such as ``int64`` -> ``int32``); a lossless
widening is cast (:mod:`lethe.ingest.fit`). CSV and JSON lines are *untyped*: each value is
converted with the ingest job's checks (:func:`lethe.ingest.conform`), and any row that would
become a reject there fails the append here, its reasons counted per column (row numbers, never
values).
"""

from __future__ import annotations

import csv
import gzip
import io
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from lethe import errors
from lethe.catalog.evolution import plan_merge, renamed
from lethe.cli.common import local_format
from lethe.ingest.conform import Conformed, reasons_of
from lethe.ingest.fit import fit, schema_problems
from lethe.ingest.inputs import Format, detect_format, list_inputs
from lethe.ingest.readers import (
    Opener,
    open_object,
    open_parquet,
    read_csv,
    read_json,
)
from lethe.storage.store import S3Store, parse_s3_uri
from lethe.table import CommitResult, Table

__all__ = ["Source", "fitted_batches", "list_sources", "summarize_rejects"]

BATCH_ROWS = 64 * 1024


@dataclass(frozen=True, slots=True)
class Source:
    """One input file: where it is, its format, and how to open its (decompressed) bytes."""

    uri: str
    format: Format
    open: Opener


def _open_local(path: str) -> io.BufferedIOBase:
    f = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    if path.lower().endswith(".gz"):
        return gzip.GzipFile(fileobj=f, mode="rb")
    return f


def _local(path: str) -> list[Source]:
    p = Path(path)
    if p.is_dir():
        files = sorted(
            str(f)
            for f in p.rglob("*")
            if f.is_file()
            and not any(part.startswith(("_", ".")) for part in f.relative_to(p).parts)
        )
        out = [Source(f, fmt, partial(_open_local, f)) for f in files if (fmt := detect_format(f))]
        if not out:
            raise errors.InvalidRequest(f"{path} holds no .parquet, .csv or .jsonl files")
        return out
    if not p.exists():
        raise errors.InvalidRequest(f"no such file: {path}")
    return [Source(path, local_format(path), partial(_open_local, path))]


def list_sources(src: str) -> list[Source]:
    """The files ``src`` names: a local file or folder, or ``s3://bucket/key`` or a prefix
    (``_``/``.`` names such as ``_SUCCESS`` are skipped, as the ingest job skips them)."""
    if not src.startswith("s3://"):
        return _local(src)
    parse_s3_uri(src)
    objs = list_inputs(src)
    if not objs:
        raise errors.InvalidRequest(f"no input objects under {src}")
    store = S3Store(objs[0].bucket)
    return [Source(o.uri, o.format, partial(open_object, store, o)) for o in objs]


def _csv_header(source: Source) -> list[str]:
    with source.open() as s:
        first = s.readline(1 << 20).decode("utf-8-sig", errors="replace").rstrip("\r\n")
    return next(csv.reader([first]), [])


_CONVERT = re.compile(r"^column ('.*?'): cannot convert .* to (.+?) \(")


def _reason_kind(reason: str) -> str:
    """A reject's reason without the value it quotes (values may be keys of people)."""
    m = _CONVERT.match(reason)
    if m:
        return f"column {m.group(1)}: values that do not convert to {m.group(2)}"
    if reason.startswith("expected ") and " fields, found " in reason:
        return "lines with the wrong number of fields"
    return reason


def summarize_rejects(rejects: pa.Table) -> list[str]:
    """Reject reasons counted by kind, with the first rows (or lines) of each; no values.

    >>> from lethe.ingest import conform
    >>> s = pa.schema([("id", pa.int64())])
    >>> summarize_rejects(conform(pa.table({"id": ["1", "x", "y"]}), s, source="f").rejects)
    ["column 'id': values that do not convert to int64: 2 rows (rows 1, 2)"]
    """
    rows: dict[str, list[str]] = defaultdict(list)
    counts: Counter[str] = Counter()
    for r in rejects.select(["row", "line", "reason"]).to_pylist():
        for reason in reasons_of(r["reason"]):  # every column of the row that does not fit
            kind = _reason_kind(reason)
            counts[kind] += 1
            if len(rows[kind]) < 5:
                rows[kind].append(
                    f"row {r['row']}" if r["row"] is not None else f"line {r['line']}"
                )
    out = []
    for kind, n in counts.items():
        where = ", ".join(x.split(" ", 1)[1] for x in rows[kind])
        noun = rows[kind][0].split(" ", 1)[0] + ("s" if len(rows[kind]) > 1 else "")
        more = ", ..." if n > len(rows[kind]) else ""
        out.append(f"{kind}: {n} {'rows' if n > 1 else 'row'} ({noun} {where}{more})")
    return out


def _check_files(sources: Sequence[Source], schema: pa.Schema, alias: Mapping[str, str]) -> None:
    """Every file's columns (and Parquet types) against the table, all files at once; a
    column under an earlier name of a renamed column (``alias``) is that column."""
    problems: list[str] = []
    for s in sources:
        if s.format == "parquet":
            with s.open() as f:
                got = renamed(open_parquet(f, s.uri).schema_arrow, alias)
            found = schema_problems(got, schema)
        elif s.format == "csv":
            header = [alias.get(n, n) for n in _csv_header(s)]
            found = schema_problems(pa.schema([(n, pa.string()) for n in header]), schema,
                                    typed=False)  # fmt: skip
        else:
            found = []  # JSON keys are checked row by row (a key a line lacks is null;
            # an earlier name of a renamed column is that column)
        if found:
            problems.append(f"{s.uri}: " + "; ".join(found))
    if problems:
        n = len(problems)
        raise errors.SchemaMismatch(
            f"{n} of {len(sources)} input files do not fit the table schema; nothing was "
            "appended:\n  " + "\n  ".join(problems)
        )


def _parquet_batches(
    source: Source, schema: pa.Schema, alias: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    with source.open() as f:
        pf = open_parquet(f, source.uri)
        row = 0
        for b in pf.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
            try:
                got = renamed(pa.Table.from_batches([b]), alias)
                yield from fit(got, schema, first_row=row).to_batches()
            except errors.SchemaMismatch as e:
                raise errors.SchemaMismatch(f"{source.uri}: {e}; nothing was appended") from None
            row += b.num_rows


def _untyped_batches(
    source: Source, schema: pa.Schema, alias: Mapping[str, str]
) -> Iterator[pa.RecordBatch]:
    rejects: list[pa.Table] = []
    chunk: Conformed
    if source.format == "csv":
        chunks = read_csv(source.open, source.uri, schema, alias=alias)
    else:
        chunks = read_json(source.open, source.uri, schema, alias=alias)
    for chunk in chunks:
        if chunk.rejects.num_rows:
            rejects.append(chunk.rejects)
        elif not rejects:
            yield from chunk.good.to_batches()
    if rejects:
        found = summarize_rejects(pa.concat_tables(rejects))
        raise errors.SchemaMismatch(
            f"{source.uri} does not fit the table schema; nothing was appended: " + "; ".join(found)
        )


def fitted_batches(
    sources: Sequence[Source], schema: pa.Schema, alias: Mapping[str, str] | None = None
) -> pa.RecordBatchReader:
    """Every row of ``sources`` as the table's schema, streamed; the files' columns are
    checked before the first row is read, each value as it is converted. A column under an
    earlier name of a renamed column (``alias``: old -> current) is that column. A failure
    raises :class:`~lethe.errors.SchemaMismatch` (or :class:`~lethe.errors.InvalidRequest`
    for a file that cannot be read) from the reader, so the append that consumes it commits
    nothing."""
    alias = alias or {}
    try:
        _check_files(sources, schema, alias)
    except (pa.ArrowException, OSError, UnicodeDecodeError, EOFError) as e:
        raise errors.InvalidRequest(f"cannot read the input: {_first_line(e)}") from e

    def batches() -> Iterator[pa.RecordBatch]:
        for s in sources:
            try:
                if s.format == "parquet":
                    yield from _parquet_batches(s, schema, alias)
                else:
                    yield from _untyped_batches(s, schema, alias)
            except (pa.ArrowException, OSError, UnicodeDecodeError, EOFError) as e:
                raise errors.InvalidRequest(f"cannot read {s.uri}: {_first_line(e)}") from e

    return pa.RecordBatchReader.from_batches(schema, batches())


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def merged_append(sources: Sequence[Source], t: Table, progress: Any = None) -> CommitResult:
    """``--schema-mode merge``: every Parquet file appended with the table evolved to take it
    (union by name: new columns added, safe widening; :func:`~lethe.catalog.evolution.plan_merge`),
    all in one commit (a transaction: each file's plan made on the version it commits on).
    Every file is checked before anything is written; what no allowed evolution reconciles
    raises :class:`~lethe.errors.SchemaMismatch` listing each file. Local files are read
    whole (re-read if another commit changed the schema first); S3 objects stream.
    """
    untyped = [s.uri for s in sources if s.format != "parquet"]
    if untyped:
        raise errors.InvalidRequest(
            f"--schema-mode merge takes Parquet files (CSV and JSON types are guessed): {untyped[:3]}"
        )
    shapes = []
    for s in sources:
        with s.open() as f:
            shapes.append(open_parquet(f, s.uri).schema_arrow)
    plan_merge(shapes, t.manifest, labels=[s.uri for s in sources])  # refuses before any write
    tx = t.transaction()
    for s, shape in zip(sources, shapes, strict=True):
        data: Any = _parquet_stream(s, shape)
        if not s.uri.startswith("s3://"):
            data = data.read_all()
        tx.append(data, schema_mode="merge", progress=progress)
    return tx.commit()  # type: ignore[no-any-return]


def _parquet_stream(s: Source, shape: pa.Schema) -> pa.RecordBatchReader:
    def batches() -> Iterator[pa.RecordBatch]:
        with s.open() as f:
            yield from open_parquet(f, s.uri).iter_batches(batch_size=BATCH_ROWS, use_threads=False)

    return pa.RecordBatchReader.from_batches(shape, batches())
