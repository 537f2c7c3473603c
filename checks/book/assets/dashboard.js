// rlspec dashboard: filter the clauses x libraries matrix by chapter, library, verdict and id, and fold or show
// the variant columns. The view lives in the address: every change is written back with history.replaceState,
// so a filtered view is a link (dashboard.html?chapter=gae&library=skrl&status=fail&variants=1&id=GAE-*).
(function () {
  "use strict";
  var table = document.getElementById("matrix-table");
  if (!table) { return; }
  var chapter = document.getElementById("f-chapter"), library = document.getElementById("f-library");
  var verdict = document.getElementById("f-status"), variants = document.getElementById("f-variants");
  var text = document.getElementById("f-text"), count = document.getElementById("f-count");
  var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr.mrow"));
  var columnCells = Array.prototype.slice.call(table.querySelectorAll("[data-col]"));
  var groups = Array.prototype.slice.call(table.querySelectorAll("thead th.lib"));
  var totals = Array.prototype.slice.call(document.querySelectorAll("#totals-table tbody tr[data-lib]"));
  var PROVIDED = { pass: 1, fail: 1, error: 1, xfail: 1 };

  function columnShown(cell) {
    if (library.value && cell.getAttribute("data-lib") !== library.value) { return false; }
    if (!variants.checked && cell.classList.contains("variant")) { return false; }
    return true;
  }

  function pattern(value) {
    value = value.trim().toUpperCase();
    if (!value) { return null; }
    var escaped = value.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*");
    return new RegExp(value.indexOf("*") === -1 ? escaped : "^" + escaped + "$");
  }

  function rowMatches(row, wanted) {
    if (!wanted) { return true; }
    var cells = Array.prototype.slice.call(row.querySelectorAll("td.cell")).filter(columnShown);
    var states = cells.map(function (c) { return c.getAttribute("data-status"); });
    if (wanted === "attention") {
      return states.some(function (s) { return s === "fail" || s === "error" || s === "xfail"; });
    }
    if (wanted === "all-pass") {
      var provided = states.filter(function (s) { return PROVIDED[s]; });
      return provided.length > 0 && provided.every(function (s) { return s === "pass"; });
    }
    return states.indexOf(wanted) !== -1;
  }

  function writeAddress() {
    if (!window.history || !window.history.replaceState) { return; }
    var query = new URLSearchParams();
    if (chapter.value) { query.set("chapter", chapter.value); }
    if (library.value) { query.set("library", library.value); }
    if (verdict.value) { query.set("status", verdict.value); }
    if (variants.checked) { query.set("variants", "1"); }
    if (text.value.trim()) { query.set("id", text.value.trim()); }
    var search = query.toString();
    var address = window.location.pathname + (search ? "?" + search : "") + window.location.hash;
    try {
      window.history.replaceState(null, "", address);
    } catch (err) {
      // some browsers refuse replaceState on file:// pages; the view still works, it is only not in the address
    }
  }

  function apply() {
    columnCells.forEach(function (cell) { cell.hidden = !columnShown(cell); });
    groups.forEach(function (group) {
      var lib = group.getAttribute("data-lib");
      var shown = table.querySelectorAll('thead th.colname[data-lib="' + CSS.escape(lib) + '"]:not([hidden])').length;
      group.hidden = shown === 0;
      group.classList.toggle("unfolded", variants.checked);
      if (shown) { group.colSpan = shown; }
    });
    totals.forEach(function (row) {
      row.classList.toggle("dim", !!library.value && row.getAttribute("data-lib") !== library.value);
    });
    var id = pattern(text.value), visible = 0;
    rows.forEach(function (row) {
      var ok = (!chapter.value || row.getAttribute("data-chapter") === chapter.value)
        && (!id || id.test(row.id.slice(4))) && rowMatches(row, verdict.value);
      row.hidden = !ok;
      visible += ok ? 1 : 0;
    });
    count.textContent = "showing " + visible + " of " + rows.length + " clauses";
    writeAddress();
  }

  var query = new URLSearchParams(window.location.search);
  [["chapter", chapter], ["library", library], ["status", verdict]].forEach(function (pair) {
    var value = query.get(pair[0]);
    if (value !== null && Array.prototype.some.call(pair[1].options, function (o) { return o.value === value; })) {
      pair[1].value = value;
    }
  });
  if (query.get("id")) { text.value = query.get("id"); }
  variants.checked = query.get("variants") === "1";
  [chapter, library, verdict, variants].forEach(function (control) { control.addEventListener("change", apply); });
  text.addEventListener("input", apply);
  apply();
})();
