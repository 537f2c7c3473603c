"""The pages people share: the dashboard (totals, the grid, the run's metadata), the history across releases
(pass rate over releases, each defect's affected releases, every release tried) and the diff of two runs.

Markup is written here, every value from the data escaped with :func:`e`; the scripts (assets/dashboard.js,
assets/diff.js) filter and compare what the page already holds and write the view into the address
(``history.replaceState``), so a filtered view or a comparison is a link.
"""

from __future__ import annotations

from ..matrix.affected import release_of, states
from .html import e, page, script_json, status
from .pages import ATTENTION, PROVIDED, Book, _tally_html, clause_href, verdict_href

# one character per verdict in the diff page's data (a column's verdicts in clause order: one short string)
CODES = {"pass": "p", "fail": "f", "error": "e", "xfail": "x", "skip": "s", "not-provided": "n"}
LABELS = {"pass": "pass", "fail": "FAIL", "error": "error", "xfail": "xfail", "skip": "skip", "not-provided": "–", "none": "·"}


# ------------------------------------------------------------------------------------------------
# numbers


def rate(results: dict, clause_ids=None) -> tuple[int, int]:
    """(pass, provided) over ``clause_ids`` (default: every clause in ``results``); provided = pass, FAIL, error, xfail."""
    ids = results.keys() if clause_ids is None else clause_ids
    statuses = [results.get(i, {}).get("status") for i in ids]
    provided = [s for s in statuses if s in PROVIDED]
    return sum(s == "pass" for s in provided), len(provided)


def _main_results(record: dict) -> dict:
    """The adapter's own column of a history record: clause id -> result."""
    candidates = record.get("report", {}).get("candidates", [])
    main = next((c for c in candidates if not c.get("variant") and ":" not in str(c.get("candidate", ""))), candidates[0] if candidates else {})
    return {r.get("id"): r for r in main.get("run", {}).get("clauses", []) if isinstance(r, dict)}


def canonical(book: Book) -> dict[str, list[dict]]:
    """Each adapter's release history: the records of one run configuration (``history.series``)."""
    from ..matrix.history import series

    return {adapter: series(records) for adapter, records in book.history.items() if records}


def commit_of(record: dict) -> str:
    """`` @ abc1234``: the rlspec commit a history record was made with (records of several commits can sit side by side)."""
    commit = str(record.get("commit", ""))
    return f" @ {e(commit[:7])}" if commit else ""


def key_of(adapter: str, record: dict) -> str:
    return f"{adapter}@{release_of(record)}"


def _percent(passed: int, provided: int) -> str:
    return f"{100 * passed / provided:.0f}%" if provided else "–"


def _rate_cell(passed: int, provided: int, title: str = "") -> str:
    if not provided:
        return f'<td class="rate none" title="{e(title or "no clause of this chapter is provided")}">–</td>'
    share = passed / provided
    band = "all" if passed == provided else "most" if share >= 0.8 else "some" if share >= 0.5 else "few"
    return (f'<td class="rate {band}" style="--rate:{share:.3f}" title="{e(title)}">{passed} of {provided}'
            f'<span class="pct">{_percent(passed, provided)}</span></td>')


def rate_chart(points: list[tuple[str, int, int]], *, width: int = 132, height: int = 30, labels: bool = False,
               href: str = "") -> str:
    """An inline SVG of the pass rate (pass of provided, the library's own column) over its releases, oldest left.
    ``points``: (release, passed, provided). The vertical scale runs from the lowest rate (rounded down to a tenth)
    to 100 %, written beside the chart, so a change of one clause is visible."""
    points = [p for p in points if p[2]]
    if not points:
        return '<span class="muted">no release recorded</span>'
    rates = [p / q for _, p, q in points]
    low = min(0.9, int(min(rates) * 10) / 10)
    pad, left, right = 4, (34 if labels else 4), (18 if labels else 4)  # room for the axis labels
    inner_w, inner_h = width - left - right, height - 2 * pad - (14 if labels else 0)
    step = inner_w / max(1, len(points) - 1)

    def xy(i, r):
        return left + (i * step if len(points) > 1 else inner_w / 2), pad + (1 - (r - low) / (1 - low)) * inner_h

    coords = [xy(i, r) for i, r in enumerate(rates)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    # a release whose rate fell from the previous one's is marked (red), one where it rose green
    moves = ["same"] + ["drop" if b < a else "rise" if b > a else "same" for a, b in zip(rates, rates[1:])]
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{2.6 if labels else 1.9}" class="{move}">'
                   f'<title>{e(rel)}: {p} of {q} pass ({_percent(p, q)})</title></circle>'
                   for (x, y), move, (rel, p, q) in zip(coords, moves, points))
    extra = ""
    if labels:
        y100, ylow = pad, pad + inner_h
        extra += (f'<text x="{left - 4}" y="{y100 + 4}" class="axis" text-anchor="end">100%</text>'
                  f'<text x="{left - 4}" y="{ylow + 4}" class="axis" text-anchor="end">{low * 100:.0f}%</text>'
                  f'<line x1="{left}" y1="{ylow}" x2="{left + inner_w}" y2="{ylow}" class="base"/>')
        every = max(1, len(points) // 12 + (len(points) % 12 > 0))
        for i, (rel, _, _) in enumerate(points):
            if i % every == 0 or i == len(points) - 1:
                x, _ = coords[i]
                extra += f'<text x="{x:.1f}" y="{height - 3}" class="axis" text-anchor="middle">{e(rel)}</text>'
    first, last = points[0], points[-1]
    summary = (f"pass rate over {len(points)} release(s): {first[0]} {_percent(first[1], first[2])} … "
               f"{last[0]} {_percent(last[1], last[2])}")
    svg = (f'<svg class="spark{" big" if labels else ""}" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'role="img" aria-label="{e(summary)}"><title>{e(summary)}</title>{extra}'
           f'<polyline points="{line}" class="rate-line"/>{dots}</svg>')
    return f'<a class="spark-link" href="{e(href)}">{svg}</a>' if href else svg


def release_points(records: list[dict]) -> list[tuple[str, int, int]]:
    return [(release_of(r), *rate(_main_results(r))) for r in records]


# ------------------------------------------------------------------------------------------------
# the dashboard


def _meta_html(matrix: dict) -> str:
    if not matrix.get("adapters"):
        return '<aside class="runmeta" id="run-meta"><p class="muted">No matrix was given to this build.</p></aside>'
    commit = str(matrix.get("commit") or "")
    shown = (f'<code title="{e(commit)}">{e(commit[:12])}{"+dirty" if commit.endswith("+dirty") else ""}</code>' if commit
             else '<span class="muted">not recorded</span>')
    rows = [("rlspec", e(matrix.get("rlspec", ""))), ("commit", shown),
            ("date", e(matrix.get("date")) if matrix.get("date") else '<span class="muted">not recorded</span>'),
            ("profile", f'<code>{e(matrix.get("profile", ""))}</code>'), ("seed", e(matrix.get("seed", "")))]
    body = "".join(f'<div><dt>{k}</dt><dd data-meta="{k}">{v}</dd></div>' for k, v in rows)
    return f'<aside class="runmeta" id="run-meta" aria-label="the run"><h3>The run</h3><dl>{body}</dl></aside>'


def _totals_html(book: Book, history: dict[str, list[dict]]) -> str:
    chapters = book.chapters
    ids = {ch.name: [c.id for c in ch.clauses] for ch in chapters}
    every = [c.id for ch in chapters for c in ch.clauses]
    mains = book.libraries + [c for c in book.columns if c.origin != "matrix"]
    head = "".join(f'<th class="ch" title="{e(ch.title)}"><a href="chapters/{e(ch.name)}.html">{e(ch.name)}</a></th>' for ch in chapters)
    rows, sums = [], {name: [0, 0] for name in ids}
    total_sum = [0, 0]
    for column in mains:
        passed, provided = rate(column.results, every)
        if column.is_library:
            total_sum[0] += passed
            total_sum[1] += provided
        cells = []
        for ch in chapters:
            p, q = rate(column.results, ids[ch.name])
            if column.is_library:
                sums[ch.name][0] += p
                sums[ch.name][1] += q
            cells.append(_rate_cell(p, q, f"{column.candidate}, chapter {ch.name}: {p} of {q} provided clauses pass"))
        records = history.get(column.adapter, []) if column.is_library else []
        chart = rate_chart(release_points(records), href=f"history.html#h-{column.adapter}") if records else '<span class="muted">–</span>'
        origin = "" if column.is_library else ' <span class="muted">(your run)</span>'
        rows.append(f'<tr data-lib="{e(column.adapter)}"><th scope="row"><code>{e(column.candidate)}</code>{origin}</th>'
                    f'<td class="ver">{e(column.version)}</td>'
                    f'{_rate_cell(passed, provided, f"{column.candidate}: {passed} of {provided} provided clauses pass")}'
                    f'{"".join(cells)}<td class="chart">{chart}</td></tr>')
    foot = "".join(_rate_cell(*sums[ch.name], f"every library, chapter {ch.name}") for ch in chapters)
    return (f'<section id="totals"><h2>Totals</h2><p class="muted">Clauses that pass of those each implementation provides '
            f'(its own column: the library\'s defaults), over every chapter and per chapter; the chart is the pass rate of the '
            f'library\'s own column over the releases in <a href="history.html">the history</a> (a point per release; hover for '
            f'its numbers).</p><div class="totals-wrap"><table class="totals" id="totals-table"><thead><tr><th>implementation</th>'
            f'<th>version</th><th>every chapter</th>{head}<th>over releases</th></tr></thead><tbody>{"".join(rows)}</tbody>'
            f'<tfoot><tr><th scope="row">every library</th><td></td>{_rate_cell(*total_sum, "every library, every chapter")}'
            f'{foot}<td></td></tr></tfoot></table></div></section>')


def _cell(book: Book, clause_id: str, column) -> str:
    result = column.results.get(clause_id)
    state = result["status"] if result else "none"
    attrs = f'data-col="{e(column.slug)}" data-lib="{e(column.adapter)}" data-status="{e(state)}"'
    if state in ATTENTION:
        title = (result.get("message") or state)[:300]
        inner = status(state, verdict_href(clause_id, column), title=title)
        if state in ("fail", "error") and book.bugs_found is not None:
            entries = book.bugs_found.explaining(clause_id, column)
            inner += "".join(f'<a class="bugref" href="bugs-found.html#{e(d.anchor)}" title="{e(d.title)} (bugs-found.md)">'
                             f'{e(d.title.split(" ")[0])}</a>' for d in entries)
    elif state == "none":
        inner = '<span class="st st-none" title="not run on this clause">·</span>'
    else:
        inner = status(state)
    return f'<td class="cell {"variant" if column.variant else ""}" {attrs}>{inner}</td>'


def dashboard_page(book: Book) -> str:
    columns = book.columns
    matrix = book.matrix
    history = canonical(book)
    indexes = book.releases or {}
    versions = []
    for column in book.libraries + [c for c in columns if c.origin != "matrix"]:
        records = history.get(column.adapter, [])
        tried = indexes.get(column.adapter, {}).get("releases", {})
        seen = (f'<a href="history.html#h-{e(column.adapter)}">{len(records)} release(s)</a>' if records
                else '<span class="muted">none</span>')
        if tried:
            seen += f' <span class="muted">of {len(tried)} tried</span>'
        s = {k: sum(r.get("status") == k for r in column.results.values()) for k in ("pass", "fail", "error", "xfail")}
        variants = [c for c in columns if c.adapter == column.adapter and c.variant]
        versions.append(f'<tr><td><code>{e(column.adapter)}</code></td><td>{e(column.version)}</td>'
                        f'<td>{s["pass"]}</td><td>{s["fail"]}</td><td>{s["error"]}</td><td>{s["xfail"]}</td>'
                        f'<td>{len(variants)}</td><td>{seen}</td></tr>')
    missing = [r for r in matrix.get("adapters", []) if not r.get("available")]
    versions += [f'<tr><td><code>{e(r.get("adapter"))}</code></td><td colspan="7">not installed: {e(r.get("reason", ""))}</td></tr>'
                 for r in missing]
    chapter_options = "".join(f'<option value="{e(ch.name)}" title="{e(ch.title)}">{e(ch.name)}</option>' for ch in book.chapters)
    library_options = "".join(f'<option value="{e(a)}">{e(a)}</option>' for a in dict.fromkeys(c.adapter for c in columns))
    head_groups, head_cols = [], []
    for adapter in dict.fromkeys(c.adapter for c in columns):
        group = [c for c in columns if c.adapter == adapter]
        short = next((w.strip(",") for w in group[0].version.split() if w[:1].isdigit()), group[0].version)
        folded = len([c for c in group if c.variant])
        fold = f'<span class="folded" title="{folded} variant column(s), folded">+{folded}</span>' if folded else ""
        head_groups.append(f'<th colspan="{len(group)}" class="lib" data-lib="{e(adapter)}" data-variants="{folded}" '
                           f'title="{e(group[0].version)}">{e(adapter)}{fold}<br><span class="ver">{e(short)}</span></th>')
        for c in group:
            label = c.variant or "default"
            head_cols.append(f'<th class="colname {"variant" if c.variant else ""}" data-col="{e(c.slug)}" data-lib="{e(c.adapter)}" '
                             f'title="{e(c.candidate)}: {e(c.description)}"><span>{e(label)}</span></th>')
    rows = []
    for ch in book.chapters:
        for clause in ch.clauses:
            passed, provided = book.tally(clause.id)
            cells = "".join(_cell(book, clause.id, c) for c in columns)
            rows.append(f'<tr id="row-{e(clause.id)}" class="mrow" data-chapter="{e(ch.name)}" data-pass="{passed}" data-provided="{provided}">'
                        f'<th class="rowname" scope="row"><a href="{clause_href(clause.id)}"><code>{e(clause.id)}</code></a></th>'
                        f'<td class="tally-cell">{_tally_html(book, clause.id)}</td>{cells}</tr>')
    statuses = "".join(f'<option value="{v}">{label}</option>' for v, label in (
        ("fail", "a FAIL"), ("error", "an error"), ("xfail", "a declared deviation"), ("attention", "FAIL, error or xfail"),
        ("pass", "a pass"), ("all-pass", "every provided column passes"), ("not-provided", "not provided")))
    libraries_html = (f'<section id="versions"><h2>Libraries</h2><table class="versions"><thead><tr><th>adapter</th><th>version</th>'
                      f'<th>pass</th><th>FAIL</th><th>error</th><th>xfail</th><th>variants</th><th>releases in the history</th></tr></thead>'
                      f'<tbody>{"".join(versions)}</tbody></table>'
                      f'<p><a href="diff.html">Compare two releases or two runs</a> · <a href="history.html">the history</a></p></section>')
    body = f"""<h1>Implementations dashboard</h1>
<p class="muted">Every clause against every library adapter of the conformance matrix. A library's own column uses its defaults;
its variant columns (other configurations or code paths) are folded: tick "variant columns" to show them. "N of M" counts the
libraries' own columns that pass among those that provide the operation. Each FAIL, error and xfail links to its counterexample on the
clause page; the numbered link beside a FAIL opens its entry in <a href="bugs-found.html">the defects found</a>. The filters are kept
in the address: copy it to share the view. <a href="history.html">The history</a> has every release;
<a href="diff.html">the diff</a> compares two.</p>
{_totals_html(book, history)}
<section id="matrix">
<h2>Clauses × implementations</h2>
<div class="grid-head">
<form class="filters" id="filters" onsubmit="return false">
<label>chapter <select id="f-chapter"><option value="">every chapter</option>{chapter_options}</select></label>
<label>library <select id="f-library"><option value="">every library</option>{library_options}</select></label>
<label>rows with <select id="f-status"><option value="">any verdict</option>{statuses}</select></label>
<label><input type="checkbox" id="f-variants"> variant columns</label>
<label>id <input type="search" id="f-text" placeholder="GAE-*" size="14"></label>
<output id="f-count" aria-live="polite"></output>
</form>
{_meta_html(matrix)}
</div>
<div class="matrix-wrap"><table class="matrix" id="matrix-table"><thead>
<tr><th rowspan="2" class="rowname">clause</th><th rowspan="2" class="tally-head" title="libraries that pass, of those that provide the operation">N of M<br>pass</th>{"".join(head_groups)}</tr>
<tr>{"".join(head_cols)}</tr></thead><tbody>{"".join(rows)}</tbody></table></div></section>
{libraries_html}"""
    return page("Dashboard", body, active="dashboard.html", scripts=("dashboard.js",), wide=True)


# ------------------------------------------------------------------------------------------------
# the history


def _defects_html(book: Book, adapter: str, records: list[dict]) -> str:
    """Each defect of bugs-found.md that names a column of this adapter, across its releases."""
    if book.bugs_found is None:
        return ""
    rows = []
    releases = [release_of(r) for r in records]
    for defect in book.bugs_found.defects:
        mine = [x for x in defect.explains if x.candidate.partition(":")[0] == adapter]
        if not defect.defect or not mine:
            continue
        seen = states(mine, records)
        marks = {"affected": ("●", "affected: a named cell is FAIL or error"), "not-affected": ("○", "not affected: the named cells pass"),
                 "not-provided": ("–", "the named cells are not provided")}
        cells = "".join(f'<td class="aff {s}" title="{e(rel)}: {marks[s][1]}">{marks[s][0]}</td>' for rel, s in seen)
        hit = [rel for rel, s in seen if s == "affected"]
        rows.append(f'<tr><th scope="row"><a href="bugs-found.html#{e(defect.anchor)}">{e(defect.title)}</a></th>{cells}'
                    f'<td class="muted">{len(hit)} of {len(seen)}</td></tr>')
    if not rows:
        return ""
    head = "".join(f"<th>{e(r)}</th>" for r in releases)
    return (f'<h3>Defects across releases</h3><p class="muted">Each defect of <a href="bugs-found.html">the defects found</a> '
            f'that names a column of <code>{e(adapter)}</code>: ● affected (one of its cells is FAIL or error there), ○ not affected, '
            f'– not provided. docs/bugs-found.md\'s "Affected releases" lines are written from these.</p>'
            f'<div class="matrix-wrap fit"><table class="history defects"><thead><tr><th class="rowname">defect</th>{head}<th></th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _tried_html(index: dict) -> str:
    """Every release tried (releases.json): checked, not installable here, outside the range, with times and reasons."""
    releases = index.get("releases") or {}
    if not releases:
        return ""
    rows = []
    for release, entry in reversed(list(releases.items())):
        state = entry.get("status", "")
        runs = entry.get("runs") or {}
        run_seconds = ", ".join(f"{(r.get('run_seconds') or 0):.0f} s" for r in runs.values()) or ""
        install = entry.get("install_seconds")
        rows.append(f'<tr class="tried {e(state)}"><td>{e(release)}</td><td>{e(state)}</td>'
                    f'<td>{"" if install is None else f"{install:.0f} s"}</td><td>{e(run_seconds)}</td>'
                    f'<td class="reason">{e(entry.get("reason", ""))}</td></tr>')
    counts = {}
    for entry in releases.values():
        counts[entry.get("status", "")] = counts.get(entry.get("status", ""), 0) + 1
    said = ", ".join(f"{n} {s}" for s, n in counts.items())
    return (f'<details class="tried"><summary>every release tried ({e(said)}); the declared range '
            f'<code>{e(index.get("range", ""))}</code></summary><p class="muted">{e(index.get("why", ""))}</p>'
            f'<table class="versions"><thead><tr><th>release</th><th>status</th><th>install</th><th>run</th><th>reason</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></details>')


def history_page(book: Book) -> str:
    history = canonical(book)
    indexes = book.releases or {}
    if not history and not indexes:
        return page("History", "<h1>Verdict history</h1><p class=\"muted\">No matrix history was given to this build "
                               "(<code>docs/matrix-history</code>, written by <code>rlspec matrix</code> and "
                               "<code>rlspec matrix --releases</code>).</p>", active="history.html")
    adapters = sorted(set(history) | set(indexes))
    parts = ['<h1>Verdict history</h1><p class="muted">Each library\'s verdicts on every release the matrix has been run on '
             '(<code>docs/matrix-history/ADAPTER/VERSION.json</code>, written by <code>rlspec matrix --releases</code>, each '
             'release installed in an environment of its own): the pass rate over releases, each defect\'s affected releases, '
             'the verdicts that changed from one release to the next (each a link to <a href="diff.html">the diff</a>), and '
             'every release tried, with the releases that could not be installed here and why.</p>',
             '<ul class="toc-inline">' + "".join(f'<li><a href="#h-{e(a)}">{e(a)}</a> ({len(history.get(a, []))})</li>' for a in adapters) + "</ul>"]
    clause_ids = [c.id for c in book.clauses]
    for adapter in adapters:
        records = history.get(adapter, [])
        index = indexes.get(adapter, {})
        summary, heads, grid = [], [], []
        for record in records:
            for c in record["report"].get("candidates", []):
                results = {r.get("id"): r for r in c.get("run", {}).get("clauses", [])}
                counts = {k: sum(r.get("status") == k for r in results.values()) for k in ("pass", "fail", "error", "xfail")}
                if not c.get("variant"):
                    summary.append(f'<tr><td>{e(release_of(record))}</td><td>{e(record["version"])}</td>'
                                   f'<td>{e(record.get("recorded", ""))}</td><td>rlspec {e(record.get("rlspec", ""))}{commit_of(record)}, '
                                   f'{e(record.get("profile", ""))}, seed {e(record.get("seed", ""))}</td>'
                                   + "".join(f"<td>{counts[k]}</td>" for k in counts) + "</tr>")
                heads.append(f'<th title="{e(c.get("candidate"))}: {e(c.get("description", ""))}">{e(release_of(record))}<br>'
                             f'<span class="ver">{e(c.get("variant") or "default")}</span></th>')
                grid.append((c.get("candidate"), key_of(adapter, record), release_of(record), results, record.get("commit", "")))
        changes, body_rows = [], []
        for clause_id in clause_ids:
            states_ = [(cand, key, rel, res.get(clause_id, {}).get("status", "none"), res.get(clause_id, {}).get("message", ""), commit)
                       for cand, key, rel, res, commit in grid]
            if all(st in ("none", "not-provided") for _, _, _, st, _, _ in states_):
                continue
            cells, last = [], {}
            for cand, key, rel, state, message, commit in states_:
                changed = cand in last and last[cand][2] != state
                if changed:
                    # records of two rlspec commits: the clause itself may have changed between the runs, not the library
                    suite = (f' <span class="muted">(rlspec {e(last[cand][3][:7])} → {e(commit[:7])}: the suite changed between '
                             f'these runs too)</span>' if last[cand][3] != commit else "")
                    changes.append(f'<li><a href="{clause_href(clause_id)}"><code>{e(clause_id)}</code></a> <code>{e(cand)}</code>: '
                                   f'{e(last[cand][1])} {status(last[cand][2])} → {e(rel)} {status(state)} '
                                   f'<a class="difflink" href="diff.html?a={e(last[cand][0])}&amp;b={e(key)}">diff</a>{suite}</li>')
                cells.append(f'<td class="{"changed" if changed else ""}">{status(state, title=message[:300] or None)}</td>')
                last[cand] = (key, rel, state, commit)
            body_rows.append(f'<tr><th scope="row" class="rowname"><a href="{clause_href(clause_id)}"><code>{e(clause_id)}</code></a></th>'
                             f'{"".join(cells)}</tr>')
        if len(records) <= 1:
            changed = '<p class="muted">One release recorded: no change to show.</p>' if records else ""
        else:
            changed = (f'<ul class="changes">{"".join(changes)}</ul>' if changes else
                       '<p class="muted">No verdict changed between the recorded releases.</p>')
        first_last = (f'<a href="diff.html?a={e(key_of(adapter, records[0]))}&amp;b={e(key_of(adapter, records[-1]))}">'
                      f'compare the first and the last</a>' if len(records) > 1 else "")
        span = (f'{len(records)} releases: {e(release_of(records[0]))} – {e(release_of(records[-1]))}' if len(records) > 1 else
                f'1 release: {e(release_of(records[0]))}' if records else "no release checked")
        range_note = (f' · range <code>{e(index["range"])}</code>' if index.get("range") else "")
        parts.append(f'<section id="h-{e(adapter)}" class="hist-lib"><h2><code>{e(adapter)}</code> <span class="muted">{span}{range_note}</span></h2>'
                     + (f'<div class="chart-row">{rate_chart(release_points(records), width=560, height=130, labels=True)}'
                        f'<p class="muted">The pass rate of <code>{e(adapter)}</code>\'s own column (pass of provided clauses) per '
                        f'release. {first_last}</p></div>' if len(records) > 1 else "")
                     + _defects_html(book, adapter, records) + _tried_html(index)
                     + ('<table class="versions"><thead><tr><th>release</th><th>version</th><th>recorded</th><th>run</th><th>pass</th>'
                        f'<th>FAIL</th><th>error</th><th>xfail</th></tr></thead><tbody>{"".join(summary)}</tbody></table>' if summary else "")
                     + (f'<h3>Changes</h3>{changed}' if records else "")
                     + (f'<details><summary>every verdict ({len(body_rows)} clauses the library provides)</summary>'
                        f'<div class="matrix-wrap"><table class="history"><thead><tr><th class="rowname">clause</th>{"".join(heads)}</tr></thead>'
                        f'<tbody>{"".join(body_rows)}</tbody></table></div></details>' if records else "")
                     + "</section>")
    return page("History", "\n".join(parts), active="history.html", scripts=(), wide=True)


# ------------------------------------------------------------------------------------------------
# the diff of two runs


def diff_data(book: Book) -> dict:
    """What assets/diff.js compares: every history record and every column of this build, each a set of columns
    whose verdicts are one character per clause."""
    clause_ids = [c.id for c in book.clauses]

    def code(results: dict) -> str:
        return "".join(CODES.get(results.get(i, {}).get("status"), ".") for i in clause_ids)

    runs = []
    for adapter, records in sorted(canonical(book).items()):
        for record in records:
            cols = [[c.get("candidate"), code({r.get("id"): r for r in c.get("run", {}).get("clauses", [])})]
                    for c in record.get("report", {}).get("candidates", [])]
            runs.append({"key": key_of(adapter, record), "group": adapter, "label": f"{adapter} {release_of(record)}",
                         "detail": f"{record.get('version', '')} (history, recorded {record.get('recorded', '')})", "columns": cols})
    by_adapter: dict[str, list] = {}
    for column in book.columns:
        by_adapter.setdefault((column.origin, column.adapter), []).append(column)
    for (origin, adapter), cols in by_adapter.items():
        mine = origin == "matrix"
        runs.append({"key": f"{'matrix' if mine else 'run'}:{adapter}", "group": "the matrix" if mine else "runs given to the book",
                     "label": f"{adapter} ({'the matrix' if mine else 'your run'})", "detail": cols[0].version,
                     "columns": [[c.candidate, code(c.results)] for c in cols]})
    default = next(([rs[0]["key"], rs[-1]["key"]] for rs in _groups(runs) if len(rs) > 1), [r["key"] for r in runs[:2]])
    return {"clauses": clause_ids, "codes": {v: k for k, v in CODES.items()}, "labels": LABELS, "runs": runs,
            "default": default}


def _groups(runs: list[dict]) -> list[list[dict]]:
    """The history's runs by library, in order (a library with two releases or more is the diff's first view)."""
    out: dict[str, list] = {}
    for run in runs:
        if "@" in run["key"]:
            out.setdefault(run["group"], []).append(run)
    return list(out.values())


def diff_page(book: Book) -> str:
    data = diff_data(book)  # the options; the verdicts travel in assets/diff-data.js
    groups: dict[str, list] = {}
    for run in data["runs"]:
        groups.setdefault(run["group"], []).append(run)
    options = "".join(f'<optgroup label="{e(g)}">' + "".join(f'<option value="{e(r["key"])}" title="{e(r["detail"])}">{e(r["label"])}</option>'
                                                          for r in runs) + "</optgroup>" for g, runs in groups.items())
    body = f"""<h1>Compare two runs</h1>
<p class="muted">Two releases of a library from <a href="history.html">the history</a>, or any two runs of this book (a library's
column of the matrix, a run given with <code>rlspec book --json</code>): every clause whose verdict differs, column by column. Two runs
of one library compare their columns by name (the library's own and each variant); runs of two libraries compare their own columns.
The choice is kept in the address (<code>diff.html?a=sb3@2.0.0&amp;b=sb3@2.9.2</code>).</p>
<form class="filters" id="diff-form" onsubmit="return false">
<label>A <select id="d-a">{options}</select></label>
<label>B <select id="d-b">{options}</select></label>
<button type="button" id="d-swap" title="swap A and B">⇄</button>
<label><input type="checkbox" id="d-same"> unchanged verdicts too</label>
</form>
<p id="d-summary" aria-live="polite"></p>
<table class="diff" id="d-table"><thead><tr><th>clause</th><th>column</th><th id="d-head-a">A</th><th id="d-head-b">B</th></tr></thead>
<tbody></tbody></table>"""
    return page("Diff", body, active="dashboard.html", scripts=("diff-data.js", "diff.js"), wide=True)


def diff_data_script(book: Book) -> str:
    """assets/diff-data.js: the runs the diff page compares (like the search index, a script of its own)."""
    return f"window.RLSPEC_DIFF = {script_json(diff_data(book))};\n"
