"""The lake: a registry of Lethe tables, the subjects they hold, and one request per person
across all of them (DESIGN §6c).

Modules, in dependency order: :mod:`~lethe.lake.model` (the ``lake.json`` document and its
changes, pure), :mod:`~lethe.lake.receipt` (one receipt per request from the tables' own
receipts), :mod:`~lethe.lake.core` (:class:`Lake`: the registry's compare-and-swap, forget
requests recorded, applied per table, resumed).

Example:
    >>> import lethe
    >>> lethe.Lake.__name__
    'Lake'
"""

from lethe.lake.core import ForgetRequest, Lake, LakeRequestResult, LakeTableResult
from lethe.lake.receipt import LakeReceipt, LakeTableReceipt

__all__ = [
    "ForgetRequest",
    "Lake",
    "LakeReceipt",
    "LakeRequestResult",
    "LakeTableReceipt",
    "LakeTableResult",
]
