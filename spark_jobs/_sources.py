"""Spark Python data sources that move Arrow batches between Spark and ``lethe`` (Spark 4.0).

Spark 4's Python Data Source API runs Python on the executors over Arrow record batches
without pandas (``DataFrame.mapInArrow`` needs pandas installed; these do not):

* ``lethe_raw`` (reader): one partition per raw upload; the executor reads it from S3 with
  :func:`lethe.ingest.read_object` and emits good rows and rejects in one staged schema.
* ``lethe_files`` (Arrow writer): each task streams its (sorted) partition through the lethe
  writer into data files on S3 and returns their manifest entries as its commit message.
* ``lethe_rejects`` (Arrow writer): each task writes its rejected rows as one JSON-lines object.
* ``lethe_rewrite`` (reader): one partition per compaction group; the executor rewrites the
  group with :func:`lethe.maintenance.compaction.run_rewrite_task` and emits the new files' entries.

The writers' ``commit`` runs in a Python worker on the driver: it writes the collected commit
messages to a local JSON file named by the ``result`` option, which the job reads back. The
table commit itself is done by the job, once, in the driver process.

Nothing here knows a file format: all of that is in ``lethe``.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import datasource as ds

# Executors need not be able to import this module (they get its classes by value).
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

__all__ = ["register_data_sources"]


_registered: set[str] = set()


def register_data_sources(spark: Any) -> None:
    """Register the data sources of this module with ``spark`` (once per application)."""
    app = spark.sparkContext.applicationId
    if app in _registered:
        return
    for cls in (RawUploads, LetheFiles, RejectFiles, Rewrite):
        spark.dataSource.register(cls)
    _registered.add(app)


def spark_arrow_schema(struct: Any) -> pa.Schema:
    """The Arrow schema Spark exchanges for ``struct`` (timestamps as UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(struct)


def _write_result(path: str, payload: Any) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f)


class _OptionsWriter(ds.DataSourceArrowWriter):
    """A writer that keeps its source's options (``result``: where ``commit`` writes)."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options


class _WriterSource(ds.DataSource):
    """A write-only source: ``writer`` makes a ``writer_class`` over the options."""

    writer_class: type[_OptionsWriter]

    def writer(self, schema: Any, overwrite: bool) -> ds.DataSourceArrowWriter:
        return self.writer_class(dict(self.options))


# --- lethe_raw ---------------------------------------------------------------------------------
class RawUploads(ds.DataSource):
    """Options: ``objects`` (JSON list of :class:`lethe.ingest.InputObject`), ``schema`` (the
    table's Arrow schema, base64 IPC). Read with ``.schema(<staged struct>)``."""

    @classmethod
    def name(cls) -> str:
        return "lethe_raw"

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        from lethe.catalog.manifest import schema_from_b64
        from lethe.ingest import staged_schema

        return from_arrow_schema(staged_schema(schema_from_b64(self.options["schema"])))

    def reader(self, schema: Any) -> ds.DataSourceReader:
        return _RawReader(self.options, schema)


class _RawReader(ds.DataSourceReader):
    def __init__(self, options: Any, struct: Any) -> None:
        self.objects: list[dict[str, Any]] = json.loads(options["objects"])
        self.table_schema_b64: str = options["schema"]
        self.out_schema = spark_arrow_schema(struct)

    def partitions(self) -> list[ds.InputPartition]:
        return [ds.InputPartition(i) for i in range(len(self.objects))]

    def read(self, partition: ds.InputPartition) -> Iterator[pa.RecordBatch]:
        from lethe.catalog.manifest import schema_from_b64
        from lethe.ingest import InputObject, read_object, stage, staged_schema
        from lethe.storage.store import S3Store

        obj = InputObject.from_json(self.objects[partition.value])
        schema = schema_from_b64(self.table_schema_b64)
        staged = staged_schema(schema)
        store = S3Store(obj.bucket)
        for chunk in read_object(store, obj, schema):
            if chunk.rows:
                t = stage(chunk, staged).cast(self.out_schema)
                yield from t.to_batches(max_chunksize=64 * 1024)


# --- lethe_files ------------------------------------------------------------------------------
class _Files(ds.WriterCommitMessage):
    def __init__(self, files: list[str], bucket: str, prefix: str) -> None:
        self.files = files  # DataFile JSON
        self.bucket = bucket
        self.prefix = prefix


class _FilesWriter(_OptionsWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Files:
        from lethe.catalog.manifest import schema_from_b64
        from lethe.catalog.schemas import with_ids
        from lethe.storage.store import S3Store, parse_s3_uri
        from lethe.writing.writer import WriteOptions, write_files

        o = self.options
        bucket, prefix = parse_s3_uri(o["table"])
        schema = with_ids(schema_from_b64(o["schema"]))
        opts = WriteOptions(
            key=o["key"],
            target_file_bytes=int(o["target_file_bytes"]),
            row_group_bytes=int(o["row_group_bytes"]),
            schema_id=int(o.get("schema_id", "0")) or None,  # the schema the files are under
        )

        def batches() -> Iterator[pa.RecordBatch]:
            for b in iterator:
                if b.num_rows:
                    yield b.select(schema.names).cast(schema)

        files = write_files(S3Store(bucket), prefix, batches(), schema, opts)
        return _Files([f.model_dump_json() for f in files], bucket, prefix)

    def commit(self, messages: list[ds.WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, _Files) for f in m.files]
        _write_result(self.options["result"], files)

    def abort(self, messages: list[ds.WriterCommitMessage | None]) -> None:
        from lethe.catalog.manifest import DataFile
        from lethe.storage.layout import object_key
        from lethe.storage.store import S3Store

        for m in messages:
            if isinstance(m, _Files) and m.files:
                keys = [object_key(m.prefix, DataFile.model_validate_json(f).path) for f in m.files]
                S3Store(m.bucket).delete_many(keys)


class LetheFiles(_WriterSource):
    """Options: ``table`` (URI), ``schema`` (base64), ``key``, ``target_file_bytes``,
    ``row_group_bytes``, ``result`` (local path the driver-side commit writes to)."""

    @classmethod
    def name(cls) -> str:
        return "lethe_files"

    writer_class = _FilesWriter


# --- lethe_rejects ----------------------------------------------------------------------------
class _Rejects(ds.WriterCommitMessage):
    def __init__(self, uri: str | None, rows: int) -> None:
        self.uri = uri
        self.rows = rows


class _RejectsWriter(_OptionsWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Rejects:
        from lethe.ingest import REJECT_SCHEMA, rejects_to_jsonl
        from lethe.storage.store import S3Store, parse_s3_uri

        bucket, prefix = parse_s3_uri(self.options["location"])
        key = f"{prefix}/part-{uuid.uuid4().hex}.jsonl".lstrip("/")
        rows = 0
        out = S3Store(bucket).open_writer(key)
        try:
            for b in iterator:
                if b.num_rows:
                    t = pa.Table.from_batches([b.select(REJECT_SCHEMA.names)])
                    out.write(rejects_to_jsonl(t))
                    rows += b.num_rows
        except BaseException:
            out.abort()
            raise
        if rows == 0:
            out.abort()
            return _Rejects(None, 0)
        out.close()
        return _Rejects(f"s3://{bucket}/{key}", rows)

    def commit(self, messages: list[ds.WriterCommitMessage | None]) -> None:
        parts = [[m.uri, m.rows] for m in messages if isinstance(m, _Rejects) and m.uri]
        _write_result(self.options["result"], parts)


class RejectFiles(_WriterSource):
    """Options: ``location`` (``s3://bucket/prefix`` for the JSON-lines parts), ``result``."""

    @classmethod
    def name(cls) -> str:
        return "lethe_rejects"

    writer_class = _RejectsWriter


# --- lethe_rewrite ----------------------------------------------------------------------------
class Rewrite(ds.DataSource):
    """Options: ``tasks`` (JSON list of :class:`lethe.maintenance.compaction.RewriteTask` JSON). Emits one
    row per task: ``group int, files string`` (a JSON list of the new DataFile entries)."""

    @classmethod
    def name(cls) -> str:
        return "lethe_rewrite"

    def schema(self) -> str:
        return "group int, files string"

    def reader(self, schema: Any) -> ds.DataSourceReader:
        return _RewriteReader(json.loads(self.options["tasks"]))


class _RewriteReader(ds.DataSourceReader):
    def __init__(self, tasks: list[str]) -> None:
        self.tasks = tasks

    def partitions(self) -> list[ds.InputPartition]:
        return [ds.InputPartition(i) for i in range(len(self.tasks))]

    def read(self, partition: ds.InputPartition) -> Iterator[pa.RecordBatch]:
        from lethe.maintenance.compaction import RewriteTask, run_rewrite_task

        task = RewriteTask.model_validate_json(self.tasks[partition.value])
        files = run_rewrite_task(task)
        payload = json.dumps([f.model_dump(mode="json") for f in files])
        yield pa.record_batch(
            [pa.array([task.group], pa.int32()), pa.array([payload], pa.string())],
            names=["group", "files"],
        )
