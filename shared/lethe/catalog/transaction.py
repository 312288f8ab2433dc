"""Several changes in one commit: ``with t.transaction() as tx:`` (PyIceberg's ``Transaction``
is the model).

A transaction gathers steps and commits them once, through the one commit loop
(:meth:`lethe.catalog.commit.Catalog.commit_change`), as one
:class:`~lethe.catalog.changes.Compose` update: one new version, or none. Leaving the ``with``
block with an error commits nothing, and nothing was written: the steps run when the
transaction commits, each on what the steps before it made of the snapshot the commit lands
on (the loop's base, never a stale handle's). A merge append plans its schema changes there
(:func:`lethe.catalog.evolution.plan_merge`) and writes its files under the schema they make;
when another commit changes the schema first, the loop prepares the transaction again (an
in-memory table is written anew; a stream, which cannot be read twice, fails with
:class:`~lethe.errors.CommitConflict` and nothing committed).

>>> with t.transaction() as tx:                                 # doctest: +SKIP
...     tx.update_schema().add_column("country", pa.string())
...     tx.append(rows_with_country)
...     tx.set_properties(uploads_evolve=True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lethe import errors
from lethe.catalog.changes import (
    AddFiles,
    AdoptFiles,
    Compose,
    MergeSchema,
    RecordSchema,
    SetProperties,
    Update,
    UpdateSchema,
    as_base,
)
from lethe.catalog.commit import Prepared
from lethe.catalog.evolution import OneCommit, SchemaMode, SchemaUpdate, describe_changes
from lethe.catalog.manifest import DataFile, IndexRun, Operation
from lethe.catalog.requirements import SchemaIs
from lethe.catalog.snapshot import Snapshot
from lethe.catalog.transforms import Merge

__all__ = ["FileMaker", "Indexer", "Staged", "Step", "Totals", "Transaction", "TransactionChange"]

_SCHEMA_KINDS = (UpdateSchema, MergeSchema, RecordSchema)
_FILE_KINDS = (AddFiles, AdoptFiles)


@dataclass(frozen=True, slots=True)
class Staged:
    """What one step makes on the snapshot it is given: its update (None: nothing), the
    objects it wrote (removed when the commit does not land), the writer's clock before the
    first of them (the GC grace rule), and whether it can be made again (a stream cannot)."""

    update: Update | None
    written: tuple[str, ...] = ()
    written_at: float | None = None
    renewable: bool = True
    rows: int = 0
    files: int = 0


#: One step of a transaction: (the snapshot the steps before it made, whether one of them
#: changed the schema) -> what it stages there.
Step = Callable[[Snapshot, bool], Staged]
#: Files (made on the given snapshot) and the operation that adds them; None: nothing.
FileMaker = Callable[[Snapshot], "tuple[Sequence[DataFile], Operation] | None"]
#: The index upkeep of files added to a snapshot: runs per index, merges due, keys written.
Indexer = Callable[
    [Snapshot, Sequence[DataFile]], "tuple[Mapping[str, IndexRun], Sequence[Merge], Sequence[str]]"
]


@dataclass(frozen=True, slots=True)
class Totals:
    """What a transaction's preparation staged (the commit's result reads it)."""

    rows: int = 0
    files: int = 0


@dataclass(frozen=True, slots=True)
class TransactionChange:
    """The steps as one :class:`~lethe.catalog.commit.Change`: prepared on the loop's base,
    each step on what the previous made; the files of a step that follows a schema change of
    the same transaction pin the base's schema (:class:`~lethe.catalog.requirements.SchemaIs`)."""

    steps: tuple[Step, ...]
    #: removes objects a preparation wrote before one of its steps failed (the loop never
    #: saw them); table-relative keys
    discard: Callable[[Sequence[str]], None] = lambda keys: None
    written_at: float | None = None
    owned: Sequence[str] = ()
    name: str = "transaction"

    @property
    def what(self) -> str:
        return self.name

    def prepare(self, base: Snapshot) -> Prepared[Totals]:
        updates: list[Update] = []
        written: list[str] = []
        stamps: list[float] = [self.written_at] if self.written_at is not None else []
        renewable, rows, files, pin = True, 0, 0, None
        mid, evolved = base, False
        try:
            for step in self.steps:
                st = step(mid, evolved)
                written.extend(st.written)
                stamps.extend([st.written_at] if st.written_at is not None else [])
                renewable = renewable and st.renewable
                nxt = st.update.apply(mid) if st.update is not None else None
                if st.update is None or nxt is None:
                    continue
                if evolved and isinstance(st.update, _FILE_KINDS):
                    pin = SchemaIs.of(base)
                updates.append(st.update)
                rows, files = rows + st.rows, files + st.files
                evolved = evolved or isinstance(st.update, _SCHEMA_KINDS)
                mid = as_base(nxt, base)
        except BaseException:
            self.discard(written)
            raise
        update: Update | None = None
        if len(updates) == 1 and pin is None:
            update = updates[0]
        elif updates:
            update = Compose(tuple(updates), pin)
        return Prepared(
            update,
            Totals(rows, files),
            written=tuple(written),
            written_at=min(stamps) if stamps else None,
            renewable=renewable,
        )


class Transaction(OneCommit):
    """Changes gathered, then committed once (:class:`~lethe.catalog.evolution.OneCommit`).
    A useful, honest subset of PyIceberg's ``Transaction``: appends
    (strict or merge), schema updates, table properties. Deletes, erasures and overwrites
    are refused: they read the rows they remove from the committed table, which a
    transaction's own appends are not yet part of.

    ``append`` builds a step from data (the façade's writer: it writes the files on the
    snapshot the step is given); ``commit`` commits a :class:`TransactionChange`."""

    def __init__(
        self,
        append: Callable[[Any, SchemaMode, Any], Step],
        commit: Callable[[TransactionChange], Any],
        discard: Callable[[Sequence[str]], None] = lambda keys: None,
        index: Indexer | None = None,
    ) -> None:
        self._append = append
        self._commit = commit
        self._discard = discard
        self._index = index
        self._steps: list[Step] = []
        self._done = False
        #: names the commit in messages ("append" for ``Table.append``'s own)
        self.name = "transaction"
        #: what :meth:`commit` returned (a :class:`lethe.CommitResult` from a table's
        #: transaction), once it ran: a ``with`` block's result
        self.result: Any = None

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def _open(self) -> None:
        if self._done:
            raise errors.InvalidRequest("this transaction was committed already")

    def stage(self, step: Step) -> Transaction:
        """A step made by library code (registration, adoption): see :data:`Step`."""
        self._open()
        self._steps.append(step)
        return self

    def append(
        self, data: Any, *, schema_mode: SchemaMode = "strict", progress: Any = None
    ) -> Transaction:
        """Rows to append when the transaction commits. ``schema_mode="merge"``: the table
        takes the data's new columns and wider types first, in the same commit
        (:func:`lethe.catalog.evolution.plan_merge`, on the snapshot it commits on)."""
        if schema_mode not in ("strict", "merge"):
            raise errors.InvalidRequest(
                f"schema_mode must be 'strict' or 'merge', not {schema_mode!r}"
            )
        if schema_mode == "merge" and hasattr(data, "schema"):
            shape = data.schema
            self.stage(lambda _, __: Staged(MergeSchema(shape)))
        return self.stage(self._append(data, schema_mode, progress))

    def add_files(self, files: FileMaker) -> Transaction:
        """Files written already (a registration) added when the transaction commits:
        ``files`` makes them and their operation on the snapshot the step is given (their
        schema id, statistics), and the table's indexes are kept for them (the façade's
        indexer)."""
        index = self._index

        def add(snap: Snapshot, _: bool) -> Staged:
            made = files(snap)
            if made is None or not made[0]:
                return Staged(None)
            new, op = made
            runs, merges, pieces = index(snap, new) if index is not None else ({}, [], [])
            update = AddFiles(tuple(new), op, runs, tuple(merges))
            return Staged(update, tuple(pieces), rows=sum(f.rows for f in new), files=len(new))

        return self.stage(add)

    def update_schema(self) -> SchemaUpdate:
        """A schema update that joins this transaction where it is made: its changes (made
        with or without ``with`` or ``.commit()``) apply before the steps staged after it."""
        builder = SchemaUpdate(lambda changes: None)

        def step(snap: Snapshot, evolved: bool) -> Staged:
            changes = builder.changes
            op = Operation(kind="schema", params=describe_changes(changes))
            return Staged(UpdateSchema(changes, op) if changes else None)

        self.stage(step)
        return builder

    def set_properties(self, **changes: Any) -> Transaction:
        """Table properties changed in the same commit (see :meth:`lethe.Table.set_properties`)."""
        change = SetProperties(
            changes, Operation(kind="properties", params={"changed": len(changes)})
        )
        return self.stage(lambda _, __: Staged(change))

    def delete(self, *args: Any, **kwargs: Any) -> Transaction:
        """Refused: see the class docstring."""
        raise errors.InvalidRequest(
            "a transaction does not delete: a delete reads the rows it hides from the "
            "committed table; commit the transaction, then call t.delete (or t.erase)"
        )

    erase = overwrite = delete

    def commit(self, *, owned: Sequence[str] = (), written_at: float | None = None) -> Any:
        """Commit the gathered steps as one version (none when they change nothing).
        ``owned``: objects the caller wrote for this commit (table-relative keys, removed
        when it does not land), uploaded after ``written_at`` (the GC grace rule)."""
        self._open()
        self._done = True
        change = TransactionChange(tuple(self._steps), self._discard, written_at, owned, self.name)
        self.result = self._commit(change)
        return self.result
