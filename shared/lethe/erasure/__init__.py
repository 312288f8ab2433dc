"""Rows leaving a table: deletes, erasure by splice and its fan-out, row retention, and who owns adopted objects."""
