"""The report's text as structured blocks, written out as Markdown or HTML.

Every string that comes from data or configuration (a question type, a LoCoMo
category, a variant's name or description, a path, a reason) enters as plain
text and is escaped for the format it is written in: Markdown escapes the
characters that would start markup or end a table cell (``|``, backticks,
``*``, ``\\``; ``]`` before ``(``, ``<`` and ``&`` where they would make a
link, a tag or an entity) and folds line breaks into spaces; HTML is
``html.escape``d. The HTML is built from the same rows as the Markdown, never
by parsing the Markdown back, so a ``|`` in a value stays inside its cell.

Inline content is a string, or a list of parts: plain strings, :class:`Code`
(a code span), :class:`Strong`, :class:`Keep` (kept on one line in HTML) and
:class:`Line` (a line of its own in HTML). Stdlib only: :mod:`memobench.datasets.missing`,
which the workflow's input functions import, writes its section with it.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field


class Code(str):
    """A code span: Markdown backticks, HTML ``<code>``."""


class Strong(str):
    """Bold text."""


class Line(str):
    """A line of its own in HTML (one URL of a list); plain text in Markdown,
    where the parts around it separate it."""


class Keep(str):
    """Text kept on one line in HTML (a label with its value), so a line breaks
    only between such parts; plain text in Markdown."""


Inline = "str | Code | Strong | list"


@dataclass
class Cell:
    """A table cell with HTML extras (a class, a tooltip, a note under the value)."""
    content: object
    cls: str = ""
    title: str = ""
    note: object = None  # a second line in the HTML cell; after the value in Markdown


@dataclass
class Heading:
    level: int
    text: object
    anchor: str = ""


@dataclass
class Para:
    content: object
    cls: str = ""


@dataclass
class Bullets:
    items: list
    cls: str = ""


@dataclass
class Table:
    header: list
    rows: list
    left: object = 1  # text (left-aligned) columns: the first ``left``, or a tuple of their indexes
    cls: str = ""


@dataclass
class Html:
    """HTML-only content (an image, a table with grouped headers), already escaped."""
    html: str


@dataclass
class Markdown:
    """Markdown-only content, already escaped."""
    md: str


@dataclass
class Group:
    """Cards (each a list of blocks) side by side in HTML, one after the other in Markdown."""
    cards: list = field(default_factory=list)


_MD_SPECIAL = re.compile(r"([\\`*|])")


def md_text(s) -> str:
    """Plain text for a Markdown paragraph or table cell."""
    s = " ".join(str(s).splitlines()) if s is not None else ""
    # only what would start an entity or a tag: "p < 0.0001" stays as it is
    s = re.sub(r"&(?=#?\w+;)", "&amp;", s)
    s = re.sub(r"<(?=[A-Za-z/!?])", "&lt;", s)
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # a link or image needs "](": "[95% CI]" stays as it is
    return re.sub(r"\](?=[(:])", r"\\]", s)


def _md_line_start(s: str) -> str:
    """A paragraph that would start as a heading, a list or a quote."""
    s = re.sub(r"^(\d+)([.)])(\s)", r"\1\\\2\3", s)
    return re.sub(r"^([#+\-=>\[])", r"\\\1", s)


def md_code(s, in_table: bool = True) -> str:
    """A code span, fenced with more backticks than it contains. GitHub's tables
    split on a ``|`` even inside a code span, so there it is written ``\\|``."""
    s = " ".join(str(s).splitlines())
    run = max((len(m) for m in re.findall(r"`+", s)), default=0)
    fence = "`" * (run + 1)
    if in_table:
        s = s.replace("|", "\\|")
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def _parts(content) -> list:
    if content is None:
        return []
    return list(content) if isinstance(content, (list, tuple)) else [content]


def md_inline(content, in_table: bool = False) -> str:
    out = []
    for p in _parts(content):
        if isinstance(p, Code):
            out.append(md_code(p, in_table))
        elif isinstance(p, Strong):
            out.append(f"**{md_text(p)}**")
        else:
            out.append(md_text(p))
    text = "".join(out)
    return text if in_table else _md_line_start(text)


def html_inline(content) -> str:
    out = []
    for p in _parts(content):
        if isinstance(p, Code):
            out.append(f"<code>{html.escape(str(p))}</code>")
        elif isinstance(p, Strong):
            out.append(f"<b>{html.escape(str(p))}</b>")
        elif isinstance(p, Keep):
            out.append(f"<span class='keep'>{html.escape(str(p))}</span>")
        elif isinstance(p, Line):
            out.append(f"<span class='line'>{html.escape(str(p))}</span>")
        else:
            out.append(html.escape(str(p)))
    return "".join(out)


def _md_cell(c) -> str:
    if isinstance(c, Cell):
        text = md_inline(c.content, True)
        return f"{text} {md_inline(c.note, True)}" if c.note not in (None, "", []) else text
    return md_inline(c, True)


def _html_cell(c, tag: str, left: bool) -> str:
    cell = c if isinstance(c, Cell) else Cell(c)
    classes = " ".join(x for x in ("l" if left else "", cell.cls) if x)
    attrs = (f" class='{html.escape(classes)}'" if classes else "") + (
        f" title='{html.escape(cell.title)}'" if cell.title else "")
    note = f"<span class='sub'>{html_inline(cell.note)}</span>" if cell.note not in (None, "", []) else ""
    return f"<{tag}{attrs}>{html_inline(cell.content)}{note}</{tag}>"


def _is_left(table: Table, i: int) -> bool:
    return i in table.left if isinstance(table.left, tuple) else i < table.left


def to_markdown(blocks) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += ["#" * b.level + " " + md_inline(b.text), ""]
        elif isinstance(b, Para):
            out += [md_inline(b.content), ""]
        elif isinstance(b, Bullets):
            out += ["- " + md_inline(x, True) for x in b.items] + [""]
        elif isinstance(b, Table):
            out.append("| " + " | ".join(_md_cell(c) for c in b.header) + " |")
            out.append("|" + "---|" * len(b.header))
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b.rows]
            out.append("")
        elif isinstance(b, Markdown):
            out += [b.md.rstrip("\n"), ""]
        elif isinstance(b, Group):
            out += [to_markdown(card).rstrip("\n") + "\n" for card in b.cards]
    return "\n".join(out)


def to_html(blocks) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            level = min(b.level, 6)
            anchor = f" id='{html.escape(b.anchor)}'" if b.anchor else ""
            out.append(f"<h{level}{anchor}>{html_inline(b.text)}</h{level}>")
        elif isinstance(b, Para):
            cls = f" class='{html.escape(b.cls)}'" if b.cls else ""
            out.append(f"<p{cls}>{html_inline(b.content)}</p>")
        elif isinstance(b, Bullets):
            cls = f" class='{html.escape(b.cls)}'" if b.cls else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{html_inline(x)}</li>" for x in b.items) + "</ul>")
        elif isinstance(b, Table):
            cls = f" class='{html.escape(b.cls)}'" if b.cls else ""
            out.append(f"<table{cls}><tr>" + "".join(_html_cell(c, "th", _is_left(b, i)) for i, c in enumerate(b.header))
                       + "</tr>")
            for r in b.rows:
                out.append("<tr>" + "".join(_html_cell(c, "td", _is_left(b, i)) for i, c in enumerate(r)) + "</tr>")
            out.append("</table>")
        elif isinstance(b, Html):
            out.append(b.html)
        elif isinstance(b, Group):
            out.append("<div class='group'>" + "".join(f"<div class='card'>{to_html(card)}</div>" for card in b.cards)
                       + "</div>")
    return "\n".join(out)


def aligned(header, rows) -> list[str]:
    """The header and rows as lines of columns two spaces apart, each column as
    wide as its widest cell (the last one left as it is)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in [header, *rows]]
