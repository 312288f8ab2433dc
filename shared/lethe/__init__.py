"""Lethe: Parquet tables on Amazon S3 that can forget.

Example:
    >>> import lethe
    >>> lethe.Table.__name__
    'Table'
"""

from lethe import errors
from lethe.adopt.plan import AdoptPlan
from lethe.deletes import BatchDeleteResult, DeleteRequest, DeleteResult
from lethe.lake import Lake, LakeReceipt, LakeRequestResult
from lethe.progress import Progress, ProgressEvent
from lethe.receipts import ErasureReceipt
from lethe.store import IOCounters, S3Store
from lethe.table import CommitResult, SnapshotInfo, Table

__all__ = [
    "AdoptPlan",
    "BatchDeleteResult",
    "CommitResult",
    "DeleteRequest",
    "DeleteResult",
    "ErasureReceipt",
    "IOCounters",
    "Lake",
    "LakeReceipt",
    "LakeRequestResult",
    "Progress",
    "ProgressEvent",
    "S3Store",
    "SnapshotInfo",
    "Table",
    "errors",
]
__version__ = "0.1.0"
