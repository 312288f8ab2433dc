"""The ``--where`` grammar: comparisons joined by ``and`` / ``or`` with parentheses, read as a
SQL reader would read them, and returned in pyarrow's DNF (a list of ANDed lists, ORed).

Grammar (keywords are case-insensitive)::

    where   := conj ("or" conj)*
    conj    := factor ("and" factor)*
    factor  := "(" where ")" | compare
    compare := column op value | column "is" ["not"] "null"
    op      := = == != < <= > >= in "not in"
    value   := JSON literal (number, "string", [list], true, false, null)
             | 'quoted string' | a bare word (no spaces, no parentheses, not a keyword)

A bare value that runs into another word is refused rather than read as one string (``email =
a@x.com OR id = 1`` once matched nothing: the whole tail was the value).

>>> parse_dnf("id = 1 or (name = 'a b' and x in [1, 2])")
[[('id', '=', 1)], [('name', '=', 'a b'), ('x', 'in', [1, 2])]]
>>> parse_dnf("email = a@x.com OR customer_id = 601")
[[('email', '=', 'a@x.com')], [('customer_id', '=', 601)]]
"""

from __future__ import annotations

import json
import re
from typing import Any

from lethe import errors

__all__ = ["Dnf", "Term", "and_dnf", "parse_dnf"]

Term = tuple[str, str, Any]
Dnf = list[list[Term]]

_KEYWORDS = {"and", "or", "not", "in", "is", "null"}
_IDENT = re.compile(r"[A-Za-z_][\w.]*")
_OP = re.compile(r"==|!=|<=|>=|=|<|>")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?(?![\w@.:/-])")
_BARE = re.compile(r"[^\s()\[\]'\",]+")
_MAX_TERMS = 256  # a DNF grows by products: refuse expressions that expand past this


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, why: str) -> errors.InvalidRequest:
        return errors.InvalidRequest(
            f"cannot parse --where {self.text!r} at column {self.pos + 1}: {why}. Write "
            "'column op value' (op one of = != < <= > >= in, not in; 'column is [not] null'), "
            "joined by and / or with parentheses; quote a value with spaces: name = 'a b'"
        )

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def keyword(self, word: str) -> bool:
        self.skip()
        m = _IDENT.match(self.text, self.pos)
        if m and m.group(0).lower() == word:
            self.pos = m.end()
            return True
        return False

    def punct(self, ch: str) -> bool:
        self.skip()
        if self.text.startswith(ch, self.pos):
            self.pos += len(ch)
            return True
        return False

    def where(self) -> Dnf:
        out = self.conj()
        while self.keyword("or"):
            out = out + self.conj()
            if len(out) > _MAX_TERMS:
                raise self.fail(f"more than {_MAX_TERMS} alternatives")
        return out

    def conj(self) -> Dnf:
        out = self.factor()
        while self.keyword("and"):
            out = and_dnf(out, self.factor())
            if len(out) > _MAX_TERMS:
                raise self.fail(f"more than {_MAX_TERMS} alternatives once expanded")
        return out

    def factor(self) -> Dnf:
        if self.punct("("):
            inner = self.where()
            if not self.punct(")"):
                raise self.fail("expected ')'")
            return inner
        return [[self.compare()]]

    def compare(self) -> Term:
        self.skip()
        m = _IDENT.match(self.text, self.pos)
        if not m or m.group(0).lower() in _KEYWORDS:
            raise self.fail("expected a column name")
        col = m.group(0)
        self.pos = m.end()
        if self.keyword("is"):
            negated = self.keyword("not")
            if not self.keyword("null"):
                raise self.fail("expected 'null' after 'is'")
            return col, ("not in" if negated else "in"), [None]
        if self.keyword("not"):
            if not self.keyword("in"):
                raise self.fail("expected 'in' after 'not'")
            return col, "not in", self.list_value()
        if self.keyword("in"):
            return col, "in", self.list_value()
        self.skip()
        o = _OP.match(self.text, self.pos)
        if not o:
            raise self.fail("expected an operator")
        self.pos = o.end()
        return col, o.group(0), self.value()

    def list_value(self) -> list[Any]:
        self.skip()
        if not self.text.startswith("[", self.pos):
            raise self.fail("'in' needs a list: id in [1, 2]")
        value, end = self._json_at(self.pos)
        if not isinstance(value, list):
            raise self.fail("'in' needs a list: id in [1, 2]")
        self.pos = end
        return value

    def value(self) -> Any:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("expected a value")
        ch = self.text[self.pos]
        if ch == "'":
            end = self.text.find("'", self.pos + 1)
            if end < 0:
                raise self.fail("unterminated quote")
            v = self.text[self.pos + 1 : end]
            self.pos = end + 1
            return v
        if ch in '"[':
            v, self.pos = self._json_at(self.pos)
            return v
        n = _NUMBER.match(self.text, self.pos)
        if n:
            self.pos = n.end()
            return json.loads(n.group(0))
        b = _BARE.match(self.text, self.pos)
        if not b:
            raise self.fail("expected a value")
        word = b.group(0)
        self.pos = b.end()
        low = word.lower()
        if low in ("true", "false", "null"):
            return json.loads(low)
        return word

    def _json_at(self, pos: int) -> tuple[Any, int]:
        try:
            return json.JSONDecoder().raw_decode(self.text, pos)
        except (json.JSONDecodeError, RecursionError) as e:
            raise self.fail(f"not a JSON value ({e.__class__.__name__})") from None

    def done(self) -> None:
        self.skip()
        if self.pos < len(self.text):
            rest = self.text[self.pos :]
            raise self.fail(
                f"unexpected {rest[:20]!r} (a value with spaces must be quoted; "
                "join comparisons with and / or)"
            )


def and_dnf(a: Dnf, b: Dnf) -> Dnf:
    """The DNF of ``a AND b``: every conjunct of one joined with every conjunct of the other.

    >>> and_dnf([[("a", "=", 1)], [("b", "=", 2)]], [[("c", "=", 3)]])
    [[('a', '=', 1), ('c', '=', 3)], [('b', '=', 2), ('c', '=', 3)]]
    """
    return [x + y for x in a for y in b]


def parse_dnf(expr: str) -> Dnf:
    """Parse one ``--where`` expression into DNF (see the module docstring).

    Raises:
        InvalidRequest: where it cannot be read, with the column and the way to write it.
    """
    p = _Parser(expr)
    if not expr.strip():
        raise p.fail("empty expression")
    out = p.where()
    p.done()
    return out
