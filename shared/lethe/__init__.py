"""Lethe: Parquet tables on Amazon S3 that can forget.

Example:
    >>> import lethe
    >>> lethe.Table.__name__
    'Table'
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from lethe import errors

if TYPE_CHECKING:  # the names below load on first use: `import lethe` stays cheap
    from lethe.adopt.plan import AdoptPlan
    from lethe.audit.receipts import ErasureReceipt
    from lethe.catalog.committed import CommitResult
    from lethe.erasure.deletes import BatchDeleteResult, DeleteRequest, DeleteResult
    from lethe.lake import Lake, LakeReceipt, LakeRequestResult
    from lethe.progress import Progress, ProgressEvent
    from lethe.storage.counters import IOCounters
    from lethe.storage.store import S3Store
    from lethe.table import SnapshotInfo, Table

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
    "IOCounters": "lethe.storage.counters",
    "S3Store": "lethe.storage.store",
    "CommitResult": "lethe.catalog.committed",
    "SnapshotInfo": "lethe.table",
    "Table": "lethe.table",
}


_MOVED = {
    f"lethe.{old}": f"lethe.{new}"
    for old, new in {
        "store": "storage.store",
        "layout": "storage.layout",
        "manifest": "catalog.manifest",
        "snapshot": "catalog.snapshot",
        "schemas": "catalog.schemas",
        "reader": "reading.reader",
        "scan": "reading.scan",
        "filters": "reading.filters",
        "writer": "writing.writer",
        "deletes": "erasure.deletes",
        "erase": "erasure.erase",
        "retention": "erasure.retention",
        "receipts": "audit.receipts",
        "evidence": "audit.evidence",
        "verify": "audit.verify",
        "compaction": "maintenance.compaction",
        "clustering": "maintenance.clustering",
    }.items()
}
"""Modules of the flat layout before the library was laid out in layers (issue 38), by
their place now: tools written against the old paths (the peer bench imports
``lethe.store``) keep working; each old name is the very module of its new place."""


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path (:data:`_MOVED`) as the module at its new place."""

    def __init__(self) -> None:
        self.specs: dict[str, Any] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(_MOVED[spec.name])
        self.specs[spec.name] = module.__spec__  # the import system sets the old one next
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new place has run already: it keeps its own spec."""
        spec = module.__spec__
        if spec is not None:
            module.__spec__ = self.specs.pop(spec.name, spec)


if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.append(_MovedModules())


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
