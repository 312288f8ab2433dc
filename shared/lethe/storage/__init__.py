"""Storage: the only layer that talks to S3, and where a table's objects live."""
