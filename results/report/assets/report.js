// isrbench report.html charts: draws every chart of the page's data block
// (#isrbench-data, see results/report.Chart) as inline SVG, with a legend, a hover read-out
// and the chart's data as a table under it. No dependencies, no network.
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  // Okabe-Ito colours (colour-blind safe; yellow left out: too light on white), with dash
  // patterns and markers so that series stay apart in greyscale too.
  var COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"];
  var DASHES = ["", "8 3", "2 3", "10 3 2 3", "5 5", "14 3 3 3 3 3"];
  var MARKERS = ["circle", "square", "triangle", "diamond", "cross", "triangle-down"];
  // ISR lanes: a sequential ramp (light = full ISR), readable in greyscale.
  var LANE = ["#f0f4f8", "#9ecae1", "#4a8cc4", "#1d4f8a", "#0b2545"];

  function styleOf(i) {
    return { color: COLORS[i % COLORS.length], dash: DASHES[i % DASHES.length], marker: MARKERS[i % MARKERS.length] };
  }

  function el(name, attrs, parent) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) if (attrs[k] !== undefined && attrs[k] !== null) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function hel(name, attrs, parent, text) {
    var e = document.createElement(name);
    for (var k in attrs) if (attrs[k] !== undefined) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  // ---- number formatting ----
  function sig(v, n) {
    if (v === 0) return "0";
    var a = Math.abs(v);
    if (a >= Math.pow(10, n)) return String(Math.round(v));
    var s = v.toPrecision(n);
    if (s.indexOf("e") < 0 && s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    return s;
  }
  function fmtUs(v) {
    var a = Math.abs(v);
    if (a < 1000) return sig(v, 3) + " µs";
    if (a < 1e6) return sig(v / 1e3, 3) + " ms";
    return sig(v / 1e6, 4) + " s";
  }
  function fmtSI(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return sig(v / 1e9, 3) + "G";
    if (a >= 1e6) return sig(v / 1e6, 3) + "M";
    if (a >= 1e4) return sig(v / 1e3, 3) + "k";
    return sig(v, 4);
  }
  function fmtPct(p) {
    if (p <= 0) return "0%";
    var digits = Math.max(0, Math.min(8, Math.ceil(-Math.log10(100 - p + 1e-12)) + 1));
    var s = p.toFixed(digits);
    if (s.indexOf(".") >= 0) s = s.replace(/0+$/, "").replace(/\.$/, "");
    return s + "%";
  }
  function fmtVal(ax, v) {
    if (v === null || v === undefined || isNaN(v)) return "";
    if (ax.unit === "µs") return fmtUs(v);
    if (ax.unit === "s") return sig(v, 4) + " s";
    if (ax.scale === "percentile") return fmtPct(v);
    return fmtSI(v);
  }

  // ---- scales: each maps a data value to [0,1] of its axis ----
  function pctT(p) { return Math.log10(1 / (1 - Math.min(p, 99.9999999999) / 100)); }
  function niceStep(span, n) {
    var raw = span / Math.max(1, n), mag = Math.pow(10, Math.floor(Math.log10(raw))), r = raw / mag;
    return (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10) * mag;
  }
  function makeScale(ax, values, extra) {
    var s = { ax: ax, ticks: [] };
    var vs = values.filter(function (v) { return v !== null && isFinite(v); });
    if (ax.scale === "category") {
      var n = (ax.categories || []).length;
      s.t = function (v) { return (v + 0.5) / Math.max(1, n); };
      s.inv = function (f) { return Math.round(f * n - 0.5); };
      for (var i = 0; i < n; i++) s.ticks.push({ v: i, label: ax.categories[i] });
      return s;
    }
    if (ax.scale === "percentile") {
      var hi = 1;
      vs.forEach(function (v) { hi = Math.max(hi, pctT(v)); });
      hi = Math.max(1, Math.ceil(hi + 0.15));
      s.t = function (v) { return pctT(Math.max(0, v)) / hi; };
      s.inv = function (f) { return 100 * (1 - 1 / Math.pow(10, f * hi)); };
      for (var k = 0; k <= hi; k++) s.ticks.push({ v: 100 * (1 - Math.pow(10, -k)), label: k === 0 ? "0%" : fmtPct(100 * (1 - Math.pow(10, -k))) });
      return s;
    }
    if (ax.scale === "log") {
      var floor = ax.min !== undefined && ax.min !== null ? ax.min : 0;
      var pos = vs.filter(function (v) { return v > 0 && v >= floor; });
      var lo = pos.length ? Math.min.apply(null, pos) : Math.max(floor, 1);
      var top = pos.length ? Math.max.apply(null, pos) : lo * 10;
      var l0 = Math.floor(Math.log10(lo)), l1 = Math.ceil(Math.log10(top));
      if (floor > 0) l0 = Math.max(l0, Math.floor(Math.log10(floor)));
      if (l1 <= l0) l1 = l0 + 1;
      s.lo = Math.pow(10, l0);
      s.t = function (v) { return (Math.log10(Math.max(v, s.lo)) - l0) / (l1 - l0); };
      s.inv = function (f) { return Math.pow(10, l0 + f * (l1 - l0)); };
      var sub = l1 - l0 <= 2 ? [1, 2, 5] : [1];
      for (var d = l0; d <= l1; d++) sub.forEach(function (m) {
        var v = m * Math.pow(10, d);
        if (v <= Math.pow(10, l1) * 1.0001) s.ticks.push({ v: v, label: fmtVal(ax, v) });
      });
      return s;
    }
    var mn = vs.length ? Math.min.apply(null, vs) : 0, mx = vs.length ? Math.max.apply(null, vs) : 1;
    (extra || []).forEach(function (v) { mn = Math.min(mn, v); mx = Math.max(mx, v); });
    if (ax.min !== undefined && ax.min !== null) mn = Math.min(ax.min, mn);
    if (ax.max !== undefined && ax.max !== null) mx = Math.max(ax.max, mx);
    var fixedMax = ax.max !== undefined && ax.max !== null && ax.scale === "linear" && ax.unit === "s";
    if (mx === mn) mx = mn + 1;
    var ints = vs.every(function (v) { return v === Math.round(v); });
    // headroom above the highest value, so that a line at the top stays off the frame
    var top = fixedMax ? mx : mx + (mx - mn) * 0.06;
    var step = niceStep(top - mn, 6);
    if (ints && step < 1) step = 1;
    var a = Math.floor(mn / step) * step, b = fixedMax ? ax.max : Math.ceil(top / step) * step;
    if (ax.min !== undefined && ax.min !== null) a = Math.max(a, ax.min);
    s.t = function (v) { return (v - a) / (b - a); };
    s.inv = function (f) { return a + f * (b - a); };
    for (var v = a; v <= b + step / 1e6; v += step) s.ticks.push({ v: v, label: fmtVal(ax, Math.round(v / step) * step) });
    return s;
  }

  // ---- markers ----
  function marker(g, kind, x, y, r, color, title) {
    var m;
    switch (kind) {
      case "square": m = el("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r }, g); break;
      case "triangle": m = el("path", { d: "M" + x + "," + (y - r * 1.2) + "L" + (x + r * 1.1) + "," + (y + r * 0.8) + "L" + (x - r * 1.1) + "," + (y + r * 0.8) + "Z" }, g); break;
      case "triangle-down": m = el("path", { d: "M" + x + "," + (y + r * 1.2) + "L" + (x + r * 1.1) + "," + (y - r * 0.8) + "L" + (x - r * 1.1) + "," + (y - r * 0.8) + "Z" }, g); break;
      case "diamond": m = el("path", { d: "M" + x + "," + (y - r * 1.3) + "L" + (x + r * 1.3) + "," + y + "L" + x + "," + (y + r * 1.3) + "L" + (x - r * 1.3) + "," + y + "Z" }, g); break;
      case "cross": m = el("path", { d: "M" + (x - r) + "," + (y - r) + "L" + (x + r) + "," + (y + r) + "M" + (x + r) + "," + (y - r) + "L" + (x - r) + "," + (y + r), "stroke-width": 2 }, g); break;
      default: m = el("circle", { cx: x, cy: y, r: r }, g);
    }
    if (kind === "cross") m.setAttribute("stroke", color);
    else { m.setAttribute("fill", color); m.setAttribute("stroke", "#fff"); m.setAttribute("stroke-width", 0.8); }
    m.setAttribute("class", "marker");
    if (title) el("title", {}, m).textContent = title;
    return m;
  }

  function swatch(st) {
    var s = el("svg", { width: 34, height: 12, "aria-hidden": "true", "class": "swatch" });
    el("line", { x1: 1, y1: 6, x2: 33, y2: 6, stroke: st.color, "stroke-width": 2, "stroke-dasharray": st.dash || null }, s);
    marker(s, st.marker, 17, 6, 3.2, st.color);
    return s;
  }

  function laneColor(v, full) {
    var missing = Math.max(0, Math.round(full - v));
    return LANE[Math.min(missing, LANE.length - 1)];
  }

  // ---- one chart ----
  function render(fig, c) {
    var plot = fig.querySelector(".plot");
    plot.textContent = "";
    var W = Math.max(320, Math.floor(plot.clientWidth || fig.clientWidth || 760));
    var lanes = c.kind === "lanes";
    var H = lanes ? Math.max(90, 24 * (c.y.categories || []).length + 60) : (fig.classList.contains("short") ? 190 : c.kind === "points" ? 230 : 300);
    var M = { l: lanes ? 46 : 66, r: 14, t: (c.bands && c.bands.length) ? 22 : 10, b: 42 };
    var PW = W - M.l - M.r, PH = H - M.t - M.b;
    var series = c.series || [];

    var xs = [], ys = [], xExtra = [];
    series.forEach(function (s) {
      xs = xs.concat(s.x);
      ys = ys.concat(s.y);
      if (s.lo) ys = ys.concat(s.lo);
      if (s.hi) ys = ys.concat(s.hi);
    });
    (c.bands || []).forEach(function (b) { xExtra.push(b.from, b.to); });
    (c.marks || []).forEach(function (m) { xExtra.push(m.at); });
    var X = makeScale(c.x, xs, xExtra);
    var Y = lanes ? makeScale(c.y, []) : makeScale(c.y, ys);
    function px(v) { return M.l + X.t(v) * PW; }
    function py(v) { return M.t + (1 - Y.t(v)) * PH; }

    var legend = hel("div", { "class": "legend", role: "group", "aria-label": "series of " + c.title }, plot);
    var titleId = fig.id + "-title", descId = fig.id + "-desc";
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img", "aria-labelledby": titleId, "aria-describedby": descId, "class": "chart-svg" }, plot);
    el("title", { id: titleId }, svg).textContent = c.title;
    var names = series.map(function (s) { return s.name; });
    var desc = series.length + " series (" + names.join(", ") + ")" +
      ((c.bands || []).length ? "; shaded: " + c.bands.map(function (b) { return b.label + " " + b.from + "–" + b.to + " s"; }).join(", ") : "") +
      ". The data table under the chart lists the values.";
    el("desc", { id: descId }, svg).textContent = desc;
    var defs = el("defs", {}, svg);
    var clipId = fig.id + "-clip";
    el("rect", { x: M.l, y: M.t, width: PW, height: PH }, el("clipPath", { id: clipId }, defs));
    var hatch = el("pattern", { id: fig.id + "-hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, defs);
    el("rect", { width: 6, height: 6, fill: "#f3e3c3" }, hatch);
    el("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#b08a4a", "stroke-width": 1.4 }, hatch);

    // grid and axes
    var grid = el("g", { "class": "grid" }, svg);
    if (!lanes) Y.ticks.forEach(function (t) {
      var y = py(t.v);
      el("line", { x1: M.l, x2: M.l + PW, y1: y, y2: y }, grid);
      el("text", { x: M.l - 6, y: y + 4, "text-anchor": "end", "class": "tick" }, svg).textContent = t.label;
    });
    var lastX = -1e9;
    X.ticks.forEach(function (t) {
      var x = px(t.v);
      if (c.x.scale !== "category") el("line", { x1: x, x2: x, y1: M.t, y2: M.t + PH }, grid);
      if (x - lastX < 34 && c.x.scale !== "category") return;
      lastX = x;
      var anchor = c.x.scale !== "category" && x > M.l + PW - 24 ? "end" : "middle";
      var tx = el("text", { x: anchor === "end" ? M.l + PW + M.r - 2 : x, y: M.t + PH + 16, "text-anchor": anchor, "class": "tick" }, svg);
      var lbl = String(t.label);
      var room = c.x.scale === "category" ? PW / Math.max(1, X.ticks.length) : 80;
      if (lbl.length * 6.5 > room) { tx.appendChild(document.createElementNS(NS, "title")).textContent = lbl; lbl = lbl.slice(0, Math.max(3, Math.floor(room / 6.5) - 1)) + "…"; }
      tx.appendChild(document.createTextNode(lbl));
    });
    el("rect", { x: M.l, y: M.t, width: PW, height: PH, fill: "none", stroke: "#999" }, svg);
    el("text", { x: M.l + PW / 2, y: H - 6, "text-anchor": "middle", "class": "axis-label" }, svg).textContent = c.x.label + (c.x.unit === "s" ? " (s)" : "");
    if (!lanes) el("text", { x: 12, y: M.t + PH / 2, transform: "rotate(-90 12 " + (M.t + PH / 2) + ")", "text-anchor": "middle", "class": "axis-label" }, svg).textContent = c.y.label;

    var area = el("g", { "clip-path": "url(#" + clipId + ")" }, svg);
    var bandLayer = el("g", { "clip-path": "url(#" + clipId + ")" }, svg);
    // fault windows under the lines; over the lanes, which are opaque
    if (!lanes) svg.insertBefore(bandLayer, area);
    // shaded fault windows; a label that would overlap the previous one is left to the
    // window's tooltip and the data table
    var labelEnd = -1e9, hiddenLabels = 0;
    (c.bands || []).forEach(function (b) {
      var x0 = px(b.from), x1 = px(b.to);
      var r = el("rect", { x: x0, y: M.t, width: Math.max(1, x1 - x0), height: PH, fill: "url(#" + fig.id + "-hatch)", opacity: lanes ? 0.35 : 0.55, "class": "band" }, bandLayer);
      el("title", {}, r).textContent = b.label + ": " + b.from + " s – " + b.to + " s";
      var text = "⟦ " + b.label + " " + sig(b.from, 4) + "–" + sig(b.to, 4) + " s";
      var lx = Math.min(x0 + 2, M.l + PW - 2), w = text.length * 6;
      if (lx < labelEnd + 6 || lx + w > W) { hiddenLabels++; return; }
      labelEnd = lx + w;
      el("text", { x: lx, y: M.t - 6, "class": "band-label" }, svg).textContent = text;
    });

    var groups = [];
    if (lanes) {
      var full = c.y.max || 1;
      var lh = PH / Math.max(1, series.length);
      series.forEach(function (s, i) {
        var g = el("g", { "class": "series", "data-series": s.name }, area);
        var y0 = M.t + i * lh;
        for (var j = 0; j + 1 < s.x.length; j++) {
          var x0 = px(s.x[j]), x1 = px(s.x[j + 1]);
          var r = el("rect", { x: x0, y: y0 + 1, width: Math.max(0.8, x1 - x0), height: Math.max(1, lh - 2), fill: laneColor(s.y[j], full), "class": "seg" }, g);
          el("title", {}, r).textContent = s.name + ": ISR " + s.y[j] + " from " + s.x[j] + " s to " + s.x[j + 1] + " s";
          if (x1 - x0 > 16 && lh > 11) el("text", { x: (x0 + x1) / 2, y: y0 + lh / 2 + 4, "text-anchor": "middle", "class": "lane-text", fill: s.y[j] < full - 1.5 ? "#fff" : "#222" }, g).textContent = s.y[j];
        }
        el("text", { x: M.l - 6, y: y0 + lh / 2 + 4, "text-anchor": "end", "class": "tick" }, svg).textContent = s.name;
        groups.push(g);
      });
      for (var v = full; v >= 0 && v >= full - 4; v--) {
        var item = hel("span", { "class": "lane-key" }, legend);
        var sw = el("svg", { width: 18, height: 12, "aria-hidden": "true" }, item);
        el("rect", { x: 1, y: 1, width: 16, height: 10, fill: laneColor(v, full), stroke: "#777" }, sw);
        item.appendChild(document.createTextNode(" ISR " + v + (v === full ? " (full)" : "")));
      }
    } else {
      series.forEach(function (s, i) {
        var st = styleOf(s.style);
        var g = el("g", { "class": "series", "data-series": s.name }, area);
        groups.push(g);
        if (!s.x.length) return;
        if (c.kind === "points") {
          var ns = series.length, band = PW / Math.max(1, (c.x.categories || []).length);
          var dx = (i - (ns - 1) / 2) * Math.min(14, band / (ns + 1));
          var d = "";
          for (var j = 0; j < s.x.length; j++) {
            var x = px(s.x[j]) + dx;
            d += (j ? "L" : "M") + x + "," + py(s.y[j]);
            el("line", { x1: x, x2: x, y1: py(s.lo[j]), y2: py(s.hi[j]), stroke: st.color, "stroke-width": 2, "class": "spread" }, g);
            el("line", { x1: x - 4, x2: x + 4, y1: py(s.lo[j]), y2: py(s.lo[j]), stroke: st.color, "stroke-width": 1.5 }, g);
            el("line", { x1: x - 4, x2: x + 4, y1: py(s.hi[j]), y2: py(s.hi[j]), stroke: st.color, "stroke-width": 1.5 }, g);
          }
          if (s.x.length > 1) el("path", { d: d, fill: "none", stroke: st.color, "stroke-width": 1.2, "stroke-dasharray": st.dash || null, opacity: 0.8, "class": "line" }, g);
          for (var k = 0; k < s.x.length; k++) {
            marker(g, st.marker, px(s.x[k]) + dx, py(s.y[k]), 4.5, st.color,
              s.name + " @ " + c.x.categories[s.x[k]] + ": median " + fmtVal(c.y, s.y[k]) + " (" + fmtVal(c.y, s.lo[k]) + " … " + fmtVal(c.y, s.hi[k]) + ", n=" + s.n[k] + ")");
          }
          return;
        }
        var path = "";
        for (var q = 0; q < s.x.length; q++) {
          var xx = px(s.x[q]), yy = py(s.y[q]);
          if (q === 0) path = "M" + xx.toFixed(1) + "," + yy.toFixed(1);
          else if (s.step) path += "H" + xx.toFixed(1) + "V" + yy.toFixed(1);
          else path += "L" + xx.toFixed(1) + "," + yy.toFixed(1);
        }
        if (s.x.length === 1) path += "h1";
        el("path", { d: path, fill: "none", stroke: st.color, "stroke-width": 1.8, "stroke-dasharray": st.dash || null, "stroke-linejoin": "round", "class": "line" }, g);
        // markers: about one per 70 px, staggered by series so that they do not coincide
        var step = Math.max(1, Math.round(s.x.length / Math.max(2, PW / 70)));
        var off = Math.floor(step * ((s.style % 4) / 4));
        for (var m = off; m < s.x.length; m += step) {
          marker(g, st.marker, px(s.x[m]), py(s.y[m]), 3.4, st.color, s.name + ": " + fmtVal(c.x, s.x[m]) + " → " + fmtVal(c.y, s.y[m]));
        }
      });
      series.forEach(function (s, i) {
        var b = hel("button", { type: "button", "aria-pressed": "true", title: "show or hide " + s.name }, legend);
        b.appendChild(swatch(styleOf(s.style)));
        b.appendChild(document.createTextNode(s.name));
        b.addEventListener("click", function () {
          var on = b.getAttribute("aria-pressed") !== "true";
          b.setAttribute("aria-pressed", on ? "true" : "false");
          groups[i].style.display = on ? "" : "none";
        });
      });
    }
    // instants: faults as dashed lines, ISR events as small triangles at the bottom
    (c.marks || []).forEach(function (mk) {
      var x = px(mk.at);
      if (mk.kind === "fault") {
        var ln = el("line", { x1: x, x2: x, y1: M.t, y2: M.t + PH, stroke: "#222", "stroke-width": 1.5, "stroke-dasharray": "4 3", "class": "fault-mark" }, svg);
        el("title", {}, ln).textContent = mk.label + " at " + mk.at + " s";
        el("text", { x: x + 3, y: M.t + 12, "class": "band-label" }, svg).textContent = mk.label;
        return;
      }
      var y = M.t + PH - 2;
      var col = mk.kind === "shrink" ? "#D55E00" : mk.kind === "expand" ? "#009E73" : "#CC79A7";
      var shape = mk.kind === "shrink" ? "triangle-down" : mk.kind === "expand" ? "triangle" : "diamond";
      var m = marker(svg, shape, x, y - 4, 4, col, mk.label + " at " + mk.at + " s");
      m.setAttribute("class", "isr-mark " + mk.kind);
    });
    if ((c.marks || []).some(function (mk) { return mk.kind !== "fault"; })) {
      var keyItem = hel("span", { "class": "lane-key" }, legend);
      var ks = el("svg", { width: 44, height: 12, "aria-hidden": "true" }, keyItem);
      marker(ks, "triangle-down", 8, 6, 4, "#D55E00");
      marker(ks, "triangle", 22, 6, 4, "#009E73");
      marker(ks, "diamond", 36, 6, 4, "#CC79A7");
      keyItem.appendChild(document.createTextNode(" ISR shrink / expand / change"));
    }
    if ((c.bands || []).length) {
      var bk = hel("span", { "class": "lane-key" }, legend);
      var bs = el("svg", { width: 18, height: 12, "aria-hidden": "true" }, bk);
      el("rect", { x: 1, y: 1, width: 16, height: 10, fill: "#e9d3a8", stroke: "#b08a4a" }, bs);
      bk.appendChild(document.createTextNode(hiddenLabels ? " fault windows (" + c.bands.length + "; " + hiddenLabels + " labels left to the tooltips and the data table)" : " fault window"));
    }
    hover(fig, svg, c, X, Y, M, PW, PH, px, py, groups);
    table(fig, c);
  }

  // ---- hover read-out ----
  function nearest(xs, v) {
    var lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (xs[mid] < v) lo = mid; else hi = mid; }
    return Math.abs(xs[lo] - v) <= Math.abs(xs[hi] - v) ? lo : hi;
  }
  function hover(fig, svg, c, X, Y, M, PW, PH, px, py, groups) {
    if (c.kind === "lanes") return;
    var tip = fig.querySelector(".tip") || hel("div", { "class": "tip", role: "status" }, fig);
    var guide = el("line", { y1: M.t, y2: M.t + PH, stroke: "#444", "stroke-width": 1, visibility: "hidden" }, svg);
    var cap = el("rect", { x: M.l, y: M.t, width: PW, height: PH, fill: "transparent", "class": "hover" }, svg);
    cap.addEventListener("mousemove", function (ev) {
      var r = svg.getBoundingClientRect();
      var fx = ((ev.clientX - r.left) * (svg.viewBox.baseVal.width / r.width) - M.l) / PW;
      var xv = X.inv(Math.max(0, Math.min(1, fx)));
      var lines = [], gx = null;
      c.series.forEach(function (s, i) {
        if (groups[i] && groups[i].style.display === "none") return;
        var j = nearest(s.x, xv);
        if (j < 0) return;
        if (gx === null) gx = s.x[j];
        var v = fmtVal(c.y, s.y[j]);
        if (s.lo) v += " (" + fmtVal(c.y, s.lo[j]) + " … " + fmtVal(c.y, s.hi[j]) + ")";
        lines.push([s.name, c.kind === "points" ? c.x.categories[s.x[j]] : fmtVal(c.x, s.x[j]), v]);
      });
      if (!lines.length) return;
      guide.setAttribute("x1", px(gx)); guide.setAttribute("x2", px(gx)); guide.setAttribute("visibility", "visible");
      tip.textContent = "";
      lines.forEach(function (l) { hel("div", {}, tip, l[0] + " @ " + l[1] + ": " + l[2]); });
      tip.style.display = "block";
      var fr = fig.getBoundingClientRect();
      var left = ev.clientX - fr.left + 14;
      if (left + tip.offsetWidth > fr.width) left = ev.clientX - fr.left - tip.offsetWidth - 14;
      tip.style.left = Math.max(0, left) + "px";
      tip.style.top = (ev.clientY - fr.top + 12) + "px";
    });
    cap.addEventListener("mouseleave", function () { tip.style.display = "none"; guide.setAttribute("visibility", "hidden"); });
  }

  // ---- data table (the chart's text alternative), built when first opened ----
  function table(fig, c) {
    var det = fig.querySelector("details.data");
    if (!det) return;
    var built = false;
    function build() {
      if (built) return;
      built = true;
      var t = hel("table", {}, det);
      hel("caption", {}, t, c.title);
      var head = hel("tr", {}, hel("thead", {}, t));
      var body = hel("tbody", {}, t);
      function row(cells) { var tr = hel("tr", {}, body); cells.forEach(function (x, i) { hel(i ? "td" : "th", i ? {} : { scope: "row" }, tr, x); }); }
      if (c.kind === "points") {
        ["" + c.x.label, "series", "n", "median", "lowest", "highest"].forEach(function (h) { hel("th", { scope: "col" }, head, h); });
        c.series.forEach(function (s) {
          for (var j = 0; j < s.x.length; j++) row([c.x.categories[s.x[j]], s.name, String(s.n[j]), fmtVal(c.y, s.y[j]), fmtVal(c.y, s.lo[j]), fmtVal(c.y, s.hi[j])]);
        });
      } else if (c.kind === "lanes") {
        ["partition", "from (s)", "to (s)", "ISR size"].forEach(function (h) { hel("th", { scope: "col" }, head, h); });
        c.series.forEach(function (s) {
          for (var j = 0; j + 1 < s.x.length; j++) row([s.name, String(s.x[j]), String(s.x[j + 1]), String(s.y[j])]);
        });
      } else {
        hel("th", { scope: "col" }, head, c.x.label + (c.x.unit === "s" ? " (s)" : ""));
        c.series.forEach(function (s) { hel("th", { scope: "col" }, head, s.name); });
        var keys = {}, xsAll = [];
        c.series.forEach(function (s) { s.x.forEach(function (x) { if (!(x in keys)) { keys[x] = true; xsAll.push(x); } }); });
        xsAll.sort(function (a, b) { return a - b; });
        var idx = c.series.map(function (s) { var m = {}; s.x.forEach(function (x, j) { m[x] = j; }); return m; });
        xsAll.forEach(function (x) {
          row([c.x.scale === "percentile" ? fmtPct(x) : fmtVal(c.x, x)].concat(c.series.map(function (s, i) {
            var j = idx[i][x]; return j === undefined ? "" : fmtVal(c.y, s.y[j]);
          })));
        });
      }
      var extra = [];
      (c.bands || []).forEach(function (b) { extra.push("shaded " + b.label + ": " + b.from + " s – " + b.to + " s"); });
      (c.marks || []).forEach(function (m) { extra.push(m.at + " s: " + m.label); });
      if (extra.length) {
        var ul = hel("ul", { "class": "marks" }, det);
        extra.forEach(function (x) { hel("li", {}, ul, x); });
      }
    }
    det.addEventListener("toggle", function () { if (det.open) build(); });
    if (det.open) build();
    fig.buildTable = build;
  }

  function main() {
    var node = document.getElementById("isrbench-data");
    var data = JSON.parse(node.textContent);
    var done = 0, failed = 0;
    (data.charts || []).forEach(function (c) {
      var fig = document.getElementById("chart-" + c.id);
      if (!fig) { console.error("isrbench report: no figure for chart " + c.id); failed++; return; }
      try { render(fig, c); done++; }
      catch (e) { failed++; console.error("isrbench report: chart " + c.id + ": " + (e && e.stack || e)); fig.querySelector(".plot").textContent = "This chart could not be drawn: " + e; }
    });
    document.body.setAttribute("data-charts-rendered", String(done));
    document.body.setAttribute("data-charts-failed", String(failed));
    window.addEventListener("beforeprint", function () {
      document.querySelectorAll("figure.chart").forEach(function (f) { if (f.buildTable) f.buildTable(); });
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main); else main();
})();
