"""The table bucket (and its access-log bucket), with prefix-scoped grant helpers.

One table is one prefix of the bucket (DESIGN.md §1); uploads arrive under ``incoming/`` at
the bucket root. Every grant below names the table's sub-prefixes explicitly, so no function
gets more of the bucket than its step needs, and the matching cdk-nag IAM5 findings (object
ARNs end in ``/*`` because keys are only known at run time) are acknowledged right here,
finding by finding.

Versioning is off by default: erasure must physically remove bytes, and in a versioned bucket
a DeleteObject only adds a delete marker while the erased bytes stay readable as a noncurrent
version. When an operator turns it on (e.g. for accidental-deletion protection), a lifecycle
rule expires noncurrent versions after ``noncurrent_version_days`` and the GC ``purge`` step
deletes the noncurrent versions of erased objects right away; erasure completes only then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra import constants as c
from infra.config import LetheConfig
from infra.constructs._nag import acknowledge, arn_ref

READ_ACTIONS = ("s3:GetObject",)  # also covers HeadObject and ranged GETs
PUT_ACTIONS = ("s3:PutObject",)  # also covers CreateMultipartUpload, UploadPart(Copy), Complete
MULTIPART_CLEANUP_ACTIONS = ("s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")


def private_bucket(
    scope: Construct,
    construct_id: str,
    *,
    encryption_key: kms.IKey | None,
    access_logs: s3.IBucket | None,
    access_log_prefix: str | None,
    unlogged: str | None = None,
    **props: Any,
) -> s3.Bucket:
    """A bucket reached only over TLS and through IAM: encrypted (with ``encryption_key``, else
    S3-managed keys), no public access, objects owned by the bucket owner, server access logs
    to ``access_logs`` under ``access_log_prefix`` when there is a log bucket; when there is
    none, ``unlogged`` says why that is acceptable (cdk-nag's S1 finding). ``props`` are the
    bucket's own settings (removal policy, lifecycle, versioning)."""
    bucket = s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS if encryption_key else s3.BucketEncryption.S3_MANAGED,
        encryption_key=encryption_key,
        bucket_key_enabled=True if encryption_key else None,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        server_access_logs_bucket=access_logs,
        server_access_logs_prefix=access_log_prefix if access_logs else None,
        **props,
    )
    if access_logs is None and unlogged:
        acknowledge(bucket, "AwsSolutions-S1", unlogged)
    return bucket


class TableGrants:
    """The grants a table prefix gives (read and list, put, abort own uploads, delete), shared
    by :class:`TableStorage` and the lake's :class:`~infra.constructs.lake.PrefixGrants`; each
    says in its ``*_SID``/``*_REASON`` values what its statements and wildcards cover."""

    READ_SID: str
    READ_REASON: str
    LIST_SID: str
    PUT_REASON: str  # formatted with {relatives}
    ABORT_SID: str
    ABORT_REASON: str
    DELETE_REASON: str  # formatted with {relatives}
    encryption_key: kms.IKey | None = None  # the bucket's customer key, when there is one
    tag = ""  # appended to each statement id (one policy may name several lake prefixes)
    # each subclass has: bucket, table_prefix; _acknowledge(grantee, reason, wildcard keys)
    # (the cdk-nag IAM5 findings of its ARNs) and grant_list(grantee, *, sid)

    def _grant(
        self,
        grantee: iam.IGrantable,
        *,
        actions: Sequence[str],
        relatives: Sequence[str],
        sid: str,
        reason: str,
    ) -> None:
        """Allow ``actions`` on ``relatives`` of the prefix and acknowledge their wildcards."""
        keys = [f"{self.table_prefix}/{r}" for r in relatives]
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=sid + self.tag,
                actions=list(actions),
                resources=[self.bucket.arn_for_objects(k) for k in keys],
            )
        )
        wildcards = [k for k in keys if "*" in k]
        if wildcards:
            self._acknowledge(grantee, reason, wildcards)

    def grant_table_read(self, grantee: iam.IGrantable) -> None:
        """GET any object of the prefix (head, manifests, data, DVs, GC workspace) and list it."""
        self._grant(
            grantee,
            actions=READ_ACTIONS,
            relatives=["*"],
            sid=self.READ_SID,
            reason=self.READ_REASON,
        )
        self.grant_list(grantee, sid=self.LIST_SID)
        if self.encryption_key:
            self.encryption_key.grant_decrypt(grantee)

    def grant_table_put(self, grantee: iam.IGrantable, *relatives: str, sid: str) -> None:
        """PUT (incl. conditional and multipart PUTs) to the given sub-prefixes/keys."""
        reason = self.PUT_REASON.format(relatives=", ".join(relatives))
        self._grant(grantee, actions=PUT_ACTIONS, relatives=relatives, sid=sid, reason=reason)
        if self.encryption_key:
            # SSE-KMS PUTs need a data key; no ReEncrypt*/GenerateDataKey* wildcards.
            self.encryption_key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")

    def grant_multipart_cleanup(self, grantee: iam.IGrantable, *relatives: str) -> None:
        """Abort (and list the parts of) the caller's own multipart uploads under ``relatives``.

        DESIGN.md §4.5: a splice aborts its upload on any failure, so parts are not left to
        the lifecycle rule. Aborting an upload cannot remove a committed object.
        """
        self._grant(
            grantee,
            actions=MULTIPART_CLEANUP_ACTIONS,
            relatives=relatives,
            sid=self.ABORT_SID,
            reason=self.ABORT_REASON,
        )

    def grant_table_delete(
        self,
        grantee: iam.IGrantable,
        *relatives: str,
        actions: Sequence[str] = ("s3:DeleteObject",),
        sid: str,
        reason: str | None = None,
    ) -> None:
        """Delete rights: for the GC steps (see ``infra/constructs/gc.py``), and Spark's
        scratch space ``_staging/``."""
        reason = reason or self.DELETE_REASON.format(relatives=", ".join(relatives))
        self._grant(grantee, actions=actions, relatives=relatives, sid=sid, reason=reason)


class TableStorage(TableGrants, Construct):
    """Table bucket with SSE, TLS-only access, no public access and lifecycle hygiene.

    Attributes:
        bucket: the table bucket.
        access_logs: the server-access-log bucket, when enabled.
        table_prefix: the table's prefix (no trailing slash), e.g. ``tables/main``.
        table_uri: ``s3://<bucket>/<table_prefix>``, what the functions open.
    """

    READ_SID = "ReadTable"
    READ_REASON = (
        "Reads objects anywhere under the one table prefix; object keys (UUIDs, versions) are "
        "only known at run time. No other prefix of the bucket."
    )
    LIST_SID = "ListTable"
    PUT_REASON = (
        "Writes write-once objects under named sub-prefixes of the table ({relatives}); keys "
        "are generated at run time."
    )
    ABORT_SID = "AbortOwnMultipartUploads"
    ABORT_REASON = (
        "Aborts its own failed multipart uploads of new data files (upload ids are per object "
        "key, known at run time); cannot delete committed objects."
    )
    DELETE_REASON = (
        "Garbage collection removes unreferenced objects it found by listing the table; "
        "scoped to {relatives} of the one table prefix."
    )

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: LetheConfig,
        encryption_key: kms.IKey | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table_prefix = config.table_prefix
        self.encryption_key = encryption_key
        self.versioned = config.versioned

        self.access_logs: s3.Bucket | None = None
        if config.access_logs:
            # Server access logs may only go to an SSE-S3 bucket (S3 log delivery cannot use
            # a customer key); log lines name object keys, which are UUIDs, never row values.
            self.access_logs = private_bucket(
                self,
                "AccessLogs",
                encryption_key=None,
                access_logs=None,
                access_log_prefix=None,
                lifecycle_rules=[
                    s3.LifecycleRule(
                        id="expire-access-logs",
                        expiration=cdk.Duration.days(config.access_log_retention_days),
                        abort_incomplete_multipart_upload_after=cdk.Duration.days(1),
                    )
                ],
                removal_policy=cdk.RemovalPolicy.RETAIN,
            )
        lifecycle = [
            s3.LifecycleRule(
                id="abort-incomplete-multipart-uploads",
                abort_incomplete_multipart_upload_after=cdk.Duration.days(c.MULTIPART_ABORT_DAYS),
            ),
        ]
        if not (config.adopt and config.adopt.in_place):
            # An upload is copied into the table (or ingested by EMR) on arrival; the raw file
            # still holds every row, so it must not outlive the table's erasure guarantees.
            # (Not when uploads are adopted in place: they are then the table's data files.)
            lifecycle.append(
                s3.LifecycleRule(
                    id="expire-incoming-uploads",
                    prefix=c.INCOMING_PREFIX,
                    expiration=cdk.Duration.days(config.incoming_expiration_days),
                )
            )
        if self.versioned:
            lifecycle.append(
                s3.LifecycleRule(
                    id="expire-noncurrent-versions",
                    noncurrent_version_expiration=cdk.Duration.days(config.noncurrent_version_days),
                    expired_object_delete_marker=True,
                )
            )

        self.bucket = private_bucket(
            self,
            "Bucket",
            encryption_key=encryption_key,
            access_logs=self.access_logs,
            access_log_prefix="table-bucket/",
            unlogged="Server access logging was switched off by the operator (context "
            f"{c.CTX_ACCESS_LOGS}=false); CloudTrail data events can replace it.",
            minimum_tls_version=1.2,
            versioned=self.versioned,
            lifecycle_rules=lifecycle,
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.table_uri = f"s3://{self.bucket.bucket_name}/{self.table_prefix}"

    # ------------------------------------------------------------------ ARNs and grant helpers

    def key_pattern(self, relative: str) -> str:
        """Bucket-relative key (pattern) of ``relative`` inside the table, e.g. ``data/*``."""
        return f"{self.table_prefix}/{relative}"

    def object_arns(self, *relatives: str) -> list[str]:
        return [self.bucket.arn_for_objects(self.key_pattern(r)) for r in relatives]

    def _acknowledge(self, grantee: iam.IGrantable, reason: str, keys: Sequence[str]) -> None:
        cfn_bucket = self.bucket.node.default_child
        assert isinstance(cfn_bucket, cdk.CfnResource)
        acknowledge(
            _policy_scope(grantee),
            "AwsSolutions-IAM5",
            reason,
            *(f"Resource::{arn_ref(cfn_bucket, '/' + k)}" for k in keys),
        )

    def grant_list(
        self,
        grantee: iam.IGrantable,
        *,
        actions: Sequence[str] = ("s3:ListBucket",),
        incoming: bool = False,
        sid: str,
    ) -> None:
        """List actions on the bucket, conditioned on the table prefix (or ``incoming/``).

        ListBucket also makes S3 answer 404 rather than 403 for a missing key, which the
        store relies on to tell "no such snapshot" from "access denied".
        """
        if incoming:
            prefixes = [c.INCOMING_PREFIX, f"{c.INCOMING_PREFIX}*"]
        else:
            prefixes = [self.table_prefix, f"{self.table_prefix}/*"]
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=sid,
                actions=list(actions),
                resources=[self.bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": prefixes}},
            )
        )

    def grant_incoming_read(self, grantee: iam.IGrantable) -> None:
        """GET uploads under ``incoming/`` (bucket root)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadIncoming",
                actions=list(READ_ACTIONS),
                resources=[self.bucket.arn_for_objects(f"{c.INCOMING_PREFIX}*")],
            )
        )
        cfn_bucket = self.bucket.node.default_child
        assert isinstance(cfn_bucket, cdk.CfnResource)
        acknowledge(
            _policy_scope(grantee),
            "AwsSolutions-IAM5",
            "Reads uploaded files under the upload prefix; their names are chosen by the "
            "uploader at run time.",
            f"Resource::{arn_ref(cfn_bucket, '/' + c.INCOMING_PREFIX + '*')}",
        )
        self.grant_list(grantee, incoming=True, sid="ListIncoming")
        if self.encryption_key:
            self.encryption_key.grant_decrypt(grantee)


def _policy_scope(grantee: iam.IGrantable) -> Construct:
    """The construct whose subtree holds the grantee's policy (its role)."""
    principal = grantee.grant_principal
    if isinstance(principal, Construct):
        return principal
    raise TypeError(f"cannot acknowledge findings for a non-construct principal {principal}")
