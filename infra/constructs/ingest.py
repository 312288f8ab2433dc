"""Ingest: uploads under ``incoming/`` trigger a function that registers or hands off to EMR.

* EMR Serverless application (Spark, ARM64, auto-start/auto-stop, capped capacity) and the job
  execution role, limited to the table bucket (uploads, the table prefix) and the artifacts.
* Artifacts bucket: ``spark_jobs/*.py`` entry points are uploaded at deploy time with
  ``aws_s3_deployment`` (its handler and AWS CLI layer ship inside aws-cdk-lib, no Docker);
  the job archive (``lethe`` + dependencies for EMR's Python) is uploaded by the deploy step
  documented in ``docs/deploy.md`` to ``ARTIFACTS_JOB_ARCHIVE_KEY``.
  A separate bucket, so that neither the CloudFormation deployment handler (which prunes its
  prefix) nor anything else with artifact rights can touch table data.
* Ingest trigger (``ingest_trigger.handler.handler``) on S3 ObjectCreated under ``incoming/``:
  registers a ready Parquet file up to ``LETHE_DIRECT_REGISTER_MAX_BYTES`` itself, otherwise
  starts an EMR Serverless job run. S3 invokes it asynchronously: after two retries a failed
  event lands in a dead-letter queue (alarmed) instead of vanishing.
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_emrserverless as emr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sqs as sqs
from constructs import Construct, IConstruct

from infra import constants as c
from infra.constructs._nag import acknowledge, arn_ref
from infra.constructs.base import Foundation
from infra.constructs.queues import queue_encryption
from infra.constructs.runtime import LetheFunction, ObjectCreated
from infra.constructs.storage import private_bucket

EMR_WRITE_KEYS = (
    c.DATA_PREFIX + "*",
    c.TOMBSTONE_PREFIX + "*",
    c.MANIFEST_PREFIX + "*",
    c.HEAD_KEY,
    c.STAGING_PREFIX + "*",
    c.METADATA_PREFIX + "*",  # the Iceberg view, published after commits
    c.INDEX_PREFIX + "*",  # an indexed table's new files get their index runs
)
TRIGGER_WRITE_KEYS = (
    c.DATA_PREFIX + "*",
    c.INDEX_PREFIX + "*",
    c.MANIFEST_PREFIX + "*",
    c.HEAD_KEY,
    c.METADATA_PREFIX + "*",
)


def spark_entry_points(directory: Path) -> list[str]:
    """The ``*.py`` job entry points found in ``spark_jobs/`` (sorted)."""
    return sorted(p.name for p in directory.glob("*.py") if not p.name.startswith("_"))


def _asset_bucket_objects(stack: cdk.Stack) -> str:
    """How cdk-nag spells the CDK bootstrap asset bucket's objects in a finding id."""
    qualifier = (
        stack.node.try_get_context("@aws-cdk/core:bootstrapQualifier")
        or cdk.DefaultStackSynthesizer.DEFAULT_QUALIFIER
    )
    concrete = not cdk.Token.is_unresolved(stack.region)
    partition = stack.partition if concrete else "<AWS::Partition>"
    account = stack.account if not cdk.Token.is_unresolved(stack.account) else "<AWS::AccountId>"
    region = stack.region if concrete else "<AWS::Region>"
    return f"arn:{partition}:s3:::cdk-{qualifier}-assets-{account}-{region}/*"


TRIGGER_ABOUT = (
    "Registers an uploaded Parquet file in the table, or starts an EMR "
    "Serverless ingest job for larger or non-Parquet uploads."
)


class Ingest(Construct):
    """EMR Serverless application, job role, artifacts, ingest trigger and its notification.

    Attributes:
        application: the EMR Serverless application.
        job_role: the job execution role passed to StartJobRun.
        artifacts: the artifacts bucket.
        trigger: the ingest trigger function.
        failures: dead-letter queue of S3 events the trigger could not handle.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, base: Foundation, spark_jobs_dir: Path
    ) -> None:
        super().__init__(scope, construct_id)
        runtime, storage, config = base.runtime, base.storage, base.config
        encryption_key = storage.encryption_key
        stack = cdk.Stack.of(self)

        # ---------------------------------------------------------------- artifacts
        self.artifacts = private_bucket(
            self,
            "Artifacts",
            encryption_key=encryption_key,
            access_logs=storage.access_logs,
            access_log_prefix="artifacts-bucket/",
            unlogged="Server access logging was switched off by the operator; this bucket "
            "holds only code (job scripts and the job archive), no table data.",
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        entry_points = spark_entry_points(spark_jobs_dir)
        if entry_points:
            s3deploy.BucketDeployment(
                self,
                "SparkJobs",
                destination_bucket=self.artifacts,
                destination_key_prefix=c.ARTIFACTS_SPARK_JOBS_PREFIX,
                sources=[
                    s3deploy.Source.asset(str(spark_jobs_dir), exclude=list(c.ASSET_EXCLUDES))
                ],
                prune=True,  # only under spark_jobs/: the job archive is not touched
                memory_limit=256,
            )
            self._acknowledge_deployment_handler(stack, kms=encryption_key is not None)
        else:
            cdk.Annotations.of(self).add_warning_v2(
                "lethe:no-spark-jobs",
                f"{spark_jobs_dir.name}/ has no *.py entry points yet: nothing is uploaded to "
                f"s3://<artifacts>/{c.ARTIFACTS_SPARK_JOBS_PREFIX}",
            )
        self.entry_point_uri = (
            f"s3://{self.artifacts.bucket_name}/{c.ARTIFACTS_SPARK_JOBS_PREFIX}{c.INGEST_JOB_FILE}"
        )
        self.job_archive_uri = f"s3://{self.artifacts.bucket_name}/{c.ARTIFACTS_JOB_ARCHIVE_KEY}"

        # ---------------------------------------------------------------- EMR Serverless
        self.application = emr.CfnApplication(
            self,
            "Spark",
            name=f"{stack.stack_name}-spark",
            release_label=c.EMR_RELEASE_LABEL,
            type=c.EMR_APPLICATION_TYPE,
            architecture=c.EMR_ARCHITECTURE,
            auto_start_configuration=emr.CfnApplication.AutoStartConfigurationProperty(
                enabled=True
            ),
            auto_stop_configuration=emr.CfnApplication.AutoStopConfigurationProperty(
                enabled=True, idle_timeout_minutes=config.emr_idle_timeout_minutes
            ),
            maximum_capacity=emr.CfnApplication.MaximumAllowedResourcesProperty(
                cpu=f"{config.emr_max_vcpu} vCPU",
                memory=f"{config.emr_max_vcpu * 4} GB",
                disk=f"{config.emr_max_vcpu * 20} GB",
            ),
        )
        application_arn = stack.format_arn(
            service="emr-serverless",
            resource="/applications",
            resource_name=self.application.attr_application_id,
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.job_role = iam.Role(
            self,
            "JobRole",
            description="EMR Serverless job execution role of Lethe's ingest and compaction",
            assumed_by=iam.ServicePrincipal(c.EMR_SERVICE_PRINCIPAL).with_conditions(
                {
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": application_arn},
                }
            ),
        )
        storage.grant_incoming_read(self.job_role)
        storage.grant_table_read(self.job_role)
        storage.grant_table_put(self.job_role, *EMR_WRITE_KEYS, sid="WriteTable")
        storage.grant_multipart_cleanup(self.job_role, c.DATA_PREFIX + "*", c.STAGING_PREFIX + "*")
        storage.grant_table_delete(
            self.job_role,
            c.STAGING_PREFIX + "*",
            sid="CleanStaging",
            reason="Spark's writers remove their own temporary output: only under the "
            "table's _staging/ scratch prefix, never committed data.",
        )
        self.artifacts.grant_read(self.job_role)
        cfn_artifacts = self.artifacts.node.default_child
        assert isinstance(cfn_artifacts, cdk.CfnResource)
        acknowledge(
            self.job_role,
            "AwsSolutions-IAM5",
            "Read-only access to the artifacts bucket (job scripts and archive), whose object "
            "names change with every deployment; CDK's grantRead spells it with wildcards.",
            "Action::s3:GetBucket*",
            "Action::s3:GetObject*",
            "Action::s3:List*",
            f"Resource::{arn_ref(cfn_artifacts, '/*')}",
        )

        # ---------------------------------------------------------------- trigger
        self.failures = sqs.Queue(self, "TriggerFailures", **queue_encryption(encryption_key))
        env = {
            c.ENV_TABLE_URI: storage.table_uri,
            c.ENV_INCOMING_PREFIX: c.INCOMING_PREFIX,
            c.ENV_DIRECT_REGISTER_MAX_BYTES: str(config.direct_register_max_bytes),
            c.ENV_EMR_APPLICATION_ID: self.application.attr_application_id,
            c.ENV_EMR_JOB_ROLE_ARN: self.job_role.role_arn,
            c.ENV_EMR_ENTRY_POINT: self.entry_point_uri,
            c.ENV_EMR_JOB_ARCHIVE: self.job_archive_uri,
        }
        incoming = s3.NotificationKeyFilter(prefix=c.INCOMING_PREFIX)
        trigger = ObjectCreated(storage.bucket, incoming, self.failures, encryption_key)
        self.trigger: LetheFunction = runtime.for_handler(
            self, "Trigger", c.INGEST_HANDLER, TRIGGER_ABOUT, env, trigger=trigger
        )
        fn = self.trigger.function
        self._acknowledge_notifications_handler(stack)
        storage.grant_incoming_read(fn)
        storage.grant_table_read(fn)
        storage.grant_table_put(fn, *TRIGGER_WRITE_KEYS, sid="RegisterFiles")
        storage.grant_multipart_cleanup(fn, c.DATA_PREFIX + "*")
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="StartIngestJobs",
                # ListJobRuns: a redelivered upload event finds its earlier run (idempotence).
                actions=["emr-serverless:StartJobRun", "emr-serverless:ListJobRuns"],
                resources=[application_arn],
            )
        )
        self.job_role.grant_pass_role(fn.grant_principal)

    # -------------------------------------------------------------- CDK-provided handlers

    def _acknowledge_deployment_handler(self, stack: cdk.Stack, *, kms: bool) -> None:
        cfn_artifacts = self.artifacts.node.default_child
        assert isinstance(cfn_artifacts, cdk.CfnResource)
        handlers = _cdk_handlers(
            stack,
            "Custom::CDKBucketDeployment",
            "CDK's BucketDeployment handler (a deploy-time custom resource) uses "
            "AWSLambdaBasicExecutionRole for its own logs.",
        )
        for child in handlers:
            acknowledge(
                child,
                "AwsSolutions-L1",
                "CDK's BucketDeployment handler runtime is chosen by aws-cdk-lib and "
                "runs only at deploy time.",
            )
            acknowledge(
                child,
                "AwsSolutions-IAM5",
                "CDK's BucketDeployment handler copies the job scripts from the CDK asset "
                "bucket into the artifacts bucket (and prunes stale ones there): read on "
                "the asset bucket, read/write/delete on the artifacts bucket only - never "
                "on the table bucket, which is why the artifacts have their own bucket.",
                "Action::s3:GetBucket*",
                "Action::s3:GetObject*",
                "Action::s3:List*",
                "Action::s3:Abort*",
                "Action::s3:DeleteObject*",
                f"Resource::{arn_ref(cfn_artifacts, '/*')}",
                f"Resource::{_asset_bucket_objects(stack)}",
                *(["Action::kms:GenerateDataKey*", "Action::kms:ReEncrypt*"] if kms else []),
            )

    def _acknowledge_notifications_handler(self, stack: cdk.Stack) -> None:
        _cdk_handlers(
            stack,
            "BucketNotificationsHandler",
            "CDK's bucket-notification custom resource uses "
            "AWSLambdaBasicExecutionRole for its own logs; it runs at deploy time.",
        )


def _cdk_handlers(stack: cdk.Stack, prefix: str, logs_reason: str) -> list[IConstruct]:
    """The stack's CDK-provided handlers whose id starts with ``prefix``, their use of
    AWSLambdaBasicExecutionRole (AwsSolutions-IAM4) acknowledged for ``logs_reason``."""
    handlers = [child for child in stack.node.children if child.node.id.startswith(prefix)]
    for handler in handlers:
        acknowledge(
            handler,
            "AwsSolutions-IAM4",
            logs_reason,
            "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
        )
    return handlers
