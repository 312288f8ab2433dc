"""The library's layout is its architecture (docs/architecture.md): ``shared/lethe`` is a few
packages in layers, each importing only packages below it; the façade (``lethe.table``) is
imported only by what sits above it; no module reaches another module's private names.

Edges that break the picture today are listed with the step that removes them; the lists
only shrink (an entry that no longer occurs fails, so it must be removed)."""

from __future__ import annotations

import ast
from pathlib import Path

from test_architecture import LIB, graph

# Bottom to top. A package imports only packages on a lower line (the package root re-exports).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "progress", "process"),  # leaves: typed errors, progress callbacks, exit codes
    ("storage", "parquet"),  # bytes: S3 objects pinned to ETags; the Parquet codec
    ("catalog",),  # manifests, snapshots, schemas, changes, transforms, the commit loop
    ("dv", "writing"),  # deletion vectors; the one Parquet layout
    ("reading",),  # planning, pruning, pinned reads, the filter grammars
    ("index",),  # secondary indexes
    ("ingest", "erasure", "maintenance"),  # files coming in; rows leaving; compaction
    ("iceberg",),  # the Iceberg view and Iceberg sources
    ("adopt", "gc"),  # tables adopted in place; garbage collection
    ("audit",),  # receipts, evidence, verify, the table report
    ("table",),  # the façade (DESIGN §9)
    ("lake", "spark"),  # requests across tables; the Spark data source
    ("cli", "lethe"),  # the command line; the package root
)
TOP_LEVEL_MODULES = {"__init__", "table", "errors", "progress", "process", "spark"}

# (importer package, imported package): the step that removes it.
PENDING_EDGES: dict[tuple[str, str], str] = {
    ("reading", "index"): "reading.rows probes the index for lookups (the lookup path moves up)",
}
# module: private names it imports from another module (the names become public or move).
PENDING_PRIVATE: dict[str, set[str]] = {}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "lethe"


def _layer() -> dict[str, int]:
    return {p: i for i, line in enumerate(LAYERS) for p in line}


def package_edges() -> dict[tuple[str, str], set[str]]:
    """``(importer, imported)`` package pairs, each with the module edges behind it."""
    out: dict[tuple[str, str], set[str]] = {}
    for m, deps in graph().items():
        for d in deps:
            a, b = _package(m), _package(d)
            if a != b:
                out.setdefault((a, b), set()).add(f"{m} -> {d}")
    return out


def test_the_top_level_is_the_facade_and_a_few_leaves() -> None:
    modules = {p.stem for p in LIB.glob("*.py")}
    assert modules == TOP_LEVEL_MODULES
    packages = {p.name for p in LIB.iterdir() if (p / "__init__.py").exists()}
    assert packages | {m for m in modules if m != "__init__"} | {"lethe"} == set(_layer())


def test_every_package_imports_only_packages_below_it() -> None:
    layer = _layer()
    edges = package_edges()
    upward = {
        e: sorted(why)
        for e, why in edges.items()
        if layer[e[1]] >= layer[e[0]] and e not in PENDING_EDGES
    }
    assert upward == {}
    assert sorted(set(PENDING_EDGES) - set(edges)) == [], "gone: remove from PENDING_EDGES"


def test_the_layer_rule_sees_an_upward_import() -> None:
    layer = _layer()
    edges = package_edges()
    assert ("erasure", "catalog") in edges and layer["catalog"] < layer["erasure"]
    assert layer["cli"] > layer["table"] > layer["gc"]


def _private_imports(p: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lethe"):
            found |= {a.name for a in node.names if a.name.startswith("_") and a.name[1] != "_"}
    return found


def test_no_module_imports_another_modules_private_names() -> None:
    found = {
        p.relative_to(LIB).as_posix(): names
        for p in sorted(LIB.rglob("*.py"))
        if (names := _private_imports(p))
    }
    new = {k: sorted(v - PENDING_PRIVATE.get(k, set())) for k, v in found.items()}
    assert {k: v for k, v in new.items() if v} == {}
    gone = {k: sorted(v - found.get(k, set())) for k, v in PENDING_PRIVATE.items()}
    assert {k: v for k, v in gone.items() if v} == {}, "no longer imported: remove them"


def test_the_flat_layouts_module_paths_still_import() -> None:
    """Tools written against the flat layout (the peer bench does
    ``from lethe.store import make_s3_client``) kept failing with ModuleNotFoundError after
    the re-layout (issue 38 keeps the API): each old path is the module at its new place,
    which keeps its own name and spec."""
    import importlib

    import lethe

    for old, new in lethe._MOVED.items():
        moved = importlib.import_module(old)
        assert moved is importlib.import_module(new), old
        assert moved.__spec__ is not None and moved.__spec__.name == new
    from lethe.store import make_s3_client

    assert make_s3_client.__module__ == "lethe.storage.store"
