"""The Lambda functions' settings: typed, frozen, read once at cold start, one way to fail.

Each handler module reads its model at import (the cold start), e.g.
``SETTINGS = SpliceSettings.from_env()``. Every field names its environment variable
(``validation_alias``); an empty variable counts as unset. Whatever is missing or invalid
fails the cold start with one :class:`SettingsError` that names every offending variable and
says why, so Lambda reports an init error instead of failing later, record by record.

Lambda puts the code root (``functions/``) first on ``sys.path``: handlers import this module
as ``_settings`` (the tests and ``devtools.local`` put ``functions/`` on ``sys.path`` too).

Example:
    >>> SpliceSettings.from_env({"LETHE_SPLICE_MAX_BYTES": "1024"}).max_bytes
    1024
    >>> SpliceSettings.from_env({"LETHE_SPLICE_MAX_BYTES": "-1"})
    Traceback (most recent call last):
    ...
    _settings.SettingsError: splice settings: LETHE_SPLICE_MAX_BYTES='-1': must be a positive byte count
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Annotated, Any, ClassVar, Self

from pydantic import AliasChoices, BeforeValidator, Field, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as SourceError
from pydantic_settings.sources.utils import parse_env_vars

from lethe import errors
from lethe import gc as lethe_gc
from lethe.catalog.grace import parse_duration
from lethe.ingest import EmrJobSettings
from lethe.storage.store import parse_s3_uri

__all__ = [
    "DeleteRequestsSettings",
    "GcSettings",
    "IcebergGlueSettings",
    "IngestTriggerSettings",
    "SettingsError",
    "SpliceSettings",
]


class SettingsError(errors.InvalidRequest):
    """A function's environment is incomplete or malformed (fails the cold start); the
    message names each variable and what is wrong with it."""


# --- value parsers (``str`` from the environment -> typed value; ValueError says why) --------


def _count(what: str, *, positive: bool = False) -> Callable[[Any], Any]:
    def parse(raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw  # a default, or a value given in Python
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < (1 if positive else 0):
            raise ValueError(f"must be {what}")
        return value

    return parse


def _lethe(parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A lethe parser whose :class:`~lethe.errors.InvalidRequest` becomes a ValueError."""

    def run(raw: Any) -> Any:
        try:
            return parse(raw)
        except errors.InvalidRequest as e:
            raise ValueError(str(e)) from e

    return run


def _s3_uri(what: str) -> Callable[[Any], Any]:
    def check(raw: Any) -> Any:
        if isinstance(raw, str) and not raw.startswith("s3://"):
            raise ValueError(f"must be {what}")
        return raw

    return check


def _table_uri(raw: Any) -> Any:
    if isinstance(raw, str):
        parse_s3_uri(raw)  # InvalidRequest says what is wrong
    return raw


def _prefixes(raw: Any) -> Any:
    """``s3://b/raw/events,s3://c/landing`` -> ``(("b", "raw/events/"), ("c", "landing/"))``."""
    if not isinstance(raw, str):
        return raw
    out = []
    for uri in (u.strip() for u in raw.split(",")):
        if not uri:
            continue
        bucket, prefix = parse_s3_uri(uri)  # InvalidRequest says what is wrong
        if not prefix.strip("/"):
            raise ValueError(f"{uri!r}: an adopted prefix, not a whole bucket")
        out.append((bucket, prefix.strip("/") + "/"))
    return tuple(out)


def _versioned(raw: Any) -> bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    flag = str(raw).strip().lower()
    if flag not in ("true", "false", "auto"):
        raise ValueError("use true, false or auto")
    return None if flag == "auto" else flag == "true"


ByteCount = Annotated[int, BeforeValidator(_count("a byte count"))]
Hours = Annotated[int, BeforeValidator(_count("a number of hours"))]
PositiveBytes = Annotated[int, BeforeValidator(_count("a positive byte count", positive=True))]
Duration = Annotated[timedelta, BeforeValidator(_lethe(parse_duration))]
RetentionRule = Annotated[
    lethe_gc.Retention, NoDecode, BeforeValidator(_lethe(lethe_gc.Retention.parse))
]
TableUri = Annotated[str, BeforeValidator(_s3_uri("an s3:// URI like s3://bucket/prefix"))]
LakeUri = Annotated[str | None, BeforeValidator(_s3_uri("an s3:// URI like s3://bucket/_lethe"))]
JobScript = Annotated[str, BeforeValidator(_s3_uri("the s3:// URI of ingest.py"))]
AdoptPrefixes = Annotated[tuple[tuple[str, str], ...], NoDecode, BeforeValidator(_lethe(_prefixes))]


# --- the common base ---------------------------------------------------------------------------


class _Environment(EnvSettingsSource):
    """Environment variables from ``environ`` (the process environment, or a given mapping)."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        # pydantic-settings' own hook (it reads os.environ here); tests/functions pin it
        return parse_env_vars(
            self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


class _Settings(BaseSettings):
    """Environment variables only (no ``.env`` file, no secrets directory), exact names."""

    model_config = SettingsConfigDict(
        frozen=True,
        case_sensitive=True,
        env_ignore_empty=True,
        extra="ignore",
        arbitrary_types_allowed=True,
    )
    what: ClassVar[str] = "settings"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # from_env() reads the environment, once

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        """Read the settings from ``env`` (default: the process environment).

        Raises:
            SettingsError: naming every missing or invalid variable and why.
        """
        try:
            return cls(**_Environment(cls, os.environ if env is None else env)())
        except ValidationError as e:
            raise SettingsError(f"{cls.what}: {_explain(cls, e)}") from None
        except SourceError as e:  # a value the source itself cannot decode
            raise SettingsError(f"{cls.what}: {e}") from e


def _variable(cls: type[BaseSettings], loc: tuple[int | str, ...]) -> str:
    name = str(loc[0]) if loc else "?"
    field: FieldInfo | None = cls.model_fields.get(name)
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices):
        return " or ".join(str(c) for c in alias.choices)
    return str(alias) if alias else name


def _explain(cls: type[BaseSettings], e: ValidationError) -> str:
    problems = []
    for err in e.errors(include_url=False):
        var = _variable(cls, err["loc"])
        if err["type"] == "missing":
            problems.append(f"{var} is required but not set")
        else:
            why = err["ctx"]["error"] if err["type"] == "value_error" else err["msg"]
            problems.append(f"{var}={err.get('input')!r}: {why}")
    return "; ".join(problems)


def _env(name: str, *more: str) -> Any:
    """The field's environment variable(s): the first one set wins."""
    return AliasChoices(name, *more) if more else name


# --- one model per function --------------------------------------------------------------------


class DeleteRequestsSettings(_Settings):
    """The delete-request function: where erase requests queue their splices, and the lake
    that lake requests (``subject``, ``values``) go to (none: they fail with a reason)."""

    what: ClassVar[str] = "delete requests settings"

    splice_queue_url: str | None = Field(None, validation_alias=_env("LETHE_SPLICE_QUEUE_URL"))
    lake_uri: LakeUri = Field(None, validation_alias=_env("LETHE_LAKE_URI"))


class SpliceSettings(_Settings):
    """The splice worker: bytes of row groups per invocation; its own queue, to continue."""

    what: ClassVar[str] = "splice settings"

    max_bytes: PositiveBytes = Field(64 << 20, validation_alias=_env("LETHE_SPLICE_MAX_BYTES"))
    queue_url: str | None = Field(None, validation_alias=_env("LETHE_SPLICE_QUEUE_URL"))
    lake_uri: LakeUri = Field(None, validation_alias=_env("LETHE_LAKE_URI"))


class IngestTriggerSettings(_Settings):
    """The ingest trigger: the table, what to register directly, how to start EMR runs."""

    what: ClassVar[str] = "ingest trigger settings"

    table_uri: TableUri = Field(validation_alias=_env("LETHE_TABLE_URI"))
    incoming_prefix: str = Field("incoming/", validation_alias=_env("LETHE_INCOMING_PREFIX"))
    direct_register_max_bytes: ByteCount = Field(
        256 << 20, validation_alias=_env("LETHE_DIRECT_REGISTER_MAX_BYTES")
    )
    emr_application_id: str = Field(validation_alias=_env("LETHE_EMR_APPLICATION_ID"))
    emr_job_role_arn: str = Field(validation_alias=_env("LETHE_EMR_JOB_ROLE_ARN"))
    emr_entry_point: JobScript = Field(validation_alias=_env("LETHE_EMR_ENTRY_POINT"))
    emr_job_archive: str | None = Field(
        None, validation_alias=_env("LETHE_EMR_JOB_ARCHIVE", "LETHE_EMR_ARCHIVE")
    )
    emr_spark_parameters: str = Field("", validation_alias=_env("LETHE_EMR_SPARK_PARAMETERS"))
    emr_dedupe_hours: Hours = Field(24, validation_alias=_env("LETHE_EMR_DEDUPE_HOURS"))
    # adopt Parquet uploads in place (no copy; Hive directories below the incoming prefix as
    # partition values) instead of registering copies: an external pipeline writes on
    adopt_in_place: bool = Field(False, validation_alias=_env("LETHE_ADOPT_IN_PLACE"))
    adopt_ownership: bool = Field(True, validation_alias=_env("LETHE_ADOPT_OWNERSHIP"))
    # adopted prefixes (``s3://b/raw/events,...``) other writers keep landing files under:
    # each new Parquet object there is adopted in place, its Hive directories below the prefix
    adopt_prefixes: AdoptPrefixes = Field((), validation_alias=_env("LETHE_ADOPT_PREFIXES"))

    def adopted_prefix(self, bucket: str, key: str) -> str | None:
        """The adopted prefix (``raw/events/``) ``s3://bucket/key`` lies under, if any."""
        for b, prefix in self.adopt_prefixes:
            if b == bucket and key.startswith(prefix):
                return prefix
        return None

    @property
    def emr(self) -> EmrJobSettings:
        """How ingest job runs start."""
        return EmrJobSettings(
            application_id=self.emr_application_id,
            execution_role_arn=self.emr_job_role_arn,
            entry_point=self.emr_entry_point,
            archive=self.emr_job_archive,
            extra_spark_parameters=self.emr_spark_parameters,
            lookback=timedelta(hours=self.emr_dedupe_hours),
        )


class GcSettings(_Settings):
    """The GC workflow's steps: the default table and rules (an event may override them)."""

    what: ClassVar[str] = "GC settings"

    table_uri: Annotated[str | None, BeforeValidator(_lethe(_table_uri))] = Field(
        None, validation_alias=_env("LETHE_TABLE_URI")
    )
    retention: RetentionRule = Field(
        lethe_gc.Retention.parse(lethe_gc.DEFAULT_RETENTION),
        validation_alias=_env("LETHE_GC_RETENTION"),
    )
    grace: Duration = Field(
        parse_duration(lethe_gc.DEFAULT_GRACE), validation_alias=_env("LETHE_GC_GRACE")
    )
    erasure_grace: Duration = Field(
        parse_duration(lethe_gc.DEFAULT_ERASURE_GRACE),
        validation_alias=_env("LETHE_GC_ERASURE_GRACE"),
    )
    # true, false or auto (None: ask the bucket, which needs s3:GetBucketVersioning)
    versioned: Annotated[bool | None, BeforeValidator(_versioned)] = Field(
        None, validation_alias=_env("LETHE_GC_VERSIONED_BUCKET")
    )


class IcebergGlueSettings(_Settings):
    """The Iceberg view's Glue registration: the database and table it moves forward."""

    what: ClassVar[str] = "iceberg glue settings"

    database: str = Field(validation_alias=_env("LETHE_GLUE_DATABASE"))
    table: str = Field(validation_alias=_env("LETHE_GLUE_TABLE"))
