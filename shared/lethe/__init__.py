"""Lethe: Parquet tables on Amazon S3 that can forget.

Example:
    >>> import lethe
    >>> lethe.Table.__name__
    'Table'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from lethe import errors

if TYPE_CHECKING:  # the names below load on first use: `import lethe` stays cheap
    from lethe.adopt.plan import AdoptPlan
    from lethe.audit.receipts import ErasureReceipt
    from lethe.erasure.deletes import BatchDeleteResult, DeleteRequest, DeleteResult
    from lethe.lake import Lake, LakeReceipt, LakeRequestResult
    from lethe.progress import Progress, ProgressEvent
    from lethe.storage.store import IOCounters, S3Store
    from lethe.table import CommitResult, SnapshotInfo, Table

_LAZY = {
    "AdoptPlan": "lethe.adopt.plan",
    "BatchDeleteResult": "lethe.erasure.deletes",
    "DeleteRequest": "lethe.erasure.deletes",
    "DeleteResult": "lethe.erasure.deletes",
    "Lake": "lethe.lake",
    "LakeReceipt": "lethe.lake",
    "LakeRequestResult": "lethe.lake",
    "Progress": "lethe.progress",
    "ProgressEvent": "lethe.progress",
    "ErasureReceipt": "lethe.audit.receipts",
    "IOCounters": "lethe.storage.store",
    "S3Store": "lethe.storage.store",
    "CommitResult": "lethe.table",
    "SnapshotInfo": "lethe.table",
    "Table": "lethe.table",
}


def __getattr__(name: str) -> Any:
    """Load a public name (or a subpackage such as ``lethe.gc``) on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"lethe.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"lethe.{name}":
            raise
        raise AttributeError(f"module 'lethe' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
