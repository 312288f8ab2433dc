"""What every Lethe Lambda function shares: layers, code asset, platform, Powertools settings.

:class:`LambdaRuntime` owns the two layers (``layers/build/deps.zip`` and ``layers/build/lethe.zip``,
built by ``make layer``) and makes :class:`LetheFunction` s: one role per function with no
managed policy (only writes to its own log group, X-Ray, and what its wiring grants), an
explicit log group with a retention, arm64, active tracing, Powertools environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict, Unpack

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c
from infra.constructs._nag import acknowledge
from infra.constructs.queues import grant_send

ROOT = Path(__file__).resolve().parents[2]

RUNTIME = lambda_.Runtime(f"python{c.LAMBDA_PYTHON_VERSION}", lambda_.RuntimeFamily.PYTHON)
ARCHITECTURE = lambda_.Architecture.ARM_64


# handler entry point -> (service name suffix, timeout in seconds, memory in MB)
LIMITS: Mapping[str, tuple[str, int, int]] = {
    c.DELETE_HANDLER: ("delete-requests", c.DELETE_TIMEOUT_SECONDS, c.DELETE_MEMORY_MB),
    c.SPLICE_HANDLER: ("splice", c.SPLICE_TIMEOUT_SECONDS, c.SPLICE_MEMORY_MB),
    c.INGEST_HANDLER: ("ingest", c.INGEST_TIMEOUT_SECONDS, c.INGEST_MEMORY_MB),
    c.ICEBERG_GLUE_HANDLER: (
        "iceberg-glue",
        c.ICEBERG_GLUE_TIMEOUT_SECONDS,
        c.ICEBERG_GLUE_MEMORY_MB,
    ),
}


class LayerMissingError(RuntimeError):
    """The layer directories have not been built."""


_RETENTION_BY_DAYS = {
    1: "ONE_DAY",
    3: "THREE_DAYS",
    5: "FIVE_DAYS",
    7: "ONE_WEEK",
    14: "TWO_WEEKS",
    30: "ONE_MONTH",
    60: "TWO_MONTHS",
    90: "THREE_MONTHS",
    120: "FOUR_MONTHS",
    150: "FIVE_MONTHS",
    180: "SIX_MONTHS",
    365: "ONE_YEAR",
    400: "THIRTEEN_MONTHS",
    545: "EIGHTEEN_MONTHS",
    731: "TWO_YEARS",
}


def retention(days: int) -> logs.RetentionDays:
    """The CloudWatch Logs retention for ``days`` (CloudWatch offers only some values)."""
    name = _RETENTION_BY_DAYS.get(days)
    if name is None:
        raise ValueError(
            f"log retention of {days} days is not offered by CloudWatch; "
            f"choose one of {sorted(_RETENTION_BY_DAYS)}"
        )
    return logs.RetentionDays[name]


class FunctionSpec(TypedDict):
    """What differs from one function to the next (the runtime gives the rest)."""

    handler: str
    service: str
    description: str
    timeout: cdk.Duration
    memory_mb: int
    environment: Mapping[str, str]
    reserved_concurrency: NotRequired[int | None]
    dead_letter_queue: NotRequired[sqs.IQueue | None]
    retry_attempts: NotRequired[int | None]


class FunctionExtras(TypedDict, total=False):
    """The optional part of a :class:`FunctionSpec`."""

    reserved_concurrency: int | None
    dead_letter_queue: sqs.IQueue | None
    retry_attempts: int | None


@dataclass(frozen=True, slots=True)
class ObjectCreated:
    """S3 ObjectCreated events under ``key_filter`` of ``bucket`` invoke a function;
    ``failures`` is its dead-letter queue (encrypted with ``encryption_key``)."""

    bucket: s3.IBucket
    key_filter: s3.NotificationKeyFilter
    failures: sqs.IQueue
    encryption_key: kms.IKey | None


class LetheFunction(Construct):
    """One function with its own role and log group.

    Attributes:
        function: the Lambda function.
        role: its execution role; grants are added next to the wiring that needs them.
        log_group: its log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        runtime: LambdaRuntime,
        **spec: Unpack[FunctionSpec],
    ) -> None:
        super().__init__(scope, construct_id)
        service, description = spec["service"], spec["description"]
        self.log_group = logs.LogGroup(
            self,
            "Logs",
            retention=runtime.log_retention,
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Execution role of {service}: {description}",
        )
        # Instead of the AWSLambdaBasicExecutionRole managed policy (logs:* on any group).
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="WriteOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        env = {
            c.POWERTOOLS_SERVICE_NAME: service,
            c.POWERTOOLS_LOG_LEVEL: runtime.log_level,
            c.POWERTOOLS_METRICS_NAMESPACE: c.METRICS_NAMESPACE,
            # Traces keep timings and annotations only: a handler's response or exception
            # text could name a key of a person, and X-Ray keeps it for 30 days.
            "POWERTOOLS_TRACER_CAPTURE_RESPONSE": "false",
            "POWERTOOLS_TRACER_CAPTURE_ERROR": "false",
            **spec["environment"],
        }
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec["handler"],
            code=runtime.code,
            layers=runtime.layers,
            timeout=spec["timeout"],
            memory_size=spec["memory_mb"],
            environment=env,  # URIs, ARNs and limits only: the default Lambda key suffices
            role=self.role,
            log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            tracing=lambda_.Tracing.ACTIVE,
            reserved_concurrent_executions=spec.get("reserved_concurrency"),
            dead_letter_queue=spec.get("dead_letter_queue"),
            retry_attempts=spec.get("retry_attempts"),
            recursive_loop=lambda_.RecursiveLoop.TERMINATE,
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5",
            "X-Ray's PutTraceSegments/PutTelemetryRecords support no resource-level "
            "permissions; CDK adds them for active tracing.",
            "Resource::*",
        )
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            f"The runtime is pinned to python{c.LAMBDA_PYTHON_VERSION} because the layer's "
            "compiled wheels (pyarrow, pyroaring, pydantic-core) are built for exactly that "
            "interpreter and Amazon Linux 2023; bump infra/constants.py and rebuild the layer "
            "together.",
        )


class LambdaRuntime(Construct):
    """The layers and code asset shared by all functions, and a factory for functions."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        log_level: str,
        log_retention_days: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_level = log_level
        self.log_retention = retention(log_retention_days)
        deps_zip = ROOT / c.LAYER_DEPS_ZIP
        lib_zip = ROOT / c.LAYER_LIB_ZIP
        for built in (deps_zip, lib_zip):
            if not built.is_file():
                raise LayerMissingError(
                    f"{built.relative_to(ROOT)} is missing: run `make layer` "
                    "(python -m layers.build) before synthesizing"
                )
        contents = (
            (
                "Dependencies",
                deps_zip,
                "Lethe runtime dependencies (pyarrow, pyroaring, pydantic, Powertools, boto3) "
                f"from uv.lock, for python{c.LAMBDA_PYTHON_VERSION} {c.LAMBDA_WHEEL_PLATFORM}",
            ),
            ("Library", lib_zip, "The lethe library (shared/lethe)"),
        )
        self.layers = [
            lambda_.LayerVersion(
                self,
                name,
                code=lambda_.Code.from_asset(str(built)),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                description=description,
            )
            for name, built, description in contents
        ]
        self.code = lambda_.Code.from_asset(
            str(ROOT / c.FUNCTIONS_DIR), exclude=list(c.ASSET_EXCLUDES)
        )

    def function(
        self, scope: Construct, construct_id: str, **spec: Unpack[FunctionSpec]
    ) -> LetheFunction:
        """A function under ``scope`` with this runtime's layers, code and defaults."""
        return LetheFunction(scope, construct_id, runtime=self, **spec)

    def for_handler(
        self,
        scope: Construct,
        construct_id: str,
        handler: str,
        description: str,
        environment: Mapping[str, str],
        *,
        trigger: ObjectCreated | None = None,
        **extras: Unpack[FunctionExtras],
    ) -> LetheFunction:
        """:meth:`function` for one of the handlers in :data:`LIMITS`, with its service name,
        timeout and memory; invoked by S3 on ObjectCreated if ``trigger`` is given.

        S3 invokes asynchronously: two retries, then the trigger's dead-letter queue
        (``Function(dead_letter_queue=...)`` grants sqs:SendMessage, not the KMS side).
        """
        service, timeout_seconds, memory_mb = LIMITS[handler]
        if trigger is not None:
            extras.update(dead_letter_queue=trigger.failures, retry_attempts=2)
        made = self.function(
            scope,
            construct_id,
            handler=handler,
            service=f"{c.SERVICE}-{service}",
            description=description,
            timeout=cdk.Duration.seconds(timeout_seconds),
            memory_mb=memory_mb,
            environment=environment,
            **extras,
        )
        if trigger is not None:
            fn = made.function
            grant_send(trigger.failures, fn, trigger.encryption_key)
            trigger.bucket.add_event_notification(
                s3.EventType.OBJECT_CREATED, s3n.LambdaDestination(fn), trigger.key_filter
            )
        return made
