"""The ``lethe`` command line: the public API from a shell.

Examples::

    lethe create s3://b/events --schema events.parquet --key id
    lethe append s3://b/events data.csv
    lethe scan s3://b/events --where "customer_id = 7" --columns id,payload
    lethe delete s3://b/events --where "id in [1,2,3]" --request-id r-1
    lethe history s3://b/events
    lethe inspect s3://b/events data/2026/11/22/16/ab.parquet
    lethe iceberg publish s3://b/events
    lethe erasures s3://b/events --pending --older-than 25d
    lethe report s3://b/events --html report.html
    lethe index create s3://b/events email
    lethe retention set s3://b/events --column event_time --keep 400d
    lethe lake forget s3://b/_lethe customer 42 --request-id gdpr-42

Long commands (append, erase, purge, compact, gc, iceberg publish, index create, adopt, lake
forget, retention sweep) show their progress on stderr: bars on a terminal, a few plain lines
elsewhere, nothing with ``-q``/``--quiet`` (:mod:`lethe.cli.bars`). Data and ``--json``
output go to stdout alone.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from typing import NoReturn

from botocore.exceptions import BotoCoreError

from lethe import __version__, errors
from lethe.cli import adopt, erasures, iceberg, index, lake, ops, retention, schema, tables
from lethe.cli.bars import reporter
from lethe.cli.common import parse_where
from lethe.process import run_main

__all__ = ["console_main", "main", "parse_where"]


QUIET_HELP = "no progress on stderr, and no warnings (errors still)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lethe", description="Parquet tables on S3 that can forget.")
    p.add_argument("--version", action="version", version=f"lethe {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log what Lethe does (INFO)")
    p.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    _aws_options(p, default=None)
    sub = p.add_subparsers(dest="cmd", required=True)
    tables.register(sub)  # create, append, scan, history, inspect
    ops.register(sub)  # delete, erase, purge, gc, verify
    iceberg.register(sub)  # iceberg publish
    erasures.register(sub)  # erasures, report
    index.register(sub)  # index create|drop|list
    retention.register(sub)  # retention set|show|clear|sweep
    lake.register(sub)  # lake create|add|map|tables|subjects|forget|resume|window[-set]|...
    schema.register(sub)  # schema show|add|drop|rename|widen|optional
    adopt.register(sub)  # adopt URI SOURCE
    _quiet_everywhere(p)
    _default_help(p, ())
    return p


# Help for the arguments that mean the same in every command (by destination), and for the
# few named per command; a new argument without help fails tests/test_cli_habits.py.
SHARED_HELP = {
    "uri": "the table, s3://bucket/prefix",
    "request_id": "an id for this request: a redelivered or retried request with the same id "
    "commits nothing new (and its receipt is found by it)",
    "json": "print a JSON document (for scripts) instead of text",
    "columns": "columns to read, comma-separated (default: all)",
    "key": "the key column (unique per row; deletes and lookups by it are cheapest)",
    "target_file_bytes": "bytes per data file the writer aims at (default 256 MiB)",
    "row_group_bytes": "bytes per row group the writer aims at (default 16 MiB)",
    "iceberg_format_version": "the Iceberg view's format: 3 (deletion vectors) or 2",
    "min_deleted_fraction": "rewrite files with at least this fraction of rows deleted "
    "(default 0.2)",
    "partitioning": "hive: key=value/ folders become partition columns; none: no partitions",
    "mode": "erase: remove the rows physically (splice); logical: deletion vectors only",
}
PATH_HELP = {
    ("lake",): {"uri": "the lake, s3://bucket/prefix (where lake.json lives)"},
    ("lake", "add"): {"table": "a table to add, s3://bucket/prefix"},
    ("lake", "map"): {
        "kind": "the kind of subject (customer, email, ...)",
        "table": "the table, s3://bucket/prefix (added to the lake already)",
        "column": "the column of that table that holds the subject",
    },
    ("lake", "forget"): {"kind": "the kind of subject, as mapped (lethe lake subjects)"},
    ("index",): {
        "action": "create an index on COLUMN, drop it, or list the table's indexes",
        "column": "the indexed column (create, drop)",
    },
    ("retention",): {
        "action": "set a row TTL, show it, clear it, or sweep (drop expired rows now)"
    },
    ("schema",): {
        "action": "show the schema, or change it: add NAME TYPE, drop NAME, rename OLD NEW, "
        "widen NAME TYPE, optional NAME; uploads: where ingest uploads go",
        "args": "the action's arguments (see action)",
    },
}


def _default_help(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
    """Fill in the help of arguments that have none from :data:`PATH_HELP` (the most
    specific command path first) and :data:`SHARED_HELP`."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                _default_help(child, (*path, name))
        elif not action.help:
            for n in range(len(path), -1, -1):
                found = PATH_HELP.get(path[:n], {}).get(action.dest)
                if found:
                    action.help = found
                    break
            else:
                action.help = SHARED_HELP.get(action.dest)


AWS_OPTIONS = {  # option -> (the environment variable boto3 reads, help)
    "endpoint_url": (
        "AWS_ENDPOINT_URL",
        "S3 endpoint (MinIO, moto, a VPC endpoint), as aws --endpoint-url",
    ),
    "profile": ("AWS_PROFILE", "a named profile of ~/.aws/config, as aws --profile"),
    "region": ("AWS_REGION", "the AWS region, as aws --region"),
}


def _aws_options(p: argparse.ArgumentParser, *, default: object) -> None:
    for name, (_, text) in AWS_OPTIONS.items():
        p.add_argument("--" + name.replace("_", "-"), default=default, help=text)


def _quiet_everywhere(p: argparse.ArgumentParser) -> None:
    """``-q`` and the aws CLI's ``--endpoint-url``, ``--profile`` and ``--region`` also after
    a command's name (``lethe erase ... -q``), in every subcommand."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                child.add_argument(
                    "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP
                )
                _aws_options(child, default=argparse.SUPPRESS)
                _quiet_everywhere(child)


@contextlib.contextmanager
def _aws_environment(args: argparse.Namespace) -> Iterator[None]:
    """The aws CLI options as the environment boto3 reads, for this command only (restored
    after: ``main`` also runs in-process, in tests and notebooks)."""
    given = {
        env: value
        for name, (env, _) in AWS_OPTIONS.items()
        if (value := getattr(args, name, None)) is not None
    }
    saved = {env: os.environ.get(env) for env in given}
    os.environ.update(given)
    try:
        yield
    finally:
        for env, old in saved.items():
            if old is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = old


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else (logging.ERROR if args.quiet else logging.WARNING),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        with _aws_environment(args), reporter(quiet=args.quiet) as args.progress:
            return int(args.fn(args))
    except errors.TableNotFound as e:
        uri = e.uri or getattr(args, "uri", None) or "s3://BUCKET/PREFIX"
        print(
            f"lethe: TableNotFound: no Lethe table at {uri}; create it with "
            f"`lethe create {uri} --schema FILE --key COLUMN`",
            file=sys.stderr,
        )
        return 2
    except errors.LakeNotFound as e:
        print(f"lethe: {e}", file=sys.stderr)  # says the command that creates one
        return 2
    except errors.LetheError as e:
        print(f"lethe: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    except BotoCoreError as e:  # no credentials, an endpoint that does not answer, ...
        print(
            f"lethe: cannot reach S3: {e} (see --endpoint-url, --profile, --region)",
            file=sys.stderr,
        )
        return 2


def console_main() -> NoReturn:
    """The ``lethe`` console script: :func:`main`, ended by :func:`lethe.process.run_main`
    (quiet on a closed pipe, immune to pyarrow's abort at interpreter exit)."""
    run_main(main)
