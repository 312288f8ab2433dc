"""Splice fan-out: an erasure's files cut into groups (lethe.erasure.groups), one splice job
per group, run by several splice invocations at once in the local runtime (the splice
mapping's MaximumConcurrency), every row physically gone; a failing job still goes to the
DLQ with its reason."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events

import lethe
from devtools.local.functions import Invocation
from devtools.local.runtime import LocalRuntime, LocalSettings, load_template
from devtools.local.server import LocalAws
from lethe.catalog.manifest import request_hash
from lethe.erasure.deletes import DeleteRequest
from lethe.erasure.groups import plan_groups, splice_cost, splice_group

CUSTOMER = 7  # events(): customer_id = id % 100, so one row in every 100


def physical(t: lethe.Table, column: str = "customer_id") -> list[int]:
    """Every value of ``column`` physically in the live files (DVs not applied)."""
    out: list[int] = []
    for f in t.manifest.files:
        body = t.store.get(t.key_of(f.path)).body
        out += pq.read_table(io.BytesIO(body), columns=[column]).column(column).to_pylist()
    return out


def spread(uri: str, files: int, **kw: Any) -> lethe.Table:
    """``files`` appends of 200 rows: the customer has 2 rows in each file."""
    t = lethe.Table.create(uri, EVENTS, key="id", row_group_bytes=2048, **kw)
    for k in range(files):
        t.append(events(k * 200, 200))
    return t


def test_groups_cover_the_pending_files_once_within_the_budget(table_uri: str, s3: Any) -> None:
    t = spread(table_uri, 6)
    t.delete_batch([DeleteRequest([("customer_id", "=", CUSTOMER)], "erase-7", erase=True)])
    m = t.refresh().manifest
    (e,) = m.erasures
    costs = {x.path: splice_cost(m.file(x.path), x.row_groups) for x in e.targets}
    budget = 2 * max(costs.values())
    groups = plan_groups(m, e.id_hash, budget)
    assert sorted(p for g in groups for p in g) == sorted(costs)  # each pending file once
    assert len(groups) >= 3 and all(sum(costs[p] for p in g) <= budget for g in groups)
    # a budget below every file's cost: one file per group (each over it, said in the log)
    assert [len(g) for g in plan_groups(m, e.id_hash, 1)] == [1] * len(costs)
    # the groups spliced one by one: the last one turns the erasure spliced
    done = [splice_group(t.refresh().context, e.id_hash, g, budget) for g in groups]
    assert [r.erasure_complete for r in done] == [False] * (len(groups) - 1) + [True]
    assert all(r.remaining == () and r.replaced == 0 for r in done)
    t.refresh()
    assert t.manifest.erasures[0].state == "spliced" and CUSTOMER not in physical(t)
    assert t.scan(["id"]).num_rows == 6 * 200 - 12


def test_a_file_over_the_budget_is_carried_on_in_parts(table_uri: str, s3: Any) -> None:
    t = spread(table_uri, 1)
    t.delete_batch([DeleteRequest([("customer_id", "in", [3, 55, 97])], "erase-3", erase=True)])
    m = t.refresh().manifest
    ((target,), h) = (m.erasures[0].targets, m.erasures[0].id_hash)
    f = m.file(target.path)
    assert len(target.row_groups) >= 2
    one = max(splice_cost(f, [g]) for g in target.row_groups)
    r = splice_group(t.context, h, (f.path,), one)  # room for one row group's splice
    assert len(r.splices) == 1 and not r.erasure_complete
    assert r.remaining == (r.splices[0].new.path,)  # type: ignore[union-attr]
    steps = 1
    while r.remaining:
        r = splice_group(t.refresh().context, h, r.remaining, one)
        steps += 1
    assert r.erasure_complete and steps == len(target.row_groups)
    assert not {3, 55, 97} & set(physical(t.refresh()))


# --- the local runtime ----------------------------------------------------------------------
CONCURRENCY = 3


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return load_template(
        context={"lethe:spliceConcurrency": CONCURRENCY},
        cache_dir=tmp_path_factory.mktemp("template-cache"),
    )


@pytest.fixture
def runtime(aws: LocalAws, template: dict[str, Any], tmp_path: Path) -> Iterator[LocalRuntime]:
    lines: list[str] = []
    settings = LocalSettings(
        env_overrides={"LETHE_SPLICE_MAX_BYTES": str(24 << 10)}, log_dir=tmp_path
    )
    rt = LocalRuntime.start(template=template, aws=aws, settings=settings, echo=lines.append)
    rt.lines = lines  # type: ignore[attr-defined]
    try:
        yield rt
    finally:
        rt.stop()


def overlapping(log: list[Invocation]) -> int:
    """The most invocations of the log running at one instant (from their start/end)."""
    edges = sorted([(i.started, 1) for i in log] + [(i.ended, -1) for i in log])
    most = running = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


@pytest.mark.slow
@pytest.mark.cdk
@pytest.mark.xdist_group("cdk")
def test_an_erasure_fans_out_to_concurrent_splice_invocations(
    runtime: LocalRuntime, aws: LocalAws
) -> None:
    rt = runtime
    sqs = aws.client("sqs")
    t = spread(rt.table_uri, 9)
    budget = int(rt.function("splice.handler.handler").environment["LETHE_SPLICE_MAX_BYTES"])
    assert max(splice_cost(f, range(len(f.row_groups))) for f in t.manifest.files) < budget
    body = {
        "request_id": "erase-customer-7",
        "table": rt.table_uri,
        "filters": [["customer_id", "=", CUSTOMER]],
        "mode": "erase",
    }
    sqs.send_message(QueueUrl=rt.outputs["DeleteQueueUrl"], MessageBody=json.dumps(body))
    # a job that fails on every delivery: retried, then dead-lettered with its reason
    bad = {"table": f"s3://{rt.bucket}/no/such/table", "erasure": "0" * 32}
    sqs.send_message(QueueUrl=rt.outputs["SpliceQueueUrl"], MessageBody=json.dumps(bad))
    pumped = rt.pump_until_idle(timeout=600)

    splice = rt.function("splice.handler.handler")
    # a batch of one that fails fails the invocation (Powertools raises when every record
    # of a batch failed): Lambda then leaves the message on the queue
    good = sorted((i for i in splice.log if i.ok), key=lambda i: i.started)
    failed = [i for i in splice.log if not i.ok]
    assert all(i.result == {"batchItemFailures": []} for i in good)
    fan_out, groups = good[0], good[1:]  # the delete handler's one job, then the groups'
    assert all(fan_out.ended <= g.started for g in groups)
    assert len(groups) >= CONCURRENCY  # one job per group, 9 files within a 24 KiB budget
    # several splice invocations ran at once, each in its own execution environment
    assert overlapping(groups) == CONCURRENCY
    assert len({i.environment for i in groups}) == CONCURRENCY
    assert splice.metrics["SpliceGroups"] == len(groups)

    t.refresh()
    (e,) = [x for x in t.manifest.erasures if x.id_hash == request_hash("erase-customer-7")]
    assert e.state == "spliced" and e.targets == ()
    assert CUSTOMER not in physical(t)  # every row of the customer physically gone
    assert t.scan(["id"]).num_rows == 9 * 200 - 18
    assert len(t.manifest.files) == 9
    ops = [h.operation for h in t.history()]
    assert ops.count("erase") < 9  # files committed several per commit

    # the bad job: failed on each of its 5 receives, then moved to the DLQ, reason logged
    assert pumped.dead_lettered == {rt.queue("SpliceDeadLetterQueueUrl").name: 1}
    (dead,) = rt.peek("SpliceDeadLetterQueueUrl")
    assert json.loads(dead["Body"]) == bad
    assert len(failed) == 5 and all("TableNotFound" in (i.error or "") for i in failed)
    lines = [x for x in rt.lines if "failed" in x and "splice" in x]  # type: ignore[attr-defined]
    assert len(lines) == 5 and all("receive" in x for x in lines)
    assert "erase-customer-7" not in (rt.log_dir / f"{splice.logical_id}.log").read_text()


def test_a_group_whose_file_was_replaced_adopts_the_files_added_since_its_plan(
    table_uri: str, s3: Any
) -> None:
    t = spread(table_uri, 1)
    t.delete_batch(
        [
            DeleteRequest([("customer_id", "in", [3, 55])], "erase-x", erase=True),
            DeleteRequest([("customer_id", "in", [4, 97])], "erase-y", erase=True),
        ]
    )
    m = t.refresh().manifest
    x, y = request_hash("erase-x"), request_hash("erase-y")
    (group,) = plan_groups(m, y, 1 << 30)
    planned = m.version
    # erase-x's job splices a part of the shared file (its budget fits one row group): the
    # rest of both erasures' targets move onto the new file, which erase-y's group never named
    f = m.file(group[0])
    one = max(splice_cost(f, [g]) for g in range(len(f.row_groups)))
    part = splice_group(t.context, x, group, one)
    assert part.remaining and not part.erasure_complete
    r = splice_group(t.refresh().context, y, group, 1 << 30, planned=planned)
    assert (r.replaced, r.adopted) == (1, 1) and r.erasure_complete and r.remaining == ()
    t.refresh()
    assert {e.id_hash: e.state for e in t.manifest.erasures} == {x: "spliced", y: "spliced"}
    assert not {3, 4, 55, 97} & set(physical(t))
    # without the plan's version nothing is adopted: the group is simply done
    assert splice_group(t.context, y, group, 1 << 30).adopted == 0
