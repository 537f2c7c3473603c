"""The Markdown of ``docs/`` as HTML: the subset those files use, and nothing that can run.

Blocks: ATX headings (with GitHub's heading ids), fenced code, pipe tables, nested lists, block
quotes, rules, paragraphs. Inline: code spans, emphasis, links, autolinks, backslash escapes. The
only raw HTML kept is an anchor, ``<a id="..." data-...="..."></a>``, rebuilt from its ``id`` and
``data-*`` attributes (each escaped); every other ``<`` is text. Link targets are kept when they are
``http(s)``, ``mailto`` or in-page (``#...``); a relative target is passed to ``links`` (the book maps
``conformance.md`` to its dashboard, and so on) and dropped to plain text when it maps to nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html import escape
from typing import Callable

ANCHOR = re.compile(r"<a\s+((?:[a-zA-Z-]+\s*=\s*\"[^\"<>]*\"\s*)+)>\s*</a>")
ATTRIBUTE = re.compile(r"([a-zA-Z-]+)\s*=\s*\"([^\"<>]*)\"")
COMMENT = re.compile(r"<!--.*?-->", re.S)
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


@dataclass
class Rendered:
    html: str
    anchors: list[dict] = field(default_factory=list)  # every raw anchor: {"id": ..., "data-...": ...}
    headings: list[tuple[int, str, str]] = field(default_factory=list)  # (level, id, text)


def slug(text: str, seen: dict[str, int] | None = None) -> str:
    """GitHub's heading id: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2."""
    base = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    if seen is None:
        return base
    count = seen.get(base, 0)
    seen[base] = count + 1
    return base if count == 0 else f"{base}-{count}"


def plain(text: str) -> str:
    """Heading text as GitHub slugs it (and as ``Rendered.headings`` keeps it): markup and anchors removed."""
    return _plain(text).strip()


def _plain(text: str) -> str:
    """Heading text as GitHub slugs it: markup and anchors removed."""
    text = ANCHOR.sub("", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[`*]", "", text)


class _Inline:
    def __init__(self, links: Callable[[str], str | None], anchors: list[dict]):
        self.links, self.anchors = links, anchors

    def target(self, url: str) -> str | None:
        url = url.strip()
        if url.startswith(("https://", "http://", "mailto:", "#")):
            return url
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", url):  # javascript:, data:, file: ...
            return None
        return self.links(url)

    def anchor(self, attributes: str) -> str:
        found = {k.lower(): v for k, v in ATTRIBUTE.findall(attributes) if k.lower() == "id" or k.lower().startswith("data-")}
        if "id" not in found:
            return ""
        self.anchors.append(found)
        return "<a " + " ".join(f'{k}="{escape(v, quote=True)}"' for k, v in found.items()) + "></a>"

    def render(self, text: str) -> str:
        out, i = [], 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\`*_{}[]()#+-.!|<>":
                out.append(escape(text[i + 1]))
                i += 2
                continue
            if c == "`":
                run = len(text[i:]) - len(text[i:].lstrip("`"))
                end = text.find("`" * run, i + run)
                if end != -1:
                    out.append(f"<code>{escape(text[i + run:end].strip())}</code>")
                    i = end + run
                    continue
            if c == "<":
                match = ANCHOR.match(text, i)
                if match:
                    out.append(self.anchor(match.group(1)))
                    i = match.end()
                    continue
                match = re.compile(r"<((?:https?|mailto):[^\s<>]+)>").match(text, i)
                if match:
                    url = match.group(1)
                    out.append(f'<a href="{escape(url, quote=True)}">{escape(url)}</a>')
                    i = match.end()
                    continue
            if c == "[":
                match = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]*(?:\([^()]*\)[^()\s]*)*)\)").match(text, i)
                if match:
                    label, url = match.group(1), match.group(2)
                    target = self.target(url)
                    inner = self.render(label)
                    out.append(f'<a href="{escape(target, quote=True)}">{inner}</a>' if target else inner)
                    i = match.end()
                    continue
            if c in "*_" and text.startswith(c * 2, i):
                end = text.find(c * 2, i + 2)
                if end > i + 2:
                    out.append(f"<strong>{self.render(text[i + 2:end])}</strong>")
                    i = end + 2
                    continue
            if c in "*_" and (i == 0 or not text[i - 1].isalnum()) and i + 1 < len(text) and not text[i + 1].isspace():
                end = i + 1
                while True:
                    end = text.find(c, end)
                    if end == -1 or (not text[end - 1].isspace() and (end + 1 >= len(text) or not text[end + 1].isalnum())):
                        break
                    end += 1
                if end != -1 and end > i + 1:
                    out.append(f"<em>{self.render(text[i + 1:end])}</em>")
                    i = end + 1
                    continue
            out.append(escape(c))
            i += 1
        return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    cells, current, i, in_code = [], [], 0, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            current.append("\\|")
            i += 2
            continue
        if c == "`":
            in_code = not in_code
        if c == "|" and not in_code:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(c)
        i += 1
    cells.append("".join(current).strip())
    return [c.replace("\\|", "|") if "`" in c else c for c in cells]


def render(text: str, links: Callable[[str], str | None] = lambda url: None) -> Rendered:
    """``text`` (Markdown) as HTML, with its raw anchors and its headings."""
    result = Rendered("")
    inline = _Inline(links, result.anchors)
    seen: dict[str, int] = {}
    lines = COMMENT.sub("", text).splitlines()
    out: list[str] = []
    paragraph: list[str] = []
    lists: list[tuple[int, str]] = []  # open lists: (indent, "ul" | "ol")

    def flush():
        if paragraph:
            out.append(f"<p>{inline.render(' '.join(s.strip() for s in paragraph))}</p>")
            paragraph.clear()

    def close_lists(indent: int = -1):
        while lists and lists[-1][0] > indent:
            out.append(f"</li></{lists.pop()[1]}>")

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            flush()
            marker, language = fence.group(2), fence.group(3)
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                body.append(lines[i])
                i += 1
            i += 1
            cls = f' class="language-{escape(language, quote=True)}"' if language else ""
            block = f"<pre><code{cls}>{escape(chr(10).join(body))}</code></pre>"
            if lists:
                out.append(block)
            else:
                out.append(block)
            continue
        if not line.strip():
            flush()
            # a blank line ends a list unless the next line continues it (an item or indented text)
            nxt = next((l for l in lines[i + 1:] if l.strip()), "")
            if lists and not (ITEM.match(nxt) or nxt.startswith("  ")):
                close_lists()
            i += 1
            continue
        heading = HEADING.match(line)
        if heading:
            flush()
            close_lists()
            level, content = len(heading.group(1)), heading.group(2)
            ident = slug(_plain(content), seen)
            result.headings.append((level, ident, _plain(content).strip()))
            out.append(f'<h{level} id="{escape(ident, quote=True)}">{inline.render(content)}</h{level}>')
            i += 1
            continue
        if RULE.match(line) and not paragraph:
            close_lists()
            out.append("<hr>")
            i += 1
            continue
        if line.lstrip().startswith("|") and i + 1 < len(lines) and TABLE_RULE.match(lines[i + 1]):
            flush()
            close_lists()
            header = _cells(line)
            out.append("<table><thead><tr>" + "".join(f"<th>{inline.render(c)}</th>" for c in header) + "</tr></thead><tbody>")
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _cells(lines[i])
                out.append("<tr>" + "".join(f"<td>{inline.render(c)}</td>" for c in cells) + "</tr>")
                i += 1
            out.append("</tbody></table>")
            continue
        if line.startswith(">"):
            flush()
            close_lists()
            quoted = []
            while i < len(lines) and lines[i].startswith(">"):
                quoted.append(lines[i][1:].removeprefix(" "))
                i += 1
            inner = render("\n".join(quoted), links)
            result.anchors += inner.anchors
            out.append(f"<blockquote>{inner.html}</blockquote>")
            continue
        item = ITEM.match(line)
        if item and (lists or not paragraph):
            flush()
            indent, kind = len(item.group(1)), "ol" if item.group(2)[0].isdigit() else "ul"
            if lists and indent > lists[-1][0]:
                out.append(f"<{kind}><li>")
                lists.append((indent, kind))
            else:
                close_lists(indent)
                if lists and lists[-1][0] == indent and lists[-1][1] != kind:
                    out.append(f"</li></{lists.pop()[1]}>")
                if lists and lists[-1][0] == indent:
                    out.append("</li><li>")
                else:
                    out.append(f"<{kind}><li>")
                    lists.append((indent, kind))
            paragraph.append(item.group(3))
            i += 1
            # continuation lines of the item
            while i < len(lines) and lines[i].strip() and not ITEM.match(lines[i]) and not FENCE.match(lines[i]) \
                    and lines[i].startswith(" "):
                paragraph.append(lines[i])
                i += 1
            out.append(inline.render(" ".join(s.strip() for s in paragraph)))
            paragraph.clear()
            continue
        paragraph.append(line)
        i += 1
    flush()
    close_lists()
    result.html = "\n".join(out)
    return result
