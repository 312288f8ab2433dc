"""The fenced code blocks of README.md and docs/*.md, their shell commands and synopses.

Pure text handling for ``tests/test_docs_examples.py``, which runs every block: a block is
``Block(doc, line, lang, text)`` with the id ``README.md:L42`` (the line of its opening
fence); a shell block splits into :class:`Command` values (``\\`` continuations and quoted
strings over several lines joined, comments dropped). A command with optional parts
(``[--flag VALUE]``), alternatives (``create|drop|list``) or ellipses (``...``, ``…``) is a
*synopsis*; :func:`instance_of` tells whether a concrete command line is one of its forms.

>>> b = Block("README.md", 3, "bash", 'lethe gc s3://b/t --dry-run [--grace 7d]  # gc\\n')
>>> [c.text for c in commands(b)], b.id
(['lethe gc s3://b/t --dry-run [--grace 7d]'], 'README.md:L3')
>>> is_synopsis(commands(b)[0].text)
True
>>> instance_of(["lethe", "gc", "s3://b/t", "--dry-run", "--grace", "1s"], commands(b)[0].text)
True
>>> instance_of(["lethe", "gc", "s3://b/t"], commands(b)[0].text)
False
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Block",
    "Command",
    "blocks",
    "commands",
    "instance_of",
    "is_synopsis",
    "maximal_form",
]

DOCS = ("README.md", "docs/*.md")
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<lang>[\w+-]*)\s*$")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced code block: its document (relative path), opening-fence line (1-based),
    language tag (``""`` when untagged) and text (dedented by the fence's indent)."""

    doc: str
    line: int
    lang: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.doc}:L{self.line}"


@dataclass(frozen=True, slots=True)
class Command:
    """One shell command of a block: the doc line it starts on, its text (comment dropped,
    continuation lines joined, whitespace outside quotes collapsed) and its words."""

    line: int
    text: str
    argv: tuple[str, ...]


def documents(root: Path) -> list[Path]:
    return sorted({p for pattern in DOCS for p in root.glob(pattern)})


def blocks(root: Path) -> list[Block]:
    """Every fenced block of README.md and docs/*.md, in document order."""
    out: list[Block] = []
    for path in documents(root):
        out.extend(blocks_of(path.relative_to(root).as_posix(), path.read_text()))
    return out


def blocks_of(doc: str, text: str) -> Iterator[Block]:
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = m["indent"], m["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            row = lines[j]
            body.append(row[len(indent) :] if row.startswith(indent) else row.lstrip())
            j += 1
        if j == len(lines):
            raise ValueError(f"{doc}:L{i + 1}: fence never closed")
        yield Block(doc, i + 1, m["lang"], "\n".join(body) + "\n")
        i = j + 1


def commands(block: Block) -> list[Command]:
    """The commands of a shell block. In an untagged (synopsis) block an indented line
    continues the command above it, as in a man page."""
    out: list[Command] = []
    buf: list[str] = []
    start = 0

    def words(text: str) -> list[str] | None:
        try:
            return shlex.split(text, comments=True)
        except ValueError:  # an open quote: the command goes on
            return None

    for n, row in enumerate(block.text.splitlines(), start=block.line + 1):
        if not buf:
            if not row.strip() or row.lstrip().startswith("#"):
                continue
            if out and not block.lang and row[:1].isspace():  # a synopsis' continuation
                prev = out.pop()
                buf, start = [_strip_comment(prev.text), row.strip()], prev.line
            else:
                buf, start = [row], n
        else:
            buf.append(row)
        joined = "\n".join(buf)
        if joined.endswith("\\"):
            continue
        argv = words(joined)
        if argv is None:
            continue
        out.append(Command(start, _collapse(_strip_comment(joined)), tuple(argv)))
        buf = []
    if buf:
        raise ValueError(f"{block.id}: unterminated command starting at line {start}")
    return out


def _strip_comment(text: str) -> str:
    """The text before an unquoted ``#`` that starts a word."""
    quote: str | None = None
    prev = " "
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev.isspace():
            return text[:i].rstrip()
        prev = ch
    return text.rstrip()


def _collapse(text: str) -> str:
    """Whitespace outside quotes collapsed to one space, ``\\``-newlines removed."""
    text = text.replace("\\\n", " ")
    out: list[str] = []
    quote: str | None = None
    for ch in text:
        if quote:
            out.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            out.append(ch)
        elif ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(ch)
    return "".join(out).strip()


# --- synopses --------------------------------------------------------------------------------

_ELLIPSES = ("...", "…")


def _tokens(synopsis: str) -> list[str]:
    lex = shlex.shlex(synopsis, posix=True, punctuation_chars="[]")
    lex.whitespace_split = True
    lex.commenters = ""
    return list(lex)


def _unquoted(text: str) -> str:
    return re.sub(r"'[^']*'|\"[^\"]*\"", "''", text)


def is_synopsis(text: str) -> bool:
    """Whether a command line shows optional parts, alternatives or ellipses (outside quoted
    strings: ``--where "id in [1,2,3]"`` is a value)."""
    return any(
        t in ("[", "]") or ("|" in t and t != "|") or any(e in t for e in _ELLIPSES)
        for t in _tokens(_unquoted(text))
    )


def _is_metavar(token: str) -> bool:
    """``N``, ``COLUMN``, ``KEY=VALUE``, ``<bucket>``, or a word with an ellipsis in it."""
    return (
        bool(re.fullmatch(r"[A-Z][A-Z_]*(=[A-Z][A-Z_]*)?", token))
        or (token.startswith("<") and token.endswith(">"))
        or any(e in token for e in _ELLIPSES)
    )


@dataclass(frozen=True, slots=True)
class _Word:
    """Alternatives (``create|drop|list``); a metavar, or the example value of an option
    (``--grace 7d``), matches any word."""

    options: tuple[str, ...]
    value: bool = False


@dataclass(frozen=True, slots=True)
class _Optional:
    items: tuple[_Item, ...]


@dataclass(frozen=True, slots=True)
class _Repeat:
    item: _Item


_Item = _Word | _Optional | _Repeat


def _parse(tokens: list[str], i: int = 0, close: bool = False) -> tuple[tuple[_Item, ...], int]:
    items: list[_Item] = []
    while i < len(tokens):
        t = tokens[i]
        if t == "[":
            inner, i = _parse(tokens, i + 1, close=True)
            items.append(_Optional(inner))
            continue
        if t == "]":
            if not close:
                raise ValueError("unbalanced ] in synopsis")
            return tuple(items), i + 1
        if t in _ELLIPSES and items:
            items[-1] = _Repeat(items[-1])
        else:
            prev = items[-1] if items else None
            value = isinstance(prev, _Word) and prev.options[0].startswith("--")
            items.append(_Word(tuple(t.split("|")), value=value and not t.startswith("-")))
        i += 1
    if close:
        raise ValueError("unbalanced [ in synopsis")
    return tuple(items), i


def _match(items: Sequence[_Item], argv: Sequence[str]) -> Iterator[int]:
    """Every count of leading words of ``argv`` that ``items`` can match (backtracking)."""
    if not items:
        yield 0
        return
    head, rest = items[0], items[1:]
    for used in _match_one(head, argv):
        for more in _match(rest, argv[used:]):
            yield used + more


def _match_one(item: _Item, argv: Sequence[str]) -> Iterator[int]:
    if isinstance(item, _Word):
        if argv and (item.value or any(o == argv[0] or _is_metavar(o) for o in item.options)):
            yield 1
    elif isinstance(item, _Optional):
        yield 0
        yield from _match(item.items, argv)
    else:
        yield from _match_one(item.item, argv)
        for used in _match_one(item.item, argv):
            if used:
                for more in _match_one(_Repeat(item.item), argv[used:]):
                    yield used + more


def instance_of(argv: Sequence[str], synopsis: str) -> bool:
    """Whether ``argv`` is one of the forms ``synopsis`` shows."""
    items, _ = _parse(_tokens(synopsis))
    return any(n == len(argv) for n in _match(items, list(argv)))


def maximal_form(synopsis: str) -> list[str]:
    """Every optional part taken, the first of each alternatives, repeats once, metavars kept:
    the words to check a synopsis against its program's argument parser.

    >>> maximal_form("spark-submit ingest.py --table T [--format csv|json] [--dry-run]")
    ['spark-submit', 'ingest.py', '--table', 'T', '--format', 'csv', '--dry-run']
    """
    items, _ = _parse(_tokens(synopsis))

    def walk(seq: Sequence[_Item]) -> Iterator[str]:
        for it in seq:
            if isinstance(it, _Word):
                yield it.options[0]
            elif isinstance(it, _Optional):
                yield from walk(it.items)
            else:
                yield from walk([it.item])

    return list(walk(items))
