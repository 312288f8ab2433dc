"""Direct registration of a ready Parquet upload: schema check from its footer, a pinned
server-side copy into ``data/``, one commit (idempotent on ``s3://bucket/key#etag``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.catalog.changes import AddFiles
from lethe.catalog.context import HasContext, TableContext, context_of
from lethe.catalog.evolution import SchemaMode
from lethe.catalog.manifest import DataFile, Operation, request_hash
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transaction import FileMaker, Staged, Step, Totals, TransactionChange
from lethe.index.commits import transaction
from lethe.ingest.conform import short
from lethe.ingest.inputs import upload_request_id
from lethe.ingest.shapes import check_file_schema, registered_schema, schema_steps
from lethe.reading.reader import FileHandle
from lethe.storage.store import S3Store
from lethe.writing.writer import describe, new_data_path

log = logging.getLogger(__name__)


# --- direct registration -----------------------------------------------------------------------
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
    from lethe.catalog.values import from_json

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
    target: TableContext | HasContext,
    key: str,
    *,
    bucket: str | None = None,
    etag: str | None = None,
    size: int | None = None,
    request_id: str | None = None,
    schema_mode: SchemaMode = "strict",
) -> RegisterResult:
    """Register an uploaded Parquet object in ``table`` without rewriting it.

    Reads the footer (one ETag-pinned tail GET), checks the schema
    (:func:`check_file_schema`), copies the object server-side into ``data/`` (pinned with
    ``x-amz-copy-source-if-match``), describes it for the manifest (row groups, key and column
    stats) and commits. The request id (default :func:`upload_request_id`) is recorded in the
    manifest, so the same object version is registered once however often its event arrives.
    Files written by pyarrow, Spark, DuckDB or polars are accepted when their schema matches.

    Args:
        target: The table: a :class:`~lethe.Table` handle (moved to the latest version by
            its ``refresh()``) or a :class:`~lethe.catalog.context.TableContext`.
        key: Object key of the upload.
        bucket: Its bucket (default: the table's bucket).
        etag: The ETag the event announced (default: HEAD the object).
        size: Its size (default: HEAD the object).
        request_id: Idempotency id (default ``s3://bucket/key#etag``).
        schema_mode: ``"strict"``: the file must match the current schema; ``"merge"``:
            new columns and widenings evolve the table first (:mod:`lethe.ingest.shapes`).

    Raises:
        SchemaMismatch: the file does not fit (every differing column listed; no change).
        UnsupportedFile: not Parquet, or encrypted.
        StaleSnapshot: the object changed after the event was sent.

    Example:
        >>> from lethe.ingest import register_parquet                 # doctest: +SKIP
        >>> register_parquet(table, "incoming/2024/batch-7.parquet")  # doctest: +SKIP
        RegisterResult(version=12, duplicate=False, path='data/...', rows=1000, ...)
    """
    t0 = time.perf_counter()
    r = _register(context_of(target), key, bucket, etag, size, request_id, schema_mode, t0)
    refresh = getattr(target, "refresh", None)  # a handle follows, as it always did
    if callable(refresh):
        refresh()
    return r


def _register(
    table: TableContext,
    key: str,
    bucket: str | None,
    etag: str | None,
    size: int | None,
    request_id: str | None,
    schema_mode: SchemaMode,
    t0: float,
) -> RegisterResult:
    bucket = bucket or table.store.bucket
    src = (
        table.store if bucket == table.store.bucket else S3Store(bucket, client=table.store.client)
    )
    etag, size = _pinned(src, key, etag, size)
    rid = request_id or upload_request_id(bucket, key, etag)
    table = table.latest()
    earlier = table.snapshot.find_request(request_hash(rid))
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
    md, file_schema = _footer(src, key, etag, size)
    if md.num_rows == 0:
        if schema_mode == "strict":  # an empty file evolves nothing, but still must fit
            check_file_schema(file_schema, md, table.schema)
        return RegisterResult(None, False, None, 0, 0, 0, time.perf_counter() - t0)
    steps = schema_steps(file_schema, md, schema_mode)
    probe = DataFile(path="", size=size, etag="", rows=md.num_rows, row_groups=(), added_version=0)
    # checked on this snapshot before the copy: a refusal has nothing to undo
    check = _add_step(probe, md, file_schema, schema_mode, rid)

    def checked(snap: Snapshot, _: bool) -> Staged:
        made = check(snap)
        return Staged(AddFiles(tuple(made[0]), made[1]) if made is not None else None)

    TransactionChange((*steps, checked)).prepare(table.snapshot)
    rel = new_data_path()
    written_at = time.time()  # before the copy: the GC grace clock of the new object
    new_etag = _copy_into(table, src, key, table.key_of(rel), etag)
    df = probe.model_copy(update={"path": rel, "etag": new_etag})
    add = _add_step(df, md, file_schema, schema_mode, rid)
    return _commit(table, steps, df, add, rid, (written_at, t0))


def _add_step(
    df: DataFile, md: pq.FileMetaData, file_schema: pa.Schema, mode: SchemaMode, rid: str
) -> FileMaker:
    """The registered file as the snapshot it is given describes it: under the schema it is
    registered under (:func:`registered_schema`), with the upload's request id."""

    def add(snap: Snapshot) -> tuple[Sequence[DataFile], Operation]:
        sid, schema = registered_schema(snap, file_schema, md, mode)
        groups, cols = describe(md, schema, snap.key)
        key_type = snap.arrow_schema().field(snap.key).type
        f = df.model_copy(
            update={
                "row_groups": groups,
                "columns": cols,
                "sorted_by_key": _declared_sorted(md, snap.key, key_type, groups),
                "schema_id": sid or None,  # its names and types are this schema's
            }
        )
        op = Operation(
            kind="register",
            rows_added=f.rows,
            files_added=1,
            request_id_hash=request_hash(rid),
            params={"bytes": f.size, "row_groups": len(groups)},
        )
        return [f], op

    return add


def _pinned(src: S3Store, key: str, etag: str | None, size: int | None) -> tuple[str, int]:
    """The upload's ETag (quoted, as S3 returns it) and size: as announced, else HEAD."""
    if etag is None or size is None:
        info = src.head(key)
        etag, size = info.etag, info.size
    if not etag.startswith('"'):
        etag = f'"{etag}"'
    return etag, size


def _footer(src: S3Store, key: str, etag: str, size: int) -> tuple[pq.FileMetaData, pa.Schema]:
    """The upload's footer (one ETag-pinned tail GET) and its Arrow schema.

    Raises:
        UnsupportedFile: the footer's schema cannot be read.
    """
    stub = DataFile(path=key, size=size, etag=etag, rows=0, row_groups=(), added_version=0)
    md = FileHandle(src, key, stub).tail().arrow
    try:
        return md, md.schema.to_arrow_schema()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise errors.UnsupportedFile(
            f"s3://{src.bucket}/{key}: unreadable Parquet schema: {short(e)}"
        ) from e


def _copy_into(table: TableContext, src: S3Store, key: str, dst: str, etag: str) -> str:
    """Server-side copy of the upload (pinned to ``etag``) to ``dst``; the copy's ETag."""
    source = key if src is table.store else f"s3://{src.bucket}/{key}"
    return table.store.copy(source, dst, src_etag=etag)


def _commit(
    table: TableContext,
    steps: Sequence[Step],
    df: DataFile,
    add: FileMaker,
    rid: str,
    t: tuple[float, float],
) -> RegisterResult:
    """Commit the copied file with the upload's request id and the schema changes it needs,
    as one version (a transaction at the catalog level: :func:`lethe.index.commits.transaction`);
    the copy is removed if it is not committed, e.g. when a redelivered twin committed first."""
    tx = transaction(table, "register")
    for step in steps:
        tx.stage(step)
    tx.add_files(add)
    written_at, t0 = t
    path = df.path
    outcome = tx.commit(owned=(path,), written_at=written_at)
    snap = outcome.manifest or outcome.base
    added = outcome.detail.files if isinstance(outcome.detail, Totals) else 0
    if outcome.manifest is None or added == 0:  # a redelivered twin committed first
        twin = snap.find_request(request_hash(rid))
        version = twin.version if twin is not None else snap.version
        rows = twin.rows if twin is not None else 0
        return RegisterResult(version, True, None, rows, 0, 0, time.perf_counter() - t0)
    got = snap.file(path)
    assert got is not None
    log.info(
        "registered %s rows in %s row groups at version %s",
        got.rows,
        len(got.row_groups),
        snap.version,
    )
    return RegisterResult(
        snap.version,
        False,
        got.path,
        got.rows,
        got.size,
        len(got.row_groups),
        time.perf_counter() - t0,
    )
