"""Garbage collection: one Lambda per step, a Step Functions workflow, a schedule.

One function per step (not one function with eight handlers) so that each step's role holds
only its own destructive right: ``retention`` writes the row-retention sweep (new data files
by multipart upload, DVs, index pieces, one or more commits) and deletes nothing;
``sweep`` deletes unreferenced data/DV/staging objects,
``expire`` deletes manifests past retention, ``abort`` aborts stale multipart uploads,
``purge`` deletes noncurrent object versions; ``plan``, ``report`` and ``record_failure``
delete nothing of the table. All read and list the table and keep their run's scratch state
under ``<table>/_gc/`` (batch lists, per-step results, reports).

Workflow (plain Task states whose ``Resource`` is the function ARN, so moto's Step Functions
interpreter can run the same definition locally; state names and result paths come from
``lethe.gc.workflow``, via ``infra.constants.GC_STATES`` / ``GC_RESULTS``)::

    {"dry_run": bool}
      Retention   -> $.row_retention = the row-retention sweep's counts and receipt (commits
                     before Plan reads the head, so this run already collects what it dropped)
      Plan        -> $.plan = {"table", "run_id", "dry_run", "batches": [batch lists under
                     _gc/], ...counts}   (lethe.gc.models.PlanState)
      SweepBatches (Map over $.plan.batches, MaxConcurrency bounded; each item gets
             {"run_id", "dry_run", "batch_key"} and runs the Sweep task; results stay in S3)
      Compact (Pass) -> {"table", "run_id", "dry_run", "row_retention"}: the batch list
             leaves the payload
      Expire -> $.expire, Abort -> $.abort, Purge -> $.purge, Report -> $.report
      Done (Succeed)
    any step, after its retries: Catch -> RecordFailure ($.error = {Error, Cause}) -> Failed

Every task retries the Lambda service's transient errors and ``States.Timeout`` with
exponential backoff. Payloads stay small: counts and keys of S3 objects, never row values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra import constants as c
from infra.constructs._nag import acknowledge, arn_ref
from infra.constructs.base import Foundation
from infra.constructs.runtime import LetheFunction
from infra.constructs.storage import TableStorage


@dataclass(frozen=True, slots=True)
class GcStep:
    """One GC step: its function and the destructive rights it alone holds."""

    name: str
    handler: str
    description: str
    deletes: tuple[str, ...] = ()  # table-relative key patterns for s3:DeleteObject
    delete_versions: bool = False  # ListBucketVersions + DeleteObjectVersion
    lists_versions: bool = False  # ListBucketVersions (the report recounts what is left)
    abort_uploads: bool = False  # ListBucketMultipartUploads + AbortMultipartUpload
    commits: bool = False  # PUT manifests and the head (one commit through the catalog)
    splices: bool = False  # the retention sweep: new data files, DVs, index pieces, commits
    workspace: bool = True  # PUT/DELETE under _gc/ (the run's scratch state)


RETENTION = GcStep(
    c.GC_STATES.retention,
    c.GC_RETENTION_HANDLER,
    "GC retention: the row-retention sweep (expired rows erased: wholly expired files "
    "dropped, straddling files spliced), committed before the plan.",
    splices=True,
    workspace=False,
)
PLAN = GcStep(
    c.GC_STATES.plan,
    c.GC_PLAN_HANDLER,
    "GC plan: walks the snapshot chain over the retention window, marks referenced "
    "objects, writes batches of unreferenced keys older than the grace period under _gc/.",
)
SWEEP = GcStep(
    c.GC_STATES.sweep,
    c.GC_SWEEP_HANDLER,
    "GC sweep: deletes the unreferenced data files, DV containers, staging objects, index "
    "pieces, manifest segments and Iceberg view objects of one batch.",
    deletes=(
        c.DATA_PREFIX + "*",
        c.TOMBSTONE_PREFIX + "*",
        c.STAGING_PREFIX + "*",
        c.INDEX_PREFIX + "*",
        c.SEGMENT_PREFIX + "*",
        c.ERASURE_PREFIX + "*",
        c.METADATA_PREFIX + "*",
    ),
)
EXPIRE = GcStep(
    c.GC_STATES.expire,
    c.GC_EXPIRE_HANDLER,
    "GC expire: deletes manifests past the retention window (and losers' manifests), then "
    "commits completed erasures out of the root manifest.",
    deletes=(c.MANIFEST_PREFIX + "*",),
    commits=True,
)
ABORT = GcStep(
    c.GC_STATES.abort,
    c.GC_ABORT_HANDLER,
    "GC abort: aborts multipart uploads under the table older than the grace period.",
    abort_uploads=True,
)
PURGE = GcStep(
    c.GC_STATES.purge,
    c.GC_PURGE_HANDLER,
    "GC purge: deletes every version (and delete marker) of the objects that may hold an "
    "incomplete erasure's rows in a versioned bucket, so erased bytes do not survive as old "
    "versions.",
    delete_versions=True,
)
REPORT = GcStep(
    c.GC_STATES.report,
    c.GC_REPORT_HANDLER,
    "GC report: writes the run report, incl. per erasure request whether every object that "
    "held its rows is gone (every version, in a versioned bucket).",
    lists_versions=True,
)
RECORD_FAILURE = GcStep(
    c.GC_STATES.record_failure,
    c.GC_RECORD_FAILURE_HANDLER,
    "GC record_failure: records a failed run (step, error) under _gc/ for the next run and "
    "the operator.",
)
STEPS = (RETENTION, PLAN, SWEEP, EXPIRE, ABORT, PURGE, REPORT, RECORD_FAILURE)


class GarbageCollection(Construct):
    """GC step functions, the state machine and its EventBridge schedule.

    Attributes:
        functions: step name -> function.
        state_machine: the GC workflow.
        schedule: the EventBridge rule starting it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, base: Foundation) -> None:
        super().__init__(scope, construct_id)
        runtime, storage, config = base.runtime, base.storage, base.config
        environment = {
            c.ENV_TABLE_URI: storage.table_uri,
            c.ENV_GC_RETENTION: config.gc_retention,
            c.ENV_GC_GRACE: config.gc_grace,
            c.ENV_GC_VERSIONED_BUCKET: "true" if storage.versioned else "false",
        }
        self.functions: dict[str, LetheFunction] = {}
        for step in STEPS:
            made = runtime.function(
                self,
                step.name,
                handler=step.handler,
                service=f"{c.SERVICE}-gc",
                description=step.description,
                timeout=cdk.Duration.seconds(c.GC_TIMEOUT_SECONDS),
                memory_mb=c.GC_MEMORY_MB,
                environment=environment,
            )
            self._grant(storage, made, step)
            self.functions[step.name] = made

        self.state_machine = self._workflow(config.gc_map_concurrency)
        self.schedule = events.Rule(
            self,
            "Schedule",
            description="Starts Lethe's garbage collection",
            schedule=events.Schedule.expression(config.gc_schedule),
            targets=[
                targets.SfnStateMachine(
                    self.state_machine,
                    input=events.RuleTargetInput.from_object({"dry_run": config.gc_dry_run}),
                    retry_attempts=2,
                )
            ],
        )

    # ------------------------------------------------------------------ permissions

    @staticmethod
    def _grant(storage: TableStorage, made: LetheFunction, step: GcStep) -> None:
        grant_step(storage, made, step)

    # ------------------------------------------------------------------ workflow

    def _task(self, step: GcStep, *, result_path: str | None) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke(
            self,
            f"{step.name}Task",
            state_name=step.name,
            lambda_function=self.functions[step.name].function,
            payload_response_only=True,  # Resource = the function ARN, no payload wrapper
            retry_on_service_exceptions=False,  # replaced by the explicit Retry below
            result_path=result_path if result_path is not None else sfn.JsonPath.DISCARD,
            task_timeout=sfn.Timeout.duration(cdk.Duration.seconds(c.GC_TIMEOUT_SECONDS + 60)),
        )
        task.add_retry(
            errors=list(c.GC_RETRY_ERRORS),
            interval=cdk.Duration.seconds(c.GC_RETRY_INTERVAL_SECONDS),
            backoff_rate=c.GC_RETRY_BACKOFF_RATE,
            max_attempts=c.GC_RETRY_MAX_ATTEMPTS,
        )
        return task

    def _workflow(self, map_concurrency: int) -> sfn.StateMachine:
        failed = sfn.Fail(
            self,
            c.GC_STATES.failed,
            error="LetheGcFailed",
            cause="A garbage-collection step failed after its retries; see the record_failure "
            "entry under _gc/ and the step's logs.",
        )
        record_failure = self._task(RECORD_FAILURE, result_path=None)
        record_failure.add_catch(failed, errors=["States.ALL"], result_path="$.record_error")
        record_failure.next(failed)

        def guarded(state: tasks.LambdaInvoke | sfn.Map) -> tasks.LambdaInvoke | sfn.Map:
            state.add_catch(
                record_failure, errors=["States.ALL"], result_path=f"$.{c.GC_RESULTS.error}"
            )
            return state

        at_plan = f"$.{c.GC_RESULTS.plan}"
        retention = guarded(self._task(RETENTION, result_path=f"$.{c.GC_RESULTS.retention}"))
        plan = guarded(self._task(PLAN, result_path=at_plan))
        sweep = sfn.Map(
            self,
            c.GC_STATES.sweep_batches,
            items_path=f"{at_plan}.batches",
            max_concurrency=map_concurrency,
            item_selector={
                "run_id": sfn.JsonPath.string_at(f"{at_plan}.run_id"),
                "dry_run": sfn.JsonPath.string_at(f"{at_plan}.dry_run"),
                "batch_key": sfn.JsonPath.string_at("$$.Map.Item.Value"),
            },
            result_path=sfn.JsonPath.DISCARD,
        )
        sweep.item_processor(self._task(SWEEP, result_path=None))
        guarded(sweep)
        compact = sfn.Pass(
            self,
            c.GC_STATES.compact,
            comment="Drop the batch list: later steps get the table, run id and mode (and "
            "the retention sweep's summary, for the run's output).",
            parameters={
                c.GC_RESULTS.retention: sfn.JsonPath.object_at(f"$.{c.GC_RESULTS.retention}"),
                "table": sfn.JsonPath.string_at(f"{at_plan}.table"),
                "run_id": sfn.JsonPath.string_at(f"{at_plan}.run_id"),
                "dry_run": sfn.JsonPath.string_at(f"{at_plan}.dry_run"),
            },
        )
        chain = (
            sfn.Chain.start(retention)
            .next(plan)
            .next(sweep)
            .next(compact)
            .next(guarded(self._task(EXPIRE, result_path=f"$.{c.GC_RESULTS.expire}")))
            .next(guarded(self._task(ABORT, result_path=f"$.{c.GC_RESULTS.abort}")))
            .next(guarded(self._task(PURGE, result_path=f"$.{c.GC_RESULTS.purge}")))
            .next(guarded(self._task(REPORT, result_path=f"$.{c.GC_RESULTS.report}")))
            .next(sfn.Succeed(self, c.GC_STATES.done))
        )
        log_group = logs.LogGroup(self, "WorkflowLogs", removal_policy=cdk.RemovalPolicy.DESTROY)
        machine = sfn.StateMachine(
            self,
            "Workflow",
            comment="Lethe garbage collection: retention sweep, plan, sweep, expire, abort, purge, report",
            definition_body=sfn.DefinitionBody.from_chainable(chain),
            timeout=cdk.Duration.hours(c.GC_STATE_MACHINE_TIMEOUT_HOURS),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=False,  # payloads are small, but keep logs data-free
            ),
        )
        self._acknowledge_workflow_role(machine)
        return machine

    def _acknowledge_workflow_role(self, machine: sfn.StateMachine) -> None:
        invoke = []
        for made in self.functions.values():
            cfn_fn = made.function.node.default_child
            assert isinstance(cfn_fn, cdk.CfnResource)
            invoke.append(f"Resource::{arn_ref(cfn_fn, ':*')}")
        role = machine.role
        assert isinstance(role, iam.Role)
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "CDK grants lambda:InvokeFunction on each GC function's ARN and its versions/"
            "aliases (ARN:*); these are exactly the eight step functions.",
            *invoke,
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5",
            "X-Ray tracing and CloudWatch Logs delivery (logs:CreateLogDelivery etc.) do not "
            "support resource-level permissions.",
            "Resource::*",
        )


def grant_step(storage: Any, made: LetheFunction, step: GcStep) -> None:
    """Grant ``step``'s rights on one table (``storage``: the stack's
    :class:`~infra.constructs.storage.TableStorage`, or a lake table's
    :class:`~infra.constructs.lake.PrefixGrants`)."""
    fn = made.function
    storage.grant_table_read(fn)
    if step.workspace:
        storage.grant_table_put(fn, c.GC_PREFIX + "*", sid="WriteGcWorkspace")
        storage.grant_table_delete(fn, c.GC_PREFIX + "*", sid="CleanGcWorkspace")
    if step.splices:  # what an erasure's splices and its commit write; no delete
        storage.grant_table_put(
            fn,
            c.DATA_PREFIX + "*",
            c.TOMBSTONE_PREFIX + "*",
            c.INDEX_PREFIX + "*",
            c.MANIFEST_PREFIX + "*",
            c.HEAD_KEY,
            sid="SweepExpiredRows",
        )
        storage.grant_multipart_cleanup(fn, c.DATA_PREFIX + "*")
    if step.deletes:
        storage.grant_table_delete(fn, *step.deletes, sid="DeleteUnreferenced")
    if step.commits:
        storage.grant_table_put(fn, c.MANIFEST_PREFIX + "*", c.HEAD_KEY, sid="CommitManifest")
    if step.delete_versions or step.lists_versions:
        storage.grant_list(fn, actions=["s3:ListBucketVersions"], sid="ListTableVersions")
    if step.delete_versions:
        storage.grant_table_delete(
            fn, "*", actions=["s3:DeleteObjectVersion"], sid="PurgeNoncurrentVersions"
        )
    if step.abort_uploads:
        storage.grant_list(fn, actions=["s3:ListBucketMultipartUploads"], sid="ListTableUploads")
        storage.grant_table_delete(
            fn,
            "*",
            actions=["s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"],
            sid="AbortStaleUploads",
        )
