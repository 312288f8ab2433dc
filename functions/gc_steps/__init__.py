"""Garbage-collection workflow steps (Lambda code root: ``functions/``)."""
