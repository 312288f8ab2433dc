"""What a source of existing files says about them, before Lethe adopts them (pure values).

Each source reader (a Parquet prefix with Hive directories, a Glue table, an Iceberg
``metadata.json``, a Delta ``_delta_log``) turns what it finds into one
:class:`SourceListing`: the data files in place (absolute ``s3://`` URIs, never copied), their
partition values, and the rows the source had already deleted. :mod:`lethe.adopt` plans and
commits the adoption from it; nothing here does I/O.

>>> f = SourceFile("s3://lake/raw/events/dt=2026-01-01/part-0.parquet", 1024, '"e1"', {"dt": "2026-01-01"})
>>> f.bucket, f.key
('lake', 'raw/events/dt=2026-01-01/part-0.parquet')
>>> SourceListing("parquet", "s3://lake/raw/events/", (f,)).bytes
1024
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pyarrow as pa

from lethe.catalog.values import JsonScalar

__all__ = ["HistoryObject", "SourceFile", "SourceFormat", "SourceListing"]

SourceFormat = Literal["parquet", "glue", "iceberg", "delta"]


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One existing Parquet data file, where it is.

    Attributes:
        uri: ``s3://bucket/key`` of the object, in any bucket.
        size: its length in bytes.
        etag: its ETag (quoted, as S3 returns it), or None when the source did not say
            (the adopter HEADs it).
        partition: partition column name -> value, for columns that are not in the file
            (Hive ``key=value/`` directories, Iceberg identity partitions, Delta
            ``partitionValues``), in the canonical JSON form of :mod:`lethe.catalog.values` for the
            column's type in :attr:`SourceListing.partition_schema` (Hive: the raw
            directory string until typed; ``None`` is a null partition value).
        deleted: positions (0-based row numbers in the file) the source had deleted
            (Iceberg position deletes or v3 deletion vectors, Delta deletion vectors),
            sorted and unique; the adopter turns them into Lethe DVs so they stay deleted.
    """

    uri: str
    size: int
    etag: str | None
    partition: Mapping[str, JsonScalar] = field(default_factory=dict)
    deleted: tuple[int, ...] = ()

    @property
    def bucket(self) -> str:
        return self.uri.removeprefix("s3://").split("/", 1)[0]

    @property
    def key(self) -> str:
        return self.uri.removeprefix("s3://").split("/", 1)[1]


@dataclass(frozen=True, slots=True)
class HistoryObject:
    """An object of a source that is not a live data file but holds (copies of) its values:
    an earlier snapshot's data file, a delete file, Iceberg metadata JSON, manifest lists and
    manifests (column bounds), Delta ``_delta_log`` commits and checkpoints (statistics).
    Adoption with ownership takes it as owned and superseded (GC deletes it after the grace).

    Attributes:
        what: a short description (``iceberg manifest``, ``delta checkpoint``...).
    """

    uri: str
    size: int
    etag: str | None
    what: str


@dataclass(frozen=True, slots=True)
class SourceListing:
    """Everything one source reader found.

    Attributes:
        format: which kind of source it was.
        source: the URI (or ``glue://database/table``) it was read from.
        files: the live data files, in a stable order (by URI).
        schema: the source's declared table schema (Iceberg, Delta, Glue), with
            ``PARQUET:field_id`` metadata when the source has field ids; None: the union of
            the files' footers decides.
        partition_schema: the partition columns and their types (they are not in the
            files); None when the source has no partitions.
        physical_names: field id -> the column's name inside the files, for sources whose
            files name columns differently from the table (Delta column mapping); empty
            when the names agree.
        key: the source's own identifier columns, if it declares them (Iceberg
            ``identifier-field-ids``); a hint, the caller's ``key=`` wins.
        history: the source's objects that are not live data files but hold its values
            (earlier snapshots, metadata, logs, checkpoints, delete files), by URI.
    """

    format: SourceFormat
    source: str
    files: tuple[SourceFile, ...]
    schema: pa.Schema | None = None
    partition_schema: pa.Schema | None = None
    physical_names: Mapping[int, str] = field(default_factory=dict)
    key: tuple[str, ...] = ()
    history: tuple[HistoryObject, ...] = ()

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def deleted_rows(self) -> int:
        return sum(len(f.deleted) for f in self.files)
