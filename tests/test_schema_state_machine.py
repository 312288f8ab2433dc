"""Schema evolution as a hypothesis state machine (issue 27): random evolutions interleaved
with appends of old and new shapes, deletes, erases, compactions and time travel, checked
against a plain in-memory model after every step, with ``verify --deep`` (files, DVs and the
index on a column that is renamed along the way) as an invariant."""

from __future__ import annotations

import uuid
from typing import Any

import pyarrow as pa
from conftest import run_state_machine
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lethe
from lethe.audit.verify import verify
from lethe.catalog.schemas import field_id

WIDER = {"int32": "int64", "float32": "float64"}
ARROW = {name: getattr(pa, name)() for name in ("int32", "int64", "float32", "float64", "string")}
INDEXED = 2  # the field id of the indexed column: renamed, never dropped or widened (refused)


def value(kind: str, cid: int, key: int) -> Any:
    """The value a row of key ``key`` holds in column ``cid`` (None now and then)."""
    if (key + cid) % 5 == 0:
        return None
    n = (key * 7 + cid) % 50  # few distinct values: deletes and erases hit several rows
    if kind.startswith("int"):
        return n
    if kind.startswith("float"):
        return n / 4  # exact in float32
    return f"v{n}"


class EvolvingTable(RuleBasedStateMachine):
    """The model: columns by field id (name, kind, initial default) and rows by key."""

    uri: str

    @initialize()
    def setup(self) -> None:
        self.cols: dict[int, list[Any]] = {
            1: ["id", "int64", None],
            2: ["a", "int32", None],
            3: ["b", "float32", None],
            4: ["s", "string", None],
        }
        schema = pa.schema(
            [pa.field(v[0], ARROW[v[1]], nullable=c != 1) for c, v in self.cols.items()]
        )
        self.t = lethe.Table.create(
            f"{self.uri}-{uuid.uuid4().hex[:8]}", schema, key="id", row_group_bytes=512
        )
        self.t.create_index("a")
        self.rows: dict[int, dict[int, Any]] = {}
        self.snapshots: dict[int, list[dict[str, Any]]] = {0: []}
        self.next_key = 0
        self.next_name = 0

    # --- helpers ---------------------------------------------------------------------------
    def expected(self) -> list[dict[str, Any]]:
        return sorted(
            (
                {v[0]: (r[c] if c in r else v[2]) for c, v in self.cols.items()}
                for r in self.rows.values()
            ),
            key=lambda r: r["id"],
        )

    def committed(self) -> None:
        self.t = lethe.Table.open(self.t.uri)
        self.snapshots[self.t.version] = self.expected()

    def fresh_name(self) -> str:
        self.next_name += 1
        return f"c{self.next_name}"

    def batch(self, n: int, present: list[int]) -> pa.Table:
        keys = range(self.next_key, self.next_key + n)
        self.next_key += n
        for k in keys:
            self.rows[k] = {c: (k if c == 1 else value(self.cols[c][1], c, k)) for c in present}
            for c in self.cols:  # a column the data lacks reads as null (not the default)
                self.rows[k].setdefault(c, None)
        return pa.table(
            [pa.array([self.rows[k][c] for k in keys], ARROW[self.cols[c][1]]) for c in present],
            schema=pa.schema(
                [
                    pa.field(self.cols[c][0], ARROW[self.cols[c][1]], nullable=c != 1)
                    for c in present
                ]
            ),
        )

    def others(self) -> list[int]:
        return [c for c in self.cols if c != 1]

    # --- rules -----------------------------------------------------------------------------
    @rule(n=st.integers(1, 60))
    def append(self, n: int) -> None:
        self.t.append(self.batch(n, list(self.cols)))
        self.committed()

    @rule(n=st.integers(1, 30), data=st.data())
    def append_other_shape(self, n: int, data: st.DataObject) -> None:
        """An upstream of an older or narrower shape: a subset of the columns, in merge mode."""
        some = data.draw(st.lists(st.sampled_from(self.others()), unique=True))
        self.t.append(self.batch(n, [1, *some]), schema_mode="merge")
        self.committed()

    @rule(kind=st.sampled_from(["int32", "string", "float32"]), default=st.sampled_from([None, 3]))
    def add_column(self, kind: str, default: int | None) -> None:
        default = default if kind == "int32" else None
        name = self.fresh_name()
        with self.t.update_schema() as u:
            u.add_column(name, ARROW[kind], default=default)
        fid = field_id(lethe.Table.open(self.t.uri).schema.field(name))
        self.cols[fid] = [name, kind, default]
        self.committed()

    @precondition(lambda self: len(self.others()) > 1)
    @rule(data=st.data())
    def drop_column(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from([c for c in self.others() if c != INDEXED]))
        with self.t.update_schema() as u:
            u.drop_column(self.cols[cid][0])
        del self.cols[cid]
        for r in self.rows.values():
            r.pop(cid, None)
        self.committed()

    @rule(data=st.data())
    def rename_column(self, data: st.DataObject) -> None:
        cid = data.draw(st.sampled_from(self.others()))
        new = self.fresh_name()
        with self.t.update_schema() as u:
            u.rename_column(self.cols[cid][0], new)
        self.cols[cid][0] = new
        self.committed()

    @rule(data=st.data())
    def widen_column(self, data: st.DataObject) -> None:
        can = [c for c in self.others() if self.cols[c][1] in WIDER and c != INDEXED]
        if not can:
            return
        cid = data.draw(st.sampled_from(can))
        self.cols[cid][1] = WIDER[self.cols[cid][1]]
        with self.t.update_schema() as u:
            u.widen_column(self.cols[cid][0], ARROW[self.cols[cid][1]])
        self.committed()

    @precondition(lambda self: bool(self.rows))
    @rule(
        data=st.data(),
        how=st.sampled_from(["delete", "erase"]),
        by=st.sampled_from(["key", "indexed"]),
    )
    def forget(self, data: st.DataObject, how: str, by: str) -> None:
        """A delete (DV) or an erase (DV, then a splice of the file under its own schema)."""
        if by == "key":
            k = data.draw(st.sampled_from(sorted(self.rows)))
            flt: Any = [("id", "=", k)]
            hit = {k}
        else:
            seen = sorted({r[INDEXED] for r in self.rows.values() if r[INDEXED] is not None})
            if not seen:
                return
            v = data.draw(st.sampled_from(seen))
            flt = [(self.cols[INDEXED][0], "=", v)]
            hit = {k for k, r in self.rows.items() if r[INDEXED] == v}
        r = (self.t.delete if how == "delete" else self.t.erase)(flt)
        assert r.rows_deleted == len(hit)
        for k in hit:
            del self.rows[k]
        if how == "erase":
            # history survives erasure minus the person: every retained version reads without
            # the erased rows (issue 39), other versions' rows untouched
            for v, snap in self.snapshots.items():
                self.snapshots[v] = [row for row in snap if row["id"] not in hit]
        self.committed()

    @rule()
    def compact(self) -> None:
        self.t.compact()
        self.committed()

    @rule(data=st.data())
    def time_travel(self, data: st.DataObject) -> None:
        """An old snapshot reads with its own schema: its columns, names and types."""
        v = data.draw(st.sampled_from(sorted(self.snapshots)))
        old = lethe.Table.open(self.t.uri, version=v)
        assert sorted(old.scan().to_pylist(), key=lambda r: r["id"]) == self.snapshots[v]

    # --- invariants ------------------------------------------------------------------------
    @invariant()
    def reads_as_the_model(self) -> None:
        if not hasattr(self, "t"):
            return
        assert self.t.schema.names == [v[0] for v in self.cols.values()]
        assert [field_id(f) for f in self.t.schema] == list(self.cols)
        assert sorted(self.t.scan().to_pylist(), key=lambda r: r["id"]) == self.expected()

    @invariant()
    def verifies_deep(self) -> None:
        if not hasattr(self, "t"):
            return
        report = verify(self.t, deep=True)
        assert report.ok, report.problems


def test_schema_state_machine(table_uri: str) -> None:
    EvolvingTable.uri = table_uri
    run_state_machine(EvolvingTable, examples=10, steps=8, random=True)
