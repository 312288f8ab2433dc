"""History that survives erasure (issue 39): a hypothesis state machine on moto's server
interleaves appends, deletes, erases, purges, compactions, schema changes and GC (retention
30 days, erasure grace 0, a short table grace) on one table, keeping a model of every version.

Invariants, for every version the table still has:

* it reads a subset of its model: never a row it did not have;
* never a row of a customer erased after it (but for a version from before a compaction
  that preceded the erasure: its files were not spliced, it shows the rows until GC cuts it
  after the erasure grace, docs/format.md §6b);
* every row of its model that was neither erased nor purged since: a splice removes only
  the erased rows, so a row deleted (not erased) after it still reads in it; a purge erases
  the rows deleted before it (docs/format.md §6b);
* exactly its model when nothing was erased or purged since.

After each GC run: every erasure's receipt is ``complete`` and a byte audit of the whole
bucket (devtools/audit.py: raw bytes, decompressed pages, decoded columns, decimal text of
JSON) finds no value of an erased customer.

Bounded and derandomized for CI; ``LETHE_HISTORY_EXAMPLES`` and ``LETHE_HISTORY_STEPS`` run
it longer, ``LETHE_HISTORY_RANDOM=1`` on new examples.
"""

from __future__ import annotations

import os
import struct
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lethe
from devtools.audit import Needle, audit_bucket
from lethe import errors
from lethe.gc import collect
from tests.conftest import run_state_machine

EXAMPLES = int(os.environ.get("LETHE_HISTORY_EXAMPLES", "3"))
STEPS = int(os.environ.get("LETHE_HISTORY_STEPS", "12"))
RANDOM = os.environ.get("LETHE_HISTORY_RANDOM") == "1"

ID0, ID_STEP = 9_137_000_003, 7  # ten digits: no count, size or time of a manifest
CUST0, CUST_STEP = 7_310_003, 11  # seven digits, int32
SCHEMA = pa.schema([("id", pa.int64(), False), ("customer_id", pa.int32()), ("note", pa.string())])


def later(hours: float = 2) -> datetime:
    return datetime.now(UTC) + timedelta(hours=hours)


class History(RuleBasedStateMachine):
    s3: Any
    bucket: str

    @initialize()
    def create(self) -> None:
        self.uri = f"s3://{self.bucket}/h{uuid.uuid4().hex[:8]}"
        self.t = lethe.Table.create(
            self.uri, SCHEMA, key="customer_id", gc_grace="60s", row_group_bytes=1 << 20
        )
        self.next_id = 0
        self.next_customer = 0
        self.live: set[int] = set()
        self.customer: dict[int, int] = {}  # id -> customer
        self.notes: dict[int, str] = {}
        self.models: dict[int, frozenset[int]] = {self.t.version: frozenset()}
        self.erased: list[tuple[int, int]] = []  # (version of the erase, customer)
        self.spliced_at: list[int] = []  # versions whose commit removed rows physically
        self.deleted_at: dict[int, int] = {}  # id -> version that deleted it
        self.purged_at: list[int] = []  # versions of purges that removed rows
        self.requests: list[str] = []
        self.extra = 0
        self.compacted_at: list[int] = []
        self.collected_at = -1  # the head version when GC last ran

    def _commit(self) -> None:
        self.t.refresh()
        self.models[self.t.version] = frozenset(self.live)

    def _customers(self) -> list[int]:
        gone = {c for _, c in self.erased}
        return sorted({c for i, c in self.customer.items() if i in self.live} - gone)

    # --- rules ---------------------------------------------------------------------------
    @rule(n=st.integers(1, 12), people=st.integers(1, 3))
    def append(self, n: int, people: int) -> None:
        ids = [ID0 + ID_STEP * (self.next_id + k) for k in range(n)]
        custs = [CUST0 + CUST_STEP * (self.next_customer + k % people) for k in range(n)]
        self.next_id += n
        self.next_customer += people
        notes = [f"note-{uuid.uuid4().hex[:10]}" for _ in ids]
        cols: dict[str, Any] = {"id": ids, "customer_id": custs, "note": notes}
        schema = self.t.refresh().schema
        for f in schema:
            if f.name not in cols:
                cols[f.name] = [None] * n
        self.t.append(pa.table(cols, schema=schema))
        for i, c, note in zip(ids, custs, notes, strict=True):
            self.live.add(i)
            self.customer[i] = c
            self.notes[i] = note
        self._commit()

    @precondition(lambda self: len(self.live) > 1)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        i = data.draw(st.sampled_from(sorted(self.live)))
        self.t.refresh().delete([("id", "=", i)])
        self.live.discard(i)
        self._commit()
        self.deleted_at[i] = self.t.version

    @precondition(lambda self: bool(self._customers()))
    @rule(data=st.data())
    def erase(self, data: st.DataObject) -> None:
        c = data.draw(st.sampled_from(self._customers()))
        rid = f"erase-{uuid.uuid4().hex[:8]}"
        self.t.refresh().erase([("customer_id", "=", c)], request_id=rid)
        self.requests.append(rid)
        self.live -= {i for i, k in self.customer.items() if k == c}
        self._commit()
        self.erased.append((self.t.version, c))
        self.spliced_at.append(self.t.version)

    @rule()
    def purge(self) -> None:
        r = self.t.refresh().purge(request_id=f"purge-{uuid.uuid4().hex[:8]}")
        self._commit()
        if r.rows_erased:
            self.spliced_at.append(self.t.version)
            self.purged_at.append(self.t.version)

    @rule()
    def compact(self) -> None:
        self.t.refresh().compact()
        self._commit()
        self.compacted_at.append(self.t.version)

    @precondition(lambda self: self.extra < 2)
    @rule()
    def add_column(self) -> None:
        self.extra += 1
        with self.t.refresh().update_schema() as u:
            u.add_column(f"extra{self.extra}", pa.string())
        self._commit()

    @rule()
    def gc(self) -> None:
        collect(self.uri, retention="30d", erasure_grace=0, now=later())
        t = lethe.Table.open(self.uri)
        self.collected_at = t.version
        ref = t.manifest.manifest.lineage
        if ref is not None:  # what every reader of an old version loads: GC keeps it
            assert t.store.head(t.key_of(ref.path)).size > 0
        for rid in self.requests:
            r = t.erasure_status(rid)
            assert r.state == "complete", (r.state, r.blocking)
        gone = {c for _, c in self.erased}
        needles = {}
        for c in gone:
            needles[f"customer {c}"] = Needle((struct.pack("<i", c),), (c,), (("customer_id", c),))
            for i, k in self.customer.items():
                if k == c:
                    needles[f"id {i}"] = Needle(
                        (struct.pack("<q", i), self.notes[i].encode()), (i,), (("id", i),)
                    )
        if needles:
            a = audit_bucket(self.s3, self.bucket, needles, versions=False)
            ours = {
                label: [k for k in a.found(label) if k.startswith(self.uri.split("/", 3)[3])]
                for label in needles
            }
            assert not any(ours.values()), {k: v for k, v in ours.items() if v}

    # --- the invariant -----------------------------------------------------------------
    @invariant()
    def every_version_reads_its_model(self) -> None:
        if not hasattr(self, "t"):
            return
        for v, model in sorted(self.models.items()):
            try:
                got = lethe.Table.open(self.uri, version=v).scan(columns=["id"])
            except errors.SnapshotNotFound:
                continue  # cut by an erasure (docs/format.md §6b)
            ids = set(got.column("id").to_pylist())
            assert len(ids) == got.num_rows, v
            assert ids <= model, (v, len(ids - model))
            erased_later = {
                c
                for at, c in self.erased
                if at > v
                and (at <= self.collected_at or not any(v < k < at for k in self.compacted_at))
            }
            assert not any(self.customer[i] in erased_later for i in ids), v
            purged_later = {
                i
                for i, at in self.deleted_at.items()
                if at > v and any(p >= at for p in self.purged_at)
            }
            kept = {i for i in model if self.customer[i] not in erased_later}
            assert kept - purged_later <= ids, (v, len(kept - purged_later - ids))
            if not any(at > v for at in self.spliced_at):
                assert ids == model, v


@pytest.mark.slow
def test_history_state_machine(s3: Any, bucket: str) -> None:
    """issue 39 (done-when): every retained version reads its model minus the people erased
    after it; after GC every receipt is complete and no byte of an erased person is left."""
    History.s3 = s3
    History.bucket = bucket
    run_state_machine(History, examples=EXAMPLES, steps=STEPS, random=RANDOM)
