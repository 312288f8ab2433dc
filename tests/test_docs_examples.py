"""Every fenced example of README.md and docs/*.md runs, against moto's server.

One test per block (``README.md:L45``: the line of its opening fence). The blocks of one
document run in order in one session (one Python namespace, one working directory, one set
of buckets), so a block may use what an earlier one made; selecting a later block alone runs
the earlier ones first.

* **python**: executed. A line ``expr  # -> literal`` also checks the expression's value.
* **json**: validated against the model it documents (``JSON_MODELS``, keyed by the
  document and the object's ``format``, or its first key for a fragment).
* **bash**, **sh**, untagged: every command line. ``lethe …`` runs through
  ``lethe.cli.main`` and must exit 0; ``python`` entry points run their ``main``;
  ``aws sqs send-message`` sends its body through a moto queue to the real delete handler;
  the other ``aws`` calls with a JSON payload have it checked (``CHECKERS``). A line that
  cannot run here is in ``NOT_RUN`` with the reason (its arguments are still checked by its
  program's parser when it has one). A synopsis (``[--opt]``, ``a|b``, ``...``) runs as the
  concrete forms listed in ``SYNOPSES``, each checked to be a form of it. A line none of
  these cover fails the test until someone decides; an entry no document shows any more
  fails ``test_no_stale_entries``.
* other languages: ``NOT_RUN_LANGUAGES``.

Placeholders are replaced explicitly: the buckets of ``BUCKETS`` by one fresh moto bucket
each per document, the strings of ``JSON_PLACEHOLDERS`` in JSON blocks, and the names a
Python block uses without defining come from ``GIVENS``. Input files the examples name
(``sample.parquet``, ``data.csv``, ``events.csv``) are written to the session's directory.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import doctest
import importlib
import inspect
import json
import re
import shlex
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from conftest import EVENTS, events
from pyroaring import BitMap64

import lethe
import lethe.lake.requests
from devtools import docexamples as dx
from devtools.local.events import LambdaContext, sqs_event
from devtools.local.functions import load_handler
from devtools.local.server import LocalAws
from lethe.catalog import manifest as mf

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = dx.blocks(ROOT)

# --- what the examples assume ------------------------------------------------------------------

# Placeholder buckets of the examples -> one fresh moto bucket each, per document.
BUCKETS = ("my-bucket", "b", "demo", "lethestack-storagebucket5cb7c8ea", "$BUCKET", "<bucket>")
# docs/local.md's SQS message names the stack's bucket as "s3://…/tables/main".
BUCKET_ALIASES = {"…": "lethestack-storagebucket5cb7c8ea"}

# Schema of the files the examples name (sample.parquet, data.csv, events.csv): the README's
# events plus the email column its index example uses.
SAMPLE = pa.schema([*EVENTS, pa.field("email", pa.string())])


def sample_rows(start: int, n: int) -> pa.Table:
    t = events(start, n, customers=10)
    return t.append_column("email", pa.array([f"u{i}@x.io" for i in range(start, start + n)]))


# Tables the documents take as existing before their first block.
SETUP: dict[str, Callable[[Callable[[str], str]], None]] = {
    # "Running locally" works on s3://demo/events with uploads under s3://demo/incoming/
    "docs/spark.md": lambda sub: _spark_setup(sub),
}


def _spark_setup(sub: Callable[[str], str]) -> None:
    lethe.Table.create(sub("s3://demo/events"), EVENTS, key="id").append(events(0, 200))
    bucket, _, _ = sub("s3://demo/incoming/x.csv")[5:].partition("/")
    buf = pa.BufferOutputStream()
    pacsv.write_csv(events(200, 50), buf)
    lethe.storage.store.make_s3_client().put_object(
        Bucket=bucket, Key="incoming/x.csv", Body=buf.getvalue().to_pybytes()
    )


# Names Python blocks use without defining them: name -> (why, how to make it).
def _parquet_bytes() -> bytes:
    buf = pa.BufferOutputStream()
    pq.write_table(events(0, 10), buf)
    return bytes(buf.getvalue().to_pybytes())


GIVENS: dict[str, tuple[str, Callable[[], Any]]] = {
    "data": ("the bytes of an upload (docs/local.md)", _parquet_bytes),
    "spark": ("an existing SparkSession (docs/spark.md)", lambda: _spark_session()),
}

# pyspark 4.0's _load_from_socket never closes its local socket to the JVM (tests/spark/).
_SPARK_SOCKETS = pytest.mark.filterwarnings(
    r"ignore:Exception ignored in. <socket.socket.*raddr=\('127.0.0.1':"
    "pytest.PytestUnraisableExceptionWarning"
)
# Blocks that take longer than a unit test should: a marker of the block's text -> marks.
SLOW: dict[str, list[Any]] = {
    # synthesizes the CDK stack (20-60 s the first time, then cached)
    "LocalRuntime.start(": [pytest.mark.slow, pytest.mark.cdk, _SPARK_SOCKETS],
    # starts a local Spark session
    "spark=spark": [
        pytest.mark.slow,
        pytest.mark.spark,
        pytest.mark.xdist_group("spark"),
        _SPARK_SOCKETS,
    ],
}

# Python code of a block -> what runs instead, with the reason.
PYTHON_REWRITES: dict[str, str] = {}  # none: the documents show code that runs as written

NOT_RUN_LANGUAGES = {
    "sql": "Athena SQL over the Glue table (docs/deploy.md): needs Athena",
    "text": "a diagram",
}

# Command lines that cannot run here -> why. Keys are the command as docexamples reads it.
NOT_RUN: dict[str, str] = {
    "make demo": "the whole local story (tests/test_e2e.py runs its steps)",
    "make test": "the whole test suite",
    "make layer": "downloads Lambda's wheels (tests/layers/ builds the same for the host)",
    "make synth": "CDK synthesis (tests/infra/test_stack.py)",
    'make synth CONTEXT="-c lethe:encryption=kms -c lethe:versioned=true"': (
        "CDK synthesis with settings (tests/infra/test_stack.py runs the KMS/versioned variant)"
    ),
    "npx aws-cdk@^2 bootstrap aws://<account>/<region>": "needs an AWS account",
    "npx aws-cdk@^2 deploy LetheStack -c lethe:alarmEmail=ops@example.com": "needs an AWS account",
    "aws glue get-table --database-name lethe --name main "
    "--query 'Table.Parameters.metadata_location'": (
        "needs the deployed Glue table (tests/functions/test_iceberg_glue.py)"
    ),
    ".venv/bin/python -m devtools.local.runtime": "serves until Ctrl-C",
    ".venv/bin/moto_server -p 5000": "serves until Ctrl-C (the tests run their own moto server)",
    "aws s3 mb s3://my-bucket": "needs the AWS CLI (the tests make their buckets with boto3)",
    ".venv/bin/python -m devtools.local.runtime [--port 5000] [--template PATH] [-c KEY=VALUE] "
    "[--visibility-timeout 1] [--gc-every 600] [--gc-grace 7d] [--log-dir DIR]": (
        "serves until Ctrl-C"
    ),
    "aws s3 cp events.csv s3://lethestack-storagebucket5cb7c8ea/incoming/": (
        "needs the AWS CLI and the local runtime's trigger (tests/test_e2e.py)"
    ),
    "spark-submit spark_jobs/ingest.py --table s3://b/t --input s3://b/incoming/... "
    "[--format csv|json|parquet]": "starts Spark (tests/spark/test_spark_ingest.py)",
    "spark-submit spark_jobs/compact.py --table s3://b/t [--min-deleted-fraction 0.2] "
    "[--dry-run]": "starts Spark (tests/spark/test_spark_compact.py)",
    "export AWS_ENDPOINT_URL=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=testing "
    "AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1": (
        "the tests already point at their own moto server"
    ),
    ".venv/bin/python spark_jobs/ingest.py --table s3://demo/events --input s3://demo/incoming/": (
        "starts Spark (tests/spark/test_spark_ingest.py; the python block below runs it)"
    ),
    "PYSPARK_DRIVER_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[*]' "
    "spark_jobs/ingest.py --table s3://demo/events --input s3://demo/incoming/": "starts Spark",
    "make spark-package": "downloads EMR's wheels (tests/layers/test_ships.py)",
    "LETHE_EMR_PLATFORM=x86_64-manylinux_2_34 spark_jobs/package.sh": "downloads EMR's wheels",
    "aws s3 cp dist/lethe-pyspark.tar.gz s3://<artifacts>/lethe-pyspark.tar.gz": (
        "needs the AWS CLI and the built archive"
    ),
}

# Command lines (or synopsis forms), as shlex.join of their words, whose documented outcome
# is not exit 0 -> that exit code.
EXIT_CODES: dict[str, int] = {}

# Synopses -> the concrete command lines run for them (each must be a form of the synopsis;
# "{data_file}" is the first data file of s3://b/events).
SYNOPSES: dict[str, list[str]] = {
    "lethe create s3://b/events --schema sample.parquet --key id [--index customer_id ...] "
    "[--cluster-by customer_id] [--cluster-window 1d]": [
        "lethe create s3://b/events --schema sample.parquet --key id --index customer_id",
    ],
    "lethe compact s3://b/events [--dry-run] [--no-cluster] [--min-deleted-fraction 0.2]": [
        "lethe compact s3://b/events --dry-run",
        "lethe compact s3://b/events --no-cluster --min-deleted-fraction 0.2",
    ],
    "lethe retention show|clear|sweep s3://b/events [--dry-run]": [
        "lethe retention show s3://b/events",
        "lethe retention sweep s3://b/events --dry-run",
        "lethe retention clear s3://b/events",
    ],
    "lethe index create|drop|list s3://b/events [COLUMN]": [
        "lethe index create s3://b/events email",
        "lethe index list s3://b/events",
        "lethe index drop s3://b/events email",
    ],
    'lethe scan s3://b/events --where "customer_id = 7" --columns id,payload [--out x.parquet]': [
        'lethe scan s3://b/events --where "customer_id = 7" --columns id,payload',
        'lethe scan s3://b/events --where "customer_id = 7" --columns id,payload --out x.parquet',
    ],
    "lethe inspect s3://b/events [data/…/file.parquet] [--segments]": [
        "lethe inspect s3://b/events",
        "lethe inspect s3://b/events {data_file} --segments",
    ],
    "lethe verify s3://b/events [--deep]": [
        "lethe verify s3://b/events",
        "lethe verify s3://b/events --deep",
    ],
    "lethe gc s3://b/events --dry-run [--retention 30d|1000v] [--grace 7d]": [
        "lethe gc s3://b/events --dry-run",
        "lethe gc s3://b/events --dry-run --retention 1000v --grace 7d",
    ],
    "lethe iceberg publish s3://b/events [--version N] [--format-version 2|3]": [
        "lethe iceberg publish s3://b/events",
        "lethe iceberg publish s3://b/events --version 1 --format-version 3",
    ],
    "lethe erasures s3://b/events [--request-id r-2] [--pending] [--older-than 25d] "
    "[--audit 3] [--json]": [
        "lethe erasures s3://b/events",
        "lethe erasures s3://b/events --request-id r-2 --audit 3 --json",
        "lethe erasures s3://b/events --pending --older-than 25d",
    ],
    "lethe report s3://b/events --html report.html [--deadline 30d] [--json]": [
        "lethe report s3://b/events --html report.html",
        "lethe report s3://b/events --html report.html --deadline 30d --json",
    ],
}

# Strings standing for values in JSON blocks -> what the test puts there.
JSON_PLACEHOLDERS = {
    '"<hex>"': json.dumps(uuid.UUID(int=1).hex),
    '"<16 hex>"': json.dumps("0123456789abcdef"),
    "[<data file entry>, ...]": "[]",
    '"<base64 portable Roaring bitmap>"': json.dumps(
        base64.b64encode(BitMap64([2, 5]).serialize()).decode()
    ),
}


def _check_head(obj: dict[str, Any], s: DocSession) -> None:
    mf.Head.model_validate(obj)
    uri = s.sub("s3://b/head-shape")
    lethe.Table.create(uri, EVENTS, key="id")
    bucket, _, prefix = uri[5:].partition("/")
    real = json.loads(
        s.s3.get_object(Bucket=bucket, Key=f"{prefix}/_latest_manifest")["Body"].read()
    )
    assert sorted(obj) == sorted(real), "the head shown has the fields Lethe writes"


def _check_index_origin(obj: dict[str, Any], s: DocSession) -> None:
    """The fragment is a field of a data file entry (docs/format.md §3c)."""
    entry = {"path": "data/x.parquet", "size": 1, "etag": "e", "rows": 1, "row_groups": []}
    mf.DataFile.model_validate({**entry, "added_version": 4, **obj})


# (document, the object's "format" or its first key) -> check.
def _check_lake_message(obj: dict[str, Any], s: DocSession) -> None:
    """A documented lake request: what the delete handler parses, with its own date."""
    msg = lethe.lake.requests.parse_any(obj)
    assert isinstance(msg, lethe.lake.requests.LakeRequestMessage)
    assert msg.requested_at is not None


def _check_lake_context(obj: dict[str, Any], s: DocSession) -> None:
    """The documented ``lethe:lake`` context: what the stack's config accepts."""
    from infra import constants as c
    from infra.config import LetheConfig

    config = LetheConfig.from_mapping(
        {k: json.dumps(v) if k == c.CTX_LAKE else v for k, v in obj.items()}
    )
    assert config.lake is not None and config.lake.tables


def _check_adopt_context(obj: dict[str, Any], session: DocSession) -> None:
    """The documented ``lethe:adopt`` context: what the stack's config accepts."""
    from infra import constants as c
    from infra.config import LetheConfig

    config = LetheConfig.from_mapping({c.CTX_ADOPT: json.dumps(obj[c.CTX_ADOPT])})
    assert config.adopt is not None and config.adopt.prefixes


def _check_lineage(obj: dict[str, Any], s: DocSession) -> None:
    """docs/format.md §6b: the lineage object, its removed positions a Roaring bitmap."""
    from lethe.catalog.lineage import Lineage

    lin = Lineage.model_validate(obj)
    assert [sorted(BitMap64.deserialize(base64.b64decode(e.removed))) for e in lin.entries] == [[3]]


JSON_MODELS: dict[tuple[str, str], Callable[[dict[str, Any], DocSession], object]] = {
    ("docs/format.md", "lethe.head"): _check_head,
    ("docs/format.md", "lethe.segment"): lambda obj, s: mf.Segment.model_validate(obj),
    ("docs/format.md", "column"): lambda obj, s: mf.ColumnIndex.model_validate(obj),
    ("docs/format.md", "index_origin"): _check_index_origin,
    ("docs/format.md", "lethe.lineage"): _check_lineage,
    ("README.md", "request_id"): _check_lake_message,
    ("README.md", "lethe:lake"): _check_lake_context,
    ("README.md", "lethe:adopt"): _check_adopt_context,
}


# --- one session per document ------------------------------------------------------------------


class DocSession:
    """The state the blocks of one document share: namespace, directory, buckets, outcomes."""

    def __init__(self, doc: str, aws: LocalAws, cwd: Path) -> None:
        self.doc, self.aws, self.cwd = doc, aws, cwd
        self.s3 = aws.client("s3")
        self.ns: dict[str, Any] = {"__name__": "docs_example_" + re.sub(r"\W", "_", doc)}
        self.ran: set[str] = set()
        self.buckets: dict[str, str] = {}
        pq.write_table(sample_rows(0, 0).cast(SAMPLE), cwd / "sample.parquet")
        pacsv.write_csv(sample_rows(0, 1000), cwd / "data.csv")
        pacsv.write_csv(sample_rows(0, 100), cwd / "events.csv")
        self.setup_done = False

    def bucket(self, placeholder: str) -> str:
        placeholder = BUCKET_ALIASES.get(placeholder, placeholder)
        if placeholder not in self.buckets:
            name = f"doc-{uuid.uuid4().hex[:12]}"
            self.s3.create_bucket(Bucket=name)
            self.buckets[placeholder] = name
        return self.buckets[placeholder]

    def sub(self, text: str) -> str:
        """``s3://<placeholder bucket>/`` -> ``s3://<this document's moto bucket>/``."""
        names = "|".join(re.escape(b) for b in (*BUCKETS, *BUCKET_ALIASES))
        return re.sub(
            rf"s3://({names})(?=/|$|[\"'\s])", lambda m: f"s3://{self.bucket(m[1])}", text
        )

    def first_data_file(self, uri: str) -> str:
        return lethe.Table.open(self.sub(uri)).manifest.files[0].path


@pytest.fixture(scope="module")
def sessions(aws: LocalAws, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    made: dict[str, DocSession] = {}

    def get(doc: str) -> DocSession:
        if doc not in made:
            made[doc] = DocSession(doc, aws, tmp_path_factory.mktemp("doc"))
        return made[doc]

    yield get
    while _SPARK:
        _SPARK.pop().stop()


def _marks(b: dx.Block) -> list[Any]:
    return [m for k, marks in SLOW.items() if k in b.text for m in marks]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=_marks(b)) for b in BLOCKS])
def test_doc_example(
    block: dx.Block, sessions: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    s: DocSession = sessions(block.doc)
    monkeypatch.chdir(s.cwd)
    monkeypatch.setenv("LETHE_CACHE_DIR", str(s.cwd / ".cache"))  # no report assets elsewhere
    # Polars plans an Iceberg scan with PyIceberg when its polars_iceberg plugin is absent and
    # says so in a PerformanceWarning (an error here): the plan is the same, say it outright
    monkeypatch.setenv("POLARS_ICEBERG_PLANNER", "pyiceberg")
    if not s.setup_done:
        s.setup_done = True
        if block.doc in SETUP:
            SETUP[block.doc](s.sub)
    for earlier in BLOCKS:  # the document's earlier blocks first (if not run yet, not slow)
        same_doc = earlier.doc == block.doc and earlier.line < block.line
        if same_doc and earlier.id not in s.ran and not _marks(earlier):
            s.ran.add(earlier.id)
            with contextlib.suppress(Exception):  # its own test reports it
                run_block(earlier, s, monkeypatch)
    s.ran.add(block.id)
    run_block(block, s, monkeypatch)


def run_block(b: dx.Block, s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    if b.lang == "python":
        run_python(b, s)
    elif b.lang == "json":
        run_json(b, s)
    elif b.lang in ("bash", "sh", ""):
        for c in dx.commands(b):
            run_command(c, b, s, monkeypatch)
    else:
        assert b.lang in NOT_RUN_LANGUAGES, f"{b.id}: decide how to test ```{b.lang} blocks"


# --- python ------------------------------------------------------------------------------------

_ARROW = re.compile(r"^(?P<code>[^#\n]+?)\s+#\s*->\s*(?P<want>.+)$")


def run_python(b: dx.Block, s: DocSession) -> None:
    """Run the block in the document's namespace; ``expr  # -> literal`` lines check values."""
    text = b.text
    for old, new in PYTHON_REWRITES.items():
        text = text.replace(old, new)
    lines = []
    for row in s.sub(text).splitlines():
        m = _ARROW.match(row)
        if m:
            row = f"__doc_check__(({m['code'].strip()}), {m['want'].strip()}, {row!r})"
        lines.append(row)
    code = "\n".join(lines)
    tree = ast.parse(code)
    stored = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    imported = {
        (a.asname or a.name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for name in (used & set(GIVENS)) - stored - imported - set(s.ns):
        s.ns[name] = GIVENS[name][1]()

    def check(got: Any, want: Any, line: str) -> None:
        assert got == want, f"{b.id}: {line.strip()!r} gave {got!r}"

    s.ns["__doc_check__"] = check
    exec(compile("\n" * b.line + code, b.id, "exec"), s.ns)  # the document's example


# --- json --------------------------------------------------------------------------------------


def run_json(b: dx.Block, s: DocSession) -> None:
    text = b.text
    for placeholder, value in JSON_PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    text = text.strip()
    if not text.startswith("{"):  # a fragment: '"key": value'
        text = "{" + text + "}"
    obj = json.loads(text)
    kind = obj.get("format") or next(iter(obj))
    check = JSON_MODELS.get((b.doc, kind))
    assert check is not None, f"{b.id}: which model does this {kind!r} object document?"
    check(obj, s)


# --- shell -------------------------------------------------------------------------------------


def run_command(c: dx.Command, b: dx.Block, s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    where = f"{b.doc}:L{c.line}"
    if dx.is_synopsis(c.text):
        if c.text in NOT_RUN:
            parse_check(dx.maximal_form(c.text), where, monkeypatch)
            return
        forms = SYNOPSES.get(c.text)
        assert forms, f"{where}: synopsis {c.text!r}: list its forms in SYNOPSES or NOT_RUN"
        for form in forms:
            if "{data_file}" in form:
                form = form.replace("{data_file}", s.first_data_file("s3://b/events"))
            argv = dx.commands(dx.Block(b.doc, c.line - 1, "bash", form + "\n"))[0].argv
            assert dx.instance_of(argv, c.text), f"{where}: {form!r} is not a form of the line"
            run_argv(list(argv), where, s, monkeypatch)
        return
    if c.text in NOT_RUN:
        parse_check(list(c.argv), where, monkeypatch)
        return
    run_argv(list(c.argv), where, s, monkeypatch)


def run_argv(argv: list[str], where: str, s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    text = shlex.join(argv)
    argv = [s.sub(w) for w in argv]
    checker = CHECKERS.get(tuple(argv[:3]))
    if checker is not None:
        checker(argv, s, monkeypatch)
        return
    if argv[0] == "lethe":
        from lethe.cli import main

        try:
            rc = main(argv[1:])
        except SystemExit as e:  # argparse's --help / --version
            rc = e.code if isinstance(e.code, int) else 2
        want = EXIT_CODES.get(text, 0)
        assert rc == want, f"{where}: `{' '.join(argv)}` exited {rc}, documented: {want}"
        return
    prog = program(argv)
    assert prog is not None, f"{where}: cannot run {argv!r} here: add it to NOT_RUN with a reason"
    main_fn, rest = prog
    assert main_fn(rest) == 0, f"{where}: `{' '.join(argv)}` failed"


def program(argv: list[str]) -> tuple[Callable[[list[str]], int], list[str]] | None:
    """The ``main`` a Python command line runs, and its arguments (None: not Python)."""
    words = list(argv)
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value prefixes
        words.pop(0)
    if not words:
        return None
    head, rest = words[0], words[1:]
    if head.endswith("spark-submit"):
        while rest and rest[0].startswith("--"):  # spark-submit's own options
            rest = rest[2:]
    elif head.endswith("python") and rest[:1] == ["-m"]:
        return importlib.import_module(rest[1]).main, rest[2:]
    elif not head.endswith("python"):
        return None
    if not rest or not re.fullmatch(r"spark_jobs/\w+\.py", rest[0]):
        return None
    module = importlib.import_module("spark_jobs." + Path(rest[0]).stem)
    return module.main, rest[1:]


class _Parsed(Exception):
    pass


def parse_check(argv: list[str], where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line not run: its program's argument parser still accepts it (if it is ours)."""
    prog = program(argv)
    if prog is None:
        return
    main_fn, rest = prog
    parse = argparse.ArgumentParser.parse_args

    def parse_only(self: argparse.ArgumentParser, args: Any = None, namespace: Any = None) -> Any:
        parse(self, args, namespace)
        raise _Parsed

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", parse_only)
        with pytest.raises(_Parsed):
            main_fn(rest)


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _send_delete_request(argv: list[str], s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """``aws sqs send-message --message-body …``: through a moto queue to the delete handler."""
    body = _option(argv, "--message-body")
    msg = lethe.lake.requests.parse_message(body)  # what the handler parses first
    sqs = s.aws.client("sqs")
    url = sqs.create_queue(QueueName=f"doc-deletes-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    splices = sqs.create_queue(QueueName=f"doc-splices-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-delete-requests")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Lethe")
    monkeypatch.setenv("LETHE_SPLICE_QUEUE_URL", splices)
    handler = load_handler("delete_requests.handler.handler")
    table = lethe.Table.open(msg.table)
    if not table.manifest.files:  # the doc's upload (`aws s3 cp events.csv`, not run here)
        table.append(pacsv.read_csv(s.cwd / "events.csv").cast(table.schema))
    ids = [f[2] for f in msg.filters if f[:2] == ["id", "="]]
    assert lethe.Table.open(msg.table).scan(filters=[("id", "in", ids)]).num_rows == len(ids)
    sqs.send_message(QueueUrl=url, MessageBody=body)
    got = sqs.receive_message(QueueUrl=url, MessageSystemAttributeNames=["All"], WaitTimeSeconds=1)
    resp = handler(sqs_event(got["Messages"], queue_arn=arn), LambdaContext())
    assert resp["batchItemFailures"] == [], "the documented message is not a batch failure"
    after = lethe.Table.open(msg.table)
    assert after.scan(filters=[("id", "in", ids)]).num_rows == 0, "its rows are deleted"
    assert after.erasure_status(msg.request_id) is not None


def _gc_input(argv: list[str], s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """``aws stepfunctions start-execution --input …``: the workflow's Plan step's event."""
    monkeypatch.setenv("LETHE_TABLE_URI", s.sub("s3://b/gc-input"))
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "lethe-gc")
    module = inspect.unwrap(load_handler("gc_steps.handler.plan")).__globals__
    event = json.loads(_option(argv, "--input"))
    assert set(event) <= set(module["PlanEvent"].model_fields), "only fields Plan reads"
    module["PlanEvent"].model_validate(event)


def _emr_job_run(argv: list[str], s: DocSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """``aws emr-serverless start-job-run --job-driver …``: the entry point takes the args."""
    driver = json.loads(_option(argv, "--job-driver"))["sparkSubmit"]
    entry = driver["entryPoint"].rpartition("/spark_jobs/")[2]
    parse_check(["python", f"spark_jobs/{entry}", *driver["entryPointArguments"]], "", monkeypatch)
    assert "spark.archives=" in driver["sparkSubmitParameters"]


CHECKERS: dict[tuple[str, ...], Callable[[list[str], DocSession, pytest.MonkeyPatch], None]] = {
    ("aws", "sqs", "send-message"): _send_delete_request,
    ("aws", "stepfunctions", "start-execution"): _gc_input,
    ("aws", "emr-serverless", "start-job-run"): _emr_job_run,
}


_SPARK: list[Any] = []  # the session this module started (stopped when the module ends)


def _spark_session() -> Any:
    from pyspark.sql import SparkSession

    from spark_jobs._session import build_session

    active = SparkSession.getActiveSession()
    if active is not None:  # another test's: use it, leave it running
        return active
    if not _SPARK:
        _SPARK.append(
            build_session(
                "lethe-doc-examples",
                master="local[2]",
                conf={"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"},
            )
        )
    return _SPARK[0]


# --- the lists stay honest ---------------------------------------------------------------------


def test_no_stale_entries() -> None:
    """Every NOT_RUN, SYNOPSES and JSON_MODELS entry is still shown by some document."""
    shown = {c.text for b in BLOCKS if b.lang in ("bash", "sh", "") for c in dx.commands(b)}
    assert set(NOT_RUN) - shown == set()
    assert set(SYNOPSES) - shown == set()
    forms = {
        shlex.join(c.argv) for b in BLOCKS if b.lang in ("bash", "sh", "") for c in dx.commands(b)
    }
    forms |= {shlex.join(shlex.split(f)) for fs in SYNOPSES.values() for f in fs}
    assert set(EXIT_CODES) - forms == set()
    langs = {b.lang for b in BLOCKS}
    assert set(NOT_RUN_LANGUAGES) <= langs
    docs_with_json = {b.doc for b in BLOCKS if b.lang == "json"}
    assert {doc for doc, _ in JSON_MODELS} <= docs_with_json
    assert all(any(k in b.text for b in BLOCKS) for k in SLOW)
    assert all(any(k in b.text for b in BLOCKS) for k in PYTHON_REWRITES)


def test_the_extractor_examples() -> None:
    assert doctest.testmod(dx, optionflags=doctest.ELLIPSIS).failed == 0


def test_every_document_has_examples() -> None:
    """The extractor sees every document (a fence it misread would drop blocks)."""
    assert {b.doc for b in BLOCKS} == {p.relative_to(ROOT).as_posix() for p in dx.documents(ROOT)}
    assert len(BLOCKS) >= 20
