"""Markdown read back as a renderer reads it (markdown-it-py, CommonMark with GitHub's tables and
strikethrough), so a test checks what a pull-request comment shows, not the text it was
written as."""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

# What turns text into something else than text: a link, an image, HTML, code, emphasis.
MARKUP = frozenset(
    {
        "link_open",
        "image",
        "html_inline",
        "html_block",
        "code_inline",
        "em_open",
        "strong_open",
        "s_open",
        "autolink_open",
    }
)


def renderer() -> MarkdownIt:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


@dataclass
class Read:
    """A Markdown document as its reader meets it: its tables (each a list of rows of cell
    texts, the header first), its fenced code blocks (info, text), its headings and every
    inline token's type."""

    tables: list[list[list[str]]] = field(default_factory=list)
    fences: list[tuple[str, str]] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    inline_types: set[str] = field(default_factory=set)
    block_types: set[str] = field(default_factory=set)


def text_of(inline: Token) -> str:
    return "".join(child.content for child in inline.children or [])


def read(markdown: str) -> Read:
    found = Read()
    tokens = renderer().parse(markdown)
    row: list[str] | None = None
    inside: str | None = None
    for token in tokens:
        found.block_types.add(token.type)
        if token.type == "table_open":
            found.tables.append([])
        elif token.type == "tr_open":
            row = []
            found.tables[-1].append(row)
        elif token.type in ("heading_open", "paragraph_open"):
            inside = token.type
        elif token.type == "fence":
            found.fences.append((token.info, token.content))
        elif token.type == "inline":
            found.inline_types |= {child.type for child in token.children or []}
            if row is not None and inside is None:
                row.append(text_of(token))
            elif inside == "heading_open":
                found.headings.append(text_of(token))
            elif inside == "paragraph_open":
                found.paragraphs.append(text_of(token))
        elif token.type in ("heading_close", "paragraph_close"):
            inside = None
        elif token.type == "table_close":
            row = None
    return found


def markup_in(document: Read) -> set[str]:
    """The kinds of markup the document holds, beyond text, tables, headings, lists and fences."""
    return (document.inline_types | document.block_types) & MARKUP
