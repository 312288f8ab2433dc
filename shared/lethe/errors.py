"""Typed errors of Lethe.

Every error raised by the library derives from :class:`LetheError`. botocore errors are
translated only at the S3 boundary (:mod:`lethe.storage.store`), always with ``raise ... from e``.
"""

from __future__ import annotations


class LetheError(Exception):
    """Root of every error raised by Lethe."""


# --- object store -------------------------------------------------------------------------
class StoreError(LetheError):
    """An S3 request failed for a reason not covered by a more specific error."""


class NotFound(StoreError):
    """The object (or bucket) does not exist."""


class PreconditionFailed(StoreError):
    """HTTP 412: an ``If-Match`` / ``If-None-Match`` condition did not hold."""


class ConditionalRequestConflict(StoreError):
    """HTTP 409: another conditional write on the same key is in flight; retry it."""


class AccessDenied(StoreError):
    """HTTP 403: the credentials may not perform this request."""


class Throttled(StoreError):
    """HTTP 503 SlowDown and friends: back off and retry."""


# --- catalog and table --------------------------------------------------------------------
class TableNotFound(LetheError):
    """No table exists at the given URI (no ``_latest_manifest`` head).

    ``uri`` names the table looked for, so that a front end can say how to create it.
    """

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri


class TableExists(LetheError):
    """``Table.create`` found a table already at the given URI."""


class UnsupportedFormat(LetheError):
    """An object in a format version newer than this Lethe reads (it is not corrupt: a newer
    Lethe wrote it); upgrade Lethe to read it."""


class CorruptManifest(LetheError):
    """A head or manifest object is truncated, not JSON, or not a known manifest format."""


class SnapshotNotFound(LetheError):
    """The requested version does not exist (never committed, or expired by GC)."""


class CommitConflict(LetheError):
    """A commit could not land: attempts exhausted, or the change no longer applies."""


class StaleSnapshot(LetheError):
    """A data object changed under a pinned snapshot (its ETag no longer matches)."""


class InvalidRequest(LetheError):
    """The caller's input is malformed (filters, schema, options, delete request)."""


class RequestIdConflict(InvalidRequest):
    """A request id already names a different request (another filter or mode): an id
    identifies one request, so this one is refused rather than silently acknowledged."""


class OwnedElsewhere(InvalidRequest):
    """An object to adopt is owned (or referenced) by another Lethe table, or lies under
    another table's prefix (:mod:`lethe.erasure.ownership`); ``tables`` names them."""

    def __init__(self, message: str, *, tables: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.tables = tables


class SchemaMismatch(InvalidRequest):
    """Data offered to a table does not match the table's schema."""


class SchemaEvolutionError(InvalidRequest):
    """A schema change breaks a rule (narrowing, the key, a column an index uses, a name
    that exists): the message names the column and the rule."""


class CorruptDeletionVector(LetheError):
    """A deletion-vector blob or container fails its magic, length or checksum checks."""


class UnsupportedFile(LetheError):
    """A Parquet file uses a feature Lethe refuses to operate on (e.g. encryption)."""


class SpliceRefused(UnsupportedFile):
    """A row-group splice was refused before anything was written; the reason says why."""


class QueueError(LetheError):
    """A queue refused messages (SQS ``SendMessageBatch`` failures); nothing was lost: the
    caller's request stays pending and is retried."""


class GraceExpired(CommitConflict):
    """A commit's new objects are older than the table's GC grace allows (minus its margin):
    GC may already have removed them, so the commit was refused (docs/format.md §9)."""


# --- garbage collection -------------------------------------------------------------------
class GcError(LetheError):
    """Root of the garbage collector's own errors."""


class GcConflict(GcError):
    """The table changed under a GC run in a way that makes its plan unsafe to apply (the
    table was replaced, or a manifest of its chain vanished). Nothing unsafe was deleted;
    start a new run."""


class GcRunNotFound(GcError):
    """A workflow step names a run (or batch) whose workspace object does not exist."""


class IcebergUnsupported(InvalidRequest):
    """The Iceberg view cannot publish this table exactly (a column type without an exact
    Iceberg equivalent, a format-1 manifest, an inline DV): refused rather than published
    wrong; the message names what and why."""


class UnsupportedSource(InvalidRequest):
    """An existing table offered for adoption (Iceberg, Delta, Glue) uses something its reader
    does not handle exactly (an Iceberg equality delete, a Delta feature, a non-Parquet Glue
    table): refused rather than adopted with rows brought back or lost; the message names
    the file or table and the reason."""


# --- the lake ------------------------------------------------------------------------------
class LakeNotFound(LetheError):
    """No lake registry (``lake.json``) at the given URI; create it with ``Lake.create``
    (``lethe lake create``). ``uri`` names the lake looked for."""

    def __init__(self, message: str, *, uri: str | None = None) -> None:
        super().__init__(message)
        self.uri = uri


class LakeExists(LetheError):
    """``Lake.create`` found a lake registry already at the given URI."""


class RequestIncomplete(LetheError):
    """A lake request is recorded but some mapped table did not commit it yet (the message
    names how many and why); running the request again finishes it."""
