/* The report's interactive charts: each .chart holds its data as JSON and a static image.
   With uPlot: drag to zoom, wheel to zoom, shift+drag or the arrow buttons to pan,
   double-click to reset, hover for values, click a legend entry to toggle its series. */
(function () {
  "use strict";
  if (typeof uPlot === "undefined") { return; }
  document.documentElement.classList.add("charts");

  function hexAlpha(color, alpha) {
    var a = Math.round(Math.max(0, Math.min(1, alpha)) * 255).toString(16);
    return color + (a.length < 2 ? "0" + a : a);
  }

  function fmt(v) {
    if (v == null || !isFinite(v)) { return "—"; }
    var a = Math.abs(v);
    return (a !== 0 && (a < 1e-3 || a >= 1e5)) ? v.toExponential(3) : String(+v.toPrecision(5));
  }

  function overlays(info) {
    return function (u) {
      var ctx = u.ctx, top = u.bbox.top, h = u.bbox.height;
      ctx.save();
      info.spans.forEach(function (s) {
        var a = u.valToPos(s.x0, "x", true), b = u.valToPos(s.x1, "x", true);
        ctx.fillStyle = hexAlpha(s.color, s.alpha);
        ctx.fillRect(Math.min(a, b), top, Math.max(Math.abs(b - a), 1), h);
      });
      ctx.setLineDash([4, 3]);
      info.vlines.forEach(function (v) {
        var x = u.valToPos(v.x, "x", true);
        ctx.strokeStyle = v.color; ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + h); ctx.stroke();
      });
      info.hlines.forEach(function (v) {
        var y = u.valToPos(v.y, "y", true);
        ctx.strokeStyle = v.color; ctx.beginPath(); ctx.moveTo(u.bbox.left, y);
        ctx.lineTo(u.bbox.left + u.bbox.width, y); ctx.stroke();
      });
      ctx.restore();
    };
  }

  function panel(root, p, width) {
    var info = p.info, tables = [], series = [{label: info.xlabel || "step", value: function (u, v) { return fmt(v); }}];
    p.series.forEach(function (s) {
      tables.push([s.x, s.y]);
      series.push({label: s.meta.label || "series " + series.length, stroke: hexAlpha(s.meta.color, s.meta.alpha),
                   width: s.meta.width, dash: s.meta.dash ? [5, 4] : undefined,
                   points: {show: s.meta.points}, paths: s.meta.points ? function () { return null; } : undefined,
                   spanGaps: true, value: function (u, v) { return fmt(v); }});
    });
    var bands = [];
    p.bands.forEach(function (b) {
      tables.push([b.x, b.hi]); tables.push([b.x, b.lo]);
      var name = b.meta.label || "range";
      var hi = series.length;
      series.push({label: name + " (high)", stroke: hexAlpha(b.meta.color, 0.35), width: 0.5, spanGaps: true,
                   value: function (u, v) { return fmt(v); }});
      series.push({label: name + " (low)", stroke: hexAlpha(b.meta.color, 0.35), width: 0.5, spanGaps: true,
                   value: function (u, v) { return fmt(v); }});
      bands.push({series: [hi, hi + 1], fill: hexAlpha(b.meta.color, Math.max(b.meta.alpha, 0.15))});
    });
    if (!tables.length) { return false; }
    var data = tables.length === 1 ? tables[0] : uPlot.join(tables);
    var box = document.createElement("div");
    box.className = "chart-panel";
    root.appendChild(box);
    var xr = info.xlim, yr = info.ylim;
    var u = new uPlot({
      title: info.title, width: width, height: 230, series: series, bands: bands,
      scales: {x: {time: false, distr: info.xlog ? 3 : 1},
               y: {distr: info.ylog ? 3 : 1, range: info.ylog ? undefined : function (u, lo, hi) {
                 var pad = Math.abs(lo) * 0.1 || 1; return lo === hi ? [lo - pad, hi + pad] : [lo, hi]; }}},
      axes: [{label: info.xlabel}, {label: info.ylabel, size: 60, values: function (u, vals) { return vals.map(fmt); }}],
      cursor: {drag: {x: true, y: false}},
      hooks: {drawClear: [overlays(info)], ready: [function (u) { wheelAndPan(u); }]},
      legend: {live: true}
    }, data, box);
    box.uplot = u;
    return true;
  }

  function wheelAndPan(u) {
    var over = u.over;
    function range() { return [u.scales.x.min, u.scales.x.max]; }
    over.addEventListener("wheel", function (e) {
      e.preventDefault();
      var r = range(), left = u.posToVal(e.offsetX, "x"), f = e.deltaY < 0 ? 0.75 : 1 / 0.75;
      u.setScale("x", {min: left - (left - r[0]) * f, max: left + (r[1] - left) * f});
    }, {passive: false});
    over.addEventListener("mousedown", function (e) {
      if (!e.shiftKey) { return; }
      e.stopPropagation(); e.preventDefault();
      var x0 = e.clientX, r = range(), per = (r[1] - r[0]) / over.clientWidth;
      function move(m) { var d = (m.clientX - x0) * per; u.setScale("x", {min: r[0] - d, max: r[1] - d}); }
      function up() { document.removeEventListener("mousemove", move); document.removeEventListener("mouseup", up); }
      document.addEventListener("mousemove", move); document.addEventListener("mouseup", up);
    }, true);
  }

  Array.prototype.forEach.call(document.querySelectorAll(".chart"), function (fig) {
    var node = fig.querySelector("script.chart-data"), live = fig.querySelector(".chart-live");
    if (!node || !live) { return; }
    try {
      var panels = JSON.parse(node.textContent), width = Math.max(320, (fig.clientWidth || 760) - 8);
      var drawn = 0;
      panels.forEach(function (p) { if (!p.info.static && panel(live, p, width)) { drawn += 1; } });
      if (drawn && drawn === panels.length) { fig.classList.add("live"); live.hidden = false; }
      else { live.textContent = ""; }
    } catch (err) {
      live.textContent = "";
      if (window.console) { console.warn("chart left static: " + err); }
    }
  });
})();
