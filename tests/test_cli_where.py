"""The ``--where`` grammar (issue 36 item 1): ``and`` / ``or`` / parentheses mean what a SQL
reader would think, and a bare value that runs into more words is refused, never matched as one
string."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lethe
from lethe import errors
from lethe.cli import main
from lethe.reading.where import parse_dnf

COLS = ("a", "b", "c")
OPS = ("=", "!=", "<", "<=", ">", ">=")


def _eval_term(row: dict[str, int], col: str, op: str, v: Any) -> bool:
    x = row[col]
    if op in ("in", "not in"):
        return (x in v) == (op == "in")
    return {
        "=": x == v,
        "==": x == v,
        "!=": x != v,
        "<": x < v,
        "<=": x <= v,
        ">": x > v,
        ">=": x >= v,
    }[op]


def _eval_dnf(row: dict[str, int], dnf: list[list[tuple[str, str, Any]]]) -> bool:
    return any(all(_eval_term(row, *t) for t in conj) for conj in dnf)


# An expression tree: ("cmp", col, op, v) | ("and"|"or", left, right); rendered with random
# keyword case and parentheses only where SQL's precedence (and before or) needs them.
_cmp = st.builds(
    lambda c, o, v: ("cmp", c, o, v),
    st.sampled_from(COLS),
    st.sampled_from((*OPS, "in", "not in")),
    st.integers(-3, 3),
)
_tree = st.recursive(
    _cmp,
    lambda kids: st.tuples(st.sampled_from(("and", "or")), kids, kids),
    max_leaves=8,
)


def _render(t: Any, case: Any, parent: str = "or") -> str:
    if t[0] == "cmp":
        _, c, o, v = t
        if o in ("in", "not in"):
            return f"{c} {case(o)} [{v}, {v + 1}]"
        return f"{c} {o} {v}"
    kind, left, right = t
    s = f"{_render(left, case, kind)} {case(kind)} {_render(right, case, kind)}"
    return f"({s})" if kind == "or" and parent == "and" else s


def _eval_tree(t: Any, row: dict[str, int]) -> bool:
    if t[0] == "cmp":
        _, c, o, v = t
        if o in ("in", "not in"):
            return _eval_term(row, c, o, [v, v + 1])
        return _eval_term(row, c, o, v)
    kind, left, right = t
    if kind == "and":
        return _eval_tree(left, row) and _eval_tree(right, row)
    return _eval_tree(left, row) or _eval_tree(right, row)


@settings(max_examples=200)
@given(
    _tree,
    st.lists(st.fixed_dictionaries({c: st.integers(-4, 4) for c in COLS}), min_size=1, max_size=8),
    st.sampled_from((str.lower, str.upper, str.title)),
)
def test_every_accepted_where_means_what_sql_means(tree: Any, rows: Any, case: Any) -> None:
    expr = _render(tree, case)
    dnf = parse_dnf(expr)
    for row in rows:
        assert _eval_dnf(row, dnf) == _eval_tree(tree, row), expr


@pytest.mark.parametrize(
    "expr",
    [
        "name = bob smith",
        "email = a@x.com OR",
        "(id = 1",
        "id = 1 and",
        "id in 3",
        "= 3",
        "id = 'open",
    ],
)
def test_ambiguous_or_broken_where_is_refused(expr: str) -> None:
    with pytest.raises(errors.InvalidRequest, match="cannot parse --where"):
        parse_dnf(expr)


def test_values_keep_their_old_meanings() -> None:
    assert parse_dnf("ts >= '2024-01-01'") == [[("ts", ">=", "2024-01-01")]]
    assert parse_dnf("d = 2024-01-01") == [[("d", "=", "2024-01-01")]]
    assert parse_dnf("name = 'bob smith'") == [[("name", "=", "bob smith")]]
    assert parse_dnf('name = "O\'Hara"') == [[("name", "=", "O'Hara")]]
    assert parse_dnf("x = -1.5") == [[("x", "=", -1.5)]]
    assert parse_dnf("email IS NOT NULL") == [[("email", "not in", [None])]]
    assert parse_dnf("ok = true") == [[("ok", "=", True)]]


def test_cli_or_deletes_both_people(table_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's line: ``email = a@x.com OR customer_id = 601`` printed "no rows matched"."""
    schema = pa.schema(
        [("id", pa.int64(), False), ("customer_id", pa.int64()), ("email", pa.string())]
    )
    t = lethe.Table.create(table_uri, schema, key="id")
    t.append(
        pa.table(
            {"id": [1, 2, 3], "customer_id": [600, 601, 602], "email": ["a@x.com", "b", "c"]},
            schema=schema,
        )
    )
    where = "email = a@x.com OR customer_id = 601"
    assert main(["delete", table_uri, "--where", where, "--request-id", "r-or"]) == 0
    capsys.readouterr()
    assert main(["scan", table_uri, "--format", "jsonl"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line]
    assert [r["id"] for r in rows] == [3]
    assert main(["delete", table_uri, "--where", "email = a b", "--request-id", "r2"]) == 2
    assert "quoted" in capsys.readouterr().err
