"""Data adopted in place (issue 28): context ``lethe:adopt`` sets the upload trigger's adopt
settings, notifies it of new objects under the adopted prefixes (an external pipeline writes
on), grants read there to exactly the functions that read data files, and ``s3:DeleteObject``
to GC's sweep alone and only with ownership. Logical ids are never spelled out; cdk-nag
stays clean; the single-table template is untouched without the key (tests/infra/
test_stack.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra import constants as c
from layers import build as layer_build
from tests.infra.test_stack import Synth, _nag_report, _synth, grants, render

pytestmark = [pytest.mark.cdk, pytest.mark.slow, pytest.mark.xdist_group("cdk")]

OWNED = {
    "prefixes": ["s3://raw-bkt/raw/events", "s3://landing-bkt/firehose/clicks/"],
    "inPlace": True,
    "ownership": True,
}
READ_ONLY = {"prefixes": ["s3://raw-bkt/raw/events"], "ownership": False}
EVENTS = "arn:<AWS::Partition>:s3:::raw-bkt/raw/events/"
CLICKS = "arn:<AWS::Partition>:s3:::landing-bkt/firehose/clicks/"
BUCKETS = ("raw-bkt", "landing-bkt")
READERS = (
    c.DELETE_HANDLER,
    c.SPLICE_HANDLER,
    c.INGEST_HANDLER,
    c.GC_PLAN_HANDLER,
    c.GC_RETENTION_HANDLER,
    c.GC_PURGE_HANDLER,
    c.GC_REPORT_HANDLER,
)


@pytest.fixture(scope="module")
def layers() -> layer_build.LayerReport:
    return layer_build.build()


@pytest.fixture(scope="module")
def owned(layers: layer_build.LayerReport, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(tmp_path_factory.mktemp("cdk-adopt"), {c.CTX_ADOPT: json.dumps(OWNED)})


@pytest.fixture(scope="module")
def read_only(layers: layer_build.LayerReport, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(tmp_path_factory.mktemp("cdk-adopt-ro"), {c.CTX_ADOPT: json.dumps(READ_ONLY)})


def adopted_keys(statements: list[dict[str, Any]], action: str) -> dict[str, set[str]]:
    """Per adopted prefix, the keys ``action`` is allowed on (relative to it)."""
    out: dict[str, set[str]] = {}
    for r in grants(statements).get(action, set()):
        for name, base in (("events", EVENTS), ("clicks", CLICKS)):
            if r.startswith(base):
                out.setdefault(name, set()).add(r.removeprefix(base))
    return out


def every_role(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    """Role logical id -> its statements naming objects of the adopted buckets, over every
    IAM policy of the stack (CDK's own handlers' statements included)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for policy in synth.of_type("AWS::IAM::Policy").values():
        named = [
            st
            for st in policy["Properties"]["PolicyDocument"]["Statement"]
            if any(f":s3:::{b}/" in json.dumps(st.get("Resource")) for b in BUCKETS)
        ]
        for role in policy["Properties"]["Roles"]:
            out.setdefault(role["Ref"], []).extend(named)
    return out


def test_trigger_adopts_in_place_and_is_notified_of_the_adopted_prefixes(owned: Synth) -> None:
    env = owned.functions()[c.INGEST_HANDLER]["Environment"]["Variables"]
    assert env[c.ENV_ADOPT_IN_PLACE] == "true" and env[c.ENV_ADOPT_OWNERSHIP] == "true"
    assert env[c.ENV_ADOPT_PREFIXES] == ",".join(OWNED["prefixes"]).rstrip("/")
    trigger = owned.logical_id(owned.stack.ingest.trigger.function)
    for bucket, prefix in (("raw-bkt", "raw/events/"), ("landing-bkt", "firehose/clicks/")):
        owned.template.has_resource_properties(
            "Custom::S3BucketNotifications",
            {
                "BucketName": bucket,
                "Managed": False,  # a bucket the stack does not own: merged, not replaced
                "NotificationConfiguration": {
                    "LambdaFunctionConfigurations": [
                        Match.object_like(
                            {
                                "Events": ["s3:ObjectCreated:*"],
                                "Filter": {
                                    "Key": {"FilterRules": [{"Name": "prefix", "Value": prefix}]}
                                },
                                "LambdaFunctionArn": {"Fn::GetAtt": [trigger, "Arn"]},
                            }
                        )
                    ]
                },
            },
        )
    owned.template.has_resource_properties(
        "AWS::Lambda::Permission",
        {
            "FunctionName": {"Fn::GetAtt": [trigger, "Arn"]},
            "Principal": "s3.amazonaws.com",
            "SourceArn": Match.object_like({"Fn::Join": Match.any_value()}),
        },
    )


def test_readers_read_the_adopted_prefixes_and_only_sweep_deletes(owned: Synth) -> None:
    for handler in READERS:
        st = owned.statements(handler)
        assert adopted_keys(st, "s3:GetObject") == {"events": {"*"}, "clicks": {"*"}}, handler
        assert adopted_keys(st, "s3:DeleteObject") == {}, handler
    job = owned.role_statements(owned.logical_id(owned.stack.ingest.job_role))
    assert adopted_keys(job, "s3:GetObject") == {"events": {"*"}, "clicks": {"*"}}
    sweep = owned.statements(c.GC_SWEEP_HANDLER)
    assert adopted_keys(sweep, "s3:DeleteObject") == {"events": {"*"}, "clicks": {"*"}}
    purge = owned.statements(c.GC_PURGE_HANDLER)  # every version of superseded originals
    assert adopted_keys(purge, "s3:DeleteObjectVersion") == {"events": {"*"}, "clicks": {"*"}}
    sweep_role = owned.functions()[c.GC_SWEEP_HANDLER]["Role"]["Fn::GetAtt"][0]
    for role, statements in every_role(owned).items():
        assert not adopted_keys(statements, "s3:PutObject"), role  # nobody writes there
        if role != sweep_role:
            assert not adopted_keys(statements, "s3:DeleteObject"), role
    listed = [
        st["Condition"]["StringLike"]["s3:prefix"]
        for st in owned.statements(c.SPLICE_HANDLER)
        if st["Action"] == "s3:ListBucket"
    ]
    assert ["raw/events", "raw/events/*"] in listed


def test_uploads_adopted_in_place_do_not_expire_and_sweep_may_delete_them(owned: Synth) -> None:
    bucket = owned.logical_id(owned.stack.storage.bucket)
    rules = owned.resources[bucket]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert [r["Id"] for r in rules] == ["abort-incomplete-multipart-uploads"]
    incoming = f"<{bucket}.Arn>/{c.INCOMING_PREFIX}*"
    sweep = grants(owned.statements(c.GC_SWEEP_HANDLER))
    assert incoming in sweep["s3:DeleteObject"]
    for handler in READERS:
        assert incoming in grants(owned.statements(handler))["s3:GetObject"], handler
    for handler in (c.DELETE_HANDLER, c.SPLICE_HANDLER, c.INGEST_HANDLER):
        assert incoming not in grants(owned.statements(handler)).get("s3:DeleteObject", set())


def test_a_read_only_adoption_grants_no_delete_and_keeps_the_expiry(read_only: Synth) -> None:
    env = read_only.functions()[c.INGEST_HANDLER]["Environment"]["Variables"]
    assert (env[c.ENV_ADOPT_IN_PLACE], env[c.ENV_ADOPT_OWNERSHIP]) == ("false", "false")
    for role, statements in every_role(read_only).items():
        assert not adopted_keys(statements, "s3:DeleteObject"), role
    for handler in READERS:
        assert adopted_keys(read_only.statements(handler), "s3:GetObject") == {"events": {"*"}}
    bucket = read_only.logical_id(read_only.stack.storage.bucket)
    rules = read_only.resources[bucket]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert "expire-incoming-uploads" in [r["Id"] for r in rules]
    incoming = f"<{bucket}.Arn>/{c.INCOMING_PREFIX}*"
    deletes = grants(read_only.statements(c.GC_SWEEP_HANDLER))["s3:DeleteObject"]
    assert incoming not in deletes and all(render(d) for d in deletes)


@pytest.mark.parametrize("variant", ["owned", "read_only"])
def test_cdk_nag_is_clean_with_adopted_data(variant: str, request: pytest.FixtureRequest) -> None:
    synth: Synth = request.getfixturevalue(variant)
    nag = _nag_report(synth)
    assert nag["conclusion"] == "success" and nag["violations"] == []


def test_adopters_and_gc_plan_write_ownership_markers(owned: Synth) -> None:
    """issue 35 item 2: ownership markers (``_lethe/owners/`` of each adopted bucket, and of
    the table's bucket for uploads adopted in place) are read and written by whoever adopts
    (upload trigger, EMR job role) and by GC's plan (it claims an unmarked original before
    its sweep deletes it); the delete handler, the splice worker and the sweep never write them."""
    for bucket in BUCKETS:
        marker = f"arn:<AWS::Partition>:s3:::{bucket}/_lethe/owners/*"
        for handler in (c.INGEST_HANDLER, c.GC_PLAN_HANDLER):
            g = grants(owned.statements(handler))
            assert marker in g["s3:PutObject"] and marker in g["s3:GetObject"], handler
        job = grants(owned.role_statements(owned.logical_id(owned.stack.ingest.job_role)))
        assert marker in job["s3:PutObject"]
        for handler in (c.DELETE_HANDLER, c.SPLICE_HANDLER, c.GC_SWEEP_HANDLER):
            assert marker not in grants(owned.statements(handler)).get("s3:PutObject", set())
    listed = [
        st["Condition"]["StringLike"]["s3:prefix"]
        for st in owned.statements(c.INGEST_HANDLER)
        if st["Action"] == "s3:ListBucket" and "Condition" in st
    ]
    assert ["_lethe/owners", "_lethe/owners/*"] in listed
