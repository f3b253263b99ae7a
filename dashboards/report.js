// The report's page logic: embeds every chart at the width the page has, and the date-range control that the
// charts with days follow. Reads SPECS (chart specs by key), DAYS (days with runs), RANGED (keys of the charts
// with days) and DESIGN_WIDTH (the width the specs are drawn for), set just before this script.
(function () {
  "use strict";
  var views = {};
  var range = { from: DAYS[0], to: DAYS[DAYS.length - 1] };

  // Every view's width (and the runs list's text limit) times f; data, datasets and config untouched.
  function scaled(spec, f) {
    if (Array.isArray(spec)) return spec.map(function (s) { return scaled(s, f); });
    if (spec === null || typeof spec !== "object") return spec;
    var out = {};
    Object.keys(spec).forEach(function (k) {
      var v = spec[k];
      if (k === "datasets" || k === "data" || k === "config") out[k] = v;
      else if ((k === "width" || k === "limit") && typeof v === "number") out[k] = Math.floor(v * f);
      else out[k] = scaled(v, f);
    });
    return out;
  }

  // The width the chart's section has (the chart's own element shrinks to the chart once embedded).
  function factorFor(el) {
    return Math.max(0.6, el.parentElement.clientWidth / DESIGN_WIDTH);
  }

  function withRange(spec) {
    spec.params = spec.params.map(function (p) {
      if (p.name === "day_from") return Object.assign({}, p, { value: range.from });
      if (p.name === "day_to") return Object.assign({}, p, { value: range.to });
      return p;
    });
    return spec;
  }

  // Draw a chart at factor f; one drawn wider than its section (long names in its labels or legend) is drawn
  // again with narrower views until it fits.
  function embed(key, f, tries) {
    var el = document.getElementById("chart-" + key);
    f = f || factorFor(el);
    tries = tries === undefined ? 3 : tries;
    el.dataset.factor = String(factorFor(el));
    var spec = scaled(SPECS[key], f);
    if (RANGED.indexOf(key) >= 0) spec = withRange(spec);
    return vegaEmbed(el, spec, { renderer: "svg", actions: false })
      .then(function (result) {
        if (views[key]) views[key].finalize();
        views[key] = result.view;
        var drawn = el.querySelector("svg").getBoundingClientRect().width;
        var room = el.parentElement.clientWidth;
        if (drawn > room && tries > 0) return embed(key, f * 0.97 * room / drawn, tries - 1);
      })
      .catch(function (e) {
        el.textContent = "chart failed: " + e;
        console.error(e);
      });
  }

  function setRange(from, to) {
    if (from > to) { var t = from; from = to; to = t; }
    range = { from: from, to: to };
    document.getElementById("day-from").value = from;
    document.getElementById("day-to").value = to;
    var shown = DAYS.filter(function (d) { return d >= from && d <= to; }).length;
    document.getElementById("range-status").textContent =
      shown + " of " + DAYS.length + " day" + (DAYS.length === 1 ? "" : "s") + " with runs";
    return Promise.all(RANGED.filter(function (k) { return views[k]; }).map(function (k) {
      return views[k].signal("day_from", from).signal("day_to", to).runAsync();
    }));
  }

  function control() {
    var box = document.getElementById("range");
    if (!DAYS.length || !RANGED.length) { box.hidden = true; return; }
    ["day-from", "day-to"].forEach(function (id) {
      var select = document.getElementById(id);
      DAYS.forEach(function (d) {
        var option = document.createElement("option");
        option.value = option.textContent = d;
        select.appendChild(option);
      });
      select.addEventListener("change", function () {
        setRange(document.getElementById("day-from").value, document.getElementById("day-to").value);
      });
    });
    box.querySelectorAll("button[data-last]").forEach(function (button) {
      button.addEventListener("click", function () {
        var n = button.dataset.last === "all" ? DAYS.length : Number(button.dataset.last);
        setRange(DAYS[Math.max(0, DAYS.length - n)], DAYS[DAYS.length - 1]);
      });
    });
    setRange(range.from, range.to);
  }

  control();
  window.fleetReportReady = Promise.all(Object.keys(SPECS).map(function (key) { return embed(key); }));
  var pending = null;
  window.addEventListener("resize", function () {  // wider or narrower window: redraw at the new width
    clearTimeout(pending);
    pending = setTimeout(function () {
      Object.keys(SPECS).forEach(function (key) {
        var el = document.getElementById("chart-" + key);
        if (Math.abs(factorFor(el) - Number(el.dataset.factor)) > 0.03) embed(key);
      });
    }, 250);
  });
})();
