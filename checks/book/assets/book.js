// rlspec book: search over clause ids and statements (the index is assets/search-index.js).
// Every result is built with textContent, never innerHTML.
(function () {
  "use strict";
  var input = document.getElementById("search");
  var list = document.getElementById("search-results");
  var root = document.body.getAttribute("data-root") || "./";
  var entries = window.RLSPEC_SEARCH || [];
  var active = -1;

  function words(text) {
    return text.toLowerCase().split(/\s+/).filter(function (w) { return w.length > 0; });
  }

  function matches(query) {
    var terms = words(query);
    if (!terms.length) { return []; }
    var scored = [];
    entries.forEach(function (entry) {
      var id = entry.id.toLowerCase(), text = (entry.id + " " + entry.statement + " " + entry.chapter).toLowerCase();
      var ok = terms.every(function (t) { return text.indexOf(t) !== -1; });
      if (ok) { scored.push({ entry: entry, score: id.indexOf(terms[0]) === 0 ? 0 : id.indexOf(terms[0]) !== -1 ? 1 : 2 }); }
    });
    scored.sort(function (a, b) { return a.score - b.score; });
    return scored.map(function (s) { return s.entry; });
  }

  function show(found) {
    while (list.firstChild) { list.removeChild(list.firstChild); }
    active = -1;
    found.slice(0, 25).forEach(function (entry) {
      var li = document.createElement("li"), a = document.createElement("a"), span = document.createElement("span");
      a.href = root + entry.url;
      a.textContent = entry.id;
      span.className = "muted";
      span.textContent = entry.statement;
      li.appendChild(a);
      li.appendChild(span);
      list.appendChild(li);
    });
    if (!found.length && input.value.trim()) {
      var none = document.createElement("li");
      none.className = "muted";
      none.textContent = "no clause matches";
      list.appendChild(none);
    }
    list.hidden = !input.value.trim();
  }

  function filterIndex(query) {
    // On the index page the clause tables follow the search too.
    var rows = document.querySelectorAll("tr.clause-row");
    if (!rows.length) { return; }
    var terms = words(query), shown = 0;
    rows.forEach(function (row) {
      var text = row.getAttribute("data-text");
      var ok = terms.every(function (t) { return text.indexOf(t) !== -1; });
      row.hidden = !ok;
      shown += ok ? 1 : 0;
    });
    document.querySelectorAll("section.chapter-list").forEach(function (section) {
      section.hidden = !section.querySelector("tr.clause-row:not([hidden])");
    });
    var note = document.getElementById("index-filter-note");
    if (note) {
      note.hidden = !terms.length;
      note.textContent = shown + " of " + rows.length + " clauses match \u201c" + query.trim() + "\u201d";
    }
  }

  if (!input || !list) { return; }
  input.addEventListener("input", function () {
    show(matches(input.value));
    filterIndex(input.value);
  });
  input.addEventListener("keydown", function (event) {
    var items = list.querySelectorAll("li a");
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      if (!items.length) { return; }
      active = (active + (event.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
      list.querySelectorAll("li").forEach(function (li, i) { li.classList.toggle("active", i === active); });
    } else if (event.key === "Enter" && items.length) {
      window.location.href = items[Math.max(active, 0)].href;
    } else if (event.key === "Escape") {
      list.hidden = true;
    }
  });
  document.addEventListener("click", function (event) {
    if (!list.contains(event.target) && event.target !== input) { list.hidden = true; }
  });
})();
