"""``LetheStack``: the whole deployment, composed of one construct per concern."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from constructs import Construct

from infra import constants as c
from infra.config import LetheConfig
from infra.constructs import (
    AdoptedData,
    ErasureFunctions,
    Foundation,
    GarbageCollection,
    IcebergCatalog,
    Ingest,
    LakeTables,
    LambdaRuntime,
    Monitoring,
    RequestQueues,
    TableStorage,
)
from infra.constructs.runtime import ROOT


class LetheStack(cdk.Stack):
    """Table bucket, request queues, functions, GC workflow, EMR application, alarms.

    Attributes:
        config: the settings it was built from (``spark_jobs_dir``: where the Spark entry
            points are read from, ``spark_jobs/`` by default).
        storage, queues, runtime, erasure, ingest, iceberg, gc, monitoring: its parts;
        lake: the lake's tables and window schedule (context ``lethe:lake``), or None.
        adopted: data adopted in place (context ``lethe:adopt``), or None.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str = c.STACK_ID,
        *,
        config: LetheConfig,
        spark_jobs_dir: Path | None = None,
        **stack_props: Any,
    ) -> None:
        stack_props.setdefault("description", c.STACK_DESCRIPTION)
        super().__init__(scope, construct_id, **stack_props)
        self.config = config

        self.key: kms.Key | None = None
        if config.kms:
            self.key = kms.Key(
                self,
                "Key",
                description="Lethe: table bucket, queues and alarm topic",
                enable_key_rotation=True,
                removal_policy=cdk.RemovalPolicy.RETAIN,
            )

        self.storage = TableStorage(self, "Storage", config=config, encryption_key=self.key)
        self.queues = RequestQueues(self, "Queues", encryption_key=self.key)
        self.runtime = LambdaRuntime(
            self,
            "Runtime",
            log_level=config.log_level,
            log_retention_days=config.log_retention_days,
        )
        base = Foundation(config, self.runtime, self.storage)
        self.erasure = ErasureFunctions(self, "Erasure", base=base, queues=self.queues)
        self.ingest = Ingest(
            self, "Ingest", base=base, spark_jobs_dir=spark_jobs_dir or ROOT / c.SPARK_JOBS_DIR
        )
        self.iceberg = IcebergCatalog(self, "Iceberg", base=base)
        self.gc = GarbageCollection(self, "Gc", base=base)
        self.lake: LakeTables | None = None
        if config.lake is not None:
            self.lake = LakeTables(self, "Lake", config=config, erasure=self.erasure, gc=self.gc)
        self.adopted: AdoptedData | None = None
        if config.adopt is not None:
            self.adopted = AdoptedData(
                self,
                "Adopted",
                adopt=config.adopt,
                storage=self.storage,
                ingest=self.ingest,
                erasure=self.erasure,
                gc=self.gc,
            )
        functions = {
            "DeleteHandler": self.erasure.delete_handler.function,
            "SpliceWorker": self.erasure.splice_worker.function,
            "IngestTrigger": self.ingest.trigger.function,
            "IcebergGlue": self.iceberg.register.function,
            **{f"Gc{name}": made.function for name, made in self.gc.functions.items()},
        }
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            dead_letter_queues={
                "DeleteRequestsDlq": self.queues.delete.dlq,
                "SpliceRequestsDlq": self.queues.splice.dlq,
                "IngestTriggerDlq": self.ingest.failures,
                "IcebergGlueDlq": self.iceberg.failures,
            },
            functions=functions,
            state_machine=self.gc.state_machine,
            encryption_key=self.key,
            alarm_email=config.alarm_email,
            erasure_alarm_days=config.erasure_alarm_days,
        )
        self._outputs()

    def _outputs(self) -> None:
        outputs = {
            "TableBucketName": self.storage.bucket.bucket_name,
            "TableUri": self.storage.table_uri,
            "IncomingUri": f"s3://{self.storage.bucket.bucket_name}/{c.INCOMING_PREFIX}",
            "DeleteQueueUrl": self.queues.delete.queue.queue_url,
            "DeleteDeadLetterQueueUrl": self.queues.delete.dlq.queue_url,
            "SpliceQueueUrl": self.queues.splice.queue.queue_url,
            "SpliceDeadLetterQueueUrl": self.queues.splice.dlq.queue_url,
            "IngestFailuresQueueUrl": self.ingest.failures.queue_url,
            "GcStateMachineArn": self.gc.state_machine.state_machine_arn,
            "EmrApplicationId": self.ingest.application.attr_application_id,
            "EmrJobRoleArn": self.ingest.job_role.role_arn,
            "ArtifactsBucketName": self.ingest.artifacts.bucket_name,
            "JobArchiveUri": self.ingest.job_archive_uri,
            "AlarmTopicArn": self.monitoring.topic.topic_arn,
            "GlueIcebergTable": f"{self.iceberg.database_name}.{self.iceberg.table_name}",
        }
        for name, value in outputs.items():
            cdk.CfnOutput(self, name, value=value)
