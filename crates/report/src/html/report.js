// pagelab report: draws the plots described in #pagelab-plots as inline SVG, makes the
// tables sortable. No network, no library: this file is inlined into the report.
(function () {
  "use strict";
  var t0 = performance.now();
  var NS = "http://www.w3.org/2000/svg";
  var W = 640, H = 300, M = { l: 70, r: 14, t: 12, b: 58 };
  var tip = document.createElement("div");
  tip.className = "tip";
  document.body.appendChild(tip);

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }

  function fmt(v, unit) {
    if (v === null || v === undefined || isNaN(v)) return "-";
    if (unit === "bytes") {
      var u = ["", "K", "M", "G", "T"], i = 0, x = v;
      while (Math.abs(x) >= 1024 && i < u.length - 1) { x /= 1024; i++; }
      return (i === 0 ? x.toFixed(0) : x.toFixed(x < 10 ? 2 : 1)) + u[i];
    }
    if (unit === "x") return v.toFixed(2) + "x";
    if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en-US");
    if (Math.abs(v) >= 10 || v === Math.round(v)) return (Math.round(v * 10) / 10).toString();
    return v.toPrecision(3);
  }

  function showTip(ev, text) {
    tip.textContent = text;
    tip.style.display = "block";
    tip.style.left = (ev.pageX + 12) + "px";
    tip.style.top = (ev.pageY + 12) + "px";
  }
  function hideTip() { tip.style.display = "none"; }

  // A scale from data to pixels; log scales skip non-positive values.
  function scale(lo, hi, a, b, log) {
    if (log) {
      lo = Math.log10(lo); hi = Math.log10(hi);
      if (hi === lo) { hi += 0.5; lo -= 0.5; }
      return function (v) { return v > 0 ? a + (Math.log10(v) - lo) / (hi - lo) * (b - a) : null; };
    }
    if (hi === lo) { hi += 1; }
    return function (v) { return a + (v - lo) / (hi - lo) * (b - a); };
  }

  function ticks(lo, hi, log) {
    var out = [];
    if (log) {
      for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(Math.pow(10, e));
      return out;
    }
    var span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / 5)));
    if (span / step > 10) step *= 2;
    if (span / step > 10) step *= 2.5;
    for (var v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
    return out;
  }

  function yRange(plot, log) {
    var lo = Infinity, hi = -Infinity;
    plot.series.forEach(function (s) {
      if (s.hidden) return;
      (s.values || []).forEach(function (v, i) {
        var e = s.err && s.err[i];
        [v, e && e[0], e && e[1]].forEach(function (x) {
          if (x === null || x === undefined) return;
          if (log && x <= 0) return;
          lo = Math.min(lo, x); hi = Math.max(hi, x);
        });
      });
      (s.points || []).forEach(function (p) {
        if (log && p[1] <= 0) return;
        lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]);
      });
    });
    if (!isFinite(lo)) { lo = log ? 1 : 0; hi = log ? 10 : 1; }
    if (log) { lo = Math.pow(10, Math.floor(Math.log10(lo))); hi = Math.pow(10, Math.ceil(Math.log10(hi))); }
    else { lo = Math.min(0, lo); hi = hi * 1.05; }
    return [lo, hi];
  }

  function axes(svg, plot, y, yr, log) {
    el("line", { x1: M.l, y1: H - M.b, x2: W - M.r, y2: H - M.b, "class": "axis" }, svg);
    el("line", { x1: M.l, y1: M.t, x2: M.l, y2: H - M.b, "class": "axis" }, svg);
    ticks(yr[0], yr[1], log).forEach(function (v) {
      var py = y(v);
      if (py === null || py < M.t - 1 || py > H - M.b + 1) return;
      el("line", { x1: M.l, y1: py, x2: W - M.r, y2: py, "class": "grid" }, svg);
      var t = el("text", { x: M.l - 6, y: py + 4, "text-anchor": "end", "class": "tick" }, svg);
      t.textContent = fmt(v, plot.unit);
    });
    var yl = el("text", { x: 14, y: M.t + (H - M.t - M.b) / 2, "class": "label", "text-anchor": "middle",
      transform: "rotate(-90 14 " + (M.t + (H - M.t - M.b) / 2) + ")" }, svg);
    yl.textContent = plot.y_label + (log ? " (log)" : "");
    var xl = el("text", { x: M.l + (W - M.l - M.r) / 2, y: H - 6, "class": "label", "text-anchor": "middle" }, svg);
    xl.textContent = plot.x_label;
  }

  function bars(svg, plot, log) {
    var yr = yRange(plot, log), y = scale(yr[0], yr[1], H - M.b, M.t, log);
    axes(svg, plot, y, yr, log);
    var shown = plot.series.filter(function (s) { return !s.hidden; });
    var n = plot.categories.length, gw = (W - M.l - M.r) / n;
    plot.categories.forEach(function (c, i) {
      var t = el("text", { x: M.l + gw * (i + 0.5), y: H - M.b + 16, "text-anchor": "middle", "class": "tick" }, svg);
      t.textContent = c.length > 18 ? c.slice(0, 17) + "\u2026" : c;
      var present = shown.filter(function (s) { return s.values[i] !== null && s.values[i] !== undefined; });
      var bw = gw * 0.8 / Math.max(1, present.length);
      present.forEach(function (s, j) {
        var v = s.values[i], x = M.l + gw * i + gw * 0.1 + j * bw;
        var top = y(v), base = log ? H - M.b : y(Math.max(0, yr[0]));
        if (top === null) top = base;
        var r = el("rect", { x: x, y: Math.min(top, base), width: Math.max(1, bw - 1),
          height: Math.max(0.5, Math.abs(base - top)), fill: s.colour, "class": "bar" }, svg);
        var e = s.err && s.err[i];
        var text = s.name + " \u00b7 " + c + ": " + fmt(v, plot.unit) +
          (e ? " (" + fmt(e[0], plot.unit) + " \u2013 " + fmt(e[1], plot.unit) + ")" : "") +
          (s.notes && s.notes[i] ? " \u00b7 " + s.notes[i] : "");
        r.addEventListener("mousemove", function (ev) { showTip(ev, text); });
        r.addEventListener("mouseleave", hideTip);
        el("title", {}, r).textContent = text;
        if (e) {
          var lo = y(e[0]), hi = y(e[1]), cx = x + bw / 2;
          if (lo !== null && hi !== null) {
            el("line", { x1: cx, x2: cx, y1: lo, y2: hi, "class": "err" }, svg);
            el("line", { x1: cx - 4, x2: cx + 4, y1: lo, y2: lo, "class": "err" }, svg);
            el("line", { x1: cx - 4, x2: cx + 4, y1: hi, y2: hi, "class": "err" }, svg);
          }
        }
      });
    });
  }

  function lines(svg, plot, log) {
    var xs = [];
    plot.series.forEach(function (s) { s.points.forEach(function (p) { xs.push(p[0]); }); });
    var xlo = Math.min.apply(null, xs), xhi = Math.max.apply(null, xs);
    var x = scale(xlo, xhi, M.l + 10, W - M.r - 10, plot.x_log && xlo > 0);
    var yr = yRange(plot, log), y = scale(yr[0], yr[1], H - M.b, M.t, log);
    axes(svg, plot, y, yr, log);
    var seen = {};
    xs.sort(function (a, b) { return a - b; }).forEach(function (v) {
      if (seen[v]) return;
      seen[v] = 1;
      var t = el("text", { x: x(v), y: H - M.b + 16, "text-anchor": "middle", "class": "tick" }, svg);
      t.textContent = fmt(v, plot.x_unit);
    });
    plot.series.forEach(function (s) {
      if (s.hidden) return;
      var d = "";
      s.points.forEach(function (p) {
        var py = y(p[1]);
        if (py === null) return;
        d += (d ? "L" : "M") + x(p[0]).toFixed(1) + " " + py.toFixed(1);
      });
      el("path", { d: d, stroke: s.colour, "class": "line" }, svg);
      s.points.forEach(function (p) {
        var py = y(p[1]);
        if (py === null) return;
        var c = el("circle", { cx: x(p[0]), cy: py, r: 4, fill: s.colour, "class": "dot" }, svg);
        var text = s.name + " \u00b7 " + plot.x_label + " " + fmt(p[0], plot.x_unit) + ": " + fmt(p[1], plot.unit);
        c.addEventListener("mousemove", function (ev) { showTip(ev, text); });
        c.addEventListener("mouseleave", hideTip);
        el("title", {}, c).textContent = text;
      });
    });
  }

  function draw(fig, plot) {
    var holder = fig.querySelector(".chart");
    holder.textContent = "";
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, role: "img" }, holder);
    el("title", {}, svg).textContent = plot.title;
    (plot.kind === "lines" ? lines : bars)(svg, plot, plot.log);
    fig.dataset.drawn = String(svg.querySelectorAll("rect.bar, circle.dot").length);
    fig.dataset.scale = plot.log ? "log" : "linear";
    fig.querySelector("button.scale").textContent = plot.log ? "linear axis" : "log axis";
  }

  function setUp(fig, plot) {
    var legend = fig.querySelector(".legend");
    plot.series.forEach(function (s) {
      var item = document.createElement("button");
      item.type = "button";
      item.className = "key";
      item.innerHTML = "<span class=sw></span>";
      item.firstChild.style.background = s.colour;
      item.appendChild(document.createTextNode(s.name));
      item.addEventListener("click", function () {
        s.hidden = !s.hidden;
        item.classList.toggle("off", !!s.hidden);
        draw(fig, plot);
      });
      legend.appendChild(item);
    });
    fig.querySelector("button.scale").addEventListener("click", function () {
      plot.log = !plot.log;
      draw(fig, plot);
    });
    draw(fig, plot);
  }

  // Sorting: numbers as printed (1,234 · 16.0M · 96% · 1.13x) sort by value, text by text.
  function key(text) {
    var t = text.trim().replace(/,/g, "").replace(/\u2212/g, "-");
    var m = /^([-+]?[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*(%|x|s)?/.exec(t);
    if (!m) return null;
    var mult = { "": 1, K: 1024, M: 1048576, G: 1073741824, T: 1099511627776 }[m[2]];
    return parseFloat(m[1]) * mult;
  }

  function sortable(table) {
    var heads = table.querySelectorAll("thead th");
    heads.forEach(function (th, col) {
      th.addEventListener("click", function () {
        var desc = th.dataset.sort === "asc";
        heads.forEach(function (h) { delete h.dataset.sort; });
        th.dataset.sort = desc ? "desc" : "asc";
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col] ? a.cells[col].textContent : "", y = b.cells[col] ? b.cells[col].textContent : "";
          var kx = key(x), ky = key(y), r;
          if (kx !== null && ky !== null) r = kx - ky;
          else if (kx !== null) r = -1;
          else if (ky !== null) r = 1;
          else r = x.localeCompare(y);
          return desc ? -r : r;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  }

  var plots = JSON.parse(document.getElementById("pagelab-plots").textContent);
  plots.forEach(function (plot) {
    var fig = document.getElementById(plot.id);
    if (fig) setUp(fig, plot);
  });
  document.querySelectorAll("table.sortable").forEach(sortable);

  // With #selftest in the address, exercise the controls as a person would and record what
  // happened, so that a headless browser can check them (crates/cli/tests/browser.rs).
  if (location.hash === "#selftest") {
    var results = [];
    document.querySelectorAll("figure.plot").forEach(function (fig) {
      var before = Number(fig.dataset.drawn), scale = fig.dataset.scale;
      var keys = fig.querySelectorAll(".legend button.key");
      if (keys.length > 1) {
        keys[0].click();
        var hid = Number(fig.dataset.drawn) < before;
        keys[0].click();
        if (!hid || Number(fig.dataset.drawn) !== before) results.push(fig.id + ": toggle");
      }
      fig.querySelector("button.scale").click();
      var flipped = fig.dataset.scale !== scale && fig.querySelector("svg");
      fig.querySelector("button.scale").click();
      if (!flipped || fig.dataset.scale !== scale) results.push(fig.id + ": axis");
    });
    document.querySelectorAll("table.sortable").forEach(function (table) {
      var th = table.querySelector("thead th:last-child");
      if (!th || table.tBodies[0].rows.length < 2) return;
      th.click();
      var first = table.tBodies[0].rows[0].lastElementChild.textContent;
      th.click();
      var last = table.tBodies[0].rows[table.tBodies[0].rows.length - 1].lastElementChild.textContent;
      if (first !== last) results.push(table.id + ": sort");
    });
    document.body.dataset.selftest = results.length ? results.join("; ") : "ok";
  }
  document.body.dataset.renderMs = String(Math.round(performance.now() - t0));
  document.body.dataset.ready = String(plots.length);
})();
