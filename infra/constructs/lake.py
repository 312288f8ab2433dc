"""One stack per lake: the lake's tables (in any buckets) for the delete handler, the splice
worker and the GC steps, with IAM scoped to exactly the lake's prefixes.

Context ``lethe:lake`` (:class:`infra.config.LakeConfig`) names the lake's registry prefix,
its tables' prefixes and adopted prefixes. For each table prefix, the functions get what
they get on the stack's own table, and no more: read and list the table; the delete handler
writes deletion vectors, index pieces, manifests and the head; the splice worker also writes
data files (and aborts its own uploads); each GC step holds its own rights (sweep deletes
unreferenced objects, ...). Adopted prefixes (the data files of adopted Iceberg/Delta
tables) are read-only. The registry: the delete handler and the splice worker read the lake
prefix and write ``lake.json``, the pending requests' values (``requests/``, deleted once
applied) and the archive (``archive/``); nothing else of it.

The delete handler gets ``LETHE_LAKE_URI`` (lake requests route by subject); the splice
worker too, and an EventBridge rule (``lethe:erasureWindowSchedule``) sends it the window
event: it splices the requests whose erasure window closed, within its byte budget, and
archives finished requests (:mod:`lethe.lake.window`). One more rule per table starts the GC
workflow on it (``{"table": uri}``).
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import constants as c
from infra.config import LetheConfig, S3Prefix
from infra.constructs._nag import acknowledge
from infra.constructs.erasure import ErasureFunctions
from infra.constructs.gc import STEPS, GarbageCollection, grant_step
from infra.constructs.storage import TableGrants


class PrefixGrants(TableGrants):
    """The grant helpers of :class:`~infra.constructs.storage.TableStorage`, for a prefix
    of a bucket the stack does not own (names only: ARNs are ``arn:<partition>:s3:::...``)."""

    READ_SID = "ReadLakePrefix"
    READ_REASON = (
        "Reads objects under one prefix of the lake (a table, an adopted prefix or the "
        "registry); keys are only known at run time. No other prefix of the bucket."
    )
    LIST_SID = "ListLakePrefix"
    PUT_REASON = (
        "Writes write-once objects under named sub-prefixes of one lake prefix ({relatives}); "
        "keys are generated at run time."
    )
    ABORT_SID = "AbortOwnLakeUploads"
    ABORT_REASON = (
        "Aborts its own failed multipart uploads of new data files of a lake table; cannot "
        "delete committed objects."
    )
    DELETE_REASON = (
        "Removes objects of one lake prefix it found by listing it; scoped to {relatives} of "
        "that prefix."
    )

    def __init__(self, bucket: s3.IBucket, where: S3Prefix, *, tag: str) -> None:
        self.tag = tag  # appended to each statement id: one policy may name several prefixes
        self.bucket = bucket
        self.where = where
        self.table_prefix = where.prefix
        self.versioned = False

    def _acknowledge(self, grantee: iam.IGrantable, reason: str, keys: Sequence[str]) -> None:
        principal = grantee.grant_principal
        if isinstance(principal, Construct):
            findings = (
                f"Resource::arn:<AWS::Partition>:s3:::{self.where.bucket}/{k}" for k in keys
            )
            acknowledge(principal, "AwsSolutions-IAM5", reason, *findings)

    def grant_list(
        self, grantee: iam.IGrantable, *, actions: Sequence[str] = ("s3:ListBucket",), sid: str
    ) -> None:
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=sid + self.tag,
                actions=list(actions),
                resources=[self.bucket.bucket_arn],
                conditions={
                    "StringLike": {"s3:prefix": [self.table_prefix, f"{self.table_prefix}/*"]}
                },
            )
        )


class LakeTables(Construct):
    """The lake's prefixes granted to the erasure functions and GC; the window schedule.

    Attributes:
        tables: one :class:`PrefixGrants` per table prefix.
        window_rule: the EventBridge rule that runs the erasure window.
        gc_rules: one rule per table starting the GC workflow on it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: LetheConfig,
        erasure: ErasureFunctions,
        gc: GarbageCollection,
    ) -> None:
        super().__init__(scope, construct_id)
        lake = config.lake
        if lake is None:
            raise ValueError("LakeTables is for a lake's stack (context lethe:lake)")
        delete_handler, splice_worker = erasure.delete_handler, erasure.splice_worker
        buckets = {
            name: s3.Bucket.from_bucket_name(self, f"Bucket{i}", name)
            for i, name in enumerate(lake.buckets)
        }
        self.registry = PrefixGrants(buckets[lake.lake.bucket], lake.lake, tag="Registry")
        self.tables = [
            PrefixGrants(buckets[t.bucket], t, tag=f"Table{i}") for i, t in enumerate(lake.tables)
        ]
        self.adopted = [
            PrefixGrants(buckets[a.bucket], a, tag=f"Adopted{i}")
            for i, a in enumerate(lake.adopted)
        ]
        commit = (*(p + "*" for p in c.LAKE_TABLE_WRITES if p != c.DATA_PREFIX), c.HEAD_KEY)
        for fn in (delete_handler, splice_worker):
            fn.function.add_environment(c.ENV_LAKE_URI, lake.lake.uri)
            self.registry.grant_table_read(fn.function)
            self.registry.grant_table_put(
                fn.function,
                c.LAKE_KEY,
                c.LAKE_VALUES_PREFIX + "*",
                c.LAKE_ARCHIVE_PREFIX + "*",
                sid="WriteLakeRegistry",
            )
            self.registry.grant_table_delete(
                fn.function,
                c.LAKE_VALUES_PREFIX + "*",
                actions=("s3:DeleteObject", "s3:DeleteObjectVersion"),
                sid="DropAppliedValues",
                reason="Deletes the values of a lake request, every version of them, once no "
                "part of it is pending (the only place they were kept); nothing else of the "
                "registry.",
            )
            # every version of a values object is listed: deleted with the request, and a
            # receipt says gone only when no version is left (issue 35 item 5)
            self.registry.grant_list(
                fn.function, actions=("s3:ListBucketVersions",), sid="ListLakeValuesVersions"
            )
            for p in self.adopted:
                p.grant_table_read(fn.function)
        for t in self.tables:
            t.grant_table_read(delete_handler.function)
            t.grant_table_put(delete_handler.function, *commit, sid="CommitLakeDeletes")
            t.grant_table_read(splice_worker.function)
            t.grant_table_put(
                splice_worker.function, c.DATA_PREFIX + "*", *commit, sid="WriteLakeSplices"
            )
            t.grant_multipart_cleanup(splice_worker.function, c.DATA_PREFIX + "*")
            for step in STEPS:
                grant_step(t, gc.functions[step.name], step)
        for step in STEPS:
            for p in self.adopted:
                p.grant_table_read(gc.functions[step.name].function)
        self.window_rule = events.Rule(
            self,
            "ErasureWindow",
            description="Runs the lake's erasure window: splices the requests whose window "
            "closed (bounded per invocation) and archives finished requests",
            schedule=events.Schedule.expression(config.erasure_window_schedule),
            targets=[
                targets.LambdaFunction(
                    splice_worker.function,
                    event=events.RuleTargetInput.from_object(dict(c.LAKE_WINDOW_EVENT)),
                    retry_attempts=2,
                )
            ],
        )
        self.gc_rules = [
            events.Rule(
                self,
                f"GcSchedule{i}",
                description=f"Starts Lethe's garbage collection on lake table {i}",
                schedule=events.Schedule.expression(config.gc_schedule),
                targets=[
                    targets.SfnStateMachine(
                        gc.state_machine,
                        input=events.RuleTargetInput.from_object(
                            {"dry_run": config.gc_dry_run, "table": t.uri}
                        ),
                        retry_attempts=2,
                    )
                ],
            )
            for i, t in enumerate(lake.tables)
        ]
        cdk.CfnOutput(self, "LakeUri", value=lake.lake.uri)
