"""The repository's markdown read as GitHub renders it: headings and their anchors, tables, links, code blocks.

markdown-it-py (already installed: rich depends on it) does the parsing, so tables with escaped
pipes, code spans in headings and links inside tables are read the way a reader sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["DOCS", "MARKDOWN_FILES", "ROOT", "Cell", "Page", "Table", "page", "slug"]

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARKDOWN_FILES = (ROOT / "README.md", *sorted(DOCS.glob("*.md")))

_MD = MarkdownIt("commonmark").enable("table")
_HTML_ID = re.compile(r"""\bid=["']([^"']+)["']""")


def slug(text: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _text(inline: Token) -> str:
    """What a reader sees of an inline run: text and code spans without their backticks."""
    return "".join(c.content for c in inline.children or () if c.type in ("text", "code_inline"))


@dataclass(frozen=True)
class Cell:
    """One table cell: its markdown source and the code spans in it."""

    source: str
    code: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table under a heading path; rows map column titles to cells."""

    headings: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[dict[str, Cell], ...]


@dataclass
class Page:
    """One markdown file, parsed."""

    path: Path
    headings: list[tuple[int, str]] = field(default_factory=list)
    anchors: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    code: list[tuple[tuple[str, ...], str, str]] = field(default_factory=list)  # (headings, language, text)
    blocks: list[str] = field(default_factory=list)  # top-level blocks in order: "h1", "paragraph", "table", ...

    def titles(self, level: int) -> list[str]:
        return [text for lvl, text in self.headings if lvl == level]

    def tables_under(self, heading: str) -> list[Table]:
        """Tables in the section with this heading, its subsections included."""
        return [t for t in self.tables if heading in t.headings]

    def code_under(self, heading: str, language: str) -> list[str]:
        return [text for path, lang, text in self.code if heading in path and lang == language]


def _table(tokens: list[Token], start: int, headings: tuple[str, ...]) -> tuple[Table, int]:
    columns: list[str] = []
    rows: list[dict[str, Cell]] = []
    row: list[Cell] = []
    i = start
    while tokens[i].type != "table_close":
        tok = tokens[i]
        if tok.type == "inline":
            cell = Cell(tok.content, tuple(c.content for c in tok.children or () if c.type == "code_inline"))
            if tokens[i - 1].type == "th_open":
                columns.append(_text(tok).strip())
            else:
                row.append(cell)
        elif tok.type == "tr_close" and row:
            rows.append(dict(zip(columns, row, strict=False)))
            row = []
        i += 1
    return Table(headings, tuple(columns), tuple(rows)), i


@cache
def page(path: Path) -> Page:
    """Parse one markdown file (cached: the files do not change during a test run)."""
    result = Page(path)
    tokens = _MD.parse(path.read_text(encoding="utf-8"))
    stack: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.level == 0 and tok.nesting >= 0 and tok.type != "inline":
            result.blocks.append(tok.tag if tok.type == "heading_open" else tok.type.removesuffix("_open"))
        if tok.type == "heading_open":
            level, text = int(tok.tag[1]), _text(tokens[i + 1])
            result.headings.append((level, text))
            anchor = slug(text)
            # GitHub numbers repeated headings: name, name-1, name-2 ...
            result.anchors.add(f"{anchor}-{seen[anchor]}" if anchor in seen else anchor)
            seen[anchor] = seen.get(anchor, 0) + 1
            stack = [(lvl, t) for lvl, t in stack if lvl < level] + [(level, text)]
        elif tok.type == "table_open":
            table, i = _table(tokens, i, tuple(t for _, t in stack))
            result.tables.append(table)
        elif tok.type == "fence":
            result.code.append((tuple(t for _, t in stack), tok.info.strip(), tok.content))
        i += 1
    for tok in tokens:  # links and explicit anchors anywhere, table cells included
        if tok.type == "html_block":
            result.anchors.update(_HTML_ID.findall(tok.content))
        for child in tok.children or ():
            if child.type == "link_open":
                result.links.append(str(child.attrs["href"]))
            elif child.type == "image":
                result.links.append(str(child.attrs["src"]))
            elif child.type == "html_inline":
                result.anchors.update(_HTML_ID.findall(child.content))
    return result
