// rlspec diff: two runs (history records, the matrix's columns, runs given to the book) side by side, every clause
// whose verdict differs. The data is window.RLSPEC_DIFF (diff.html): each run's columns as one character per clause.
// The choice lives in the address (diff.html?a=sb3@2.0.0&b=sb3@2.9.2&same=1), written with history.replaceState.
// Every cell is built with textContent, never innerHTML.
(function () {
  "use strict";
  var data = window.RLSPEC_DIFF;
  var a = document.getElementById("d-a"), b = document.getElementById("d-b");
  if (!data || !a || !b) { return; }
  var same = document.getElementById("d-same"), swap = document.getElementById("d-swap");
  var summary = document.getElementById("d-summary"), body = document.querySelector("#d-table tbody");
  var runs = {};
  data.runs.forEach(function (run) { runs[run.key] = run; });
  var root = document.body.getAttribute("data-root") || "./";

  function statusOf(code) { return data.codes[code] || "none"; }

  function badge(state) {
    var span = document.createElement("span");
    span.className = "st st-" + state;
    span.textContent = data.labels[state] || state;
    return span;
  }

  // the pairs of columns to compare: by name within one library, the own columns across two
  function pairs(left, right) {
    var byName = {};
    right.columns.forEach(function (c) { byName[c[0]] = c; });
    var matched = left.columns.filter(function (c) { return byName[c[0]]; }).map(function (c) { return [c, byName[c[0]]]; });
    if (matched.length) { return matched; }
    return [[left.columns[0], right.columns[0]]];
  }

  function cell(row, content) {
    var td = document.createElement("td");
    if (typeof content === "string") { td.textContent = content; } else { td.appendChild(content); }
    row.appendChild(td);
  }

  function writeAddress() {
    if (!window.history || !window.history.replaceState) { return; }
    var query = new URLSearchParams();
    query.set("a", a.value);
    query.set("b", b.value);
    if (same.checked) { query.set("same", "1"); }
    try { window.history.replaceState(null, "", window.location.pathname + "?" + query.toString()); } catch (err) { /* file:// */ }
  }

  function render() {
    while (body.firstChild) { body.removeChild(body.firstChild); }
    var left = runs[a.value], right = runs[b.value];
    if (!left || !right) { summary.textContent = "Nothing to compare: this book has no matrix and no history."; return; }
    document.getElementById("d-head-a").textContent = "A: " + left.label;
    document.getElementById("d-head-b").textContent = "B: " + right.label;
    var compared = 0, differ = 0, moves = {};
    pairs(left, right).forEach(function (pair) {
      var ca = pair[0], cb = pair[1];
      var name = ca[0] === cb[0] ? ca[0] : ca[0] + " / " + cb[0];
      data.clauses.forEach(function (id, i) {
        var sa = statusOf(ca[1].charAt(i)), sb = statusOf(cb[1].charAt(i));
        if ((sa === "none" || sa === "not-provided") && (sb === "none" || sb === "not-provided")) { return; }
        compared += 1;
        var changed = sa !== sb;
        if (changed) {
          differ += 1;
          var move = sa + " → " + sb;
          moves[move] = (moves[move] || 0) + 1;
        }
        if (!changed && !same.checked) { return; }
        var row = document.createElement("tr");
        row.className = changed ? "changed" : "same";
        var link = document.createElement("a");
        link.href = root + "clauses/" + id + ".html";
        var code = document.createElement("code");
        code.textContent = id;
        link.appendChild(code);
        cell(row, link);
        cell(row, name);
        cell(row, badge(sa));
        cell(row, badge(sb));
        body.appendChild(row);
      });
    });
    var said = Object.keys(moves).sort().map(function (m) { return moves[m] + " " + m; }).join(", ");
    summary.textContent = differ + " of " + compared + " verdicts differ between " + left.label + " and " + right.label
      + (said ? ": " + said : "") + ".";
    writeAddress();
  }

  var query = new URLSearchParams(window.location.search);
  function pick(select, wanted, fallback) {
    select.value = runs[wanted] ? wanted : fallback;
  }
  // by default the first and the last release of the first library with two or more in the history
  var first = (data["default"] || [])[0] || "", second = (data["default"] || [])[1] || first;
  pick(a, query.get("a"), first);
  pick(b, query.get("b"), second);
  same.checked = query.get("same") === "1";
  [a, b, same].forEach(function (control) { control.addEventListener("change", render); });
  swap.addEventListener("click", function () { var t = a.value; a.value = b.value; b.value = t; render(); });
  render();
})();
