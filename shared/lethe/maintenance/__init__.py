"""Maintenance rewrites: compaction and clustering (garbage collection is :mod:`lethe.gc`)."""
