"""The one change vocabulary: every commit is one of these values.

A commit has two halves (PyIceberg's ``TableUpdate`` / ``TableRequirement`` is the model):

* an **update** (this module): a frozen value naming what it needs of the base
  (:meth:`requirements`: typed values of :mod:`lethe.catalog.requirements`) and a pure
  ``apply(base) -> Snapshot | None`` (None: nothing to do on that base). The catalog's loop
  (:meth:`lethe.catalog.commit.Catalog.commit_change`) checks the requirements in one place
  (:func:`~lethe.catalog.requirements.unmet`) and applies the update to each newer base; an unmet requirement means only
  new I/O can fix the commit, and the loop prepares again.
* a **preparation** (the change's ``prepare``, in the module that owns the operation: deletes,
  erase, compaction, the table): the I/O an update needs (locating rows, writing a unioned
  DV container or index pieces) run outside the CAS, returning a typed
  :class:`lethe.catalog.commit.Prepared` with the update.

:data:`KINDS` lists the update kinds; the catalog commits nothing else.

>>> import pyarrow as pa
>>> from lethe.catalog.manifest import TableProperties, initial_manifest
>>> from lethe.catalog.snapshot import Snapshot
>>> base = Snapshot(initial_manifest(table_uuid="t", schema=pa.schema([("id", pa.int64())]),
...                                  properties=TableProperties(key="id")))
>>> AddFiles(files=(), operation=Operation(kind="append")).apply(base).version
1
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import ValidationError

from lethe import errors
from lethe.catalog.evolution import describe_changes, plan_merge
from lethe.catalog.manifest import (
    DataFile,
    DVRef,
    ErasureRecord,
    ErasureTarget,
    IndexPiece,
    IndexRun,
    LedgerRef,
    LineageRef,
    Operation,
    RequestRecord,
    TableProperties,
)
from lethe.catalog.requirements import (
    FileHasDV,
    FileLive,
    LineageIs,
    PiecesPresent,
    RequestAbsent,
    Requirement,
    SchemaIs,
    unmet,
)
from lethe.catalog.schemas import Evolution
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import (
    Merge,
    apply_append,
    apply_dv_updates,
    apply_properties,
    apply_replace,
    archive_erasures,
    dead_run_pieces,
    declare,
    replace_pieces,
    spliced_erasures,
    superseding,
    undeclare,
    update_erasures,
    upgrade,
    with_merges,
    with_new_runs,
    with_runs,
    without_dead_runs,
)
from lethe.catalog.transforms.schema import (
    apply_schema,
    check_view_promotions,
    record_schema,
)
from lethe.parquet.splice import GroupFate

__all__ = [
    "KINDS",
    "AddFiles",
    "AdoptFiles",
    "ArchiveErasures",
    "Compose",
    "DeclareIndex",
    "DropIndex",
    "ExpireRows",
    "MergeSchema",
    "RecordSchema",
    "ReplaceFiles",
    "SetDVs",
    "SetProperties",
    "SpliceFiles",
    "SplicedFile",
    "Update",
    "UpdateSchema",
    "UpgradeFormat",
    "as_base",
]


# --- updates ---------------------------------------------------------------------------------
class Update(Protocol):
    """What every update kind offers the loop."""

    what: ClassVar[str]

    def requirements(self) -> tuple[Requirement, ...]: ...

    def apply(self, base: Snapshot) -> Snapshot | None: ...


class _Unconditional:
    """An update that applies to any base (it needs nothing of it)."""

    __slots__ = ()

    def requirements(self) -> tuple[Requirement, ...]:
        return ()


def _present(pieces: Mapping[str, tuple[IndexPiece, ...]]) -> tuple[Requirement, ...]:
    return (PiecesPresent(tuple(pieces)),) if pieces else ()


def _extends(lineage: LineageRef | None, base: LineageRef | None) -> tuple[Requirement, ...]:
    return (LineageIs(base),) if lineage is not None else ()


@dataclass(frozen=True, slots=True)
class AddFiles(_Unconditional):
    """Files appended (append, ingest, registration), with their index runs and the index
    merges they were due for. With ``request_hash``, a base that already logged the request
    makes this a no-op (a redelivered twin committed first)."""

    what: ClassVar[str] = "append"
    files: tuple[DataFile, ...]
    operation: Operation
    runs: Mapping[str, IndexRun] = field(default_factory=dict)
    merges: tuple[Merge, ...] = ()

    def apply(self, base: Snapshot) -> Snapshot | None:
        rid = self.operation.request_id_hash
        if rid is not None and base.find_request(rid) is not None:
            return None
        nxt = apply_append(base, self.files, self.operation)
        return with_merges(with_new_runs(nxt, self.runs), self.merges)


@dataclass(frozen=True, slots=True)
class AdoptFiles(_Unconditional):
    """Existing files adopted in place (:mod:`lethe.adopt`), with the DVs of the rows their
    source had deleted. A file already live under the same path and ETag is skipped (a
    re-run or a resumed adoption); under another ETag it is refused (the object changed)."""

    what: ClassVar[str] = "adopt"
    files: tuple[DataFile, ...]
    operation: Operation
    runs: Mapping[str, IndexRun] = field(default_factory=dict)
    merges: tuple[Merge, ...] = ()
    #: the ledger object of everything this commit takes (lethe.erasure.ownership)
    ledger: LedgerRef | None = None
    #: the ledger takes a source's history too: commit it even when no file is new
    history: int = 0
    #: ledgers merged into ``ledger`` (lethe.erasure.ownership.ledger_for_commit): dropped from the root
    merged: tuple[LedgerRef, ...] = ()

    def apply(self, base: Snapshot) -> Snapshot | None:
        live = base.files_at([f.path for f in self.files])
        changed = sorted(p for p, g in live.items() if g.etag != _etag_of(self.files, p))
        if changed:
            raise errors.InvalidRequest(
                f"{len(changed)} file(s) were adopted before under another ETag (the object "
                f"changed since): {', '.join(changed[:5])}"
            )
        new = tuple(f for f in self.files if f.path not in live)
        if not new and not (self.history and self.ledger is not None):
            return None
        op = self.operation.model_copy(
            update={"files_added": len(new), "rows_added": sum(f.rows for f in new)}
        )
        nxt = with_merges(with_new_runs(apply_append(base, new, op), self.runs), self.merges)
        if self.ledger is None:
            return nxt
        kept = tuple(r for r in base.manifest.adopted if r not in self.merged)
        return nxt.evolve(adopted=(*kept, self.ledger))


def _etag_of(files: Sequence[DataFile], path: str) -> str:
    return next(f.etag for f in files if f.path == path)


@dataclass(frozen=True, slots=True)
class UpgradeFormat(_Unconditional):
    """A format-1 base rewritten in format 2 (a no-op on a segmented base)."""

    what: ClassVar[str] = "upgrade"

    def apply(self, base: Snapshot) -> Snapshot | None:
        return None if base.segmented else upgrade(base)


@dataclass(frozen=True, slots=True)
class DeclareIndex(_Unconditional):
    """An index declared on ``column`` with its backfill ``runs``, which cover the files
    added up to version ``through``."""

    what: ClassVar[str] = "create index"
    column: str
    runs: tuple[IndexRun, ...]
    through: int

    def apply(self, base: Snapshot) -> Snapshot | None:
        return declare(base, self.column, self.runs, self.through)


@dataclass(frozen=True, slots=True)
class DropIndex(_Unconditional):
    """The index on ``column`` dropped (GC removes its pieces)."""

    what: ClassVar[str] = "drop index"
    column: str

    def apply(self, base: Snapshot) -> Snapshot | None:
        return undeclare(base, self.column)


@dataclass(frozen=True, slots=True)
class SetDVs:
    """New DVs (each already the union with ``unioned_with[path]``), the requests they
    answer, the erasure records they open and the index pieces they scrubbed: a delete
    batch, or a purge's record (no DVs). Requires every unioned DV unchanged, no twin of a
    request logged, every erasure target live, and the scrubbed pieces still referenced."""

    what: ClassVar[str] = "delete"
    refs: Mapping[str, DVRef]
    unioned_with: Mapping[str, DVRef | None]
    operation: Operation
    requests: tuple[RequestRecord, ...] = ()
    erasures: tuple[ErasureRecord, ...] = ()
    pieces: Mapping[str, tuple[IndexPiece, ...]] = field(default_factory=dict)

    def requirements(self) -> tuple[Requirement, ...]:
        return (
            *(RequestAbsent(r.id_hash) for r in self.requests),
            *(FileHasDV(p, dv) for p, dv in self.unioned_with.items()),
            *(FileLive(t.path) for e in self.erasures for t in e.targets),
            *_present(self.pieces),
        )

    def apply(self, base: Snapshot) -> Snapshot | None:
        nxt = apply_dv_updates(
            base, self.refs, self.operation, requests=self.requests, erasures=self.erasures
        )
        return _with_pieces(nxt, self.pieces)


@dataclass(frozen=True, slots=True)
class SplicedFile:
    """One spliced file replacing its source ``old`` (``new`` None: every row went), with
    the DV ``new.dv`` mapped from the source's DV ``expected``; ``fates`` and ``spliced``
    (the row groups rewritten) say where the source's pending erasure targets went."""

    old: str
    expected: DVRef | None
    new: DataFile | None
    fates: tuple[GroupFate, ...]
    spliced: frozenset[int]


@dataclass(frozen=True, slots=True)
class SpliceFiles:
    """Spliced files replacing their sources, in one commit: each source must still be live
    with the DV its new DV was mapped from; pending erasures of the sources move to the new
    files or are met; each new file takes its source's place (its segment). ``pieces``: the
    index pieces scrubbed of the removed rows (all must still be referenced; the old ones
    join the superseded lists of the erasures served)."""

    what: ClassVar[str] = "splice"
    files: tuple[SplicedFile, ...]
    operation: Operation
    # the lineage extended with these splices (issue 39), and the base's it extends
    lineage: LineageRef | None = None
    lineage_base: LineageRef | None = None
    pieces: Mapping[str, tuple[IndexPiece, ...]] = field(default_factory=dict)

    def requirements(self) -> tuple[Requirement, ...]:
        files = tuple(FileHasDV(f.old, f.expected) for f in self.files)
        return (*files, *_extends(self.lineage, self.lineage_base), *_present(self.pieces))

    def apply(self, base: Snapshot) -> Snapshot | None:
        olds = [f.old for f in self.files]
        held = base.locate(olds)
        erasures = base.erasures
        for f in self.files:
            seg = held.get(f.old)
            erasures = spliced_erasures(
                erasures,
                f.old,
                f.new.path if f.new else None,
                f.fates,
                set(f.spliced),
                base.version + 1,
                seg.path if seg is not None else None,
                tuple(self.pieces),
            )
        sources = base.files_at(olds)
        added = [_same_schema(f.new, sources.get(f.old)) for f in self.files if f.new is not None]
        places = {f.new.path: f.old for f in self.files if f.new is not None}
        if self.lineage is not None and self.lineage_base is not None:
            # the replaced lineage object holds the statistics of the files spliced now
            erasures = superseding(base.erasures, erasures, self.lineage_base.path)
        nxt = apply_replace(base, olds, added, self.operation, erasures=erasures, places=places)
        nxt = nxt.evolve(lineage=self.lineage) if self.lineage is not None else nxt
        return _with_pieces(nxt, self.pieces) if self.pieces else nxt


@dataclass(frozen=True, slots=True)
class ReplaceFiles:
    """Files rewritten as others (compaction): sources ``removed`` (each live with the DV
    the rewrite mapped, ``dv_seen``), outputs ``added`` with their DVs; ``coalesced`` DVs
    of other files move into one container where their DV did not change meanwhile
    (``coalesced_from``); pending erasures on the sources are met or ``moved``; index
    ``runs`` of the outputs and ``caught_up`` runs of files no index covered are added;
    ``pieces``: index pieces scrubbed of the entries naming the sources (all must still be
    referenced)."""

    what: ClassVar[str] = "compaction"
    removed: tuple[str, ...]
    dv_seen: Mapping[str, DVRef | None]
    added: tuple[DataFile, ...]
    operation: Operation
    plan_version: int
    coalesced: Mapping[str, DVRef] = field(default_factory=dict)
    coalesced_from: Mapping[str, DVRef] = field(default_factory=dict)
    moved: Mapping[str, Sequence[ErasureTarget]] = field(default_factory=dict)
    runs: Mapping[str, IndexRun] = field(default_factory=dict)
    caught_up: Mapping[str, IndexRun] = field(default_factory=dict)
    pieces: Mapping[str, tuple[IndexPiece, ...]] = field(default_factory=dict)

    def requirements(self) -> tuple[Requirement, ...]:
        return (
            *(FileHasDV(p, self.dv_seen[p]) for p in self.removed),
            *_present(self.pieces),
        )

    def apply(self, base: Snapshot) -> Snapshot | None:
        gone = set(self.removed)
        still = {  # coalesced DVs of files whose DV did not change meanwhile
            p: ref
            for p, ref in self.coalesced.items()
            if p not in gone and (f := base.file(p)) is not None and f.dv == self.coalesced_from[p]
        }
        held = {p: s.path for p, s in base.locate(list(self.removed)).items()}
        erasures = update_erasures(
            base.erasures, gone, self.plan_version, self.moved, base.version + 1, segments=held
        )
        nxt = apply_replace(
            base, self.removed, self.added, self.operation, dv_updates=still, erasures=erasures
        )
        nxt = with_runs(with_new_runs(nxt, self.runs), self.caught_up)
        return without_dead_runs(_with_pieces(nxt, self.pieces) if self.pieces else nxt)


def _same_schema(new: DataFile, old: DataFile | None) -> DataFile:
    """A spliced file keeps the schema id of its source (its columns are the source's)."""
    if old is None or old.schema_id == new.schema_id:
        return new
    return new.model_copy(update={"schema_id": old.schema_id})


#: table properties no :class:`SetProperties` may change (the key names the table's rows;
#: writers rely on the GC grace for the life of the table, docs/format.md §9)
FIXED_PROPERTIES: frozenset[str] = frozenset({"key", "gc_grace_seconds"})


@dataclass(frozen=True, slots=True)
class SetProperties(_Unconditional):
    """Table properties changed (``changes``: field -> new value, applied over the base's
    properties, so a concurrent change of other fields is kept). A change that leaves the
    properties as they are is a no-op. :data:`FIXED_PROPERTIES` are refused."""

    what: ClassVar[str] = "set properties"
    changes: Mapping[str, Any]
    operation: Operation

    def properties(self, current: TableProperties) -> TableProperties:
        """``current`` with the changes (InvalidRequest: a fixed or unknown field, a bad
        value)."""
        fixed = sorted(set(self.changes) & FIXED_PROPERTIES)
        unknown = sorted(set(self.changes) - set(TableProperties.model_fields))
        if fixed or unknown:
            what = f"fixed for the life of the table: {fixed}" if fixed else f"unknown: {unknown}"
            raise errors.InvalidRequest(f"table properties {what}")
        try:
            return TableProperties.model_validate({**dict(current), **self.changes})
        except ValidationError as e:
            raise errors.InvalidRequest(f"bad table properties: {e.errors()[:3]}") from e

    def apply(self, base: Snapshot) -> Snapshot | None:
        props = self.properties(base.properties)
        if props == base.properties:
            return None
        history = [s for _, s in base.schema_history()]
        current = base.arrow_schema()
        check_view_promotions(base, props, history, current, errors.IcebergUnsupported)
        return apply_properties(base, props, self.operation)


@dataclass(frozen=True, slots=True)
class ExpireRows:
    """A retention sweep's logical half (:mod:`lethe.erasure.retention`), in one commit: files whose
    every row expired are ``dropped`` (metadata only: their pending erasures are met), the
    expired rows of other files are hidden by new DVs (``refs``, each the union with
    ``unioned_with[path]``), and the sweep's ``request`` and ``erasure`` records are opened
    (the erasure's targets are the row groups to splice; with none it is born spliced, its
    ``superseded`` naming the dropped files and the segments that described them).
    ``pieces``: index pieces scrubbed of the expired rows."""

    what: ClassVar[str] = "retention"
    dropped: tuple[str, ...]
    refs: Mapping[str, DVRef]
    unioned_with: Mapping[str, DVRef | None]
    operation: Operation
    request: RequestRecord
    erasure: ErasureRecord
    pieces: Mapping[str, tuple[IndexPiece, ...]] = field(default_factory=dict)
    # the lineage extended with the dropped files (issue 39), and the base's it extends
    lineage: LineageRef | None = None
    lineage_base: LineageRef | None = None

    def requirements(self) -> tuple[Requirement, ...]:
        return (
            RequestAbsent(self.request.id_hash),
            *(FileLive(p) for p in self.dropped),
            *(FileHasDV(p, dv) for p, dv in self.unioned_with.items()),
            *(FileLive(t.path) for t in self.erasure.targets),
            *_present(self.pieces),
            *_extends(self.lineage, self.lineage_base),
        )

    def apply(self, base: Snapshot) -> Snapshot | None:
        v = base.version + 1
        held = {p: s.path for p, s in base.locate(list(self.dropped)).items()}
        erasures = update_erasures(
            base.erasures, set(self.dropped), base.version, {}, v, segments=held
        )
        gone = [*self.erasure.superseded]
        for p in self.dropped:
            gone.extend(x for x in (p, held.get(p)) if x is not None and x not in gone)
        # the runs that covered only dropped files leave with them: their pieces held the
        # dropped rows' values, so the erasure is complete only once they are gone too
        gone.extend(x for x in dead_run_pieces(base, self.dropped) if x not in gone)
        if self.lineage is not None and self.lineage_base is not None:
            gone.append(self.lineage_base.path)  # it describes files dropped now
        upd: dict[str, Any] = {"deleted_version": v, "superseded": tuple(gone)}
        if not self.erasure.targets:
            upd |= {"state": "spliced", "spliced_version": v}
        mine = self.erasure.model_copy(update=upd)
        nxt = apply_replace(
            base,
            self.dropped,
            (),
            self.operation,
            requests=(self.request,),
            dv_updates=self.refs,
            erasures=(*erasures, mine),
        )
        out = without_dead_runs(_with_pieces(nxt, self.pieces))
        return out.evolve(lineage=self.lineage) if self.lineage is not None else out


@dataclass(frozen=True, slots=True)
class ArchiveErasures(_Unconditional):
    """Completed erasures leave the root: the spliced records named by ``id_hashes`` (GC
    found each complete and wrote its marker, which keeps the record for receipts) are
    dropped; their superseded lists go with the manifests that still name them. A no-op
    when none is left in the base."""

    what: ClassVar[str] = "archive erasures"
    id_hashes: frozenset[str]

    def apply(self, base: Snapshot) -> Snapshot | None:
        kept = archive_erasures(base, self.id_hashes)
        gone = len(base.erasures) - len(kept)
        if not gone:
            return None
        op = Operation(kind="gc", params={"erasures_archived": gone})
        return apply_dv_updates(base, {}, op, erasures=()).evolve(erasures=kept)


@dataclass(frozen=True, slots=True)
class UpdateSchema(_Unconditional):
    """The current schema evolved by ``changes`` (:mod:`lethe.catalog.schemas`), in one commit: a
    new schema id, indexes following renamed columns. Replayed on a newer base (files
    appended meanwhile keep the schema id they were written under); a change that breaks a
    rule on that base raises :class:`~lethe.errors.SchemaEvolutionError`."""

    what: ClassVar[str] = "update schema"
    changes: tuple[Evolution, ...]
    operation: Operation

    def apply(self, base: Snapshot) -> Snapshot | None:
        return apply_schema(base, self.changes, self.operation)


@dataclass(frozen=True, slots=True)
class MergeSchema(_Unconditional):
    """The current schema evolved to take data of shape ``shape`` (a merge append), the
    plan made against each base the loop applies it to: a column under an earlier name of a
    table column is that column (the name mapping's alias, so a rename that landed after
    the writer opened its handle is followed), new columns are added and narrower table
    types widened (:func:`lethe.catalog.evolution.plan_merge`). A no-op when the base takes the
    shape as it is; :class:`~lethe.errors.SchemaMismatch` when it cannot."""

    what: ClassVar[str] = "update schema"
    shape: Any  # pa.Schema of the data to append

    def apply(self, base: Snapshot) -> Snapshot | None:
        changes = plan_merge(self.shape, base).changes
        if not changes:
            return None
        op = Operation(kind="schema", params=describe_changes(changes))
        return apply_schema(base, changes, op)


@dataclass(frozen=True, slots=True)
class RecordSchema(_Unconditional):
    """A schema recorded in the history without becoming current: the shape of a file
    registered as it is (``register_parquet(schema_mode="merge")``), so that it reads by
    its own names and types; a no-op when the history holds it already."""

    what: ClassVar[str] = "record schema"
    shape: Any  # pa.Schema with the current schema's field ids
    operation: Operation

    def apply(self, base: Snapshot) -> Snapshot | None:
        return record_schema(base, self.shape, self.operation)


def _with_pieces(
    m: Snapshot, pieces: Mapping[str, tuple[IndexPiece, ...]]
) -> Snapshot:  # PiecesPresent was checked: replace_pieces finds them all
    nxt = replace_pieces(m, pieces)
    if nxt is None:  # pragma: no cover - guarded by the requirement
        raise AssertionError("scrubbed index pieces vanished after their requirement held")
    return nxt


@dataclass(frozen=True, slots=True)
class Compose:
    """Updates of the other kinds made one commit (a transaction, PyIceberg's model): each
    applies to what the ones before it made, and the result is one new version whose
    operation is the last step's, with the counts of every step and the others' params
    (``<kind>_<param>``). ``pin``: the schema the steps were prepared on (files written under
    a schema an earlier step makes). Each step's requirements hold on the base (and on what
    the steps before it made: else :class:`~lethe.errors.CommitConflict`)."""

    what: ClassVar[str] = "transaction"
    steps: tuple[Update, ...]
    pin: SchemaIs | None = None

    def requirements(self) -> tuple[Requirement, ...]:
        own = (self.pin,) if self.pin is not None else ()
        return (*own, *(r for s in self.steps for r in s.requirements()))

    def apply(self, base: Snapshot) -> Snapshot | None:
        cur: Snapshot | None = None
        ops: list[Operation] = []
        for step in self.steps:
            if not isinstance(step, KINDS) or isinstance(step, Compose):
                raise TypeError(f"{type(step).__name__} is not a change kind a Compose takes")
            at = base if cur is None else as_base(cur, base)
            if cur is not None and (why := unmet(at, step.requirements())) is not None:
                raise errors.CommitConflict(f"a transaction's {step.what} conflicts: {why}")
            nxt = step.apply(at)
            if nxt is not None:
                cur = nxt
                ops.append(nxt.operation)
        if cur is None or len(ops) == 1:
            return cur
        return cur.evolve(operation=_combined(ops))


def as_base(nxt: Snapshot, base: Snapshot) -> Snapshot:
    """``nxt`` (version N+1 over ``base``) as a base for the next step of one commit: the
    next step makes version N+1 again, holding both."""
    return nxt.evolve(version=base.version, previous=base.previous)


def _combined(ops: Sequence[Operation]) -> Operation:
    last = ops[-1]
    params: dict[str, Any] = {"steps": len(ops)}
    for op in ops[:-1]:
        params.update({f"{op.kind}_{k}": v for k, v in op.params.items()})
    params.update(last.params)
    counts = ("rows_added", "rows_deleted", "rows_erased", "files_added", "files_removed")
    return last.model_copy(
        update={"params": params, **{c: sum(getattr(o, c) for o in ops) for c in counts}}
    )


#: Every update kind; :meth:`lethe.catalog.commit.Catalog.commit_change` commits no other.
KINDS: tuple[type, ...] = (
    AddFiles,
    AdoptFiles,
    UpgradeFormat,
    DeclareIndex,
    DropIndex,
    SetDVs,
    SpliceFiles,
    ReplaceFiles,
    SetProperties,
    ExpireRows,
    ArchiveErasures,
    UpdateSchema,
    MergeSchema,
    RecordSchema,
    Compose,
)
