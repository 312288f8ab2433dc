"""The library's shape: no import circle in ``shared/lethe`` (imports inside functions and in
``TYPE_CHECKING`` blocks count: a deferred import hides a circle, it does not remove it);
nothing shipped imports a dev tool; one commit loop; modules and functions within their size
(a function over the limit says why in its docstring, on a line starting with ``Long:``)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "shared" / "lethe"
COMMIT = LIB / "catalog" / "commit.py"  # the one commit loop


def _module(p: Path) -> str:
    parts = list(p.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(p: Path, name: str, known: set[str]) -> set[str]:
    package = name if p.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.Import):
                found.update(a.name for a in ch.names)
            elif isinstance(ch, ast.ImportFrom):
                if ch.level:
                    base = package.split(".")[: len(package.split(".")) - ch.level + 1]
                    mod = ".".join([*base, *([ch.module] if ch.module else [])])
                else:
                    mod = ch.module or ""
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in ch.names)
            visit(ch)

    visit(ast.parse(p.read_text(encoding="utf-8")))
    out = set()
    for m in found:
        while m and m not in known:
            m = m.rpartition(".")[0]
        if m and m not in (name, "lethe"):  # the package root only re-exports
            out.add(m)
    return out


def graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in LIB.rglob("*.py")}
    known = set(files)
    return {m: _imports(p, m, known) for m, p in files.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            connect(v)
    return out


def test_no_import_circle_in_the_library() -> None:
    assert cycles(graph()) == []


def test_the_detector_finds_a_circle() -> None:
    g = graph()
    assert "lethe.catalog.commit" in g["lethe.erasure.deletes"]  # it sees real edges
    assert "lethe.audit.receipts" in g["lethe.table"]  # a TYPE_CHECKING import is one
    g["lethe.catalog.commit"] = {*g["lethe.catalog.commit"], "lethe.erasure.deletes"}
    assert any({"lethe.catalog.commit", "lethe.erasure.deletes"} <= set(c) for c in cycles(g))


DEV_ONLY = ("moto", "devtools", "infra", "layers", "pytest", "hypothesis")
# The `lambda` extra: only functions/ may import these (the EMR archive does not ship them).
LAMBDA_ONLY = ("aws_lambda_powertools", "pydantic_settings")


def _absolute_imports(p: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``p``, function-level ones included."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.append((node.lineno, node.module or ""))
    return out


def test_what_ships_is_the_library_and_imports_no_dev_tool(tmp_path: Path) -> None:
    """The wheel packs ``shared/lethe``; the Lambda layer and the EMR archive copy it as
    ``layers/ships.py`` decides (``tests/layers/test_ships.py`` checks the built artifacts).
    No module of it may import the local runtime, moto, the CDK app or test tools."""
    from layers.build import assemble_lib

    assemble_lib(tmp_path / "site")
    shipped = tmp_path / "site" / "lethe"
    names = {p.relative_to(shipped).as_posix() for p in shipped.rglob("*.py")}
    assert names == {p.relative_to(LIB).as_posix() for p in LIB.rglob("*.py")}
    offenders = [
        f"{p.name}:{line} {m}"
        for p in sorted(shipped.rglob("*.py"))
        for line, m in _absolute_imports(p)
        if m.split(".")[0] in DEV_ONLY
    ]
    assert offenders == []


def test_the_library_imports_nothing_only_the_lambda_functions_need() -> None:
    """Powertools and pydantic-settings are ``lethe[lambda]``: the library and the Spark jobs
    run without them (the EMR archive does not ship them)."""
    sources = [*LIB.rglob("*.py"), *(LIB.parents[1] / "spark_jobs").rglob("*.py")]
    offenders = [
        f"{p.name}:{line} {m}"
        for p in sorted(sources)
        for line, m in _absolute_imports(p)
        if m.split(".")[0] in LAMBDA_ONLY
    ]
    assert offenders == []


# Terminal libraries: only the command line (lethe.cli) draws; the library reports progress
# through plain callbacks (lethe.progress) and stays lean for the Lambda layer and Spark.
CLI_ONLY = ("rich", "tqdm")


def test_only_the_command_line_imports_a_terminal_library() -> None:
    offenders = [
        f"{p.relative_to(LIB).as_posix()}:{line} {m}"
        for p in sorted(LIB.rglob("*.py"))
        if "cli" not in p.relative_to(LIB).parts
        for line, m in _absolute_imports(p)
        if m.split(".")[0] in CLI_ONLY
    ]
    assert offenders == []


# --- one commit loop -------------------------------------------------------------------------
def _loops(path: Path) -> list[str]:
    """Retry/rebase loops in one module: catching a Rebase, or reading a retry bound."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ExceptHandler)
            and node.type is not None
            and "Rebase" in ast.unparse(node.type)
        ):
            found.append(f"{path.name}:{node.lineno} catches {ast.unparse(node.type)}")
        if isinstance(node, ast.Attribute) and node.attr == "max_attempts":
            found.append(f"{path.name}:{node.lineno} reads max_attempts")
    return found


def test_no_commit_loop_outside_the_catalog() -> None:
    """Catalog.commit_change is the one retry/rebase loop; no other module runs its own."""
    offenders = [hit for p in sorted(LIB.rglob("*.py")) if p != COMMIT for hit in _loops(p)]
    assert offenders == []
    assert _loops(COMMIT)  # the detector sees the one loop there


# --- size ------------------------------------------------------------------------------------
MAX_MODULE_LINES = 650  # issue 38 item 6
MAX_FUNCTION_LINES = 60
MAX_PARAMETERS = 8  # outside the public façade (FACADE)
REASON = "Long:"  # a docstring line starting with this says why a function is longer
SIZED = (LIB, ROOT / "functions", ROOT / "spark_jobs")  # functions in all; modules in the library

# Today's offenders, all in modules being split elsewhere (issue 11). The list only shrinks
# and must become empty: an offender not on it fails, and so does an entry that is no longer
# an offender (remove it when its split lands).
PENDING_SPLIT: frozenset[str] = frozenset()


def _functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualified name, node)`` of every function and method, nested ones included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, f"{prefix}{child.name}.<locals>.")
        else:
            yield from _functions(child, prefix)


def long_functions(source: str) -> list[tuple[str, int]]:
    """``(qualified name, lines)`` of the functions of ``source`` over
    :data:`MAX_FUNCTION_LINES` (decorators not counted) whose docstring gives no reason."""
    out = []
    for name, node in _functions(ast.parse(source)):
        lines = (node.end_lineno or node.lineno) - node.lineno + 1
        doc = ast.get_docstring(node) or ""
        reason = any(line.strip().startswith(REASON) for line in doc.splitlines())
        if lines > MAX_FUNCTION_LINES and not reason:
            out.append((name, lines))
    return out


def _size_offenders() -> dict[str, str]:
    """Offender -> what is too long, over the library's modules and every function."""
    out: dict[str, str] = {}
    for root in SIZED:
        for p in sorted(root.rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            source = p.read_text(encoding="utf-8")
            n = len(source.splitlines())
            if root == LIB and n > MAX_MODULE_LINES:
                out[rel] = f"{n} lines"
            for name, lines in long_functions(source):
                out[f"{rel}::{name}"] = f"{lines} lines"
    return out


def test_modules_and_functions_within_their_size() -> None:
    """No module of the library over 650 lines; no function of the library, the Lambda
    handlers or the Spark jobs over 60 without a ``Long:`` reason; PENDING_SPLIT holds exactly
    the rest (issue 38 item 6)."""
    found = _size_offenders()
    new = {k: v for k, v in sorted(found.items()) if k not in PENDING_SPLIT}
    assert new == {}, "split these, or say why in a 'Long:' docstring line"
    done = sorted(PENDING_SPLIT - set(found))
    assert done == [], "no longer too long: remove these from PENDING_SPLIT"


def _source(name: str, lines: int, *, doc: str = "", indent: str = "") -> str:
    """A function of exactly ``lines`` lines (the ``def`` line included)."""
    head = f"{indent}def {name}():\n" + (f'{indent}    """{doc}"""\n' if doc else "")
    body = [f"{indent}    x{i} = {i}\n" for i in range(lines - head.count("\n"))]
    return head + "".join(body)


def test_the_size_rules_see_a_long_function_and_its_reason() -> None:
    limit = MAX_FUNCTION_LINES
    assert long_functions(_source("f", limit)) == []
    assert long_functions(_source("f", limit + 1)) == [("f", limit + 1)]
    method = "class C:\n" + _source("m", limit + 1, indent="    ")
    assert long_functions(method) == [("C.m", limit + 1)]
    nested = "def g():\n" + _source("h", limit + 1, indent="    ")
    assert long_functions(nested) == [("g", limit + 2), ("g.<locals>.h", limit + 1)]
    assert long_functions(_source("f", limit + 1, doc="Sum.\n\n    Long: a table.\n    ")) == []
    assert long_functions(_source("f", limit + 1, doc="Sum; Long: not at a line start")) != []


# Public entry points whose keywords are a contract (DESIGN §9): they may take more.
FACADE: frozenset[str] = frozenset(
    {
        "shared/lethe/table.py::Table.*",
        "shared/lethe/lake/core.py::Lake.*",
        "spark_jobs/ingest.py::run_ingest",
        "spark_jobs/compact.py::run_compaction",
        "shared/lethe/gc/run.py::collect",  # lethe.gc.collect (DESIGN §9, README "Progress")
    }
)


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters of ``fn``, ``self``/``cls`` not counted (``*args``/``**kw`` count one each)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    n = len(positional) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
    return n - (bool(positional) and positional[0].arg in ("self", "cls"))


def many_parameters(rel: str, source: str) -> list[tuple[str, int]]:
    """``(qualified name, parameters)`` of the functions over :data:`MAX_PARAMETERS` that are
    not a public method or entry point of :data:`FACADE`."""
    out = []
    for name, node in _functions(ast.parse(source)):
        cls, _, method = name.rpartition(".")
        public = f"{rel}::{cls}.*" in FACADE and not method.startswith("_") and "<" not in cls
        if _parameters(node) > MAX_PARAMETERS and not public and f"{rel}::{name}" not in FACADE:
            out.append((name, _parameters(node)))
    return out


def test_no_function_takes_more_than_eight_parameters_outside_the_facade() -> None:
    """Parameters that travel together are one value (issue 38 item 6)."""
    found = {
        f"{p.relative_to(ROOT).as_posix()}::{name}": n
        for root in SIZED
        for p in sorted(root.rglob("*.py"))
        for name, n in many_parameters(p.relative_to(ROOT).as_posix(), p.read_text("utf-8"))
    }
    assert found == {}


def test_the_parameter_rule_sees_a_long_signature_and_spares_the_facade() -> None:
    nine = "def f(a, b, c, d, e, f, g, h, *, i): pass\n"
    assert many_parameters("x.py", nine) == [("f", 9)]
    assert (
        many_parameters("x.py", "class C:\n    def m(self, a, b, c, d, e, f, g, h): pass\n") == []
    )
    method = "class Table:\n    def m(self, a, b, c, d, e, f, g, h, i): pass\n"
    assert many_parameters("shared/lethe/table.py", method) == []
    assert many_parameters("other.py", method) == [("Table.m", 9)]
    private = "class Table:\n    def _m(self, a, b, c, d, e, f, g, h, i): pass\n"
    assert many_parameters("shared/lethe/table.py", private) == [("Table._m", 9)]


# --- the manifest is only data -----------------------------------------------------------------
def _closure(g: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        for d in g.get(m, ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def test_the_manifest_models_import_no_store_and_hold_no_private_state() -> None:
    """Loading segments is :class:`lethe.catalog.snapshot.Snapshot`'s (with the catalog's reader):
    the models of ``lethe.catalog.manifest`` reach no I/O module and keep no private attributes."""
    import pydantic

    import lethe.catalog.entries as entries
    import lethe.catalog.manifest as manifest

    reached = _closure(graph(), "lethe.catalog.manifest")
    assert not reached & {
        "lethe.storage.store",
        "lethe.catalog.commit",
        "lethe.catalog.snapshot",
        "lethe.storage.objects",
    }
    assert "boto3" not in {m for _, m in _absolute_imports(LIB / "catalog" / "manifest.py")}
    models = [
        v
        for v in vars(manifest).values()
        if isinstance(v, type)
        and issubclass(v, pydantic.BaseModel)
        and v.__module__ in (manifest.__name__, entries.__name__)
    ]
    assert len(models) >= 10 and manifest.Manifest in models
    assert {m.__name__: m.__private_attributes__ for m in models if m.__private_attributes__} == {}
    assert all(m.model_config.get("frozen") for m in models)


# --- one change vocabulary ---------------------------------------------------------------------
def test_every_commit_is_one_of_the_change_kinds(table_uri: str) -> None:
    """The kinds are listed once (lethe.catalog.changes.KINDS); the loop refuses any other update,
    and nothing outside the catalog writes a manifest (every commit goes through it)."""
    import dataclasses

    import pytest
    from conftest import EVENTS, events

    import lethe
    from lethe.catalog import changes
    from lethe.catalog.commit import Direct

    assert {k.__name__ for k in changes.KINDS} == {
        "AddFiles",
        "AdoptFiles",
        "UpgradeFormat",
        "DeclareIndex",
        "DropIndex",
        "SetDVs",
        "SpliceFiles",
        "ReplaceFiles",
        "SetProperties",
        "ExpireRows",
        "ArchiveErasures",
        "UpdateSchema",
        "MergeSchema",
        "RecordSchema",
        "Compose",  # a transaction: updates of the other kinds as one commit
    }
    for kind in changes.KINDS:  # frozen values with requirements and a pure apply
        assert dataclasses.is_dataclass(kind) and kind.__dataclass_params__.frozen  # type: ignore[attr-defined]
        assert callable(kind.requirements) and callable(kind.apply)

    @dataclasses.dataclass(frozen=True)
    class Sneaky:  # looks like an update, is not one of the kinds
        what = "sneaky"

        def requirements(self) -> tuple[()]:
            return ()

        def apply(self, base: Any) -> Any:
            return changes.UpgradeFormat().apply(base) or base.evolve(commit_id="x")

    t = lethe.Table.create(table_uri, EVENTS, key="id")
    t.append(events(0, 10))
    with pytest.raises(TypeError, match="not a change kind"):
        t.catalog.commit_change(Direct(Sneaky()))  # type: ignore[arg-type]
    assert lethe.Table.open(table_uri).version == 1  # nothing committed
    with pytest.raises(TypeError, match="not a change kind"):  # nor hidden in a transaction
        t.catalog.commit_change(Direct(changes.Compose((Sneaky(),))))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a change kind"):  # nor a transaction nested
        inner = changes.Compose((changes.UpgradeFormat(),))
        t.catalog.commit_change(Direct(changes.Compose((inner,))))
    assert lethe.Table.open(table_uri).version == 1

    writers = [
        f"{p.relative_to(LIB).as_posix()}:{n.lineno}"
        for p in sorted(LIB.rglob("*.py"))
        if p != COMMIT
        for n in ast.walk(ast.parse(p.read_text(encoding="utf-8")))
        if isinstance(n, ast.Call)
        and ast.unparse(n.func) in ("encode_manifest", "manifest.encode_manifest")
    ]
    assert writers == []
