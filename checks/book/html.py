"""HTML helpers of the book: escaping, the page frame, Python source with highlighting.

Everything that is not markup written here goes through :func:`e` (text and attribute values
alike), and JSON placed in a script goes through :func:`script_json`, so a message such as
``</script><script>...`` is text wherever it lands.
"""

from __future__ import annotations

import io
import json
import keyword
import token
import tokenize
from html import escape

STATUS_LABEL = {"pass": "pass", "fail": "FAIL", "error": "error", "xfail": "xfail", "skip": "skip",
                "not-provided": "–", "proved": "proved", "refuted": "refuted", "inconclusive": "inconclusive"}
STATUS_TITLE = {"pass": "conforms", "fail": "the numbers contradict the clause", "error": "raised or returned something unusable",
                "xfail": "a deviation the adapter declares", "skip": "skipped", "not-provided": "no such operation",
                "none": "not run on this clause"}


def e(value) -> str:
    """Text or an attribute value, escaped (quotes included)."""
    return escape("" if value is None else str(value), quote=True)


def script_json(value) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>``, ``&`` or line separators survive literally."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, code)
    return text


def status(value: str, href: str | None = None, title: str | None = None) -> str:
    """A verdict badge; a link when ``href`` is given."""
    label = STATUS_LABEL.get(value, value)
    tip = e(title or STATUS_TITLE.get(value, value))
    cls = f"st st-{e(value)}"
    if href:
        return f'<a class="{cls}" href="{e(href)}" title="{tip}">{e(label)}</a>'
    return f'<span class="{cls}" title="{tip}">{e(label)}</span>'


def upstream_label(url: str) -> str:
    """A thread's name and number from its address: ``DLR-RM/stable-baselines3 issue #633``, ``pytorch/rl PR #2045``
    (GitHub issues, pull requests and discussions); any other address is shown as its host and path."""
    import re

    found = re.match(r"https?://github\.com/([^/]+/[^/]+)/(issues|pull|discussions)/(\d+)", url)
    if found:
        kind = {"issues": "issue", "pull": "PR", "discussions": "discussion"}[found.group(2)]
        return f"{found.group(1)} {kind} #{found.group(3)}"
    return re.sub(r"^https?://(www\.)?", "", url).rstrip("/")


def python(source: str) -> str:
    """Python source as escaped HTML with spans for keywords, strings, comments, numbers and names
    being defined; plain escaped text if it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return e(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out, position, previous = [], 0, ""
    for tok in tokens:
        if tok.type in (token.ENDMARKER,):
            break
        start = offsets[tok.start[0] - 1] + tok.start[1] if tok.start[0] - 1 < len(offsets) else len(source)
        end = offsets[tok.end[0] - 1] + tok.end[1] if tok.end[0] - 1 < len(offsets) else len(source)
        if start > position:
            out.append(e(source[position:start]))
        text = source[start:end]
        kind = ""
        if tok.type == token.COMMENT:
            kind = "c"
        elif tok.type == token.STRING or tok.type == getattr(token, "FSTRING_START", -1):
            kind = "s"
        elif tok.type == token.NUMBER:
            kind = "n"
        elif tok.type == token.NAME and keyword.iskeyword(text):
            kind = "k"
        elif tok.type == token.NAME and previous in ("def", "class"):
            kind = "f"
        elif tok.type == token.OP and text == "@":
            kind = "d"
        out.append(f'<span class="{kind}">{e(text)}</span>' if kind else e(text))
        position = max(position, end)
        if tok.type == token.NAME:
            previous = text
    out.append(e(source[position:]))
    return "".join(out)


def code(source: str, caption: str = "", open_: bool = True) -> str:
    body = f'<pre class="code"><code>{python(source)}</code></pre>'
    if caption and not open_:
        return f"<details><summary>{caption}</summary>{body}</details>"
    return (f'<div class="code-caption">{caption}</div>' if caption else "") + body


NAV = (("index.html", "Clauses"), ("dashboard.html", "Dashboard"), ("history.html", "History"),
       ("bugs-found.html", "Defects found"), ("bugs.html", "Bug catalogue"), ("contract.html", "Contract"),
       ("works.html", "Works cited"))


def page(title: str, body: str, *, depth: int = 0, active: str = "", scripts: tuple[str, ...] = (), wide: bool = False) -> str:
    """A complete page: ``depth`` is how many folders below the book's root it lives (for relative links)."""
    up = "../" * depth
    here = ' class="here"'
    nav = "".join(f'<a href="{up}{href}"{here if href == active else ""}>{e(label)}</a>' for href, label in NAV)
    tags = "".join(f'<script src="{up}assets/{name}"></script>' for name in scripts)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} · rlspec</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{up}assets/book.css">
</head>
<body data-root="{up or './'}">
<header class="top"><a class="brand" href="{up}index.html">rlspec</a><nav>{nav}</nav>
<form class="search" role="search" onsubmit="return false"><input id="search" type="search" placeholder="Search clauses (id or words)" autocomplete="off" aria-label="search clauses"><ol id="search-results" hidden></ol></form>
</header>
<main class="{'wide' if wide else ''}">
{body}
</main>
<footer>Generated by <code>rlspec book</code> from the catalogue, the contract, the proofs, the reference and the matrix; do not edit by hand.</footer>
<script src="{up}assets/search-index.js"></script>
<script src="{up}assets/book.js"></script>{tags}
</body>
</html>
"""
