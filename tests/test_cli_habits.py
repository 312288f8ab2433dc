"""What a shell user expects of ``lethe``: --version, ``is [not] null``, every row to stdout in
the format a pipe wants, errors that say how to write it (moto)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lethe
from lethe.cli import main


@pytest.fixture
def table(table_uri: str) -> str:
    t = lethe.Table.create(table_uri, EVENTS, key="id")
    data = events(0, 60)
    cust = data.column("customer_id").to_pylist()
    data = data.set_column(
        2,
        "customer_id",
        pa.array([None if i % 4 == 0 else c for i, c in enumerate(cust)], pa.int32()),
    )
    t.append(data)
    return table_uri


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"lethe {lethe.__version__}"


def test_is_null_and_is_not_null(table: str, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    def ids(where: str) -> list[int]:
        assert main(["scan", table, "--where", where, "--format", "jsonl"]) == 0
        return sorted(json.loads(x)["id"] for x in capsysbinary.readouterr().out.splitlines())

    nulls = ids("customer_id is null")
    assert nulls == list(range(0, 60, 4))
    assert ids("customer_id IS NOT NULL") == [i for i in range(60) if i % 4]
    assert sorted(ids("customer_id is not null") + nulls) == list(range(60))
    assert main(["delete", table, "--where", "customer_id is null", "--request-id", "n"]) == 0
    assert f"deleted {len(nulls)} rows" in capsysbinary.readouterr().out.decode()
    assert lethe.Table.open(table).scan().column("customer_id").null_count == 0


def test_scan_formats_to_stdout(table: str, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    want = lethe.Table.open(table).scan(filters=[("id", "<", 30)])
    args = ["scan", table, "--where", "id < 30", "--format"]
    assert main([*args, "csv"]) == 0
    got = pacsv.read_csv(io.BytesIO(capsysbinary.readouterr().out))
    assert got.num_rows == 30 and got.column("id").to_pylist() == want.column("id").to_pylist()
    assert main([*args, "parquet"]) == 0
    assert pq.read_table(io.BytesIO(capsysbinary.readouterr().out)).equals(want)
    assert main([*args, "jsonl"]) == 0
    rows = [json.loads(x) for x in capsysbinary.readouterr().out.decode().splitlines()]
    assert [r["id"] for r in rows] == want.column("id").to_pylist()
    assert rows[1]["event_time"] == want.column("event_time")[1].as_py().isoformat()
    assert main([*args, "table", "--limit", "3"]) == 0
    assert "(30 rows, showing 3)" in capsysbinary.readouterr().out.decode()


def test_scan_out_takes_the_format_from_the_extension(
    table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rows.jsonl"
    assert main(["scan", table, "--out", str(out)]) == 0
    assert "wrote 60 rows" in capsys.readouterr().out
    assert len(out.read_text().splitlines()) == 60
    pq_out = tmp_path / "rows.parquet"
    assert main(["scan", table, "--out", str(pq_out), "--format", "parquet"]) == 0
    assert pq.read_table(pq_out).num_rows == 60


def test_jsonl_through_a_real_pipe(table: str) -> None:
    """``lethe scan ... --format jsonl | <a JSON reader>``: stdout carries only the rows."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lethe.cli",
            "scan",
            table,
            "--where",
            "id in [3, 5]",
            "--format",
            "jsonl",
        ],
        capture_output=True,
        env={**os.environ},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    rows = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    assert sorted(r["id"] for r in rows) == [3, 5]


def test_in_without_a_list_says_how_to_write_one(
    table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["delete", table, "--where", "id in 7", "--request-id", "x"]) == 2
    err = capsys.readouterr().err
    assert "'in' needs a list" in err and "id in [1, 2]" in err
    assert main(["scan", table, "--where", "id ~ 7"]) == 2
    err = capsys.readouterr().err
    assert "cannot parse --where" in err and "is [not] null" in err


WHERE = st.one_of(
    st.text(max_size=30),
    st.builds(
        "{} {} {}".format,
        st.sampled_from(["id", "customer_id", "payload", "event_time", "nope", "1x"]),
        st.sampled_from(["=", "==", "!=", "<", ">=", "in", "not in", "is", "~", "IS NOT"]),
        st.one_of(
            st.sampled_from(["null", "[1, 2]", "[]", "7", "'a'", "[null]", "2026-01-01", "{}"]),
            st.text(max_size=8),
        ),
    ),
)
ARGS = st.fixed_dictionaries(
    {
        "where": st.lists(WHERE, max_size=2),
        "columns": st.one_of(st.none(), st.sampled_from(["id", "id,payload", "nope", ",", ""])),
        "filters": st.one_of(
            st.none(), st.sampled_from(['[["id", "<", 3]]', "[", '[["id"]]', '{"a": 1}', "[]"])
        ),
        "fmt": st.sampled_from(["table", "csv", "jsonl", "parquet"]),
    }
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=ARGS)
def test_any_scan_arguments_end_in_rows_or_a_message_never_a_traceback(
    table: str, capsysbinary: pytest.CaptureFixture[bytes], args: dict[str, Any]
) -> None:
    argv = ["scan", table, "--format", args["fmt"]]
    for w in args["where"]:
        argv += ["--where", w]
    if args["columns"] is not None:
        argv += ["--columns", args["columns"]]
    if args["filters"] is not None:
        argv += ["--filters", args["filters"]]
    try:
        rc = main(argv)  # any exception escaping main is a traceback for the user
    except SystemExit as e:  # argparse's usage error (an option value it cannot take)
        rc = e.code
    err = capsysbinary.readouterr().err.decode()
    assert rc in (0, 2), (argv, rc, err)
    if rc == 2:
        assert err.startswith(("lethe: ", "usage: ")), err
    assert "Traceback" not in err


# File arguments (issue 36): missing, a folder, the wrong format for the name, unwritable
# outputs, names that say no format. Each ends in `lethe: ...` exit 2 or in a result.
def _file_arg(kind: str, tmp: Path) -> str:
    d = tmp / kind
    d.mkdir(exist_ok=True)
    if kind == "missing":
        return str(d / "missing.csv")
    if kind == "folder.csv":
        (d / "sub.csv").mkdir(exist_ok=True)
        return str(d / "sub.csv")
    if kind == "garbage.parquet":
        (d / "x.parquet").write_bytes(b"not parquet at all")
        return str(d / "x.parquet")
    if kind == "garbage.jsonl":
        (d / "x.jsonl").write_text('{"id": 1}\n{"id": \n')
        return str(d / "x.jsonl")
    if kind == "good.jsonl":
        (d / "x.jsonl").write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": "b"}\n')
        return str(d / "x.jsonl")
    if kind == "good.csv":
        (d / "x.csv").write_text("id,name\n1,a\n")
        return str(d / "x.csv")
    if kind == "no-dir":
        return str(d / "no" / "dir" / "x.csv")
    if kind == "x.txt":
        return str(d / "x.txt")
    raise AssertionError(kind)


FILE_KINDS = ("missing", "folder.csv", "garbage.parquet", "garbage.jsonl", "good.jsonl", "good.csv")
OUT_KINDS = ("no-dir", "x.txt", "good.csv", "folder.csv")


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(schema=st.sampled_from(FILE_KINDS), out=st.sampled_from(OUT_KINDS), fmt=st.booleans())
def test_file_arguments_end_in_a_result_or_a_message_never_a_traceback(
    table: str,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    schema: str,
    out: str,
    fmt: bool,
) -> None:
    tmp = tmp_path_factory.mktemp("files")
    bucket = table.split("/")[2]
    uri = f"s3://{bucket}/files/{tmp.name}"
    rc = main(["create", uri, "--schema", _file_arg(schema, tmp), "--key", "id"])
    err = capsys.readouterr().err
    assert rc == (0 if schema.startswith("good") else 2), (schema, err)
    assert rc == 0 or (err.startswith("lethe: ") and "Traceback" not in err), err
    target = _file_arg(out, tmp)
    argv = ["scan", table, "--out", target] + (["--format", "csv"] if fmt else [])
    rc = main(argv)
    err = capsys.readouterr().err
    ok = out == "good.csv" or (out == "x.txt" and fmt)
    assert rc == (0 if ok else 2), (argv, err)
    if ok:
        assert Path(target).read_text().startswith(("id,", '"id",'))
    else:
        assert err.startswith("lethe: ") and "--out" in err, err


def test_limit_must_not_be_negative(table: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["scan", table, "--limit", "-1"])
    assert e.value.code == 2
    assert "negative" in capsys.readouterr().err


def test_endpoint_profile_and_region_as_the_aws_cli_takes_them(
    table: str, aws: Any, tmp_path: Path
) -> None:
    """Issue 36: ``--endpoint-url``, ``--profile`` and ``--region`` on every command, before
    or after its name; without them (and with no AWS_ENDPOINT_URL) the command cannot reach
    the local S3, so the test fails if the options are ignored."""
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    config = tmp_path / "config"
    config.write_text("[profile local]\nregion = us-east-1\n")
    env["AWS_CONFIG_FILE"] = str(config)
    env.pop("AWS_PROFILE", None)

    def run(*argv: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [sys.executable, "-m", "lethe.cli", *argv],
            capture_output=True,
            env=env,
            timeout=120,
            check=False,
        )

    ok = run("history", table, "--endpoint-url", aws.endpoint, "--profile", "local")
    assert ok.returncode == 0, ok.stderr.decode()
    assert "append" in ok.stdout.decode()
    first = run(
        "--endpoint-url", aws.endpoint, "--region", "us-east-1", "scan", table, "--limit", "0"
    )
    assert first.returncode == 0 and "(60 rows" in first.stdout.decode(), first.stderr.decode()
    missing = run("history", table, "--endpoint-url", aws.endpoint, "--profile", "nope")
    assert (
        missing.returncode == 2
        and missing.stderr.startswith(b"lethe: ")
        and b"nope" in missing.stderr
    )


def test_every_argument_of_every_command_says_what_it_is() -> None:
    """Issue 36: ``--key``, ``--target-file-bytes``, ``-v`` and 51 more had no help."""
    import argparse

    from lethe.cli import build_parser

    missing: list[str] = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, child in a.choices.items():
                    walk(child, [*path, name])
            elif not isinstance(a, argparse._HelpAction | argparse._VersionAction) and (
                not a.help or a.help == argparse.SUPPRESS
            ):
                missing.append(" ".join([*path, *(a.option_strings or [a.dest])]))

    walk(build_parser(), ["lethe"])
    assert missing == []


def test_at_version_names_the_table_version_and_version_still_works(
    table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--version`` is the program's version at the top and a table version in ``scan`` /
    ``inspect`` / ``schema`` / ``verify``: the latter is ``--at-version`` (old spelling kept)."""
    assert main(["scan", table, "--at-version", "0", "--limit", "0"]) == 0
    assert "(0 rows" in capsys.readouterr().out
    assert main(["scan", table, "--version", "1", "--limit", "0"]) == 0
    assert "(60 rows" in capsys.readouterr().out


def test_retention_set_errors_exit_2_like_the_rest(
    table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 36: ``retention set`` errors left through ``SystemExit(message)`` (status 1)."""
    for argv in (
        ["retention", "set", table, "--column", "nope", "--keep", "400d"],
        ["retention", "set", table, "--column", "payload", "--keep", "400d"],
        ["retention", "set", table, "--keep", "400d"],
    ):
        assert main(argv) == 2, argv
        assert capsys.readouterr().err.startswith("lethe: InvalidRequest: ")
