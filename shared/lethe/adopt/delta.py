"""The Delta source reader: a Delta table's snapshot as a :class:`SourceListing`.

:func:`list_delta` reads the checkpoint ``_last_checkpoint`` names and then GETs the commits
after it until one is missing (no LIST); for a given ``version``, or without the hint, it lists
``_delta_log/`` once and takes the newest complete checkpoint at or before the wanted version
(single-file or multi-part Parquet checkpoints). Then it replays the JSON commits: ``add`` and
``remove`` keyed by path and deletion vector (a DV update removes and re-adds one path),
``metaData`` and ``protocol``. The result is each live file with its typed partition values
(:func:`lethe.adopt.delta_format.partition_value`), the schema with column mapping ids as field
ids and physical names, and the positions its deletion vector deletes (``u``, ``i`` and ``p``
storage).

Refused with :class:`~lethe.errors.UnsupportedSource`, naming the feature: reader or writer
features other than those in :data:`READER_FEATURES` / :data:`WRITER_FEATURES` (e.g.
``typeWidening``: old files hold narrower types; ``v2Checkpoint``: sidecar checkpoints are not
read; ``catalogManaged``: commits may live in a catalog), and UUID-named (v2) checkpoints.
Writer-only features that constrain future writes but not which rows are live
(``appendOnly``, ``invariants``, ``checkConstraints``, ``generatedColumns``, ...) are accepted.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from lethe import errors
from lethe.adopt.delta_format import (
    DeltaSchema,
    decode_bitmap_array,
    delta_schema,
    dv_file_name,
    partition_value,
    read_dv_file,
    z85_decode,
)
from lethe.adopt.history import history_objects
from lethe.adopt.objects import SourceObjects, s3_uri
from lethe.adopt.source import SourceFile, SourceListing
from lethe.catalog.values import JsonScalar
from lethe.storage.store import S3Store

__all__ = ["READER_FEATURES", "WRITER_FEATURES", "DeltaLog", "list_delta", "replay"]

# variantType: delta-rs lists it on every table with features; a variant column is refused by
# the schema reader itself
READER_FEATURES = frozenset(
    {"columnMapping", "deletionVectors", "timestampNtz", "vacuumProtocolCheck", "variantType"}
)
WRITER_FEATURES = READER_FEATURES | {
    "appendOnly",
    "invariants",
    "checkConstraints",
    "generatedColumns",
    "allowColumnDefaults",
    "changeDataFeed",
    "identityColumns",
    "rowTracking",
    "domainMetadata",
    "icebergCompatV1",
    "icebergCompatV2",
    "clustering",
    "inCommitTimestamp",
}
_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
_UUID_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-f-]{36}\.(?:parquet|json)$")


@dataclass
class DeltaLog:
    """A replayed snapshot: live ``add`` actions by (path, DV id), the metadata and protocol."""

    adds: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    metadata: Mapping[str, Any] | None = None
    protocol: Mapping[str, Any] | None = None

    def apply(self, action: Mapping[str, Any]) -> None:
        if (add := action.get("add")) is not None:
            self.adds[(add["path"], _dv_id(add.get("deletionVector")))] = add
        elif (rm := action.get("remove")) is not None:
            self.adds.pop((rm["path"], _dv_id(rm.get("deletionVector"))), None)
        elif (meta := action.get("metaData")) is not None:
            self.metadata = meta
        elif (proto := action.get("protocol")) is not None:
            self.protocol = proto


def _dv_id(dv: Mapping[str, Any] | None) -> str:
    if not dv:
        return ""
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def replay(actions: Iterable[Mapping[str, Any]], log: DeltaLog | None = None) -> DeltaLog:
    """Apply actions in log order.

    >>> log = replay([{"add": {"path": "a"}}, {"add": {"path": "b"}}, {"remove": {"path": "a"}}])
    >>> sorted(p for p, _ in log.adds)
    ['b']
    """
    log = log if log is not None else DeltaLog()
    for a in actions:
        log.apply(a)
    return log


def _plain(v: Any) -> Any:
    """Checkpoint rows as JSON actions: Arrow maps come back as lists of pairs."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if x is not None}
    return v


def _checkpoint_actions(body: bytes) -> list[dict[str, Any]]:
    pf = pq.ParquetFile(io.BytesIO(body))
    cols = [c for c in ("add", "metaData", "protocol") if c in pf.schema_arrow.names]
    out = []
    for row in pf.read(columns=cols).to_pylist():
        for c in cols:
            if row.get(c) is not None:
                out.append({c: _plain(row[c])})
    return out


def _pick_checkpoint(names: Sequence[str], version: int) -> tuple[int, list[str]] | None:
    """The newest complete checkpoint at or before ``version``: (its version, its files)."""
    parts: dict[tuple[int, int], set[int]] = {}
    for n in names:
        if (m := _CHECKPOINT.match(n)) is not None:
            v, part, total = int(m.group(1)), m.group(2), m.group(3)
            parts.setdefault((v, int(total or 1)), set()).add(int(part or 1))
    done = sorted(
        (v, total) for (v, total), got in parts.items() if len(got) == total and v <= version
    )
    if not done:
        return None
    v, total = done[-1]
    return v, _checkpoint_names(v, total)


def _checkpoint_names(v: int, total: int) -> list[str]:
    """The files of checkpoint ``v`` in ``total`` parts.

    >>> _checkpoint_names(10, 2)
    ['00000000000000000010.checkpoint.0000000001.0000000002.parquet', '00000000000000000010.checkpoint.0000000002.0000000002.parquet']
    """
    if total == 1:
        return [f"{v:020d}.checkpoint.parquet"]
    return [f"{v:020d}.checkpoint.{i:010d}.{total:010d}.parquet" for i in range(1, total + 1)]


def _replay_commit(objects: SourceObjects, root: str, v: int, log: DeltaLog) -> None:
    body = objects.read(f"{root}/_delta_log/{v:020d}.json").decode()
    replay((json.loads(line) for line in body.splitlines() if line.strip()), log)


def _from_last_checkpoint(objects: SourceObjects, root: str) -> tuple[int, DeltaLog] | None:
    """The latest snapshot from ``_last_checkpoint`` (no LIST): its checkpoint, then commits
    GET one after another until one is missing. None: no hint, or a stale one."""
    try:
        hint = json.loads(objects.read(f"{root}/_delta_log/_last_checkpoint"))
    except errors.NotFound:
        return None
    if hint.get("v2Checkpoint") is not None:
        raise errors.UnsupportedSource(f"{root}: a v2 checkpoint (with sidecars) is not read")
    at, log = int(hint["version"]), DeltaLog()
    try:
        for n in _checkpoint_names(at, int(hint.get("parts") or 1)):
            replay(_checkpoint_actions(objects.read(f"{root}/_delta_log/{n}")), log)
    except errors.NotFound:
        return None  # the hint names a checkpoint that is gone: list the log instead
    while True:
        try:
            _replay_commit(objects, root, at + 1, log)
        except errors.NotFound:
            return at, log
        at += 1


def _load(objects: SourceObjects, root: str, version: int | None) -> tuple[int, DeltaLog]:
    if version is None and (found := _from_last_checkpoint(objects, root)) is not None:
        return found
    names = [o.key.rsplit("/", 1)[-1] for o in objects.list(f"{root}/_delta_log/")]
    commits = sorted(int(m.group(1)) for n in names if (m := _COMMIT.match(n)))
    uuid_named = sorted(n for n in names if _UUID_CHECKPOINT.match(n))
    if not commits and not any(_CHECKPOINT.match(n) for n in names):
        raise errors.NotFound(f"no Delta log under {root}/_delta_log/")
    latest = max(commits + [int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n))])
    want = latest if version is None else version
    if want > latest or want < 0:
        raise errors.SnapshotNotFound(f"Delta table {root} has no version {want} (latest {latest})")
    if uuid_named:
        raise errors.UnsupportedSource(
            f"{root}: UUID-named (v2) checkpoint {uuid_named[-1]} is not read"
        )
    cp = _pick_checkpoint(names, want)
    log, start = DeltaLog(), 0
    if cp is not None:
        start = cp[0] + 1
        for n in cp[1]:
            replay(_checkpoint_actions(objects.read(f"{root}/_delta_log/{n}")), log)
    need = list(range(start, want + 1))
    missing = sorted(set(need) - set(commits))
    if missing:
        raise errors.SnapshotNotFound(
            f"Delta table {root}: commit {missing[0]:020d}.json is missing (cleaned up?) and no "
            f"checkpoint covers version {want}"
        )
    for v in need:
        _replay_commit(objects, root, v, log)
    return want, log


def _check_protocol(root: str, protocol: Mapping[str, Any] | None) -> None:
    if protocol is None:
        raise errors.UnsupportedSource(f"Delta table {root} has no protocol action")
    reader, writer = (
        int(protocol.get("minReaderVersion", 1)),
        int(protocol.get("minWriterVersion", 2)),
    )
    if reader > 3 or writer > 7:
        raise errors.UnsupportedSource(
            f"Delta table {root} needs reader {reader} / writer {writer}"
        )
    for kind, known in (("reader", READER_FEATURES), ("writer", WRITER_FEATURES)):
        for feature in protocol.get(f"{kind}Features") or ():
            if feature not in known:
                raise errors.UnsupportedSource(
                    f"Delta table {root} uses the {kind} feature {feature!r}, which Lethe does not "
                    "adopt (refused rather than read wrong)"
                )


def _data_uri(root: str, path: str) -> str:
    if "://" in path:
        return s3_uri(unquote(path), what="Delta data file")
    return f"{root}/{unquote(path)}"


def _deleted(objects: SourceObjects, root: str, add: Mapping[str, Any]) -> tuple[int, ...]:
    dv = add.get("deletionVector")
    if not dv:
        return ()
    kind, where, size = dv["storageType"], dv["pathOrInlineDv"], int(dv["sizeInBytes"])
    path = f"{root}/{add['path']}"
    if kind == "i":
        bm = decode_bitmap_array(z85_decode(where)[:size])
    elif kind in ("u", "p"):
        file = (
            f"{root}/{dv_file_name(where)}"
            if kind == "u"
            else s3_uri(unquote(where), what="Delta DV")
        )
        offset = int(dv.get("offset") or 0)
        body = objects.get(file, start=offset, end=offset + size + 8).body
        bm = read_dv_file(body, 0, size, path=file)
    else:
        raise errors.UnsupportedSource(
            f"{path}: deletion vector storage type {kind!r} is not known"
        )
    if len(bm) != int(dv["cardinality"]):
        raise errors.CorruptDeletionVector(
            f"{path}: its deletion vector holds {len(bm)} positions, the log says {dv['cardinality']}"
        )
    return tuple(int(p) for p in bm)


def _files(
    objects: SourceObjects,
    root: str,
    log: DeltaLog,
    schema: DeltaSchema,
    partition_cols: Sequence[str],
) -> list[SourceFile]:
    seen: dict[str, tuple[Mapping[str, Any], dict[str, JsonScalar]]] = {}
    for (_, _dv), add in sorted(log.adds.items()):
        uri = _data_uri(root, add["path"])
        if uri in seen:
            raise errors.UnsupportedSource(
                f"Delta log lists {uri} twice as live (two deletion vectors)"
            )
        values = add.get("partitionValues") or {}
        part = {}
        for col in partition_cols:
            raw = values.get(schema.physical_of.get(col, col))
            try:
                part[col] = partition_value(raw, schema.schema.field(col).type)
            except errors.UnsupportedSource as e:
                raise errors.UnsupportedSource(f"{uri}: partition column {col!r}: {e}") from e
        seen[uri] = (add, part)
    uris = sorted(seen)
    deleted = objects.map(lambda u: _deleted(objects, root, seen[u][0]), uris)
    return [
        SourceFile(u, int(seen[u][0]["size"]), None, seen[u][1], d)
        for u, d in zip(uris, deleted, strict=True)
    ]


def list_delta(
    store: S3Store, table_uri: str, *, version: int | None = None, history: bool = False
) -> SourceListing:
    """The live files of a Delta table at its latest version (or ``version``), with their
    partition values and the rows their deletion vectors delete; with ``history``, also every
    other object under the table root (:attr:`SourceListing.history`), as an adoption does.

    Raises:
        NotFound: no ``_delta_log`` under ``table_uri``.
        SnapshotNotFound: ``version`` does not exist or its commits were cleaned up.
        UnsupportedSource: a feature, type or checkpoint kind the reader does not handle.
        CorruptDeletionVector: a DV fails its size, magic, CRC or cardinality checks.
    """
    objects = SourceObjects(store)
    root = s3_uri(table_uri, what="Delta table").rstrip("/")
    at, log = _load(objects, root, version)
    _check_protocol(root, log.protocol)
    if log.metadata is None:
        raise errors.UnsupportedSource(f"Delta table {root} has no metaData action at version {at}")
    meta = log.metadata
    fmt = (meta.get("format") or {}).get("provider", "parquet")
    if fmt != "parquet":
        raise errors.UnsupportedSource(f"Delta table {root} stores {fmt!r} files, not Parquet")
    config = meta.get("configuration") or {}
    schema = delta_schema(
        meta["schemaString"], column_mapping=config.get("delta.columnMapping.mode", "none")
    )
    partition_cols = list(meta.get("partitionColumns") or [])
    files = _files(objects, root, log, schema, partition_cols)
    parts = pa.schema([schema.schema.field(c) for c in partition_cols]) if partition_cols else None
    return SourceListing(
        "delta",
        f"{root}/",
        tuple(files),
        schema=schema.schema,
        partition_schema=parts,
        physical_names=schema.physical_names,
        # _delta_log commits and checkpoints, removed files, DV files: all of the root
        history=history_objects(objects, [f"{root}/"], (f.uri for f in files)) if history else (),
    )
