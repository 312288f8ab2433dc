"""Adopting existing data in place (issue 28): sources, plans and the adoption commit.

:mod:`lethe.adopt.source` holds the values every source reader returns;
:mod:`lethe.adopt.hive` reads a Parquet prefix (Hive partitions), :mod:`lethe.adopt.footers`
the files' footers, :mod:`lethe.adopt.plan` makes the schema and the plan (erasure readiness),
:mod:`lethe.adopt.core` commits (:meth:`lethe.Table.adopt`), :mod:`lethe.adopt.rewrite`
rewrites the unready files.
"""

from lethe.adopt.plan import AdoptPlan, FilePlan
from lethe.adopt.source import SourceFile, SourceFormat, SourceListing

__all__ = ["AdoptPlan", "FilePlan", "SourceFile", "SourceFormat", "SourceListing"]
