"""One stack per lake (issue 29): context ``lethe:lake`` scopes the delete handler, the splice
worker and GC to exactly the lake's prefixes (tables in two buckets, an adopted prefix),
gives the delete handler ``LETHE_LAKE_URI``, schedules the erasure window and GC per table;
the overdue alarm and the dashboard watch the lake's backlog. Logical ids are never spelled
out; cdk-nag stays clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk.assertions import Match

from infra import constants as c
from infra.config import ConfigError, LetheConfig
from layers import build as layer_build
from tests.infra.test_stack import GC_ONLY, Synth, _nag_report, _overdue, _synth, grants

pytestmark = [pytest.mark.cdk, pytest.mark.slow, pytest.mark.xdist_group("cdk")]

LAKE = {
    "uri": "s3://lake-bkt/_lethe",
    "tables": ["s3://lake-bkt/tables/orders", "s3://other-bkt/t/events"],
    "adopted": ["s3://raw-bkt/iceberg/tickets"],
}
ORDERS = "arn:<AWS::Partition>:s3:::lake-bkt/tables/orders/"
EVENTS = "arn:<AWS::Partition>:s3:::other-bkt/t/events/"
REGISTRY = "arn:<AWS::Partition>:s3:::lake-bkt/_lethe/"
ADOPTED = "arn:<AWS::Partition>:s3:::raw-bkt/iceberg/tickets/"


@pytest.fixture(scope="module")
def layers() -> layer_build.LayerReport:
    return layer_build.build()


@pytest.fixture(scope="module")
def synth_lake(layers: layer_build.LayerReport, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(
        tmp_path_factory.mktemp("cdk-lake"),
        {c.CTX_LAKE: json.dumps(LAKE), c.CTX_ERASURE_WINDOW_SCHEDULE: "rate(6 hours)"},
    )


def lake_keys(synth: Synth, handler: str, action: str) -> dict[str, set[str]]:
    """Per lake prefix, the keys ``action`` is allowed on (relative to that prefix)."""
    out: dict[str, set[str]] = {}
    for r in grants(synth.statements(handler)).get(action, set()):
        for name, base in (("orders", ORDERS), ("events", EVENTS), ("registry", REGISTRY)):
            if r.startswith(base):
                out.setdefault(name, set()).add(r.removeprefix(base))
        if r.startswith(ADOPTED):
            out.setdefault("adopted", set()).add(r.removeprefix(ADOPTED))
    return out


def test_config_parses_and_refuses_the_lake() -> None:
    base = {c.CTX_LAKE: json.dumps(LAKE)}
    cfg = LetheConfig.from_mapping(base)
    assert cfg.lake is not None and [t.uri for t in cfg.lake.tables] == LAKE["tables"]
    assert cfg.lake.buckets == ("lake-bkt", "other-bkt", "raw-bkt")
    assert LetheConfig.from_mapping({}).lake is None  # the single-table deployment
    for bad in (
        {"uri": "s3://lake-bkt/_lethe", "tables": []},
        {"uri": "s3://lake-bkt/_lethe", "tables": ["s3://lake-bkt/_lethe/t"]},  # overlaps
        {"uri": "lake-bkt/_lethe", "tables": ["s3://lake-bkt/t"]},
        {"uri": "s3://lake-bkt/_lethe", "tables": ["s3://lake-bkt/t"], "extra": 1},
    ):
        with pytest.raises(ConfigError, match=c.CTX_LAKE):
            LetheConfig.from_mapping({c.CTX_LAKE: json.dumps(bad)})


def test_delete_handler_routes_lake_requests_and_commits_only_there(synth_lake: Synth) -> None:
    env = synth_lake.functions()[c.DELETE_HANDLER]["Environment"]["Variables"]
    assert env[c.ENV_LAKE_URI] == LAKE["uri"]
    commit = {"tombstone/*", "index/*", "manifest/*", c.HEAD_KEY}
    puts = lake_keys(synth_lake, c.DELETE_HANDLER, "s3:PutObject")
    assert puts == {
        "orders": commit,
        "events": commit,
        "registry": {c.LAKE_KEY, "requests/*", "archive/*"},
    }
    reads = lake_keys(synth_lake, c.DELETE_HANDLER, "s3:GetObject")
    assert reads == {k: {"*"} for k in ("orders", "events", "registry", "adopted")}
    deletes = lake_keys(synth_lake, c.DELETE_HANDLER, "s3:DeleteObject")
    assert deletes == {"registry": {"requests/*"}}  # applied values only, no table object
    # every version of the values objects (issue 35 item 5), and nothing else
    versions = lake_keys(synth_lake, c.DELETE_HANDLER, "s3:DeleteObjectVersion")
    assert versions == {"registry": {"requests/*"}}
    assert not set(grants(synth_lake.statements(c.DELETE_HANDLER))) & (
        GC_ONLY - {"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:ListBucketVersions"}
    )


def test_splice_worker_writes_data_of_lake_tables_and_runs_the_window(synth_lake: Synth) -> None:
    env = synth_lake.functions()[c.SPLICE_HANDLER]["Environment"]["Variables"]
    assert env[c.ENV_LAKE_URI] == LAKE["uri"]
    puts = lake_keys(synth_lake, c.SPLICE_HANDLER, "s3:PutObject")
    assert (
        puts["orders"]
        == puts["events"]
        == {
            "data/*",
            "tombstone/*",
            "index/*",
            "manifest/*",
            c.HEAD_KEY,
        }
    )
    assert "adopted" not in puts  # adopted prefixes are read-only
    aborts = lake_keys(synth_lake, c.SPLICE_HANDLER, "s3:AbortMultipartUpload")
    assert aborts == {"orders": {"data/*"}, "events": {"data/*"}}
    synth_lake.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(6 hours)",
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Fn::GetAtt": [Match.any_value(), "Arn"]},
                        "Input": Match.serialized_json(c.LAKE_WINDOW_EVENT),
                    }
                )
            ],
        },
    )
    (window,) = [
        r["Properties"]
        for r in synth_lake.of_type("AWS::Events::Rule").values()
        if "erasure-window" in json.dumps(r["Properties"])
    ]
    splice_id = synth_lake.logical_id(synth_lake.stack.erasure.splice_worker.function)
    assert window["Targets"][0]["Arn"]["Fn::GetAtt"][0] == splice_id


def test_gc_steps_hold_their_rights_on_every_lake_table(synth_lake: Synth) -> None:
    sweep = lake_keys(synth_lake, c.GC_SWEEP_HANDLER, "s3:DeleteObject")
    assert "registry" not in sweep and "adopted" not in sweep
    for table in ("orders", "events"):
        assert {"data/*", "tombstone/*", "_gc/*"} <= sweep[table]
    assert lake_keys(synth_lake, c.GC_PLAN_HANDLER, "s3:DeleteObject") == {
        "orders": {"_gc/*"},
        "events": {"_gc/*"},
    }
    for table in LAKE["tables"]:
        synth_lake.template.has_resource_properties(
            "AWS::Events::Rule",
            {
                "Targets": [
                    Match.object_like(
                        {"Input": Match.serialized_json({"dry_run": False, "table": table})}
                    )
                ]
            },
        )
    # the stack's own table keeps its schedule and grants: one more rule per lake table
    synth_lake.template.resource_count_is("AWS::Events::Rule", 1 + 1 + len(LAKE["tables"]))


def test_list_is_conditioned_on_the_lake_prefixes(synth_lake: Synth) -> None:
    conditions = [
        st["Condition"]["StringLike"]["s3:prefix"]
        for st in synth_lake.statements(c.DELETE_HANDLER)
        if st["Action"] == "s3:ListBucket"
    ]
    flat = {p for ps in conditions for p in ps}
    for prefix in ("tables/orders", "t/events", "_lethe", "iceberg/tickets"):
        assert {prefix, f"{prefix}/*"} <= flat


def test_overdue_alarm_and_dashboard_watch_the_lake(synth_lake: Synth) -> None:
    alarm = _overdue(synth_lake)
    lake = [
        m["MetricStat"]["Metric"]
        for m in alarm["Metrics"]
        if "MetricStat" in m and m["MetricStat"]["Metric"]["MetricName"] == c.LAKE_OLDEST_METRIC
    ]
    services = {d["Value"] for m in lake for d in m["Dimensions"]}
    assert services == {"lethe-delete-requests", "lethe-splice"}
    assert all([d["Name"] for d in m["Dimensions"]] == ["service"] for m in lake)
    (board,) = synth_lake.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(board["Properties"]["DashboardBody"])
    assert c.LAKE_PENDING_METRIC in body and c.LAKE_OLDEST_METRIC in body


def test_cdk_nag_is_clean_for_the_lake(synth_lake: Synth) -> None:
    nag = _nag_report(synth_lake)
    assert nag["conclusion"] == "success" and nag["violations"] == []


def test_readme_and_cdk_json_say_how_to_deploy_a_lake() -> None:
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    assert c.CTX_LAKE in readme and c.CTX_ERASURE_WINDOW_SCHEDULE in readme
    context = json.loads((root / "cdk.json").read_text())["context"]
    assert context[c.CTX_LAKE] == c.CONTEXT_DEFAULTS[c.CTX_LAKE] == ""  # no lake by default
