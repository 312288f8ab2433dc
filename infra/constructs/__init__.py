"""One construct per concern; ``infra/stack.py`` composes them into ``LetheStack``."""

from infra.constructs.adopt import AdoptedData
from infra.constructs.base import Foundation
from infra.constructs.erasure import ErasureFunctions
from infra.constructs.gc import GarbageCollection
from infra.constructs.iceberg import IcebergCatalog
from infra.constructs.ingest import Ingest
from infra.constructs.lake import LakeTables
from infra.constructs.monitoring import Monitoring
from infra.constructs.queues import RequestQueues, WorkQueue
from infra.constructs.runtime import LambdaRuntime, LetheFunction
from infra.constructs.storage import TableStorage

__all__ = [
    "AdoptedData",
    "ErasureFunctions",
    "Foundation",
    "GarbageCollection",
    "IcebergCatalog",
    "Ingest",
    "LakeTables",
    "LambdaRuntime",
    "LetheFunction",
    "Monitoring",
    "RequestQueues",
    "TableStorage",
    "WorkQueue",
]
