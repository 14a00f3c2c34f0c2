/* The page script of `scaleout report`: renders window.REPORT (tables and
 * Chart.js configurations written by src/cli/report_out.c) into the page.
 * When done it sets data-charts / data-lanes / data-errors on <body> and the title, which
 * the headless-browser test (tests/report_cli.sh) reads. */
"use strict";
(function () {
  var errors = [];
  var errBox = document.getElementById("report-errors");
  function recordError(msg) {
    errors.push(String(msg));
    errBox.textContent = errors.join("\n");
    document.body.setAttribute("data-errors", String(errors.length));
  }
  window.addEventListener("error", function (e) { recordError(e.message || e); });

  var palette = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1"];

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function renderTable(t) {
    var wrap = el("div", undefined, "table-wrap");
    var table = el("table");
    table.appendChild(el("caption", t.caption));
    var head = el("tr");
    t.columns.forEach(function (c) { head.appendChild(el("th", c)); });
    table.appendChild(el("thead")).appendChild(head);
    var body = el("tbody");
    t.rows.forEach(function (r) {
      var tr = el("tr");
      r.forEach(function (c, i) { tr.appendChild(el("td", c, i > 0 && /^[-+0-9.<=]/.test(c) ? "num" : "")); });
      body.appendChild(tr);
    });
    table.appendChild(body);
    wrap.appendChild(table);
    return wrap;
  }

  /* The pipeline schedule's lanes (report_lanes.c): each floating bar
   * carries its name ("F3", "B3c1"), written inside the bar when it fits
   * and shown in the tooltip with the bar's times. */
  var barLabels = {
    id: "barLabels",
    afterDatasetsDraw: function (chart) {
      var ctx = chart.ctx;
      ctx.save();
      ctx.font = "11px sans-serif";
      ctx.fillStyle = "#fff";
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      chart.data.datasets.forEach(function (d, i) {
        var meta = chart.getDatasetMeta(i);
        if (meta.hidden) return;
        meta.data.forEach(function (bar, j) {
          var name = d.data[j].name, width = Math.abs(bar.x - bar.base);
          if (name && ctx.measureText(name).width + 4 <= width) ctx.fillText(name, (bar.x + bar.base) / 2, bar.y);
        });
      });
      ctx.restore();
    }
  };

  function laneTooltip(item) {
    var r = item.raw;
    return (r.name || item.dataset.label) + ": " + r.x[0].toFixed(3) + " to " + r.x[1].toFixed(3) + " ms";
  }

  function renderChart(cfg, parent) {
    var lanes = cfg.options.plugins.barLabels;
    var box = el("div", undefined, lanes ? "chart wide" : "chart");
    var n = cfg.data.labels.length;
    if (lanes) {
      box.style.height = (110 + 48 * n) + "px";
      cfg.plugins = [barLabels];
      cfg.options.plugins.tooltip = { callbacks: { label: laneTooltip } };
      cfg.data.datasets.forEach(function (d) { d.barPercentage = 0.9; d.categoryPercentage = 0.9; d.borderWidth = 1; });
    } else if (cfg.options.indexAxis === "y") {
      box.style.height = Math.max(220, 80 + 20 * n) + "px";
      cfg.options.scales.y.ticks = { autoSkip: false }; /* every layer gets its label */
    }
    var canvas = el("canvas");
    box.appendChild(canvas);
    parent.appendChild(box);
    cfg.data.datasets.forEach(function (d, i) {
      d.backgroundColor = palette[i % palette.length];
      d.borderColor = lanes ? "#fff" : palette[i % palette.length]; /* neighbouring passes stay apart */
    });
    cfg.options.animation = false; /* screenshots and tests see the final picture */
    cfg.options.responsive = true;
    cfg.options.maintainAspectRatio = false;
    return new Chart(canvas, cfg);
  }

  var root = document.getElementById("report");
  var R = window.REPORT;
  document.getElementById("report-title").textContent = R.title;
  var charts = 0, lanes = 0;
  R.sections.forEach(function (s) {
    var sec = el("section");
    sec.appendChild(el("h2", s.title));
    if (s.note) sec.appendChild(el("p", s.note, "note"));
    var grid = el("div", undefined, "charts");
    s.charts.forEach(function (c) {
      try { renderChart(c, grid); charts++; if (c.options.plugins.barLabels) lanes++; } catch (e) { recordError("chart '" + c.options.plugins.title.text + "': " + e); }
    });
    if (s.charts.length) sec.appendChild(grid);
    s.tables.forEach(function (t) { sec.appendChild(renderTable(t)); });
    root.appendChild(sec);
  });
  document.body.setAttribute("data-charts", String(charts));
  document.body.setAttribute("data-lanes", String(lanes)); /* pipeline schedules drawn */
  if (!document.body.hasAttribute("data-errors")) document.body.setAttribute("data-errors", String(errors.length));
  document.title = R.title + " [" + charts + " charts]";
})();
