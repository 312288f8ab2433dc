"""Mark: list a table's GC areas and collect what its retained manifests reference.

:func:`mark` re-reads the head, reads any landed successor whose head update is still
pending, and walks ``previous`` from the head over the retention window (by age and/or
version count; the head is always kept). Every data file and DV container those manifests
reference is marked, and so is every segment object of a format-2 manifest (each distinct
segment is opened once per run: segments are immutable and shared across versions) and every
superseded list an erasure record names (the marks carry each record with its full list). A run
lists *before* it marks (see :mod:`lethe.gc`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta

from lethe import errors
from lethe.catalog.commit import Catalog
from lethe.catalog.manifest import DataFile, ErasureRecord
from lethe.catalog.snapshot import Snapshot
from lethe.erasure.ownership import deletable, superseded_external
from lethe.errors import GcConflict
from lethe.gc.areas import manifest_version
from lethe.gc.history import History
from lethe.gc.policy import Retention, as_utc, is_old
from lethe.gc.select import Listed, Marks
from lethe.storage.store import S3Store

__all__ = ["list_objects", "list_versions", "mark", "newly_referenced", "references", "relative"]


def references(m: Snapshot, memo: dict[str, frozenset[str]] | None = None) -> set[str]:
    """The data files, DV containers, segments, index pieces and superseded lists manifest
    ``m`` references (table-relative).
    ``memo`` (segment path -> what its entries reference) spares re-reading shared segments."""
    pieces = {p.path for ix in m.indexes for r in ix.runs for p in r.pieces}
    pieces.update(ref for e in m.erasures for ref in e.superseded_refs)
    if not m.segmented:
        return _file_refs(m.files) | pieces
    memo = {} if memo is None else memo
    todo = [s for s in m.segments if s.path not in memo]
    for s, seg in zip(todo, m.segments_of(todo), strict=True):
        memo[s.path] = frozenset(_file_refs(seg.files))
    refs = {s.path for s in m.segments} | pieces
    for s in m.segments:
        refs |= memo[s.path]
    refs.update(o.dv.container for o in m.dv_overlay if o.dv.container)
    return refs


def _file_refs(files: Iterable[DataFile]) -> set[str]:
    """The data files and their DV containers."""
    return {r for f in files for r in (f.path, f.dv.container if f.dv is not None else None) if r}


def relative(catalog: Catalog, key: str) -> str:
    """A bucket key of the table as a table-relative path (an adopted file's absolute
    ``s3://`` path as it is)."""
    if key.startswith("s3://"):
        return key
    return key[len(catalog.prefix) + 1 :] if catalog.prefix else key


def external_superseded(
    catalog: Catalog, marks: Marks, listing: Iterable[Listed] = ()
) -> list[Listed]:
    """Adopted originals outside the table prefix (GC lists only the table's) that no kept
    manifest references any more: those erasure splices superseded (a splice only ever
    supersedes a file Lethe owns: unowned ones refuse it), and the owned ones the manifests
    this run expires were the last to reference (a rewrite replaced them). One HEAD each;
    gone ones are left out. GC deletes them like the files under ``data/``."""
    paths = {p for e in marks.erasures for p in e.superseded if p.startswith("s3://")}
    for listed in listing:  # manifests about to expire: their owned adopted files
        v = manifest_version(listed.path)
        if v is None or v >= marks.oldest_kept:
            continue
        try:  # only a rewrite or a retention sweep drops files whole: read the roots first
            if catalog.read_manifest(v + 1).operation.kind not in ("compact", "retention"):
                continue
            m = catalog.read_manifest(v)
        except errors.SnapshotNotFound:
            continue
        paths.update(f.path for f in m.files if f.owned and f.path.startswith("s3://"))
    # the ledger (lethe.erasure.ownership): owned objects no data file references, a source's history
    # among them (its grace counts from the adoption); never what another table references
    taken = {a.uri: a.adopted_at for a in superseded_external(catalog)}
    paths.update(taken)
    out: list[Listed] = []
    for p in sorted(paths):
        if p in marks.referenced:
            continue
        try:
            o = catalog.store.head(p)
        except errors.NotFound:
            continue
        at = as_utc(o.last_modified)
        if p in taken and at is not None:
            at = max(at, taken[p])
        out.append(Listed(p, o.size, at))
    ok = deletable(catalog, [o.path for o in out], marks.table_uuid)
    return [o for o in out if o.path in ok]


def _roots(prefixes: Iterable[str]) -> list[str]:
    """``prefixes`` without those nested in another (the segments live under ``manifest/``)."""
    ps = list(prefixes)
    return list(dict.fromkeys(p for p in ps if not any(p != q and p.startswith(q) for q in ps)))


def list_versions(catalog: Catalog, prefixes: Iterable[str]) -> list[S3Store.ObjectVersion]:
    """Every version and delete marker under the table-relative ``prefixes`` (bucket keys)."""
    out: list[S3Store.ObjectVersion] = []
    for prefix in _roots(prefixes):
        out.extend(catalog.store.list_object_versions(catalog.key(prefix)))
    return out


def list_objects(catalog: Catalog, prefixes: Iterable[str]) -> list[Listed]:
    """Every object under the table-relative ``prefixes`` (once, when prefixes nest: the
    segments live under ``manifest/``)."""
    out: list[Listed] = []
    for prefix in _roots(prefixes):
        for o in catalog.store.list(catalog.key(prefix)):
            out.append(Listed(relative(catalog, o.key), o.size, as_utc(o.last_modified)))
    return out


def _cuts(erasures: Iterable[ErasureRecord], head_version: int) -> frozenset[int]:
    """The splice commits of spliced erasures (at most the head's version): each one, once
    older than the erasure grace, is the oldest version GC keeps (see :func:`mark`)."""
    return frozenset(
        e.spliced_version
        for e in erasures
        if e.state == "spliced"
        and e.spliced_version is not None
        and e.spliced_version <= head_version
    )


class _Walk:
    """The marks being collected: what the kept manifests reference, their times, the
    erasure records (newest manifest's state wins), and what only the versions cut off by
    an erasure referenced (``released``)."""

    def __init__(self, catalog: Catalog, table_uuid: str) -> None:
        self.catalog, self.table_uuid = catalog, table_uuid
        self.refs: set[str] = set()
        self.released: set[str] = set()
        self.created: dict[int, datetime] = {}
        self.erasures: dict[str, ErasureRecord] = {}
        self.memo: dict[str, frozenset[str]] = {}
        self.history: History | None = None

    def check(self, m: Snapshot) -> None:
        if m.table_uuid != self.table_uuid:
            raise GcConflict(
                f"{self.catalog.uri}: manifest v{m.version} belongs to another table "
                f"({m.table_uuid} != {self.table_uuid})"
            )

    def take(self, m: Snapshot) -> None:
        self.check(m)
        refs = references(m, self.memo)
        self.refs.update(refs)
        if self.history is not None:
            self.history.saw(m.version, refs)
        self.created[m.version] = m.created_at
        for e in m.erasures:  # newest manifest first: its state of each erasure wins
            if e.id_hash not in self.erasures:
                self.erasures[e.id_hash] = m.resolved(e)

    def release(self, m: Snapshot) -> None:
        """A version retention would keep but an erasure cuts off: what it references goes
        with the erasure (after the erasure grace, from the splice commit)."""
        self.check(m)
        self.released.update(references(m, self.memo))

    def window(
        self, behind: Iterable[Snapshot], cut: bool, cut_at: Callable[[Snapshot], bool]
    ) -> tuple[list[int], bool]:
        """Take the retained versions ``behind`` the head, newest first: past a cut, those
        that read through the lineage are kept mapped and the window ends at the first that
        cannot (released instead). The versions kept, and whether the window was cut."""
        assert self.history is not None
        kept: list[int] = []
        mapping = True  # versions before a cut are kept when they read through the lineage
        for got in behind:
            mapped = self.history.map(got, self.erasures.values()) if cut and mapping else None
            if cut and mapped is None:
                mapping = False
                self.release(got)
                continue
            if mapped is not None:
                self.history.mapped[got.version] = mapped
                self.release(got)
            self.take(mapped or got)
            kept.append(got.version)
            cut = cut or cut_at(got)
        return kept, cut


def mark(
    catalog: Catalog,
    retention: Retention,
    now: datetime,
    *,
    erasure_grace: timedelta | None = None,
    workers: int = 8,
) -> Marks:
    """Read the head (now), its landed successors and the retention window of its chain.

    With ``erasure_grace``, an erasure whose splice commit is older than it makes what it
    superseded go, whatever ``retention`` says: the retained versions before the splice
    commit are kept when they read through the lineage (:mod:`lethe.gc.history`, issue 39:
    ``mapped``, their roots as GC writes them anew) and the window is cut at the first one
    that cannot (it may still hold the erased rows). Objects only the cut-off versions (or
    the mapped versions' old roots) reference are ``released`` (they go with the erasure,
    after its grace)."""
    head, _ = catalog.read_head()
    top = catalog.read_manifest(head.version)
    w = _Walk(catalog, top.table_uuid)
    successors = _landed(catalog, head.version)
    for m in reversed(successors):
        w.take(m)
    w.take(top)
    # readers of every version use the newest lineage only (issue 39): older roots' go
    w.refs.update(m.manifest.lineage.path for m in (top, *successors) if m.manifest.lineage)
    cuts = _cuts(w.erasures.values(), head.version) if erasure_grace is not None else frozenset()

    def cut_at(m: Snapshot) -> bool:
        return m.version in cuts and is_old(
            m.created_at, now, erasure_grace or timedelta(0), s3_time=False
        )

    w.history = History(catalog, top)
    w.history.saw(top.version, w.refs)
    behind, cut = w.window(_window(catalog, top, retention, now, workers), cut_at(top), cut_at)
    kept = [top.version, *behind]
    # the Iceberg view keeps no snapshot of a mapped version (its manifests name the
    # replaced files and their statistics: docs/format.md §6b)
    w.refs |= _view_references(catalog, [v for v in kept if v not in w.history.mapped])
    return Marks(
        table_uuid=w.table_uuid,
        head_version=head.version,
        marked_through=successors[-1].version if successors else head.version,
        kept=tuple(kept),
        created_at=w.created,
        referenced=frozenset(w.refs),
        erasures=tuple(w.erasures.values()),
        gc_grace=timedelta(seconds=max(m.properties.gc_grace_seconds for m in (*successors, top))),
        released=frozenset(w.released - w.refs),
        cut_at=w.created[_cut_version(kept, cuts, w.created)] if cut else None,
        mapped=dict(w.history.mapped),
    )


def _landed(catalog: Catalog, version: int) -> list[Snapshot]:
    """The manifests that landed after ``version`` (their head update still pending), oldest
    first."""
    out: list[Snapshot] = []
    while True:
        try:
            out.append(catalog.read_manifest(version + 1 + len(out)))
        except errors.SnapshotNotFound:
            return out


def _cut_version(kept: list[int], cuts: frozenset[int], created: dict[int, datetime]) -> int:
    """The splice commit that cut the window: the oldest kept version that is one (what
    only the versions behind it referenced ages from it)."""
    return min((v for v in kept if v in cuts), default=kept[-1])


def _window(
    catalog: Catalog, top: Snapshot, retention: Retention, now: datetime, workers: int
) -> Iterator[Snapshot]:
    """The manifests behind ``top`` that ``retention`` keeps, newest first (read ahead in
    parallel)."""

    def fetch(version: int) -> Snapshot | None:
        try:
            return catalog.read_manifest(version)
        except errors.SnapshotNotFound:
            return None

    window = max(1, workers) * 2
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        pending: dict[int, Future[Snapshot | None]] = {}
        expected, index = top.previous, 0
        try:
            while expected is not None:
                index += 1
                if (
                    retention.max_age is None
                    and retention.versions is not None
                    and index >= retention.versions
                ):
                    break
                for ahead in range(expected, max(-1, expected - window), -1):
                    if ahead not in pending:
                        pending[ahead] = pool.submit(fetch, ahead)
                got = pending.pop(expected).result()
                if got is None or not retention.keeps(index, got.created_at, now):
                    break
                yield got
                expected = got.previous
        finally:
            for f in pending.values():
                f.cancel()


def newly_referenced(catalog: Catalog, table_uuid: str, since: int) -> frozenset[str]:
    """Paths referenced by manifests newer than ``since`` (commits that landed after a plan
    marked through ``since``). Raises GcConflict if the table was replaced meanwhile."""
    head, _ = catalog.read_head()
    if head.table_uuid != table_uuid:
        raise GcConflict(
            f"the table at {catalog.uri} was replaced after this GC run planned "
            f"(table uuid {head.table_uuid} != {table_uuid}); start a new run"
        )
    landed = _landed(catalog, since)
    for m in landed:
        if m.table_uuid != table_uuid:
            raise GcConflict(f"{catalog.uri}: manifest v{m.version} belongs to another table")
    if (v := since + 1 + len(landed)) <= head.version:
        raise GcConflict(
            f"{catalog.uri}: manifest v{v} (between the planned v{since} and the head "
            f"v{head.version}) is missing; start a new run"
        )
    return frozenset(r for m in landed for r in references(m))


def _view_references(catalog: Catalog, kept: Iterable[int]) -> set[str]:
    """The Iceberg view's objects the kept versions' snapshots need (none without a view)."""
    from lethe.iceberg.refs import references as view_references
    from lethe.storage.layout import METADATA_PREFIX

    listed = list(catalog.store.list(catalog.key(METADATA_PREFIX)))
    if not listed:
        return set()
    return set(view_references(catalog, set(kept), listed=listed).keep)
