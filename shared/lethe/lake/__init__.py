"""The lake: a registry of Lethe tables, the subjects they hold, and one request per person
across all of them (DESIGN §6c).

Modules, in dependency order: :mod:`~lethe.lake.model` (the ``lake.json`` document and its
changes, pure), :mod:`~lethe.lake.asks` (a request checked before it is recorded: its values
against every mapped column's type), :mod:`~lethe.lake.values` (the per-call values objects:
named before written, deleted with every version once their requests finished),
:mod:`~lethe.lake.results` (what calls return), :mod:`~lethe.lake.receipt` (one receipt per
request from the tables' own receipts and a listing of its values object),
:mod:`~lethe.lake.window` (the erasure window's run, the archive), :mod:`~lethe.lake.forget`
(forget requests recorded, applied per table, spliced, resumed), :mod:`~lethe.lake.core`
(:class:`Lake`: the registry's compare-and-swap, its tables and subjects, cancelling).

Example:
    >>> import lethe
    >>> lethe.Lake.__name__
    'Lake'
"""

from lethe.lake.core import (
    ForgetRequest,
    Lake,
    LakeRequestResult,
    LakeResumeResult,
    LakeTableResult,
)
from lethe.lake.receipt import LakeCopy, LakeReceipt, LakeTableReceipt

__all__ = [
    "ForgetRequest",
    "Lake",
    "LakeCopy",
    "LakeReceipt",
    "LakeRequestResult",
    "LakeResumeResult",
    "LakeTableReceipt",
    "LakeTableResult",
]
