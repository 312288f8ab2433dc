"""Iceberg manifests and manifest lists as Avro bytes (pure: bytes in, bytes out).

PyIceberg's Avro codec and its spec schemas (``MANIFEST_ENTRY_SCHEMAS``,
``MANIFEST_LIST_FILE_SCHEMAS``, with every field id) do the encoding. Its manifest *writers*
stop at format 2 and always stamp the writing snapshot's id on new entries, so this module
drives :class:`pyiceberg.avro.file.AvroOutputFile` directly with the format-3 (or 2) schemas
and our explicit entries, into memory; the publisher stores the bytes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Final

from pyiceberg.avro.file import AvroFile, AvroOutputFile
from pyiceberg.io import InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import (
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
    data_file_with_partition,
    manifest_entry_schema_with_data_file,
)
from pyiceberg.types import StructType

from lethe.iceberg.partitioning import ViewSpec
from lethe.iceberg.types import FormatVersion, IcebergSchema

__all__ = ["decode_manifest", "decode_manifest_list", "encode_manifest", "encode_manifest_list"]

CODEC: Final = "deflate"  # Iceberg's default ("gzip" in its table properties)


class _Sink(io.BytesIO):
    """A BytesIO that keeps its value after ``close`` (AvroOutputFile closes its stream)."""

    value: bytes = b""

    def close(self) -> None:
        self.value = self.getvalue()
        super().close()


class _MemoryOutput(OutputFile):
    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.sink = _Sink()

    def __len__(self) -> int:
        return len(self.sink.value)

    def exists(self) -> bool:
        return False

    def to_input_file(self) -> InputFile:
        return _MemoryInput(self.location, self.sink.value)

    def create(self, overwrite: bool = False) -> OutputStream:
        return self.sink


class _Stream(io.BytesIO):
    def __exit__(
        self,
        exctype: type[BaseException] | None,
        excinst: BaseException | None,
        exctb: TracebackType | None,
    ) -> None:
        self.close()


class _MemoryInput(InputFile):
    def __init__(self, location: str, data: bytes) -> None:
        super().__init__(location)
        self.data = data

    def __len__(self) -> int:
        return len(self.data)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return _Stream(self.data)


def _entry_schema(format_version: FormatVersion, partition: StructType | None = None) -> Any:
    return manifest_entry_schema_with_data_file(
        format_version=format_version,
        data_file=data_file_with_partition(partition or StructType(), format_version),
    )


def _encode(records: Sequence[Any], schema: Any, name: str, meta: dict[str, str]) -> bytes:
    """One Avro object container of ``records`` (``name``: the record's Avro name)."""
    out = _MemoryOutput(f"memory:{name}.avro")
    with AvroOutputFile[Any](
        output_file=out,
        file_schema=schema,
        record_schema=schema,
        schema_name=name,
        metadata=meta,
    ) as w:
        w.write_block(list(records))
    return out.sink.value


def encode_manifest(
    entries: Sequence[ManifestEntry],
    *,
    schema: IcebergSchema,
    content: ManifestContent,
    format_version: FormatVersion,
    spec: ViewSpec | None = None,
) -> bytes:
    """An Iceberg manifest (Avro object container) holding ``entries``, unpartitioned (spec
    0) or under the identity ``spec`` of adopted files, with the header metadata the spec
    asks for."""
    meta = {
        "schema": schema.schema.model_dump_json(),
        "schema-id": "0",
        "partition-spec": json.dumps(list(spec.fields)) if spec else "[]",
        "partition-spec-id": str(spec.spec_id) if spec else "0",
        "format-version": str(format_version),
        "content": "data" if content == ManifestContent.DATA else "deletes",
        "avro.codec": CODEC,
    }
    file_schema = _entry_schema(format_version, spec.struct if spec else None)
    return _encode(entries, file_schema, "manifest_entry", meta)


def encode_manifest_list(
    manifests: Sequence[ManifestFile],
    *,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    first_row_id: int | None,
    format_version: FormatVersion,
) -> bytes:
    """A manifest list for one snapshot."""
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": str(parent_snapshot_id) if parent_snapshot_id is not None else "null",
        "sequence-number": str(sequence_number),
        "format-version": str(format_version),
        "avro.codec": CODEC,
    }
    if format_version >= 3 and first_row_id is not None:
        meta["first-row-id"] = str(first_row_id)
    return _encode(manifests, MANIFEST_LIST_FILE_SCHEMAS[format_version], "manifest_file", meta)


def _format_of(data: bytes) -> FormatVersion:
    """The format version an Avro file of ours declares in its header (3 when absent)."""
    with AvroFile[Any](_MemoryInput("memory:x.avro", data)) as f:
        fv = f.header.meta.get("format-version", "3")
    return 2 if fv == "2" else 3


def decode_manifest_list(data: bytes) -> list[ManifestFile]:
    """The manifests a manifest list names (``first_row_id`` kept in format 3)."""
    schema = MANIFEST_LIST_FILE_SCHEMAS[_format_of(data)]
    with AvroFile[ManifestFile](
        _MemoryInput("memory:snap.avro", data),
        schema,
        read_types={-1: ManifestFile, 508: PartitionFieldSummary},
        read_enums={517: ManifestContent},
    ) as reader:
        return list(reader)


def decode_manifest(data: bytes) -> list[ManifestEntry]:
    """The entries of a manifest (explicit values only: nothing inherited here)."""
    fv = _format_of(data)
    with AvroFile[ManifestEntry](
        _MemoryInput("memory:manifest.avro", data),
        _entry_schema(fv),
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        return list(reader)


def header(data: bytes) -> dict[str, Any]:
    """The key-value metadata of an Avro file's header (the Avro schema parsed)."""
    with AvroFile[Any](_MemoryInput("memory:x.avro", data)) as f:
        meta: dict[str, Any] = dict(f.header.meta)
    meta["avro.schema"] = json.loads(meta["avro.schema"])
    return meta
