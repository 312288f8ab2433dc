"""Data adopted in place into the stack's table (context ``lethe:adopt``, issue 28).

An adopted table references files where they are, outside its prefix (``s3://raw/events/
dt=.../part-0.parquet``), and an external pipeline may keep landing files there. With
:class:`infra.config.AdoptConfig`:

* the upload trigger gets ``LETHE_ADOPT_IN_PLACE``, ``LETHE_ADOPT_OWNERSHIP`` and
  ``LETHE_ADOPT_PREFIXES``, and an S3 ObjectCreated notification per adopted prefix (on the
  prefix's bucket, which the stack does not own: CDK's notification handler merges it into
  the bucket's existing configuration), so each new file is adopted in place;
* the functions that read data files get read (GetObject, and ListBucket conditioned on the
  prefix) on the adopted prefixes and nothing else of those buckets: the delete handler, the
  splice worker, the upload trigger, the EMR job role (``spark_jobs/adopt.py`` reads
  footers there), and the GC steps that read them (``plan`` HEADs the superseded
  originals, ``retention`` splices expired rows out of them, ``purge`` and ``report`` list
  their versions);
* ``s3:DeleteObject`` on the adopted prefixes goes to GC's ``sweep`` step alone (it deletes
  the originals an erasure splice superseded, after the grace), ``s3:DeleteObjectVersion``
  (and ``s3:ListBucketVersions``) to ``purge`` alone (every version of those originals, in a
  versioned bucket), and only with ownership; without it nothing may delete or write there;
* ``inPlace``: Parquet uploads under ``incoming/`` become data files of the table, so the
  readers get ``incoming/`` too, ``sweep`` may delete superseded ones (with ownership), and
  the expiry rule on ``incoming/`` is not created (:class:`~infra.constructs.storage.
  TableStorage` ``expire_incoming``), which would otherwise delete live rows.

Without the key nothing here is created and the template is unchanged.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_notifications as s3n
from constructs import Construct

from infra import constants as c
from infra.config import AdoptConfig, S3Prefix
from infra.constructs._nag import acknowledge, arn_ref
from infra.constructs.erasure import ErasureFunctions
from infra.constructs.gc import PLAN, PURGE, REPORT, RETENTION, SWEEP, GarbageCollection
from infra.constructs.ingest import Ingest
from infra.constructs.lake import PrefixGrants
from infra.constructs.storage import READ_ACTIONS, TableStorage

#: GC steps that read adopted files (plan: HEAD of superseded originals; retention: splices;
#: purge and report: the superseded originals' versions, issue 35 items 3 and 13)
GC_READERS = (PLAN.name, RETENTION.name, PURGE.name, REPORT.name)


class AdoptedData(Construct):
    """Notifications and least-privilege grants for data adopted in place.

    Attributes:
        prefixes: one :class:`~infra.constructs.lake.PrefixGrants` per adopted prefix.
        readers: the functions and roles granted read on them.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        adopt: AdoptConfig,
        storage: TableStorage,
        ingest: Ingest,
        erasure: ErasureFunctions,
        gc: GarbageCollection,
    ) -> None:
        super().__init__(scope, construct_id)
        trigger, job_role = ingest.trigger, ingest.job_role
        delete_handler, splice_worker = erasure.delete_handler, erasure.splice_worker
        fn = trigger.function
        fn.add_environment(c.ENV_ADOPT_IN_PLACE, "true" if adopt.in_place else "false")
        fn.add_environment(c.ENV_ADOPT_OWNERSHIP, "true" if adopt.ownership else "false")
        if adopt.prefixes:
            fn.add_environment(c.ENV_ADOPT_PREFIXES, ",".join(p.uri for p in adopt.prefixes))
        names = dict.fromkeys(p.bucket for p in adopt.prefixes)
        buckets = {
            n: s3.Bucket.from_bucket_name(self, f"Bucket{i}", n) for i, n in enumerate(names)
        }
        self.prefixes = [
            PrefixGrants(buckets[p.bucket], p, tag=f"Adopt{i}")
            for i, p in enumerate(adopt.prefixes)
        ]
        sweep = gc.functions[SWEEP.name].function
        self.readers: list[iam.IGrantable] = [
            delete_handler.function,
            splice_worker.function,
            fn,
            job_role,
            *(gc.functions[n].function for n in GC_READERS),
        ]
        for p in self.prefixes:
            buckets[p.where.bucket].add_event_notification(
                s3.EventType.OBJECT_CREATED,
                s3n.LambdaDestination(fn),
                s3.NotificationKeyFilter(prefix=f"{p.where.prefix}/"),
            )
            for reader in self.readers:
                p.grant_table_read(reader)
            if adopt.ownership:
                p.grant_table_read(sweep)
                p.grant_table_delete(
                    sweep,
                    "*",
                    sid="DeleteSupersededOriginals",
                    reason="GC's sweep deletes adopted originals that an erasure splice "
                    "superseded (the table owns what it adopted), after the grace period; "
                    "only this step, only under the adopted prefix.",
                )
                for name in (PURGE.name, REPORT.name):  # read every version of the originals
                    p.grant_list(
                        gc.functions[name].function,
                        actions=["s3:ListBucketVersions"],
                        sid="ListOriginalVersions",
                    )
                p.grant_table_delete(
                    gc.functions[PURGE.name].function,
                    "*",
                    actions=["s3:DeleteObjectVersion"],
                    sid="PurgeOriginalVersions",
                    reason="GC's purge deletes every version of adopted originals an erasure "
                    "superseded in a versioned bucket (their bytes hold the erased rows); "
                    "only this step, only under the adopted prefix.",
                )
        if adopt.in_place:
            for reader in (delete_handler.function, splice_worker.function):
                storage.grant_incoming_read(reader)
            for name in GC_READERS:
                self._incoming(storage, gc.functions[name].function, READ_ACTIONS, "Read")
            if adopt.ownership:
                self._incoming(storage, sweep, ("s3:DeleteObject",), "Delete")
        self._owner_markers(
            buckets, (fn, job_role, gc.functions[PLAN.name].function), storage, adopt
        )
        cdk.CfnOutput(
            self,
            "AdoptedPrefixes",
            value=",".join(
                [p.uri for p in adopt.prefixes] + ([c.INCOMING_PREFIX] * adopt.in_place)
            ),
        )

    @staticmethod
    def _incoming(
        storage: TableStorage,
        fn: iam.IGrantable,
        actions: tuple[str, ...],
        verb: str,
        prefix: str = c.INCOMING_PREFIX.rstrip("/"),
    ) -> None:
        """``actions`` on the uploads adopted in place under ``incoming/`` (or ``prefix``:
        their ownership markers)."""
        fn.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(
                sid=f"{verb}AdoptedUploads",
                actions=list(actions),
                resources=[storage.bucket.arn_for_objects(f"{prefix}/*")],
            )
        )
        cfn_bucket = storage.bucket.node.default_child
        assert isinstance(cfn_bucket, cdk.CfnResource)
        principal = fn.grant_principal
        assert isinstance(principal, Construct)
        acknowledge(
            principal,
            "AwsSolutions-IAM5",
            "Uploads under incoming/ adopted in place are data files of the table (their "
            "names are the uploader's): GC reads them, and its sweep alone deletes the ones "
            "an erasure splice superseded; their ownership markers under _lethe/owners/ are "
            "named by a hash of each object's URI, known at run time.",
            f"Resource::{arn_ref(cfn_bucket, '/' + prefix + '/*')}",
        )

    def _owner_markers(
        self,
        buckets: dict[str, s3.IBucket],
        claimers: tuple[iam.IGrantable, ...],
        storage: TableStorage,
        adopt: AdoptConfig,
    ) -> None:
        """Ownership markers (lethe.erasure.ownership), per bucket: whoever adopts claims (upload
        trigger, EMR job role), GC's plan checks them before its sweep deletes (and claims an
        unmarked original for its table): read, list and write ``_lethe/owners/``."""
        markers = c.OWNER_MARKER_PREFIX.rstrip("/")
        for i, (name, bucket) in enumerate(buckets.items()):
            owners = PrefixGrants(bucket, S3Prefix(name, markers), tag=f"Owners{i}")
            for g in claimers:
                owners.grant_table_read(g)
                owners.grant_table_put(g, "*", sid="ClaimAdoptedObjects")
        if adopt.in_place:  # uploads adopted where they are: markers in the table's bucket
            for g in claimers:
                self._incoming(storage, g, ("s3:GetObject", "s3:PutObject"), "Claim", markers)
                g.grant_principal.add_to_principal_policy(
                    iam.PolicyStatement(
                        sid="ListOwnerMarkers",
                        actions=["s3:ListBucket"],
                        resources=[storage.bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": [f"{markers}/*"]}},
                    )
                )
