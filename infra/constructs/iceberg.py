"""The Iceberg view in the AWS Glue Data Catalog, so that Athena, EMR and Redshift Spectrum
find the table by name.

* A Glue database (``lethe``) holding one Glue table of type ICEBERG, named after the table
  prefix's last part (``tables/main`` -> ``main``).
* A function (``iceberg_glue.handler.handler``) on S3 ObjectCreated of
  ``<table>/metadata/*.metadata.json``: every metadata file the view's publishers write
  (committers of a table with ``iceberg_view``, ``lethe iceberg publish``, Spark jobs) moves
  the Glue table's ``metadata_location`` forward (:func:`lethe.iceberg.glue.register`).
  It holds Glue rights on that one table and no S3 right at all: the event's key is all it
  reads. S3 invokes it asynchronously: two retries, then its dead-letter queue (alarmed).
"""

from __future__ import annotations

import re

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import constants as c
from infra.constructs.base import Foundation
from infra.constructs.queues import queue_encryption
from infra.constructs.runtime import LetheFunction, ObjectCreated


def glue_table_name(table_prefix: str) -> str:
    """A Glue table name from a table prefix: its last part, lower case, ``[a-z0-9_]``.

    >>> glue_table_name("tables/Main-2")
    'main_2'
    """
    last = table_prefix.strip("/").rsplit("/", 1)[-1].lower()
    return re.sub(r"[^a-z0-9_]", "_", last) or "lethe_table"


REGISTER_ABOUT = (
    "Moves the Glue table of the table's Iceberg view to each newly published metadata file."
)


class IcebergCatalog(Construct):
    """Glue database and the function that keeps the view's Glue table current.

    Attributes:
        database_name, table_name: where Athena finds the view.
        register: the function moving the Glue table to each new metadata file.
        failures: dead-letter queue of S3 events it could not handle.
    """

    def __init__(self, scope: Construct, construct_id: str, *, base: Foundation) -> None:
        super().__init__(scope, construct_id)
        runtime, storage = base.runtime, base.storage
        encryption_key = storage.encryption_key
        stack = cdk.Stack.of(self)
        self.database_name = c.GLUE_DATABASE
        self.table_name = glue_table_name(storage.table_prefix)
        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=stack.account,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=self.database_name,
                description="Lethe tables as Apache Iceberg views (metadata/ under each table)",
            ),
        )
        self.failures = sqs.Queue(self, "RegisterFailures", **queue_encryption(encryption_key))
        env = {
            c.ENV_TABLE_URI: storage.table_uri,
            c.ENV_GLUE_DATABASE: self.database_name,
            c.ENV_GLUE_TABLE: self.table_name,
        }
        metadata = s3.NotificationKeyFilter(
            prefix=storage.key_pattern(c.METADATA_PREFIX), suffix=".metadata.json"
        )
        trigger = ObjectCreated(storage.bucket, metadata, self.failures, encryption_key)
        self.register: LetheFunction = runtime.for_handler(
            self, "Register", c.ICEBERG_GLUE_HANDLER, REGISTER_ABOUT, env, trigger=trigger
        )
        fn = self.register.function
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="RegisterIcebergView",
                actions=["glue:GetTable", "glue:CreateTable", "glue:UpdateTable"],
                resources=[
                    stack.format_arn(service="glue", resource="catalog"),
                    stack.format_arn(
                        service="glue", resource="database", resource_name=self.database_name
                    ),
                    stack.format_arn(
                        service="glue",
                        resource="table",
                        resource_name=f"{self.database_name}/{self.table_name}",
                    ),
                ],
            )
        )
