// Filters of the run browser. The state lives in the URL fragment (#correct=wrong&task=...),
// so a filtered view is a link; every card carries its facet values as data attributes
// (data-c<i> / data-b<i>: run i's correctness and failure bucket).
(function () {
  "use strict";
  var cards = Array.prototype.slice.call(document.querySelectorAll("article.card"));
  var controls = Array.prototype.slice.call(document.querySelectorAll("[data-facet]"));
  var labels = (document.body.getAttribute("data-labels") || "A").split(",");
  var pageSize = parseInt(document.body.getAttribute("data-page-size"), 10) || 50;
  var count = document.getElementById("count");
  var pageLabel = document.getElementById("page");
  var FIELDS = ["task", "setting", "subset", "sample"];

  function params() {
    return new URLSearchParams(location.hash.replace(/^#/, ""));
  }

  function get(p, name) {
    var v = p.get(name);
    // A hand-typed "+0" arrives as " 0": URLSearchParams reads "+" as a space.
    return v === null ? "" : (name === "setting" ? v.replace(/ /g, "+") : v);
  }

  function pairOk(pair, ca, cb) {
    if (!pair) return true;
    if (!ca || !cb || ca === "missing" || cb === "missing") return false;
    var ra = ca === "right", rb = cb === "right";
    if (pair === "a_right_b_wrong") return ra && !rb;
    if (pair === "a_wrong_b_right") return !ra && rb;
    if (pair === "disagree") return ra !== rb;
    if (pair === "both_right") return ra && rb;
    if (pair === "both_wrong") return !ra && !rb;
    return true;
  }

  function matches(card, p, a, b) {
    var want = get(p, "correct");
    if (want && card.getAttribute("data-c" + a) !== want) return false;
    want = get(p, "bucket");
    if (want && card.getAttribute("data-b" + a) !== want) return false;
    for (var i = 0; i < FIELDS.length; i++) {
      want = get(p, FIELDS[i]);
      if (want && card.getAttribute("data-" + FIELDS[i]) !== want) return false;
    }
    return pairOk(get(p, "pair"), card.getAttribute("data-c" + a), card.getAttribute("data-c" + b));
  }

  function apply() {
    var p = params();
    var a = get(p, "a") || "0", b = get(p, "b") || (labels.length > 1 ? "1" : "0");
    controls.forEach(function (c) {
      var v = get(p, c.getAttribute("data-facet"));
      c.value = v || c.getAttribute("data-default") || "";
    });
    Array.prototype.forEach.call(document.querySelectorAll(".run-a"), function (el) { el.textContent = labels[+a] || "A"; });
    Array.prototype.forEach.call(document.querySelectorAll(".run-b"), function (el) { el.textContent = labels[+b] || "B"; });
    var hits = cards.filter(function (card) {
      var ok = matches(card, p, a, b);
      card.setAttribute("data-match", ok ? "1" : "0");
      return ok;
    });
    var pages = Math.max(1, Math.ceil(hits.length / pageSize));
    var page = Math.min(Math.max(1, parseInt(get(p, "page"), 10) || 1), pages);
    cards.forEach(function (card) { card.hidden = true; });
    hits.slice((page - 1) * pageSize, page * pageSize).forEach(function (card) { card.hidden = false; });
    count.textContent = hits.length + " of " + cards.length + " queries";
    pageLabel.textContent = "page " + page + " of " + pages;
    document.body.setAttribute("data-shown", String(hits.length));
    document.body.setAttribute("data-current-page", String(page));
  }

  function set(name, value) {
    var p = params();
    if (value) p.set(name, value); else p.delete(name);
    if (name !== "page") p.delete("page");
    location.hash = p.toString();
  }

  controls.forEach(function (c) {
    c.addEventListener("change", function () { set(c.getAttribute("data-facet"), c.value); });
  });
  document.getElementById("prev").addEventListener("click", function () {
    set("page", String(Math.max(1, (+document.body.getAttribute("data-current-page") || 1) - 1)));
  });
  document.getElementById("next").addEventListener("click", function () {
    set("page", String((+document.body.getAttribute("data-current-page") || 1) + 1));
  });
  document.getElementById("reset").addEventListener("click", function (ev) {
    ev.preventDefault();
    location.hash = "";
  });
  window.addEventListener("hashchange", apply);
  apply();
})();
