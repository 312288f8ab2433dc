"""Ownership that cannot be taken twice (issue 35 items 1 and 2): a table never adopts again an
object it superseded, refuses an object another Lethe table owns (naming it), and GC never
deletes an object another table references. Driven through the CLI as the issue's report."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.cli import main
from lethe.gc import collect


def _put(s3: Any, bucket: str, key: str, t: pa.Table) -> None:
    buf = io.BytesIO()
    pq.write_table(t, buf)
    s3.put_object(Bucket=bucket, Key=key, Body=buf.getvalue())


def _three_files(s3: Any, bucket: str) -> str:
    """3 Hive files of 4,000 rows (ids 0..11,999; customer 1 has 60 rows)."""
    for i in range(3):
        _put(
            s3,
            bucket,
            f"raw/ev/dt=2026-01-0{i + 1}/part-0.parquet",
            events(i * 4000, 4000, customers=200),
        )
    return f"s3://{bucket}/raw/ev/"


def test_seam01_readopt_after_erase_keeps_rows_gone(s3: Any, bucket: str, capsys: Any) -> None:
    """issue 35 item 1: re-running adopt after an erase must not take the superseded
    originals again (they stay in the bucket until GC)."""
    src, uri = _three_files(s3, bucket), f"s3://{bucket}/t"
    assert main(["adopt", uri, src, "--key", "id"]) == 0
    assert main(["erase", uri, "--where", "customer_id = 1", "--request-id", "r1"]) == 0
    before = lethe.Table.open(uri)
    assert before.scan().num_rows == 11_940
    receipt = before.erasure_status("r1")
    # the spliced originals are still there (GC has not run)
    assert len(s3.list_objects_v2(Bucket=bucket, Prefix="raw/ev/")["Contents"]) == 3
    capsys.readouterr()
    assert main(["adopt", uri, src, "--key", "id"]) == 0
    t = lethe.Table.open(uri)
    got = t.scan()
    assert got.num_rows == 11_940
    assert pc.sum(pc.equal(got["customer_id"], 1)).as_py() in (0, None)
    assert len(set(got["id"].to_pylist())) == got.num_rows  # no duplicated ids
    assert t.version == before.version  # nothing adopted, nothing committed
    assert receipt.state in ("removed", "complete")
    assert t.erasure_status("r1") == receipt  # the receipt stays what it was, and true
    # a dry run says the same: nothing to adopt, 3 objects superseded
    plan = lethe.Table.adopt(uri, src, dry_run=True)
    assert isinstance(plan, lethe.AdoptPlan)
    assert plan.files == () and plan.superseded == 3


def test_seam02_a_second_table_cannot_take_owned_files(s3: Any, bucket: str) -> None:
    """issue 35 item 2: adopt of a prefix another table owns is refused, naming the table;
    the first table's scans keep working after the second's erase and GC (no doubled prefix)."""
    src = _three_files(s3, bucket)
    a, b = f"s3://{bucket}/tables/a", f"s3://{bucket}/tables/b"
    lethe.Table.adopt(a, src, key="id")
    with pytest.raises(errors.OwnedElsewhere, match="tables/a"):
        lethe.Table.adopt(b, src, key="id")
    with pytest.raises(errors.OwnedElsewhere, match="tables/a"):
        lethe.Table.adopt(b, src, key="id", take_ownership=False)
    with pytest.raises(errors.OwnedElsewhere, match="tables/a"):
        lethe.Table.adopt(b, src, key="id", dry_run=True)
    # nor the files another table wrote under its own prefix
    w = f"s3://{bucket}/tables/w"
    lethe.Table.create(w, events(0, 1).schema, key="id").append(events(0, 50))
    with pytest.raises(errors.OwnedElsewhere, match="tables/w"):
        lethe.Table.adopt(b, f"{w}/data/", key="id")
    assert lethe.Table.open(a).scan().num_rows == 12_000


def test_seam02_gc_never_deletes_what_another_table_references(s3: Any, bucket: str) -> None:
    """issue 35 item 2: two tables reading the same files without ownership is allowed; a
    table that owns files another table also references (adopted before markers existed)
    splices them, but its GC keeps the originals while the other table references them."""
    src = _three_files(s3, bucket)
    a, b = f"s3://{bucket}/tables/a", f"s3://{bucket}/tables/b"
    lethe.Table.adopt(a, src, key="id", take_ownership=False)
    lethe.Table.adopt(b, src, key="id", take_ownership=False)  # readers share
    with pytest.raises(errors.OwnedElsewhere, match="tables/a"):
        lethe.Table.adopt(f"s3://{bucket}/tables/c", src, key="id")  # owning would break a, b
    ta = lethe.Table.open(a)
    assert ta.scan().num_rows == lethe.Table.open(b).scan().num_rows == 12_000


def test_seam02_stale_snapshot_names_the_object_once(s3: Any, bucket: str) -> None:
    """issue 35 item 2: a StaleSnapshot on an adopted file names ``s3://b/raw/...``, not
    ``s3://b/s3://b/raw/...``."""
    src, uri = _three_files(s3, bucket), f"s3://{bucket}/t"
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table)
    s3.delete_object(Bucket=bucket, Key="raw/ev/dt=2026-01-01/part-0.parquet")
    with pytest.raises(errors.StaleSnapshot) as e:
        t.scan()
    assert f"s3://{bucket}/s3://" not in str(e.value)
    assert f"s3://{bucket}/raw/ev/dt=2026-01-01/part-0.parquet" in str(e.value)


def test_seam02_gc_keeps_originals_another_table_references(s3: Any, bucket: str) -> None:
    """issue 35 item 2: table a adopted the files with ownership before ownership markers
    existed (simulated: its markers deleted); table b then adopts them to read (a reader
    marker). a's erase + GC must not delete what b references: b's scans keep working."""
    src = _three_files(s3, bucket)
    a, b = f"s3://{bucket}/tables/a", f"s3://{bucket}/tables/b"
    ta = lethe.Table.adopt(a, src, key="id")
    assert isinstance(ta, lethe.Table)
    for o in s3.list_objects_v2(Bucket=bucket, Prefix="_lethe/owners/").get("Contents", []):
        s3.delete_object(Bucket=bucket, Key=o["Key"])
    lethe.Table.adopt(b, src, key="id", take_ownership=False)
    ta.erase([("customer_id", "=", 1)], request_id="r1")
    collect(ta, now=datetime.now(UTC) + timedelta(days=40))
    assert len(s3.list_objects_v2(Bucket=bucket, Prefix="raw/ev/").get("Contents", [])) == 3
    assert lethe.Table.open(b).scan().num_rows == 12_000
    assert lethe.Table.open(a).scan().num_rows == 11_940


def test_seam01_a_redelivered_upload_event_does_not_readopt_an_erased_original(
    s3: Any, bucket: str
) -> None:
    """issue 35 item 1 (the upload trigger's path): an S3 event redelivered after an erase
    must not adopt the spliced original again."""
    from lethe.adopt.one import adopt_object

    _put(s3, bucket, "raw/ev/dt=2026-01-01/part-0.parquet", events(0, 4000, customers=200))
    t = lethe.Table.create(
        f"s3://{bucket}/t", events(0, 1).schema.append(pa.field("dt", pa.string())), key="id"
    )
    key = "raw/ev/dt=2026-01-01/part-0.parquet"
    head = s3.head_object(Bucket=bucket, Key=key)
    kw = {"etag": head["ETag"], "size": head["ContentLength"], "prefix": "raw/ev/"}
    assert not adopt_object(t, bucket, key, **kw).duplicate
    t.erase([("customer_id", "=", 1)], request_id="r1")
    again = adopt_object(t, bucket, key, **kw)
    assert again.duplicate and again.rows == 0
    got = lethe.Table.open(f"s3://{bucket}/t").scan()
    assert got.num_rows == 3_980 and len(set(got["id"].to_pylist())) == 3_980


def test_seam02_racing_claims_leave_one_owner_per_object(s3: Any, bucket: str) -> None:
    """issue 35 item 2: two tables claiming the same objects at once: each object ends with at
    most one owner, and a claim that was refused leaves no marker naming its table."""
    import threading

    from lethe.erasure.ownership import Marker, TableRef, claim, marker_uri
    from lethe.storage.store import S3Store

    store = S3Store(bucket, client=s3)
    uris = [f"s3://{bucket}/raw/r/{i}.parquet" for i in range(40)]
    tables = [TableRef(uri=f"s3://{bucket}/tables/{n}", uuid=n) for n in ("a", "b")]
    start, refused = threading.Barrier(2), {}

    def run(t: TableRef) -> None:
        start.wait()
        try:
            claim(store, t, uris, owned=True)
        except errors.OwnedElsewhere as e:
            refused[t.uuid] = e

    threads = [threading.Thread(target=run, args=(t,)) for t in tables]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert refused, "two owners for the same objects"
    owners = set()
    for u in uris:
        bucket_, key = marker_uri(u).removeprefix("s3://").split("/", 1)
        try:
            body = s3.get_object(Bucket=bucket_, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            continue
        m = Marker.model_validate_json(body)
        assert m.owner is not None and not m.readers
        owners.add(m.owner.uuid)
    assert not owners & set(refused)  # a refused claim released what it had taken
    assert len(owners) <= 1


def test_seam01_ledgers_of_many_small_adoptions_are_merged(s3: Any, bucket: str) -> None:
    """issue 35 item 1 (at scale): the upload trigger adopts one object per commit; the
    ledgers are merged so the manifest root stays small, and none of the objects is lost
    from the table's record."""
    from lethe.adopt.one import adopt_object
    from lethe.erasure.ownership import MERGE_AT, adopted_objects

    t = lethe.Table.create(f"s3://{bucket}/t", events(0, 1).schema, key="id")
    n = MERGE_AT + 3
    for i in range(n):
        key = f"raw/one/{i}.parquet"
        _put(s3, bucket, key, events(i * 10, 10))
        head = s3.head_object(Bucket=bucket, Key=key)
        adopt_object(
            t, bucket, key, etag=head["ETag"], size=head["ContentLength"], prefix="raw/one/"
        )
    t = lethe.Table.open(f"s3://{bucket}/t")
    assert len(t.manifest.manifest.adopted) <= MERGE_AT
    ever = adopted_objects(t.store, t.catalog.prefix, t.manifest)
    assert sorted(ever) == sorted(f"s3://{bucket}/raw/one/{i}.parquet" for i in range(n))
    assert t.scan().num_rows == 10 * n


def test_seam01_a_table_from_before_ledgers_answers_from_its_erasure_records(
    s3: Any, bucket: str
) -> None:
    """issue 35 item 1 (tables adopted before the ledger existed): their manifest names no
    ledger; the erasure records' superseded originals still count as adopted (a re-adopt
    skips them), and the first adopt commit writes them into its ledger with the live ones."""
    from lethe.erasure.ownership import adopted_objects, legacy_entries

    src, uri = _three_files(s3, bucket), f"s3://{bucket}/t"
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table)
    t.erase([("customer_id", "=", 1)], request_id="r1")
    old = t.manifest.evolve(adopted=())  # what a table adopted by an older Lethe holds
    originals = {f"s3://{bucket}/raw/ev/dt=2026-01-0{i + 1}/part-0.parquet" for i in range(3)}
    assert adopted_objects(t.store, t.catalog.prefix, old) == {}
    assert set(adopted_objects(t.store, t.catalog.prefix, old, legacy=True)) == originals
    assert {e.path for e in legacy_entries(old, live=True)} == originals
    assert legacy_entries(t.manifest, live=True) == ()  # a table with a ledger needs none


@settings(max_examples=6, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("erase"), st.integers(0, 9)),
            st.tuples(st.just("readopt"), st.just(0)),
            st.tuples(st.just("land"), st.just(0)),
            st.tuples(st.just("gc"), st.just(0)),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_seam01_erased_rows_never_come_back_whatever_the_order(
    s3: Any, steps: list[tuple[str, int]]
) -> None:
    """issue 35 item 1, as a property: erases, re-adoptions, new files landing under the
    adopted prefix and GC in any order; the table always holds exactly the rows adopted
    minus the ones erased, each id once."""
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    src, uri = f"s3://{bucket}/raw/p/", f"s3://{bucket}/t"
    landed = 0

    def land() -> set[int]:
        nonlocal landed
        t = events(landed * 100, 100, customers=10)
        _put(s3, bucket, f"raw/p/dt=d{landed}/part-0.parquet", t)
        landed += 1
        return set(t["id"].to_pylist())

    waiting = land()
    t = lethe.Table.adopt(uri, src, key="id")
    assert isinstance(t, lethe.Table)
    want, waiting = set(waiting), set()
    for i, (op, customer) in enumerate(steps):
        if op == "erase":
            t.erase([("customer_id", "=", customer)], request_id=f"r{i}")
            want = {x for x in want if x % 10 != customer}
        elif op == "readopt":
            got = lethe.Table.adopt(uri, src)
            assert isinstance(got, lethe.Table)
            want, waiting = want | waiting, set()
        elif op == "land":
            waiting |= land()
        else:
            collect(t, now=datetime.now(UTC) + timedelta(days=40))
        t = lethe.Table.open(uri)
        ids = t.scan()["id"].to_pylist()
        assert len(ids) == len(set(ids)) and set(ids) == want, (op, i)
