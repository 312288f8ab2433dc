"""What the Spark ingest job needs around the readers: the staged schema (good rows and rejects
in one), rejects as JSON lines, output sizing, and the job's report."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lethe.catalog.manifest import DataFile
from lethe.ingest.conform import REJECT_SCHEMA, Conformed
from lethe.writing.writer import WriteOptions

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
