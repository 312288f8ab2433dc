"""Adopting existing data in place (issue 28): sources, plans and the adoption commit.

:mod:`lethe.adopt.source` holds the values every source reader returns.
"""

from lethe.adopt.source import SourceFile, SourceFormat, SourceListing

__all__ = ["SourceFile", "SourceFormat", "SourceListing"]
