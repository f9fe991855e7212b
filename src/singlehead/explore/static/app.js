// singlehead explore: the page. Every drawn number is kept in window.__explorer.data
// (machine-readable, read by the browser tests); the server streams one JSON line per event.
"use strict";
const DEFAULTS = window.__DEFAULTS__;
const form = document.getElementById("controls");
// the target's parameters come from the registry (DEFAULTS.target_params)
const PARAMS = ["channel", "student", "T", "d", "kappa", "noise", "lam", "beta", "beta0", "heads", "teacher_heads", "target",
                ...DEFAULTS.target_params, "alpha_min", "alpha_max", "n_alpha", "alpha_at"];
const explorer = window.__explorer = {
  data: null,          // the view being drawn: {view, points, bayes, thresholds, spectrum, decomposition, scaling}
  overlay: null,       // loaded simulation series
  error: null,         // {field, message} of the last refused input, or of a failed computation
  status: "idle",      // idle | running | done | invalid | error
  generation: 0,       // bumped by every change; events of older generations are dropped
  timing: {},          // ms from the change to the first point drawn and to the whole curve drawn
};
const PLOT_CONFIG = {displaylogo: false, responsive: true, showLink: false};
let controller = null;

function params() {
  const out = {};
  for (const name of PARAMS) out[name] = form.elements[name].value.trim();
  return out;
}

// show the controls of the selected target (data-targets lists the targets that take each one)
function showTargetControls() {
  const t = form.elements.target.value;
  for (const el of form.querySelectorAll("[data-targets]")) el.classList.toggle("off", !el.dataset.targets.split(" ").includes(t));
  for (const el of form.querySelectorAll(".needs-d")) el.classList.toggle("off", !DEFAULTS.d_targets.includes(t));
}

function setStatus(text) { document.getElementById("status").textContent = text; }

function showError(field, message) {
  for (const el of form.querySelectorAll(".err")) el.textContent = "";
  for (const el of form.querySelectorAll(".bad")) el.classList.remove("bad");
  if (message === undefined) return;
  const box = form.querySelector(`.err[data-err="${field}"]`) || form.querySelector('.err[data-err=""]');
  box.textContent = message;
  if (form.elements[field]) form.elements[field].classList.add("bad");
}

function layout(title, xaxis, yaxis, extra) {
  return Object.assign({title: {text: title, font: {size: 13}}, margin: {l: 55, r: 20, t: 35, b: 40},
    xaxis: Object.assign({automargin: true}, xaxis), yaxis: Object.assign({automargin: true}, yaxis),
    legend: {font: {size: 10}, orientation: "h", y: -0.25}, uirevision: "keep"}, extra || {});
}

function col(rows, key) { return rows.map((r) => (r ? r[key] : null)); }

function drawErrors() {
  const d = explorer.data; if (!d) return;
  const pts = d.points.filter(Boolean);
  const traces = [];
  if (explorer.previous) {
    traces.push({x: col(explorer.previous, "alpha"), y: col(explorer.previous, "test_error"), mode: "lines",
                 line: {color: "#bbb"}, name: "previous view", hoverinfo: "skip"});
  }
  traces.push({x: col(pts, "alpha"), y: col(pts, "test_error"), mode: "lines+markers", name: "test error",
               line: {color: "#1565c0"}, marker: {size: 4}});
  traces.push({x: col(pts, "alpha"), y: col(pts, "train_error"), mode: "lines+markers", name: "train error",
               line: {color: "#1565c0", dash: "dash"}, marker: {size: 3}});
  const b = d.bayes.filter(Boolean);
  if (b.length) traces.push({x: col(b, "alpha"), y: col(b, "test_error"), mode: "lines", name: "Bayes-optimal",
                             line: {color: "#2e7d32", dash: "dot"}});
  for (const s of (explorer.overlay ? explorer.overlay.series : [])) {
    for (const [q, sym] of [["test_error", "circle-open"], ["train_error", "square-open"]]) {
      if (!s[q + "_mean"]) continue;
      traces.push({x: s.alpha, y: s[q + "_mean"], mode: "markers", name: `sim ${q.split("_")[0]} (${s.label})`,
                   marker: {symbol: sym, size: 8, color: "#d84315"},
                   error_y: {type: "data", array: s[q + "_se"], visible: true, color: "#d84315"}});
    }
  }
  const shapes = [], annotations = [];
  const vline = (x, color, dash, text, y) => {
    if (x === null || x === undefined || !(x > 0)) return;
    shapes.push({type: "line", xref: "x", yref: "paper", x0: x, x1: x, y0: 0, y1: 1, line: {color, dash, width: 1}});
    annotations.push({x: Math.log10(x), xref: "x", yref: "paper", y: y === undefined ? 1 : y, text, showarrow: false, yanchor: "bottom",
                      font: {size: 10, color}});
  };
  if (d.thresholds) {
    vline(d.thresholds.alpha_interp, "#6a1b9a", "dash", "α_interp");
    vline(d.thresholds.alpha_perf, "#ef6c00", "dash", "α_perf", 0.92);
  }
  vline(d.view.alpha_at, "#777", "dot", "spectrum");
  const logy = document.getElementById("logy").checked;
  Plotly.react("plot-errors", traces, layout("error per sequence vs α", {type: "log", title: {text: "α = n/d²"}},
    {type: logy ? "log" : "linear", title: {text: "error"}}, {shapes, annotations}), PLOT_CONFIG);
}

function drawSpectrum() {
  const s = explorer.data && explorer.data.spectrum; if (!s) return;
  const top = Math.max(...s.density.filter(Number.isFinite), 1e-12);
  const traces = [{x: s.grid, y: s.density, mode: "lines", fill: "tozeroy", name: "bulk density", line: {color: "#1565c0"}},
    {x: [0], y: [top], type: "bar", width: [Math.max(...s.grid) / 60], name: `atom at 0: ${s.zero_atom.toFixed(3)}`,
     marker: {color: "#6a1b9a"}, hovertemplate: `zero atom ${s.zero_atom.toFixed(4)}<extra></extra>`}];
  if (s.outliers.length) traces.push({x: col(s.outliers, "position"), y: s.outliers.map(() => top / 2), mode: "markers",
    name: "outliers", marker: {symbol: "triangle-down", size: 10, color: "#d84315"},
    text: s.outliers.map((o) => `mode ${o.mode}, overlap ${o.overlap.toFixed(3)}`)});
  const atom = {x: 0, y: top, xref: "x", yref: "y", text: `zero atom: mass ${s.zero_atom.toFixed(3)}`, showarrow: true,
                ax: 60, ay: -10, font: {size: 10, color: "#6a1b9a"}};
  Plotly.react("plot-spectrum", traces, layout(`learned spectrum${s.of ? " of " + s.of : ""} at α = ${+s.alpha.toPrecision(4)} (rank ${(s.rank_fraction).toFixed(3)})`,
    {title: {text: "eigenvalue of S"}}, {title: {text: "density"}}, {bargap: 0, annotations: [atom]}), PLOT_CONFIG);
}

function drawDecomposition() {
  const c = explorer.data && explorer.data.decomposition;
  if (!c) { Plotly.react("plot-decomp", [], layout("decomposition: factorized students only", {}, {}), PLOT_CONFIG); return; }
  const names = ["e0", "over", "under", "approx", "mismatch"];
  Plotly.react("plot-decomp", [
    {x: names, y: names.map((k) => c.parts[k]), type: "bar", name: "parts", marker: {color: "#1565c0"}},
    {x: ["test error"], y: [c.test_error], type: "bar", name: "SE test error", marker: {color: "#2e7d32"}}],
    layout(`error decomposition at α = ${+c.alpha.toPrecision(4)}`, {}, {title: {text: "test-error units"}},
           {showlegend: false}), PLOT_CONFIG);
}

function drawScaling() {
  const s = explorer.data && explorer.data.scaling; if (!s) return;
  Plotly.react("plot-scaling", [
    {x: s.n, y: s.excess_error, mode: "lines+markers", name: "excess error", line: {color: "#1565c0"}},
    {x: s.n, y: s.local_exponent, mode: "lines+markers", name: "local exponent", yaxis: "y2", line: {color: "#d84315"}}],
    layout("scaling with n", {type: "log", title: {text: "n = αd²"}}, {type: "log", title: {text: "excess error"}},
           {yaxis2: {overlaying: "y", side: "right", title: {text: "−d log E / d log n"}, tickmode: "auto", nticks: 6,
             showgrid: false, automargin: true}, margin: {l: 55, r: 55, t: 35, b: 40}}),
    PLOT_CONFIG);
}

// Events can arrive faster than plotly redraws (cached views): draw each panel at most once a frame.
const DRAW = {errors: drawErrors, spectrum: drawSpectrum, decomposition: drawDecomposition, scaling: drawScaling};
const dirty = new Set();
function schedule(panel) {
  if (!dirty.size) requestAnimationFrame(flush);
  dirty.add(panel);
}
function flush() {
  const panels = [...dirty]; dirty.clear();
  for (const p of panels) DRAW[p]();
  const t = explorer.timing, d = explorer.data;
  if (panels.includes("errors") && d && t.t0 !== undefined) {  // on screen now: time it from the change
    const n = d.points.filter(Boolean).length;
    if (n && t.first_point_ms === undefined) t.first_point_ms = performance.now() - t.t0;
    if (n === d.view.n_alpha && t.curve_ms === undefined) t.curve_ms = performance.now() - t.t0;
  }
}

function handle(ev, gen, t0) {
  const d = explorer.data;
  switch (ev.event) {
    case "view":
      if (d && d.points.length) explorer.previous = d.points.filter(Boolean);
      explorer.data = {view: ev, points: [], bayes: [], thresholds: null, spectrum: null, decomposition: null, scaling: null};
      document.body.classList.toggle("power-law", ev.power_law);
      for (const id of ["errors-note", "spectrum-note", "scaling-note"]) document.getElementById(id).textContent = "";
      // the cost model's warning and what a view with several heads draws
      document.getElementById("errors-note").textContent = [ev.slow, ev.heads].filter(Boolean).join("; ");
      break;
    case "point":
      d.points[ev.i] = ev;
      if (d.points.filter(Boolean).length === d.view.n_alpha) explorer.previous = null;
      schedule("errors");
      setStatus(`state evolution: ${d.points.filter(Boolean).length}/${d.view.n_alpha} points`);
      break;
    case "bayes": d.bayes[ev.i] = ev; schedule("errors"); setStatus(`Bayes-optimal: ${d.bayes.filter(Boolean).length}/${d.view.n_alpha}`); break;
    case "thresholds": d.thresholds = ev; schedule("errors"); break;
    case "spectrum": d.spectrum = ev; schedule("spectrum"); break;
    case "decomposition": d.decomposition = ev; schedule("decomposition"); break;
    case "scaling": d.scaling = ev; schedule("scaling"); break;
    case "panel_error": {
      d.panel_errors = Object.assign(d.panel_errors || {}, {[ev.panel]: ev.message});
      const note = document.getElementById(ev.panel === "bayes" || ev.panel === "thresholds" ? "errors-note" : ev.panel + "-note");
      // appended: the view's note (slow, several heads) stays; one line per distinct message
      const line = `${ev.panel} not available here: ${ev.message}`;
      if (note && !note.textContent.includes(ev.message)) note.textContent = [note.textContent, line].filter(Boolean).join(" ");
      break;
    }
    case "invalid":
      explorer.error = {field: ev.field, message: ev.message}; explorer.status = "invalid";
      showError(ev.field, ev.message); setStatus("invalid input: the plots show the last valid view"); break;
    case "error":
      explorer.error = {field: "", message: ev.message}; explorer.status = "error"; showError("", ev.message);
      setStatus("computation failed"); break;
    case "done":
      flush(); explorer.status = "done"; explorer.timing.done_ms = performance.now() - t0;
      setStatus(`done in ${(explorer.timing.done_ms / 1000).toFixed(1)} s`); break;
  }
}

async function run() {
  const gen = ++explorer.generation;
  if (controller) controller.abort();
  controller = new AbortController();
  explorer.status = "running"; explorer.error = null;
  showError();
  setStatus("computing…");
  const t0 = performance.now();
  explorer.timing = {t0};
  history.replaceState(null, "", "?" + new URLSearchParams(params()));
  let buffer = "";
  try {
    const resp = await fetch("/api/stream?" + new URLSearchParams(params()), {signal: controller.signal});
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const {value, done} = await reader.read();
      if (done || gen !== explorer.generation) break;
      buffer += decoder.decode(value, {stream: true});
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl); buffer = buffer.slice(nl + 1);
        if (line && gen === explorer.generation) handle(JSON.parse(line), gen, t0);
      }
    }
  } catch (err) {
    if (err.name !== "AbortError") { explorer.status = "error"; showError("", String(err)); }
  }
}

let timer = null;
function changed(delay) { clearTimeout(timer); timer = setTimeout(run, delay); }

async function loadFile(file) {
  const text = await file.text();
  const resp = await fetch("/api/overlay?name=" + encodeURIComponent(file.name), {method: "POST", body: text});
  const out = await resp.json();
  if (!resp.ok) { explorer.overlay = null; showError("file", out.error); document.getElementById("overlay-info").textContent = ""; }
  else {
    explorer.overlay = out; showError();
    const c = out.common, keys = Object.keys(c);
    document.getElementById("overlay-info").textContent = `${out.name}: ${out.n_rows} runs in ${out.series.length} series` +
      (keys.length ? ` (${keys.map((k) => `${k}=${c[k]}`).join(", ")})` : "");
  }
  drawErrors();
}

function copy(kind) {
  const d = explorer.data; if (!d) return;
  const text = d.view.code[kind];
  const pre = document.getElementById("code");
  pre.textContent = text; pre.hidden = false; explorer.copied = text;
  if (navigator.clipboard) navigator.clipboard.writeText(text).catch(() => {});
}

function init() {
  // a view can be linked: /?lam=0.1&n_alpha=10 (the address follows the controls)
  const query = new URLSearchParams(location.search);
  for (const name of PARAMS) form.elements[name].value = query.has(name) ? query.get(name) : DEFAULTS[name];
  showTargetControls();
  const lamLog = document.getElementById("lam_log");
  const syncSlider = () => { const v = parseFloat(form.elements.lam.value); if (v > 0) lamLog.value = Math.log10(v); };
  syncSlider();
  lamLog.addEventListener("input", () => { form.elements.lam.value = (10 ** parseFloat(lamLog.value)).toPrecision(3); changed(150); });
  form.addEventListener("input", (e) => { if (e.target.name) { if (e.target.name === "lam") syncSlider(); changed(300); } });
  form.addEventListener("change", (e) => { if (e.target.name === "target") showTargetControls(); if (e.target.name) changed(0); });
  document.getElementById("logy").addEventListener("change", drawErrors);
  document.getElementById("csv").addEventListener("change", (e) => { if (e.target.files[0]) loadFile(e.target.files[0]); });
  document.getElementById("clear-csv").addEventListener("click", () => {
    explorer.overlay = null; document.getElementById("csv").value = ""; document.getElementById("overlay-info").textContent = ""; drawErrors(); });
  document.getElementById("copy-python").addEventListener("click", () => copy("python"));
  document.getElementById("copy-cli").addEventListener("click", () => copy("cli"));
  run();
}
init();
