"""The in-bucket catalog: head, manifests, and the compare-and-swap commit loop.

Commit protocol (DESIGN §2, with roll-forward):

1. read the head (and its ETag) and manifest N;
2. build manifest N+1 from N plus the change (a pure function: rebasing = calling it again);
3. PUT ``manifest/v(N+1).json`` with ``If-None-Match: *`` — this create-only PUT is the
   *commit point*: exactly one writer can create version N+1;
4. PUT the head with ``If-Match: <etag of N>`` to advance it.

A format-2 snapshot's new segments (:meth:`~lethe.catalog.snapshot.Snapshot.pending_segments`) are
PUT create-only just before step 3; a commit that provably did not land removes them.
Segments are immutable: :class:`~lethe.catalog.segments.Segments` reads and caches them.

A 412 on step 3 means someone else committed N+1: re-read, rebase, retry with jittered
exponential backoff. If a committer died between steps 3 and 4, the head lags behind the
newest manifest; the next committer (or :meth:`Catalog.roll_forward`) advances it, so a
crash never wedges the table and never loses a landed commit. A 409
(ConditionalRequestConflict) on either PUT is retried.

Every writer commits through the one loop here, :meth:`Catalog.commit_change`: a
:class:`Change` has an I/O step (``prepare``: locate rows, write a DV container) that runs
outside the CAS and yields a :class:`Prepared` value holding an update of
:mod:`lethe.catalog.changes` (its requirements on the base, and a pure ``apply``). A newer base is
tried with the same preparation first; an unmet requirement raises :class:`Rebase` when only
new I/O can fix it, and the loop prepares again. Objects a preparation wrote, and objects the
caller hands over (``Change.owned``), are removed exactly when the failure proves the commit
did not land (or the change turned out to be a no-op); never after an ambiguous manifest PUT.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeAlias, TypeVar

from lethe import errors
from lethe.catalog.changes import KINDS, Update
from lethe.catalog.grace import check_fresh
from lethe.catalog.manifest import (
    Head,
    Manifest,
    Segment,
    SupersededList,
    decode_head,
    decode_manifest,
    encode_head,
    encode_manifest,
    encode_segment,
    encode_superseded,
    manifest_key,
)
from lethe.catalog.requirements import unmet
from lethe.catalog.segments import GC_EXPIRY, Segments
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import externalize_superseded
from lethe.storage.layout import HEAD_KEY, MANIFEST_PREFIX, is_manifest_key, object_key
from lethe.storage.store import S3Store

log = logging.getLogger(__name__)

__all__ = [
    "AfterCommit",
    "Catalog",
    "Change",
    "CommitOutcome",
    "Direct",
    "Prepared",
    "Rebase",
    "RetryPolicy",
    "update_object",
    "with_attempts",
]


AfterCommit: TypeAlias = "Callable[[Catalog, Snapshot], None]"


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounded, jittered exponential backoff ("full jitter")."""

    max_attempts: int = 60
    base_delay: float = 0.02
    max_delay: float = 1.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.max_delay, self.base_delay * (2**attempt)))


class Rebase(Exception):
    """The base moved in a way only new I/O can absorb (an update's requirement is unmet: a
    DV it unioned with changed, a file it targets was replaced); the loop prepares again."""

    def __init__(self, base: Snapshot, why: str = "") -> None:
        super().__init__(f"rebase onto version {base.version}" + (f": {why}" if why else ""))
        self.base = base


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Prepared(Generic[T]):
    """One preparation of a change: the update to commit plus what preparing it wrote.

    ``update`` is one of :data:`lethe.catalog.changes.KINDS` (None: nothing to do). ``detail`` is
    what the caller reads from the preparation that landed (typed per change). ``written``
    are table-relative keys of objects this preparation wrote (removed when the commit
    provably did not land, or when the preparation is superseded). ``written_at`` is the
    writer's clock before the oldest upload the commit references (the GC grace rule,
    :mod:`lethe.catalog.grace`); when ``renewable``, a preparation past that rule is made anew
    instead of failing the commit.
    """

    update: Update | None
    detail: T
    written: tuple[str, ...] = ()
    written_at: float | None = None
    renewable: bool = False

    def apply(self, base: Snapshot) -> Snapshot | None:
        """The update on ``base`` (None: nothing to do); :class:`Rebase` when ``base``
        fails one of its requirements (checked here, the one place). Superseded paths the
        update added to erasure records go into new superseded lists (pending objects the
        loop writes with the segments, before the manifest), never into the root."""
        if self.update is None:
            return None
        why = unmet(base, self.update.requirements())
        if why is not None:
            raise Rebase(base, why)
        nxt = self.update.apply(base)
        return None if nxt is None else externalize_superseded(base, nxt)


class Change(Protocol[T]):
    """One commit's intent (see the module docstring)."""

    @property
    def what(self) -> str:
        """Names the change in messages ("delete", "compaction", ...)."""
        ...

    @property
    def owned(self) -> Sequence[str]:
        """Table-relative keys the caller wrote for this commit and hands to the loop:
        removed when the commit provably did not land or was a no-op."""
        ...

    def prepare(self, base: Snapshot) -> Prepared[T]:
        """The I/O step, outside the CAS, for ``base``."""
        ...


@dataclass(frozen=True, slots=True)
class Direct:
    """A change whose update needs no I/O (append of written files, index declarations,
    the format upgrade): every preparation is the update itself."""

    update: Update
    written_at: float | None = None
    owned: Sequence[str] = ()
    name: str = ""  # for messages (default: the update's kind)

    @property
    def what(self) -> str:
        return self.name or self.update.what

    def prepare(self, base: Snapshot) -> Prepared[None]:
        return Prepared(self.update, None, written_at=self.written_at)


@dataclass(frozen=True, slots=True)
class CommitOutcome(Generic[T]):
    """A commit that landed (``manifest``) or had nothing to do (``manifest is None``), with
    the preparation it committed (``detail``: what that preparation found)."""

    manifest: Snapshot | None
    base: Snapshot
    attempts: int
    seconds: float
    prepared: Prepared[T] = field(compare=False)

    @property
    def retries(self) -> int:
        return self.attempts - 1

    @property
    def detail(self) -> T:
        return self.prepared.detail


class Catalog:
    """Head and manifests of one table prefix in one bucket."""

    def __init__(self, store: S3Store, prefix: str, *, retry: RetryPolicy | None = None) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self.retry = retry or RetryPolicy()
        self._cache: OrderedDict[int, Snapshot] = OrderedDict()
        self._lock = threading.Lock()
        self._rng = random.Random()
        self.segments = Segments(store, self.prefix)
        #: called with every manifest this catalog commits, after the head moved (the
        #: Iceberg view publishes here); a hook's failure is logged, never the commit's
        self.after_commit: list[AfterCommit] = []

    def key(self, rel: str) -> str:
        """Absolute key of a table-relative path."""
        return object_key(self.prefix, rel)

    @property
    def uri(self) -> str:
        return f"s3://{self.store.bucket}/{self.prefix}"

    # --- reads --------------------------------------------------------------------------------
    def read_head(self) -> tuple[Head, str]:
        try:
            r = self.store.get(self.key(HEAD_KEY))
        except errors.NotFound as e:
            raise errors.TableNotFound(
                f"no Lethe table at {self.uri} (no {HEAD_KEY}); create it with Table.create",
                uri=self.uri,
            ) from e
        return decode_head(r.body, where=f"{self.uri}/{HEAD_KEY}"), r.etag

    def read_manifest(self, version: int, *, fresh: bool = False) -> Snapshot:
        """Version ``version`` (a snapshot reading its segments through :attr:`segments`);
        ``fresh``: read it again (GC may have written an old version anew, issue 39)."""
        with self._lock:
            m = None if fresh else self._cache.get(version)
            if m is not None:
                self._cache.move_to_end(version)
                return m
        key = manifest_key(version)
        try:
            raw = self.store.get(self.key(key)).body
        except errors.NotFound as e:
            raise errors.SnapshotNotFound(self._missing_message(version)) from e
        doc = decode_manifest(raw, where=f"{self.uri}/{key}")
        if doc.version != version:
            raise errors.CorruptManifest(f"{self.uri}/{key} claims version {doc.version}")
        self.segments.table_uuid = doc.table_uuid
        m = Snapshot(doc, self.segments)
        with self._lock:
            self._cache[version] = m
            while len(self._cache) > 64:
                self._cache.popitem(last=False)
        return m

    def rewrite_version(self, snap: Snapshot) -> None:
        """PUT ``snap``'s root over its version's (GC only: a version kept through a later
        erasure, its files mapped through the lineage, issue 39; never the head)."""
        head, _ = self.read_head()
        if snap.version >= head.version or snap.pending_segments():
            raise errors.InvalidRequest(f"version {snap.version} cannot be rewritten")
        self.store.put(self.key(manifest_key(snap.version)), encode_manifest(snap.manifest))
        with self._lock:
            self._cache[snap.version] = snap

    def _missing_message(self, version: int) -> str:
        oldest = self.oldest_version()
        if oldest is None:
            return f"version {version} of {self.uri} does not exist"
        if version < oldest:
            return (
                f"version {version} of {self.uri} has expired (garbage-collected: {GC_EXPIRY}); "
                f"the oldest available version is {oldest}"
            )
        return f"version {version} of {self.uri} does not exist (oldest available: {oldest})"

    def oldest_version(self) -> int | None:
        base = self.key(MANIFEST_PREFIX)
        versions = [
            int(o.key.rsplit("/v", 1)[1].split(".")[0])
            for o in self.store.list(base)
            if is_manifest_key(MANIFEST_PREFIX + o.key[len(base) :])
        ]
        return min(versions) if versions else None

    def snapshot_at(self, version: int | None) -> Snapshot:
        """The latest snapshot, or ``version`` (time travel).

        Raises:
            InvalidRequest: a negative version.
            SnapshotNotFound: ``version`` was never committed or has expired.
        """
        if version is None:
            return self.current()[0]
        if version < 0:
            raise errors.InvalidRequest("version must be >= 0")
        head, _ = self.read_head()
        if version > head.version:
            raise errors.SnapshotNotFound(
                f"version {version} of {self.uri} does not exist (latest is {head.version})"
            )
        return self.read_manifest(version)

    def current(self) -> tuple[Snapshot, str]:
        """The manifest the head names, and the head's ETag."""
        head, etag = self.read_head()
        return self.read_manifest(head.version), etag

    def roll_forward(self) -> Snapshot:
        """Advance a lagging head to the newest landed manifest (after a committer crashed
        between its manifest PUT and its head PUT). Returns the newest manifest."""
        m, etag = self.current()
        while True:
            try:
                nxt = self.read_manifest(m.version + 1)
            except errors.SnapshotNotFound:
                return m
            m, etag = self._advance(m, nxt, etag)

    def _advance(self, m: Snapshot, nxt: Snapshot, etag: str) -> tuple[Snapshot, str]:
        if nxt.previous != m.version or nxt.table_uuid != m.table_uuid:
            raise errors.CorruptManifest(
                f"{self.uri}/{manifest_key(nxt.version)} does not follow version {m.version}"
            )
        try:
            etag = self._put_head(nxt, etag)
            log.info("advanced head of %s to version %s", self.uri, nxt.version)
            return nxt, etag
        except (errors.PreconditionFailed, errors.CommitConflict):
            head, etag = self.read_head()
            return self.read_manifest(head.version), etag

    # --- writes -------------------------------------------------------------------------------
    def _put_head(self, m: Manifest | Snapshot, if_match: str | None) -> str:
        body = encode_head(
            Head(version=m.version, manifest=manifest_key(m.version), table_uuid=m.table_uuid)
        )
        for attempt in range(8):
            try:
                if if_match is None:
                    return self.store.put(self.key(HEAD_KEY), body, if_none_match=True)
                return self.store.put(self.key(HEAD_KEY), body, if_match=if_match)
            except errors.ConditionalRequestConflict:
                time.sleep(self.retry.delay(attempt, self._rng))
        raise errors.CommitConflict(f"head of {self.uri}: conditional PUT kept answering 409")

    def _help_forward(self, base: Snapshot) -> None:
        """After losing v(N+1): if the head still names N, the winner may have died before
        announcing; advance the head for it so the table never wedges."""
        head, etag = self.read_head()
        if head.version != base.version:
            return
        try:
            nxt = self.read_manifest(base.version + 1)
        except errors.SnapshotNotFound:
            return
        self._advance(base, nxt, etag)

    def create(self, m0: Manifest | Snapshot) -> Snapshot:
        """Create the table with version 0; returns it as a snapshot."""
        snap = m0 if isinstance(m0, Snapshot) else Snapshot(m0)
        try:
            self.write_segments(snap)
            body = encode_manifest(snap.manifest)
            self.store.put(self.key(manifest_key(0)), body, if_none_match=True)
            self._put_head(snap, None)
        except errors.PreconditionFailed as e:
            raise errors.TableExists(f"a table already exists at {self.uri}") from e
        return snap.stored(self.segments)

    def write_segments(self, m: Snapshot) -> list[str]:
        """PUT (create-only, in parallel) the segments and superseded lists ``m`` introduces;
        returns their keys. They stay cached: ``m.stored(catalog.segments)`` loads them from
        now on."""
        pending = m.pending_segments()
        lists = m.pending_lists()
        if not pending and not lists:
            return []

        def put(item: tuple[str, Segment | SupersededList]) -> str:
            path, obj = item
            body = encode_segment(obj) if isinstance(obj, Segment) else encode_superseded(obj)
            self.store.put(self.key(path), body, if_none_match=True)
            return path

        items: list[tuple[str, Segment | SupersededList]] = sorted(
            [*pending.items(), *lists.items()], key=lambda kv: kv[0]
        )
        written: list[str] = []
        try:
            with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
                for path in pool.map(put, items):
                    written.append(path)
        except BaseException:
            self._remove([p for p, _ in items], "of a failed segment write")
            raise
        for path, obj in items:
            if isinstance(obj, Segment):
                self.segments.remember(path, obj)
            else:
                self.segments.remember_superseded(path, obj)
        return written

    def commit_change(self, change: Change[T]) -> CommitOutcome[T]:
        """The commit loop (the only one): bounded attempts with jittered backoff; each reads
        the head, applies the current preparation to it (preparing anew on :class:`Rebase`,
        or on :class:`~lethe.errors.GraceExpired` when renewable), and PUTs manifest N+1
        create-only. Raises :class:`~lethe.errors.CommitConflict` when contention outlasts
        the bound, :class:`~lethe.errors.GraceExpired` when a preparation is too old."""
        t0 = time.perf_counter()
        last: Exception | None = None
        prepared: Prepared[T] | None = None
        ambiguous = False  # a manifest PUT whose outcome is unknown: remove nothing
        try:
            for attempt in range(1, self.retry.max_attempts + 1):
                base, etag = self.current()
                new, prepared = self._apply(change, prepared, base)
                if new is None:
                    self._remove((*prepared.written, *change.owned), "of a no-op commit")
                    return CommitOutcome(None, base, attempt, time.perf_counter() - t0, prepared)
                if new.version != base.version + 1 or new.previous != base.version:
                    raise errors.CommitConflict("internal: built manifest does not follow its base")
                if (expired := self._expired(change, prepared, new)) is not None:
                    prepared, last = None, expired
                    continue
                new = with_attempts(new, attempt)
                body = encode_manifest(new.manifest)
                segments = self.write_segments(new)
                new = new.stored(self.segments)
                try:
                    ambiguous = True
                    self.store.put(self.key(manifest_key(new.version)), body, if_none_match=True)
                except (errors.PreconditionFailed, errors.ConditionalRequestConflict) as e:
                    if not (isinstance(e, errors.PreconditionFailed) and self._ours(new, body)):
                        ambiguous = False  # a 412/409 proves the version is not ours
                        last = self._lost(change, attempt, base, segments, e)
                        continue
                self._announce(new, etag)
                return CommitOutcome(new, base, attempt, time.perf_counter() - t0, prepared)
            raise errors.CommitConflict(
                f"{change.what} on {self.uri} gave up after {self.retry.max_attempts} attempts "
                f"(too much contention); last error: {last}"
            )
        except BaseException:
            if not ambiguous:
                written = prepared.written if prepared is not None else ()
                self._remove((*written, *change.owned), "of a commit that did not land")
            raise

    def _expired(self, change: Change[T], prepared: Prepared[T], new: Snapshot) -> Exception | None:
        """The :class:`~lethe.errors.GraceExpired` of a renewable preparation past the GC
        grace (its objects removed: the loop prepares anew); raised when not renewable."""
        try:
            check_fresh(prepared.written_at, new.properties.gc_grace_seconds)
        except errors.GraceExpired as e:
            if not prepared.renewable:
                raise
            log.info("%s on %s prepares anew: %s", change.what, self.uri, e)
            self._remove(prepared.written, "past the GC grace")
            return e
        return None

    def _lost(
        self, change: Change[T], attempt: int, base: Snapshot, segments: list[str], e: Exception
    ) -> Exception:
        """After a manifest PUT that lost the race: remove its segments, back off, and help
        a winner that died before moving the head (a 412); returns ``e``."""
        self._remove(segments, "of a commit that lost the race")
        log.debug(
            "%s attempt %s on %s lost the race for v%s",
            change.what,
            attempt,
            self.uri,
            base.version + 1,
        )
        time.sleep(self.retry.delay(attempt, self._rng))
        if isinstance(e, errors.PreconditionFailed):
            self._help_forward(base)
        return e

    def _announce(self, new: Snapshot, etag: str) -> None:
        """A landed commit: move the head (if someone rolled it past us already, that is
        fine) and run the hooks."""
        with self._lock:
            self._cache[new.version] = new
        try:
            self._put_head(new, etag)
        except (errors.PreconditionFailed, errors.CommitConflict):
            log.debug("head of %s was advanced by another writer", self.uri)
        self._after_commit(new)

    def _after_commit(self, m: Snapshot) -> None:
        for hook in list(self.after_commit):
            try:
                hook(self, m)
            except Exception as e:  # the commit landed: nothing after it may fail it
                log.warning(
                    "after committing version %s of %s: %s failed (%s: %s); the next one catches up",
                    m.version,
                    self.uri,
                    getattr(hook, "__name__", "a hook"),
                    type(e).__name__,
                    e,
                )

    def _apply(
        self, change: Change[T], prepared: Prepared[T] | None, base: Snapshot
    ) -> tuple[Snapshot | None, Prepared[T]]:
        """Apply the current preparation to ``base``, preparing anew when it asks to."""
        if prepared is not None:
            try:
                return prepared.apply(base), prepared
            except Rebase as r:
                log.debug("%s on %s: %s", change.what, self.uri, r)
                # every manifest PUT with it was answered 412/409: nothing references it
                self._remove(prepared.written, "of a superseded preparation")
        prepared = change.prepare(base)
        if prepared.update is not None and not isinstance(prepared.update, KINDS):
            raise TypeError(
                f"{change.what}: {type(prepared.update).__name__} is not a change kind of "
                "lethe.catalog.changes (KINDS); every commit is one"
            )
        try:
            return prepared.apply(base), prepared
        except Rebase as r:
            raise errors.CommitConflict(
                f"internal: {change.what} does not apply to the base it was prepared on ({r})"
            ) from r

    def _ours(self, new: Snapshot, body: bytes) -> bool:
        """After a 412 on our manifest PUT: whether the version that exists is ours (an SDK
        retry of a PUT whose first response was lost lands, then answers 412)."""
        try:  # cached: the next attempt builds on it when it is not ours
            landed = self.read_manifest(new.version)
        except errors.SnapshotNotFound:
            return False
        return encode_manifest(landed.manifest) == body

    def _remove(self, keys: Sequence[str], why: str) -> None:
        """Delete objects nothing references (best effort: GC sweeps what is left)."""
        if not keys:
            return
        try:
            self.store.delete_many(sorted({self.key(k) for k in keys}))
        except errors.LetheError as e:
            log.warning("could not remove %d objects %s (%s); GC will", len(keys), why, e)


def with_attempts(m: Snapshot, attempt: int) -> Snapshot:
    """``m`` with the commit attempt that PUTs it in its operation's params (``attempts``:
    1 when the first attempt lands; the table report charts them)."""
    op = m.operation.model_copy(update={"params": {**m.operation.params, "attempts": attempt}})
    return m.evolve(operation=op)


def update_object(
    store: S3Store,
    key: str,
    apply: Callable[[bytes | None], bytes | None],
    *,
    retry: RetryPolicy | None = None,
) -> tuple[bytes | None, str | None]:
    """Compare-and-swap one small object (a registry such as the lake's ``lake.json``).

    Reads ``key`` (None: absent), applies ``apply`` (a pure function of the current body;
    None: nothing to write) and PUTs the result with ``If-Match`` (``If-None-Match: *`` when
    absent). A lost race (412/409) re-reads and applies again on the new state, with the
    policy's jittered backoff; ``apply`` must be idempotent, since a PUT whose response was
    lost may have landed. Returns the body now stored and its ETag.
    """
    policy = retry or RetryPolicy()
    rng = random.Random()
    last: Exception | None = None
    for attempt in range(1, policy.max_attempts + 1):
        try:
            got = store.get(key)
            body, etag = got.body, got.etag
        except errors.NotFound:
            body, etag = None, None
        new = apply(body)
        if new is None:
            return body, etag
        try:
            if etag is None:
                return new, store.put(key, new, if_none_match=True)
            return new, store.put(key, new, if_match=etag)
        except (errors.PreconditionFailed, errors.ConditionalRequestConflict) as e:
            last = e
            log.debug("update of s3://%s/%s lost race %s", store.bucket, key, attempt)
            time.sleep(policy.delay(attempt, rng))
    raise errors.CommitConflict(
        f"update of s3://{store.bucket}/{key} gave up after {policy.max_attempts} attempts "
        f"(too much contention); last error: {last}"
    )
