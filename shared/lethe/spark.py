"""Lethe tables as a Spark data source: ``spark.read.format("lethe").load("s3://b/t")`` and
``df.write.format("lethe").mode("append").save("s3://b/t")`` (Spark 4's Python Data Source
API; the executors run ``lethe`` over Arrow batches, no JVM connector).

Reading: the driver pins one snapshot (``version`` / ``timestamp`` options, default the
latest), plans the row groups that may hold matching rows (manifest statistics, footers and
the secondary index, as :meth:`lethe.Table.scan` does) and cuts them into input partitions
of at most :data:`ROW_GROUPS_PER_PARTITION` row groups of one file; each executor opens the
pinned version and reads its row groups with the file's deletion vector applied. Options:
``columns`` (comma-separated), ``filters`` (the CLI's ``--where`` text, or DNF as JSON):
Spark 4.0's Python API pushes no filters down, so this option is where pruning is asked for.

Writing: each task streams its partition through the Lethe writer into data files (sized as
:meth:`lethe.Table.append` sizes them); the driver commits them once, with ``request_id``
when given (a retried job lands once). ``mergeSchema=true`` evolves the table first by the
rule of ``append(schema_mode="merge")``. ``overwrite`` is refused: a replace drops rows, and
rows leave a Lethe table only through its erasure paths, with evidence.

Example:
    >>> import lethe.spark                                          # doctest: +SKIP
    >>> lethe.spark.register(spark)                                 # doctest: +SKIP
    >>> df = spark.read.format("lethe").option("filters", "customer_id = 7").load(uri)  # doctest: +SKIP
    >>> df.write.format("lethe").mode("append").option("request_id", "job-1").save(uri)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

from lethe import errors

# Executors get the classes by value: they need lethe, not this module's import path.
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # type: ignore[no-untyped-call]

__all__ = ["ROW_GROUPS_PER_PARTITION", "LetheDataSource", "register"]

ROW_GROUPS_PER_PARTITION = 8  # ~128 MiB of a file at the default 16 MiB row groups

_registered: set[str] = set()


def register(spark: Any) -> None:
    """Make ``format("lethe")`` known to ``spark`` (once per application)."""
    app = spark.sparkContext.applicationId
    if app not in _registered:
        spark.dataSource.register(LetheDataSource)
        _registered.add(app)


def _uri(options: Any) -> str:
    uri = options.get("path")
    if not uri:
        raise errors.InvalidRequest('give the table: .load("s3://bucket/prefix")')
    return str(uri)


def _filters(text: str | None) -> Any:
    if not text:
        return None
    if text.lstrip().startswith("["):
        return json.loads(text)
    from lethe.reading.where import parse_dnf

    return parse_dnf(text)


def _pinned_version(uri: str, options: Any) -> int:
    """The version a read pins: ``version``, the last committed at or before ``timestamp``
    (ISO 8601), or the latest."""
    from lethe.table import Table

    if options.get("version") is not None:
        return int(options["version"])
    t = Table.open(uri)
    stamp = options.get("timestamp")
    if stamp is None:
        return t.version
    at = datetime.fromisoformat(str(stamp))
    for h in t.history():  # newest first
        if h.created_at <= at:
            return h.version
    raise errors.SnapshotNotFound(f"{uri} has no version committed at or before {stamp}")


class LetheDataSource(DataSource):
    """``format("lethe")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "lethe"

    def _out_schema(self) -> tuple[Any, pa.Schema]:
        from lethe.table import Table

        uri = _uri(self.options)
        t = Table.open(uri, version=_pinned_version(uri, self.options))
        cols = self.options.get("columns")
        names = [c.strip() for c in cols.split(",")] if cols else None
        return t, t.to_batches(names).schema  # lazy: nothing is read

    def schema(self) -> Any:
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self._out_schema()[1])

    def reader(self, schema: Any) -> DataSourceReader:
        t, out = self._out_schema()
        return _Reader(t.uri, t.version, out, self.options.get("filters"))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        if overwrite:
            raise errors.InvalidRequest(
                "mode('overwrite') would drop the table's rows without erasure evidence; "
                "append, or delete/erase the rows first (lethe erase, Table.purge)"
            )
        merge = str(self.options.get("mergeSchema", "false")).lower() == "true"
        return _Writer(_uri(self.options), self.options.get("request_id"), merge, schema)


class _Reader(DataSourceReader):
    def __init__(self, uri: str, version: int, out: pa.Schema, filters: str | None) -> None:
        self.uri, self.version, self.out, self.filters = uri, version, out, filters

    def partitions(self) -> list[InputPartition]:
        from lethe.reading.filters import normalize
        from lethe.reading.rows import plan_rows, units_of
        from lethe.table import Table

        t = Table.open(self.uri, version=self.version)
        f = _filters(self.filters)
        dnf = normalize(f, t.schema) if f is not None else None
        items, _ = plan_rows(t.store, t.catalog.prefix, t.manifest, dnf)
        parts: list[InputPartition] = []
        current: list[tuple[str, int, int]] = []
        for unit in units_of(items):
            if current and (current[0][0] != unit[0] or len(current) >= ROW_GROUPS_PER_PARTITION):
                parts.append(InputPartition(current))
                current = []
            current.append(unit)
        if current:
            parts.append(InputPartition(current))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from lethe.reading.filters import normalize
        from lethe.reading.rows import handles, read_planned

        store, prefix, snap = _pinned(self.uri, self.version)
        f = _filters(self.filters)
        dnf = normalize(f, snap.arrow_schema()) if f is not None else None
        items = handles(store, prefix, partition.value)
        yield from read_planned(store, prefix, snap, items, self.out, dnf)


_PINNED: dict[tuple[str, int], Any] = {}  # per Python worker (Spark reuses them)


def _pinned(uri: str, version: int) -> Any:
    """``(store, prefix, snapshot)`` of a pinned version: its root manifest read once per
    worker (immutable; the head is not read, the files come with the partition)."""
    got = _PINNED.get((uri, version))
    if got is None:
        from lethe.catalog.commit import Catalog
        from lethe.storage.store import S3Store, parse_s3_uri

        bucket, prefix = parse_s3_uri(uri)
        cat = Catalog(S3Store(bucket), prefix)
        got = _PINNED[(uri, version)] = (cat.store, cat.prefix, cat.read_manifest(version))
        while len(_PINNED) > 8:
            del _PINNED[next(iter(_PINNED))]
    return got


class _Files(WriterCommitMessage):
    def __init__(self, files: list[str], written_at: float) -> None:
        self.files = files  # DataFile JSON
        self.written_at = written_at


class _Writer(DataSourceArrowWriter):
    """Tasks write data files; the driver commits them in one commit (with ``request_id``)."""

    def __init__(self, uri: str, request_id: str | None, merge: bool, struct: Any) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        from lethe.table import Table

        self.uri = uri
        self.request_id = request_id
        t = Table.open(uri)
        data = to_arrow_schema(struct)
        if merge:
            t.append(data.empty_table(), schema_mode="merge")  # evolves; adds no row
            t = Table.open(uri)
        self.version = t.version

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Files:
        import time

        from lethe.table import Table

        t = Table.open(self.uri, version=self.version)
        written_at = time.time()
        first = next(iterator, None)
        if first is None:
            return _Files([], written_at)

        def batches() -> Iterator[pa.RecordBatch]:
            yield first
            yield from iterator

        reader = pa.RecordBatchReader.from_batches(first.schema, batches())
        files = t.write_data_files(reader)
        return _Files([f.model_dump_json() for f in files], written_at)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from lethe.catalog.manifest import DataFile
        from lethe.table import Table

        done = [m for m in messages if isinstance(m, _Files)]
        files = [DataFile.model_validate_json(f) for m in done for f in m.files]
        if not files:
            return
        written_at = min(m.written_at for m in done if m.files)
        Table.open(self.uri).commit_files(
            files, kind="append", request_id=self.request_id, written_at=written_at, own=True
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        from lethe.catalog.manifest import DataFile
        from lethe.table import Table

        files = [
            DataFile.model_validate_json(f)
            for m in messages
            if isinstance(m, _Files)
            for f in m.files
        ]
        if files:
            Table.open(self.uri).discard(files)
