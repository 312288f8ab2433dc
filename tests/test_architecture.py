"""The library's shape: no import circle in ``shared/lethe`` (imports inside functions count:
a deferred import hides a circle, it does not remove it; ``TYPE_CHECKING`` blocks do not)."""

from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[1] / "shared" / "lethe"


def _module(p: Path) -> str:
    parts = list(p.relative_to(LIB.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(p: Path, name: str, known: set[str]) -> set[str]:
    package = name if p.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for ch in ast.iter_child_nodes(node):
            if isinstance(ch, ast.If) and "TYPE_CHECKING" in ast.unparse(ch.test):
                continue
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
    assert "lethe.catalog" in g["lethe.deletes"]  # it sees real edges
    g["lethe.catalog"] = {*g["lethe.catalog"], "lethe.deletes"}
    assert ["lethe.catalog", "lethe.deletes"] in cycles(g)


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
