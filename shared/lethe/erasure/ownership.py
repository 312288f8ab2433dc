"""Ownership of objects adopted in place (:mod:`lethe.adopt`; docs/format.md "Ownership").

- An erasure rewrites a file and GC deletes the original, so a file Lethe does not own
  (``take_ownership=False``) refuses every physical erasure that would touch it (reads and DV
  deletes still work): :func:`check_owned`, :func:`check_erasable`.
- The **adoption ledger** is the table's record of every object it ever adopted, superseded
  ones included: each ``adopt`` commit writes one immutable ledger object under
  ``manifest/adopted/`` and adds its reference to the manifest (``adopted``) in the same
  commit, so a ledger entry exists exactly when its adoption landed. A re-run never takes
  again what the table superseded (:func:`adopted_objects`); GC and receipts find the owned
  objects outside the table prefix no data file references any more
  (:func:`superseded_external`): spliced originals and a source's history and metadata.
- An **ownership marker** per object, in the object's own bucket, created with
  ``If-None-Match`` before the adopting commit, names the one table that owns it (or the
  tables that read it without ownership): a second table is refused (:func:`check_free`,
  :func:`claim`), and GC deletes only what its own marker gives it (:func:`deletable`).
"""

from __future__ import annotations

import gzip
import hashlib
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

from lethe import errors
from lethe.catalog.manifest import DataFile, LedgerRef
from lethe.catalog.snapshot import Snapshot
from lethe.storage.layout import HEAD_KEY, OWNER_MARKER_PREFIX, is_external, object_key
from lethe.storage.store import S3Store

__all__ = [
    "LEDGER_PREFIX",
    "MARKER_PREFIX",
    "Adopted",
    "Ledger",
    "LedgerEntry",
    "Marker",
    "TableRef",
    "adopted_objects",
    "check_erasable",
    "check_free",
    "check_owned",
    "claim",
    "deletable",
    "ledger_for_commit",
    "legacy_entries",
    "marker_uri",
    "release",
    "superseded_external",
    "table_roots",
    "was_adopted",
    "write_ledger",
]


def check_owned(files: Iterable[DataFile], what: str) -> None:
    """Refuse ``what`` when one of ``files`` is an adopted file Lethe does not own.

    Raises:
        InvalidRequest: naming the files (paths only), why, and how to go on.
    """
    unowned = sorted(f.path for f in files if f.owned is False)
    if unowned:
        raise errors.InvalidRequest(
            f"{what} would rewrite {len(unowned)} adopted file(s) Lethe does not own "
            f"({', '.join(unowned[:3])}{', ...' if len(unowned) > 3 else ''}): they were "
            "adopted with take_ownership=False, so Lethe may not replace or delete them. "
            "Re-adopt the source with ownership (Table.adopt(..., take_ownership=True)) or "
            "rewrite those files (lethe adopt --rewrite-unready) first; reads and delete() "
            "(deletion vectors) still work"
        )


def check_erasable(snap: Snapshot, filters: Any) -> None:
    """Refuse an erase of ``filters`` when a file that may hold matching rows is unowned
    (checked before anything is committed; by the manifest's stats, so conservative; only
    the segments that may match are read, as the erase's own plan reads them)."""
    from lethe.reading.filters import normalize
    from lethe.reading.scan import candidate_files

    dnf = normalize(filters, snap.arrow_schema())
    check_owned(candidate_files(snap, dnf), "erase")


# --- the adoption ledger: every object a table ever adopted ---------------------------------
LEDGER_PREFIX: Final = "manifest/adopted/"
MERGE_AT: Final = 32  # small ledgers a manifest names before a commit merges them
SMALL: Final = 4096  # a ledger of fewer objects is small
MARKER_PREFIX: Final = OWNER_MARKER_PREFIX
Kind = Literal["data", "history"]


class LedgerEntry(BaseModel):
    """One adopted object: an absolute ``s3://`` URI, its ETag and size; ``kind`` ``data``
    (a data file the commit made live) or ``history`` (a source's earlier snapshots, metadata,
    logs, checkpoints and delete files: owned, superseded from the start)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: str
    etag: str | None = None
    size: int = 0
    kind: Kind = "data"
    # set in a merged ledger (several adoptions): the adoption's own ownership and time
    owned: bool | None = None
    at: datetime | None = None


class Ledger(BaseModel):
    """A ledger object (``manifest/adopted/vNNNNNNNN-<uuid>.json.gz``, gzip JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["lethe.adopted"] = "lethe.adopted"
    table_uuid: str
    at: datetime
    source: str = ""
    owned: bool = True
    objects: tuple[LedgerEntry, ...]


@dataclass(frozen=True, slots=True)
class Adopted:
    """An object a table adopted (what :func:`adopted_objects` and
    :func:`superseded_external` return): ``adopted_at`` is the adopting commit's time (the GC
    grace of a source's history counts from it, not from the object's LastModified)."""

    uri: str
    etag: str | None
    size: int
    kind: Kind
    owned: bool
    adopted_at: datetime


def ledger_key(version: int) -> str:
    """A new ledger object, written for the commit of ``version``."""
    return f"{LEDGER_PREFIX}v{version:08d}-{uuid.uuid4().hex[:12]}.json.gz"


def write_ledger(
    store: S3Store, prefix: str, version: int, ledger: Ledger
) -> tuple[str, LedgerRef]:
    """PUT ``ledger`` (create-only); returns its bucket key and the manifest's reference."""
    rel = ledger_key(version)
    key = object_key(prefix, rel)
    body = gzip.compress(ledger.model_dump_json().encode(), compresslevel=6, mtime=0)
    store.put(key, body, if_none_match=True)
    return key, LedgerRef(path=rel, objects=len(ledger.objects))


def _entries(store: S3Store, prefix: str, refs: Sequence[LedgerRef]) -> list[LedgerEntry]:
    """The entries of the ledgers ``refs`` (one GET each), each with its ownership and time."""
    if not refs:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(refs))) as pool:
        bodies = list(pool.map(lambda r: store.get(object_key(prefix, r.path)).body, refs))
    out: list[LedgerEntry] = []
    for ref, raw in zip(refs, bodies, strict=True):
        try:
            led = Ledger.model_validate_json(gzip.decompress(raw))
        except (OSError, ValueError) as e:
            raise errors.CorruptManifest(f"adoption ledger {ref.path}: {e}") from e
        out.extend(
            o.model_copy(
                update={"owned": led.owned if o.owned is None else o.owned, "at": o.at or led.at}
            )
            for o in led.objects
        )
    return out


def legacy_entries(snap: Snapshot, *, live: bool) -> tuple[LedgerEntry, ...]:
    """For a table whose manifest names no ledger (adopted before ledgers existed): the
    adopted originals its erasure records superseded (ETag unknown) and, with ``live``, the
    adopted files it holds (every segment is read); none once the table has a ledger. The
    first ``adopt`` commit writes them into its ledger."""
    if snap.manifest.adopted:
        return ()
    out = {
        f.path: LedgerEntry(path=f.path, etag=f.etag, size=f.size, owned=bool(f.owned))
        for f in (snap.files if live else ())
        if is_external(f.path)
    }
    for e in snap.erasures:
        for p in snap.resolved(e).superseded:
            if is_external(p) and p not in out:
                out[p] = LedgerEntry(path=p, owned=True)
    return tuple(out.values())


def adopted_objects(
    store: S3Store, prefix: str, snap: Snapshot, *, legacy: bool = False
) -> dict[str, list[Adopted]]:
    """Every object the table at ``prefix`` ever adopted (``snap``'s ledgers, one GET each),
    by URI (one entry per ETag taken under that URI); with ``legacy``, a table without a
    ledger answers from its erasure records (:func:`legacy_entries`)."""
    out: dict[str, list[Adopted]] = {}
    old = legacy_entries(snap, live=False) if legacy else ()
    for o in (*_entries(store, prefix, snap.manifest.adopted), *old):
        a = Adopted(o.path, o.etag, o.size, o.kind, bool(o.owned), o.at or datetime.now(UTC))
        out.setdefault(o.path, []).append(a)
    return out


def ledger_for_commit(
    store: S3Store, prefix: str, snap: Snapshot, ledger: Ledger
) -> tuple[str, LedgerRef, tuple[LedgerRef, ...]]:
    """Write the ledger of one ``adopt`` commit on ``snap``; once the manifest names
    ``MERGE_AT`` small ledgers (fewer than ``SMALL`` objects: the upload trigger adopts one
    object per commit), they are merged into this one, so the root stays small. Returns the
    ledger's bucket key, its reference and the references it replaces."""
    small = tuple(r for r in snap.manifest.adopted if r.objects < SMALL)
    merged: tuple[LedgerRef, ...] = ()
    if len(small) >= MERGE_AT:
        merged = small
        prior = _entries(store, prefix, small)
        ledger = ledger.model_copy(update={"objects": (*prior, *ledger.objects)})
    key, ref = write_ledger(store, prefix, snap.manifest.version + 1, ledger)
    return key, ref, merged


def superseded_external(catalog: Any, snap: Snapshot | None = None) -> list[Adopted]:
    """Every owned object outside the table prefix that the table adopted and that no data
    file entry of ``snap`` (default: the head) references: adopted originals an erasure,
    rewrite or retention sweep replaced, and a source's history and metadata (kind
    ``history``). Gone objects are included (callers HEAD or list them); objects another
    table references are included too: GC filters them with :func:`deletable`."""
    snap = snap if snap is not None else catalog.read_manifest(catalog.read_head()[0].version)
    ever = adopted_objects(catalog.store, catalog.prefix, snap)
    live = snap.files_at(list(ever))
    # a live key holds a newer object: not superseded
    return [a for uri, takes in sorted(ever.items()) if uri not in live for a in takes if a.owned]


def was_adopted(store: S3Store, prefix: str, snap: Snapshot, uri: str, etag: str) -> bool:
    """Whether the table adopted ``uri`` under ``etag`` before (it may have superseded it
    since): one marker GET, and the ledgers only when the marker names the table."""
    got = _read_marker(store, uri)
    if got is None and snap.manifest.adopted:
        return False
    if got is not None and got[0].others(snap.manifest.table_uuid):
        return False
    takes = adopted_objects(store, prefix, snap, legacy=True).get(uri, ())
    return any(a.etag is None or a.etag == etag for a in takes)


# --- ownership markers: one table per object ------------------------------------------------
class TableRef(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    uri: str
    uuid: str


class Marker(BaseModel):
    """``s3://<the object's bucket>/_lethe/owners/<sha256(uri)[:40]>.json``: the table that
    owns the object, or the tables that read it without ownership (not the object's path: a
    marker outlives its object, and a path may name a value)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    format: Literal["lethe.owner"] = "lethe.owner"
    owner: TableRef | None = None
    readers: tuple[TableRef, ...] = ()

    def others(self, table_uuid: str | None) -> tuple[str, ...]:
        """The URIs of the tables other than ``table_uuid`` the marker names."""
        refs = ([self.owner] if self.owner else []) + list(self.readers)
        return tuple(dict.fromkeys(r.uri for r in refs if r.uuid != table_uuid))


def marker_uri(uri: str) -> str:
    """The marker of the object at ``uri`` (in the object's own bucket)."""
    bucket = uri.removeprefix("s3://").split("/", 1)[0]
    return f"s3://{bucket}/{MARKER_PREFIX}{hashlib.sha256(uri.encode()).hexdigest()[:40]}.json"


def _read_marker(store: S3Store, uri: str) -> tuple[Marker, str] | None:
    try:
        r = store.get(marker_uri(uri))
    except errors.NotFound:
        return None
    return Marker.model_validate_json(r.body), r.etag


def _refuse(found: Mapping[str, tuple[str, ...]], what: str) -> errors.OwnedElsewhere:
    tables = tuple(dict.fromkeys(t for ts in found.values() for t in ts))
    some = sorted(found)[:3]
    return errors.OwnedElsewhere(
        f"{len(found)} object(s) to {what} belong to another Lethe table "
        f"({', '.join(tables)}): {', '.join(some)}{', ...' if len(found) > 3 else ''}. "
        "A table's erase and GC rewrite and delete the objects it owns, so two tables never "
        "share one (tables may share objects only when none owns them: take_ownership=False). "
        "Use that table; a claim left by an adoption that never committed is the marker "
        f"object under s3://<bucket>/{MARKER_PREFIX} (docs/format.md, Ownership): delete it",
        tables=tables,
    )


def check_free(store: S3Store, table_uuid: str | None, uris: Sequence[str], owned: bool) -> None:
    """Refuse adopting ``uris`` when another table owns or references one (its marker), or
    when one lies under another table's prefix (a ``_latest_manifest`` in a parent
    directory): nothing is written.

    Raises:
        OwnedElsewhere: naming the tables.
    """
    found: dict[str, tuple[str, ...]] = dict(_written_by_tables(store, uris))
    have = _existing_markers(store, uris)
    todo = [u for u in uris if have is None or marker_uri(u) in have]
    with ThreadPoolExecutor(max_workers=16) as pool:
        marks = list(pool.map(lambda u: _read_marker(store, u), todo))
    for uri, got in zip(todo, marks, strict=True):
        if got is None:
            continue
        m = got[0]
        others = m.others(table_uuid)
        if others and (owned or m.owner is not None):
            found[uri] = others
    if found:
        raise _refuse(found, "adopt")


def _existing_markers(store: S3Store, uris: Sequence[str]) -> set[str] | None:
    """The markers that exist in the buckets of ``uris``, by one LIST per 1,000 markers
    (cheaper than a GET per object while the buckets hold fewer than 1,000 markers per
    object asked about; None past that: GET each)."""
    buckets = sorted({u.removeprefix("s3://").split("/", 1)[0] for u in uris})
    cap = 1000 * max(1, len(uris))
    out: set[str] = set()
    for b in buckets:
        at = store if b == store.bucket else S3Store(b, client=store.client, stats=store.stats)
        for o in at.list(MARKER_PREFIX):
            out.add(f"s3://{b}/{o.key}")
            if len(out) > cap:
                return None
    return out


#: the folders a Lethe table writes below its prefix (lethe.storage.layout)
_TABLE_FOLDERS: Final = frozenset(
    {"data", "index", "tombstone", "_staging", "metadata", "manifest"}
)


def table_roots(uris: Sequence[str]) -> list[str]:
    """The directories that may be a Lethe table holding one of ``uris``: each directory
    followed by one of a table's folders (``data/``, ``index/``...), since a table writes
    nothing elsewhere: a few, however many files.

    >>> table_roots(["s3://b/raw/ev/dt=1/a.parquet", "s3://b/raw/ev/dt=2/b.parquet"])
    []
    >>> table_roots(["s3://b/t/data/2026/11/28/08/x.parquet", "s3://b/t/data/2026/11/28/09/y.parquet"])
    ['s3://b/t']
    """
    out: set[str] = set()
    for uri in uris:
        parts = uri.removeprefix("s3://").split("/")[:-1]
        out.update(
            "s3://" + "/".join(parts[:i])
            for i in range(1, len(parts))
            if parts[i] in _TABLE_FOLDERS
        )
    return sorted(out)


def _written_by_tables(store: S3Store, uris: Sequence[str]) -> Iterator[tuple[str, tuple[str]]]:
    """``(uri, (table,))`` for each of ``uris`` under a Lethe table's prefix (a
    ``_latest_manifest`` there: one HEAD per directory of :func:`table_roots`)."""
    todo = table_roots(uris)
    with ThreadPoolExecutor(max_workers=16) as pool:
        heads = list(pool.map(lambda d: store.exists(f"{d}/{HEAD_KEY}"), todo))
    tables = [d for d, h in zip(todo, heads, strict=True) if h]
    for uri in uris:
        owner = next((t for t in tables if uri.startswith(t + "/")), None)
        if owner is not None:
            yield uri, (owner,)


def claim(store: S3Store, table: TableRef, uris: Sequence[str], owned: bool) -> None:
    """Write the marker of each of ``uris`` for ``table`` (create-only: of two tables racing,
    one wins); a reader adds itself to an unowned marker by compare-and-swap.

    Raises:
        OwnedElsewhere: another table owns or references one of them.
    """
    found: dict[str, tuple[str, ...]] = {}
    created: list[str] = []
    lock = threading.Lock()

    def one(uri: str) -> None:
        for _ in range(8):
            mine = Marker(owner=table if owned else None, readers=() if owned else (table,))
            try:
                store.put(marker_uri(uri), mine.model_dump_json().encode(), if_none_match=True)
                if owned:
                    with lock:
                        created.append(marker_uri(uri))
                return
            except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
                pass
            got = _read_marker(store, uri)
            if got is None:
                continue
            m, etag = got
            others = m.others(table.uuid)
            if not others or (m.owner is None and table in m.readers):
                return  # ours already
            if owned or m.owner is not None:
                with lock:
                    found[uri] = others
                return
            more = m.model_copy(update={"readers": (*m.readers, table)})
            try:
                store.put(marker_uri(uri), more.model_dump_json().encode(), if_match=etag)
                return
            except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
                continue
        raise errors.CommitConflict(f"the ownership marker of {uri} kept changing; run again")

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, uris))
    if found:  # two tables racing for the same objects: release what this call claimed
        store.delete_many(created)
        raise _refuse(found, "adopt")


def release(store: S3Store, table: TableRef, uris: Sequence[str]) -> None:
    """Undo :func:`claim` of ``uris`` by ``table`` (an adoption that failed before it
    committed anything): a marker naming only ``table`` is deleted, ``table`` leaves the
    readers of a marker other tables share (compare-and-swap)."""

    def one(uri: str) -> None:
        for _ in range(8):
            got = _read_marker(store, uri)
            if got is None:
                return
            m, etag = got
            owner = None if m.owner is not None and m.owner.uuid == table.uuid else m.owner
            readers = tuple(r for r in m.readers if r.uuid != table.uuid)
            if owner == m.owner and readers == m.readers:
                return  # not ours
            if owner is None and not readers:
                store.delete_many([marker_uri(uri)])
                return
            less = m.model_copy(update={"owner": owner, "readers": readers})
            try:
                store.put(marker_uri(uri), less.model_dump_json().encode(), if_match=etag)
                return
            except (errors.PreconditionFailed, errors.ConditionalRequestConflict):
                continue

    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(one, uris))


def deletable(catalog: Any, uris: Iterable[str], table_uuid: str) -> set[str]:
    """The owned adopted objects among ``uris`` GC may delete: those whose marker names the
    table as their only owner and reader. An object without a marker (adopted before markers
    existed) is claimed for the table first (create-only), so that no table takes it later;
    an object another table owns or reads is kept."""
    table = TableRef(uri=catalog.uri, uuid=table_uuid)
    todo = sorted(set(uris))

    def ok(uri: str) -> bool:
        got = _read_marker(catalog.store, uri)
        if got is None:
            try:
                claim(catalog.store, table, [uri], owned=True)
            except errors.OwnedElsewhere:
                return False
            return True
        return not got[0].others(table_uuid)

    if not todo:
        return set()
    with ThreadPoolExecutor(max_workers=min(16, len(todo))) as pool:
        return {u for u, keep in zip(todo, pool.map(ok, todo), strict=True) if keep}
