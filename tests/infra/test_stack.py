"""The CDK stack: resources, least privilege, GC workflow, cdk-nag, handlers and layer size.

The app is synthesized once per module with cdk-nag's AwsSolutions checks as a validation
plugin (as ``make synth`` does), and once more with the non-default settings (KMS,
versioning, no access logs). Logical IDs are never spelled out: resources are found by their
properties, or through the construct tree (``stack.get_logical_id``).
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Any use of a deprecated CDK API fails the synth instead of printing a notice (read by the
# jsii kernel when it starts, i.e. on the first aws_cdk import of this process).
os.environ.setdefault("JSII_DEPRECATED", "fail")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
import pychild
from aws_cdk.assertions import Match, Template

from infra import constants as c
from infra.app import build_app
from infra.constructs._nag import acknowledgments
from infra.stack import LetheStack
from layers import build as layer_build

pytestmark = [pytest.mark.cdk, pytest.mark.slow, pytest.mark.xdist_group("cdk")]

ROOT = Path(__file__).resolve().parents[2]
# s3 rights that can remove bytes or enumerate what to remove: GC only. AbortMultipartUpload
# is also given to writers for their *own* failed uploads (DESIGN.md §4.5), see below.
GC_ONLY = {
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:ListBucketVersions",
    "s3:ListBucketMultipartUploads",
}
TABLE = str(c.CONTEXT_DEFAULTS[c.CTX_TABLE_PREFIX])
RETRIED = {"Lambda.TooManyRequestsException", "Lambda.ServiceException", "States.Timeout"}


@dataclass(frozen=True)
class Synth:
    app: cdk.App
    stack: LetheStack
    template: Template
    outdir: Path

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.template.to_json()["Resources"]
        return resources

    def logical_id(self, construct: Any) -> str:
        child = construct.node.default_child if construct.node.default_child else construct
        return str(self.stack.resolve(self.stack.get_logical_id(child)))

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.resources.items() if v["Type"] == type_}

    def layer_ids(self) -> set[str]:
        return {self.logical_id(layer) for layer in self.stack.runtime.layers}

    def functions(self) -> dict[str, dict[str, Any]]:
        """handler -> properties, for Lethe's functions (those with our layers)."""
        ours = {json.dumps({"Ref": i}) for i in self.layer_ids()}
        return {
            f["Properties"]["Handler"]: f["Properties"]
            for f in self.of_type("AWS::Lambda::Function").values()
            if ours <= {json.dumps(x) for x in f["Properties"].get("Layers", [])}
        }

    def statements(self, handler: str) -> list[dict[str, Any]]:
        """All IAM statements attached to the execution role of the function ``handler``."""
        role_id = self.functions()[handler]["Role"]["Fn::GetAtt"][0]
        return self.role_statements(role_id)

    def role_statements(self, role_id: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"]["Roles"]:
                found.extend(policy["Properties"]["PolicyDocument"]["Statement"])
        return found


def _synth(tmp: Path, context: dict[str, object], spark_jobs_dir: Path | None = None) -> Synth:
    # warnings: none are expected from jsii/typeguard today; if one appears, pytest's
    # filterwarnings=error fails here, at its source, rather than in some later test.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        app, stack = build_app(context=context, outdir=str(tmp), spark_jobs_dir=spark_jobs_dir)
        app.synth()
        template = Template.from_stack(stack)  # reuses the assembly synthesized above
    return Synth(app=app, stack=stack, template=template, outdir=tmp)


@pytest.fixture(scope="module")
def layers() -> layer_build.LayerReport:
    """Build (or reuse) the layers: the stack needs their zips as assets."""
    return layer_build.build()


@pytest.fixture(scope="module")
def synth(layers: layer_build.LayerReport, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return _synth(tmp_path_factory.mktemp("cdk-default"), {})


@pytest.fixture(scope="module")
def synth_kms(layers: layer_build.LayerReport, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Non-default settings, and Spark entry points to upload (covers BucketDeployment)."""
    jobs = tmp_path_factory.mktemp("spark_jobs")
    (jobs / c.INGEST_JOB_FILE).write_text("print('ingest')\n")
    (jobs / "compact.py").write_text("print('compact')\n")
    return _synth(
        tmp_path_factory.mktemp("cdk-kms"),
        {
            c.CTX_ENCRYPTION: "kms",
            c.CTX_VERSIONED: "true",
            c.CTX_ACCESS_LOGS: "false",
            c.CTX_SPLICE_CONCURRENCY: "0",
            c.CTX_ALARM_EMAIL: "ops@example.com",
            c.CTX_GC_SCHEDULE: "cron(0 3 * * ? *)",
            c.CTX_ERASURE_ALARM_DAYS: "10",
        },
        spark_jobs_dir=jobs,
    )


# ------------------------------------------------------------------------------- helpers


def render(value: Any) -> str:
    """A CloudFormation value as a readable string: GetAtt/Ref become ``<Id.Attr>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return str(sep).join(render(p) for p in parts)
        if "Fn::GetAtt" in value:
            logical_id, attribute = value["Fn::GetAtt"]
            return f"<{logical_id}.{attribute}>"
        if "Ref" in value:
            return f"<{value['Ref']}>"
    raise AssertionError(f"unexpected CloudFormation value {value!r}")


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """action -> rendered resources, over the Allow statements."""
    out: dict[str, set[str]] = {}
    for st in statements:
        assert st["Effect"] == "Allow"
        for action in as_list(st["Action"]):
            out.setdefault(action, set()).update(render(r) for r in as_list(st["Resource"]))
    return out


def table_keys(synth: Synth, action: str, statements: list[dict[str, Any]]) -> set[str]:
    """Table-relative key patterns ``action`` is allowed on (``data/*``, ``_latest_manifest``)."""
    prefix = f"<{synth.logical_id(synth.stack.storage.bucket)}.Arn>/{TABLE}/"
    resources = grants(statements).get(action, set())
    assert all(r.startswith(prefix) for r in resources), resources
    return {r.removeprefix(prefix) for r in resources}


# ------------------------------------------------------------------------------- resources


def test_resource_counts(synth: Synth) -> None:
    t = synth.template
    assert set(synth.functions()) == set(c.ALL_HANDLERS)  # one function per handler
    t.resource_count_is("AWS::S3::Bucket", 3)  # table, access logs, artifacts
    t.resource_count_is("AWS::SQS::Queue", 6)  # 2 work queues + 2 DLQs + trigger, glue DLQs
    assert len(synth.layer_ids()) == 2  # dependencies + lethe
    t.resource_count_is("AWS::Lambda::EventSourceMapping", 2)
    t.resource_count_is("AWS::StepFunctions::StateMachine", 1)
    t.resource_count_is("AWS::Events::Rule", 1)
    t.resource_count_is("AWS::EMRServerless::Application", 1)
    t.resource_count_is("AWS::CloudWatch::Alarm", 4 + len(c.ALL_HANDLERS) + 1 + 1)
    t.resource_count_is("AWS::CloudWatch::Dashboard", 1)
    t.resource_count_is("AWS::Glue::Database", 1)
    t.resource_count_is("AWS::KMS::Key", 0)


def test_table_bucket_is_private_encrypted_tls_only_unversioned(synth: Synth) -> None:
    bucket_id = synth.logical_id(synth.stack.storage.bucket)
    props = synth.resources[bucket_id]["Properties"]
    assert props["BucketEncryption"] == {
        "ServerSideEncryptionConfiguration": [
            {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}
        ]
    }
    assert props["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert "VersioningConfiguration" not in props  # erasure must remove bytes
    assert props["LoggingConfiguration"]["DestinationBucketName"] == {
        "Ref": synth.logical_id(synth.stack.storage.access_logs)
    }
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["abort-incomplete-multipart-uploads"]["AbortIncompleteMultipartUpload"] == {
        "DaysAfterInitiation": 7
    }
    assert rules["expire-incoming-uploads"]["Prefix"] == c.INCOMING_PREFIX
    assert "expire-noncurrent-versions" not in rules
    synth.template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "Bucket": {"Ref": bucket_id},
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                                "Principal": {"AWS": "*"},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_every_bucket_and_queue_enforces_tls(synth: Synth) -> None:
    for kind, policy_type, ref_key in (
        ("AWS::S3::Bucket", "AWS::S3::BucketPolicy", "Bucket"),
        ("AWS::SQS::Queue", "AWS::SQS::QueuePolicy", "Queues"),
    ):
        secured = set()
        for policy in synth.of_type(policy_type).values():
            statements = policy["Properties"]["PolicyDocument"]["Statement"]
            if any(
                s["Effect"] == "Deny"
                and s.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}
                for s in statements
            ):
                secured.update(render(r) for r in as_list(policy["Properties"][ref_key]))
        assert secured == {f"<{k}>" for k in synth.of_type(kind)}, kind


def test_queues_have_dlqs_and_visibility_of_six_consumer_timeouts(synth: Synth) -> None:
    queues = synth.of_type("AWS::SQS::Queue")
    mappings = synth.of_type("AWS::Lambda::EventSourceMapping").values()
    functions = synth.of_type("AWS::Lambda::Function")
    assert len(mappings) == 2
    for mapping in mappings:
        m = mapping["Properties"]
        queue = queues[m["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]
        fn = functions[m["FunctionName"]["Ref"]]["Properties"]
        window = m.get("MaximumBatchingWindowInSeconds", 0)
        assert queue["VisibilityTimeout"] >= 6 * fn["Timeout"] + window
        assert queue["RedrivePolicy"]["maxReceiveCount"] == 5
        dlq = queues[queue["RedrivePolicy"]["deadLetterTargetArn"]["Fn::GetAtt"][0]]
        assert dlq["Properties"]["SqsManagedSseEnabled"] is True
        assert queue["SqsManagedSseEnabled"] is True
        assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600


def test_event_sources_report_batch_item_failures(synth: Synth) -> None:
    fns = synth.functions()
    ids = {
        h: k
        for k, f in synth.of_type("AWS::Lambda::Function").items()
        for h in [f["Properties"]["Handler"]]
    }
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": ids[c.DELETE_HANDLER]},
            "BatchSize": 100,
            "MaximumBatchingWindowInSeconds": Match.any_value(),
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
        },
    )
    reserved = fns[c.SPLICE_HANDLER]["ReservedConcurrentExecutions"]
    assert 2 <= reserved <= 10  # small: splices must not stampede one table's head
    synth.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": ids[c.SPLICE_HANDLER]},
            "BatchSize": 1,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": reserved},  # never polls into throttles
        },
    )


def test_functions_share_platform_tracing_and_powertools(synth: Synth) -> None:
    layer_refs = [{"Ref": k} for k in synth.layer_ids()]
    for handler, props in synth.functions().items():
        assert props["Runtime"] == f"python{c.LAMBDA_PYTHON_VERSION}", handler
        assert props["Architectures"] == ["arm64"], handler
        assert props["TracingConfig"] == {"Mode": "Active"}, handler
        assert sorted(map(json.dumps, props["Layers"])) == sorted(map(json.dumps, layer_refs))
        env = props["Environment"]["Variables"]
        assert env[c.POWERTOOLS_SERVICE_NAME].startswith("lethe-"), handler
        assert env[c.POWERTOOLS_LOG_LEVEL] == "INFO"
        assert env[c.POWERTOOLS_METRICS_NAMESPACE] == c.METRICS_NAMESPACE
        assert render(env[c.ENV_TABLE_URI]).endswith(f"/{TABLE}"), handler
        assert "LoggingConfig" in props and props["LoggingConfig"]["LogGroup"]


def test_function_specific_environment(synth: Synth) -> None:
    fns = synth.functions()
    splice_queue = synth.logical_id(synth.stack.queues.splice.queue)
    assert fns[c.DELETE_HANDLER]["Environment"]["Variables"][c.ENV_SPLICE_QUEUE_URL] == {
        "Ref": splice_queue
    }
    splice_env = fns[c.SPLICE_HANDLER]["Environment"]["Variables"]
    assert int(splice_env[c.ENV_SPLICE_MAX_BYTES]) == c.CONTEXT_DEFAULTS[c.CTX_SPLICE_MAX_BYTES]
    assert splice_env[c.ENV_SPLICE_QUEUE_URL] == {"Ref": splice_queue}  # re-enqueues itself
    ingest_env = fns[c.INGEST_HANDLER]["Environment"]["Variables"]
    app_id = synth.logical_id(synth.stack.ingest.application)
    assert ingest_env[c.ENV_EMR_APPLICATION_ID] == {"Fn::GetAtt": [app_id, "ApplicationId"]}
    assert ingest_env[c.ENV_EMR_JOB_ROLE_ARN] == {
        "Fn::GetAtt": [synth.logical_id(synth.stack.ingest.job_role), "Arn"]
    }
    assert render(ingest_env[c.ENV_EMR_ENTRY_POINT]).endswith(
        f"/{c.ARTIFACTS_SPARK_JOBS_PREFIX}{c.INGEST_JOB_FILE}"
    )
    assert int(ingest_env[c.ENV_DIRECT_REGISTER_MAX_BYTES]) > 0
    gc_env = fns[c.GC_PLAN_HANDLER]["Environment"]["Variables"]
    assert gc_env[c.ENV_GC_RETENTION] == "30d" and gc_env[c.ENV_GC_GRACE] == "7d"
    assert gc_env[c.ENV_GC_VERSIONED_BUCKET] == "false"


def test_upload_prefix_notifies_ingest_trigger(synth: Synth) -> None:
    trigger = synth.logical_id(synth.stack.ingest.trigger.function)
    synth.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "BucketName": {"Ref": synth.logical_id(synth.stack.storage.bucket)},
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": Match.array_with(
                    [
                        {
                            "Events": ["s3:ObjectCreated:*"],
                            "Filter": {
                                "Key": {"FilterRules": [{"Name": "prefix", "Value": "incoming/"}]}
                            },
                            "LambdaFunctionArn": {"Fn::GetAtt": [trigger, "Arn"]},
                        }
                    ]
                )
            },
        },
    )
    # S3 invokes asynchronously: two retries, then the trigger's dead-letter queue.
    props = synth.functions()[c.INGEST_HANDLER]
    failures = synth.logical_id(synth.stack.ingest.failures)
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": [failures, "Arn"]}}


def test_published_metadata_files_move_the_glue_table(synth: Synth) -> None:
    """The Iceberg view's Glue registration (not exercisable locally beyond moto's Glue:
    checked on the synthesized template)."""
    fn = synth.logical_id(synth.stack.iceberg.register.function)
    synth.template.has_resource_properties(
        "Custom::S3BucketNotifications",
        {
            "NotificationConfiguration": {
                "LambdaFunctionConfigurations": Match.array_with(
                    [
                        {
                            "Events": ["s3:ObjectCreated:*"],
                            "Filter": {
                                "Key": {
                                    "FilterRules": Match.array_with(
                                        [
                                            {"Name": "suffix", "Value": ".metadata.json"},
                                            {"Name": "prefix", "Value": f"{TABLE}/metadata/"},
                                        ]
                                    )
                                }
                            },
                            "LambdaFunctionArn": {"Fn::GetAtt": [fn, "Arn"]},
                        }
                    ]
                )
            }
        },
    )
    synth.template.has_resource_properties(
        "AWS::Glue::Database", {"DatabaseInput": Match.object_like({"Name": c.GLUE_DATABASE})}
    )
    props = synth.functions()[c.ICEBERG_GLUE_HANDLER]
    assert props["Environment"]["Variables"][c.ENV_GLUE_DATABASE] == c.GLUE_DATABASE
    assert props["Environment"]["Variables"][c.ENV_GLUE_TABLE] == TABLE.rsplit("/", 1)[-1]
    failures = synth.logical_id(synth.stack.iceberg.failures)
    assert props["DeadLetterConfig"] == {"TargetArn": {"Fn::GetAtt": [failures, "Arn"]}}
    g = grants(synth.statements(c.ICEBERG_GLUE_HANDLER))
    assert not [a for a in g if a.startswith("s3:")], "it reads no object"
    assert {a for a in g if a.startswith("glue:")} == {
        "glue:GetTable",
        "glue:CreateTable",
        "glue:UpdateTable",
    }
    (tables,) = {frozenset(r for r in g["glue:UpdateTable"])}
    assert any(r.endswith(f":table/{c.GLUE_DATABASE}/{TABLE.rsplit('/', 1)[-1]}") for r in tables)


# ------------------------------------------------------------------------------- IAM


def test_no_wildcard_actions_and_only_table_or_upload_objects(synth: Synth) -> None:
    bucket = f"<{synth.logical_id(synth.stack.storage.bucket)}.Arn>"
    allowed_prefixes = (f"{bucket}/{TABLE}/", f"{bucket}/{c.INCOMING_PREFIX}")
    for handler in c.ALL_HANDLERS:
        for action, resources in grants(synth.statements(handler)).items():
            assert "*" not in action.split(":")[-1] or action.startswith("xray:"), action
            if action.startswith("s3:") and not action.startswith("s3:ListBucket"):
                for r in resources:
                    assert r.startswith(allowed_prefixes), (handler, action, r)


def test_delete_handler_may_commit_but_never_delete(synth: Synth) -> None:
    statements = synth.statements(c.DELETE_HANDLER)
    actions = set(grants(statements))
    assert not actions & (GC_ONLY | {"s3:AbortMultipartUpload"})
    assert table_keys(synth, "s3:PutObject", statements) == {
        "tombstone/*",
        "index/*",  # an erase on an indexed table writes the scrubbed pieces
        "manifest/*",
        "_latest_manifest",
        "metadata/*",  # the Iceberg view, published after commits
    }
    assert table_keys(synth, "s3:GetObject", statements) == {"*"}
    assert "sqs:SendMessage" in actions


# what a splice writes: new data files, DVs, scrubbed index pieces and the commit
SPLICE_WRITES = {"data/*", "tombstone/*", "index/*", "manifest/*", "_latest_manifest"}


def test_splice_worker_writes_data_and_aborts_only_its_uploads(synth: Synth) -> None:
    statements = synth.statements(c.SPLICE_HANDLER)
    assert not set(grants(statements)) & GC_ONLY
    assert table_keys(synth, "s3:PutObject", statements) == SPLICE_WRITES | {"metadata/*"}
    assert table_keys(synth, "s3:AbortMultipartUpload", statements) == {"data/*"}


def test_ingest_trigger_reads_uploads_registers_and_starts_emr(synth: Synth) -> None:
    statements = synth.statements(c.INGEST_HANDLER)
    g = grants(statements)
    assert not set(g) & GC_ONLY
    bucket = f"<{synth.logical_id(synth.stack.storage.bucket)}.Arn>"
    assert f"{bucket}/{c.INCOMING_PREFIX}*" in g["s3:GetObject"]
    assert table_keys(synth, "s3:PutObject", statements) == {
        "data/*",
        "index/*",  # an indexed table's new files get their index runs
        "manifest/*",
        "_latest_manifest",
        "metadata/*",
    }
    app_id = synth.logical_id(synth.stack.ingest.application)
    for action in ("emr-serverless:StartJobRun", "emr-serverless:ListJobRuns"):
        (resource,) = g[action]
        assert app_id in resource and resource.endswith(f"<{app_id}.ApplicationId>")
    job_role = synth.logical_id(synth.stack.ingest.job_role)
    assert g["iam:PassRole"] == {f"<{job_role}.Arn>"}


def test_only_gc_steps_hold_destructive_rights(synth: Synth) -> None:
    gc_handlers = [h for h in c.ALL_HANDLERS if h.startswith(c.GC_MODULE)]
    for handler in c.ALL_HANDLERS:
        held = set(grants(synth.statements(handler))) & GC_ONLY
        if handler not in gc_handlers:
            assert not held, handler
    s = {h: synth.statements(h) for h in gc_handlers}
    assert table_keys(synth, "s3:DeleteObject", s[c.GC_SWEEP_HANDLER]) == {
        "data/*",
        "tombstone/*",
        "_staging/*",
        "index/*",  # index pieces no kept version references (issue 35 item 12)
        "manifest/segments/*",
        "manifest/erasures/*",
        "metadata/*",
        "_gc/*",
    }
    assert table_keys(synth, "s3:DeleteObject", s[c.GC_EXPIRE_HANDLER]) == {"manifest/*", "_gc/*"}
    # expire commits completed erasures out of the root: it alone of the GC steps PUTs it
    assert table_keys(synth, "s3:PutObject", s[c.GC_EXPIRE_HANDLER]) == {
        "manifest/*",
        "_latest_manifest",
        "_gc/*",
    }
    assert table_keys(synth, "s3:PutObject", s[c.GC_SWEEP_HANDLER]) == {"_gc/*"}
    assert table_keys(synth, "s3:DeleteObject", s[c.GC_PLAN_HANDLER]) == {"_gc/*"}
    assert table_keys(synth, "s3:AbortMultipartUpload", s[c.GC_ABORT_HANDLER]) == {"*"}
    assert "s3:ListBucketMultipartUploads" in grants(s[c.GC_ABORT_HANDLER])
    assert table_keys(synth, "s3:ListMultipartUploadParts", s[c.GC_ABORT_HANDLER]) == {"*"}
    assert table_keys(synth, "s3:DeleteObjectVersion", s[c.GC_PURGE_HANDLER]) == {"*"}
    assert "s3:ListBucketVersions" in grants(s[c.GC_PURGE_HANDLER])
    for handler in (c.GC_PLAN_HANDLER, c.GC_RECORD_FAILURE_HANDLER):
        assert not set(grants(s[handler])) & (GC_ONLY - {"s3:DeleteObject"}), handler
    # the report recounts what a listing of every version still shows (issue 35 item 13)
    assert set(grants(s[c.GC_REPORT_HANDLER])) & (GC_ONLY - {"s3:DeleteObject"}) == {
        "s3:ListBucketVersions"
    }


def test_gc_retention_step_writes_an_erasure_and_deletes_nothing(synth: Synth) -> None:
    """The row-retention sweep splices and commits like the splice worker (plus index pieces,
    which it scrubs), holds no destructive right and no GC workspace right."""
    statements = synth.statements(c.GC_RETENTION_HANDLER)
    g = grants(statements)
    assert not set(g) & GC_ONLY
    assert table_keys(synth, "s3:PutObject", statements) == SPLICE_WRITES
    assert table_keys(synth, "s3:AbortMultipartUpload", statements) == {"data/*"}
    assert table_keys(synth, "s3:ListMultipartUploadParts", statements) == {"data/*"}
    assert table_keys(synth, "s3:GetObject", statements) == {"*"}
    assert not any(a.startswith(("sqs:", "states:", "lambda:")) for a in g)


def test_list_bucket_is_conditioned_on_the_table_prefix(synth: Synth) -> None:
    for handler in c.ALL_HANDLERS:
        for st in synth.statements(handler):
            if any(str(a).startswith("s3:ListBucket") for a in as_list(st["Action"])):
                prefixes = st["Condition"]["StringLike"]["s3:prefix"]
                assert all(p.startswith((TABLE, c.INCOMING_PREFIX)) for p in prefixes)


def test_emr_job_role_is_bound_to_the_application_and_cannot_delete_table_data(
    synth: Synth,
) -> None:
    job_role = synth.logical_id(synth.stack.ingest.job_role)
    trust = synth.resources[job_role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust[0]["Principal"] == {"Service": c.EMR_SERVICE_PRINCIPAL}
    assert "aws:SourceArn" in trust[0]["Condition"]["ArnLike"]
    statements = synth.role_statements(job_role)
    assert table_keys(synth, "s3:DeleteObject", statements) == {"_staging/*"}
    assert not set(grants(statements)) & (GC_ONLY - {"s3:DeleteObject"})


# ------------------------------------------------------------------------------- GC workflow


def _definition(synth: Synth) -> tuple[dict[str, Any], dict[str, str]]:
    """The state machine's ASL, with each Lambda task's Resource mapped to its handler."""
    (machine,) = synth.of_type("AWS::StepFunctions::StateMachine").values()
    asl = render(machine["Properties"]["DefinitionString"])
    handlers = {
        f"<{k}.Arn>": f["Properties"]["Handler"]
        for k, f in synth.of_type("AWS::Lambda::Function").items()
    }
    return json.loads(asl), handlers


def test_gc_workflow_states_retry_and_catch(synth: Synth) -> None:
    asl, handlers = _definition(synth)
    # Match.serialized_json over the rendered definition (GetAtt rendered as <Id.Arn>).
    Template.from_json(
        {"Resources": {"Sm": {"Type": "Test::Asl", "Properties": {"D": json.dumps(asl)}}}}
    ).has_resource_properties(
        "Test::Asl",
        {
            "D": Match.serialized_json(
                Match.object_like(
                    {
                        "StartAt": "Retention",
                        "States": Match.object_like(
                            {
                                "Retention": Match.object_like(
                                    {
                                        "Type": "Task",
                                        "Next": "Plan",
                                        "ResultPath": "$.row_retention",
                                    }
                                ),
                                "Plan": Match.object_like(
                                    {"Type": "Task", "Next": "SweepBatches", "ResultPath": "$.plan"}
                                ),
                                "SweepBatches": Match.object_like(
                                    {
                                        "Type": "Map",
                                        "ItemsPath": "$.plan.batches",
                                        "MaxConcurrency": 8,
                                        "ResultPath": None,
                                        "ItemSelector": {
                                            "run_id.$": "$.plan.run_id",
                                            "dry_run.$": "$.plan.dry_run",
                                            "batch_key.$": "$$.Map.Item.Value",
                                        },
                                        "Next": "Compact",
                                    }
                                ),
                                "Compact": Match.object_like(
                                    {
                                        "Type": "Pass",
                                        "Next": "Expire",
                                        "Parameters": {
                                            "row_retention.$": "$.row_retention",
                                            "table.$": "$.plan.table",
                                            "run_id.$": "$.plan.run_id",
                                            "dry_run.$": "$.plan.dry_run",
                                        },
                                    }
                                ),
                                "Expire": Match.object_like({"Type": "Task", "Next": "Abort"}),
                                "Abort": Match.object_like({"Type": "Task", "Next": "Purge"}),
                                "Purge": Match.object_like({"Type": "Task", "Next": "Report"}),
                                "Report": Match.object_like({"Type": "Task", "Next": "Done"}),
                                "Done": {"Type": "Succeed"},
                                "RecordFailure": Match.object_like(
                                    {"Type": "Task", "Next": "Failed"}
                                ),
                                "Failed": Match.object_like({"Type": "Fail"}),
                            }
                        ),
                    }
                )
            )
        },
    )
    states = dict(asl["States"])
    states.update(asl["States"]["SweepBatches"]["ItemProcessor"]["States"])
    expected = {
        "Retention": c.GC_RETENTION_HANDLER,
        "Plan": c.GC_PLAN_HANDLER,
        "Sweep": c.GC_SWEEP_HANDLER,
        "Expire": c.GC_EXPIRE_HANDLER,
        "Abort": c.GC_ABORT_HANDLER,
        "Purge": c.GC_PURGE_HANDLER,
        "Report": c.GC_REPORT_HANDLER,
        "RecordFailure": c.GC_RECORD_FAILURE_HANDLER,
    }
    for name, handler in expected.items():
        state = states[name]
        # Plain Task states on the function ARN (runnable by moto's interpreter as is).
        assert handlers[state["Resource"]] == handler, name
        (retry,) = state["Retry"]
        assert set(retry["ErrorEquals"]) >= RETRIED, name
        assert retry["BackoffRate"] > 1 and retry["MaxAttempts"] >= 3, name
        assert state["TimeoutSeconds"] > c.GC_TIMEOUT_SECONDS, name
    for name in ("Retention", "Plan", "SweepBatches", "Expire", "Abort", "Purge", "Report"):
        (catch,) = states[name]["Catch"]
        assert catch == {
            "ErrorEquals": ["States.ALL"],
            "ResultPath": "$.error",
            "Next": "RecordFailure",
        }
    assert states["RecordFailure"]["Catch"][0]["Next"] == "Failed"


def test_gc_workflow_is_traced_logged_and_scheduled(synth: Synth) -> None:
    machine_id = synth.logical_id(synth.stack.gc.state_machine)
    synth.template.has_resource_properties(
        "AWS::StepFunctions::StateMachine",
        {
            "TracingConfiguration": {"Enabled": True},
            "LoggingConfiguration": Match.object_like(
                {"Level": "ALL", "IncludeExecutionData": False}
            ),
        },
    )
    synth.template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "ScheduleExpression": "rate(1 day)",
            "State": "ENABLED",
            "Targets": [
                Match.object_like(
                    {
                        "Arn": {"Ref": machine_id},
                        "Input": Match.serialized_json({"dry_run": False}),
                    }
                )
            ],
        },
    )


# ------------------------------------------------------------------------------- EMR, alarms


def test_emr_serverless_application(synth: Synth) -> None:
    synth.template.has_resource_properties(
        "AWS::EMRServerless::Application",
        {
            "Type": "SPARK",
            "ReleaseLabel": c.EMR_RELEASE_LABEL,
            "Architecture": "ARM64",
            "AutoStartConfiguration": {"Enabled": True},
            "AutoStopConfiguration": {"Enabled": True, "IdleTimeoutMinutes": 15},
            "MaximumCapacity": {"Cpu": "32 vCPU", "Memory": "128 GB", "Disk": Match.any_value()},
        },
    )


def test_alarms_on_dead_letters_errors_and_failed_runs(synth: Synth) -> None:
    everything = [a["Properties"] for a in synth.of_type("AWS::CloudWatch::Alarm").values()]
    alarms = [a for a in everything if "MetricName" in a]
    assert len(everything) == len(alarms) + 1  # + the overdue-erasure alarm (metric math)
    topic = synth.logical_id(synth.stack.monitoring.topic)
    for alarm in alarms:
        assert alarm["Threshold"] == 0
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["AlarmActions"] == [{"Ref": topic}]
    by_metric: dict[str, int] = {}
    for alarm in alarms:
        by_metric[alarm["MetricName"]] = by_metric.get(alarm["MetricName"], 0) + 1
    assert by_metric == {
        "ApproximateNumberOfMessagesVisible": 4,
        "Errors": len(c.ALL_HANDLERS),
        "ExecutionsFailed": 1,
    }


def _overdue(synth: Synth) -> dict[str, Any]:
    (alarm,) = [
        a["Properties"]
        for a in synth.of_type("AWS::CloudWatch::Alarm").values()
        if "Metrics" in a["Properties"]
    ]
    return alarm


@pytest.mark.parametrize(("variant", "days"), [("synth", 25), ("synth_kms", 10)])
def test_alarm_on_the_oldest_pending_erasure(
    variant: str, days: int, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    alarm = _overdue(synth)
    assert alarm["Threshold"] == days * 86400
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
    assert alarm["TreatMissingData"] == "notBreaching"
    assert alarm["AlarmActions"] == [{"Ref": synth.logical_id(synth.stack.monitoring.topic)}]
    (expr,) = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expr["ReturnData"] is True and expr["Expression"].startswith("MAX([")
    sources = [m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m]
    # a table's oldest erasure, or the lake's oldest request (delete handler, window run)
    assert {s["Metric"]["MetricName"] for s in sources} == {
        "OldestPendingErasureAge",
        c.LAKE_OLDEST_METRIC,
    }
    assert all(s["Metric"]["Namespace"] == c.METRICS_NAMESPACE for s in sources)
    services = {
        d["Value"] for s in sources for d in s["Metric"]["Dimensions"] if d["Name"] == "service"
    }
    assert services == {"lethe-delete-requests", "lethe-splice", "lethe-gc"}
    assert all(s["Stat"] == "Maximum" for s in sources)


def test_dashboard_shows_commits_erasures_and_dead_letters(synth: Synth) -> None:
    Template.from_stack(synth.stack).has_resource_properties(
        "AWS::CloudWatch::Dashboard",
        {
            "DashboardBody": Match.object_like(
                {
                    "Fn::Join": Match.array_with(
                        [Match.array_with([Match.string_like_regexp("CommitLatency")])]
                    )
                }
            )
        },
    )
    (board,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(board["Properties"]["DashboardBody"])
    for metric in (
        "CommitLatency",
        "CasAttempts",
        "RowsDeleted",
        "RowsErased",
        "PendingErasures",
        "OldestPendingErasureAge",
        c.LAKE_PENDING_METRIC,
        c.LAKE_OLDEST_METRIC,
        "ApproximateNumberOfMessagesVisible",
    ):
        assert metric in body, metric
    assert str(25 * 86400) in body  # the alarm line


def test_outputs(synth: Synth) -> None:
    outputs = synth.template.to_json()["Outputs"]
    for name in (
        "TableBucketName",
        "TableUri",
        "DeleteQueueUrl",
        "DeleteDeadLetterQueueUrl",
        "SpliceQueueUrl",
        "SpliceDeadLetterQueueUrl",
        "GcStateMachineArn",
        "EmrApplicationId",
        "ArtifactsBucketName",
        "AlarmTopicArn",
    ):
        assert name in outputs, name
    assert outputs["GcStateMachineArn"]["Value"] == {
        "Ref": synth.logical_id(synth.stack.gc.state_machine)
    }


# ------------------------------------------------------------------------------- cdk-nag


def _nag_report(synth: Synth) -> dict[str, Any]:
    report = json.loads((synth.outdir / "validation-report.json").read_text())
    (nag,) = [p for p in report["pluginReports"] if p["pluginName"] == "AwsSolutions"]
    return dict(nag)


@pytest.mark.parametrize("variant", ["synth", "synth_kms"])
def test_cdk_nag_has_no_unacknowledged_findings(
    variant: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(variant)
    nag = _nag_report(synth)
    assert nag["conclusion"] == "success"
    assert nag["violations"] == []
    assert nag["suppressedViolations"], "the checks ran"
    for finding in nag["suppressedViolations"]:
        assert len(finding["reason"].strip()) >= 20, finding["ruleName"]
    recorded = acknowledgments(synth.app)
    assert recorded and all(len(reason) >= 20 for _, _, reason in recorded)
    used = {(f["acknowledgedAt"], f["acknowledgedId"]) for f in nag["suppressedViolations"]}
    unused = [(path, ack) for path, ack, _ in recorded if (path, ack) not in used]
    assert not unused, f"acknowledgments that match no finding: {unused}"


def test_kms_versioned_variant(synth_kms: Synth) -> None:
    s = synth_kms
    s.template.resource_count_is("AWS::KMS::Key", 1)
    s.template.resource_count_is("AWS::S3::Bucket", 2)  # no access-log bucket
    key = s.logical_id(s.stack.key)
    props = s.resources[s.logical_id(s.stack.storage.bucket)]["Properties"]
    (sse,) = props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert sse["ServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": {"Fn::GetAtt": [key, "Arn"]},
    }
    assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    rules = {r["Id"]: r for r in props["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-noncurrent-versions"]["NoncurrentVersionExpiration"] == {
        "NoncurrentDays": 1
    }
    for queue in s.of_type("AWS::SQS::Queue").values():
        assert queue["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    fns = s.functions()
    assert "ReservedConcurrentExecutions" not in fns[c.SPLICE_HANDLER]
    assert fns[c.GC_PURGE_HANDLER]["Environment"]["Variables"][c.ENV_GC_VERSIONED_BUCKET] == "true"
    s.template.has_resource_properties(
        "AWS::Events::Rule", {"ScheduleExpression": "cron(0 3 * * ? *)"}
    )
    s.template.has_resource_properties("AWS::SNS::Subscription", {"Protocol": "email"})
    # The job scripts go to the artifacts bucket, under spark_jobs/ only (prune stays there).
    s.template.has_resource_properties(
        "Custom::CDKBucketDeployment",
        {
            "DestinationBucketName": {"Ref": s.logical_id(s.stack.ingest.artifacts)},
            "DestinationBucketKeyPrefix": c.ARTIFACTS_SPARK_JOBS_PREFIX,
            "Prune": True,
        },
    )
    # KMS rights are the two an SSE-KMS client needs, never wildcards.
    for handler in c.ALL_HANDLERS:
        kms_actions = {a for a in grants(s.statements(handler)) if a.startswith("kms:")}
        assert kms_actions <= {"kms:Decrypt", "kms:GenerateDataKey"}, handler


# ------------------------------------------------------------------------------- handlers


def _dummy(value: Any) -> str:
    """A plausible runtime value for a CloudFormation environment value."""
    text = render(value)
    return text.replace("<", "x").replace(">", "x").replace(".", "-")


@pytest.mark.parametrize("handler", c.ALL_HANDLERS)
def test_handler_resolves_to_a_python_function(synth: Synth, handler: str) -> None:
    """Every Handler string in the template imports from functions/ (with the layer libs).

    Imported in a fresh interpreter with the function's environment from the template,
    because handler modules read their settings at import (cold start).
    """
    props = synth.functions()[handler]
    module, _, attr = handler.rpartition(".")
    env = {k: _dummy(v) for k, v in props["Environment"]["Variables"].items()}
    env[c.ENV_TABLE_URI] = "s3://example-bucket/tables/main"
    env.update(
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_METRICS_DISABLED="true",
        PATH=os.environ.get("PATH", ""),
        PYTHONPATH=os.pathsep.join([str(ROOT / c.FUNCTIONS_DIR), str(ROOT / "shared")]),
    )
    code = (
        "import importlib, inspect, sys\n"
        f"m = importlib.import_module({module!r})\n"
        f"f = getattr(m, {attr!r}, None)\n"
        "assert callable(f), f'{f!r} is not callable'\n"
        "print(inspect.signature(inspect.unwrap(f)))\n"
    )
    proc = pychild.run_python(code, env=env, timeout=120)
    assert pychild.ok(proc), f"{handler}: {pychild.explain(proc)}"
    assert "(" in pychild.output(proc)


# ------------------------------------------------------------------------------- layers


def test_layers_fit_lambda_quota() -> None:
    report = layer_build.verify()  # re-measures the trees and zips under the build lock
    assert report.total_unzipped_bytes <= c.LAMBDA_UNZIPPED_LIMIT_BYTES, report.summary()
    assert report.python_version == c.LAMBDA_PYTHON_VERSION
    packages = {p.rsplit("-", 1)[0].lower() for p in report.deps.packages}
    assert {
        "pyarrow",
        "pyroaring",
        "pydantic",
        "pydantic_settings",
        "aws_lambda_powertools",
        "boto3",
    } <= packages
    assert not packages & {"pyspark", "aws_cdk_lib", "pytest", "moto"}  # runtime deps only
    site = layer_build.DEPS_DIR / "python"
    assert not list(site.rglob("__pycache__")) and not list(site.rglob("*.pyi"))
    assert not (site / "pyarrow" / "include").exists()
    assert not list(site.glob("pyarrow/libarrow_flight.so*"))
    assert (layer_build.LIB_DIR / "python" / "lethe" / "__init__.py").is_file()


def test_stripped_layer_still_imports(tmp_path: Path) -> None:
    """The strip rules, applied to the same locked wheels for *this* interpreter, leave an
    importable tree (the aarch64 layer itself cannot run here)."""
    import platform
    import sysconfig

    arch = platform.machine()
    libc, libc_version = platform.libc_ver()
    glibc = tuple(int(x) for x in libc_version.split(".")[:2]) if libc == "glibc" else (0, 0)
    if arch not in ("x86_64", "aarch64") or glibc < (2, 28):
        pytest.skip(f"needs an x86_64/aarch64 host with glibc >= 2.28, not {libc} {arch}")
    target = layer_build.Target(
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
        wheel_platform=f"{arch}-manylinux_2_28",  # what the locked pyarrow needs
        extension_suffix=str(sysconfig.get_config_var("EXT_SUFFIX")),
        glibc=libc_version,
    )
    site = tmp_path / "python"
    layer_build.assemble_deps(site, target, requirements=tmp_path / "requirements.txt")
    layer_build.assemble_lib(tmp_path / "lib")
    functions = ROOT / c.FUNCTIONS_DIR
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(site)!r}, {str(tmp_path / 'lib')!r}, {str(functions)!r}]\n"
        "import pyarrow as pa, pyarrow.parquet as pq, pyarrow.compute as pc, io\n"
        "import pyroaring, pydantic, boto3, lethe\n"
        "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
        "from aws_lambda_powertools.utilities.batch import BatchProcessor\n"
        "import _settings\n"  # the functions' settings (pydantic-settings) import too
        "assert _settings.SpliceSettings.from_env({}).max_bytes > 0\n"
        "buf = io.BytesIO()\n"
        "pq.write_table(pa.table({'id': list(range(100))}), buf, write_page_index=True)\n"
        "assert pq.read_table(io.BytesIO(buf.getvalue())).num_rows == 100\n"
        "assert pa.__file__.startswith(sys.path[0]) and lethe.__file__.startswith(sys.path[1])\n"
    )
    proc = pychild.run_python(
        code,
        flags=["-S"],  # -S: nothing from the venv's site-packages
        timeout=300,
        env={"PATH": os.environ.get("PATH", ""), "POWERTOOLS_TRACE_DISABLED": "true"},
    )
    assert pychild.ok(proc), pychild.explain(proc)
